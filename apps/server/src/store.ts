// The aggregator's store: SQLite through better-sqlite3, in WAL mode with synchronous=FULL so a
// committed snapshot survives a crash of the process or the machine. Every write that must be
// all-or-nothing (a snapshot, its retention sweep and its audit row) is one transaction.
// Snapshots are kept as gzip of their JSON plus summary columns, so history and hung-job
// queries never decompress anything.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { JobId, SnapshotId } from '@mqd/model';
import Database from 'better-sqlite3';
import type { LocatedRank } from './seams.js';
import type { AuditAction, AuditEntry, JobRecord, ShareRecord, SnapshotMeta, User } from './types.js';

export interface Migration {
  readonly version: number;
  readonly sql: string;
}

/** Append only: a released migration is never edited, a change is a new version. */
export const MIGRATIONS: readonly Migration[] = [
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
];

export interface RetentionPolicy {
  /** Snapshots kept per job, newest first; 0 = unlimited. */
  readonly maxSnapshotsPerJob: number;
  /** Snapshots older than this are dropped; 0 = forever. */
  readonly maxAgeSeconds: number;
}

export interface StoreOptions {
  /** A directory for mqd.sqlite, or ':memory:'. */
  readonly dataDir: string;
  readonly retention: RetentionPolicy;
  readonly clock?: () => number;
  /** For tests of the migration machinery; default MIGRATIONS. */
  readonly migrations?: readonly Migration[];
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

interface SnapshotRow {
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
}

interface JobRow {
  id: string;
  host: string;
  starter_pid: number;
  uid: number;
  command: string;
  method: string;
  layout: string;
  created_at: number;
  created_by: string;
  ended_at: number | null;
}

interface UserRow {
  id: number;
  name: string;
  uid: number | null;
  is_admin: number;
}

const META_COLUMNS = `id, job_id, taken_at, duration_micros, rank_count, ok_count, error_count, missing_count,
  pending_sends, pending_receives, unexpected_count, digest, missing_ranks, created_by, bytes, stored_bytes`;

function toMeta(r: SnapshotRow): SnapshotMeta {
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
  };
}

function toJob(r: JobRow): JobRecord {
  return {
    id: JobId(r.id),
    host: r.host,
    starterPid: r.starter_pid,
    uid: r.uid,
    command: r.command,
    method: r.method,
    ranks: JSON.parse(r.layout) as LocatedRank[],
    createdAt: r.created_at,
    createdBy: r.created_by,
    endedAt: r.ended_at,
  };
}

const toUser = (r: UserRow): User => ({ id: r.id, name: r.name, uid: r.uid, admin: r.is_admin === 1 });

export class Store {
  readonly db: Database.Database;
  /** Versions this open applied (empty when the schema was already current). */
  readonly migrationsApplied: readonly number[];
  private readonly clock: () => number;
  private readonly retention: RetentionPolicy;

  constructor(opts: StoreOptions) {
    const file = opts.dataDir === ':memory:' ? ':memory:' : join(opts.dataDir, 'mqd.sqlite');
    if (opts.dataDir !== ':memory:') mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.pragma('foreign_keys = ON');
    this.db.pragma('busy_timeout = 5000');
    this.clock = opts.clock ?? Date.now;
    this.retention = opts.retention;
    this.migrationsApplied = this.migrate(opts.migrations ?? MIGRATIONS);
  }

