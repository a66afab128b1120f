// `mqd serve`: the aggregator plus a local agent (real MPI reader and MPIR locator) in one
// command, SQLite in the data directory; prints the login URL with its token, like Jupyter.
// `mqd agent --server URL --token T`: one per node.

import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { mqdError } from '@mqd/model';
import { normaliseHost } from '@mqd/mpir';
import { configHelp, loadConfig, startAgent } from '@mqd/server';
import { serveWithLocalAgent } from './local-serve.js';
import { MpirJobLocator } from './real-locator.js';
import { CoreRankReader } from './real-reader.js';
import type { Io } from './snapshot-cmd.js';

export const SERVE_USAGE = `usage: mqd serve [--no-local-agent] [aggregator options]
  Runs the aggregator and an agent for this node in one process (SQLite store in --data-dir).
${configHelp()}`;

export const AGENT_USAGE = `usage: mqd agent --server URL --token TOKEN [--host NAME] [--dll PATH]
  Connects this node to the aggregator and reads the MPI ranks on it on request.`;

/** The built dashboard shipped with this checkout, if it was built. */
function defaultWebRoot(): string | null {
  const p = fileURLToPath(new URL('../../web/dist', import.meta.url));
  return existsSync(p) ? p : null;
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
  const cfg = loadConfig({ env: process.env, argv: argv.filter((a) => a !== '--no-local-agent') });
  if (!cfg.ok) {
    io.err(`${cfg.error.message}\n${SERVE_USAGE}`);
    return 2;
  }
  const config = cfg.value.webRoot === null ? { ...cfg.value, webRoot: defaultWebRoot() } : cfg.value;
  const local = await serveWithLocalAgent(config, { localAgent: !noAgent, print: (l) => io.out(l) });
  await (opts.untilStopped ?? untilSignal());
  await local.close();
  return 0;
}

export async function agentCommand(
  argv: string[],
  io: Io,
  opts: { untilStopped?: Promise<unknown> } = {},
): Promise<number> {
  let values: { server?: string; token?: string; host?: string; dll?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        server: { type: 'string' },
        token: { type: 'string' },
        host: { type: 'string' },
        dll: { type: 'string' },
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
  const token = values.token ?? process.env['MQD_AGENT_TOKEN'];
  if (!values.server || !token) {
    io.err(
      `${mqdError('MQD_E_USAGE', 'give --server URL and --token TOKEN (or MQD_AGENT_TOKEN)').message}\n${AGENT_USAGE}`,
    );
    return 2;
  }
  const reader = new CoreRankReader(values.dll);
  const host = normaliseHost(values.host ?? hostname());
  const agent = startAgent({
    serverUrl: values.server,
    token,
    reader,
    locator: new MpirJobLocator(host),
    host,
    log: (l) => io.err(l),
  });
  io.out(`mqd agent ${agent.agentId} for host ${agent.host} connecting to ${values.server}`);
  await (opts.untilStopped ?? untilSignal());
  await agent[Symbol.asyncDispose]();
  await reader.dispose();
  return 0;
}
