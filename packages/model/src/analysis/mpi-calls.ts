// What the MPI call a rank is inside (RankSnapshot.mpiCall, read from its stacks) means for
// the hang analysis: does the rank wait in it, and on whom. The queues cannot always say: Open
// MPI lists an eager-synchronous MPI_Ssend as `complete` while its sender still waits for the
// acknowledgement, MPICH lists no blocking send at all, and a probe or a collective leaves
// nothing in any queue. A rank inside a blocking call is blocked whatever its queues show.
import type { Frame, RankSnapshot } from '../snapshot-spec.js';

/** How a call blocks its caller. */
export type CallKind =
  /** Blocks until its peer receives (or, buffered, may not: MPI_Send). */
  | 'send'
  /** Blocks until a matching message comes from its peer (or any member, for ANY_SOURCE). */
  | 'receive'
  /** Blocks until every request it waits for completes: whom is in the queues. */
  | 'wait'
  /** A send and a receive at once (MPI_Sendrecv): whom is in the queues. */
  | 'sendrecv'
  /** Blocks until every member of the communicator has entered the same collective. */
  | 'collective'
  /** Returns by itself (Test*, Iprobe, Isend, ...): the rank is polling or working. */
  | 'nonblocking';

const SENDS = ['MPI_Send', 'MPI_Ssend', 'MPI_Bsend', 'MPI_Rsend'];
const RECEIVES = ['MPI_Recv', 'MPI_Probe', 'MPI_Mprobe'];
const WAITS = ['MPI_Wait', 'MPI_Waitall', 'MPI_Waitany', 'MPI_Waitsome', 'MPI_Mrecv'];
const SENDRECVS = ['MPI_Sendrecv', 'MPI_Sendrecv_replace'];
const COLLECTIVES = [
  'MPI_Barrier',
  'MPI_Bcast',
  'MPI_Reduce',
  'MPI_Allreduce',
  'MPI_Gather',
  'MPI_Gatherv',
  'MPI_Scatter',
  'MPI_Scatterv',
  'MPI_Allgather',
  'MPI_Allgatherv',
  'MPI_Alltoall',
  'MPI_Alltoallv',
  'MPI_Alltoallw',
  'MPI_Reduce_scatter',
  'MPI_Reduce_scatter_block',
  'MPI_Scan',
  'MPI_Exscan',
  'MPI_Comm_dup',
  'MPI_Comm_split',
  'MPI_Comm_create',
  'MPI_Intercomm_create',
  'MPI_Cart_create',
  'MPI_Win_fence',
  'MPI_Win_create',
  'MPI_Finalize',
];
const KINDS = new Map<string, CallKind>([
  ...SENDS.map((f) => [f, 'send'] as const),
  ...RECEIVES.map((f) => [f, 'receive'] as const),
  ...WAITS.map((f) => [f, 'wait'] as const),
  ...SENDRECVS.map((f) => [f, 'sendrecv'] as const),
  ...COLLECTIVES.map((f) => [f, 'collective'] as const),
]);

/** "PMPI_Ssend" and "MPI_Ssend" are the same call. */
export function foldMpiName(fn: string): string {
  return fn.startsWith('PMPI_') ? fn.slice(1) : fn;
}

export function callKind(fn: string): CallKind {
  return KINDS.get(foldMpiName(fn)) ?? 'nonblocking';
}

/** The rank's call blocks it (see callKind). */
export function isBlockingCall(fn: string): boolean {
  return callKind(fn) !== 'nonblocking';
}

/** MPI_Finalize waits for every rank of the job, whatever communicator its arguments name. */
export function isWorldCollective(fn: string): boolean {
  return foldMpiName(fn) === 'MPI_Finalize';
}

/**
 * Where the stacks put a rank: absent (stacks not read), computing (in no MPI call), in a
 * call that returns by itself, or blocked in one.
 */
export type CallState = 'no-stacks' | 'computing' | 'polling' | 'blocked';

export function callState(r: RankSnapshot): CallState {
  const c = r.mpiCall;
  if (c === undefined) return 'no-stacks';
  if (c === null) return 'computing';
  return isBlockingCall(c.function) ? 'blocked' : 'polling';
}

