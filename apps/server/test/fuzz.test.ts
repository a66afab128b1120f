// A bounded fuzz (fixed seed, a case budget and a time budget, loopback only) of every REST
// route and both socket.io namespaces with malformed input: the server stays up, the store
// stays intact (integrity_check ok, row counts unchanged by refused input), and every refusal
// is a coded error.
import { prng } from '@mqd/model';
import { io } from 'socket.io-client';
import { describe, expect, it } from 'vitest';
import { hostAgentToken } from '../src/hub/hub.js';
import { AGENT_PROTOCOL_VERSION, WIRE_EVENT } from '../src/protocol/agent-protocol.js';
import {
  ADMIN_TOKEN,
  AGENT_TOKEN,
  cleanupAfterEach,
  createUser,
  sqliteOf,
  startServer,
  type TestServer,
} from './helpers.js';

const cleanup = cleanupAfterEach();

const ROUTES: readonly [string, string][] = [
  ['GET', '/api/health'],
  ['POST', '/api/login'],
  ['POST', '/api/logout'],
  ['GET', '/api/shared/ID'],
  ['GET', '/api/me'],
  ['GET', '/api/jobs'],
  ['POST', '/api/jobs/attach'],
  ['GET', '/api/jobs/ID'],
  ['POST', '/api/jobs/ID/snapshots'],
  ['GET', '/api/jobs/ID/snapshots'],
  ['GET', '/api/snapshots/ID'],
  ['GET', '/api/snapshots/ID/export'],
  ['POST', '/api/snapshots/ID/share'],
  ['GET', '/api/shares'],
  ['DELETE', '/api/shares/ID'],
  ['GET', '/api/admin/agents'],
  ['GET', '/api/admin/activity'],
  ['GET', '/api/admin/hung'],
  ['POST', '/api/admin/users'],
  ['DELETE', '/api/admin/users/ID/token'],
];

