// `mqd serve`: the aggregator on a port, plus optionally an agent in the same process for the
// node it runs on, and the login URL printed the way Jupyter does it.
import { hostname } from 'node:os';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { type AgentHandle, startAgent } from '../agent/agent.js';
import { hostAgentToken } from '../hub/hub.js';
import type { JobDiscovery, JobLocator, RankReader } from '../shared/seams.js';
import { describeStore } from '../store/store-url.js';
import { buildApp, serverLogger } from './app.js';
import type { ServerConfig } from './config.js';

/** How long close() lets the requests under way finish before it closes their connections. */
export const CLOSE_GRACE_MS = 5000;

export interface ServeOptions {
  readonly config: ServerConfig;
  /** With a reader, an in-process agent serves this node's ranks. */
  readonly reader?: RankReader | null;
  readonly locator?: JobLocator | null;
  /** The in-process agent's job discovery and /proc counters (the hang watch); none: it reports no jobs. */
  readonly discovery?: JobDiscovery | null;
  /** Node name of the in-process agent; default os.hostname(). */
  readonly localHost?: string;
  readonly print?: (line: string) => void;
  /** Default: the server log on stderr at config.logLevel (serverLogger). */
  readonly logger?: FastifyServerOptions['logger'];
  readonly clock?: () => number;
}

export interface Served extends AsyncDisposable {
  readonly app: FastifyInstance;
  /** Where the aggregator listens, e.g. http://127.0.0.1:8080. */
  readonly url: string;
  /** The URL that logs the admin in. */
  readonly loginUrl: string;
  readonly adminToken: string;
  readonly agentToken: string;
  readonly agent: AgentHandle | null;
  close(): Promise<void>;
}

export async function serve(o: ServeOptions): Promise<Served> {
  const print = o.print ?? ((l: string) => console.log(l));
  const app = await buildApp({
    config: o.config,
    logger: o.logger ?? serverLogger(o.config.logLevel),
    ...(o.clock ? { clock: o.clock } : {}),
  });
  await app.listen({ port: o.config.port, host: o.config.host });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : o.config.port;
  const shownHost = ['0.0.0.0', '::'].includes(o.config.host) ? hostname() : o.config.host;
  const scheme = o.config.tlsCert !== null ? 'https' : 'http';
  const url = `${scheme}://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${port}`;
  const local = `${scheme}://${o.config.host === '::' ? '[::1]' : o.config.host === '0.0.0.0' ? '127.0.0.1' : shownHost}:${port}`;
  const { adminToken, agentToken } = app.mqd;
  const loginUrl = `${url}/?token=${encodeURIComponent(adminToken)}`;

  const localHost = o.localHost ?? hostname();
  const agent = o.reader
    ? startAgent({
        serverUrl: local,
        // The in-process agent holds this node's own credential, like any other node.
        token: hostAgentToken(agentToken, localHost),
        ...(o.config.tlsCert !== null ? { tls: { rejectUnauthorized: false } } : {}),
        reader: o.reader,
        locator: o.locator ?? null,
        discovery: o.discovery ?? null,
        // The same roots as the aggregator's: the agent re-checks every core path against them.
        coreDirs: o.config.coreDirs,
        host: localHost,
        log: (l) => app.log.info(l),
      })
    : null;

  print(`MQD Dashboard aggregator at ${url}`);
  print('To log in as admin, open:');
  print(`    ${loginUrl}`);
  // The secret itself is never printed: each node gets its own derived token.
  print(
    `Agents on other nodes: mqd agent --server ${url} --token-file FILE` +
      ` (node N's token, into a mode-600 FILE: mqd agent-token --host N --secret-file <the --agent-token-file>)`,
  );
  // Where the store is, its password (if the URL has one) shown as ***.
  print(`Store: ${describeStore(o.config.storeUrl, o.config.dataDir)}`);
  if (o.config.tlsCert === null && o.config.allowInsecureHttp) {
    print('WARNING: plain HTTP (--allow-insecure-http): tokens and sessions cross the network in clear');
  }

  const close = async () => {
    await agent?.dispose();
    // A client's keep-alive connection that Node does not count as idle (seen after a snapshot
    // answered while its agent went away) holds app.close() until the connection times out,
    // over a minute: after a grace for the requests under way, what is left is closed.
    const cut = setTimeout(() => app.server.closeAllConnections(), CLOSE_GRACE_MS);
    try {
      await app.close();
    } finally {
      clearTimeout(cut);
    }
  };
  return { app, url, loginUrl, adminToken, agentToken, agent, close, [Symbol.asyncDispose]: close };
}
