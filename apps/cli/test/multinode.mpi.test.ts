// The aggregator and two agents on a real two-node MPICH job, each node a network namespace:
// the aggregator (`mqd serve --no-local-agent`, in its own namespace) merges what the node1 and
// node2 agents read into one snapshot; an agent killed while its part of a snapshot is in flight
// leaves exactly its ranks agent-missing; the restarted agent makes the snapshot whole again.
// hydra starts each node's proxy through fixtures/netns/fake-ssh, which enters that node's
// namespace, so ranks on different nodes talk TCP over the veths and the MPIR table names
// node1 and node2, as on a real cluster. Only the pid namespace is shared (the test must see
// every pid to clean up), and each agent reads only the ranks the aggregator sends it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Communicator, JobSnapshot, RankSnapshot } from '@mqd/model';
import {
  createCluster,
  done,
  type ExpectedOp,
  expectedQueues,
  fixtureBinary,
  launchNetnsJob,
  type NetnsAggregator,
  type NetnsCluster,
  type NetnsJob,
  type NetnsProcess,
  netnsId,
  netnsOfPid,
  pending,
  spawnInNetns,
  startNetnsAggregator,
  teardownAll,
  traceState,
  waitFor,
} from '@mqd/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const RUN = `mqdmn${process.pid}`;
const ADMIN_TOKEN = `admin-${RUN}-0123456789abcdef`;
const AGENT_TOKEN = `agent-${RUN}-0123456789abcdef`;
const HOSTS = ['node1', 'node2'] as const;
/** Ranks 0-1 on node1 (where mpiexec runs), 2-3 on node2. */
const HOST_OF_RANK = ['node1', 'node1', 'node2', 'node2'] as const;
const START_TIMEOUT_MS = 40_000;

let cluster: NetnsCluster | null = null;
let workDir: string | null = null;
let job: NetnsJob | null = null;
let served: NetnsAggregator | null = null;
/** Every agent ever started, killed ones included, for the teardown. */
const allAgents: NetnsProcess[] = [];
let jobId = '';
/** The digest of the first whole snapshot: the job is hung, so a whole snapshot must match it. */
let wholeDigest = '';

// ---- the REST API, through the forwarder in the aggregator's namespace ---------------------

function theServed(): NetnsAggregator {
  if (served === null) throw new Error('the aggregator was not started');
  return served;
}

const api = <T>(method: 'GET' | 'POST', path: string, body?: unknown) =>
  theServed().api<T>(method, path, body);

interface AgentRow {
  readonly agentId: string;
  readonly host: string;
  readonly connected: boolean;
  readonly pending: number;
}

const listAgents = async (): Promise<AgentRow[]> =>
  (await api<{ agents: AgentRow[] }>('GET', '/api/admin/agents')).body.agents;

interface SnapshotMeta {
  readonly id: string;
  readonly partial: boolean;
  readonly ranks: number;
  readonly ok: number;
  readonly missing: number;
  readonly missingRanks: number[];
  readonly durationMicros: number;
  readonly digest: string;
}

const requestSnapshot = () => api<{ snapshot: SnapshotMeta }>('POST', `/api/jobs/${jobId}/snapshots`);

async function stored(meta: SnapshotMeta): Promise<JobSnapshot> {
  const r = await api<{ snapshot: JobSnapshot }>('GET', `/api/snapshots/${meta.id}`);
  expect(r.status).toBe(200);
  return r.body.snapshot;
}

// ---- processes ---------------------------------------------------------------------------------

function theCluster(): NetnsCluster {
  if (cluster === null) throw new Error('the cluster was not created');
  return cluster;
}

function theJob(): NetnsJob {
  if (job === null) throw new Error('the MPI job was not launched');
  return job;
}

function startAgent(host: string): NetnsProcess {
  const node = theCluster().node(host);
  const p = spawnInNetns(`agent on ${host}`, node.netns, theServed().agentCommand(node));
  allAgents.push(p);
  return p;
}

/** Waits until the aggregator lists this agent process (its default id is HOST-PID) as connected. */
const untilConnected = (agent: NetnsProcess, host: string): Promise<void> =>
  theServed().untilConnected(agent, host, START_TIMEOUT_MS);

/** Every rank runs on: not stopped, not traced. A read must leave nothing attached. */
function expectRanksRunning(): void {
  const ranks = theJob().ranks;
  const seen = ranks.map((r) => {
    const s = traceState(r.pid);
    return s === undefined ? 'gone' : { stopped: s.state === 'T' || s.state === 't', tracerPid: s.tracerPid };
  });
  expect(seen).toEqual(ranks.map(() => ({ stopped: false, tracerPid: 0 })));
}

