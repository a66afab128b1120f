// The hang watch under a process flood (apps/server/src/watch/watcher.ts): a discovery report
// cut at a cap is never read as "not reported" (no job ends on it unless its ranks are seen
// gone), one uid's flood of look-alike jobs leaves a bounded number of store jobs and audit
// rows, a job that ends and reappears keeps its stop history (its budget does not reset), and
// an error rank's stop is charged. Also the agent's and the hub's side of the report's
// completeness: the scan as the agent sends it (cut to its message size) and as the hub keeps it.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type DiscoveredJob,
  type DiscoveryScan,
  err,
  mqdError,
  ok,
  type RankSnapshot,
  type Result,
  syntheticStacksJob,
} from '@mqd/model';
import { Server } from 'socket.io';
import { describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import { chunkMessages, completeAnswer, statusMessage } from '../src/agent/agent-messages.js';
import type { SnapshotHub } from '../src/fanout/fanout.js';
import { AgentHub } from '../src/hub/hub.js';
import {
  AGENT_NAMESPACE,
  type AgentHealth,
  type DiscoveryScanReport,
} from '../src/protocol/agent-protocol.js';
import { decodeAgentMessage } from '../src/protocol/agent-protocol-decode.js';
import type { JobDiscovery } from '../src/shared/seams.js';
import { createFakeReader } from '../src/synthetic/fakes.js';
import type { CountersReply, WatchAgents } from '../src/watch/source.js';
import type { Timers } from '../src/watch/watcher.js';
import { MAX_LIVE_JOBS_PER_UID, MAX_REGISTRATIONS_PER_UID_HOUR } from '../src/watch/watcher.js';
import { AGENT_TOKEN, bodyJson, cleanupAfterEach, startServer, type TestServer, waitFor } from './helpers.js';

const cleanup = cleanupAfterEach();
const PERIOD_S = 60;
const T0 = 1_800_000_000_000;
const FLOODER = 65534;
const VICTIM = 1000;

/** A one-node starter job of `uid` with `ranks` ranks at pids base+1.. (start time 1000+pid). */
function starterJob(uid: number, base: number, ranks = 2): DiscoveredJob {
  return {
    key: `starter:n1:${base}:${base}`,
    kind: 'starter',
    starterPid: base,
    starterStartTime: String(base),
    uid,
    command: `mpirun -np ${ranks} ./ring`,
    startedAt: T0 - 3_600_000 + base,
    watch: 'on',
    ranks: Array.from({ length: ranks }, (_, i) => ({
      rank: i,
      pid: base + 1 + i,
      startTime: String(1000 + base + 1 + i),
    })),
  };
}

/**
 * The node's agent, faked: what it reports (and whether that report is complete), which pids
 * are gone for counters, and the snapshot side of the hub. Counts reads per job.
 */
class FloodedNode implements WatchAgents {
  jobs: DiscoveredJob[] = [];
  scan: Omit<DiscoveryScanReport, 'host' | 'at'> = { complete: true, omitted: [] };
  readonly gone = new Set<number>();
  readonly reads = new Map<string, number>();
  pausedMicros = 2000;
  /** Every rank read comes back in state error (stopped, then the read failed). */
  errorRanks = false;

  discovered() {
    return this.jobs.map((job) => ({ host: 'n1', job, at: T0 }));
  }
  discoveryScans(): DiscoveryScanReport[] {
    return [{ host: 'n1', at: T0, ...this.scan }];
  }
  isConnected(host: string): boolean {
    return host === 'n1';
  }
  async counters(
    _host: string,
    req: { ranks: { rank: number; pid: number; startTime: string }[]; ownerUid: number },
  ): Promise<Result<CountersReply>> {
    const ranks = req.ranks.filter((r) => !this.gone.has(r.pid));
    return ok<CountersReply>({
      ranks: ranks.map((r) => ({ rank: r.rank, cpuTicks: 10, switches: 5, state: 'S' })),
      errors: req.ranks
        .filter((r) => this.gone.has(r.pid))
        .map((r) => ({ rank: r.rank, error: mqdError('MQD_E_PID_EXITED', `pid ${r.pid} exited`) })),
      clockTicksPerSecond: 100,
      at: 0,
    });
  }
  readonly hub: SnapshotHub = {
    seenStarters: () => [],
    isConnected: (host) => host === 'n1',
    snapshot: async (host, targets, _timeout, onRanks) => {
      const pid = targets[0]?.pid ?? -1;
      const job = this.jobs.find((j) => j.ranks.some((r) => r.pid === pid)) ?? null;
      if (job === null) return err(mqdError('MQD_E_AGENT_MISSING', `no job has pid ${pid}`));
      this.reads.set(job.key, (this.reads.get(job.key) ?? 0) + 1);
      const snap = syntheticStacksJob({ ranks: job.ranks.length, scenario: 'ssend-ring' });
      const ranks = targets.map((t): RankSnapshot => {
        const r = snap.ranks.find((x) => x.rank === t.rank);
        if (r === undefined) throw new Error(`rank ${t.rank} not in the synthetic job`);
        if (!this.errorRanks) return { ...r, pid: t.pid, host, pausedMicros: this.pausedMicros };
        return {
          rank: t.rank,
          pid: t.pid,
          host,
          state: { kind: 'error', code: 'MQD_E_INTERNAL', message: 'the read failed after the stop' },
          pausedMicros: this.pausedMicros,
          communicators: [],
        };
      });
      onRanks(ranks);
      return ok({ count: ranks.length, mpi: snap.mpi, durationMicros: 10 });
    },
  };
}

class ManualTimers implements Timers {
  setTimeout(): unknown {
    return 0;
  }
  clearTimeout(): void {}
}

interface Rig {
  readonly s: TestServer;
  readonly node: FloodedNode;
  readonly lines: string[];
  round(): Promise<void>;
  /** The watch job of (uid, key) as the store has it, or null. */
  watchJob(job: DiscoveredJob): Promise<{ endedAt: number | null; jobId: string | null } | null>;
  /** POST a snapshot of the job's store job: the status code and the error code if any. */
  snapshot(job: DiscoveredJob): Promise<{ status: number; code: string | null }>;
}

async function rig(o: { budgetMs?: number } = {}): Promise<Rig> {
  const node = new FloodedNode();
  const clock = { now: T0 };
  const lines: string[] = [];
  const s = await startServer(
    {
      publicUrl: 'https://mqd.example.test',
      watchEnabled: true,
      watchPeriodSeconds: PERIOD_S,
      watchHungAfter: 3,
      watchStopBudgetMs: o.budgetMs ?? 100_000,
      watchWebhooks: [],
    },
    {
      clock: () => clock.now,
      snapshotHub: node.hub,
      watchAgents: node,
      watchTimers: new ManualTimers(),
      slurm: null,
      logger: { level: 'info', stream: { write: (l: string) => lines.push(l) } },
    },
  );
  cleanup.push(() => s.close());
  const watchJob = async (job: DiscoveredJob) => s.app.mqd.store.watchJob(`${job.uid}:${job.key}`);
  return {
    s,
    node,
    lines,
    round: async () => {
      clock.now += PERIOD_S * 1000;
      await s.app.mqd.watcher.tick();
      await s.app.mqd.watcher.settled();
    },
    watchJob,
    snapshot: async (job) => {
      const w = await watchJob(job);
      if (w?.jobId == null) throw new Error(`${job.key} has no store job`);
      const res = await s.app.inject({
        method: 'POST',
        url: `/api/jobs/${w.jobId}/snapshots`,
        headers: s.admin,
      });
      const body = bodyJson(res) as { code?: string };
      return { status: res.statusCode, code: body.code ?? null };
    },
  };
}

const flood = (n: number, from = 100_000): DiscoveredJob[] =>
  Array.from({ length: n }, (_, i) => starterJob(FLOODER, from + 10 * i, 1));

describe('discovery reports cut at a cap', () => {
  it('end no job they leave out; a complete report, or ranks seen gone, do', async () => {
    const r = await rig();
    const victim = starterJob(VICTIM, 500);
    const root = starterJob(0, 600);
    r.node.jobs = [victim, root];
    await r.round();
    expect((await r.watchJob(victim))?.endedAt).toBeNull();
    // The flood fills the report in /proc order: victim and root cut out, the report says so.
    r.node.jobs = flood(20);
    r.node.scan = {
      complete: false,
      omitted: [
        { uid: VICTIM, jobs: 1 },
        { uid: 0, jobs: 1 },
      ],
    };
    await r.round();
    await r.round();
    expect((await r.watchJob(victim))?.endedAt).toBeNull();
    expect((await r.watchJob(root))?.endedAt).toBeNull();
    expect(await r.snapshot(victim)).not.toMatchObject({ status: 410 });
    expect(await r.snapshot(root)).not.toMatchObject({ status: 410 });
    expect(r.lines.join('\n')).toMatch(/watch\.discovery-incomplete.*uid 1000: 1/);
    // The victim's ranks exit: the agent's counters say so, it ends although still unreported.
    for (const x of victim.ranks) r.node.gone.add(x.pid);
    await r.round();
    expect((await r.watchJob(victim))?.endedAt).not.toBeNull();
    expect((await r.watchJob(root))?.endedAt).toBeNull();
    expect(await r.snapshot(victim)).toMatchObject({ status: 410, code: 'MQD_E_JOB_ENDED' });
    // A complete report without root's job: it ends.
    r.node.scan = { complete: true, omitted: [] };
    await r.round();
    expect((await r.watchJob(root))?.endedAt).not.toBeNull();
  });
});

describe('registrations of one uid', () => {
  it('are bounded: live jobs per uid and registrations per hour, counted and logged, audit rows bounded', async () => {
    const r = await rig();
    const victim = starterJob(VICTIM, 500);
    r.node.jobs = [...flood(300), victim];
    await r.round();
    const watchJobs = await r.s.app.mqd.store.watchJobs(FLOODER);
    expect(watchJobs.filter((w) => w.endedAt === null)).toHaveLength(MAX_LIVE_JOBS_PER_UID);
    expect((await r.s.app.mqd.store.jobs(FLOODER)).length).toBe(MAX_LIVE_JOBS_PER_UID);
    expect((await r.watchJob(victim))?.endedAt).toBeNull();
    expect(r.lines.join('\n')).toMatch(
      new RegExp(`uid ${FLOODER}: ${300 - MAX_LIVE_JOBS_PER_UID} discovered jobs not registered`),
    );
    // Churn: every round a fresh flood, the last one gone (a complete report).
    for (let i = 1; i <= 6; i++) {
      r.node.jobs = [...flood(300, 100_000 + i * 10_000), victim];
      await r.round();
    }
    const all = await r.s.app.mqd.store.watchJobs(FLOODER);
    expect(all.length).toBe(MAX_REGISTRATIONS_PER_UID_HOUR);
    expect(all.filter((w) => w.endedAt === null).length).toBeLessThanOrEqual(MAX_LIVE_JOBS_PER_UID);
    const audit = (await r.s.app.mqd.store.activity(10_000)).filter((a) => a.action === 'watch-register');
    const ofFlooder = audit.filter(
      (a) => a.detail.startsWith('starter:n1:1') || a.detail.startsWith(`uid ${FLOODER}`),
    );
    // One row per registration, and what was left out coalesced into one row for the hour.
    expect(ofFlooder.length).toBe(MAX_REGISTRATIONS_PER_UID_HOUR + 1);
    expect(ofFlooder.filter((a) => a.detail.startsWith(`uid ${FLOODER}:`))).toHaveLength(1);
    // The victim's job was registered once and is still live.
    expect(audit.filter((a) => a.detail.startsWith(victim.key))).toHaveLength(1);
    expect((await r.watchJob(victim))?.endedAt).toBeNull();
  });
});

describe('the stop budget', () => {
  it('survives a job that ends and reappears with the same identity', async () => {
    // 1 s per rank and hour, 400 ms per stop: two samples, then /proc only.
    const r = await rig({ budgetMs: 1000 });
    r.node.pausedMicros = 400_000;
    const job = starterJob(VICTIM, 500);
    r.node.jobs = [job];
    await r.round();
    await r.round();
    expect(r.node.reads.get(job.key)).toBe(2);
    // Gone from a complete report, then back (same host, starter pid and start time).
    r.node.jobs = [];
    await r.round();
    expect((await r.watchJob(job))?.endedAt).not.toBeNull();
    r.node.jobs = [job];
    await r.round();
    await r.round();
    expect((await r.watchJob(job))?.endedAt).toBeNull();
    expect(r.node.reads.get(job.key)).toBe(2);
  });

  it('is charged for an error rank stopped before its read failed', async () => {
    const r = await rig({ budgetMs: 1000 });
    r.node.pausedMicros = 600_000;
    r.node.errorRanks = true;
    const job = starterJob(VICTIM, 500);
    r.node.jobs = [job];
    for (let i = 0; i < 4; i++) await r.round();
    expect(r.node.reads.get(job.key)).toBe(1);
  });
});

// --- the agent's and the hub's side ---------------------------------------------------------

const health: AgentHealth = {
  rssBytes: 1,
  heapUsedBytes: 1,
  uptimeSeconds: 1,
  loadAverage1m: 0,
  activeRequests: 0,
  lastError: null,
};

describe("an error rank's stop", () => {
  it('is kept when the agent turns an invalid or oversized rank into an error rank', () => {
    const snap = syntheticStacksJob({ ranks: 2, scenario: 'ssend-ring' });
    const [r0, r1] = snap.ranks;
    if (r0 === undefined || r1 === undefined) throw new Error('no synthetic ranks');
    const targets = [
      { rank: 0, pid: r0.pid },
      { rank: 1, pid: r1.pid },
    ];
    // Rank 1 comes back invalid (a bad state kind): an error rank, its 7 ms stop kept.
    const bad = { ...r1, pausedMicros: 7000, state: { kind: 'nonsense' } } as unknown as RankSnapshot;
    const answer = completeAnswer(targets, [{ ...r0, pausedMicros: 5000 }, bad], 'n1', null);
    expect(answer.map((r) => [r.state.kind, r.pausedMicros])).toEqual([
      ['ok', 5000],
      ['error', 7000],
    ]);
    // A rank too big for any chunk: an error rank with its stop.
    const [chunk] = [...chunkMessages(1, [{ ...r0, pausedMicros: 9000 }], 'n1', 300)];
    const sent = JSON.parse(String(chunk)) as { ranks: RankSnapshot[] };
    expect(
      sent.ranks.map((r) => [r.state.kind, 'code' in r.state ? r.state.code : null, r.pausedMicros]),
    ).toEqual([['error', 'MQD_E_READ_BUDGET', 9000]]);
  });
});

describe('status.discoveryScan', () => {
  it('is incomplete when the message size cuts entries, and says per uid what was left out', () => {
    const jobs = [...flood(40), starterJob(VICTIM, 500)];
    const whole = statusMessage(health, null, [], 1 << 20, jobs, { complete: true, omitted: [] });
    expect(whole.discoveryScan).toEqual({ complete: true, omitted: [] });
    const cut = statusMessage(health, null, [], 4000, jobs, {
      complete: false,
      omitted: [{ uid: 0, jobs: 3 }],
    });
    expect(cut.bytes.byteLength).toBeLessThanOrEqual(4000);
    expect(cut.omittedDiscovered).toBeGreaterThan(0);
    const d = decodeAgentMessage(cut.bytes, 1 << 20);
    if (!d.ok || d.value.type !== 'status') throw new Error('status not decoded');
    expect(d.value.discoveryScan?.complete).toBe(false);
    const left = new Map(d.value.discoveryScan?.omitted.map((o) => [o.uid, o.jobs]));
    expect(left.get(0)).toBe(3);
    expect((left.get(FLOODER) ?? 0) + (left.get(VICTIM) ?? 0)).toBe(cut.omittedDiscovered);
    expect(d.value.discovered.length + cut.omittedDiscovered).toBe(jobs.length);
    // A status whose entries the aggregator dropped is incomplete whatever the agent says.
    const forged = JSON.parse(whole.bytes.toString()) as { discovered: unknown[] };
    forged.discovered.push({ key: 'nonsense' });
    const dropped = decodeAgentMessage(Buffer.from(JSON.stringify(forged)), 1 << 20);
    if (!dropped.ok || dropped.value.type !== 'status') throw new Error('status not decoded');
    expect(dropped.value.discoveryScan).toEqual({ complete: false, omitted: [] });
    // A malformed scan field is dropped: incomplete.
    const bad = decodeAgentMessage(
      Buffer.from(
        JSON.stringify({ ...forged, discovered: [], discoveryScan: { complete: 'yes', omitted: [] } }),
      ),
      1 << 20,
    );
    if (!bad.ok || bad.value.type !== 'status') throw new Error('status not decoded');
    expect(bad.value.discoveryScan).toEqual({ complete: false, omitted: [] });
  });

  it('reaches the hub from a real agent: incomplete before the first status and after a cut scan', async () => {
    const http = createServer();
    const io = new Server(http, { maxHttpBufferSize: 1 << 20 });
    const hub = new AgentHub(io.of(AGENT_NAMESPACE), {
      agentToken: AGENT_TOKEN,
      allowSharedToken: true,
      maxMessageBytes: 1 << 20,
      statusIntervalMs: 50,
      clock: Date.now,
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    cleanup.push(async () => {
      hub.close();
      await new Promise<void>((resolve) => io.close(() => resolve()));
    });
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    let scan: DiscoveryScan = {
      jobs: [starterJob(VICTIM, 500)],
      complete: false,
      omitted: [{ uid: FLOODER, jobs: 844 }],
    };
    let scans = 0;
    const discovery: JobDiscovery = {
      discover: async () => scan.jobs,
      scan: async () => {
        scans++;
        return scan;
      },
      counters: async () => ({ ranks: [], errors: [], clockTicksPerSecond: 100 }),
    };
    const lines: string[] = [];
    const agent = startAgent({
      serverUrl: url,
      token: AGENT_TOKEN,
      host: 'n1',
      reader: createFakeReader({ worldSize: 4 }),
      discovery,
      statusIntervalMs: 30,
      log: (l) => lines.push(l),
    });
    cleanup.push(() => agent.dispose());
    await waitFor(() => hub.discovered().length === 1, 'the first report');
    expect(hub.discoveryScans()).toEqual([
      { host: 'n1', complete: false, omitted: [{ uid: FLOODER, jobs: 844 }], at: expect.any(Number) },
    ]);
    expect(lines.join('\n')).toMatch(/left jobs out of its report.*844 of uid 65534/);
    scan = { ...scan, complete: true, omitted: [] };
    await waitFor(() => hub.discoveryScans()[0]?.complete === true, 'a complete report');
    expect(scans).toBeGreaterThan(1);
  });
});
