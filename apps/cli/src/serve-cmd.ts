// `mqd serve`: the aggregator plus a local agent (real MPI reader and MPIR locator) in one
// command, SQLite in the data directory; prints the login URL with its token, like Jupyter.
// `mqd agent-token --host NAME`: prints a node's own token (admins, from the agent secret).
// (`mqd agent` lives in agent-cmd.ts and loads no server code.)

import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { mqdError } from '@mqd/model';
import { normaliseHost } from '@mqd/mpir';
import { configHelp, dropSecretsFromEnv, hostAgentToken, loadConfig } from '@mqd/server';
import { closeWithin, DLL_POLICIES, parseDllPolicy, SHUTDOWN_BOUND_MS, untilSignal } from './cli-common.js';
import { commandArgs } from './command-args.js';
import type { LocalSeams } from './demo-seams.js';
import { serveWithLocalAgent } from './local-serve.js';
import { takeSecret } from './secret-file.js';
import { AGENT_USAGE, type Io, SERVE_USAGE_HEAD } from './usage.js';

/** `mqd serve --help`: the command, then every aggregator setting with its variable. */
export const serveUsage = (): string =>
  `${SERVE_USAGE_HEAD.replace(/ mqd serve --help$/, '')}\n${configHelp()}`;

export async function agentTokenCommand(argv: string[], io: Io): Promise<number> {
  const values = commandArgs(io, AGENT_USAGE, argv, {
    host: { type: 'string' },
    'secret-file': { type: 'string' },
  });
  if (typeof values === 'number') return values;
  const r = takeSecret(io, values['secret-file'], 'MQD_AGENT_SECRET');
  if (typeof r === 'number') return r;
  const secret = r.secret;
  if (!values.host || !secret) {
    io.err(
      `${mqdError('MQD_E_USAGE', 'give --host NAME and the secret (--secret-file or MQD_AGENT_SECRET)').message}`,
    );
    return 2;
  }
  io.out(hostAgentToken(secret, normaliseHost(values.host)));
  return 0;
}

/** The built dashboard shipped with this checkout, if it was built. */
function defaultWebRoot(): string | null {
  const p = fileURLToPath(new URL('../../web/dist', import.meta.url));
  return existsSync(p) ? p : null;
}

export async function serveCommand(
  argv: string[],
  io: Io,
  opts: { untilStopped?: Promise<unknown>; seams?: (real: LocalSeams) => LocalSeams } = {},
): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.out(serveUsage());
    return 0;
  }
  const noAgent = argv.includes('--no-local-agent');
  // --dll-policy belongs to the local agent's reader, not to the aggregator's config.
  const at = argv.indexOf('--dll-policy');
  const dllPolicy = parseDllPolicy(at >= 0 ? (argv[at + 1] ?? '') : undefined);
  if (!dllPolicy) {
    io.err(
      `${mqdError('MQD_E_USAGE', `--dll-policy takes ${DLL_POLICIES.join(' or ')}`).message}\n${serveUsage()}`,
    );
    return 2;
  }
  const rest = at >= 0 ? [...argv.slice(0, at), ...argv.slice(at + 2)] : argv;
  const cfg = loadConfig({ env: process.env, argv: rest.filter((a) => a !== '--no-local-agent') });
  // Read once: from here on no child, library or later code of this root process finds them.
  dropSecretsFromEnv();
  if (!cfg.ok) {
    io.err(`${cfg.error.message}\n${serveUsage()}`);
    return 2;
  }
  const config = cfg.value.webRoot === null ? { ...cfg.value, webRoot: defaultWebRoot() } : cfg.value;
  const local = await serveWithLocalAgent(config, {
    localAgent: !noAgent,
    dllPolicy,
    print: (l) => io.out(l),
    ...(opts.seams ? { seams: opts.seams } : {}),
  });
  await (opts.untilStopped ?? untilSignal());
  if (await closeWithin(() => local.close())) return 0;
  io.err(`mqd serve: the shutdown did not finish in ${SHUTDOWN_BOUND_MS} ms; exiting anyway`);
  // Whatever still holds the event loop (a request that never ends) must not keep root's process.
  if (opts.untilStopped === undefined) process.exit(1);
  return 1;
}
