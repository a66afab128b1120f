// The wire between the agent (or CLI) and its reader child, over Node's IPC channel.
// One request at a time per host; replies carry the request id. The host streams one `rank`
// message per rank as soon as it is read, announced by `begin`, so that when the host dies
// the supervisor knows exactly which rank it was reading (that rank alone gets the error).
import type { EvalRequest, MpiLibrary, MqdError, RankSnapshot } from '@mqd/model';
import type { DllPolicy } from '../policy/dll-policy.js';
import type { ReaderCredentials } from './identity.js';
import type { WireRank } from './wire.js';

/**
 * How a reader sends a rank's operations: 'columns' (wire.ts, the default) or 'objects' (the
 * RankSnapshot as it is, structured-cloned: kept to measure against, packages/mqd-core/bench/deep-queues.bench.ts).
 */
export type RankWire = 'columns' | 'objects';

/** A core file to read instead of a live process. */
export interface CoreRef {
  readonly path: string;
  readonly exe?: string;
  readonly sysroot?: string;
}

export interface ReaderRank {
  /** A live process; for a core, a negative key standing for it (CoreRef). */
  readonly pid: number;
  readonly rank: number;
  readonly host: string;
  /**
   * Checked again by the reader right before the stop (reader/identity.ts checkTarget): the
   * owner the agent accepted, whether uid 0 is allowed, and the start time the agent saw.
   */
  readonly ownerUid?: number;
  readonly allowRoot?: boolean;
  readonly startTime?: string;
  readonly core?: CoreRef;
  /**
   * The most bytes of snapshot JSON this rank may take (the agent's message cap): the reader
   * stops the rank's walk once its entries pass it and answers MQD_E_TOO_LARGE for the rank
   * (RankReadOptions.maxRankBytes). Absent: no such budget.
   */
  readonly maxRankBytes?: number;
}

export interface SnapshotRequest {
  readonly type: 'snapshot';
  readonly id: number;
  readonly dll: string;
  readonly targets: readonly ReaderRank[];
  /** Max bytes read from one rank in one stop before its walk is cut (corrupt or cyclic lists). */
  readonly readBudgetBytes: number;
  /** Max wait for every thread of a rank to stop. */
  readonly stopTimeoutMs: number;
  /** Unwind every thread's stack in the same stop as the queue read (default true). */
  readonly stacks?: boolean;
  /** Pids the host should keep set up (others are destroyed): the job's current ranks. */
  readonly keepPids: readonly number[];
  /** Testing the kill -9 guarantee: the host holds each rank stopped this long and says so. */
  readonly holdStoppedMs?: number;
  /** The site's DLL policy, applied to the OMPD library a rank's OpenMP runtime names too. */
  readonly ompdPolicy?: DllPolicy;
  /** OMPD libraries that crashed or hung a reader of this supervisor: path → what happened. */
  readonly ompdRefused?: Readonly<Record<string, string>>;
  /** How ranks are sent back (default 'columns'). */
  readonly wire?: RankWire;
  /**
   * A light read (the hang watch's sample, a few KB every few minutes): the same stop and the
   * same rank records, without the full collection after the answer unless the old space grew
   * (reader-main.ts collectIfGrown). Default false.
   */
  readonly light?: boolean;
  /** Expressions read on every rank in its stop (RankSnapshot.values); absent: none. */
  readonly evals?: readonly EvalRequest[];
}

export interface ResolveTarget {
  readonly pid: number;
  readonly ownerUid: number;
  readonly allowRoot: boolean;
  readonly startTime?: string;
  readonly core?: CoreRef;
}

/** What a reader learnt from a core while resolving its DLL. */
export interface CoreFacts {
  /** The pid the process had. */
  readonly pid: number;
  /** MPI_COMM_WORLD rank from the environment in the core, and the variable it came from. */
  readonly rank: number | null;
  readonly rankVariable: string | null;
  /** The node the process ran on, when its environment says (SLURMD_NODENAME, HOSTNAME). */
  readonly host: string | null;
  /** The signal that made the core (0: none, e.g. `mqd capture`). */
  readonly signal: number;
  /** The executable as the process ran it. */
  readonly executable: string;
}

