// The store as the rest of the aggregator sees it: every method returns a Promise, so one
// implementation can be SQLite in-process (better-sqlite3: the promise is already settled) and
// another PostgreSQL over the network (pg). Each "read, decide, write" that must be atomic is
// one method here (saveJob, insertSnapshot, rememberRequest, insertShare, insertWatchSample...),
// so callers never need a transaction of their own.
//
// Errors are MqdExceptions with the same codes from either implementation:
// MQD_E_STORE_READONLY (the disk or the database refuses writes; reads may still work),
// MQD_E_STORE_UNAVAILABLE (the database cannot be reached: a coded 503, retried by clients),
// MQD_E_STORE_CORRUPT (the file is damaged, at open).
import type { ApiWatchPolicy, JobId, SnapshotId, WatchState } from '@mqd/model';
import type {
  AuditAction,
  AuditEntry,
  JobRecord,
  ShareRecord,
  ShareViewer,
  SnapshotMeta,
  StoredWatchPolicy,
  User,
  WatchEpisode,
  WatchJobInfo,
  WatchJobRecord,
  WatchSampleRecord,
} from '../shared/types.js';

/** A user's key for one snapshot request (the Idempotency-Key header). */
export interface SnapshotRequestKey {
  readonly userId: number;
  readonly key: string;
}

export interface RetentionPolicy {
  /**
   * Snapshots kept per job, newest first, beside the evidence kept past it (store-retention.ts:
   * the first of each of the newest N runs of equal ones, the watch's, the shared); 0 = unlimited.
   */
  readonly maxSnapshotsPerJob: number;
  /** Snapshots older than this are dropped, but the evidence store-retention.ts keeps; 0 = forever. */
  readonly maxAgeSeconds: number;
  /** Audit rows, and jobs ended, older than this are dropped by sweep(); 0 or absent = forever. */
  readonly auditAgeSeconds?: number;
  /** Hang-watch samples kept per watched job, newest first; default 500. */
  readonly maxWatchSamplesPerJob?: number;
}

/** What the watcher changes of a watched job after a sample (the rest stays). */
export interface WatchVerdictUpdate
  extends Pick<
    WatchJobRecord,
    'state' | 'since' | 'confidence' | 'leastProgressed' | 'diagnosis' | 'evidenceSnapshotId'
  > {
  /** Set when this sample stored a snapshot. */
  readonly stored?: { readonly snapshotId: SnapshotId; readonly digest: string; readonly state: WatchState };
}

export interface NewSnapshot {
  readonly meta: SnapshotMeta;
  readonly gz: Buffer;
}

export interface NewAudit {
  readonly who: string;
  readonly action: AuditAction;
  readonly jobId?: string | null;
  readonly snapshotId?: string | null;
  readonly detail?: string;
}

/** A page of the fleet (GET /api/fleet), read in a few queries whatever the page's size. */
export interface FleetPageQuery {
  /** null: every job (an admin); else this uid's jobs, never uid 0's (canSee). */
  readonly uid: number | null;
  readonly limit: number;
  readonly offset: number;
  /** Newest samples kept per job in `history`. */
  readonly history: number;
}

export interface FleetPageEntry {
  readonly job: WatchJobRecord;
  /** The name of a user of the job's uid (as userNameOfUid), or null. */
  readonly user: string | null;
  /** Samples stored for the job in all. */
  readonly samples: number;
  /** Its newest samples, oldest first. */
  readonly history: readonly Pick<WatchSampleRecord, 'at' | 'state' | 'snapshotId'>[];
}

export interface FleetPage {
  /** Jobs the query matches in all. */
  readonly total: number;
  /** Live hung jobs first, then the other live ones, then the ended ones; newest first in each. */
  readonly jobs: readonly FleetPageEntry[];
}

export interface StorePort {
  /** 'sqlite' or 'postgres': for logs, /metrics and tests that differ by dialect. */
  readonly dialect: 'sqlite' | 'postgres';
  /** Versions this open applied (empty when the schema was already current). */
  readonly migrationsApplied: readonly number[];
  /** Why writes are refused (a disk-full or I/O error went before), or null while writable. */
  readonly readOnlyReason: string | null;
  /** False once close() was called: background work checks it before touching the store. */
  readonly isOpen: boolean;

  schemaVersion(): Promise<number>;
  close(): Promise<void>;

  // users and sessions
  upsertUser(u: {
    name: string;
    uid: number | null;
    admin: boolean;
    tokenHash: string | null;
    tokenExpiresAt?: number | null;
  }): Promise<User>;
  userByTokenHash(hash: string): Promise<User | null>;
  loginToken(hash: string): Promise<User | 'expired' | null>;
  revokeToken(name: string, audit: NewAudit): Promise<boolean>;
  userNameOfUid(uid: number): Promise<string | null>;
  userByName(name: string): Promise<User | null>;
  createSession(tokenHash: string, userId: number, expiresAt: number): Promise<void>;
  /**
   * A login, atomically: checks the login token (as loginToken) and, when it is live, makes the
   * session in the same transaction (a token revoked at the same time makes no session).
   */
  loginSession(
    loginTokenHash: string,
    sessionHash: string,
    expiresAt: number,
  ): Promise<User | 'expired' | null>;
  userBySession(tokenHash: string): Promise<User | null>;
  deleteSession(tokenHash: string): Promise<void>;

