// Deterministic synthetic JobSnapshots for tests and benchmarks: the same options always give
// the same snapshot (a seeded PRNG chooses only pids, hosts' pause times, buffers and request
// addresses, never the shape, so rank classes stay exact). Each generator reproduces what a
// real library's DLL shows for that situation (docs/mpi-facts.md, fixtures/mpi/README.md):
// - Open MPI: sends and receives visible, unexpected queue null, global ranks known, lengths in
//   bytes, request address in extra text line 0, collective traffic hidden.
// - MPICH: send queue null (no MPIR_Sendq_head), unexpected visible, global ranks unknown
//   (null), no groups, lengths in elements, ids are addresses that differ per process, and an
//   unnamed internal copy of MPI_COMM_WORLD carrying collective traffic with negative tags.
import { assertUnreachable } from './assert.js';
import {
  type Communicator,
  type Frame,
  type JobSnapshot,
  lengthUnitOfLibrary,
  type MpiCall,
  type Operation,
  type RankSnapshot,
  type ThreadStack,
} from './snapshot-spec.js';

// Hybrid MPI+OpenMP jobs live in their own file; exported with the other generators.
export * from './synthetic-openmp.js';

type Reason = NonNullable<Communicator['unavailable']['sends']>;

export type SyntheticStyle = 'openmpi' | 'mpich';

export interface SyntheticOptions {
  /** Number of ranks (MPI_COMM_WORLD size), 1..1<<20. */
  readonly ranks: number;
  readonly seed?: number;
  readonly style?: SyntheticStyle;
  /** ISO time of the snapshot; default 2026-01-01T00:00:00.000Z. */
  readonly takenAt?: string;
}

/** mulberry32: tiny, fast, and the same sequence on every platform (shared by every synthetic generator). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const OMPI_DLL = '/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/libompi_dbg_msgq.so';
const MPICH_DLL = '/opt/mpich/lib/libtvmpich.so';
const RANKS_PER_HOST = 32;
const NO_UNEXPECTED: Reason = {
  code: 'MQD_E_QUEUE_UNSUPPORTED',
  message: "Open MPI's message-queue DLL does not show unexpected messages",
};
const NO_SENDS: Reason = {
  code: 'MQD_E_QUEUE_UNSUPPORTED',
  message: 'this MPICH build records no send queue (MPIR_Sendq_head is missing)',
};
/** MPICH's collective tags on its internal communicators are large negative numbers. */
export const SYNTHETIC_COLLECTIVE_TAG = -1073741823;

interface Queues {
  readonly sends?: Operation[];
  readonly receives?: Operation[];
  readonly unexpected?: Operation[];
}

interface OpSpec {
  readonly status?: Operation['status'];
  /** Peer's rank in MPI_COMM_WORLD (equal to the local rank there); null = MPI_ANY_SOURCE. */
  readonly peer: number | null;
  readonly tag: number | null;
  /** Bytes for Open MPI; divided by 4 into elements (MPI_INT) for MPICH. */
  readonly bytes: number;
}

class Gen {
  readonly n: number;
  readonly style: SyntheticStyle;
  private readonly rng: () => number;
  private readonly takenAt: string;

  constructor(opts: SyntheticOptions) {
    if (!Number.isInteger(opts.ranks) || opts.ranks < 1 || opts.ranks > 1 << 20) {
      throw new RangeError(`synthetic snapshot needs 1..${1 << 20} ranks, got ${opts.ranks}`);
    }
    this.n = opts.ranks;
    this.style = opts.style ?? 'openmpi';
    this.rng = prng(opts.seed ?? 1);
    this.takenAt = opts.takenAt ?? '2026-01-01T00:00:00.000Z';
    // One shared array: every rank's world group is the identity.
  }

  private hex(digits: number): string {
    let s = '';
    for (let i = 0; i < digits; i++) s += Math.floor(this.rng() * 16).toString(16);
    return s;
  }

