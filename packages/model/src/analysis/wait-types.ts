// The wait-for graph's shapes and codes, shared by its building (wait-graph.ts) and its solving
// (wait-solve.ts). Internal: the public names are re-exported by wait-graph.ts.
import type { CallFacts } from './call-facts.js';
import type { OpRef } from './comm.js';
import type { Csr, IntVec } from './csr.js';
import type { SnapshotIndex } from './snapshot-index.js';

/**
 * Why an edge exists: the waiting rank's own operation, an unexpected message at the target,
 * or (from the stacks) the blocking call the rank is in: its arguments name the peer (`call`),
 * it is in a collective the target has not entered (`collective-call`), or it is in a blocking
 * send whose queue entry the library already shows as done (`send-in-call`, Open MPI's
 * eager-synchronous MPI_Ssend: the data left, the acknowledgement never came).
 */
export type EdgeEvidence =
  | 'send'
  | 'receive'
  | 'wildcard-receive'
  | 'inferred-from-unexpected'
  | 'call'
  | 'collective-call'
  | 'send-in-call'
  | 'receive-in-call';
export const EVIDENCE: readonly EdgeEvidence[] = [
  'send',
  'receive',
  'wildcard-receive',
  'inferred-from-unexpected',
  'call',
  'collective-call',
  'send-in-call',
  'receive-in-call',
];
export const EV_SEND = 0;
export const EV_RECV = 1;
export const EV_ANY = 2;
export const EV_INFERRED = 3;
export const EV_CALL = 4;
export const EV_COLLECTIVE = 5;
export const EV_SEND_IN_CALL = 6;
export const EV_RECV_IN_CALL = 7;
/** Evidence that rests on inference, not on a pending operation or a call's own arguments. */
export const INFERRED_EVIDENCE: ReadonlySet<EdgeEvidence> = new Set([
  'inferred-from-unexpected',
  'send-in-call',
  'receive-in-call',
]);

/** A collective waiter gets clauses on at most this many absent members (keeps it linear). */
export const MAX_COLLECTIVE_CLAUSES = 16;

export interface WaitEdgeOp extends OpRef {
  readonly evidence: EdgeEvidence;
  readonly tag: number | null;
  /** For edges from the stacks: the MPI call the waiting rank is in (index is -1 when no queue entry backs it). */
  readonly call?: string;
}

/** `from` cannot proceed until `to` does something; `ops` are the queue entries that say so. */
export interface WaitEdge {
  readonly from: number;
  readonly to: number;
  readonly ops: WaitEdgeOp[];
  /** Every op is an inference (an unexpected message whose sender's send queue is invisible). */
  readonly inferred: boolean;
}

export interface DeadlockCycle {
  /** World ranks in wait order: ranks[i] waits for ranks[i+1], the last for the first. */
  readonly ranks: number[];
  readonly edges: WaitEdge[];
  /** Ranks in the strongly connected set this cycle was taken from (other cycles may run through it). */
  readonly componentSize: number;
  /** No edge of the cycle rests on inference alone. */
  readonly certain: boolean;
}

export interface CollectiveInProgress {
  readonly commKey: string;
  readonly commName: string;
  readonly commSize: number;
  /** World ranks with collective-internal traffic on this communicator. */
  readonly ranks: number[];
  /** Ranks others wait for inside the collective that show no collective traffic themselves: likely late. */
  readonly waitingFor: number[];
  /**
   * Participants that those late ranks wait for in p2p: a cycle through the collective (the
   * late rank waits for a participant, which waits inside the collective for the late rank).
   */
  readonly lateWaitOn: number[];
}

/**
 * Why a rank will never act again (WaitGraph.dead): it is in MPI_Finalize or MPI_Abort (its
 * stacks say so), or its process is gone (the snapshot could not read it because it exited).
 * A wait on such a rank can never be satisfied: the wait-for analysis's dead ends.
 */
export const DEAD_NONE = 0;
export const DEAD_FINAL = 1;
export const DEAD_GONE = 2;