// ---- what the ranks' queues must be -------------------------------------------------------------

type OpRow = [peer: number | null, tag: number | null, length: number, status: string];
type QueueRows = { sends: OpRow[] | null; receives: OpRow[] | null; unexpected: OpRow[] | null };

const fromSnapshot = (q: Communicator['sends']): OpRow[] | null =>
  q === null ? null : q.map((o) => [o.peer.local, o.tag, o.length, o.status]);
const fromExpected = (q: readonly ExpectedOp[] | null): OpRow[] | null =>
  q === null ? null : q.map((o) => [o.peer, o.tag, o.length, o.status]);

function worldQueues(r: RankSnapshot): QueueRows | null {
  const w = r.communicators.find((c) => c.name === 'MPI_COMM_WORLD');
  return w === undefined
    ? null
    : {
        sends: fromSnapshot(w.sends),
        receives: fromSnapshot(w.receives),
        unexpected: fromSnapshot(w.unexpected),
      };
}

const EXPECTED_WORLD: QueueRows[] = expectedQueues('mpich', 'wrong_tag').map((comms) => {
  const w = comms.find((c) => c.name === 'MPI_COMM_WORLD');
  if (w === undefined) throw new Error('expectedQueues lists no MPI_COMM_WORLD for wrong_tag');
  return {
    sends: fromExpected(w.sends),
    receives: fromExpected(w.receives),
    unexpected: fromExpected(w.unexpected),
  };
});

/** The whole job, each rank read by the agent of its own node, with the queues wrong_tag must have. */
function expectWhole(meta: SnapshotMeta, snap: JobSnapshot): void {
  expect(meta).toMatchObject({ partial: false, ranks: 4, ok: 4, missing: 0, missingRanks: [] });
  expect(snap.ranks.map((r) => [r.rank, r.pid, r.host, r.state.kind])).toEqual(
    theJob().ranks.map((r) => [r.rank, r.pid, HOST_OF_RANK[r.rank], 'ok']),
  );
  expect(snap.mpi.library).toBe('mpich');
  // Rank 0 (node1) holds unexpected messages from ranks 2 and 3 (node2): they crossed the veths.
  expect(snap.ranks.map(worldQueues)).toEqual(EXPECTED_WORLD);
}

// ---- setup and teardown ------------------------------------------------------------------------

beforeAll(async () => {
  // Compile (or find) the fixture before anything is started.
  const binary = fixtureBinary('mpich', 'wrong_tag');
  workDir = mkdtempSync(join(tmpdir(), `${RUN}-`));
  cluster = createCluster(RUN, HOSTS);
  const c = cluster;

  // The aggregator and the job start side by side: both take a few seconds.
  const serving = startNetnsAggregator({
    netns: c.aggregatorNetns,
    workDir,
    adminToken: ADMIN_TOKEN,
    agentToken: AGENT_TOKEN,
    timeoutMs: START_TIMEOUT_MS,
  });
  const launched = launchNetnsJob({
    cluster: c,
    mpi: 'mpich',
    binary,
    starterHost: 'node1',
    placement: [
      ['node1', 2],
      ['node2', 2],
    ],
    // Hung ranks busy-poll; yielding on every poll leaves the cores to the agents.
    env: { MPIR_CVAR_POLLS_BEFORE_YIELD: '1' },
    workDir,
    timeoutMs: START_TIMEOUT_MS,
  });
  // Settle both before failing, so whichever started is still torn down.
  const [aggregator, started] = await Promise.allSettled([serving, launched]);
  if (aggregator.status === 'fulfilled') served = aggregator.value;
  if (started.status === 'fulfilled') job = started.value;
  if (aggregator.status === 'rejected') throw aggregator.reason;
  if (started.status === 'rejected') throw started.reason;

  const agents = HOSTS.map((h) => [h, startAgent(h)] as const);
  await Promise.all(agents.map(([h, a]) => untilConnected(a, h)));
}, 90_000);

afterAll(async () => {
  // Everything, even when setup failed half-way: processes first (they live in the namespaces).
  await teardownAll('multinode', [
    ...allAgents.map((a) => () => a.kill()),
    () => served?.kill(),
    () => job?.dispose(),
    () => cluster?.dispose(),
    () => workDir !== null && rmSync(workDir, { recursive: true, force: true }),
  ]);
}, 60_000);

// ---- the tests ----------------------------------------------------------------------------------