  op(kind: 'sends' | 'receives' | 'unexpected', spec: OpSpec): Operation {
    const status = spec.status ?? 'pending';
    if (this.style === 'openmpi') {
      const actual =
        status === 'complete' && kind === 'receives'
          ? { peer: { local: spec.peer, global: spec.peer }, tag: spec.tag, length: spec.bytes }
          : null;
      return {
        status,
        peer: { local: spec.peer, global: spec.peer },
        tag: spec.tag,
        length: spec.bytes,
        actual,
        extraText: [
          `${kind === 'sends' ? 'Send' : 'Receive'}: 0x55${this.hex(10)}`,
          status === 'complete' ? 'Data transfer completed' : '4 instances of MPI_INT',
          'MPI_',
        ],
        buffer: `0x7f${this.hex(10)}`,
        systemBuffer: false,
      };
    }
    // MPICH: global ranks unknown, element counts, unexpected entries without buffer or count.
    const unexpected = kind === 'unexpected';
    return {
      status,
      peer: { local: spec.peer, global: null },
      tag: spec.tag,
      length: unexpected ? 0 : Math.floor(spec.bytes / 4),
      actual: null,
      extraText: kind === 'sends' ? ['Non-blocking send'] : [],
      buffer: unexpected ? '0x0' : `0x7f${this.hex(10)}`,
      systemBuffer: false,
    };
  }

  private commId(ompiId: number): string {
    return this.style === 'openmpi' ? `${ompiId}` : `0x55${this.hex(6)}0`;
  }

  comm(
    name: string,
    size: number,
    localRank: number,
    group: number[] | null,
    q: Queues,
    ompiId: number,
  ): Communicator {
    const ompi = this.style === 'openmpi';
    return {
      id: this.commId(ompiId),
      name,
      size,
      localRank,
      group: ompi ? group : null,
      sends: ompi ? (q.sends ?? []) : null,
      receives: q.receives ?? [],
      unexpected: ompi ? null : (q.unexpected ?? []),
      unavailable: ompi ? { unexpected: NO_UNEXPECTED } : { sends: NO_SENDS },
    };
  }

  rank(r: number, world: Queues, internal: Queues = {}): RankSnapshot {
    const comms: Communicator[] = [
      // MPI_COMM_WORLD's group is the identity by definition: never listed (snapshot-spec.ts).
      this.comm('MPI_COMM_WORLD', this.n, r, null, world, 0),
      this.comm('MPI_COMM_SELF', 1, 0, [r], {}, 1),
    ];
    if (this.style === 'mpich') comms.push(this.comm('', this.n, r, null, internal, 2));
    return {
      rank: r,
      pid: 10_000 + r * 7 + Math.floor(this.rng() * 7),
      host: `node${String(Math.floor(r / RANKS_PER_HOST)).padStart(4, '0')}`,
      state: { kind: 'ok' },
      pausedMicros: 100 + Math.floor(this.rng() * 1900),
      communicators: comms,
    };
  }

  snapshot(ranks: RankSnapshot[], takenAt = this.takenAt): JobSnapshot {
    const ompi = this.style === 'openmpi';
    return {
      schemaVersion: 1,
      takenAt,
      durationMicros: 2_000 + this.n * 40,
      mpi: {
        library: this.style,
        dll: ompi ? OMPI_DLL : MPICH_DLL,
        lengthUnit: lengthUnitOfLibrary(this.style),
      },
      ranks,
    };
  }

  ranks(make: (r: number) => RankSnapshot): RankSnapshot[] {
    return Array.from({ length: this.n }, (_, r) => make(r));
  }
}

/**
 * Every rank posted an Irecv from its right neighbour and is blocked in MPI_Ssend to it, both
 * with tag 7: the classic bug of receiving from the wrong side. The ranks form one cycle of N;
 * each receive nearly matches the left neighbour's send (source differs). Open MPI style also
 * keeps a completed receive from the previous phase; MPICH style shows the blocked Ssend only
 * as an unexpected message at the receiver.
 */
export function syntheticRingDeadlock(opts: SyntheticOptions): JobSnapshot {
  const g = new Gen(opts);
  const n = g.n;
  return g.snapshot(
    g.ranks((r) => {
      const right = (r + 1) % n;
      const left = (r + n - 1) % n;
      return g.rank(r, {
        sends: [g.op('sends', { peer: right, tag: 7, bytes: 4096 })],
        // MPICH drops a receive from its queue once matched; Open MPI keeps it until freed.
        receives: [
          ...(g.style === 'openmpi'
            ? [g.op('receives', { status: 'complete', peer: left, tag: 5, bytes: 4096 })]
            : []),
          g.op('receives', { peer: right, tag: 7, bytes: 4096 }),
        ],
        unexpected: [g.op('unexpected', { peer: left, tag: 7, bytes: 4096 })],
      });
    }),
  );
}

