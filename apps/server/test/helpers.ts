// Shared test scaffolding: an aggregator on loopback with an in-memory store, login helpers,
// and a condition waiter (tests wait on state, never on time).
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { type AppOptions, buildApp } from '../src/app.js';
import type { ServerConfig } from '../src/config.js';

export const AGENT_TOKEN = 'agent-token-for-tests-0123456789';
export const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';

export interface TestServer {
  readonly app: FastifyInstance;
  readonly url: string;
  /** Authorization header of the admin. */
  readonly admin: { authorization: string };
  close(): Promise<void>;
}

export async function startServer(
  config: Partial<ServerConfig> = {},
  opts: Omit<AppOptions, 'config'> = {},
): Promise<TestServer> {
  const app = await buildApp({
    ...opts,
    config: {
      dataDir: ':memory:',
      agentToken: AGENT_TOKEN,
      adminToken: ADMIN_TOKEN,
      // Most tests run several synthetic agents on the shared token; security.test.ts checks
      // per-host tokens with this off.
      allowSharedAgentToken: true,
      ...config,
    },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const addr = app.server.address();
  if (addr === null || typeof addr === 'string') throw new Error('no TCP address');
  return {
    app,
    url: `http://127.0.0.1:${addr.port}`,
    admin: { authorization: `Bearer ${ADMIN_TOKEN}` },
    close: () => app.close(),
  };
}

export async function waitFor(cond: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export function json<T = Record<string, unknown>>(res: LightMyRequestResponse): T {
  return JSON.parse(res.body) as T;
}

/** Creates a user through the admin API; returns their authorization header. */
export async function createUser(
  app: FastifyInstance,
  name: string,
  uid: number | null,
  admin = false,
): Promise<{ authorization: string }> {
  const res = await app.inject({
    method: 'POST',
    url: '/api/admin/users',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    payload: { name, uid, admin },
  });
  if (res.statusCode !== 201) throw new Error(`creating ${name}: ${res.statusCode} ${res.body}`);
  return { authorization: `Bearer ${json<{ token: string }>(res).token}` };
}