function counts(s: TestServer): Record<string, number> {
  const db = sqliteOf(s.app).db;
  const out: Record<string, number> = {};
  for (const t of ['users', 'sessions', 'jobs', 'snapshots', 'shares']) {
    out[t] = (db.prepare(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n;
  }
  return out;
}

describe('bounded fuzz', () => {
  it('REST: every malformed request is a coded 4xx; server and store intact', async () => {
    const s = await startServer({ rateLimitMax: 1_000_000 });
    cleanup.push(() => s.close());
    const user = await createUser(s.app, 'alice', 1000);
    const r = prng(0x5eed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;
    const junk = (n: number) =>
      Array.from({ length: Math.floor(r() * n) }, () => String.fromCharCode(Math.floor(r() * 0x7f))).join('');
    const ids = ['%', '%zz', '..%2f..', 'x'.repeat(300), '', '\u0000', '🙂', '0', '-1', '1e309', junk(20)];
    const bodies = [
      () => junk(200),
      () =>
        JSON.stringify({
          starterPid: pick([-1, 0, 1.5, 'x', null, 2 ** 40]),
          host: pick([1, '', junk(300)]),
        }),
      () => JSON.stringify({ token: pick([1, '', null, junk(600)]) }),
      () => JSON.stringify({ name: junk(80), uid: pick([-1, 'x', 2 ** 33, 1.5]), admin: pick(['yes', 2]) }),
      () => JSON.stringify({ expiresInSeconds: pick([-5, 0, 2 ** 53, 'soon']) }),
      () => '{"a":'.repeat(200),
      () => JSON.stringify([1, 2, 3]),
      () => 'null',
    ];
    const headerSets = [
      () => ({ cookie: pick(['mqd_session=%', 'mqd_session=%E0%A4', `mqd_session=${junk(50)}`, ';;;=']) }),
      () => ({ authorization: pick(['Bearer', 'Bearer %', `Bearer ${junk(100)}`, 'Basic abc']) }),
      () => ({
        ...user,
        'content-type': pick(['text/plain', 'application/json; charset=klingon', 'multipart/form-data']),
      }),
      () => ({ ...user, origin: pick(['null', 'https://evil.example', junk(30)]) }),
      () => ({ ...user }),
    ];
    const before = counts(s);
    const deadline = Date.now() + 20_000;
    let n = 0;
    for (; n < 2500 && Date.now() < deadline; n++) {
      const [method, path] = pick(ROUTES);
      const url = path.replace('ID', encodeURIComponent(pick(ids)).replace(/%25/g, pick(['%', '%25'])));
      const headers = pick(headerSets)();
      const payload = method === 'GET' ? undefined : pick(bodies)();
      const res = await s.app.inject({
        method: method as 'GET',
        url,
        headers: { 'content-type': 'application/json', ...headers },
        ...(payload === undefined ? {} : { payload }),
      });
      const what = `${method} ${url} ${JSON.stringify(headers)} ${payload?.slice(0, 80)}`;
      expect(res.statusCode, what).toBeLessThan(500);
      if (res.statusCode >= 400) {
        expect(JSON.parse(res.body).code, what).toMatch(/^MQD_E_[A-Z_]+$/);
      } else {
        // Only reads and harmless logouts succeed on garbage.
        expect(['GET', 'POST'].includes(method) && (method === 'GET' || path === '/api/logout'), what).toBe(
          true,
        );
      }
    }
    expect(n).toBeGreaterThan(200);
    expect(counts(s)).toEqual(before);
    expect(sqliteOf(s.app).db.pragma('integrity_check', { simple: true })).toBe('ok');
    expect((await fetch(`${s.url}/api/health`)).status).toBe(200);
  }, 60_000);

  it('socket.io: garbage on /agents and /ui is refused or closes the socket; the server stays up', async () => {
    const s = await startServer();
    cleanup.push(() => s.close());
    const r = prng(0xfeed);
    const junk = (n: number) =>
      Array.from({ length: Math.floor(r() * n) }, () => String.fromCharCode(Math.floor(r() * 0xffff))).join(
        '',
      );
    const payloads = [
      () => junk(500),
      () => Buffer.from(junk(300)),
      () =>
        Buffer.from(
          JSON.stringify({ type: 'reply', id: Math.floor(r() * 1e9), method: 'snapshot', ok: true }),
        ),
      () => Buffer.from(JSON.stringify({ type: 'chunk', id: 1, ranks: [{ rank: -1 }] })),
      () => Buffer.from(JSON.stringify({ type: 'status', health: null, mpi: 7, jobs: 'x' })),
      () =>
        Buffer.from(
          JSON.stringify({
            type: 'reply',
            id: Math.floor(r() * 1e9),
            method: 'counters',
            ok: true,
            result: {},
          }),
        ),
      () =>
        Buffer.from(
          JSON.stringify({
            type: 'status',
            health: null,
            mpi: null,
            jobs: [],
            discovered: [{ key: junk(400) }],
          }),
        ),
      () => ({ nested: { deeper: [1, 2, { x: junk(50) }] } }),
      () => null,
      () => 12345,
    ];
    const before = counts(s);
    const agent = io(`${s.url}/agents`, {
      transports: ['websocket'],
      reconnection: false,
      auth: {
        token: hostAgentToken(AGENT_TOKEN, 'fuzz'),
        protocol: AGENT_PROTOCOL_VERSION,
        agentId: 'fuzz',
        host: 'fuzz',
        version: 'x',
      },
    });
    const ui = io(`${s.url}/ui`, {
      transports: ['websocket'],
      reconnection: false,
      auth: { token: ADMIN_TOKEN },
    });
    cleanup.push(() => {
      agent.disconnect();
      ui.disconnect();
    });
    const connected = (sock: typeof agent, what: string) =>
      new Promise<void>((res, rej) => {
        sock.once('connect', () => res());
        sock.once('connect_error', (e) => rej(new Error(`${what}: ${e.message}`)));
      });
    await Promise.all([connected(agent, '/agents'), connected(ui, '/ui')]);
    let refused = 0;
    agent.on(WIRE_EVENT, (d: unknown) => {
      if (String(Buffer.isBuffer(d) ? d.toString('utf8') : d).includes('"refused"')) refused++;
    });
    const deadline = Date.now() + 10_000;
    let n = 0;
    for (; n < 1500 && Date.now() < deadline; n++) {
      const p = payloads[Math.floor(r() * payloads.length)]?.();
      const ev = r() < 0.7 ? WIRE_EVENT : junk(10) || 'x';
      if (agent.connected) agent.emit(ev, p);
      if (ui.connected) ui.emit(junk(8) || 'y', p);
    }
    // A handshake with garbage auth is refused with a coded error.
    for (const auth of [{ token: 5 }, { token: AGENT_TOKEN, host: 'x'.repeat(400) }, { protocol: '1' }]) {
      const bad = io(`${s.url}/agents`, { transports: ['websocket'], reconnection: false, auth });
      const e = await new Promise<Error & { data?: { code?: string } }>((res) =>
        bad.once('connect_error', res),
      );
      bad.disconnect();
      expect(e.data?.code).toMatch(/^MQD_E_/);
    }
    expect((await fetch(`${s.url}/api/health`)).status).toBe(200);
    expect(counts(s)).toEqual(before);
    expect(sqliteOf(s.app).db.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(n).toBeGreaterThan(100);
    expect(refused + (agent.connected ? 0 : 1)).toBeGreaterThan(0);
  }, 60_000);
});
