// Snapshot overviews (overviews.ts, @mqd/model edges/overview.ts): what the dashboard draws first
// of a stored snapshot. The overview must say exactly what the page would compute from the whole
// snapshot (the model's explanation and edge table), on this thread and in the worker; only the
// job's owner (or a live share link) reads it; a worker that dies costs that overview only.
import { gunzipSync } from 'node:zlib';
import {
  buildEdges,
  decodeOverview,
  EDGE_TABLE_COLUMNS,
  type EdgeTable,
  explainSnapshot,
  fillEdgePositions,
  type JobSnapshot,
  type SnapshotOverview,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import type { RankReader } from '../src/shared/seams.js';
import { createFakeLocator, createFakeReader } from '../src/synthetic/fakes.js';
import { startSyntheticAgents } from '../src/synthetic/synthetic-agents.js';
import {
  AGENT_TOKEN,
  attachAsAdmin,
  bodyJson,
  cleanupAfterEach,
  serverFor,
  type TestServer,
  waitFor,
} from './helpers.js';

const cleanup = cleanupAfterEach();

/** A synthetic hung job of `agents` x `ranks`, attached by the admin, with one snapshot taken. */
async function snapshotOf(s: TestServer, agents: number, ranks: number) {
  const sim = startSyntheticAgents({
    serverUrl: s.url,
    token: AGENT_TOKEN,
    agents,
    ranksPerAgent: ranks,
    uid: 1000,
    starterPid: 700,
    hostPrefix: 'ov-',
  });
  cleanup.push(() => sim.dispose());
  await sim.whenConnected();
  const jobId = await attachAsAdmin(s, 700, 'ov-0');
  const taken = await s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: s.admin });
  expect(taken.statusCode, taken.body).toBe(201);
  const id = (bodyJson(taken) as { snapshot: { id: string } }).snapshot.id;
  const full = await s.app.inject({ method: 'GET', url: `/api/snapshots/${id}`, headers: s.admin });
  return { jobId, id, snapshot: (bodyJson(full) as { snapshot: JobSnapshot }).snapshot };
}

async function overview(s: TestServer, url: string, headers: Record<string, string>) {
  const res = await s.app.inject({ method: 'GET', url, headers: { ...headers, 'accept-encoding': 'gzip' } });
  return res;
}

/** The overview of `id` once a background one is stored (polled: it is made off the request path). */
async function storedOverview(s: TestServer, id: string): Promise<Buffer | null> {
  const t0 = Date.now();
  for (;;) {
    const stored = await s.app.mqd.store.snapshotOverview(id);
    if (stored !== null || Date.now() - t0 >= 60_000) return stored;
    await new Promise((r) => setTimeout(r, 50));
  }
}

function decoded(body: Buffer): SnapshotOverview {
  const d = decodeOverview(new Uint8Array(body));
  if (!d.ok) throw new Error(d.error);
  return d.value;
}

const COLUMNS = EDGE_TABLE_COLUMNS;

/** The overview says what the page computes from the whole snapshot. */
function expectSameAsPage(o: SnapshotOverview, snapshot: JobSnapshot) {
  expect(o.explanation).toEqual(JSON.parse(JSON.stringify(explainSnapshot(snapshot))));
  // The positions come from the whole snapshot, as in the page.
  expect(o.positions).toBe(false);
  expect(fillEdgePositions(snapshot, o.edges)).toBe(true);
  const e: EdgeTable = buildEdges(snapshot);
  expect(o.edges.length).toBe(e.length);
  expect(o.edges.worldSize).toBe(e.worldSize);
  expect(o.edges.comms).toEqual(e.comms);
  expect(o.edges.kindUnit).toEqual(e.kindUnit);
  for (const c of COLUMNS) expect([...o.edges[c]], c).toEqual([...e[c]]);
  expect(o.head).toMatchObject({
    takenAt: snapshot.takenAt,
    mpi: snapshot.mpi,
    rankCount: snapshot.ranks.length,
  });
}

