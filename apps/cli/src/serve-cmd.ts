// `mqd serve`: the aggregator plus a local agent (real MPI reader and MPIR locator) in one
// command, SQLite in the data directory; prints the login URL with its token, like Jupyter.
// `mqd agent --server URL` (token from --token-file or MQD_AGENT_TOKEN): one per node.
// `mqd agent-token --host NAME`: prints a node's own token (admins, from the agent secret).

import { existsSync, readFileSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DLL_POLICIES, type DllPolicy } from '@mqd/core';
import { mqdError } from '@mqd/model';
import { normaliseHost } from '@mqd/mpir';
import { configHelp, hostAgentToken, isLoopback, loadConfig, startAgent } from '@mqd/server';
import { serveWithLocalAgent } from './local-serve.js';
import { MpirJobLocator } from './real-locator.js';
import { CoreRankReader } from './real-reader.js';
import type { Io } from './snapshot-cmd.js';

export const SERVE_USAGE = `usage: mqd serve [--no-local-agent] [--dll-policy any|root-owned] [aggregator options]
  Runs the aggregator and an agent for this node in one process (SQLite store in --data-dir).
${configHelp()}`;

export const AGENT_USAGE = `usage: mqd agent --server URL [--token-file FILE] [--ca PEM] [--allow-insecure-http] [--host NAME] [--dll PATH] [--dll-policy any|root-owned]
  Connects this node to the aggregator and reads the MPI ranks on it on request.
  The node's token comes from --token-file (a file only root can read) or MQD_AGENT_TOKEN,
  never from the command line (--token still works but shows in \`ps\`; it is deprecated).
  An https:// server is verified against --ca (or the system CAs); http:// is allowed only
  to a loopback address unless --allow-insecure-http.

usage: mqd agent-token --host NAME [--secret-file FILE]
  Prints the token of node NAME, derived from the aggregator's --agent-token secret (read
  from --secret-file or MQD_AGENT_SECRET).`;

/**
 * A credential file: owned by us (root), not readable or writable by group or others, so no
 * other user of the node can read the token the agent authenticates with.
 */
export function readSecretFile(path: string): { ok: true; value: string } | { ok: false; message: string } {
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(path);
  } catch (e) {
    return { ok: false, message: `cannot read ${path}: ${(e as Error).message}` };
  }
  if ((st.mode & 0o077) !== 0) {
    return {
      ok: false,
      message: `${path} is readable or writable by group or others (mode ${(st.mode & 0o777).toString(8)}): chmod 600 ${path}`,
    };
  }
  if (typeof process.getuid === 'function' && st.uid !== process.getuid()) {
    return { ok: false, message: `${path} belongs to uid ${st.uid}, not to this process: chown it` };
  }
  const v = readFileSync(path, 'utf8').trim();
  return v.length === 0 ? { ok: false, message: `${path} is empty` } : { ok: true, value: v };
}

export async function agentTokenCommand(argv: string[], io: Io): Promise<number> {
  let values: { host?: string; 'secret-file'?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        host: { type: 'string' },
        'secret-file': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (e) {
    io.err(`${mqdError('MQD_E_USAGE', (e as Error).message).message}\n${AGENT_USAGE}`);
    return 2;
  }
  if (values.help) {
    io.out(AGENT_USAGE);
    return 0;
  }
  let secret = process.env['MQD_AGENT_SECRET'];
  if (values['secret-file'] !== undefined) {
    const r = readSecretFile(values['secret-file']);
    if (!r.ok) {
      io.err(mqdError('MQD_E_USAGE', r.message).message);
      return 2;
    }
    secret = r.value;
  }
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

/** `--dll-policy`: 'root-owned' loads only DLLs that root owns in directories only root can write. */
function parseDllPolicy(v: string | undefined): DllPolicy | null {
  if (v === undefined) return 'any';
  return (DLL_POLICIES as readonly string[]).includes(v) ? (v as DllPolicy) : null;
}

function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (s: NodeJS.Signals) => resolve(s);
    process.once('SIGINT', on);
    process.once('SIGTERM', on);
  });
}