/** A blocked rank's wait on a rank that will never act again. */
export interface DeadEndWait {
  /** World rank that waits. */
  readonly from: number;
  /** World rank waited for, which will never act again. */
  readonly to: number;
  readonly ops: WaitEdgeOp[];
  /** Why `to` will not act: in MPI_Finalize / MPI_Abort (`final`), or its process is gone. */
  readonly reason: 'final' | 'gone';
}

export interface WaitAnalysis {
  readonly rankCount: number;
  /** World ranks whose queues were not read (state not ok): unknowns, assumed able to proceed. */
  readonly unknownRanks: number[];
  /** Ranks with at least one pending p2p wait. */
  readonly waitingRanks: number;
  /** Number of p2p wait clauses (an edge, or a wildcard over a communicator). */
  readonly clauses: number;
  readonly inferredClauses: number;
  /** Pending p2p operations whose peer cannot be resolved (counted as able to proceed). */
  readonly unresolvedWaits: number;
  /**
   * Pending p2p operations whose peer is a known world rank the snapshot does not hold (a
   * subset of the job's ranks): like an unread rank, assumed able to proceed.
   */
  readonly outsideWaits: number;
  /** Those peers' world ranks, sorted. */
  readonly outsideRanks: number[];
  /** World ranks that can never proceed. */
  readonly deadlocked: number[];
  readonly cycles: DeadlockCycle[];
  /** Cycles found before the output limit cut the list. */
  readonly cycleTotal: number;
  /** Deadlocked ranks in no cycle: they wait on ranks that are, on dead ends, or on nobody at all. */
  readonly blockedBehind: number[];
  /** World ranks that will never act again (in MPI_Finalize or MPI_Abort, or gone), sorted. */
  readonly finished: number[];
  /** Deadlocked ranks' waits on those (the first few, by waiting rank): hangs with no cycle. */
  readonly deadEnds: DeadEndWait[];
  /** deadEnds before the cut. */
  readonly deadEndTotal: number;
  /** Ranks that can proceed only if the unknown ranks can: deadlocked if those are blocked too. */
  readonly dependsOnUnknown: number[];
  /** Ranks that waiting ranks wait for directly but that are not blocked themselves. */
  readonly waitingOnFree: number[];
  readonly collectives: CollectiveInProgress[];
  /** Ranks whose stacks put them in no MPI call, or in one that returns by itself: they can proceed. */
  readonly computing: number[];
}

export interface WaitOptions {
  /** At most this many cycles in the result (default 100); cycleTotal still counts all. */
  readonly maxCycles?: number;
  /** At most this many dead-end waits in the result (default 16); deadEndTotal counts all. */
  readonly maxDeadEnds?: number;
}

export const KIND_SINGLE = 0;
export const KIND_GROUP = 1;

/** Clauses and collective traffic of one snapshot, before any solving. */
export interface WaitGraph {
  readonly ix: SnapshotIndex;
  readonly clauseCount: number;
  /** Per clause: waiting rank position, kind, target position or group id, and the op that justifies it. */
  readonly cRank: Int32Array;
  readonly cKind: Uint8Array;
  readonly cTarget: Int32Array;
  readonly cComm: Int32Array;
  readonly cQueue: Uint8Array;
  readonly cIndex: Int32Array;
  readonly cEvidence: Uint8Array;
  /** Clauses of each rank position. */
  readonly byRank: Csr;
  /** Wildcard groups: the communicator key of each, its members, and whether an unknown rank may be one. */
  readonly groupKey: Int32Array;
  readonly groupMembers: Csr;
  readonly groupUnknownMember: Uint8Array;
  /** Groups each rank position belongs to (inverse of groupMembers). */
  readonly groupsOf: Csr;
  readonly unresolvedWaits: number;
  readonly outsideWaits: number;
  /** World ranks waited for that the snapshot does not hold, sorted. */
  readonly outsideRanks: number[];
  /** The stacks' facts (mpiCall per rank). */
  readonly calls: CallFacts;
  /** Per rank position, DEAD_*: the rank will never act again (never released by the solver). */
  readonly dead: Uint8Array;
  /** Collective-internal operations: communicator key, rank, target, and 1 for a wait (0 for an arrival). */
  readonly collOps: {
    readonly keyId: IntVec;
    readonly rank: IntVec;
    readonly target: IntVec;
    readonly wait: IntVec;
  };
}