/** The name of the communicator the rank's call names: matched by id in its list, else null. */
export function callCommunicator(r: RankSnapshot): RankSnapshot['communicators'][number] | null {
  const id = r.mpiCall?.args?.communicator ?? null;
  if (id === null) return null;
  return r.communicators.find((c) => c.id === id) ?? null;
}

/**
 * Functions of the MPI library, its runtime and the C library: MPI_X/PMPI_X, MPICH's binding
 * layer (`internal_X`) and internals (MPIR_, MPID, MPIDI_, MPIDU_, MPII_, MPL_, MPIC_), Open MPI's
 * (ompi_, mca_, opal_, orte_, prte_), PMIx and PMI, UCX (ucp_, uct_, ucs_), and libc/pthread
 * frames where a rank waits (poll, futex, start routines). Names only where a user's function
 * is unlikely to share them: other libraries (libfabric, hwloc, libevent) go by their module.
 */
const RUNTIME_FUNCTION =
  /^(?:P?MPIX?_|internal_[A-Z]|MPIR_|MPID|MPIU_|MPII_|MPL_|MPIC_|MPIO_|ADIOI?_|ompi_|mca_|opal_|orte_|prte_|prrte_|pmix|PMIx_|PMI2?_|ucp_|uct_|ucs_|__libc_|__GI_|__pthread|pthread_|start_thread$|_start$|clone3?$|__clone|poll$|__poll|ppoll$|epoll_|select$|__select|nanosleep$|__nanosleep|clock_nanosleep|__clock_nanosleep|sched_yield$|__sched_yield|syscall$|__futex|futex|__lll_|usleep$|sleep$|__sleep|read$|__read|write$|__write|recv$|__recv|recvmsg$|sendmsg$)/;

/** Shared objects of the MPI library and its runtime, and the C library and dynamic loader. */
const RUNTIME_MODULE =
  /^(?:libmpi(?:ch|cxx|fort|_mpifh|_usempi\w*)?|libmpich\w*|libpmpi|libopen-(?:pal|rte)|libopen-orted\w*|libpmix|libprrte|libpmi2?|libucp|libuct|libucs|libucm|libfabric|libpsm\w*|libhwloc|libevent\w*|libc|libpthread|ld-linux[\w-]*|ld)(?:[.-]|$)/;

function moduleBase(path: string): string {
  const i = path.lastIndexOf('/');
  return i < 0 ? path : path.slice(i + 1);
}

/**
 * The frame belongs to the MPI library, its runtime or the C library, not to the user's code:
 * its module is one of those libraries, or its function has one of their names (a static
 * build, or a frame without a module). The one rule the model uses to find the user's line.
 */
export function isRuntimeFrame(f: Pick<Frame, 'function' | 'module'>): boolean {
  if (f.module !== null && RUNTIME_MODULE.test(moduleBase(f.module))) return true;
  return f.function !== null && RUNTIME_FUNCTION.test(f.function);
}

/** Where in the user's code a rank is: a thread, the frame's depth in it (0 innermost) and the frame. */
export interface UserFrame {
  readonly tid: number;
  readonly index: number;
  readonly frame: Frame;
}

/**
 * The innermost frame outside the MPI and runtime libraries on the thread in the rank's MPI
 * call (its main thread when it is in none): the user's line that made the call. Null when the
 * stacks were not read or every frame is the runtime's.
 */
export function userFrame(r: RankSnapshot): UserFrame | null {
  const ts = r.threads;
  if (ts === undefined || ts.length === 0) return null;
  const tid = r.mpiCall?.tid;
  const t =
    (tid === undefined ? undefined : ts.find((x) => x.tid === tid)) ?? ts.find((x) => x.main) ?? ts[0];
  if (t === undefined) return null;
  for (let i = 0; i < t.frames.length; i++) {
    const f = t.frames[i];
    if (f !== undefined && !isRuntimeFrame(f) && (f.function !== null || f.file !== null)) {
      return { tid: t.tid, index: i, frame: f };
    }
  }
  return null;
}
