// The hang watch in the aggregator (apps/server/src/watch/): discovery merged into
// cluster jobs, samples on a manual clock (the test calls tick(); no timer runs by itself),
// the model's real verdict over the model's synthetic jobs, one webhook per hang episode to a
// real HTTP listener, the stop budget, the opt-out, restarts, ended jobs, the routes and /metrics.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type ApiFleetJob,
  type ApiJob,
  type DiscoveredJob,
  decodeResponse,
  err,
  type Frame,
  JobId,
  type JobSnapshot,
  mqdError,
  ok,
  type RankCounters,
  type RankSnapshot,
  type Result,
  syntheticProgressingPair,
  syntheticStacksJob,
  syntheticStuckPair,
  type ThreadStack,
} from '@mqd/model';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { describe, expect, it } from 'vitest';
import type { SnapshotHub } from '../src/fanout/fanout.js';
import { SqliteStore } from '../src/store/dialect-sqlite.js';
import { mergeDiscovered, programInScope, programOf, programPathOf } from '../src/watch/cluster.js';
import type { SlurmQuery } from '../src/watch/end-reason.js';
import type { CountersReply, WatchAgents } from '../src/watch/source.js';
import type { Timers } from '../src/watch/watcher.js';
import { ADMIN_TOKEN, bodyJson, cleanupAfterEach, startServer, type TestServer, waitFor } from './helpers.js';

const cleanup = cleanupAfterEach();
const PERIOD_S = 60;
const T0 = 1_800_000_000_000;
const PUBLIC = 'https://mqd.example.test';

// --- synthetic jobs: what each rank shows when stopped, and its /proc counters -------------

const frame = (fn: string, line: number): Frame => ({
  pc: '0x401000',
  function: fn,
  module: '/home/user/app',
  file: 'app.c',
  line,
  inlined: false,
});
const thread = (tid: number, frames: Frame[]): ThreadStack => ({
  tid,
  name: 'app',
  main: true,
  frames,
  truncated: false,
  error: null,
});

/** Every rank of `snap` blocked in `call` (in MPI). */
function inMpi(snap: JobSnapshot, call: string): JobSnapshot {
  return {
    ...snap,
    ranks: snap.ranks.map(
      (r): RankSnapshot => ({
        ...r,
        threads: [thread(r.pid, [frame('poll', 0), frame(call, 0), frame('main', 20)])],
        mpiCall: { function: call, tid: r.pid, args: null },
      }),
    ),
  };
}

/** Every rank outside MPI, at a line that moves with `step`. */
function computing(snap: JobSnapshot, step: number): JobSnapshot {
  return {
    ...snap,
    ranks: snap.ranks.map(
      (r): RankSnapshot => ({
        ...r,
        threads: [thread(r.pid, [frame('kernel', 100 + (step % 7)), frame('main', 20)])],
        mpiCall: null,
      }),
    ),
  };
}

interface FakeJob {
  readonly d: Omit<DiscoveredJob, 'ranks'>;
  /** host -> its ranks (world rank, pid). */
  readonly layout: Record<string, { rank: number; pid: number }[]>;
  /** The snapshot the n-th read of this job sees (n counts reads of the job). */
  readonly snap: (n: number) => JobSnapshot;
  readonly counters: (n: number, rank: number) => Omit<RankCounters, 'rank'>;
}

const SLEEPING = () => ({ cpuTicks: 10, switches: 5, state: 'S' });

function discovered(job: FakeJob, host: string): DiscoveredJob {
  return {
    ...job.d,
    ranks: (job.layout[host] ?? []).map((r) => ({ ...r, startTime: String(1000 + r.pid) })),
  };
}

/**
 * The agents, faked: discovery reports per host, /proc counters, and the snapshot side of the
 * hub. Counts every stop request per job, so a job never stopped is proven so.
 */
class FakeCluster implements WatchAgents {
  readonly jobs = new Map<string, FakeJob>();
  readonly hosts = new Set<string>();
  readonly reads = new Map<string, number>();
  readonly countersAsked = new Map<string, number>();
  pausedMicros = 2000;
  /** Agents that answer every request with MQD_E_AGENT_SILENT (frozen nodes). */
  silent = false;

