// Two aggregator instances on one real PostgreSQL 15 (testkit startPostgres), each its own
// Fastify + socket.io server in this process: the agents are connected to instance
// A only, and everything is asked of instance B. B must find the agent on A (ClusterHub), read
// through it, store once; a /ui browser on B sees the progress and done events of a snapshot
// taken on A; a share link made on A opens on B; background work runs on exactly one instance
// and moves to the other when its holder stops. The kill -9 of a real process and haproxy in
// front are in apps/cli/test/cluster.mpi.test.ts and the e2e.
import { type PostgresServer, postgresAvailable, startPostgres } from '@mqd/testkit';
import { io } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import { ClusterHub } from '../src/cluster/cluster-hub.js';
import { createFakeReader } from '../src/synthetic/fakes.js';
import { startSyntheticAgents } from '../src/synthetic/synthetic-agents.js';
import {
  ADMIN_TOKEN,
  AGENT_TOKEN,
  cleanupAfterEach,
  startServer,
  type TestServer,
  waitFor,
} from './helpers.js';

const cleanup = cleanupAfterEach();
/** Every instance of a cluster seals its messages with one secret (the shared agent token is on). */
const CLUSTER_SECRET = 'cluster-test-secret-0123456789abcdef';
let pg: PostgresServer;

beforeAll(async () => {
  if (postgresAvailable()) pg = await startPostgres();
}, 120_000);
afterAll(async () => {
  await pg?.stop();
});

/** A fresh database for one test: its URL. */
const freshDatabase = (): Promise<string> => pg.createDatabase('cluster');

/** A fresh database for one test and two instances on it (short cluster timings). */
async function twoInstances(): Promise<{ a: TestServer; b: TestServer; url: string }> {
  const url = await freshDatabase();
  const opts = {
    clusterTiming: { stateIntervalMs: 200, heartbeatMs: 500 },
    leaseMs: { renew: 200, ttl: 1000 },
  };
  const a = await startServer({ storeUrl: url, clusterSecret: CLUSTER_SECRET }, opts);
  cleanup.push(() => a.close());
  const b = await startServer({ storeUrl: url, clusterSecret: CLUSTER_SECRET }, opts);
  cleanup.push(() => b.close());
  return { a, b, url };
}

async function api<T>(
  s: TestServer,
  method: 'GET' | 'POST',
  url: string,
  payload?: unknown,
): Promise<{ status: number; body: T }> {
  const r = await s.app.inject({
    method,
    url,
    headers: s.admin,
    ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
  });
  return { status: r.statusCode, body: r.json() as T };
}