/**
 * Pairs (2k, 2k+1): the even rank waits for tag 1 from the odd one, which is blocked sending
 * tag 2 to it. N/2 two-rank cycles, each with a tag near miss; an odd last rank is idle.
 */
export function syntheticWrongTagHang(opts: SyntheticOptions): JobSnapshot {
  const g = new Gen(opts);
  const n = g.n;
  return g.snapshot(
    g.ranks((r) => {
      if (r % 2 === 0 && r + 1 < n) {
        return g.rank(r, {
          receives: [g.op('receives', { peer: r + 1, tag: 1, bytes: 64 })],
          // MPICH shows the blocked send only as an unexpected message at its receiver.
          unexpected: [g.op('unexpected', { peer: r + 1, tag: 2, bytes: 64 })],
        });
      }
      if (r % 2 === 1) return g.rank(r, { sends: [g.op('sends', { peer: r - 1, tag: 2, bytes: 64 })] });
      return g.rank(r, {});
    }),
  );
}

/** A healthy job between communication phases: only completed receives linger, nothing is pending. */
export function syntheticIdle(opts: SyntheticOptions): JobSnapshot {
  const g = new Gen(opts);
  const n = g.n;
  return g.snapshot(
    g.ranks((r) =>
      g.rank(r, {
        receives:
          g.style === 'openmpi'
            ? [g.op('receives', { status: 'complete', peer: (r + n - 1) % n, tag: 3, bytes: 512 })]
            : [],
      }),
    ),
  );
}

/** A pipeline: rank r > 0 waits for tag `iteration` from r-1; rank 0 computes. No cycle. */
function pipeline(g: Gen, iteration: number, takenAt?: string): JobSnapshot {
  return g.snapshot(
    g.ranks((r) =>
      g.rank(r, {
        receives: r === 0 ? [] : [g.op('receives', { peer: r - 1, tag: iteration, bytes: 1024 })],
      }),
    ),
    takenAt,
  );
}

const SECOND = '2026-01-01T00:00:01.000Z';

/** Two snapshots one second apart of a pipeline that moved on by one iteration (new tags and requests). */
export function syntheticProgressingPair(opts: SyntheticOptions): [JobSnapshot, JobSnapshot] {
  const g = new Gen(opts);
  return [pipeline(g, 41), pipeline(g, 42, SECOND)];
}

/** Two snapshots one second apart of the same pipeline state: nothing moved. */
export function syntheticStuckPair(opts: SyntheticOptions): [JobSnapshot, JobSnapshot] {
  const first = pipeline(new Gen(opts), 41);
  // Same seed, same sequence: the same buffers and request addresses, only the time differs.
  const second = pipeline(new Gen(opts), 41, SECOND);
  return [first, second];
}

export interface CollectiveHangOptions extends Omit<SyntheticOptions, 'style'> {
  /** The rank that never enters the barrier (default: chosen by the seed, never 0). */
  readonly laggard?: number;
}

/**
 * MPICH style (Open MPI's DLL hides collective traffic). A barrier as gather to rank 0 then
 * release: rank 0 waits (internal tag) for the laggard, whose contribution never came; the
 * other ranks' contributions sit in rank 0's unexpected queue (the first few) and they wait
 * for the release. The laggard itself is blocked in a p2p receive from rank 0 that rank 0
 * posts only after the barrier: a user-level ordering bug the collective hides.
 */
export function syntheticCollectiveHang(opts: CollectiveHangOptions): JobSnapshot {
  const g = new Gen({ ...opts, style: 'mpich' });
  const n = g.n;
  if (n < 3) throw new RangeError('a collective hang needs at least 3 ranks');
  const laggard = opts.laggard ?? 1 + Math.floor(prng((opts.seed ?? 1) ^ 0x5bd1e995)() * (n - 1));
  if (laggard < 1 || laggard >= n) throw new RangeError(`laggard must be in 1..${n - 1}, got ${laggard}`);
  const tag = SYNTHETIC_COLLECTIVE_TAG;
  return g.snapshot(
    g.ranks((r) => {
      if (r === laggard) return g.rank(r, { receives: [g.op('receives', { peer: 0, tag: 3, bytes: 8 })] });
      if (r === 0) {
        const arrived: Operation[] = [];
        for (let s = 1; s < n && arrived.length < 4; s++) {
          if (s !== laggard) arrived.push(g.op('unexpected', { peer: s, tag, bytes: 0 }));
        }
        return g.rank(
          r,
          {},
          { receives: [g.op('receives', { peer: laggard, tag, bytes: 0 })], unexpected: arrived },
        );
      }
      return g.rank(r, {}, { receives: [g.op('receives', { peer: 0, tag: tag + 1, bytes: 0 })] });
    }),
  );
}

