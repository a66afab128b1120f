// Synthetic MPI ranks for tests and the load benchmark. Every queue is a pure function of
// (seed, rank, generation), so two reads of the same rank give the same bytes unless the
// reader is told to evolve, and a merged snapshot can be compared with what was generated.
// The shapes follow what Open MPI's DLL reports for a job stuck in a ring exchange: a pending
// send to the right neighbour, receives from the left one (some with MPI_ANY_SOURCE or
// MPI_ANY_TAG), a few unexpected messages, and a small sub-communicator with its group.
import {
  type Communicator,
  err,
  type JobSnapshot,
  mqdError,
  type Operation,
  ok,
  prng,
  type RankSnapshot,
} from '@mqd/model';
import type {
  JobLocator,
  LocatedJob,
  MpiInfo,
  RankReader,
  RankTarget,
  ReadOptions,
  SeenStarter,
} from './seams.js';

export const SYNTHETIC_MPI: MpiInfo = {
  library: 'openmpi',
  dll: '/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/libompi_dbg_msgq.so',
  lengthUnit: 'bytes',
};

export interface SyntheticReaderOptions {
  /** MPI_COMM_WORLD size of the simulated job (peers are taken modulo this). */
  readonly worldSize: number;
  readonly seed?: number;
  /** Change the queues on every read (a job that makes progress); default false (a hung job). */
  readonly evolve?: boolean;
  /** Ranks whose read fails (state error, MQD_E_PTRACE_DENIED), like a rank owned by someone else. */
  readonly failRanks?: (rank: number) => boolean;
}

const ROW = 8;

function op(
  status: Operation['status'],
  local: number | null,
  global: number | null,
  tag: number | null,
  length: number,
  buffer: number,
  text: string,
): Operation {
  return {
    status,
    peer: { local, global },
    tag,
    length,
    actual: null,
    extraText: [text],
    buffer: `0x${buffer.toString(16)}`,
    systemBuffer: false,
  };
}

/** The queues of one simulated rank: a pure function of its arguments. */
export function syntheticRank(
  rank: number,
  pid: number,
  host: string,
  worldSize: number,
  seed: number,
  generation: number,
): RankSnapshot {
  const rnd = prng(seed * 1_000_003 + rank * 7919 + generation * 104_729);
  const n = Math.max(1, worldSize);
  const right = (rank + 1) % n;
  const left = (rank - 1 + n) % n;
  const base = 0x7ffc_0000_0000 + rank * 0x10000;
  const len = () => 1024 * (1 + Math.floor(rnd() * 64));
  const sends: Operation[] = [];
  const nSends = 1 + Math.floor(rnd() * 2);
  for (let i = 0; i < nSends; i++) {
    sends.push(op('pending', right, right, 100 + i + generation, len(), base + i * 0x1000, 'Send: ring'));
  }
  const receives: Operation[] = [];
  const nRecvs = 1 + Math.floor(rnd() * 2);
  for (let i = 0; i < nRecvs; i++) {
    const wildcard = rnd() < 0.2;
    receives.push(
      op(
        'pending',
        wildcard ? null : left,
        wildcard ? null : left,
        rnd() < 0.1 ? null : 100 + i + generation,
        len(),
        base + 0x8000 + i * 0x1000,
        'Receive: ring',
      ),
    );
  }
  const unexpected: Operation[] = [];
  const nUnexpected = Math.floor(rnd() * 3);
  for (let i = 0; i < nUnexpected; i++) {
    const from = Math.floor(rnd() * n);
    unexpected.push(op('pending', from, from, 900 + i, len(), 0, 'Unexpected: eager'));
  }
  const world: Communicator = {
    id: '0',
    name: 'MPI_COMM_WORLD',
    size: n,
    localRank: rank,
    // The world group is the identity; leaving it null keeps a 16k-rank job from carrying 16k
    // integers per rank (the spec allows null when the peer's global rank is already known).
    group: null,
    sends,
    receives,
    unexpected,
    unavailable: {},
  };
  const rowBase = Math.floor(rank / ROW) * ROW;
  const rowSize = Math.min(ROW, n - rowBase);
  const group = Array.from({ length: rowSize }, (_, i) => rowBase + i);
  const rowLocal = rank - rowBase;
  const rowLeft = (rowLocal - 1 + rowSize) % rowSize;
  const row: Communicator = {
    id: '3',
    name: 'row',
    size: rowSize,
    localRank: rowLocal,
    group,
    sends: [],
    receives:
      rowSize > 1
        ? [op('pending', rowLeft, rowBase + rowLeft, 7, 8, base + 0xf000, 'Receive: row halo')]
        : [],
    unexpected: [],
    unavailable: {},
  };
  return {
    rank,
    pid,
    host,
    state: { kind: 'ok' },
    pausedMicros: 200 + (rank % 97) * 3,
    communicators: [world, row],
  };
}

export function createSyntheticReader(opts: SyntheticReaderOptions): RankReader {
  const seed = opts.seed ?? 1;
  let generation = 0;
  return {
    mpi: SYNTHETIC_MPI,
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
          : syntheticRank(t.rank, t.pid, ro.host, opts.worldSize, seed, g),
      );
    },
  };
}

export interface SyntheticJob {
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

export function syntheticLayout(job: SyntheticJob): LocatedJob {
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
export function createSyntheticLocator(job: SyntheticJob): JobLocator {
  const located = syntheticLayout(job);
  const seen: SeenStarter = {
    starterPid: job.starterPid,
    uid: job.uid,
    command: job.command,
    startTime: located.starterStartTime,
  };
  return {
    async locate(starterPid) {
      if (starterPid !== job.starterPid) {
        return err(mqdError('MQD_E_NOT_STARTER', `pid ${starterPid} is not a simulated starter`));
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