  add(job: FakeJob): void {
    this.jobs.set(job.d.key, job);
    for (const h of Object.keys(job.layout)) this.hosts.add(h);
  }
  remove(key: string): void {
    this.jobs.delete(key);
  }
  discovered() {
    const out: { host: string; job: DiscoveredJob; at: number }[] = [];
    for (const job of this.jobs.values())
      for (const host of Object.keys(job.layout)) out.push({ host, job: discovered(job, host), at: T0 });
    return out;
  }
  isConnected(host: string): boolean {
    return this.hosts.has(host);
  }
  private jobOfPid(pid: number): FakeJob | undefined {
    return [...this.jobs.values()].find((j) =>
      Object.values(j.layout).some((l) => l.some((r) => r.pid === pid)),
    );
  }
  async counters(
    host: string,
    req: { ranks: { rank: number; pid: number }[]; ownerUid: number },
  ): Promise<Result<CountersReply>> {
    if (this.silent) return err(mqdError('MQD_E_AGENT_SILENT', `the agent on ${host} stopped answering`));
    const job = this.jobOfPid(req.ranks[0]?.pid ?? -1);
    if (job === undefined || job.d.uid !== req.ownerUid)
      return ok<CountersReply>({ ranks: [], errors: [], clockTicksPerSecond: 100, at: 0 });
    const n = (this.countersAsked.get(job.d.key) ?? 0) + 1;
    this.countersAsked.set(job.d.key, n);
    void host;
    return ok<CountersReply>({
      ranks: req.ranks.map((r) => ({ rank: r.rank, ...job.counters(n, r.rank) })),
      errors: [],
      clockTicksPerSecond: 100,
      at: 0,
    });
  }
  /** The snapshot side of the hub (SnapshotService's). */
  readonly hub: SnapshotHub = {
    seenStarters: () => [],
    isConnected: (host) => this.hosts.has(host),
    snapshot: async (host, targets, _timeout, onRanks) => {
      if (this.silent) return err(mqdError('MQD_E_AGENT_SILENT', `the agent on ${host} stopped answering`));
      const job = this.jobOfPid(targets[0]?.pid ?? -1);
      if (job === undefined) throw new Error(`no fake job has pid ${targets[0]?.pid}`);
      // One read of the job spans its hosts: count it once (on its first host).
      const first = Object.keys(job.layout)[0];
      if (host === first) this.reads.set(job.d.key, (this.reads.get(job.d.key) ?? 0) + 1);
      const snap = job.snap(this.reads.get(job.d.key) ?? 1);
      const ranks = targets.map((t) => {
        const r = snap.ranks.find((x) => x.rank === t.rank);
        if (r === undefined) throw new Error(`rank ${t.rank} not in the fake snapshot`);
        return { ...r, pid: t.pid, host, pausedMicros: this.pausedMicros };
      });
      onRanks(ranks);
      return ok({ count: ranks.length, mpi: snap.mpi, durationMicros: 10 });
    },
  };
}

const ring = () => syntheticStacksJob({ ranks: 4, scenario: 'ssend-ring' });

/** A ring deadlock of 4 ranks on two nodes (Slurm job 101 of uid 1000). */
const deadlocked = (): FakeJob => ({
  d: {
    key: 'slurm:101',
    kind: 'slurm',
    slurmJob: '101',
    uid: 1000,
    command: '/home/alice/ring',
    startedAt: T0 - 3_600_000,
    jobName: 'ring',
    partition: 'batch',
    account: 'physics',
    watch: 'on',
  },
  layout: {
    n1: [
      { rank: 0, pid: 100 },
      { rank: 1, pid: 101 },
    ],
    n2: [
      { rank: 2, pid: 200 },
      { rank: 3, pid: 201 },
    ],
  },
  snap: () => ring(),
  counters: SLEEPING,
});

/** Ranks outside MPI burning CPU with changing stacks (uid 1001). */
const computeLoop = (): FakeJob => ({
  d: {
    key: 'slurm:102',
    kind: 'slurm',
    slurmJob: '102',
    uid: 1001,
    command: '/home/bob/compute',
    startedAt: T0,
    jobName: 'compute',
    partition: 'batch',
    watch: 'on',
  },
  layout: {
    n1: [
      { rank: 0, pid: 300 },
      { rank: 1, pid: 301 },
      { rank: 2, pid: 302 },
      { rank: 3, pid: 303 },
    ],
  },
  snap: (n) => computing(ring(), n),
  counters: (n) => ({ cpuTicks: n * 6000, switches: n * 10, state: 'R' }),
});

/** Blocked in MPI_Recv, but a message moves every second sample (uid 1000). */
const slowJob = (): FakeJob => {
  const [a, b] = syntheticProgressingPair({ ranks: 4 });
  return {
    d: {
      key: 'slurm:103',
      kind: 'slurm',
      slurmJob: '103',
      uid: 1000,
      command: '/home/alice/slow',
      startedAt: T0,
      watch: 'on',
    },
    layout: {
      n2: [
        { rank: 0, pid: 400 },
        { rank: 1, pid: 401 },
        { rank: 2, pid: 402 },
        { rank: 3, pid: 403 },
      ],
    },
    snap: (n) => inMpi(Math.floor(n / 2) % 2 === 0 ? a : b, 'MPI_Recv'),
    counters: SLEEPING,
  };
};

/** A pipeline stuck for good (in MPI), with MQD_WATCH=off in its environment. */
const optedOut = (): FakeJob => ({
  d: {
    key: 'starter:n3:500:77',
    kind: 'starter',
    starterPid: 500,
    starterStartTime: '77',
    uid: 1000,
    command: 'mpirun -np 2 ./private',
    startedAt: T0,
    watch: 'off',
  },
  layout: {
    n3: [
      { rank: 0, pid: 501 },
      { rank: 1, pid: 502 },
    ],
  },
  snap: () => inMpi(syntheticStuckPair({ ranks: 2 })[0], 'MPI_Recv'),
  counters: SLEEPING,
});

// --- the webhook listener and the server --------------------------------------------------

interface Hook {
  readonly url: string;
  readonly bodies: unknown[];
}

