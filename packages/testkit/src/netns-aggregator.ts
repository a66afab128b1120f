// The aggregator served inside a test's network namespace (`mqd serve --no-local-agent`), and
// how a test reaches it: HTTP through a Unix path socket (visible from every namespace), and a
// loopback TCP bridge to that socket for a browser. The namespaces themselves are netns.ts's.
import { request } from 'node:http';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { mqdCommand, type NetnsNode, type NetnsProcess, spawnInNetns, UNIX_FORWARD } from './netns.js';
import { done, failed, pending, waitFor } from './wait.js';

// ---- HTTP to a server inside a namespace, through a Unix socket --------------------------------

export interface HttpReply {
  readonly status: number;
  readonly text: string;
}

export function unixHttp(
  socketPath: string,
  method: 'GET' | 'POST',
  path: string,
  o: { readonly token?: string; readonly body?: unknown; readonly timeoutMs?: number } = {},
): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const body = o.body === undefined ? undefined : JSON.stringify(o.body);
    const req = request(
      {
        socketPath,
        method,
        path,
        headers: {
          host: 'localhost',
          ...(o.token === undefined ? {} : { authorization: `Bearer ${o.token}` }),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        timeout: o.timeoutMs ?? 60_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          text += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () =>
      req.destroy(new Error(`${method} ${path}: no answer in ${o.timeoutMs ?? 60_000} ms`)),
    );
    req.on('error', reject);
    req.end(body);
  });
}

export interface TcpBridge extends AsyncDisposable {
  /** The bridge's port on 127.0.0.1. */
  readonly port: number;
  /** http://127.0.0.1:PORT */
  readonly url: string;
  /** Stops listening and ends the connections still open. Idempotent. */
  close(): Promise<void>;
}

/**
 * A TCP listener on 127.0.0.1 (ephemeral port, in the caller's network namespace) that pipes every
 * connection to the Unix socket `socketPath`, bytes unchanged (HTTP, WebSocket upgrades): for a
 * client that speaks only TCP, such as a browser, to reach a server inside a namespace through
 * the socket of its unix-forward (UNIX_FORWARD). Nothing is listening outside loopback.
 */
