// The shape of an explanation (explain.ts builds it, explain-text.ts words it).
import type { MpiLibrary } from '../snapshot-spec.js';
import type { CallGroup, CollectiveMismatch } from './call-facts.js';
import type { PeerMode, RankClass } from './classes.js';
import type { DiagnosisLines } from './diagnosis.js';
import type { NearMiss } from './near-miss.js';
import type { OpenMpSummary } from './openmp.js';
import type { ProgressStep } from './progress.js';
import type { ProgressCounter } from './progress-counter.js';
import type { SendCycle } from './send-cycle.js';
import type { DeadEndWait, DeadlockCycle } from './wait-graph.js';

/**
 * `openmp-hang`: some rank can never proceed because of OpenMP alone (its threads wait for
 * locks no running thread can release, and none is in an MPI call), while MPI shows no deadlock.
 */
export type Verdict =
  | 'deadlock'
  | 'collective-hang'
  | 'openmp-hang'
  | 'stuck'
  | 'progressing'
  | 'idle'
  | 'unknown';

export interface CollectiveSummary {
  readonly commKey: string;
  readonly commName: string;
  readonly commSize: number;
  readonly rankCount: number;
  /** Ranks with collective-internal traffic pending, as ranges. */
  readonly ranks: string;
  /** Ranks waited for inside the collective that show no collective traffic themselves. */
  readonly waitingFor: string;
  /** Participants those late ranks wait for in p2p: a cycle through the collective. */
  readonly lateWaitOn: string;
}

/**
 * Stable codes of the analysis's limits, so views pick the ones they need without reading the
 * sentence (which may change):
 * - `stacks-missing`: some readable ranks have no stacks; their wait comes from the queues alone.
 * - `sends-hidden`: some send queues cannot be read; senders' waits are inferred.
 * - `mpich-blocking-sends`: MPICH lists only nonblocking sends; blocking ones are inferred.
 * - `receives-hidden`: some posted-receive queues cannot be read.
 * - `unexpected-hidden`: some unexpected queues cannot be read; near misses use the send queues.
 * - `peers-unmapped`: pending operations whose peer cannot be mapped to a world rank.
 * - `openmpi-collectives-hidden`: Open MPI shows no collective-internal traffic.
 * - `openmp-unavailable`: some ranks' OpenMP threads could not be read (RankSnapshot.openmpError).
 */
export const LIMIT_CODES = [
  'stacks-missing',
  'sends-hidden',
  'mpich-blocking-sends',
  'receives-hidden',
  'unexpected-hidden',
  'peers-unmapped',
  'peers-outside',
  'openmpi-collectives-hidden',
  'openmp-unavailable',
] as const;
export type LimitCode = (typeof LIMIT_CODES)[number];

/** One limit of the analysis: a stable code and a sentence for people. */
export interface Limit {
  readonly code: LimitCode;
  readonly text: string;
}

/** The limits that say a message could be queued where no one can see it (matching, near misses). */
export const MATCHING_LIMIT_CODES: readonly LimitCode[] = [
  'sends-hidden',
  'mpich-blocking-sends',
  'unexpected-hidden',
];

