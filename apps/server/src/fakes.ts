// Fakes of the two seams (RankReader, JobLocator) for tests, the fan-in benchmark and the
// simulated agents: they serve @mqd/model's generated ranks (syntheticRingRank) or a fixed
// snapshot, and fail the way the real reader fails (the same error codes and states).
// Nothing in production uses them.
import { err, type JobSnapshot, mqdError, ok, type RankSnapshot, syntheticRingRank } from '@mqd/model';
import type {
  JobLocator,
  LocatedJob,
  MpiInfo,
  RankReader,
  RankTarget,
  ReadOptions,
  SeenStarter,
} from './seams.js';

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
