// The aggregator's records, as the store keeps them (times in epoch milliseconds). What the REST
// API sends is specified in packages/model api-spec.ts (ISO 8601 UTC times); http.ts maps each
// record to its spec type, so a difference between the two fails to compile there.
import type { ApiWatchPolicy, JobId, QueueKind, SnapshotId, WatchConfidence, WatchState } from '@mqd/model';
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
  /**
   * Queue kinds no read rank's library could show (null on every communicator that has it), in
   * QUEUE_KINDS order: their count is unknown, not 0. Absent or empty: every kind was read.
   */
  readonly unreadable?: readonly QueueKind[];
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
  /** A user's name, or the system principal's (a reserved name) when `madeBy` is set. */
  readonly createdBy: string;
  readonly createdAt: number;
  readonly expiresAt: number;
  /**
   * Set when the system made the link (the hang watch): then no user owns it by name; the
   * owner of its snapshot's job and the admins see and revoke it.
   */
  readonly madeBy?: 'watch';
}

/** Whose live share links a list shows: a user's own, and the system's of jobs of their uid (never uid 0). */
export interface ShareViewer {
  readonly name: string;
  readonly uid: number | null;
}

export type AuditAction =
  | 'login'
  | 'attach'
  | 'snapshot'
  | 'share'
  | 'user-create'
  | 'agent-connect'
  | 'agent-disconnect'
  | 'watch-policy'
  | 'watch-register'
  | 'watch-notify'
  | 'watch-cores';

export interface AuditEntry {
  readonly id: number;
  readonly at: number;
  readonly who: string;
  readonly action: AuditAction;
  readonly jobId: string | null;
  readonly snapshotId: string | null;
  readonly detail: string;
}

// --- the hang watch (apps/server/src/watch/, docs/hang-watch.md)

/** The policy in the store, and who set it last. */
export interface StoredWatchPolicy {
  readonly policy: ApiWatchPolicy;
  readonly updatedAt: number;
  readonly updatedBy: string;
}

/** What the fleet shows of a discovered job that does not change from sample to sample. */
export interface WatchJobInfo {
  readonly kind: 'slurm' | 'starter';
  readonly slurmJob: string | null;
  readonly program: string;
  readonly command: string;
  readonly partition: string | null;
  readonly account: string | null;
  readonly nodes: readonly string[];
  readonly rankCount: number;
  /** Epoch ms. */
  readonly startedAt: number;
  /** `off`: the job opted out (MQD_WATCH=off), as discovered last. */
  readonly watch?: 'on' | 'off';
}

/** One discovered job as the store keeps it: identity (key, uid), its store job, last verdict. */
export interface WatchJobRecord {
  /** `${uid}:${key}`: one key under two owners is two jobs. */
  readonly id: string;
  readonly key: string;
  readonly uid: number;
  readonly jobId: JobId | null;
  readonly info: WatchJobInfo;
  readonly firstSeen: number;
  readonly lastSeen: number;
  readonly endedAt: number | null;
  readonly endReason: string | null;
  readonly state: WatchState;
  readonly since: number | null;
  readonly confidence: WatchConfidence | null;
  readonly leastProgressed: string;
  readonly diagnosis: string;
  /** The snapshot behind the verdict (for a hung job, the one that shows the hang). */
  readonly evidenceSnapshotId: SnapshotId | null;
  /** The last snapshot the watcher stored, its queue digest and the state it was stored under. */
  readonly lastSnapshotId: SnapshotId | null;
  readonly lastDigest: string | null;
  readonly lastStateStored: WatchState | null;
}

/** A compact sample row: no snapshot unless one was stored with it. */
export interface WatchSampleRecord {
  readonly watchId: string;
  readonly at: number;
  readonly state: WatchState;
  /** The queue digest of the sample's snapshot, null when no stop was made or it failed. */
  readonly digest: string | null;
  readonly ranksRead: number;
  /** CPU summary: total ticks over the ranks read, and how many ranks were running (R). */
  readonly cpu: { readonly ticks: number; readonly running: number; readonly switches: number };
  /** Stop time of the sample's snapshot over all ranks, microseconds. */
  readonly stopMicros: number;
  readonly snapshotId: SnapshotId | null;
}

/** One hang episode: opened when a job becomes hung, closed when it progresses or ends. */
export interface WatchEpisode {
  readonly id: number;
  readonly watchId: string;
  readonly startedAt: number;
  readonly endedAt: number | null;
  readonly snapshotId: SnapshotId | null;
  readonly shareId: string | null;
  readonly notifiedAt: number | null;
}