describe.runIf(postgresAvailable())('two instances on one PostgreSQL', () => {
  it('B attaches and snapshots a job whose agents are on A; a browser on B sees a snapshot taken on A', async () => {
    const { a, b } = await twoInstances();
    const sim = startSyntheticAgents({ serverUrl: a.url, token: AGENT_TOKEN, agents: 2, ranksPerAgent: 3 });
    cleanup.push(() => sim.dispose());
    await sim.whenConnected();
    // B learns from A's state broadcast that sim-0 and sim-1 are connected (on A).
    await waitFor(
      () => b.app.mqd.hub.isConnected('sim-0') && b.app.mqd.hub.isConnected('sim-1'),
      'B sees A’s agents',
    );
    expect(b.app.mqd.hub.hosts().sort()).toEqual(['sim-0', 'sim-1']);
    const health = await api<{ agents: number }>(b, 'GET', '/api/health');
    expect(health.body.agents).toBe(2);

    // Attach through B: the locate runs on A's agent for sim-0.
    const att = await api<{
      job: { id: string; rankCount: number; hosts: { host: string; agentConnected: boolean }[] };
    }>(b, 'POST', '/api/jobs/attach', {
      host: 'sim-0',
      starterPid: sim.job.starterPid,
    });
    expect(att.status).toBe(201);
    expect(att.body.job.rankCount).toBe(6);
    // B says both nodes' agents are connected (they are, to A).
    expect(att.body.job.hosts.map((h) => [h.host, h.agentConnected])).toEqual([
      ['sim-0', true],
      ['sim-1', true],
    ]);
    const jobId = att.body.job.id;

    // A browser logged in on B.
    const login = await b.app.inject({ method: 'POST', url: '/api/login', payload: { token: ADMIN_TOKEN } });
    const token = (login.json() as { sessionToken: string }).sessionToken;
    const browser = io(`${b.url}/ui`, { transports: ['websocket'], reconnection: false, auth: { token } });
    cleanup.push(() => {
      browser.disconnect();
    });
    const events: { event: string; payload: Record<string, unknown> }[] = [];
    browser.onAny((event: string, payload: Record<string, unknown>) => events.push({ event, payload }));
    await new Promise<void>((r) => browser.once('connect', () => r()));

    // A snapshot asked of B: read through A's agents, stored once, every rank ok.
    const viaB = await api<{ snapshot: { id: string; ok: number; ranks: number } }>(
      b,
      'POST',
      `/api/jobs/${jobId}/snapshots`,
    );
    expect(viaB.status).toBe(201);
    expect(viaB.body.snapshot).toMatchObject({ ok: 6, ranks: 6 });
    // The agents' chunks crossed PostgreSQL folded and deflated by A (rank-fold.ts), not as text.
    const bHub = b.app.mqd.hub;
    if (!(bHub instanceof ClusterHub)) throw new Error('B has no cluster hub');
    expect(bHub.chunksIn).toMatchObject({ asSent: 0, ranks: 0 });
    expect(bHub.chunksIn.folded).toBeGreaterThanOrEqual(2);

    // A snapshot taken on A: the browser on B gets its progress and its done event.
    const viaA = await api<{ snapshot: { id: string; ok: number } }>(
      a,
      'POST',
      `/api/jobs/${jobId}/snapshots`,
    );
    expect(viaA.status).toBe(201);
    await waitFor(
      () =>
        events.some((e) => e.event === 'snapshot.done' && e.payload['snapshotId'] === viaA.body.snapshot.id),
      'the done event of the snapshot taken on A, on B',
    );
    expect(events.some((e) => e.event === 'snapshot.progress' && e.payload['jobId'] === jobId)).toBe(true);

    // Both instances list both snapshots (one store), each stored once.
    const hist = await api<{ snapshots: { id: string }[] }>(a, 'GET', `/api/jobs/${jobId}/snapshots`);
    const ids = hist.body.snapshots.map((x) => x.id);
    expect(ids.sort()).toEqual([viaA.body.snapshot.id, viaB.body.snapshot.id].sort());

    // A share link made on A opens on B, without a login.
    const share = await api<{ id: string }>(a, 'POST', `/api/snapshots/${viaA.body.snapshot.id}/share`, {});
    expect(share.status).toBe(201);
    const opened = await b.app.inject({ method: 'GET', url: `/api/shared/${share.body.id}` });
    expect(opened.statusCode).toBe(200);
    expect(opened.body).toContain(viaA.body.snapshot.id);
  });

  it('the adapter’s payload table is unlogged and uncompressed, an older logged one changed at start', async () => {
    // Folded chunks of a 100,000-rank snapshot cross this table (megabytes a snapshot, kept for
    // seconds): no write-ahead log for them, no compression of deflated bytes (setup.ts).
    const url = await freshDatabase();
    const { Client } = (await import('pg')).default;
    const c = new Client({ connectionString: url });
    await c.connect();
    cleanup.push(() => c.end());
    // As an older version made it: logged, compressed payloads.
    await c.query(
      'CREATE TABLE socket_io_attachments (id BIGSERIAL UNIQUE, created_at TIMESTAMPTZ DEFAULT NOW(), payload BYTEA)',
    );
    const table = async () =>
      (
        await c.query<{ persistence: string; storage: string }>(
          `SELECT c.relpersistence AS persistence, a.attstorage AS storage FROM pg_class c
             JOIN pg_attribute a ON a.attrelid = c.oid
            WHERE c.oid = 'socket_io_attachments'::regclass AND a.attname = 'payload'`,
        )
      ).rows[0];
    expect(await table()).toEqual({ persistence: 'p', storage: 'x' });
    const opts = { clusterTiming: { stateIntervalMs: 200, heartbeatMs: 500 } };
    const a = await startServer({ storeUrl: url, clusterSecret: CLUSTER_SECRET }, opts);
    cleanup.push(() => a.close());
    expect(await table()).toEqual({ persistence: 'u', storage: 'e' });
    // A second instance on it changes nothing and starts.
    const b = await startServer({ storeUrl: url, clusterSecret: CLUSTER_SECRET }, opts);
    cleanup.push(() => b.close());
    expect(await table()).toEqual({ persistence: 'u', storage: 'e' });
  });

  it('a logout on A drops the session’s /ui socket on B at once, not at B’s periodic recheck', async () => {
    const { a, b } = await twoInstances();
    const login = await b.app.inject({ method: 'POST', url: '/api/login', payload: { token: ADMIN_TOKEN } });
    const token = (login.json() as { sessionToken: string }).sessionToken;
    const browser = io(`${b.url}/ui`, { transports: ['websocket'], reconnection: false, auth: { token } });
    cleanup.push(() => {
      browser.disconnect();
    });
    await new Promise<void>((r) => browser.once('connect', () => r()));
    let reason = '';
    browser.once('disconnect', (why: string) => {
      reason = why;
    });
    const out = await a.app.inject({
      method: 'POST',
      url: '/api/logout',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(out.statusCode).toBe(200);
    // B's periodic recheck is every 30 s: 5 s is the announcement through PostgreSQL, or nothing.
    await waitFor(() => reason !== '', 'B to drop the logged-out browser', 5000);
    expect(reason).toBe('io server disconnect');
  });

  it('a second agent of a host connected to A is refused by B too (MQD_E_AGENT_CONFLICT); A keeps the first', async () => {
    const { a, b } = await twoInstances();
    const mk = (serverUrl: string, agentId: string) =>
      startAgent({
        serverUrl,
        token: AGENT_TOKEN,
        host: 'same',
        agentId,
        reader: createFakeReader({ worldSize: 1 }),
        backoff: { initialMs: 10_000 },
      });
    const first = mk(a.url, 'first');
    cleanup.push(() => first.dispose());
    await first.whenConnected();
    await waitFor(() => b.app.mqd.hub.isConnected('same'), 'B to learn that A holds host same');
    const second = mk(b.url, 'second');
    cleanup.push(() => second.dispose());
    const refused: { code: string; message: string }[] = [];
    second.onEvent((e) => {
      if (e.kind === 'connect-error') refused.push(e.error);
    });
    await waitFor(() => refused.length > 0, 'the second agent to be refused by B');
    expect(refused[0]?.code).toBe('MQD_E_AGENT_CONFLICT');
    expect(refused[0]?.message).toContain('another aggregator instance');
    expect(first.connected).toBe(true);
    expect(second.connected).toBe(false);
    // Both instances still see one agent for the host: the first, on A.
    for (const s of [a, b]) {
      expect(
        s.app.mqd.hub
          .agents()
          .filter((x) => x.connected && x.host === 'same')
          .map((x) => x.agentId),
      ).toEqual(['first']);
    }
  });

  it('an agent that leaves A is gone for B too; a snapshot asked of B then marks its ranks missing', async () => {
    const { a, b } = await twoInstances();
    const sim = startSyntheticAgents({ serverUrl: a.url, token: AGENT_TOKEN, agents: 1, ranksPerAgent: 2 });
    cleanup.push(() => sim.dispose());
    await sim.whenConnected();
    await waitFor(() => b.app.mqd.hub.isConnected('sim-0'), 'B sees sim-0');
    const att = await api<{ job: { id: string } }>(b, 'POST', '/api/jobs/attach', {
      host: 'sim-0',
      starterPid: sim.job.starterPid,
    });
    expect(att.status).toBe(201);
    await sim.dispose();
    await waitFor(() => !b.app.mqd.hub.isConnected('sim-0'), 'B sees sim-0 gone');
    // As with one instance: the snapshot is stored partial, every rank of the gone node missing.
    const snap = await api<{ snapshot: { ok: number; missing: number; missingRanks: number[] } }>(
      b,
      'POST',
      `/api/jobs/${att.body.job.id}/snapshots`,
    );
    expect(snap.status).toBe(201);
    expect(snap.body.snapshot).toMatchObject({ ok: 0, missing: 2, missingRanks: [0, 1] });
  });

  it('background work runs on one instance; when it stops, the other takes it over', async () => {
    const { a, b } = await twoInstances();
    const holders = () =>
      [a, b].filter((s) => s.app.mqd.leases.holds('watch')).map((s) => (s === a ? 'a' : 'b'));
    await waitFor(() => holders().length === 1, 'one holder of the watch lease');
    for (const name of ['auto-snapshots', 'retention'] as const) {
      expect([a, b].filter((s) => s.app.mqd.leases.holds(name))).toHaveLength(1);
    }
    const first = holders()[0];
    const other = first === 'a' ? b : a;
    await (first === 'a' ? a : b).close();
    await waitFor(
      () => other.app.mqd.leases.holds('watch'),
      'the other instance takes the watch lease',
      10_000,
    );
    expect(other.app.mqd.leases.holds('retention')).toBe(true);
  });
});
