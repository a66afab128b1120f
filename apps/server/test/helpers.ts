// Shared test scaffolding: an aggregator on loopback with an in-memory store, login helpers,
// and a condition waiter (tests wait on state, never on time). Every inject() response of a
// server started here is checked against the API spec (packages/model api-spec.ts).
import { gunzipSync } from 'node:zlib';
import { API_ROUTES, decodeErrorBody, decodeResponse, type RouteName, validateSnapshot } from '@mqd/model';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { io, type Socket } from 'socket.io-client';
import { afterEach } from 'vitest';
import { type AppOptions, buildApp } from '../src/http/app.js';
import type { ServerConfig } from '../src/http/config.js';
import {
  AGENT_NAMESPACE,
  AGENT_PROTOCOL_VERSION,
  type ServerMessage,
  WIRE_EVENT,
} from '../src/protocol/agent-protocol.js';
import { decodeServerMessage } from '../src/protocol/agent-protocol-decode.js';
import { SqliteStore } from '../src/store/dialect-sqlite.js';

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
  checkEveryInject(app);
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

/** The SQLite store behind a test server (for pragmas and injected failures). */
export const sqliteOf = (app: FastifyInstance): SqliteStore => {
  const store = app.mqd.store;
  if (!(store instanceof SqliteStore)) throw new Error(`the store is ${store.dialect}, not SQLite`);
  return store;
};

/** A teardown step: what a test started, stopped after it. */
export type Cleanup = () => Promise<void> | void;

/**
 * The test file's teardown list: after each test its steps run, the last pushed first. Call once,
 * at the file's top level (it registers the afterEach).
 */
export function cleanupAfterEach(): Cleanup[] {
  const steps: Cleanup[] = [];
  afterEach(async () => {
    while (steps.length) await steps.pop()?.();
  });
  return steps;
}