  private migrate(migrations: readonly Migration[]): number[] {
    this.db.exec(
      'CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
    );
    const current =
      (this.db.prepare('SELECT MAX(version) AS v FROM schema_version').get() as { v: number | null }).v ?? 0;
    const applied: number[] = [];
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (m.version <= current) continue;
      // Each migration and its version row commit together: a crash leaves the old version.
      this.db
        .transaction(() => {
          this.db.exec(m.sql);
          this.db
            .prepare('INSERT INTO schema_version (version, applied_at) VALUES (?, ?)')
            .run(m.version, this.clock());
        })
        .immediate();
      applied.push(m.version);
    }
    return applied;
  }

  schemaVersion(): number {
    return (
      (this.db.prepare('SELECT MAX(version) AS v FROM schema_version').get() as { v: number | null }).v ?? 0
    );
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  // --- users and sessions

  /** Creates the user, or updates uid/admin (and the token when given) of an existing name. */
  upsertUser(u: { name: string; uid: number | null; admin: boolean; tokenHash: string | null }): User {
    this.db
      .prepare(
        `INSERT INTO users (name, uid, is_admin, token_hash, created_at) VALUES (@name, @uid, @admin, @tokenHash, @now)
         ON CONFLICT(name) DO UPDATE SET uid = excluded.uid, is_admin = excluded.is_admin,
           token_hash = COALESCE(excluded.token_hash, users.token_hash)`,
      )
      .run({ name: u.name, uid: u.uid, admin: u.admin ? 1 : 0, tokenHash: u.tokenHash, now: this.clock() });
    const row = this.db
      .prepare('SELECT id, name, uid, is_admin FROM users WHERE name = ?')
      .get(u.name) as UserRow;
    return toUser(row);
  }

  userByTokenHash(hash: string): User | null {
    const r = this.db.prepare('SELECT id, name, uid, is_admin FROM users WHERE token_hash = ?').get(hash) as
      | UserRow
      | undefined;
    return r ? toUser(r) : null;
  }

  userByName(name: string): User | null {
    const r = this.db.prepare('SELECT id, name, uid, is_admin FROM users WHERE name = ?').get(name) as
      | UserRow
      | undefined;
    return r ? toUser(r) : null;
  }

  createSession(tokenHash: string, userId: number, expiresAt: number): void {
    this.db
      .prepare('INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)')
      .run(tokenHash, userId, this.clock(), expiresAt);
  }

  userBySession(tokenHash: string): User | null {
    const r = this.db
      .prepare(
        `SELECT u.id, u.name, u.uid, u.is_admin FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.token_hash = ? AND s.expires_at > ?`,
      )
      .get(tokenHash, this.clock()) as UserRow | undefined;
    return r ? toUser(r) : null;
  }

  deleteSession(tokenHash: string): void {
    this.db.prepare('DELETE FROM sessions WHERE token_hash = ?').run(tokenHash);
  }

  // --- jobs

  findJob(host: string, starterPid: number): JobRecord | null {
    const r = this.db
      .prepare(
        'SELECT * FROM jobs WHERE host = ? AND starter_pid = ? AND ended_at IS NULL ORDER BY created_at DESC',
      )
      .get(host, starterPid) as JobRow | undefined;
    return r ? toJob(r) : null;
  }

  /** Inserts a job, or replaces the layout of the job with this id; audited in the same transaction. */
  saveJob(job: JobRecord, audit: NewAudit): void {
    this.db.transaction(() => {
      this.db
        .prepare(
          `INSERT INTO jobs (id, host, starter_pid, uid, command, method, rank_count, layout, created_at, created_by, ended_at)
           VALUES (@id, @host, @starterPid, @uid, @command, @method, @rankCount, @layout, @createdAt, @createdBy, @endedAt)
           ON CONFLICT(id) DO UPDATE SET uid = excluded.uid, command = excluded.command, method = excluded.method,
             rank_count = excluded.rank_count, layout = excluded.layout, ended_at = excluded.ended_at`,
        )
        .run({
          id: job.id,
          host: job.host,
          starterPid: job.starterPid,
          uid: job.uid,
          command: job.command,
          method: job.method,
          rankCount: job.ranks.length,
          layout: JSON.stringify(job.ranks),
          createdAt: job.createdAt,
          createdBy: job.createdBy,
          endedAt: job.endedAt,
        });
      this.insertAudit(audit);
    })();
  }

  markJobEnded(id: JobId, at: number): void {
    this.db.prepare('UPDATE jobs SET ended_at = ? WHERE id = ? AND ended_at IS NULL').run(at, id);
  }

  job(id: string): JobRecord | null {
    const r = this.db.prepare('SELECT * FROM jobs WHERE id = ?').get(id) as JobRow | undefined;
    return r ? toJob(r) : null;
  }

  /** Jobs of this uid (null = every job), newest first. */
  jobs(uid: number | null): JobRecord[] {
    const rows = (
      uid === null
        ? this.db.prepare('SELECT * FROM jobs ORDER BY created_at DESC').all()
        : this.db.prepare('SELECT * FROM jobs WHERE uid = ? ORDER BY created_at DESC').all(uid)
    ) as JobRow[];
    return rows.map(toJob);
  }

  // --- snapshots

  /** Stores a snapshot, applies retention to its job and audits it: all or nothing. */
  insertSnapshot(s: NewSnapshot, audit: NewAudit): { removed: number } {
    const m = s.meta;
    return this.db.transaction(() => {
      this.db
        .prepare(
          `INSERT INTO snapshots (${META_COLUMNS}, data) VALUES (@id, @jobId, @takenAt, @durationMicros, @ranks, @ok,
           @errors, @missing, @pendingSends, @pendingReceives, @unexpected, @digest, @missingRanks, @createdBy,
           @bytes, @storedBytes, @data)`,
        )
        .run({ ...m, missingRanks: JSON.stringify(m.missingRanks), data: s.gz });
      this.insertAudit(audit);
      return { removed: this.applyRetention(m.jobId) };
    })();
  }

  private applyRetention(jobId: string): number {
    let removed = 0;
    const { maxSnapshotsPerJob, maxAgeSeconds } = this.retention;
    if (maxSnapshotsPerJob > 0) {
      removed += this.db
        .prepare(
          `DELETE FROM snapshots WHERE job_id = @jobId AND rowid NOT IN (
             SELECT rowid FROM snapshots WHERE job_id = @jobId ORDER BY taken_at DESC, rowid DESC LIMIT @keep)`,
        )
        .run({ jobId, keep: maxSnapshotsPerJob }).changes;
    }
    if (maxAgeSeconds > 0) {
      removed += this.db
        .prepare('DELETE FROM snapshots WHERE taken_at < ?')
        .run(this.clock() - maxAgeSeconds * 1000).changes;
    }
    return removed;
  }

  /** Runs the age part of retention now (also done on every insert), and drops dead sessions. */
  sweep(): number {
    this.db.prepare('DELETE FROM sessions WHERE expires_at <= ?').run(this.clock());
    if (this.retention.maxAgeSeconds <= 0) return 0;
    return this.db
      .prepare('DELETE FROM snapshots WHERE taken_at < ?')
      .run(this.clock() - this.retention.maxAgeSeconds * 1000).changes;
  }

  snapshotMeta(id: string): SnapshotMeta | null {
    const r = this.db.prepare(`SELECT ${META_COLUMNS} FROM snapshots WHERE id = ?`).get(id) as
      | SnapshotRow
      | undefined;
    return r ? toMeta(r) : null;
  }

  snapshotData(id: string): Buffer | null {
    const r = this.db.prepare('SELECT data FROM snapshots WHERE id = ?').get(id) as
      | { data: Buffer }
      | undefined;
    return r ? r.data : null;
  }

  /** History of a job, newest first. */
  snapshots(jobId: string, limit: number): SnapshotMeta[] {
    return (
      this.db
        .prepare(
          `SELECT ${META_COLUMNS} FROM snapshots WHERE job_id = ? ORDER BY taken_at DESC, rowid DESC LIMIT ?`,
        )
        .all(jobId, limit) as SnapshotRow[]
    ).map(toMeta);
  }

  countSnapshots(jobId?: string): number {
    const r = (
      jobId === undefined
        ? this.db.prepare('SELECT COUNT(*) AS n FROM snapshots').get()
        : this.db.prepare('SELECT COUNT(*) AS n FROM snapshots WHERE job_id = ?').get(jobId)
    ) as { n: number };
    return r.n;
  }

  // --- shares

  insertShare(share: ShareRecord, audit: NewAudit): void {
    this.db.transaction(() => {
      this.db
        .prepare(
          'INSERT INTO shares (id, snapshot_id, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?)',
        )
        .run(share.id, share.snapshotId, share.createdBy, share.createdAt, share.expiresAt);
      this.insertAudit(audit);
    })();
  }

  /** A share that has not expired; expired ones are as good as absent. */
  liveShare(id: string): ShareRecord | null {
    const r = this.db
      .prepare(
        'SELECT id, snapshot_id, created_by, created_at, expires_at FROM shares WHERE id = ? AND expires_at > ?',
      )
      .get(id, this.clock()) as
      | { id: string; snapshot_id: string; created_by: string; created_at: number; expires_at: number }
      | undefined;
    if (!r) return null;
    return {
      id: r.id,
      snapshotId: SnapshotId(r.snapshot_id),
      createdBy: r.created_by,
      createdAt: r.created_at,
      expiresAt: r.expires_at,
    };
  }

  // --- audit

  audit(a: NewAudit): void {
    this.insertAudit(a);
  }

  private insertAudit(a: NewAudit): void {
    this.db
      .prepare('INSERT INTO audit (at, who, action, job_id, snapshot_id, detail) VALUES (?, ?, ?, ?, ?, ?)')
      .run(this.clock(), a.who, a.action, a.jobId ?? null, a.snapshotId ?? null, a.detail ?? '');
  }

  /** Newest first; `before` pages back by id. */
  activity(limit: number, before?: number): AuditEntry[] {
    const rows = this.db
      .prepare(
        `SELECT id, at, who, action, job_id, snapshot_id, detail FROM audit WHERE id < ? ORDER BY id DESC LIMIT ?`,
      )
      .all(before ?? Number.MAX_SAFE_INTEGER, limit) as {
      id: number;
      at: number;
      who: string;
      action: AuditAction;
      job_id: string | null;
      snapshot_id: string | null;
      detail: string;
    }[];
    return rows.map((r) => ({
      id: r.id,
      at: r.at,
      who: r.who,
      action: r.action,
      jobId: r.job_id,
      snapshotId: r.snapshot_id,
      detail: r.detail,
    }));
  }
}