/** Which DLL each pid names in MPIR_dll_name; answered before (and without) loading any DLL. */
export interface ResolveRequest {
  readonly type: 'resolve';
  readonly id: number;
  /** Each pid is checked (owner, start time) before its files are parsed. */
  readonly targets: readonly ResolveTarget[];
}

/** Write a core of each target (`mqd capture`): stop, write, resume; no DLL is loaded. */
export interface CaptureRequest {
  readonly type: 'capture';
  readonly id: number;
  /** Checked like a snapshot's targets (owner, start time) right before each stop. */
  readonly targets: readonly ReaderRank[];
  /** The directory the cores go to (rank-N.core), writable by the reader's identity. */
  readonly dir: string;
  readonly stopTimeoutMs: number;
}

/** One target's answer to a CaptureRequest. */
export type Captured =
  | {
      readonly pid: number;
      readonly rank: number;
      readonly core: string;
      readonly bytes: number;
      readonly executable: string;
      /** How long the rank was stopped, microseconds. */
      readonly pausedMicros: number;
    }
  | { readonly pid: number; readonly rank: number; readonly error: MqdError };

export type ReaderRequest =
  | SnapshotRequest
  | ResolveRequest
  | CaptureRequest
  | { readonly type: 'ping'; readonly id: number };

/** One pid's answer to a ResolveRequest: the DLL path it names, or why there is none. */
export type Resolved =
  | { readonly pid: number; readonly dll: string; readonly core?: CoreFacts }
  | { readonly pid: number; readonly error: MqdError; readonly core?: CoreFacts };

export interface ReaderStats {
  readonly dllOpenMicros: number;
  readonly fetches: number;
  readonly typeLookups: number;
  readonly filesIndexed: number;
  /** Callbacks the DLL made into JavaScript (the rest were answered natively, shim.ts). */
  readonly jsCallbacks: number;
  /** process_vm_readv calls (page-cache misses) of the DLLs' reads and ours. */
  readonly readSyscalls: number;
}

export type ReaderMessage =
  | { readonly type: 'ready'; readonly pid: number; readonly credentials: ReaderCredentials }
  /** The reader is not who the agent asked for (or could not set NO_NEW_PRIVS): it exits. */
  | { readonly type: 'privdrop'; readonly error: MqdError }
  | { readonly type: 'resolved'; readonly id: number; readonly answers: readonly Resolved[] }
  | { readonly type: 'captured'; readonly id: number; readonly answers: readonly Captured[] }
  | { readonly type: 'pong'; readonly id: number }
  | { readonly type: 'begin'; readonly id: number; readonly pid: number }
  | { readonly type: 'stopped'; readonly id: number; readonly pid: number }
  /** The reader is about to call into `library` (an OMPD library) for this rank: a crash or a hang now is its. */
  | { readonly type: 'ompd'; readonly id: number; readonly pid: number; readonly library: string }
  /** A rank as objects: with wire 'objects', or when a value does not fit the columns (wire.ts). */
  | { readonly type: 'rank'; readonly id: number; readonly rank: RankSnapshot }
  /** A rank read, its operations as columns (wire.ts). */
  | { readonly type: 'rank-columns'; readonly id: number; readonly rank: WireRank }
  | {
      readonly type: 'done';
      readonly id: number;
      readonly library: MpiLibrary;
      readonly version: string;
      readonly stats: ReaderStats;
    }
  | { readonly type: 'failed'; readonly id: number; readonly error: MqdError }
  /**
   * The reader still traces threads that never reached a stop (stopper.ts lingeringTracees):
   * only its end lets them go, so it answers nothing more and waits to be killed. Sent after the
   * rank whose stop failed (a snapshot: instead of `done`; the rest is read by a fresh reader),
   * before `captured` (a capture).
   */
  | {
      readonly type: 'retiring';
      readonly id: number;
      readonly pid: number;
      readonly tids: readonly number[];
    };