async function webhookListener(status = 200): Promise<Hook> {
  const bodies: unknown[] = [];
  const server: Server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  cleanup.push(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}/hooks/SECRET-abc`, bodies };
}

/** Timers that never fire by themselves: the test runs the rounds (tick) or fires them. */
class ManualTimers implements Timers {
  readonly armed = new Map<number, { fn: () => void; ms: number }>();
  private next = 1;
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.armed.set(id, { fn, ms });
    return id;
  }
  clearTimeout(h: unknown): void {
    this.armed.delete(h as number);
  }
  fire(): void {
    const [id, t] = [...this.armed][0] ?? [];
    if (id === undefined || t === undefined) throw new Error('no timer armed');
    this.armed.delete(id);
    t.fn();
  }
}

interface Rig {
  readonly s: TestServer;
  readonly fake: FakeCluster;
  readonly clock: { now: number };
  readonly timers: ManualTimers;
  /** Advance the clock by one period and run one round. */
  round(): Promise<void>;
  fleet(headers?: Record<string, string>): Promise<ReturnType<typeof decodeFleet>>;
}

function decodeFleet(body: unknown) {
  const d = decodeResponse('fleet', body);
  if (!d.ok) throw new Error(d.error.message);
  return d.value;
}

async function rig(
  o: {
    webhooks?: string[];
    budgetMs?: number;
    store?: SqliteStore;
    fake?: FakeCluster;
    now?: number;
    slurm?: SlurmQuery;
  } = {},
): Promise<Rig> {
  const fake = o.fake ?? new FakeCluster();
  const clock = { now: o.now ?? T0 };
  const timers = new ManualTimers();
  const s = await startServer(
    {
      publicUrl: PUBLIC,
      watchEnabled: true,
      watchPeriodSeconds: PERIOD_S,
      watchHungAfter: 3,
      watchStopBudgetMs: o.budgetMs ?? 1000,
      watchWebhooks: o.webhooks ?? [],
    },
    {
      clock: () => clock.now,
      snapshotHub: fake.hub,
      watchAgents: fake,
      watchTimers: timers,
      slurm: o.slurm ?? null,
      webhookBackoffMs: 1,
      ...(o.store ? { store: o.store } : {}),
    },
  );
  cleanup.push(() => s.close());
  return {
    s,
    fake,
    clock,
    timers,
    round: async () => {
      clock.now += PERIOD_S * 1000;
      await s.app.mqd.watcher.tick();
      await s.app.mqd.watcher.settled();
    },
    fleet: async (headers = s.admin) => {
      const res = await s.app.inject({ method: 'GET', url: '/api/fleet', headers });
      expect(res.statusCode, res.body).toBe(200);
      return decodeFleet(bodyJson(res));
    },
  };
}

const byKey = (f: { jobs: ApiFleetJob[] }, key: string): ApiFleetJob => {
  const j = f.jobs.find((x) => x.key === key);
  if (j === undefined) throw new Error(`no job ${key} in the fleet`);
  return j;
};

interface Family {
  readonly name: string;
  readonly metrics: { readonly labels?: Record<string, string>; readonly value?: string }[];
}

async function userHeaders(s: TestServer, name: string, uid: number): Promise<Record<string, string>> {
  const res = await s.app.inject({
    method: 'POST',
    url: '/api/admin/users',
    headers: s.admin,
    payload: { name, uid },
  });
  expect(res.statusCode).toBe(201);
  return { authorization: `Bearer ${(bodyJson(res) as { token: string }).token}` };
}

// --- the tests -----------------------------------------------------------------------------

describe('discovery', () => {
  it('merges one Slurm job on two nodes into one job, and keeps the same key of another uid apart', () => {
    const a = deadlocked();
    const foreign = { ...discovered(a, 'n2'), uid: 4242, ranks: [{ rank: 9, pid: 999, startTime: '1' }] };
    const jobs = mergeDiscovered([
      { host: 'n2', job: discovered(a, 'n2'), at: T0 + 5 },
      { host: 'n1', job: { ...discovered(a, 'n1'), partition: undefined as unknown as string }, at: T0 },
      { host: 'n3', job: foreign, at: T0 },
    ]);
    expect(jobs.map((j) => j.id)).toEqual(['1000:slurm:101', '4242:slurm:101']);
    const [ring4, other] = jobs;
    expect(ring4?.nodes).toEqual(['n1', 'n2']);
    expect(ring4?.ranks.map((r) => `${r.rank}@${r.host}:${r.pid}`)).toEqual([
      '0@n1:100',
      '1@n1:101',
      '2@n2:200',
      '3@n2:201',
    ]);
    // The store job lives on the first rank's host.
    expect(ring4?.host).toBe('n1');
    expect(ring4?.first.partition).toBe('batch');
    expect(other?.ranks.map((r) => r.pid)).toEqual([999]);
  });

  it("names a job by Slurm's job name, else by the program its starter runs", () => {
    const starter = optedOut().d;
    expect(programOf({ ...starter, command: 'mpirun -np 2 --mca btl self,vader ./private 3' })).toBe(
      'private',
    );
    expect(programOf({ ...starter, command: '/usr/bin/mpiexec -n 4 /home/alice/bin/solver' })).toBe('solver');
    expect(programOf({ ...starter, command: './direct --steps=10' })).toBe('direct');
    expect(programOf(deadlocked().d)).toBe('ring');
  });
});

describe('the program scope', () => {
  it('matches a path prefix against the program the starter runs, a name against its file name', () => {
    expect(programPathOf('mpirun -np 4 --mca btl self /scratch/proj/bin/solver 3')).toBe(
      '/scratch/proj/bin/solver',
    );
    expect(programPathOf('/scratch/proj/direct --steps=10')).toBe('/scratch/proj/direct');
    expect(programInScope('mpirun -np 4 /scratch/proj/bin/solver', ['/scratch/proj/'])).toBe(true);
    expect(programInScope('mpirun -np 4 /scratch/other/solver', ['/scratch/proj/'])).toBe(false);
    // The prefix is the program's, not an argument's.
    expect(programInScope('mpirun -np 4 /bin/solver /scratch/proj/input', ['/scratch/proj/'])).toBe(false);
    expect(programInScope('mpiexec -n 2 ./solver', ['solver'])).toBe(true);
    expect(programInScope('mpiexec -n 2 ./solver2', ['solver'])).toBe(false);
    expect(programInScope('mpiexec -n 2 /opt/mpiexec-tools/solver', ['/opt/mpi'])).toBe(true);
    // Or the starter's: a site's own launcher.
    expect(programInScope('/opt/site/bin/mpirun -np 2 ./solver', ['/opt/site/'])).toBe(true);
    expect(programInScope('/usr/bin/mpirun -np 2 ./solver', ['/opt/site/'])).toBe(false);
  });
});

describe('the hang watch', () => {
  it('flags exactly the deadlocked job hung, notifies once with a share link that opens its snapshot', async () => {
    const hook = await webhookListener();
    const r = await rig({ webhooks: [hook.url] });
    r.fake.add(deadlocked());
    r.fake.add(computeLoop());
    r.fake.add(slowJob());
    const alice = await userHeaders(r.s, 'alice', 1000);

    const states: Record<string, string[]> = {};
    for (let i = 0; i < 6; i++) {
      await r.round();
      const f = await r.fleet();
      for (const j of f.jobs) states[j.key] = [...(states[j.key] ?? []), j.state];
    }
    // Flagged by the third sample (hungAfterSamples 3 at most; a proven deadlock may be sooner).
    const ringStates = states['slurm:101'] ?? [];
    expect(ringStates.slice(0, 3)).toContain('hung');
    expect(ringStates.slice(ringStates.indexOf('hung'))).toEqual(
      Array(ringStates.length - ringStates.indexOf('hung')).fill('hung'),
    );
    expect(states['slurm:102']).not.toContain('hung');
    expect(states['slurm:102']?.at(-1)).toBe('computing');
    expect(states['slurm:103']).not.toContain('hung');

    // Exactly one webhook, for the ring, with the fields a chat tool and a script read.
    await waitFor(() => hook.bodies.length >= 1, 'the webhook');
    expect(hook.bodies).toHaveLength(1);
    const body = hook.bodies[0] as { text: string; mqd: Record<string, unknown> };
    expect(body.mqd).toMatchObject({
      jobKey: 'slurm:101',
      slurmJob: '101',
      user: 'alice',
      uid: 1000,
      state: 'hung',
    });
    const ringJob = byKey(await r.fleet(), 'slurm:101');
    expect(body.mqd['jobId']).toBe(ringJob.jobId);
    expect(body.mqd['since']).toBe(ringJob.since);
    expect(String(body.mqd['leastProgressed'])).toBe(ringJob.leastProgressed);
    // Every rank of the ring is in the cycle: none is behind the others.
    expect(ringJob.leastProgressed).toBe('');
    expect(body.mqd['diagnosis']).toBe(ringJob.diagnosis);
    expect(body.text).toContain('101');
    expect(body.text).toContain('alice');
    const link = String(body.mqd['link']);
    expect(body.text).toContain(link);
    expect(link.startsWith(`${PUBLIC}/s/`)).toBe(true);

    // The link opens the snapshot behind the verdict (without a login), which shows the ring.
    const shareId = link.slice(`${PUBLIC}/s/`.length);
    const shared = await r.s.app.inject({ method: 'GET', url: `/api/shared/${shareId}` });
    expect(shared.statusCode).toBe(200);
    const sharedBody = bodyJson(shared) as { meta: { id: string; jobId: string }; snapshot: JobSnapshot };
    expect(sharedBody.meta.id).toBe(ringJob.snapshotId);
    expect(sharedBody.meta.jobId).toBe(ringJob.jobId);
    expect(sharedBody.snapshot.ranks.map((x) => x.host)).toEqual(['n1', 'n1', 'n2', 'n2']);

    // The dashboard was told too, and the owner may open the job as if attached.
    const job = await r.s.app.inject({ method: 'GET', url: `/api/jobs/${ringJob.jobId}`, headers: alice });
    expect(job.statusCode).toBe(200);

    // Six samples of a hung job: the queues never changed, so the state change stored one
    // snapshot for each state it went through, not one per sample.
    const stored = await r.s.app.mqd.store.countSnapshots(String(ringJob.jobId));
    expect(stored).toBeLessThanOrEqual(new Set(ringStates).size);
    expect(ringJob.samples).toBe(6);
    expect(ringJob.history).toHaveLength(6);
    expect(ringJob.history.filter((h) => h.snapshotId !== null)).toHaveLength(stored);
  });

  it('calls a job whose agents answer nothing unknown, never hung', async () => {
    const hook = await webhookListener();
    const r = await rig({ webhooks: [hook.url] });
    r.fake.add(deadlocked());
    r.fake.silent = true;
    for (let i = 0; i < 5; i++) await r.round();
    const j = byKey(await r.fleet(), 'slurm:101');
    expect(j.samples).toBe(5);
    expect(j.history.map((h) => h.state)).toEqual(Array(5).fill('unknown'));
    expect(j.endedAt).toBeNull();
    expect(j.diagnosis).toBe('no rank could be read in this sample');
    // Nothing read, nothing stored.
    expect(j.snapshotId).toBeNull();
    expect(hook.bodies).toEqual([]);
    // The agents answer again: the hang is found.
    r.fake.silent = false;
    for (let i = 0; i < 3; i++) await r.round();
    expect(byKey(await r.fleet(), 'slurm:101').state).toBe('hung');
    await waitFor(() => hook.bodies.length === 1, 'the notification');
  });

  it('never stops a job that opted out, and shows it as not watched', async () => {
    const r = await rig();
    r.fake.add(optedOut());
    r.fake.add(deadlocked());
    for (let i = 0; i < 4; i++) await r.round();
    expect(r.fake.reads.get('starter:n3:500:77')).toBeUndefined();
    expect(r.fake.reads.get('slurm:101')).toBe(4);
    // The auto-snapshots (--auto-snapshot-seconds) leave the discovered jobs to the watch.
    await r.s.app.mqd.snapshots.autoTick();
    expect(r.fake.reads.get('starter:n3:500:77')).toBeUndefined();
    expect(r.fake.reads.get('slurm:101')).toBe(4);
    const j = byKey(await r.fleet(), 'starter:n3:500:77');
    expect(j.watch).toBe('off-by-job');
    expect(j.state).toBe('unknown');
    expect(j.samples).toBe(0);
    expect(j.snapshotId).toBeNull();
    expect(j.stopMsThisHour).toBe(0);
    // Ended, it still shows as not watched.
    r.fake.remove('starter:n3:500:77');
    await r.round();
    const ended = byKey(await r.fleet(), 'starter:n3:500:77');
    expect(ended.endedAt).not.toBeNull();
    expect(ended.watch).toBe('off-by-job');
  });

  it('samples a job someone attached already as that job, never a second copy of it', async () => {
    const r = await rig();
    const base = optedOut();
    const job: FakeJob = { ...base, d: { ...base.d, watch: 'on' } };
    const store = r.s.app.mqd.store;
    // Attached by its starter (as POST /api/jobs/attach stores it) before the watch found it.
    await store.saveJob(
      {
        id: JobId('attached-by-alice'),
        host: 'n3',
        starterPid: 500,
        starterStartTime: '77',
        uid: 1000,
        command: job.d.command,
        method: 'mpir-proctable',
        ranks: (job.layout['n3'] ?? []).map((x) => ({ ...x, host: 'n3', startTime: String(1000 + x.pid) })),
        createdAt: T0,
        createdBy: 'alice',
        endedAt: null,
      },
      { who: 'alice', action: 'attach', jobId: JobId('attached-by-alice'), detail: 'test' },
    );
    r.fake.add(job);
    for (let i = 0; i < 2; i++) await r.round();
    const f = byKey(await r.fleet(), job.d.key);
    expect(f.jobId).toBe('attached-by-alice');
    expect(f.samples).toBe(2);
    expect(r.fake.reads.get(job.d.key)).toBe(2);
    expect((await store.jobs(null)).map((x) => [x.id, x.method])).toEqual([
      ['attached-by-alice', 'mpir-proctable'],
    ]);
  });

  it('stops no rank beyond its budget for the hour, then samples /proc only (mode budget)', async () => {
    // 2 ms per stop, 5 ms per rank per hour: two stops fit, a third would not.
    const r = await rig({ budgetMs: 5 });
    r.fake.add(slowJob());
    for (let i = 0; i < 5; i++) await r.round();
    expect(r.fake.reads.get('slurm:103')).toBe(2);
    expect(r.fake.countersAsked.get('slurm:103')).toBe(5);
    const j = byKey(await r.fleet(), 'slurm:103');
    expect(j.watch).toBe('budget');
    expect(j.stopMsThisHour).toBe(4);
    expect(j.stopBudgetMs).toBe(5);
    const metrics = await r.s.app.inject({ method: 'GET', url: '/metrics', headers: r.s.admin });
    expect(metrics.body).toMatch(/^mqd_watch_budget_skips_total 3$/m);
    expect(metrics.body).toMatch(/^mqd_watch_samples_total 5$/m);
    // An hour later the first stops have aged out of the window: the job is stopped again.
    r.clock.now += 3_600_000;
    await r.round();
    expect(r.fake.reads.get('slurm:103')).toBe(3);
  });

  it('keeps a hung verdict, its since and diagnosis while the budget pauses sampling, and says until when', async () => {
    // Two stops fit the budget: enough for the deadlock's two agreeing samples, then /proc only.
    const r = await rig({ budgetMs: 5 });
    const job = deadlocked();
    r.fake.add(job);
    await r.round();
    await r.round();
    const hung = byKey(await r.fleet(), job.d.key);
    expect(hung.state).toBe('hung');
    expect(hung.pausedUntil ?? null).toBeNull();
    const firstStop = T0 + PERIOD_S * 1000;
    for (let i = 0; i < 6; i++) await r.round();
    expect(r.fake.reads.get(job.d.key)).toBe(2);
    const paused = byKey(await r.fleet(), job.d.key);
    expect(paused.watch).toBe('budget');
    expect(paused.state).toBe('hung');
    expect(paused.since).toBe(hung.since);
    expect(paused.diagnosis).toBe(hung.diagnosis);
    // The first stop leaves the hour's budget an hour after it was made.
    expect(paused.pausedUntil).toBe(new Date(firstStop + 3_600_000).toISOString());
    expect(paused.history.map((h) => h.state).slice(-6)).toEqual(Array(6).fill('hung'));
    // The job list says the same: hung, since the same time, paused until the same time.
    const res = await r.s.app.inject({ method: 'GET', url: '/api/jobs', headers: r.s.admin });
    const listed = (bodyJson(res) as { jobs: ApiJob[] }).jobs.find((j) => j.id === paused.jobId);
    expect(listed?.state).toBe('hung');
    expect(listed?.since).toBe(hung.since);
    expect(listed?.pausedUntil).toBe(paused.pausedUntil);
    const metrics = await r.s.app.inject({ method: 'GET', url: '/metrics', headers: r.s.admin });
    expect(metrics.body).toMatch(/^mqd_jobs_looking_hung 1$/m);
  });

  it('does not notify an open episode again after a restart, and notifies a new one after progress', async () => {
    const hook = await webhookListener();
    const store = new SqliteStore({
      dataDir: ':memory:',
      retention: { maxSnapshotsPerJob: 100, maxAgeSeconds: 0 },
    });
    cleanup.push(() => store.close());
    const fake = new FakeCluster();
    fake.add(deadlocked());
    const first = await rig({ webhooks: [hook.url], store, fake });
    for (let i = 0; i < 4; i++) await first.round();
    await waitFor(() => hook.bodies.length === 1, 'the first notification');
    await first.s.close();

    const hungSince = (hook.bodies[0] as { mqd: { since: string } }).mqd.since;
    // A new aggregator on the same store: the job is still hung, the episode still open (and
    // the hang still dates from its start).
    const second = await rig({ webhooks: [hook.url], store, fake, now: first.clock.now });
    for (let i = 0; i < 5; i++) await second.round();
    const again = byKey(await second.fleet(), 'slurm:101');
    expect(again.state).toBe('hung');
    expect(again.since).toBe(hungSince);
    expect(hook.bodies).toHaveLength(1);

    // It progresses (the queues move every read), then hangs again: a second episode.
    const ringJob = fake.jobs.get('slurm:101');
    if (ringJob === undefined) throw new Error('no ring');
    const [a, b] = syntheticProgressingPair({ ranks: 4 });
    fake.add({ ...ringJob, snap: (n) => inMpi(n % 2 === 0 ? a : b, 'MPI_Recv') });
    await second.round();
    await second.round();
    expect(byKey(await second.fleet(), 'slurm:101').state).toBe('progressing');
    fake.add(ringJob);
    for (let i = 0; i < 4; i++) await second.round();
    await waitFor(() => hook.bodies.length === 2, 'the second notification');
    const links = hook.bodies.map((x) => (x as { mqd: { link: string } }).mqd.link);
    expect(new Set(links).size).toBe(2);
  });

  it("keeps the last sample and snapshot of a job that ended, with endedAt and Slurm's end state", async () => {
    const asked: string[] = [];
    const slurm: SlurmQuery = (cmd, args) => {
      asked.push([cmd, ...args].join(' '));
      if (args[2] === '101')
        return 'JobId=101 JobName=ring UserId=alice(1000) JobState=TIMEOUT Reason=TimeLimit';
      throw Object.assign(new Error('slurm_load_jobs error: Invalid job id specified'), { status: 1 });
    };
    const r = await rig({ slurm });
    r.fake.add(deadlocked());
    r.fake.add(slowJob());
    for (let i = 0; i < 3; i++) await r.round();
    const before = byKey(await r.fleet(), 'slurm:101');
    r.fake.remove('slurm:101');
    await r.round();
    await r.s.app.mqd.watcher.settled();
    const after = byKey(await r.fleet(), 'slurm:101');
    expect(after.endedAt).toBe(new Date(r.clock.now).toISOString());
    expect(after.endReason).toBe('TIMEOUT');
    expect(asked).toEqual(['scontrol show job 101 -o']);
    expect(after.snapshotId).toBe(before.snapshotId);
    expect(after.snapshotId).not.toBeNull();
    expect(after.history).toEqual(before.history);
    expect(after.state).toBe(before.state);
    // The store job ended too, and the snapshot still opens.
    const job = await r.s.app.mqd.store.job(String(after.jobId));
    expect(job?.endedAt).toBe(r.clock.now);
    const snap = await r.s.app.inject({
      method: 'GET',
      url: `/api/snapshots/${after.snapshotId}`,
      headers: r.s.admin,
    });
    expect(snap.statusCode).toBe(200);
    // Not sampled any more.
    await r.round();
    expect(byKey(await r.fleet(), 'slurm:101').samples).toBe(before.samples);
    // slurmctld forgot the other one: its end reason is unknown, not an error.
    r.fake.remove('slurm:103');
    await r.round();
    expect(byKey(await r.fleet(), 'slurm:103').endReason).toBeNull();
    expect(byKey(await r.fleet(), 'slurm:103').endedAt).not.toBeNull();
  });

  it('shows users only their own jobs, admins all; the policy is admin-only and validated', async () => {
    const r = await rig();
    r.fake.add(deadlocked());
    r.fake.add(computeLoop());
    const alice = await userHeaders(r.s, 'alice', 1000);
    const bob = await userHeaders(r.s, 'bob', 1001);
    await r.round();
    expect((await r.fleet()).jobs.map((j) => j.key).sort()).toEqual(['slurm:101', 'slurm:102']);
    expect((await r.fleet(alice)).jobs.map((j) => j.key)).toEqual(['slurm:101']);
    expect((await r.fleet(bob)).jobs.map((j) => j.key)).toEqual(['slurm:102']);
    expect(byKey(await r.fleet(bob), 'slurm:102').user).toBe('bob');

    const get = await r.s.app.inject({ method: 'GET', url: '/api/admin/watch', headers: alice });
    expect(get.statusCode).toBe(403);
    const policy = { ...(await r.fleet()).policy, users: ['bob'] };
    const bad = await r.s.app.inject({
      method: 'POST',
      url: '/api/admin/watch',
      headers: r.s.admin,
      payload: { ...policy, periodSeconds: 0 },
    });
    expect(bad.statusCode).toBe(400);
    expect((bodyJson(bad) as { code: string }).code).toBe('MQD_E_BAD_INPUT');
    // Cores need a core directory this server does not have: refused, the stored policy kept.
    const cores = await r.s.app.inject({
      method: 'POST',
      url: '/api/admin/watch',
      headers: r.s.admin,
      payload: { ...policy, captureCores: true },
    });
    expect(cores.statusCode).toBe(400);
    expect((bodyJson(cores) as { message: string }).message).toMatch(
      /needs a core directory: .*--core-dir DIR/,
    );
    expect((await r.s.app.mqd.store.watchPolicy())?.policy.captureCores).not.toBe(true);
    const extra = await r.s.app.inject({
      method: 'POST',
      url: '/api/admin/watch',
      headers: r.s.admin,
      payload: { ...policy, webhook: 'http://x' },
    });
    // Fields the spec does not have are dropped (the server's ajv), never kept: no webhook
    // URL can be set or read through the API.
    expect(extra.statusCode).toBe(200);
    expect(bodyJson(extra)).not.toHaveProperty('webhook');
    expect((await r.s.app.mqd.store.watchPolicy())?.policy).not.toHaveProperty('webhook');
    const byUser = await r.s.app.inject({
      method: 'POST',
      url: '/api/admin/watch',
      headers: alice,
      payload: policy,
    });
    expect(byUser.statusCode).toBe(403);
    const set = await r.s.app.inject({
      method: 'POST',
      url: '/api/admin/watch',
      headers: r.s.admin,
      payload: policy,
    });
    expect(set.statusCode).toBe(200);
    expect(bodyJson(set)).toEqual(policy);
    // Kept in the store and audited; alice's job is out of the policy now and never stopped.
    expect((await r.s.app.mqd.store.watchPolicy())?.policy).toEqual(policy);
    expect(
      (await r.s.app.mqd.store.activity(5)).some((a) => a.action === 'watch-policy' && a.who === 'admin'),
    ).toBe(true);
    const reads = r.fake.reads.get('slurm:101');
    await r.round();
    expect(r.fake.reads.get('slurm:101')).toBe(reads);
    expect(byKey(await r.fleet(), 'slurm:101').watch).toBe('off-by-policy');
    expect(byKey(await r.fleet(), 'slurm:102').watch).toBe('on');
  });

  it('watches only the programs the policy names: a job outside is neither sampled nor notified', async () => {
    const hook = await webhookListener();
    const r = await rig({ webhooks: [hook.url] });
    // Two hung rings alike but for the program their starter runs (the other one as root).
    const mine = {
      ...optedOut(),
      d: {
        ...optedOut().d,
        key: 'starter:n3:500:77',
        command: 'mpirun -np 2 /scratch/t1/build/ring',
        watch: 'on',
      },
    } satisfies FakeJob;
    const other: FakeJob = {
      ...mine,
      d: {
        ...mine.d,
        key: 'starter:n3:600:88',
        starterPid: 600,
        uid: 0,
        command: 'mpirun -np 2 /scratch/t2/build/ring',
      },
      layout: {
        n3: [
          { rank: 0, pid: 601 },
          { rank: 1, pid: 602 },
        ],
      },
    };
    r.fake.add(mine);
    r.fake.add(other);
    const policy = { ...(await r.fleet()).policy, programs: ['/scratch/t1/'] };
    const set = await r.s.app.inject({
      method: 'POST',
      url: '/api/admin/watch',
      headers: r.s.admin,
      payload: policy,
    });
    expect(set.statusCode).toBe(200);
    expect(bodyJson(set)).toEqual(policy);
    for (let i = 0; i < 4; i++) await r.round();
    expect(byKey(await r.fleet(), mine.d.key).state).toBe('hung');
    expect(byKey(await r.fleet(), other.d.key).watch).toBe('off-by-policy');
    expect(r.fake.countersAsked.get(other.d.key)).toBeUndefined();
    expect(r.fake.reads.get(other.d.key)).toBeUndefined();
    await waitFor(() => hook.bodies.length >= 1, 'the webhook');
    expect(hook.bodies.map((b) => (b as { mqd: { jobKey: string } }).mqd.jobKey)).toEqual([mine.d.key]);
    // A plain name is the program's file name, whatever its directory: both rings now.
    const byName = await r.s.app.inject({
      method: 'POST',
      url: '/api/admin/watch',
      headers: r.s.admin,
      payload: { ...policy, programs: ['ring'] },
    });
    expect(byName.statusCode).toBe(200);
    await r.round();
    expect(byKey(await r.fleet(), other.d.key).watch).toBe('on');
    expect(r.fake.countersAsked.get(other.d.key)).toBe(1);
    // The list's caps are the other lists': 1024 entries of 128 characters at most.
    for (const programs of [Array.from({ length: 1025 }, (_, i) => `p${i}`), [`/${'x'.repeat(128)}`], ['']]) {
      const bad = await r.s.app.inject({
        method: 'POST',
        url: '/api/admin/watch',
        headers: r.s.admin,
        payload: { ...policy, programs },
      });
      expect(bad.statusCode).toBe(400);
      expect((bodyJson(bad) as { code: string }).code).toBe('MQD_E_BAD_INPUT');
    }
    expect((await r.s.app.mqd.store.watchPolicy())?.policy.programs).toEqual(['ring']);
  });

  it('exports the job states and the watch counters on /metrics', async () => {
    const r = await rig();
    r.fake.add(deadlocked());
    r.fake.add(computeLoop());
    for (let i = 0; i < 3; i++) await r.round();
    const res = await r.s.app.inject({
      method: 'GET',
      url: '/metrics',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(res.statusCode).toBe(200);
    const fams = parsePrometheusTextFormat(res.body) as Family[];
    const fam = (name: string) => fams.find((f) => f.name === name);
    const states = (fam('mqd_job_state')?.metrics ?? []) as {
      labels?: Record<string, string>;
      value?: string;
    }[];
    expect(
      states.map((m) => m.labels).sort((x, y) => String(x?.['job']).localeCompare(String(y?.['job']))),
    ).toEqual([
      { job: '101', user: '1000', partition: 'batch', state: 'hung' },
      { job: '102', user: '1001', partition: 'batch', state: 'computing' },
    ]);
    const jobs = (fam('mqd_jobs')?.metrics ?? []) as { labels?: Record<string, string>; value?: string }[];
    const count = (state: string) => jobs.find((m) => m.labels?.['state'] === state)?.value;
    expect([
      count('progressing'),
      count('computing'),
      count('waiting'),
      count('hung'),
      count('unknown'),
    ]).toEqual(['0', '1', '0', '1', '0']);
    for (const name of [
      'mqd_watch_samples_total',
      'mqd_watch_stop_seconds_total',
      'mqd_watch_budget_skips_total',
      'mqd_watch_notifications_total',
    ])
      expect(fam(name), name).toBeDefined();
    expect(res.body).toMatch(/^mqd_watch_samples_total 6$/m);
    // 2 ms per rank, 4 ranks each, 3 rounds, 2 jobs.
    expect(res.body).toMatch(/^mqd_watch_stop_seconds_total 0\.048$/m);
  });

  it('runs on its timer while enabled and leaves no timer behind on close', async () => {
    const r = await rig();
    r.fake.add(deadlocked());
    expect(r.timers.armed.size).toBe(1);
    expect([...r.timers.armed.values()][0]?.ms).toBe(PERIOD_S * 1000);
    r.timers.fire();
    await waitFor(
      () => r.fake.reads.get('slurm:101') === 1 && r.timers.armed.size === 1,
      'a round and the next timer',
    );
    await r.s.close();
    expect(r.timers.armed.size).toBe(0);
  });

  it('counts a webhook that keeps failing, and never puts its secret in the log', async () => {
    const hook = await webhookListener(500);
    const lines: string[] = [];
    const fake = new FakeCluster();
    fake.add(deadlocked());
    const clock = { now: T0 };
    const s = await startServer(
      { publicUrl: PUBLIC, watchEnabled: true, watchPeriodSeconds: PERIOD_S, watchWebhooks: [hook.url] },
      {
        clock: () => clock.now,
        snapshotHub: fake.hub,
        watchAgents: fake,
        watchTimers: new ManualTimers(),
        slurm: null,
        webhookBackoffMs: 1,
        logger: { level: 'info', stream: { write: (l: string) => lines.push(l) } },
      },
    );
    cleanup.push(() => s.close());
    for (let i = 0; i < 4; i++) {
      clock.now += PERIOD_S * 1000;
      await s.app.mqd.watcher.tick();
    }
    await s.app.mqd.watcher.settled();
    // The first try and two retries.
    expect(hook.bodies).toHaveLength(3);
    const metrics = await s.app.inject({ method: 'GET', url: '/metrics', headers: s.admin });
    expect(metrics.body).toMatch(/^mqd_watch_notifications_total\{outcome="failed"\} 1$/m);
    const failure = lines.find((l) => l.includes('watch.webhook'));
    expect(failure).toBeDefined();
    expect(lines.join('\n')).not.toContain('SECRET-abc');
  });
});