/** A copy in which these ranks could not be read (state error), as when a DLL crashed on them. */
export function withUnreadableRanks(snap: JobSnapshot, ranks: readonly number[]): JobSnapshot {
  const bad = new Set(ranks);
  return {
    ...snap,
    ranks: snap.ranks.map((r) =>
      bad.has(r.rank)
        ? {
            ...r,
            state: {
              kind: 'error',
              code: 'MQD_E_DLL_CRASHED',
              message: `the DLL crashed on pid ${r.pid}`,
            },
            pausedMicros: null,
            communicators: [],
          }
        : r,
    ),
  };
}

export type StacksScenario = 'mixed' | 'collective-mismatch' | 'ssend-ring';

export interface StacksOptions extends Omit<SyntheticOptions, 'style'> {
  /**
   * mixed (default): about 20 distinct stacks (halo exchange, reductions, computing kernels, a
   * few outliers) and a progress thread on some ranks; collective-mismatch: every rank in
   * MPI_Barrier but the last, in MPI_Allreduce; ssend-ring: every rank in MPI_Ssend to the
   * next, its send listed as complete (Open MPI's eager-synchronous send).
   */
  readonly scenario?: StacksScenario;
}

const APP = '/home/user/solver/bin/solver';
const LIBC = '/usr/lib/x86_64-linux-gnu/libc.so.6';
const LIBMPI = '/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40.30.4';
const LIBOPAL = '/usr/lib/x86_64-linux-gnu/openmpi/lib/libopen-pal.so.40.30.2';
const OUTER = [
  '_start',
  '__libc_start_main',
  '__libc_start_call_main',
  'main',
  'run_simulation',
  'timestep_loop',
];
const PROGRESS = ['opal_progress', 'mca_pml_ob1_progress', 'mca_btl_vader_component_progress'];

function moduleOf(fn: string): string {
  if (fn.startsWith('_') || fn === 'clone3' || fn === 'start_thread' || fn === 'poll') return LIBC;
  if (fn.startsWith('opal_') || fn.startsWith('mca_btl')) return LIBOPAL;
  if (/^(P?MPI_|ompi_|mca_)/.test(fn)) return LIBMPI;
  return APP;
}

/** A thread from its call path (outermost first); pcs vary by rank as they would under ASLR. */
function syntheticThread(tid: number, path: readonly string[], main: boolean, salt: number): ThreadStack {
  const frames: Frame[] = [];
  for (let i = path.length - 1; i >= 0; i--) {
    const fn = path[i] ?? '??';
    const module = moduleOf(fn);
    const base = module === APP ? 0x400000 : 0x7f0000000000 + (salt % 4096) * 0x1000;
    frames.push({
      pc: `0x${(base + i * 0x40 + fn.length).toString(16)}`,
      function: fn,
      module,
      file: module === APP ? `solver/${path[3] === fn ? 'main' : 'step'}.c` : null,
      line: module === APP ? 100 + i : null,
      inlined: false,
    });
  }
  return { tid, name: main ? 'solver' : 'progress', main, frames, truncated: false, error: null };
}

interface Where {
  readonly path: string[];
  readonly call: MpiCall | null;
}

function mpiAt(fn: string, peer: number | null | undefined, tag: number | null): Where['call'] {
  return {
    function: fn,
    tid: 1,
    args:
      peer === undefined
        ? { peer: null, tag: null, communicator: '0', count: 1 }
        : { peer: { local: peer, global: peer }, tag, communicator: '0', count: 512 },
  };
}