/** startServer, closed after the test through `cleanup`. */
export async function serverFor(
  cleanup: Cleanup[],
  ...args: Parameters<typeof startServer>
): Promise<TestServer> {
  const s = await startServer(...args);
  cleanup.push(() => s.close());
  return s;
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

/** The API_ROUTES entry that serves `method url` (url with /api and maybe a query), or null. */
export function routeOf(method: string, url: string): RouteName | null {
  const path = url.split('?')[0] ?? '';
  if (!path.startsWith('/api/')) return null;
  const rest = path.slice('/api'.length);
  for (const [name, r] of Object.entries(API_ROUTES)) {
    const re = new RegExp(`^${r.url.replace(/:[A-Za-z]+/g, '[^/]+').replace(/\./g, '\\.')}$`);
    if (r.method === method && re.test(rest)) return name as RouteName;
  }
  return null;
}

/** The body as JSON (gunzipped when the reply is gzip), or undefined when there is none. */
export function bodyJson(res: LightMyRequestResponse): unknown {
  const raw = bodyBytes(res);
  return raw.length === 0 ? undefined : JSON.parse(raw.toString('utf8'));
}

/** The body's bytes, inflated when it came gzipped. */
export function bodyBytes(res: LightMyRequestResponse): Buffer {
  return res.headers['content-encoding'] === 'gzip' ? gunzipSync(res.rawPayload) : res.rawPayload;
}

/** The success body of `route` as decodeResponse takes it: bytes for a binary route, else JSON. */
export function routeBody(route: RouteName, res: LightMyRequestResponse): unknown {
  return 'overview' in API_ROUTES[route] ? new Uint8Array(bodyBytes(res)) : bodyJson(res);
}

/**
 * Why `res` (the answer to `method url`) breaks the API spec, or null when it keeps it: an error
 * is an ApiErrorBody with the reply's status; a success has the route's status and body.
 */
export function specViolation(method: string, url: string, res: LightMyRequestResponse): string | null {
  const name = routeOf(method, url);
  if (name === null && !url.startsWith('/api/')) return null; // the dashboard's files
  const at = `${method} ${url} -> ${res.statusCode}`;
  if (res.statusCode >= 400) {
    const e = decodeErrorBody(bodyJson(res));
    if (e === null) return `${at}: not an ApiError body: ${res.body.slice(0, 200)}`;
    if (e.statusCode !== res.statusCode) return `${at}: body says statusCode ${e.statusCode}`;
    if (!/^MQD_E_[A-Z_]+$/.test(e.code) || !e.message.startsWith(`${e.code}: `)) {
      return `${at}: not a coded error: ${e.code} ${e.message.slice(0, 80)}`;
    }
    return null;
  }
  if (name === null) return `${at}: no route of API_ROUTES answers this`;
  const spec = API_ROUTES[name];
  if (res.statusCode !== spec.status) return `${at}: the spec says ${spec.status}`;
  if (spec.status === 204) return res.rawPayload.length === 0 ? null : `${at}: 204 with a body`;
  const d = decodeResponse(name, routeBody(name, res));
  return d.ok ? null : `${at}: ${d.error.message}`;
}

function checkEveryInject(app: FastifyInstance): void {
  const inject = app.inject.bind(app);
  const checked = async (opts: InjectOptions | string): Promise<LightMyRequestResponse> => {
    const o = typeof opts === 'string' ? { url: opts } : opts;
    const res = await inject(o);
    const url = typeof o.url === 'string' ? o.url : String(o.path ?? '');
    const bad = specViolation(String(o.method ?? 'GET').toUpperCase(), url, res);
    if (bad !== null) throw new Error(`MQD_E_INTERNAL: the reply breaks the API spec: ${bad}`);
    return res;
  };
  // Only the promise form is used by the tests; the chain form (inject() without options) stays as is.
  app.inject = ((opts?: InjectOptions | string) =>
    opts === undefined ? inject() : checked(opts)) as typeof app.inject;
}

/** A rank as validateSnapshot judges it, alone in a snapshot: the spec's verdict to compare guards with. */
export const specAccepts = (r: unknown): boolean =>
  validateSnapshot({
    schemaVersion: 1,
    takenAt: '2026-01-01T00:00:00Z',
    durationMicros: 0,
    mpi: { library: 'unknown', dll: null, lengthUnit: 'bytes' },
    ranks: [r],
  }).ok;

/** An agent's handshake for `host` (agentId = host). */
export const hello = (host: string, token = AGENT_TOKEN) => ({
  token,
  protocol: AGENT_PROTOCOL_VERSION,
  agentId: host,
  host,
  version: 'test',
});

/** A hand-driven agent: the test decides every byte it sends; disconnected through `cleanup`. */
export function rawAgent(
  cleanup: Cleanup[],
  url: string,
  auth: Record<string, unknown>,
): { socket: Socket; inbox: ServerMessage[] } {
  const socket: Socket = io(new URL(AGENT_NAMESPACE, url).toString(), {
    auth,
    reconnection: false,
    transports: ['websocket'],
  });
  cleanup.push(() => {
    socket.disconnect();
  });
  const inbox: ServerMessage[] = [];
  socket.on(WIRE_EVENT, (data: unknown) => {
    const m = decodeServerMessage(data, Number.MAX_SAFE_INTEGER);
    if (!m.ok) throw new Error(m.error.error.message);
    inbox.push(m.value);
  });
  return { socket, inbox };
}

/**
 * Attaches the starter `starterPid` (4242: the fake locator's) as the admin, on `host` when given;
 * the job's id.
 */
export async function attachAsAdmin(s: TestServer, starterPid = 4242, host?: string): Promise<string> {
  const att = await s.app.inject({
    method: 'POST',
    url: '/api/jobs/attach',
    headers: s.admin,
    payload: host === undefined ? { starterPid } : { host, starterPid },
  });
  if (att.statusCode !== 201) throw new Error(`attach: ${att.statusCode} ${att.body}`);
  return json<{ job: { id: string } }>(att).job.id;
}
