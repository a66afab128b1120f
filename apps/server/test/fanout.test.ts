import { gunzipSync } from 'node:zlib';
import {
  JobId,
  type JobSnapshot,
  ok,
  syntheticRingDeadlock,
  syntheticRingRank,
  validateSnapshot,
} from '@mqd/model';
import { afterEach, describe, expect, it } from 'vitest';
import { type AgentHandle, startAgent } from '../src/agent/agent.js';
import { type SnapshotHub, snapshotJson } from '../src/fanout/fanout.js';
import { deflatePart } from '../src/hub/gzip-splice.js';
import { rankFold } from '../src/hub/rank-fold.js';
import type { RankReader } from '../src/shared/seams.js';
import type { JobRecord } from '../src/shared/types.js';
import { createFakeLocator, createFakeReader, type FakeJob } from '../src/synthetic/fakes.js';
import { startSyntheticAgents } from '../src/synthetic/synthetic-agents.js';
import { AGENT_TOKEN, json, startServer, type TestServer, waitFor } from './helpers.js';

interface Meta {
  id: string;
  ranks: number;
  ok: number;
  missing: number;
  partial: boolean;
  missingRanks: number[];
  bytes: number;
  pendingSends: number;
}

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()?.();
});

async function server(config = {}): Promise<TestServer> {
  const s = await startServer(config);
  cleanup.push(() => s.close());
  return s;
}

async function attach(s: TestServer, starterPid: number, host?: string) {
  const res = await s.app.inject({
    method: 'POST',
    url: '/api/jobs/attach',
    headers: s.admin,
    payload: host === undefined ? { starterPid } : { host, starterPid },
  });
  expect(res.statusCode, res.body).toBe(201);
  return json<{ job: { id: string; rankCount: number; hosts: { host: string; agentConnected: boolean }[] } }>(
    res,
  ).job;
}

/**
 * An agent on `host` of the server `s`, reading with `reader` (the synthetic ring of `job`'s
 * ranks by default) and locating `job`; disposed after the test, connected when it resolves.
 */
async function agentOn(
  s: TestServer,
  host: string,
  job: FakeJob,
  reader: RankReader = createFakeReader({ worldSize: job.hosts.length * job.ranksPerHost }),
): Promise<AgentHandle> {
  const a = startAgent({
    serverUrl: s.url,
    token: AGENT_TOKEN,
    host,
    reader,
    locator: createFakeLocator(job),
  });
  cleanup.push(() => a.dispose());
  await a.whenConnected();
  return a;
}

async function snapshot(s: TestServer, jobId: string): Promise<Meta> {
  const res = await s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: s.admin });
  expect(res.statusCode, res.body).toBe(201);
  return json<{ snapshot: Meta }>(res).snapshot;
}

async function data(s: TestServer, id: string): Promise<JobSnapshot> {
  const res = await s.app.inject({ method: 'GET', url: `/api/snapshots/${id}`, headers: s.admin });
  expect(res.statusCode, res.body).toBe(200);
  return json<{ snapshot: JobSnapshot }>(res).snapshot;
}