export interface Explanation {
  readonly verdict: Verdict;
  /** One paragraph for a human. */
  readonly summary: string;
  /**
   * The verdict as the summary names it ("Deadlock", "Collective hang on MPI_COMM_WORLD",
   * "No deadlock"), and the rest of that first statement: the summary begins with
   * `${headline}: ${lead}`, so a view can show the two apart without repeating the verdict.
   * Both "" when the summary has no statement of the verdict.
   */
  readonly headline: string;
  readonly lead: string;
  readonly takenAt: string;
  readonly library: MpiLibrary;
  readonly rankCount: number;
  /** Some ranks could not be read: the verdict covers the others only. */
  readonly partial: boolean;
  readonly partialReasons: string[];
  /** What the MPI library cannot show, and how the analysis works around it. */
  readonly limits: Limit[];
  readonly waits: {
    readonly waitingRanks: number;
    readonly clauses: number;
    readonly inferredClauses: number;
    readonly unresolvedWaits: number;
    /** Pending operations waiting for ranks the snapshot does not hold. */
    readonly outsideWaits: number;
    /** Those ranks, as ranges. */
    readonly outsideRanks: string;
    /** Ranks waited for that are not blocked in a visible operation. */
    readonly waitingOnFree: string;
  };
  readonly deadlock: {
    readonly count: number;
    readonly ranks: string;
    readonly cycles: DeadlockCycle[];
    readonly cycleTotal: number;
    readonly blockedBehind: string;
    /** Waits on ranks that will never act again (the first few): a hang with no cycle. */
    readonly deadEnds: DeadEndWait[];
    readonly deadEndTotal: number;
  } | null;
  /** Ranks that will never send or receive again (in MPI_Finalize or MPI_Abort, or exited), as ranges. */
  readonly finished: string;
  /**
   * Every readable rank is blocked in an MPI call (its stacks say so) and none can still act,
   * though no rule proves a hang: the `stuck` verdict of one snapshot. False otherwise.
   */
  readonly allBlocked: boolean;
  /** Ranks in a blocking collective every member of its communicator has entered: it can complete. */
  readonly completing: string;
  /** Ranks in a rooted collective (MPI_Reduce, MPI_Bcast...) whose root argument could not be read. */
  readonly rootsUnread: string;
  /** Ranks that would be deadlocked if the unread ranks are blocked too (empty when none are unread). */
  readonly dependsOnUnknown: string;
  readonly collectives: CollectiveSummary[];
  readonly nearMisses: NearMiss[];
  readonly nearMissTotal: number;
  readonly classes: RankClass[];
  readonly classTotal: number;
  /** How the class shapes write peers: offsets from the rank, or local ranks (see classes.ts). */
  readonly classPeers: PeerMode;
  readonly outliers: string;
  /** Consecutive comparisons, oldest first, the last one ending at this snapshot. */
  readonly progress: ProgressStep[];
  /**
   * Where the stacks put the ranks: one group per MPI call (and communicator), computing, or
   * without stacks; largest first. Empty when no rank's stacks were read.
   */
  readonly calls: CallGroup[];
  /** Communicators whose members are in different collectives, or some in one and others elsewhere. */
  readonly collectiveMismatches: CollectiveMismatch[];
  /** Ranks the stacks show in no MPI call or in one that returns by itself: they can proceed. */
  readonly computing: string;
  /**
   * The ranks' OpenMP threads (openmp.ts analyzeOpenMp): groups of ranks with the same picture,
   * OpenMP deadlocks, ranks whose team waits on a thread in MPI. readRanks 0 and no lines when
   * no rank's OpenMP runtime was read.
   */
  readonly openmp: OpenMpSummary;
  /** Ranks waiting in MPI directly for a rank whose OpenMP threads can never proceed, as ranges. */
  readonly behindOpenMp: string;
  /**
   * The facts per group of ranks (call, peer, tag, communicator, the user's source line) and
   * the first cycle edge by edge, as linkable parts (diagnosis.ts).
   */
  readonly diagnosis: DiagnosisLines;
  /**
   * The first cycle when every rank of it waits in MPI_Send: the message size that made the
   * sends wait for receives, and the library's eager limit. Absent otherwise.
   */
  readonly sendCycle?: SendCycle;
  /**
   * The progress counter (an expression the request marked `progress`, progress-counter.ts) when
   * it tells ranks apart: the least progressed by its number, or the ranks it could not be read
   * on. Absent when no counter was read or every rank read the same number.
   */
  readonly progressCounter?: ProgressCounter;
}

export interface ExplainOptions {
  readonly maxCycles?: number;
  readonly maxNearMisses?: number;
  readonly maxClasses?: number;
  readonly maxExamples?: number;
}

/**
 * Explain one snapshot; `previous` are earlier snapshots of the same job in time order, used
 * to tell a stuck job from a progressing one.
 */