export function tcpToUnix(socketPath: string): Promise<TcpBridge> {
  const open = new Set<{ destroy(): unknown }>();
  const server = createServer((client) => {
    const upstream = connect(socketPath);
    open.add(client);
    open.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    // Either side failing ends both: a half-open pair would leave the client waiting.
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  return new Promise((resolve, reject) => {
    server.once('error', (e) =>
      reject(new Error(`MQD_TESTKIT_E_NETNS: cannot listen on 127.0.0.1 for ${socketPath}: ${e.message}`)),
    );
    server.listen(0, '127.0.0.1', () => {
      const addr = server.address();
      if (addr === null || typeof addr === 'string') {
        server.close();
        reject(new Error(`MQD_TESTKIT_E_NETNS: the bridge to ${socketPath} has no TCP address`));
        return;
      }
      let closing: Promise<void> | undefined;
      const close = () => {
        closing ??= new Promise<void>((res) => {
          server.close(() => res());
          for (const s of open) s.destroy();
          open.clear();
        });
        return closing;
      };
      resolve({
        port: addr.port,
        url: `http://127.0.0.1:${addr.port}`,
        close,
        [Symbol.asyncDispose]: close,
      });
    });
  });
}

// ---- a served aggregator inside a namespace -----------------------------------------------------

export interface NetnsAggregator {
  readonly aggregator: NetnsProcess;
  readonly forwarder: NetnsProcess;
  /** The aggregator's port inside its namespace (agents connect to ADDRESS:port). */
  readonly port: number;
  /** The Unix socket the test reaches the aggregator through. */
  readonly socketPath: string;
  /** The REST API as `token`, parsed as JSON (a body that is not JSON throws with the status). */
  api<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: T }>;
  /** Waits until the aggregator lists this agent process (default id HOST-PID) as connected. */
  untilConnected(agent: NetnsProcess, host: string, timeoutMs: number): Promise<void>;
  /** `mqd agent` for `host`, as run on that node: connects over the veths with the agent token. */
  agentCommand(node: NetnsNode): string[];
  /** Kills the forwarder and the aggregator. */
  kill(): Promise<void>;
}

/**
 * `mqd serve --no-local-agent` on 0.0.0.0 in `netns` (agents connect over the veths with
 * `agentToken`), and a forwarder from `workDir/api.sock` to it for the test (as `adminToken`).
 * On failure what was started is killed before the error is thrown.
 */
export async function startNetnsAggregator(o: {
  readonly netns: string;
  readonly workDir: string;
  readonly adminToken: string;
  readonly agentToken: string;
  readonly timeoutMs: number;
  /** More `mqd serve` flags (e.g. the hang watch's). */
  readonly serveArgs?: readonly string[];
}): Promise<NetnsAggregator> {
  const socketPath = join(o.workDir, 'api.sock');
  const aggregator = spawnInNetns(
    'aggregator',
    o.netns,
    mqdCommand([
      'serve',
      '--no-local-agent',
      // The test's private network namespaces carry no TLS; the aggregator says so loudly.
      '--allow-insecure-http',
      // Every node's agent derives nothing: they share the secret (allowed explicitly here).
      '--allow-shared-agent-token',
      '--host',
      '0.0.0.0',
      '--port',
      '0',
      '--agent-token',
      o.agentToken,
      '--admin-token',
      o.adminToken,
      '--data-dir',
      ':memory:',
      ...(o.serveArgs ?? []),
    ]),
  );
  let forwarder: NetnsProcess | null = null;
  try {
    const port = Number((await aggregator.waitForOutput(/aggregator at http:\/\/\S+:(\d+)/, o.timeoutMs))[1]);
    forwarder = spawnInNetns('forwarder', o.netns, [
      process.execPath,
      UNIX_FORWARD,
      socketPath,
      '127.0.0.1',
      String(port),
    ]);
    await forwarder.waitForOutput(/MQD_FORWARD_READY/, o.timeoutMs);
    const fwd = forwarder;
    const api = async <T>(method: 'GET' | 'POST', path: string, body?: unknown) => {
      const r = await unixHttp(socketPath, method, path, {
        token: o.adminToken,
        ...(body === undefined ? {} : { body }),
      });
      try {
        return { status: r.status, body: JSON.parse(r.text) as T };
      } catch {
        throw new Error(
          `${method} ${path}: ${r.status} with a body that is not JSON: ${r.text.slice(0, 500)}`,
        );
      }
    };
    return {
      aggregator,
      forwarder: fwd,
      port,
      socketPath,
      api,
      untilConnected: async (agent, host, timeoutMs) => {
        const agentId = `${host}-${agent.pid}`;
        await waitFor(
          async () => {
            const exit = agent.exitStatus();
            if (exit !== undefined)
              return failed(`${agent.label} exited (code ${exit.code}):\n${agent.output()}`);
            const rows = (
              await api<{ agents: Array<{ agentId: string; host: string; connected: boolean }> }>(
                'GET',
                '/api/admin/agents',
              )
            ).body.agents;
            const row = rows.find((a) => a.agentId === agentId);
            return row?.connected === true && row.host === host
              ? done(true)
              : pending(JSON.stringify(row ?? null));
          },
          { timeoutMs, what: `agent ${agentId} to be listed as connected` },
        );
      },
      agentCommand: (node) =>
        mqdCommand([
          'agent',
          '--server',
          `http://${node.aggregatorAddress}:${port}`,
          '--allow-insecure-http',
          '--token',
          o.agentToken,
          '--host',
          node.host,
        ]),
      kill: async () => {
        await fwd.kill();
        await aggregator.kill();
      },
    };
  } catch (e) {
    await forwarder?.kill();
    await aggregator.kill();
    throw e;
  }
}