/** The mixed scenario's place for rank r (about 20 distinct stacks; a few outlier ranks). */
function mixedWhere(r: number, n: number, pick: number): Where {
  const step = [...OUTER];
  if (r === n - 1 && n > 2) {
    // The outlier: still writing a checkpoint.
    return {
      path: [...step, 'write_checkpoint', 'H5Dwrite', 'write_chunk', '__GI___libc_write'],
      call: null,
    };
  }
  const variant = pick % 20;
  if (variant < 8) {
    const fn =
      ['exchange_halo_x', 'exchange_halo_y', 'exchange_halo_z', 'exchange_corners'][variant % 4] ?? 'x';
    const wait = variant < 4 ? 'MPI_Waitall' : 'PMPI_Waitall';
    return {
      path: [...step, 'solve', fn, wait, 'ompi_request_default_wait_all', ...PROGRESS],
      call: { function: 'MPI_Waitall', tid: 1, args: null },
    };
  }
  if (variant < 12) {
    const fn = ['global_norm', 'global_dt', 'residual', 'energy'][variant - 8] ?? 'x';
    return {
      path: [
        ...step,
        'solve',
        fn,
        'MPI_Allreduce',
        'ompi_coll_base_allreduce_intra_recursivedoubling',
        'ompi_request_default_wait',
        ...PROGRESS,
      ],
      call: mpiAt('MPI_Allreduce', undefined, null),
    };
  }
  if (variant < 17) {
    const kernel = ['flux_x', 'flux_y', 'flux_z', 'update_cells', 'apply_bc'][variant - 12] ?? 'x';
    return { path: [...step, 'solve', 'compute', kernel, `${kernel}_inner`], call: null };
  }
  if (variant < 19) {
    return {
      path: [
        ...step,
        'solve',
        'exchange_halo_x',
        'MPI_Recv',
        'mca_pml_ob1_recv',
        'ompi_request_default_wait',
        ...PROGRESS,
      ],
      call: mpiAt('MPI_Recv', (r + n - 1) % n, 4),
    };
  }
  return {
    path: [...step, 'diagnostics', 'MPI_Iprobe', 'mca_pml_ob1_iprobe', 'opal_progress'],
    call: { function: 'MPI_Iprobe', tid: 1, args: null },
  };
}

/**
 * An Open MPI style job whose ranks carry stacks (threads and mpiCall), for the stack tree,
 * the Stacks view and the diagnosis at scale. The queues agree with the calls.
 */
export function syntheticStacksJob(opts: StacksOptions): JobSnapshot {
  const g = new Gen({ ...opts, style: 'openmpi' });
  const n = g.n;
  const scenario = opts.scenario ?? 'mixed';
  const rng = prng((opts.seed ?? 1) ^ 0x2545f491);
  return g.snapshot(
    g.ranks((r) => {
      let where: Where;
      let world: Queues = {};
      switch (scenario) {
        case 'collective-mismatch':
          where =
            r === n - 1 && n > 1
              ? {
                  path: [
                    ...OUTER,
                    'global_norm',
                    'MPI_Allreduce',
                    'ompi_coll_base_allreduce_intra_recursivedoubling',
                    ...PROGRESS,
                  ],
                  call: mpiAt('MPI_Allreduce', undefined, null),
                }
              : {
                  path: [
                    ...OUTER,
                    'sync_all',
                    'MPI_Barrier',
                    'ompi_coll_base_barrier_intra_recursivedoubling',
                    ...PROGRESS,
                  ],
                  call: mpiAt('MPI_Barrier', undefined, null),
                };
          break;
        case 'ssend-ring': {
          const right = (r + 1) % n;
          where = {
            path: [
              ...OUTER,
              'pass_token',
              'MPI_Ssend',
              'mca_pml_ob1_send',
              'ompi_request_default_wait',
              ...PROGRESS,
            ],
            call: mpiAt('MPI_Ssend', right, 7),
          };
          world = { sends: [g.op('sends', { status: 'complete', peer: right, tag: 7, bytes: 2048 })] };
          break;
        }
        case 'mixed': {
          where = mixedWhere(r, n, Math.floor(rng() * 1_000_000));
          const recvPeer = where.call?.args?.peer?.global ?? null;
          if (where.call?.function === 'MPI_Recv' && recvPeer !== null) {
            world = { receives: [g.op('receives', { peer: recvPeer, tag: 4, bytes: 4096 })] };
          }
          break;
        }
        default:
          assertUnreachable(scenario);
      }
      const base = g.rank(r, world);
      const threads = [syntheticThread(base.pid, where.path, true, r)];
      if (scenario === 'mixed' && r % 8 === 0) {
        threads.push(
          syntheticThread(base.pid + 1, ['clone3', 'start_thread', 'progress_engine', 'poll'], false, r),
        );
      }
      return { ...base, threads, mpiCall: where.call };
    }),
  );
}
