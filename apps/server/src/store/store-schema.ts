// The store's tables: the migrations that make them (append only) and the row shapes that read
// them back, with their mapping to the aggregator's records (types.ts). The store (sql-store.ts)
// owns the queries and transactions.
import {
  JobId,
  QUEUE_KINDS,
  type QueueKind,
  SnapshotId,
  type WatchConfidence,
  type WatchState,
} from '@mqd/model';
import type { LocatedRank } from '../shared/seams.js';
import type {
  JobRecord,
  ShareRecord,
  SnapshotMeta,
  User,
  WatchJobInfo,
  WatchJobRecord,
} from '../shared/types.js';
import type { FleetPageEntry } from './store-port.js';

export interface Migration {
  readonly version: number;
  readonly sql: string;
}

export type Dialect = 'sqlite' | 'postgres';

/** One numbered step of the history, with its SQL in each dialect (the same tables and columns). */
export interface DialectMigration {
  readonly version: number;
  readonly sqlite: string;
  readonly postgres: string;
}

/**
 * SQLite's steps, as released (append only: a released migration is never edited, a change is
 * a new version in both dialects, see MIGRATION_HISTORY).
 */
const SQLITE_STEPS: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE users (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        uid INTEGER,
        is_admin INTEGER NOT NULL DEFAULT 0,
        token_hash TEXT UNIQUE,
        created_at INTEGER NOT NULL
      );
      CREATE TABLE sessions (
        token_hash TEXT PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      );
      CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        starter_pid INTEGER NOT NULL,
        uid INTEGER NOT NULL,
        command TEXT NOT NULL,
        method TEXT NOT NULL,
        rank_count INTEGER NOT NULL,
        layout TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        created_by TEXT NOT NULL,
        ended_at INTEGER
      );
      CREATE INDEX jobs_starter ON jobs(host, starter_pid);
      CREATE TABLE snapshots (
        id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
        taken_at INTEGER NOT NULL,
        duration_micros INTEGER NOT NULL,
        rank_count INTEGER NOT NULL,
        ok_count INTEGER NOT NULL,
        error_count INTEGER NOT NULL,
        missing_count INTEGER NOT NULL,
        pending_sends INTEGER NOT NULL,
        pending_receives INTEGER NOT NULL,
        unexpected_count INTEGER NOT NULL,
        digest TEXT NOT NULL,
        missing_ranks TEXT NOT NULL,
        created_by TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        stored_bytes INTEGER NOT NULL,
        data BLOB NOT NULL
      );
      CREATE INDEX snapshots_job ON snapshots(job_id, taken_at);
      CREATE INDEX snapshots_taken ON snapshots(taken_at);
      CREATE TABLE shares (
        id TEXT PRIMARY KEY,
        snapshot_id TEXT NOT NULL REFERENCES snapshots(id) ON DELETE CASCADE,
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      );
      CREATE TABLE audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        who TEXT NOT NULL,
        action TEXT NOT NULL,
        job_id TEXT,
        snapshot_id TEXT,
        detail TEXT NOT NULL DEFAULT ''
      );
      CREATE INDEX audit_at ON audit(at);
    `,
  },
  {
    // A job's identity is (host, starter pid, starter start time): a reused pid is a new job.
    version: 2,
    sql: `
      ALTER TABLE jobs ADD COLUMN starter_start_time TEXT NOT NULL DEFAULT '';
      CREATE INDEX jobs_identity ON jobs(host, starter_pid, starter_start_time);
      -- Login tokens expire (NULL = never, the configured admin token) and can be revoked.
      ALTER TABLE users ADD COLUMN token_expires_at INTEGER;
    `,
  },
  {
    // Jobs read from core files: the directory of their cores; NULL for live jobs.
    version: 3,
    sql: `
      ALTER TABLE jobs ADD COLUMN cores_dir TEXT;
      CREATE INDEX jobs_cores ON jobs(host, cores_dir) WHERE cores_dir IS NOT NULL;
    `,
  },
  {
    // Idempotent snapshot requests: a client's key (per user) -> the snapshot its
    // request stored, written in the snapshot's own transaction, so a retry after a lost answer
    // finds it; it goes with the snapshot (retention) and with the user.
    version: 4,
    sql: `
      CREATE TABLE snapshot_requests (
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        request_key TEXT NOT NULL,
        snapshot_id TEXT NOT NULL REFERENCES snapshots(id) ON DELETE CASCADE,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (user_id, request_key)
      );
      CREATE INDEX snapshot_requests_snapshot ON snapshot_requests(snapshot_id);
    `,
  },
  {
    // The hang watch (docs/hang-watch.md). The admins' policy (one row); every
    // discovered job by (key, uid) (one Slurm job id under two owners is two jobs) with its
    // store job and its last verdict; compact samples (no snapshot unless the state or the
    // queues changed); hang episodes, so a restart does not notify an open one again.
    version: 5,
    sql: `
      CREATE TABLE watch_policy (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        policy TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        updated_by TEXT NOT NULL
      );
      CREATE TABLE watch_jobs (
        id TEXT PRIMARY KEY,
        key TEXT NOT NULL,
        uid INTEGER NOT NULL,
        job_id TEXT REFERENCES jobs(id) ON DELETE SET NULL,
        info TEXT NOT NULL,
        first_seen INTEGER NOT NULL,
        last_seen INTEGER NOT NULL,
        ended_at INTEGER,
        end_reason TEXT,
        state TEXT NOT NULL DEFAULT 'unknown',
        since INTEGER,
        confidence TEXT,
        least_progressed TEXT NOT NULL DEFAULT '',
        diagnosis TEXT NOT NULL DEFAULT '',
        evidence_snapshot_id TEXT,
        last_snapshot_id TEXT,
        last_digest TEXT,
        last_state_stored TEXT
      );
      CREATE INDEX watch_jobs_uid ON watch_jobs(uid);
      CREATE TABLE watch_samples (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        watch_id TEXT NOT NULL REFERENCES watch_jobs(id) ON DELETE CASCADE,
        at INTEGER NOT NULL,
        state TEXT NOT NULL,
        digest TEXT,
        ranks_read INTEGER NOT NULL,
        cpu TEXT NOT NULL,
        stop_micros INTEGER NOT NULL,
        snapshot_id TEXT REFERENCES snapshots(id) ON DELETE SET NULL
      );
      CREATE INDEX watch_samples_job ON watch_samples(watch_id, at);
      CREATE TABLE watch_episodes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        watch_id TEXT NOT NULL REFERENCES watch_jobs(id) ON DELETE CASCADE,
        started_at INTEGER NOT NULL,
        ended_at INTEGER,
        snapshot_id TEXT,
        share_id TEXT,
        notified_at INTEGER
      );
      CREATE INDEX watch_episodes_job ON watch_episodes(watch_id, ended_at);
    `,
  },
  {
    // Leases: background work (auto-snapshots, retention, the watch's rounds) runs
    // once per cluster of aggregators: the holder of the named lease until it expires.
    version: 6,
    sql: `
      CREATE TABLE leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        expires_at INTEGER NOT NULL
      );
    `,
  },
  {
    // Snapshot overviews: what the dashboard draws first (explanation, edge table,
    // header), computed once per snapshot (@mqd/model's encodeOverview, gzipped). Gone with
    // their snapshot.
    version: 7,
    sql: `
      CREATE TABLE snapshot_overviews (
        snapshot_id TEXT PRIMARY KEY REFERENCES snapshots(id) ON DELETE CASCADE,
        body BLOB NOT NULL
      );
    `,
  },
  {
    // Overview format 3 (a first part the page draws from while the edge table
    // arrives): the stored bodies of format 2 are dropped, and made again when next asked for.
    version: 8,
    sql: `DELETE FROM snapshot_overviews;`,
  },
  {
    // Share links the system makes (the hang watch's) are marked so, owned by no user name: a
    // user named like the watch owns none of them; the job's owner and the admins see them.
    // The watch's links so far are the ones its episodes name.
    version: 9,
    sql: `
      ALTER TABLE shares ADD COLUMN made_by TEXT;
      UPDATE shares SET made_by = 'watch'
        WHERE id IN (SELECT share_id FROM watch_episodes WHERE share_id IS NOT NULL);
    `,
  },
  {
    // A snapshot id retention removed is told from one never stored by its audit row: looked up
    // by snapshot id.
    version: 10,
    sql: `CREATE INDEX audit_snapshot ON audit(snapshot_id) WHERE snapshot_id IS NOT NULL;`,
  },
  {
    // The queue kinds a snapshot's MPI library could not show (comma-separated, '' = all read):
    // their counts are unknown, not 0. Snapshots stored before say '' (nothing known otherwise).
    version: 11,
    sql: `ALTER TABLE snapshots ADD COLUMN unreadable_queues TEXT NOT NULL DEFAULT '';`,
  },
];

/**
 * PostgreSQL's version of each step: the same tables, columns and indexes. Ids are BIGSERIAL
 * (INTEGER PRIMARY KEY / AUTOINCREMENT in SQLite), epoch milliseconds and byte counts BIGINT
 * (they overflow a 32-bit INTEGER), blobs BYTEA. SQLite's implicit `rowid` (snapshots' insertion
 * order, the tie-break of their history) is an explicit `rowid BIGSERIAL` column here: the only
 * column one dialect has and the other does not name.
 */
const POSTGRES_STEPS: Readonly<Record<number, string>> = {
  1: `
    CREATE TABLE users (
      id BIGSERIAL PRIMARY KEY,
      name TEXT NOT NULL UNIQUE,
      uid INTEGER,
      is_admin INTEGER NOT NULL DEFAULT 0,
      token_hash TEXT UNIQUE,
      created_at BIGINT NOT NULL
    );
    CREATE TABLE sessions (
      token_hash TEXT PRIMARY KEY,
      user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      created_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL
    );
    CREATE TABLE jobs (
      id TEXT PRIMARY KEY,
      host TEXT NOT NULL,
      starter_pid INTEGER NOT NULL,
      uid INTEGER NOT NULL,
      command TEXT NOT NULL,
      method TEXT NOT NULL,
      rank_count INTEGER NOT NULL,
      layout TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      created_by TEXT NOT NULL,
      ended_at BIGINT
    );
    CREATE INDEX jobs_starter ON jobs(host, starter_pid);
    CREATE TABLE snapshots (
      id TEXT PRIMARY KEY,
      rowid BIGSERIAL NOT NULL,
      job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
      taken_at BIGINT NOT NULL,
      duration_micros BIGINT NOT NULL,
      rank_count INTEGER NOT NULL,
      ok_count INTEGER NOT NULL,
      error_count INTEGER NOT NULL,
      missing_count INTEGER NOT NULL,
      pending_sends INTEGER NOT NULL,
      pending_receives INTEGER NOT NULL,
      unexpected_count INTEGER NOT NULL,
      digest TEXT NOT NULL,
      missing_ranks TEXT NOT NULL,
      created_by TEXT NOT NULL,
      bytes BIGINT NOT NULL,
      stored_bytes BIGINT NOT NULL,
      data BYTEA NOT NULL
    );
    CREATE INDEX snapshots_job ON snapshots(job_id, taken_at);
    CREATE INDEX snapshots_taken ON snapshots(taken_at);
    CREATE TABLE shares (
      id TEXT PRIMARY KEY,
      snapshot_id TEXT NOT NULL REFERENCES snapshots(id) ON DELETE CASCADE,
      created_by TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL
    );
    CREATE TABLE audit (
      id BIGSERIAL PRIMARY KEY,
      at BIGINT NOT NULL,
      who TEXT NOT NULL,
      action TEXT NOT NULL,
      job_id TEXT,
      snapshot_id TEXT,
      detail TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX audit_at ON audit(at);
  `,
  2: `
    ALTER TABLE jobs ADD COLUMN starter_start_time TEXT NOT NULL DEFAULT '';
    CREATE INDEX jobs_identity ON jobs(host, starter_pid, starter_start_time);
    ALTER TABLE users ADD COLUMN token_expires_at BIGINT;
  `,
  3: `
    ALTER TABLE jobs ADD COLUMN cores_dir TEXT;
    CREATE INDEX jobs_cores ON jobs(host, cores_dir) WHERE cores_dir IS NOT NULL;
  `,
  4: `
    CREATE TABLE snapshot_requests (
      user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      request_key TEXT NOT NULL,
      snapshot_id TEXT NOT NULL REFERENCES snapshots(id) ON DELETE CASCADE,
      created_at BIGINT NOT NULL,
      PRIMARY KEY (user_id, request_key)
    );
    CREATE INDEX snapshot_requests_snapshot ON snapshot_requests(snapshot_id);
  `,
  5: `
    CREATE TABLE watch_policy (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      policy TEXT NOT NULL,
      updated_at BIGINT NOT NULL,
      updated_by TEXT NOT NULL
    );
    CREATE TABLE watch_jobs (
      id TEXT PRIMARY KEY,
      key TEXT NOT NULL,
      uid INTEGER NOT NULL,
      job_id TEXT REFERENCES jobs(id) ON DELETE SET NULL,
      info TEXT NOT NULL,
      first_seen BIGINT NOT NULL,
      last_seen BIGINT NOT NULL,
      ended_at BIGINT,
      end_reason TEXT,
      state TEXT NOT NULL DEFAULT 'unknown',
      since BIGINT,
      confidence TEXT,
      least_progressed TEXT NOT NULL DEFAULT '',
      diagnosis TEXT NOT NULL DEFAULT '',
      evidence_snapshot_id TEXT,
      last_snapshot_id TEXT,
      last_digest TEXT,
      last_state_stored TEXT
    );
    CREATE INDEX watch_jobs_uid ON watch_jobs(uid);
    CREATE TABLE watch_samples (
      id BIGSERIAL PRIMARY KEY,
      watch_id TEXT NOT NULL REFERENCES watch_jobs(id) ON DELETE CASCADE,
      at BIGINT NOT NULL,
      state TEXT NOT NULL,
      digest TEXT,
      ranks_read INTEGER NOT NULL,
      cpu TEXT NOT NULL,
      stop_micros BIGINT NOT NULL,
      snapshot_id TEXT REFERENCES snapshots(id) ON DELETE SET NULL
    );
    CREATE INDEX watch_samples_job ON watch_samples(watch_id, at);
    CREATE TABLE watch_episodes (
      id BIGSERIAL PRIMARY KEY,
      watch_id TEXT NOT NULL REFERENCES watch_jobs(id) ON DELETE CASCADE,
      started_at BIGINT NOT NULL,
      ended_at BIGINT,
      snapshot_id TEXT,
      share_id TEXT,
      notified_at BIGINT
    );
    CREATE INDEX watch_episodes_job ON watch_episodes(watch_id, ended_at);
  `,
  6: `
    CREATE TABLE leases (
      name TEXT PRIMARY KEY,
      holder TEXT NOT NULL,
      expires_at BIGINT NOT NULL
    );
  `,
  7: `
    CREATE TABLE snapshot_overviews (
      snapshot_id TEXT PRIMARY KEY REFERENCES snapshots(id) ON DELETE CASCADE,
      body BYTEA NOT NULL
    );
  `,
  8: `DELETE FROM snapshot_overviews;`,
  9: `
    ALTER TABLE shares ADD COLUMN made_by TEXT;
    UPDATE shares SET made_by = 'watch'
      WHERE id IN (SELECT share_id FROM watch_episodes WHERE share_id IS NOT NULL);
  `,
  10: `CREATE INDEX audit_snapshot ON audit(snapshot_id) WHERE snapshot_id IS NOT NULL;`,
  11: `ALTER TABLE snapshots ADD COLUMN unreadable_queues TEXT NOT NULL DEFAULT '';`,
};

/** The one history: every numbered step with its SQL per dialect. */
export const MIGRATION_HISTORY: readonly DialectMigration[] = SQLITE_STEPS.map((m) => {
  const postgres = POSTGRES_STEPS[m.version];
  if (postgres === undefined) throw new Error(`migration ${m.version} has no PostgreSQL version`);
  return { version: m.version, sqlite: m.sql, postgres };
});

/** The history in one dialect, in order. */
export function migrationsFor(dialect: Dialect): Migration[] {
  return MIGRATION_HISTORY.map((m) => ({ version: m.version, sql: m[dialect] }));
}

/** SQLite's migrations (SqliteStore's default). */
export const MIGRATIONS: readonly Migration[] = migrationsFor('sqlite');

export interface SnapshotRow {
  id: string;
  job_id: string;
  taken_at: number;
  duration_micros: number;
  rank_count: number;
  ok_count: number;
  error_count: number;
  missing_count: number;
  pending_sends: number;
  pending_receives: number;
  unexpected_count: number;
  digest: string;
  missing_ranks: string;
  created_by: string;
  bytes: number;
  stored_bytes: number;
  unreadable_queues: string;
}

export interface JobRow {
  id: string;
  host: string;
  starter_pid: number;
  starter_start_time: string;
  uid: number;
  command: string;
  method: string;
  layout: string;
  created_at: number;
  created_by: string;
  ended_at: number | null;
  cores_dir: string | null;
}

export interface UserRow {
  id: number;
  name: string;
  uid: number | null;
  is_admin: number;
}

export const META_COLUMNS = `id, job_id, taken_at, duration_micros, rank_count, ok_count, error_count, missing_count,
  pending_sends, pending_receives, unexpected_count, digest, missing_ranks, created_by, bytes, stored_bytes,
  unreadable_queues`;

export function toMeta(r: SnapshotRow): SnapshotMeta {
  return {
    id: SnapshotId(r.id),
    jobId: JobId(r.job_id),
    takenAt: r.taken_at,
    durationMicros: r.duration_micros,
    createdBy: r.created_by,
    bytes: r.bytes,
    storedBytes: r.stored_bytes,
    ranks: r.rank_count,
    ok: r.ok_count,
    errors: r.error_count,
    missing: r.missing_count,
    pendingSends: r.pending_sends,
    pendingReceives: r.pending_receives,
    unexpected: r.unexpected_count,
    digest: r.digest,
    missingRanks: JSON.parse(r.missing_ranks) as number[],
    ...unreadableOf(r.unreadable_queues),
  };
}

/** The column's kinds, those of QUEUE_KINDS only; none for '' (every kind read). */
function unreadableOf(column: string): { unreadable?: QueueKind[] } {
  const kinds = QUEUE_KINDS.filter((q) => column.split(',').includes(q));
  return kinds.length > 0 ? { unreadable: kinds } : {};
}

/** SnapshotSummary.unreadable as its column stores it. */
export const unreadableColumn = (kinds: readonly QueueKind[] | undefined): string => (kinds ?? []).join(',');

export function toJob(r: JobRow): JobRecord {
  return {
    id: JobId(r.id),
    host: r.host,
    starterPid: r.starter_pid,
    starterStartTime: r.starter_start_time,
    uid: r.uid,
    command: r.command,
    method: r.method,
    ranks: JSON.parse(r.layout) as LocatedRank[],
    createdAt: r.created_at,
    createdBy: r.created_by,
    endedAt: r.ended_at,
    ...(r.cores_dir === null ? {} : { coresDir: r.cores_dir }),
  };
}

export const toUser = (r: UserRow): User => ({ id: r.id, name: r.name, uid: r.uid, admin: r.is_admin === 1 });

export interface WatchJobRow {
  id: string;
  key: string;
  uid: number;
  job_id: string | null;
  info: string;
  first_seen: number;
  last_seen: number;
  ended_at: number | null;
  end_reason: string | null;
  state: WatchState;
  since: number | null;
  confidence: WatchConfidence | null;
  least_progressed: string;
  diagnosis: string;
  evidence_snapshot_id: string | null;
  last_snapshot_id: string | null;
  last_digest: string | null;
  last_state_stored: WatchState | null;
}

export const toWatchJob = (r: WatchJobRow): WatchJobRecord => ({
  id: r.id,
  key: r.key,
  uid: r.uid,
  jobId: r.job_id === null ? null : JobId(r.job_id),
  info: JSON.parse(r.info) as WatchJobInfo,
  firstSeen: r.first_seen,
  lastSeen: r.last_seen,
  endedAt: r.ended_at,
  endReason: r.end_reason,
  state: r.state,
  since: r.since,
  confidence: r.confidence,
  leastProgressed: r.least_progressed,
  diagnosis: r.diagnosis,
  evidenceSnapshotId: r.evidence_snapshot_id === null ? null : SnapshotId(r.evidence_snapshot_id),
  lastSnapshotId: r.last_snapshot_id === null ? null : SnapshotId(r.last_snapshot_id),
  lastDigest: r.last_digest,
  lastStateStored: r.last_state_stored,
});

export interface ShareRow {
  id: string;
  snapshot_id: string;
  created_by: string;
  created_at: number;
  expires_at: number;
  made_by: string | null;
}

export const toShareRecord = (r: ShareRow): ShareRecord => ({
  id: r.id,
  snapshotId: SnapshotId(r.snapshot_id),
  createdBy: r.created_by,
  createdAt: Number(r.created_at),
  expiresAt: Number(r.expires_at),
  // Only the hang watch makes links today; any other marker is still no user's.
  ...(r.made_by === null ? {} : { madeBy: 'watch' as const }),
});

/** The fleet's order (FleetPage.jobs), the same in both dialects. */
export const FLEET_ORDER = `CASE WHEN ended_at IS NULL AND state = 'hung' THEN 0 WHEN ended_at IS NULL THEN 1 ELSE 2 END,
  first_seen DESC, id`;

/** A user name per uid, as userNameOfUid picks it (a non-admin first, then the oldest). */
export function namesByUid(rows: readonly { uid: number; name: string }[]): Map<number, string> {
  const names = new Map<number, string>();
  for (const r of rows) if (!names.has(r.uid)) names.set(r.uid, r.name);
  return names;
}

export interface FleetSampleRow {
  watch_id: string;
  at: number;
  state: WatchState;
  snapshot_id: string | null;
  n: number;
}

/** The fleet page from its rows: each job with its samples (oldest first), count and user. */
export function fleetEntries(
  jobs: readonly WatchJobRow[],
  samples: readonly FleetSampleRow[],
  users: readonly { uid: number; name: string }[],
): FleetPageEntry[] {
  const names = namesByUid(users);
  const byJob = new Map<string, { n: number; history: FleetPageEntry['history'][number][] }>();
  for (const r of samples) {
    const e = byJob.get(r.watch_id) ?? { n: Number(r.n), history: [] };
    e.history.push({
      at: Number(r.at),
      state: r.state,
      snapshotId: r.snapshot_id === null ? null : SnapshotId(r.snapshot_id),
    });
    byJob.set(r.watch_id, e);
  }
  return jobs.map((row) => {
    const job = toWatchJob(row);
    const e = byJob.get(job.id);
    return {
      job,
      user: names.get(job.uid) ?? null,
      samples: e?.n ?? 0,
      // Read newest first (the window's row numbers); the fleet draws oldest first.
      history: (e?.history ?? []).reverse(),
    };
  });
}
