// The wire between the agent (or CLI) and its DLL host child, over Node's IPC channel.
// One request at a time per host; replies carry the request id. The host streams one `rank`
// message per rank as soon as it is read, announced by `begin`, so that when the host dies
// the supervisor knows exactly which rank it was reading (that rank alone gets the error).
import type { MpiLibrary, MqdError, RankSnapshot } from '@mqd/model';

export interface HostTarget {
  readonly pid: number;
  readonly rank: number;
  readonly host: string;
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
  /** Pids the host should keep set up (others are destroyed): the job's current ranks. */
  readonly keepPids: readonly number[];
  /** Testing the kill -9 guarantee: the host holds each rank stopped this long and says so. */
  readonly holdStoppedMs?: number;
}

export type HostRequest = SnapshotRequest | { readonly type: 'ping'; readonly id: number };

export interface HostStats {
  readonly dllOpenMicros: number;
  readonly fetches: number;
  readonly typeLookups: number;
  readonly filesIndexed: number;
}

export type HostMessage =
  | { readonly type: 'ready'; readonly pid: number }
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
