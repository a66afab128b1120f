// What the MPI call a rank is inside (RankSnapshot.mpiCall, read from its stacks) means for
// the hang analysis: does the rank wait in it, and on whom. The queues cannot always say: Open
// MPI lists an eager-synchronous MPI_Ssend as `complete` while its sender still waits for the
// acknowledgement, MPICH lists no blocking send at all, and a probe or a collective leaves
// nothing in any queue. A rank inside a blocking call is blocked whatever its queues show.
import type { RankSnapshot } from '../snapshot-spec.js';
import { foldMpiName } from './frames.js';

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
  /**
   * The rank will never send or receive again: MPI_Finalize (whatever it waits for inside, a
   * message the user's code did not send before it will never come) and MPI_Abort.
   */
  | 'final'
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
];
const FINALS = ['MPI_Finalize', 'MPI_Abort'];
const KINDS = new Map<string, CallKind>([
  ...SENDS.map((f) => [f, 'send'] as const),
  ...RECEIVES.map((f) => [f, 'receive'] as const),
  ...WAITS.map((f) => [f, 'wait'] as const),
  ...SENDRECVS.map((f) => [f, 'sendrecv'] as const),
  ...COLLECTIVES.map((f) => [f, 'collective'] as const),
  ...FINALS.map((f) => [f, 'final'] as const),
]);

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