  // jobs
  findJob(host: string, starterPid: number, starterStartTime: string | null): Promise<JobRecord | null>;
  findCoreJob(host: string, coresDir: string): Promise<JobRecord | null>;
  endReusedJobs(host: string, starterPid: number, starterStartTime: string, at: number): Promise<number>;
  saveJob(job: JobRecord, audit: NewAudit): Promise<void>;
  /**
   * An attach's find-or-create, in one transaction. A starter's job (coresDir undefined): its
   * not-ended jobs on (host, starterPid) with another start time end, then the not-ended job of
   * (host, starterPid, starterStartTime) is the one found. A job of cores: the job of (host,
   * coresDir), ended or not. A found job of another uid refuses ({ ok: false, existing }; the
   * ended jobs stay ended); else `job` is saved (as saveJob) under the found job's id,
   * starterPid, starterStartTime, createdAt and createdBy, and audited with the saved id.
   */
  attachJob(
    job: JobRecord,
    audit: Omit<NewAudit, 'jobId'>,
  ): Promise<{ ok: true; job: JobRecord } | { ok: false; existing: JobRecord }>;
  markJobEnded(id: JobId, at: number): Promise<void>;
  job(id: string): Promise<JobRecord | null>;
  jobs(uid: number | null): Promise<JobRecord[]>;

  // snapshots
  insertSnapshot(
    s: NewSnapshot,
    audit: NewAudit,
    requests?: readonly SnapshotRequestKey[],
  ): Promise<{ removed: number }>;
  rememberRequest(r: SnapshotRequestKey, snapshotId: SnapshotId): Promise<void>;
  requestedSnapshot(r: SnapshotRequestKey): Promise<SnapshotMeta | null>;
  sweep(): Promise<number>;
  snapshotMeta(id: string): Promise<SnapshotMeta | null>;
  snapshotData(id: string): Promise<Buffer | null>;
  /** A snapshot's overview (gzipped encodeOverview), null when none is stored. */
  snapshotOverview(id: string): Promise<Buffer | null>;
  /**
   * Stores a snapshot's overview; the first one stays (every instance computes the same), and
   * one whose snapshot is gone (retention) is dropped: returns whether it was stored.
   */
  putSnapshotOverview(id: string, body: Buffer): Promise<boolean>;
  snapshots(jobId: string, limit: number): Promise<SnapshotMeta[]>;
  /** The newest `limit` snapshots of each of these jobs, newest first (every id a key): one query. */
  snapshotsOfJobs(jobIds: readonly string[], limit: number): Promise<Map<string, SnapshotMeta[]>>;
  /**
   * The job of a snapshot that was stored and is no longer (retention removed it), from its
   * audit row; null for an id never stored, one still kept, or one whose audit row is gone.
   */
  removedSnapshotJob(id: string): Promise<JobId | null>;
  countSnapshots(jobId?: string): Promise<number>;

  // share links
  insertShare(share: ShareRecord, audit: NewAudit): Promise<void>;
  /** Live shares `viewer` may list (null: everyone's), newest first; see ShareViewer. */
  liveShares(viewer: ShareViewer | null): Promise<ShareRecord[]>;
  revokeShare(id: string, audit: NewAudit): Promise<void>;
  liveShare(id: string): Promise<ShareRecord | null>;

  // audit
  audit(a: NewAudit): Promise<void>;
  activity(limit: number, before?: number): Promise<AuditEntry[]>;

  // hang watch
  watchPolicy(): Promise<StoredWatchPolicy | null>;
  setWatchPolicy(policy: ApiWatchPolicy, audit: NewAudit): Promise<void>;
  watchJob(id: string): Promise<WatchJobRecord | null>;
  watchJobs(uid: number | null): Promise<WatchJobRecord[]>;
  upsertWatchJob(j: {
    id: string;
    key: string;
    uid: number;
    jobId: JobId | null;
    info: WatchJobInfo;
    at: number;
  }): Promise<void>;
  endWatchJob(id: string, at: number, reason: string | null): Promise<void>;
  setWatchEndReason(id: string, reason: string): Promise<void>;
  insertWatchSample(sample: WatchSampleRecord, v: WatchVerdictUpdate): Promise<void>;
  watchSamples(watchId: string, limit: number): Promise<WatchSampleRecord[]>;
  countWatchSamples(watchId: string): Promise<number>;
  /** One fleet page with each job's samples count, newest samples and user name: four queries. */
  fleetPage(q: FleetPageQuery): Promise<FleetPage>;
  openEpisode(watchId: string): Promise<WatchEpisode | null>;
  episodes(watchId: string): Promise<WatchEpisode[]>;
  openWatchEpisode(e: {
    watchId: string;
    startedAt: number;
    snapshotId: SnapshotId | null;
    shareId: string | null;
  }): Promise<number>;
  episodeNotified(id: number, at: number): Promise<void>;
  closeWatchEpisode(watchId: string, at: number): Promise<void>;

  // cluster leases (background work once per cluster of aggregators, cluster/leases.ts)
  /**
   * Takes or renews the named lease for `holder` until ttlMs from now, atomically: true when it
   * was free, expired or already the holder's; false while another holder's is live.
   */
  tryLease(name: string, holder: string, ttlMs: number): Promise<boolean>;
}