describe('MPICH job on two network-namespace nodes, an agent on each, the aggregator in a third', () => {
  it('runs every process in the namespace of its node', () => {
    const c = theCluster();
    const nsOf = (host: string) => netnsId(c.node(host).netns);
    expect(theJob().ranks.map((r) => netnsOfPid(r.pid))).toEqual(HOST_OF_RANK.map(nsOf));
    expect(allAgents.map((a) => netnsOfPid(a.pid))).toEqual(HOSTS.map(nsOf));
    expect(netnsOfPid(theJob().starterPid)).toBe(nsOf('node1'));
    expect(netnsOfPid(theServed().aggregator.pid)).toBe(netnsId(c.aggregatorNetns));
    expect(new Set([netnsOfPid(process.pid), ...HOSTS.map(nsOf), netnsId(c.aggregatorNetns)]).size).toBe(4);
  });

  it('attaches through the agent on the starter node and merges both nodes into one snapshot', async () => {
    const attach = await api<{ job: { id: string; method: string; hosts: unknown[] } }>(
      'POST',
      '/api/jobs/attach',
      {
        host: 'node1',
        starterPid: theJob().starterPid,
      },
    );
    expect(attach.status, JSON.stringify(attach.body)).toBe(201);
    expect(attach.body.job.method).toBe('mpir');
    expect(attach.body.job.hosts).toEqual([
      { host: 'node1', ranks: 2, agentConnected: true },
      { host: 'node2', ranks: 2, agentConnected: true },
    ]);
    jobId = attach.body.job.id;

    const r = await requestSnapshot();
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expectWhole(r.body.snapshot, await stored(r.body.snapshot));
    wholeDigest = r.body.snapshot.digest;
    expectRanksRunning();
  });

  it('an agent killed with its part of a snapshot in flight leaves exactly its ranks agent-missing', async () => {
    const victim = allAgents[1];
    if (victim === undefined || jobId === '') throw new Error('the node2 agent or the job is missing');
    const victimId = `node2-${victim.pid}`;
    // Frozen, the agent cannot answer: the request is provably in flight, not yet answered, when
    // it dies (a race with the read would make the outcome depend on timing). Its DLL host is
    // killed with it, as on a node whose agent crashes.
    victim.track();
    victim.signal('SIGSTOP');
    const inFlight = requestSnapshot();
    await waitFor(
      async () => {
        const row = (await listAgents()).find((a) => a.agentId === victimId);
        return row?.connected && row.pending > 0 ? done(true) : pending(JSON.stringify(row ?? null));
      },
      { timeoutMs: 20_000, what: 'the snapshot request to be pending on the node2 agent' },
    );
    await victim.kill();

    const r = await inFlight;
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const meta = r.body.snapshot;
    expect(meta).toMatchObject({ partial: true, ranks: 4, ok: 2, missing: 2, missingRanks: [2, 3] });
    // Ended by the disconnect, not by the 30 s snapshot timeout.
    expect(meta.durationMicros).toBeLessThan(20_000_000);
    const snap = await stored(meta);
    const ranks = theJob().ranks;
    expect(snap.ranks.map((x) => [x.rank, x.pid, x.host, x.state.kind])).toEqual(
      ranks.map((x) => [x.rank, x.pid, HOST_OF_RANK[x.rank], x.rank < 2 ? 'ok' : 'agent-missing']),
    );
    for (const x of snap.ranks.slice(2)) {
      expect(x.state).toMatchObject({
        kind: 'agent-missing',
        code: 'MQD_E_AGENT_MISSING',
        message: expect.stringMatching(/node2/),
      });
      expect(x.communicators).toEqual([]);
    }
    // What node1 read is still the real thing.
    expect(snap.ranks.slice(0, 2).map(worldQueues)).toEqual(EXPECTED_WORLD.slice(0, 2));
    const rows = await listAgents();
    expect(rows.find((a) => a.agentId === victimId)?.connected).toBe(false);
    expect(rows.find((a) => a.host === 'node1')?.connected).toBe(true);
    expectRanksRunning();
  });

  it('the restarted agent reconnects and the next snapshot is whole again', async () => {
    const agent = startAgent('node2');
    await untilConnected(agent, 'node2');
    const jobNow = await api<{ job: { hosts: unknown[] } }>('GET', `/api/jobs/${jobId}`);
    expect(jobNow.body.job.hosts).toContainEqual({ host: 'node2', ranks: 2, agentConnected: true });

    const r = await requestSnapshot();
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expectWhole(r.body.snapshot, await stored(r.body.snapshot));
    // The job is hung: the whole snapshot is the same as before the agent was lost.
    expect(r.body.snapshot.digest).toBe(wholeDigest);
    expectRanksRunning();
  });
});
