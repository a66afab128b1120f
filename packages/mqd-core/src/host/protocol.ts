// The wire between the agent (or CLI) and its DLL host child, over Node's IPC channel.
// One request at a time per host; replies carry the request id. The host streams one `rank`
// message per rank as soon as it is read, announced by `begin`, so that when the host dies
// the supervisor knows exactly which rank it was reading (that rank alone gets the error).
import type { MpiLibrary, MqdError, RankSnapshot } from '@mqd/model';
import type { ReaderCredentials } from './identity.js';

export interface HostTarget {
  readonly pid: number;
  readonly rank: number;
  readonly host: string;
  /**
   * Checked again by the reader right before the stop (host/identity.ts checkTarget): the
   * owner the agent accepted, whether uid 0 is allowed, and the start time the agent saw.
   */
  readonly ownerUid?: number;
  readonly allowRoot?: boolean;
  readonly startTime?: string;
}

export interface SnapshotRequest {
  readonly type: 'snapshot';
  readonly id: number;
  readonly dll: string;
  readonly targets: readonly HostTarget[];
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
}

export interface ResolveTarget {
  readonly pid: number;
  readonly ownerUid: number;
  readonly allowRoot: boolean;
  readonly startTime?: string;
}

/** Which DLL each pid names in MPIR_dll_name; answered before (and without) loading any DLL. */
export interface ResolveRequest {
  readonly type: 'resolve';
  readonly id: number;
  /** Each pid is checked (owner, start time) before its files are parsed. */
  readonly targets: readonly ResolveTarget[];
}

export type HostRequest = SnapshotRequest | ResolveRequest | { readonly type: 'ping'; readonly id: number };

/** One pid's answer to a ResolveRequest: the DLL path it names, or why there is none. */
export type Resolved =
  | { readonly pid: number; readonly dll: string }
  | { readonly pid: number; readonly error: MqdError };

export interface HostStats {
  readonly dllOpenMicros: number;
  readonly fetches: number;
  readonly typeLookups: number;
  readonly filesIndexed: number;
  /** Callbacks the DLL made into JavaScript (the rest were answered natively, shim.ts). */
  readonly jsCallbacks: number;
  /** process_vm_readv calls (page-cache misses) of the DLLs' reads and ours. */
  readonly readSyscalls: number;
}

export type HostMessage =
  | { readonly type: 'ready'; readonly pid: number; readonly credentials: ReaderCredentials }
  /** The reader is not who the agent asked for (or could not set NO_NEW_PRIVS): it exits. */
  | { readonly type: 'privdrop'; readonly error: MqdError }
  | { readonly type: 'resolved'; readonly id: number; readonly answers: readonly Resolved[] }
  | { readonly type: 'pong'; readonly id: number }
  | { readonly type: 'begin'; readonly id: number; readonly pid: number }
  | { readonly type: 'stopped'; readonly id: number; readonly pid: number }
  | { readonly type: 'rank'; readonly id: number; readonly rank: RankSnapshot }
  | {
      readonly type: 'done';
      readonly id: number;
      readonly library: MpiLibrary;
      readonly version: string;
      readonly stats: HostStats;
    }
  | { readonly type: 'failed'; readonly id: number; readonly error: MqdError };