export async function serveCommand(
  argv: string[],
  io: Io,
  opts: { untilStopped?: Promise<unknown> } = {},
): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.out(SERVE_USAGE);
    return 0;
  }
  const noAgent = argv.includes('--no-local-agent');
  // --dll-policy belongs to the local agent's reader, not to the aggregator's config.
  const at = argv.indexOf('--dll-policy');
  const dllPolicy = parseDllPolicy(at >= 0 ? (argv[at + 1] ?? '') : undefined);
  if (!dllPolicy) {
    io.err(
      `${mqdError('MQD_E_USAGE', `--dll-policy takes ${DLL_POLICIES.join(' or ')}`).message}\n${SERVE_USAGE}`,
    );
    return 2;
  }
  const rest = at >= 0 ? [...argv.slice(0, at), ...argv.slice(at + 2)] : argv;
  const cfg = loadConfig({ env: process.env, argv: rest.filter((a) => a !== '--no-local-agent') });
  if (!cfg.ok) {
    io.err(`${cfg.error.message}\n${SERVE_USAGE}`);
    return 2;
  }
  const config = cfg.value.webRoot === null ? { ...cfg.value, webRoot: defaultWebRoot() } : cfg.value;
  const local = await serveWithLocalAgent(config, {
    localAgent: !noAgent,
    dllPolicy,
    print: (l) => io.out(l),
  });
  await (opts.untilStopped ?? untilSignal());
  await local.close();
  return 0;
}

export async function agentCommand(
  argv: string[],
  io: Io,
  opts: { untilStopped?: Promise<unknown> } = {},
): Promise<number> {
  let values: {
    server?: string;
    token?: string;
    'token-file'?: string;
    ca?: string;
    'allow-insecure-http'?: boolean;
    host?: string;
    dll?: string;
    'dll-policy'?: string;
    help?: boolean;
  };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        server: { type: 'string' },
        token: { type: 'string' },
        'token-file': { type: 'string' },
        ca: { type: 'string' },
        'allow-insecure-http': { type: 'boolean' },
        host: { type: 'string' },
        dll: { type: 'string' },
        'dll-policy': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (e) {
    io.err(`${mqdError('MQD_E_USAGE', (e as Error).message).message}\n${AGENT_USAGE}`);
    return 2;
  }
  if (values.help) {
    io.out(AGENT_USAGE);
    return 0;
  }
  let token = process.env['MQD_AGENT_TOKEN'];
  if (values['token-file'] !== undefined) {
    const r = readSecretFile(values['token-file']);
    if (!r.ok) {
      io.err(mqdError('MQD_E_USAGE', r.message).message);
      return 2;
    }
    token = r.value;
  } else if (values.token !== undefined) {
    io.err(
      'WARNING: --token puts the agent token on the command line, where every user of this node sees it in `ps`; ' +
        'use --token-file FILE (mode 600) or MQD_AGENT_TOKEN. --token will be removed.',
    );
    token = values.token;
  }
  if (!values.server || !token) {
    io.err(
      `${mqdError('MQD_E_USAGE', 'give --server URL and the token (--token-file FILE or MQD_AGENT_TOKEN)').message}\n${AGENT_USAGE}`,
    );
    return 2;
  }
  let server: URL;
  try {
    server = new URL(values.server);
  } catch {
    io.err(mqdError('MQD_E_USAGE', `--server ${values.server} is not a URL`).message);
    return 2;
  }
  if (server.protocol === 'http:' && !isLoopback(server.hostname.replace(/^\[|\]$/g, ''))) {
    if (!values['allow-insecure-http']) {
      io.err(
        mqdError(
          'MQD_E_INSECURE',
          `${values.server} is plain HTTP to another machine: the token and the snapshots would cross the network in clear ` +
            'and the server could not be verified; use https:// with --ca, or --allow-insecure-http',
        ).message,
      );
      return 2;
    }
    io.err(`WARNING: plain HTTP to ${server.host} (--allow-insecure-http): the server is not authenticated`);
  }
  let ca: string | undefined;
  if (values.ca !== undefined) {
    try {
      ca = readFileSync(values.ca, 'utf8');
    } catch (e) {
      io.err(mqdError('MQD_E_USAGE', `cannot read --ca ${values.ca}: ${(e as Error).message}`).message);
      return 2;
    }
  }
  const dllPolicy = parseDllPolicy(values['dll-policy']);
  if (!dllPolicy) {
    io.err(
      `${mqdError('MQD_E_USAGE', `--dll-policy takes ${DLL_POLICIES.join(' or ')}`).message}\n${AGENT_USAGE}`,
    );
    return 2;
  }
  const reader = new CoreRankReader(values.dll, dllPolicy);
  const host = normaliseHost(values.host ?? hostname());
  const agent = startAgent({
    serverUrl: values.server,
    token,
    reader,
    locator: new MpirJobLocator(host, { log: (l) => io.err(l) }),
    host,
    ...(ca === undefined ? {} : { tls: { ca } }),
    log: (l) => io.err(l),
  });
  io.out(`mqd agent ${agent.agentId} for host ${agent.host} connecting to ${values.server}`);
  await (opts.untilStopped ?? untilSignal());
  await agent[Symbol.asyncDispose]();
  await reader.dispose();
  return 0;
}
