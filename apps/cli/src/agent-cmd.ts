// `mqd agent --server URL` (token from --token-file or MQD_AGENT_TOKEN): one per node. It loads
// only the agent side of @mqd/server (`@mqd/server/agent`): no web server, no database.

import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { isAbsolute } from 'node:path';
import { mqdError } from '@mqd/model';
import { normaliseHost } from '@mqd/mpir';
import { isLoopback, startAgent } from '@mqd/server/agent';
import { closeWithin, DLL_POLICIES, parseDllPolicy, SHUTDOWN_BOUND_MS, untilSignal } from './cli-common.js';
import { commandArgs } from './command-args.js';
import { ProcJobDiscovery } from './real-discovery.js';
import { MpirJobLocator } from './real-locator.js';
import { CoreRankReader } from './real-reader.js';
import { takeSecret } from './secret-file.js';
import { AGENT_USAGE, type Io } from './usage.js';

export async function agentCommand(
  argv: string[],
  io: Io,
  opts: { untilStopped?: Promise<unknown> } = {},
): Promise<number> {
  const values = commandArgs(io, AGENT_USAGE, argv, {
    server: { type: 'string' },
    token: { type: 'string' },
    'token-file': { type: 'string' },
    ca: { type: 'string' },
    'allow-insecure-http': { type: 'boolean' },
    host: { type: 'string' },
    dll: { type: 'string' },
    'dll-policy': { type: 'string' },
    'core-dir': { type: 'string', multiple: true },
  });
  if (typeof values === 'number') return values;
  // Read once: from here on no reader, locator or later code of this root agent finds it.
  const r = takeSecret(io, values['token-file'], 'MQD_AGENT_TOKEN');
  if (typeof r === 'number') return r;
  let token = r.secret;
  if (values['token-file'] === undefined && values.token !== undefined) {
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
  // Directories whose cores users may open as jobs: the same setting as `mqd serve --core-dir`.
  const coreDirs = values['core-dir'] ?? (process.env['MQD_CORE_DIRS'] ?? '').split(':').filter(Boolean);
  const badDir = coreDirs.find((d) => !isAbsolute(d) || d.split('/').includes('..'));
  if (badDir !== undefined) {
    io.err(mqdError('MQD_E_USAGE', `--core-dir ${badDir}: give an absolute path without '..'`).message);
    return 2;
  }
  const reader = new CoreRankReader(values.dll, dllPolicy);
  const host = normaliseHost(values.host ?? hostname());
  const agent = startAgent({
    serverUrl: values.server,
    token,
    reader,
    locator: new MpirJobLocator(host, { log: (l) => io.err(l) }),
    // The hang watch: the node's MPI jobs found by a read-only /proc scan, counters read alike.
    discovery: new ProcJobDiscovery(host, { log: (l) => io.err(l) }),
    host,
    coreDirs,
    ...(ca === undefined ? {} : { tls: { ca } }),
    log: (l) => io.err(l),
  });
  io.out(`mqd agent ${agent.agentId} for host ${agent.host} connecting to ${values.server}`);
  await (opts.untilStopped ?? untilSignal());
  // The readers go at once, beside the agent: a read in flight then ends instead of starting hosts.
  if (await closeWithin(() => Promise.all([agent[Symbol.asyncDispose](), reader.dispose()]))) return 0;
  io.err(`mqd agent: the shutdown did not finish in ${SHUTDOWN_BOUND_MS} ms; exiting anyway`);
  if (opts.untilStopped === undefined) process.exit(1);
  return 1;
}
