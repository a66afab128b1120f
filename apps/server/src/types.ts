// The aggregator's records, as the store keeps them (times in epoch milliseconds). What the REST
// API sends is specified in packages/model api-spec.ts (ISO 8601 UTC times); http.ts maps each
// record to its spec type, so a difference between the two fails to compile there.
import type { JobId, SnapshotId } from '@mqd/model';
import type { LocatedRank } from './seams.js';

export interface User {
  readonly id: number;
  readonly name: string;
  /** The Unix uid whose jobs this user may see; null = none (unless admin). */
  readonly uid: number | null;
  readonly admin: boolean;
}

export interface JobRecord {
  readonly id: JobId;
  /** Node of the starter (where the locate ran). */
  readonly host: string;
  readonly starterPid: number;
  /** The starter's /proc/PID/stat start time: (host, starterPid, starterStartTime) is the identity. */
  readonly starterStartTime: string;
  /** Set once when the job is created; never changes (a reused pid is a new job). */
  readonly uid: number;
  readonly command: string;
  readonly method: string;
  /** Sorted by rank, each rank once. */
  readonly ranks: readonly LocatedRank[];
  readonly createdAt: number;
  readonly createdBy: string;
  /** When a snapshot found every rank gone; null while the job runs. */
  readonly endedAt: number | null /**
   * A job read from core files: their directory (real path on the agent's node). Such a job
   * never ends by itself and is not auto-snapshotted (its snapshots are all equal).
   */;
  readonly coresDir?: string;
}

export interface SnapshotSummary {
  readonly ranks: number;
  readonly ok: number;
  /** Ranks in state error or no-queues. */
  readonly errors: number;
  /** Ranks in state agent-missing (their agent was gone or timed out). */
  readonly missing: number;
  readonly pendingSends: number;
  readonly pendingReceives: number;
  readonly unexpected: number;
  /** sha256 over the queues (volatile fields left out): equal digests = nothing moved. */
  readonly digest: string;
  /** The agent-missing ranks, at most MAX_LISTED_MISSING of them. */
  readonly missingRanks: readonly number[];
}

export const MAX_LISTED_MISSING = 4096;

export interface SnapshotMeta extends SnapshotSummary {
  readonly id: SnapshotId;
  readonly jobId: JobId;
  /** Epoch ms. */
  readonly takenAt: number;
  readonly durationMicros: number;
  readonly createdBy: string;
  /** Size of the snapshot JSON, and of what is stored (gzip). */
  readonly bytes: number;
  readonly storedBytes: number;
}

export interface ShareRecord {
  readonly id: string;
  readonly snapshotId: SnapshotId;
  readonly createdBy: string;
  readonly createdAt: number;
  readonly expiresAt: number;
}

export type AuditAction =
  | 'login'
  | 'attach'
  | 'snapshot'
  | 'share'
  | 'user-create'
  | 'agent-connect'
  | 'agent-disconnect';

export interface AuditEntry {
  readonly id: number;
  readonly at: number;
  readonly who: string;
  readonly action: AuditAction;
  readonly jobId: string | null;
  readonly snapshotId: string | null;
  readonly detail: string;
}
