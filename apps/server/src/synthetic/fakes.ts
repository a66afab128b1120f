// Fakes of the seams (RankReader, JobLocator, JobDiscovery) for tests, the fan-in benchmark and the
// simulated agents: they serve @mqd/model's generated ranks (syntheticRingRank) or a fixed
// snapshot, and fail the way the real reader fails (the same error codes and states).
// Nothing in production uses them.
import { closeSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import {
  type CoreFileSource,
  type DiscoveredJob,
  err,
  type JobSnapshot,
  type MqdError,
  mqdError,
  ok,
  type RankCounters,
  type RankSnapshot,
  rankNotRead,
  syntheticRingRank,
} from '@mqd/model';
import type {
  CoreRead,
  CounterError,
  CountersParams,
  CountersResult,
  JobDiscovery,
  JobLocator,
  LocatedJob,
  MpiInfo,
  RankReader,
  RankTarget,
  ReadOptions,
  SeenStarter,
} from '../shared/seams.js';

export const FAKE_MPI: MpiInfo = {
  library: 'openmpi',
  dll: '/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/libompi_dbg_msgq.so',
  lengthUnit: 'bytes',
};

export interface FakeReaderOptions {
  /** MPI_COMM_WORLD size of the simulated job (peers are taken modulo this). */
  readonly worldSize: number;
  readonly seed?: number;
  /** Change the queues on every read (a job that makes progress); default false (a hung job). */
  readonly evolve?: boolean;
  /** Ranks whose read fails (state error, MQD_E_PTRACE_DENIED), like a rank owned by someone else. */
  readonly failRanks?: (rank: number) => boolean;
}

export function createFakeReader(opts: FakeReaderOptions): RankReader {
  const seed = opts.seed ?? 1;
  let generation = 0;
  return {
    mpi: FAKE_MPI,
    // Cores: a file that starts with the ELF magic reads as the synthetic ring (always the
    // same queues: a core does not move); others fail as the real reader fails on them.
    async readCores(cores: readonly RankTarget[], ro: ReadOptions): Promise<CoreRead> {
      const ranks: RankSnapshot[] = [];
      const sources: CoreFileSource[] = [];
      for (const t of cores) {
        const path = t.core ?? '';
        const bad = fakeCoreProblem(path);
        if (bad !== null) {
          ranks.push(rankNotRead({ rank: t.rank, pid: t.pid, host: ro.host }, bad));
          continue;
        }
        ranks.push(syntheticRingRank(t.rank, t.pid, ro.host, opts.worldSize, seed, 0));
        sources.push({
          rank: t.rank,
          path,
          pid: t.pid,
          signal: 6,
          executable: '/opt/fake/ring',
          writtenAt: statSync(path).mtime.toISOString(),
        });
      }
      return { ranks, cores: sources };
    },
    async read(ranks: readonly RankTarget[], ro: ReadOptions): Promise<RankSnapshot[]> {
      const g = generation;
      if (opts.evolve) generation++;
      return ranks.map((t) =>
        opts.failRanks?.(t.rank)
          ? {
              rank: t.rank,
              pid: t.pid,
              host: ro.host,
              state: { kind: 'error', ...mqdError('MQD_E_PTRACE_DENIED', `cannot read pid ${t.pid}`) },
              pausedMicros: null,
              communicators: [],
            }
          : syntheticRingRank(t.rank, t.pid, ro.host, opts.worldSize, seed, g),
      );
    },
  };
}

export interface FakeJob {
  readonly starterPid: number;
  readonly uid: number;
  readonly command: string;
  /** Node names; rank r runs on hosts[floor(r / ranksPerHost)]. */
  readonly hosts: readonly string[];
  readonly ranksPerHost: number;
  /** Pid of rank r is basePid + r. */
  readonly basePid?: number;
  /** The starter's /proc start time (LocatedJob.starterStartTime); '1000' when absent. */
  readonly starterStartTime?: string;
  // What discovery reports of it (fakeDiscoveredJob); all optional.
  /** A Slurm job id: the job is keyed `slurm:ID` (else by its starter on hosts[0]). */
  readonly slurmJob?: string;
  readonly jobName?: string;
  readonly partition?: string;
  readonly account?: string;
  /** 'off': MQD_WATCH=off in its environment. Default 'on'. */
  readonly watch?: 'on' | 'off';
  /** Epoch ms; default 0. */
  readonly startedAt?: number;
  /** Every rank's /proc start time; default '2000'. */
  readonly rankStartTime?: string;
}

export function fakeLayout(job: FakeJob): LocatedJob {
  const basePid = job.basePid ?? 20_000;
  const ranks = job.hosts.flatMap((host, h) =>
    Array.from({ length: job.ranksPerHost }, (_, i) => {
      const rank = h * job.ranksPerHost + i;
      return { rank, pid: basePid + rank, host };
    }),
  );
  return {
    ranks,
    method: 'synthetic',
    uid: job.uid,
    command: job.command,
    starterStartTime: job.starterStartTime ?? '1000',
  };
}

/** A locator that knows one simulated job; other pids are not starters. */
export function createFakeLocator(job: FakeJob): JobLocator {
  const located = fakeLayout(job);
  const seen: SeenStarter = {
    starterPid: job.starterPid,
    uid: job.uid,
    command: job.command,
    startTime: located.starterStartTime,
  };
  return {
    async locate(starterPid) {
      if (starterPid !== job.starterPid) {
        return err(mqdError('MQD_E_NOT_STARTER', `pid ${starterPid} is not the fake job's starter`));
      }
      return ok(located);
    },
    async list() {
      return [seen];
    },
  };
}

/** The ELF magic a fake core starts with. */
export const FAKE_CORE_MAGIC = '\x7fELF';

/** Why the real reader would refuse this file: empty (truncated), or not an ELF file. */
function fakeCoreProblem(path: string): MqdError | null {
  let head = Buffer.alloc(0);
  try {
    const fd = openSync(path, 'r');
    try {
      const b = Buffer.alloc(4);
      head = b.subarray(0, readSync(fd, b, 0, 4, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return mqdError('MQD_E_CORE_INVALID', `cannot open ${path}: no such file or not readable`);
  }
  if (head.length === 0) return mqdError('MQD_E_CORE_TRUNCATED', `${path} is empty`);
  if (head.toString('latin1') !== FAKE_CORE_MAGIC)
    return mqdError('MQD_E_CORE_INVALID', `${path} is not an ELF file`);
  return null;
}

/**
 * A locator for the cores of a real directory, as the real one finds them by name: every
 * `rank-N.core` is rank N with pid basePid + N (the real locator reads the pid from the core).
 * A directory without such files fails with MQD_E_CORE_NO_RANK. Adds locateCores to `base`.
 */
export function withFakeCores(base: JobLocator | null, basePid = 30_000): JobLocator {
  const locate =
    base?.locate.bind(base) ?? (async (pid: number) => err(mqdError('MQD_E_NOT_STARTER', `pid ${pid}`)));
  return {
    ...(base ?? {}),
    locate,
    async locateCores(dir: string) {
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch (e) {
        return err(mqdError('MQD_E_NOT_FOUND', `${dir}: ${(e as Error).message}`));
      }
      const ranks = names
        .map((n) => ({ n, m: /^rank-(\d+)\.core$/.exec(n) }))
        .filter((x) => x.m?.[1] !== undefined)
        .map((x) => {
          const rank = Number(x.m?.[1]);
          return { rank, pid: basePid + rank, host: 'fake', core: join(dir, x.n) };
        })
        .sort((a, b) => a.rank - b.rank);
      if (ranks.length === 0) {
        return err(mqdError('MQD_E_CORE_NO_RANK', `${dir} has no rank-N.core file`));
      }
      return ok({
        ranks,
        method: 'cores',
        uid: -1, // the agent sets the files' owner
        command: `${ranks.length} core files in ${dir}`,
        starterStartTime: '0',
      });
    },
  };
}

/**
 * A reader that serves ranks out of one fixed JobSnapshot (for example one of the scenarios
 * in packages/model synthetic.ts), with the pid and host of each request; a rank the snapshot
 * lacks comes back in state error.
 */
export function createFixedReader(snapshot: JobSnapshot): RankReader {
  const byRank = new Map(snapshot.ranks.map((r) => [r.rank, r]));
  return {
    mpi: snapshot.mpi,
    async read(ranks, ro) {
      return ranks.map((t) => {
        const r = byRank.get(t.rank);
        if (r) return { ...r, pid: t.pid, host: ro.host };
        return {
          rank: t.rank,
          pid: t.pid,
          host: ro.host,
          state: {
            kind: 'error',
            ...mqdError('MQD_E_NO_SUCH_PID', `rank ${t.rank} is not in the fixed snapshot`),
          },
          pausedMicros: null,
          communicators: [],
        };
      });
    },
  };
}

// --- discovery (the hang watch) ---------------------------------------------------------

/** What the fake discovery on `host` reports of `job`: the job's ranks on that host. */
export function fakeDiscoveredJob(job: FakeJob, host: string): DiscoveredJob {
  const located = fakeLayout(job);
  const startTime = job.rankStartTime ?? '2000';
  const key =
    job.slurmJob !== undefined
      ? `slurm:${job.slurmJob}`
      : `starter:${job.hosts[0] ?? host}:${job.starterPid}:${located.starterStartTime}`;
  return {
    key,
    kind: job.slurmJob !== undefined ? 'slurm' : 'starter',
    ...(job.slurmJob !== undefined
      ? { slurmJob: job.slurmJob }
      : { starterPid: job.starterPid, starterStartTime: located.starterStartTime }),
    uid: job.uid,
    command: job.command,
    startedAt: job.startedAt ?? 0,
    ...(job.jobName === undefined ? {} : { jobName: job.jobName }),
    ...(job.partition === undefined ? {} : { partition: job.partition }),
    ...(job.account === undefined ? {} : { account: job.account }),
    worldSize: located.ranks.length,
    watch: job.watch ?? 'on',
    ranks: located.ranks.filter((r) => r.host === host).map((r) => ({ rank: r.rank, pid: r.pid, startTime })),
  };
}

/** Counters of one fake rank, as /proc would give them. */
export type FakeCounters = Omit<RankCounters, 'rank'>;

/**
 * A discovery that reports what the test sets, and answers counters from a settable table:
 * a pid it does not list is MQD_E_NO_SUCH_PID, a wrong start time MQD_E_PID_REUSED, another
 * owner MQD_E_FOREIGN_PROCESS (the real reader's codes).
 */
export interface FakeDiscovery extends JobDiscovery {
  /** What the next scans report; replace to simulate jobs starting and ending. */
  jobs: DiscoveredJob[];
  /** pid -> its counters (default: 0 ticks, 0 switches, state S); set to simulate progress. */
  readonly counterTable: Map<number, FakeCounters>;
  /** Scans and counter reads so far. */
  readonly calls: { discover: number; counters: number };
  /** Makes the next scans fail (null: succeed again). */
  failWith: Error | null;
}

export function createFakeDiscovery(jobs: readonly DiscoveredJob[] = []): FakeDiscovery {
  const fake: FakeDiscovery = {
    jobs: [...jobs],
    counterTable: new Map(),
    calls: { discover: 0, counters: 0 },
    failWith: null,
    async discover() {
      fake.calls.discover++;
      if (fake.failWith !== null) throw fake.failWith;
      return fake.jobs;
    },
    async counters(p: CountersParams): Promise<Omit<CountersResult, 'at'>> {
      fake.calls.counters++;
      const ranks: RankCounters[] = [];
      const errors: CounterError[] = [];
      for (const t of p.ranks) {
        const job = fake.jobs.find((j) => j.ranks.some((r) => r.pid === t.pid));
        const known = job?.ranks.find((r) => r.pid === t.pid);
        if (job === undefined || known === undefined) {
          errors.push({ rank: t.rank, error: mqdError('MQD_E_NO_SUCH_PID', `no running process ${t.pid}`) });
        } else if (known.startTime !== t.startTime) {
          errors.push({
            rank: t.rank,
            error: mqdError('MQD_E_PID_REUSED', `pid ${t.pid} started at tick ${known.startTime}`),
          });
        } else if (job.uid !== p.ownerUid) {
          errors.push({
            rank: t.rank,
            error: mqdError('MQD_E_FOREIGN_PROCESS', `pid ${t.pid} runs as uid ${job.uid}`),
          });
        } else {
          ranks.push({
            rank: t.rank,
            ...(fake.counterTable.get(t.pid) ?? { cpuTicks: 0, switches: 0, state: 'S' }),
          });
        }
      }
      return { ranks, errors, clockTicksPerSecond: 100 };
    },
  };
  return fake;
}