describe('fan-out and merge', () => {
  it('merges two agents that each own half of a job into one snapshot sorted by rank', async () => {
    const s = await server();
    const sim = startSyntheticAgents({ serverUrl: s.url, token: AGENT_TOKEN, agents: 2, ranksPerAgent: 4 });
    cleanup.push(() => sim.dispose());
    await sim.whenConnected();
    // Two agents are connected: attach must find the one that reports the starter.
    await waitFor(() => s.app.mqd.hub.seenStarters().length === 1, 'the starter report');
    const job = await attach(s, sim.job.starterPid);
    expect(job.rankCount).toBe(8);
    expect(job.hosts.map((h) => [h.host, h.agentConnected])).toEqual([
      ['sim-0', true],
      ['sim-1', true],
    ]);
    const meta = await snapshot(s, job.id);
    expect(meta).toMatchObject({ ranks: 8, ok: 8, missing: 0, partial: false });
    const snap = await data(s, meta.id);
    expect(validateSnapshot(snap).ok).toBe(true);
    expect(snap.ranks.map((r) => r.rank)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(snap.ranks.map((r) => r.host)).toEqual([
      'sim-0',
      'sim-0',
      'sim-0',
      'sim-0',
      'sim-1',
      'sim-1',
      'sim-1',
      'sim-1',
    ]);
    expect(snap.mpi.library).toBe('openmpi');
    // What arrived is exactly what the agents generated.
    expect(snap.ranks[5]).toEqual(syntheticRingRank(5, 20_005, 'sim-1', 8, 1, 0));
    // Stored as each agent's chunk deflated on arrival and joined in rank order (fanout.ts,
    // segments): the gzip opens with the JSON's head as a stored block, and inflates to exactly
    // the JSON of the snapshot.
    const gz = (await s.app.mqd.store.snapshotData(meta.id)) as Buffer;
    const text = gunzipSync(gz).toString('utf8');
    expect(text).toBe(JSON.stringify(snap));
    expect(gz[10]).toBe(0);
    const head = gz.subarray(15, 15 + gz.readUInt16LE(11)).toString('utf8');
    expect(head).toMatch(/^\{"schemaVersion":\d+,.*"ranks":\[$/);
    expect(meta.bytes).toBe(Buffer.byteLength(text));
  });

  it('marks the ranks of an agent that disconnects mid-snapshot agent-missing, and is whole again after it reconnects', async () => {
    const s = await server();
    const job = {
      starterPid: 77,
      uid: 1000,
      command: 'mpirun -np 6 ./a.out',
      hosts: ['n0', 'n1'],
      ranksPerHost: 3,
    };
    const a0 = startAgent({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      host: 'n0',
      reader: createFakeReader({ worldSize: 6 }),
      locator: createFakeLocator(job),
    });
    // n1's reader blocks until released, so its agent can be cut off while a request is open.
    const inner = createFakeReader({ worldSize: 6 });
    let block = true;
    let started = 0;
    let release: () => void = () => {};
    const gated: RankReader = {
      mpi: inner.mpi,
      async read(ranks, opts) {
        started++;
        if (block) await new Promise<void>((r) => (release = r));
        return inner.read(ranks, opts);
      },
    };
    const a1: AgentHandle = startAgent({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      host: 'n1',
      reader: gated,
      backoff: { initialMs: 20, maxMs: 50 },
    });
    cleanup.push(
      () => a0.dispose(),
      () => a1.dispose(),
    );
    await Promise.all([a0.whenConnected(), a1.whenConnected()]);
    const attached = await attach(s, 77, 'n0');

    const pending = s.app.inject({
      method: 'POST',
      url: `/api/jobs/${attached.id}/snapshots`,
      headers: s.admin,
    });
    await waitFor(() => started === 1, 'n1 to start reading');
    const reconnected = new Promise<void>((resolve) => {
      const sub = a1.onEvent((e) => {
        if (e.kind === 'welcome') {
          sub.dispose();
          resolve();
        }
      });
    });
    a1.simulateDrop();
    const res = await pending;
    expect(res.statusCode, res.body).toBe(201);
    const partial = json<{ snapshot: Meta }>(res).snapshot;
    expect(partial).toMatchObject({ ranks: 6, ok: 3, missing: 3, partial: true, missingRanks: [3, 4, 5] });
    const snap = await data(s, partial.id);
    expect(snap.ranks.map((r) => r.state.kind)).toEqual([
      'ok',
      'ok',
      'ok',
      'agent-missing',
      'agent-missing',
      'agent-missing',
    ]);
    const missing = snap.ranks[4]?.state;
    expect(missing?.kind === 'agent-missing' && missing.code).toBe('MQD_E_AGENT_MISSING');
    expect(missing?.kind === 'agent-missing' && missing.message).toMatch(/n1 disconnected/);
    release();

    await reconnected;
    block = false;
    const full = await snapshot(s, attached.id);
    expect(full).toMatchObject({ ranks: 6, ok: 6, missing: 0, partial: false });
    const history = await s.app.inject({
      method: 'GET',
      url: `/api/jobs/${attached.id}/snapshots`,
      headers: s.admin,
    });
    expect(json<{ snapshots: Meta[] }>(history).snapshots.map((m) => m.partial)).toEqual([false, true]);
  });

  it('names the ranks of a host without an agent, and of an agent that does not answer in time', async () => {
    const s = await server({ snapshotTimeoutMs: 100 });
    const job = { starterPid: 5, uid: 0, command: 'mpirun', hosts: ['a', 'b', 'c'], ranksPerHost: 2 };
    const never: RankReader = { mpi: null, read: () => new Promise<never>(() => {}) };
    const a = startAgent({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      host: 'a',
      reader: createFakeReader({ worldSize: 6 }),
      locator: createFakeLocator(job),
    });
    const b = startAgent({ serverUrl: s.url, token: AGENT_TOKEN, host: 'b', reader: never });
    cleanup.push(
      () => a.dispose(),
      () => b.dispose(),
    );
    await Promise.all([a.whenConnected(), b.whenConnected()]);
    const attached = await attach(s, 5, 'a');
    const meta = await snapshot(s, attached.id);
    expect(meta).toMatchObject({ ranks: 6, ok: 2, partial: true });
    const snap = await data(s, meta.id);
    // b's agent gives up after the read deadline and answers with error ranks; c has no agent.
    const states = snap.ranks.map((r) => (r.state.kind === 'ok' ? 'ok' : `${r.state.kind}:${r.state.code}`));
    expect(states).toEqual([
      'ok',
      'ok',
      'error:MQD_E_DLL_TIMEOUT',
      'error:MQD_E_DLL_TIMEOUT',
      'agent-missing:MQD_E_AGENT_MISSING',
      'agent-missing:MQD_E_AGENT_MISSING',
    ]);
    expect(meta.missingRanks).toEqual([4, 5]);
  });

  it('stores a snapshot whose answered ranks lie between unanswered ones: the ranks as the agent sent them, the gaps filled', async () => {
    const s = await server();
    const job = { starterPid: 6, uid: 0, command: 'mpirun', hosts: ['a', 'b', 'c'], ranksPerHost: 2 };
    await agentOn(s, 'b', job);
    const attached = await attach(s, 6, 'b');
    const meta = await snapshot(s, attached.id);
    expect(meta).toMatchObject({ ranks: 6, ok: 2, partial: true, missingRanks: [0, 1, 4, 5] });
    const text = await s.app.mqd.snapshots.json(meta.id);
    const snap = JSON.parse(text ?? '') as JobSnapshot;
    expect(snap.ranks.map((r) => `${r.rank}:${r.state.kind}`)).toEqual([
      '0:agent-missing',
      '1:agent-missing',
      '2:ok',
      '3:ok',
      '4:agent-missing',
      '5:agent-missing',
    ]);
    // The stored text is the snapshot's own JSON: the agent's ranks went in as it sent them.
    expect(text).toBe(JSON.stringify(snap));
    expect(snap.ranks[2]).toEqual(syntheticRingRank(2, 20_002, 'b', 6, 1, 0));
    expect(validateSnapshot(snap).ok).toBe(true);
  });

  it('turns a reader that throws into error ranks and keeps serving', async () => {
    const s = await server();
    let calls = 0;
    const inner = createFakeReader({ worldSize: 2 });
    const flaky: RankReader = {
      mpi: inner.mpi,
      async read(ranks, opts) {
        calls++;
        if (calls === 1) throw new Error('DLL host died');
        return inner.read(ranks, opts);
      },
    };
    const job = { starterPid: 9, uid: 0, command: 'mpirun', hosts: ['x'], ranksPerHost: 2 };
    await agentOn(s, 'x', job, flaky);
    const attached = await attach(s, 9);
    const first = await snapshot(s, attached.id);
    expect(first).toMatchObject({ ok: 0, errors: 2, missing: 0 });
    const snap = await data(s, first.id);
    expect(snap.ranks[0]?.state).toMatchObject({ kind: 'error', code: 'MQD_E_INTERNAL' });
    expect(snap.ranks[0]?.state.kind === 'error' && snap.ranks[0].state.message).toMatch(/DLL host died/);
    const second = await snapshot(s, attached.id);
    expect(second).toMatchObject({ ok: 2, errors: 0 });
  });
});

describe('snapshot byte budget', () => {
  it('refuses a snapshot over --max-snapshot-bytes with MQD_E_TOO_LARGE and stores nothing', async () => {
    const job = {
      starterPid: 88,
      uid: 1000,
      command: 'mpirun -np 4 ./a.out',
      hosts: ['n0'],
      ranksPerHost: 4,
    };
    const make = async (maxSnapshotBytes: number) => {
      const s = await server({ maxSnapshotBytes });
      await agentOn(s, 'n0', job);
      const attached = await attach(s, 88, 'n0');
      const res = await s.app.inject({
        method: 'POST',
        url: `/api/jobs/${attached.id}/snapshots`,
        headers: s.admin,
      });
      return { s, res, attached };
    };
    const small = await make(512);
    expect(small.res.statusCode).toBe(413);
    expect(json(small.res)).toMatchObject({ code: 'MQD_E_TOO_LARGE' });
    expect(await small.s.app.mqd.store.countSnapshots(small.attached.id)).toBe(0);
    // The same job under a budget it fits in is stored: the refusal was the budget's.
    const roomy = await make(1 << 20);
    expect(roomy.res.statusCode, roomy.res.body).toBe(201);
    expect(await roomy.s.app.mqd.store.countSnapshots(roomy.attached.id)).toBe(1);
  });
});

describe('snapshotJson (ranks stringified as they arrive)', () => {
  it('is JSON.stringify of the snapshot, with and without a core-file source', () => {
    const live = syntheticRingDeadlock({ ranks: 16 });
    const texts = live.ranks.map((r) => JSON.stringify(r));
    expect(snapshotJson(live, texts)).toBe(JSON.stringify(live));
    const cores: JobSnapshot = {
      ...live,
      source: { kind: 'core', cores: [{ rank: 0, path: '/tmp/core.1', pid: 1 }] },
    } as JobSnapshot;
    expect(snapshotJson(cores, texts)).toBe(JSON.stringify(cores));
  });
});

describe('chunks folded where they were read (another aggregator instance)', () => {
  // What a forwarded snapshot's holder sends (cluster-hub.ts): each chunk's folds and its JSON as
  // sent, deflated. The asker stores them without parsing; the stored snapshot and its summary
  // must be those of the same chunks arriving as they were sent.
  const RING = 6;
  /** A hub whose one host answers in the chunks given (rank numbers), folded or as sent. */
  const hubOf = (chunks: number[][], folded: boolean): SnapshotHub => ({
    isConnected: () => true,
    seenStarters: () => [],
    snapshot: async (host, _targets, _ms, onRanks, _owner, fold) => {
      for (const chunk of chunks) {
        const ranks = chunk.map((r) => syntheticRingRank(r, 30_000 + r, host, RING, 1, 0));
        // As an agent lays a chunk out (whitespace kept as sent).
        const text = Buffer.from(ranks.map((r) => JSON.stringify(r)).join(' , '));
        if (folded && fold !== undefined) {
          fold.onFolded({ folds: ranks.map(rankFold), part: await deflatePart(text, fold.level) });
        } else onRanks(ranks, text);
      }
      return ok({
        count: RING,
        durationMicros: 1000,
        mpi: { library: 'openmpi', dll: null, lengthUnit: 'bytes' },
      });
    },
  });
  const JOB: JobRecord = {
    id: JobId('folded-job'),
    host: 'h',
    starterPid: 77,
    starterStartTime: '1',
    uid: 0,
    command: 'mpirun',
    method: 'mpir',
    ranks: Array.from({ length: RING }, (_, r) => ({ rank: r, pid: 30_000 + r, host: 'h' })),
    createdAt: 0,
    createdBy: 'admin',
    endedAt: null,
  };
  async function storedWith(hub: SnapshotHub): Promise<{ meta: Meta & { digest: string }; text: string }> {
    const s = await startServer({}, { snapshotHub: hub, clock: () => 1_700_000_000_000 });
    cleanup.push(() => s.close());
    await s.app.mqd.store.saveJob(JOB, { who: 'admin', action: 'attach', jobId: JOB.id });
    const meta = (await snapshot(s, JOB.id)) as Meta & { digest: string };
    return { meta, text: (await s.app.mqd.snapshots.json(meta.id)) ?? '' };
  }

  it('stores the same snapshot and summary as the chunks sent as they are, runs or not', async () => {
    const runs = [
      [2, 3],
      [0, 1],
      [4, 5],
    ];
    const sent = await storedWith(hubOf(runs, false));
    const folded = await storedWith(hubOf(runs, true));
    // A chunk whose ranks are not a run of slots (5 before 4): the runs are given up, and the
    // folded chunks' ranks come back from their bytes.
    const notRuns = await storedWith(
      hubOf(
        [
          [0, 1],
          [5, 4],
          [2, 3],
        ],
        true,
      ),
    );
    const snap = JSON.parse(sent.text) as JobSnapshot;
    expect(snap.ranks.map((r) => r.rank)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(validateSnapshot(snap).ok).toBe(true);
    // The time the fan-in took is the one field that differs between runs.
    const timeless = (text: string) => text.replace(/"durationMicros":\d+/, '"durationMicros":0');
    // Runs: the chunks' bytes as sent (their whitespace too) are stored as they are.
    expect(sent.text).toContain('} , {');
    expect(timeless(folded.text)).toBe(timeless(sent.text));
    // Not runs: the stored text is the snapshot's own JSON, with the same ranks.
    expect(notRuns.text).toBe(JSON.stringify(JSON.parse(notRuns.text)));
    expect({ ...JSON.parse(notRuns.text), durationMicros: 0 }).toEqual({ ...snap, durationMicros: 0 });
    for (const other of [folded, notRuns]) {
      expect(other.meta).toMatchObject({
        ranks: 6,
        ok: 6,
        pendingSends: sent.meta.pendingSends,
        digest: sent.meta.digest,
      });
    }
  });
});