describe('snapshot overviews', () => {
  it("say what the page would compute from the whole snapshot, gzipped or not, to the job's owner only", async () => {
    const s = await serverFor(cleanup);
    const { id, snapshot } = await snapshotOf(s, 2, 6);
    expect(snapshot.ranks).toHaveLength(12);
    const gz = await overview(s, `/api/snapshots/${id}/overview`, s.admin);
    expect(gz.statusCode).toBe(200);
    expect(gz.headers['content-type']).toBe('application/vnd.mqd.overview');
    expect(gz.headers['content-encoding']).toBe('gzip');
    const o = decoded(gunzipSync(gz.rawPayload));
    expectSameAsPage(o, snapshot);
    expect(o.explanation.verdict).toBe('deadlock');
    expect(o.edges.length).toBeGreaterThan(12);
    // Without gzip: the same bytes, inflated.
    const plain = await s.app.inject({
      method: 'GET',
      url: `/api/snapshots/${id}/overview`,
      headers: s.admin,
    });
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.rawPayload.equals(gunzipSync(gz.rawPayload))).toBe(true);
    // Made once, then read from the store.
    expect(await s.app.mqd.store.snapshotOverview(id)).not.toBeNull();

    // Another user is refused as for the snapshot itself; an unknown id is a coded 404.
    const bob = await s.app.inject({
      method: 'POST',
      url: '/api/admin/users',
      headers: s.admin,
      payload: { name: 'bob', uid: 2000 },
    });
    const bobAuth = { authorization: `Bearer ${(bodyJson(bob) as { token: string }).token}` };
    const denied = await overview(s, `/api/snapshots/${id}/overview`, bobAuth);
    expect(denied.statusCode).toBe(403);
    expect(bodyJson(denied)).toMatchObject({ code: 'MQD_E_FORBIDDEN' });
    const deniedFull = await s.app.inject({ method: 'GET', url: `/api/snapshots/${id}`, headers: bobAuth });
    expect(bodyJson(deniedFull)).toEqual(bodyJson(denied));
    expect((await overview(s, '/api/snapshots/nope/overview', s.admin)).statusCode).toBe(404);
    expect((await overview(s, `/api/snapshots/${id}/overview`, {})).statusCode).toBe(401);

    // A share link reads it until revoked.
    const share = await s.app.inject({
      method: 'POST',
      url: `/api/snapshots/${id}/share`,
      headers: s.admin,
      payload: {},
    });
    const shareId = (bodyJson(share) as { id: string }).id;
    const shared = await overview(s, `/api/shared/${shareId}/overview`, {});
    expect(shared.statusCode).toBe(200);
    expect(shared.rawPayload.equals(gz.rawPayload)).toBe(true);
    await s.app.inject({ method: 'DELETE', url: `/api/shares/${shareId}`, headers: s.admin });
    const gone = await overview(s, `/api/shared/${shareId}/overview`, {});
    expect(gone.statusCode).toBe(404);
  });

  it('are made in the worker as soon as a large snapshot is stored, with the same answer', async () => {
    // Every snapshot counts as large here (inlineBelowRanks 0): made by the worker thread.
    const s = await serverFor(cleanup, {}, { overviews: { inlineBelowRanks: 0 } });
    const { id, snapshot } = await snapshotOf(s, 3, 5);
    // Started when the snapshot was stored, before anyone asked.
    const stored = await storedOverview(s, id);
    expect(stored, 'the overview stored by the worker').not.toBeNull();
    expect(s.app.mqd.overviews.running).toBe(true);
    const o = decoded(gunzipSync(stored as Buffer));
    expectSameAsPage(o, snapshot);
    const res = await overview(s, `/api/snapshots/${id}/overview`, s.admin);
    expect(res.rawPayload.equals(stored as Buffer)).toBe(true);
  });

  it('are made ahead only while no snapshot is being gathered, for the newest snapshot of each job', async () => {
    // The test holds the instance "gathering" and lets go; every snapshot counts as large.
    let gathering = true;
    let asked = 0;
    const busy = () => {
      asked++;
      return gathering;
    };
    const s = await serverFor(cleanup, {}, { overviews: { inlineBelowRanks: 0, busy } });
    const first = await snapshotOf(s, 1, 3);
    const taken = await s.app.inject({
      method: 'POST',
      url: `/api/jobs/${first.jobId}/snapshots`,
      headers: s.admin,
    });
    const newest = (bodyJson(taken) as { snapshot: { id: string } }).snapshot.id;
    const o = s.app.mqd.overviews;
    const store = s.app.mqd.store;
    // It looked, found a snapshot being gathered, and looked again later: nothing made meanwhile.
    const seen = asked;
    await waitFor(() => asked >= seen + 2, 'the overviews made ahead to look again');
    expect(o.waitingAhead).toBe(1);
    expect(await store.snapshotOverview(first.id)).toBeNull();
    expect(await store.snapshotOverview(newest)).toBeNull();
    gathering = false;
    const made = await storedOverview(s, newest);
    expect(made, 'the newest snapshot made ahead').not.toBeNull();
    expect(o.waitingAhead).toBe(0);
    // The older one was replaced in the queue: made only when someone asks for it.
    expect(await store.snapshotOverview(first.id)).toBeNull();
    const asked1 = await overview(s, `/api/snapshots/${first.id}/overview`, s.admin);
    expect(asked1.statusCode).toBe(200);
  });

  it('one made ahead stops when a snapshot starts being gathered, and is made again afterwards', async () => {
    let gathering = true;
    const s = await serverFor(cleanup, {}, { overviews: { inlineBelowRanks: 0, busy: () => gathering } });
    const { id } = await snapshotOf(s, 1, 3);
    const o = s.app.mqd.overviews;
    expect(o.waitingAhead).toBe(1);
    gathering = false;
    await waitFor(() => o.running, 'the overview made ahead to start in the worker');
    // A snapshot starts: the worker is stopped, the overview waits again.
    gathering = true;
    o.yieldToSnapshot();
    await waitFor(() => !o.running && o.waitingAhead === 1, 'the overview to stop and wait again');
    expect(await s.app.mqd.store.snapshotOverview(id)).toBeNull();
    gathering = false;
    const made = await storedOverview(s, id);
    expect(made, 'made again once nothing is gathered').not.toBeNull();
  });

  it("the server's own: none made ahead while a snapshot is being gathered here, however long it takes", async () => {
    // No `busy` given: the server's. The agent's reads wait at a gate the test opens; the first
    // snapshot's overview waits 300 ms of quiet, and the second snapshot starts within them and
    // takes longer (in the scale-out bench an overview made during a 5 s fan-in cost it ~1 CPU-s).
    const s = await serverFor(
      cleanup,
      {},
      { overviews: { inlineBelowRanks: 0, aheadQuietMs: 300, aheadRetryMs: 20 } },
    );
    let gate: Promise<void> = Promise.resolve();
    const base = createFakeReader({ worldSize: 3 });
    const reader: RankReader = {
      ...base,
      read: async (ranks, ro) => {
        await gate;
        return base.read(ranks, ro);
      },
    };
    const job = {
      starterPid: 701,
      uid: 1000,
      command: 'mpirun -np 3 ./ring',
      hosts: ['gate-0'],
      ranksPerHost: 3,
    };
    const agent = startAgent({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      host: 'gate-0',
      reader,
      locator: createFakeLocator(job),
    });
    cleanup.push(() => agent.dispose());
    await agent.whenConnected();
    const jobId = await attachAsAdmin(s, 701, 'gate-0');
    const take = () =>
      s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: s.admin });
    const first = (bodyJson(await take()) as { snapshot: { id: string } }).snapshot.id;
    const o = s.app.mqd.overviews;
    let open = () => {};
    gate = new Promise((r) => {
      open = r;
    });
    const second = take();
    await waitFor(() => s.app.mqd.snapshots.gathering, 'the second snapshot to be gathered');
    // Looked again for well over the quiet time while the second is gathered: nothing started.
    const seen = o.aheadLooks;
    await waitFor(() => o.aheadLooks >= seen + 40, 'the overview made ahead to look again 40 times');
    expect(s.app.mqd.snapshots.gathering).toBe(true);
    expect(o.running, 'no worker while a snapshot is gathered').toBe(false);
    expect(o.waitingAhead).toBe(1);
    expect(await s.app.mqd.store.snapshotOverview(first)).toBeNull();
    open();
    const taken = await second;
    expect(taken.statusCode, taken.body).toBe(201);
    const newest = (bodyJson(taken) as { snapshot: { id: string } }).snapshot.id;
    expect(await storedOverview(s, newest), 'the newest one made once nothing is gathered').not.toBeNull();
  });

  it('a worker that dies costs that overview only: a coded error, the snapshot and the server stay', async () => {
    // A heap limit no worker can start under: every overview made by it fails.
    const s = await serverFor(cleanup, {}, { overviews: { inlineBelowRanks: 0, maxHeapMb: 1 } });
    const { id } = await snapshotOf(s, 1, 4);
    const res = await overview(s, `/api/snapshots/${id}/overview`, s.admin);
    expect(res.statusCode).toBe(500);
    expect(bodyJson(res)).toMatchObject({ code: 'MQD_E_INTERNAL' });
    expect((bodyJson(res) as { message: string }).message).toMatch(/overview/);
    // Nothing half-made was kept; the snapshot itself still opens, and the server answers.
    expect(await s.app.mqd.store.snapshotOverview(id)).toBeNull();
    const full = await s.app.inject({ method: 'GET', url: `/api/snapshots/${id}`, headers: s.admin });
    expect(full.statusCode).toBe(200);
    await waitFor(() => !s.app.mqd.overviews.running, 'the dead worker to be gone');
    const again = await overview(s, `/api/snapshots/${id}/overview`, s.admin);
    expect(again.statusCode).toBe(500);
    expect((await s.app.inject({ method: 'GET', url: '/api/health' })).statusCode).toBe(200);
  });
});
