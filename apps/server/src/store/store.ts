// The aggregator's store: SQLite through better-sqlite3, in WAL mode with synchronous=FULL so a
// committed snapshot survives a crash of the process or the machine. Every write that must be
// all-or-nothing (a snapshot, its retention sweep and its audit row) is one transaction.
// Snapshots are kept as gzip of their JSON plus summary columns, so history and hung-job
// queries never decompress anything.
//
// SqliteStore is the StorePort (store-port.ts) over SQLite: every method is async, so callers
// await it as they would the PostgreSQL store, but its body is synchronous better-sqlite3 code,
// so each method (and its transaction) runs whole before any other JavaScript does.
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { type ApiWatchPolicy, JobId, MqdException, mqdError, SnapshotId, type WatchState } from '@mqd/model';
import Database from 'better-sqlite3';
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
import type {
  FleetPage,
  FleetPageQuery,
  NewAudit,
  NewSnapshot,
  RetentionPolicy,
  SnapshotRequestKey,
  StorePort,
  WatchVerdictUpdate,
} from './store-port.js';
import { ageRetentionSql, countRetentionSql, SQLITE_PLACEHOLDERS } from './store-retention.js';
import {
  FLEET_ORDER,
  type FleetSampleRow,
  fleetEntries,
  type JobRow,
  META_COLUMNS,
  MIGRATIONS,
  type Migration,
  type ShareRow,
  type SnapshotRow,
  toJob,
  toMeta,
  toShareRecord,
  toUser,
  toWatchJob,
  type UserRow,
  type WatchJobRow,
} from './store-schema.js';

// The records the port's methods take are declared with it; importers of store.js keep them.
export type { NewAudit, NewSnapshot, RetentionPolicy, SnapshotRequestKey, WatchVerdictUpdate };

export interface StoreOptions {
  /** A directory for mqd.sqlite, or ':memory:'. */
  readonly dataDir: string;
  readonly retention: RetentionPolicy;
  readonly clock?: () => number;
  /** For tests of the migration machinery; default MIGRATIONS. */
  readonly migrations?: readonly Migration[];
}

/** SQLite errors that mean the disk, not the request, is at fault. */
const STORAGE_FAILURES = [
  'SQLITE_FULL',
  'SQLITE_IOERR',
  'SQLITE_READONLY',
  'SQLITE_CANTOPEN',
  'SQLITE_CORRUPT',
];

function sqliteCode(e: unknown): string | null {
  const c = (e as { code?: unknown } | null)?.code;
  return typeof c === 'string' && c.startsWith('SQLITE_') ? c : null;
}

export class SqliteStore implements StorePort {
  readonly dialect = 'sqlite' as const;
  readonly db: Database.Database;
  /** Versions this open applied (empty when the schema was already current). */
  readonly migrationsApplied: readonly number[];
  private readonly clock: () => number;
  private readonly retention: RetentionPolicy;

  constructor(opts: StoreOptions) {
    const file = opts.dataDir === ':memory:' ? ':memory:' : join(opts.dataDir, 'mqd.sqlite');
    if (opts.dataDir !== ':memory:') {
      // 0700/0600 also when the directory or file already exists (mkdir's mode does not apply
      // then, and the umask would otherwise decide): snapshots hold other users' memory.
      mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
      chmodSync(opts.dataDir, 0o700);
      if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
      chmodSync(file, 0o600);
      for (const side of ['-wal', '-shm']) if (existsSync(file + side)) chmodSync(file + side, 0o600);
    }
    this.clock = opts.clock ?? Date.now;
    this.retention = opts.retention;
    try {
      this.db = new Database(file);
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = FULL');
      this.db.pragma('foreign_keys = ON');
      this.db.pragma('busy_timeout = 5000');
      const check = this.db.pragma('quick_check', { simple: true });
      if (check !== 'ok') throw Object.assign(new Error(String(check)), { code: 'SQLITE_CORRUPT' });
      this.migrationsApplied = this.migrate(opts.migrations ?? MIGRATIONS);
    } catch (e) {
      const code = sqliteCode(e);
      if (code === 'SQLITE_CORRUPT' || code === 'SQLITE_NOTADB') {
        throw new MqdException(
          mqdError(
            'MQD_E_STORE_CORRUPT',
            `${file} is damaged (${code}: ${(e as Error).message}): stop the server, move the file aside ` +
              `(mv ${file} ${file}.corrupt), then either restore a backup there or salvage it with ` +
              `\`sqlite3 ${file}.corrupt .recover | sqlite3 ${file}\`, and start again`,
          ),
        );
      }
      throw e;
    }
  }

  /** Why writes are refused (a disk-full or I/O error went before), or null while writable. */
  readOnlyReason: string | null = null;

  /**
   * Every write goes through here: a full disk or an I/O error turns the store read-only
   * (MQD_E_STORE_READONLY) instead of escaping as an exception that could end the process.
   */
  private write<T>(fn: () => T): T {
    if (this.readOnlyReason !== null) {
      throw new MqdException(
        mqdError('MQD_E_STORE_READONLY', `the store is read-only: ${this.readOnlyReason}`),
      );
    }
    try {
      return fn();
    } catch (e) {
      const code = sqliteCode(e);
      if (code !== null && STORAGE_FAILURES.some((c) => code.startsWith(c))) {
        this.readOnlyReason = `${code}: ${(e as Error).message}`;
        throw new MqdException(
          mqdError(
            'MQD_E_STORE_READONLY',
            `the store could not write (${this.readOnlyReason}); reads still work: free disk space, then restart`,
          ),
        );
      }
      throw e;
    }
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

  async schemaVersion(): Promise<number> {
    return (
      (this.db.prepare('SELECT MAX(version) AS v FROM schema_version').get() as { v: number | null }).v ?? 0
    );
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  get isOpen(): boolean {
    return this.db.open;
  }

  // --- users and sessions

  /** Creates the user, or updates uid/admin (and the token when given) of an existing name. */
  async upsertUser(u: {
    name: string;
    uid: number | null;
    admin: boolean;
    tokenHash: string | null;
    tokenExpiresAt?: number | null;
  }): Promise<User> {
    return this.write(() => {
      this.db
        .prepare(
          `INSERT INTO users (name, uid, is_admin, token_hash, token_expires_at, created_at)
           VALUES (@name, @uid, @admin, @tokenHash, @expires, @now)
           ON CONFLICT(name) DO UPDATE SET uid = excluded.uid, is_admin = excluded.is_admin,
             token_hash = COALESCE(excluded.token_hash, users.token_hash),
             token_expires_at = CASE WHEN excluded.token_hash IS NULL THEN users.token_expires_at
                                     ELSE excluded.token_expires_at END`,
        )
        .run({
          name: u.name,
          uid: u.uid,
          admin: u.admin ? 1 : 0,
          tokenHash: u.tokenHash,
          expires: u.tokenExpiresAt ?? null,
          now: this.clock(),
        });
      const row = this.db
        .prepare('SELECT id, name, uid, is_admin FROM users WHERE name = ?')
        .get(u.name) as UserRow;
      return toUser(row);
    });
  }

  /** The user of a live login token; 'expired' when it is past its expiry. */
  async userByTokenHash(hash: string): Promise<User | null> {
    const r = await this.loginToken(hash);
    return r === null || r === 'expired' ? null : r;
  }

  async loginToken(hash: string): Promise<User | 'expired' | null> {
    return this.loginTokenNow(hash);
  }

  private loginTokenNow(hash: string): User | 'expired' | null {
    const r = this.db
      .prepare('SELECT id, name, uid, is_admin, token_expires_at FROM users WHERE token_hash = ?')
      .get(hash) as (UserRow & { token_expires_at: number | null }) | undefined;
    if (!r) return null;
    if (r.token_expires_at !== null && r.token_expires_at <= this.clock()) return 'expired';
    return toUser(r);
  }

  /** Revokes the user's login token and ends every session made with it. */
  async revokeToken(name: string, audit: NewAudit): Promise<boolean> {
    return this.write(() =>
      this.db.transaction(() => {
        const u = this.db.prepare('SELECT id FROM users WHERE name = ?').get(name) as
          | { id: number }
          | undefined;
        if (!u) return false;
        this.db.prepare('UPDATE users SET token_hash = NULL WHERE id = ?').run(u.id);
        this.db.prepare('DELETE FROM sessions WHERE user_id = ?').run(u.id);
        this.insertAudit(audit);
        return true;
      })(),
    );
  }

  /** The name of the (first, non-admin first) user with this uid, for the fleet and notices. */
  async userNameOfUid(uid: number): Promise<string | null> {
    const r = this.db
      .prepare('SELECT name FROM users WHERE uid = ? ORDER BY is_admin, id LIMIT 1')
      .get(uid) as { name: string } | undefined;
    return r?.name ?? null;
  }

  async userByName(name: string): Promise<User | null> {
    const r = this.db.prepare('SELECT id, name, uid, is_admin FROM users WHERE name = ?').get(name) as
      | UserRow
      | undefined;
    return r ? toUser(r) : null;
  }

  async createSession(tokenHash: string, userId: number, expiresAt: number): Promise<void> {
    this.write(() => {
      this.db
        .prepare('INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)')
        .run(tokenHash, userId, this.clock(), expiresAt);
    });
  }

  /**
   * A login: the session is made only while the login token is live, in one transaction with
   * the check (a token revoked meanwhile makes no session). Returns the user, 'expired' or null
   * (unknown token), as loginToken() does.
   */
  async loginSession(
    loginTokenHash: string,
    sessionHash: string,
    expiresAt: number,
  ): Promise<User | 'expired' | null> {
    return this.write(() =>
      this.db.transaction(() => {
        const r = this.loginTokenNow(loginTokenHash);
        if (r === null || r === 'expired') return r;
        this.db
          .prepare('INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)')
          .run(sessionHash, r.id, this.clock(), expiresAt);
        return r;
      })(),
    );
  }

  async userBySession(tokenHash: string): Promise<User | null> {
    const r = this.db
      .prepare(
        `SELECT u.id, u.name, u.uid, u.is_admin FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.token_hash = ? AND s.expires_at > ?
           AND (u.token_expires_at IS NULL OR u.token_expires_at > ?)`,
      )
      // A session dies with the login token it was made from (expiry here, revocation deletes it).
      .get(tokenHash, this.clock(), this.clock()) as UserRow | undefined;
    return r ? toUser(r) : null;
  }

  async deleteSession(tokenHash: string): Promise<void> {
    this.write(() => {
      this.db.prepare('DELETE FROM sessions WHERE token_hash = ?').run(tokenHash);
    });
  }

  // --- jobs

  /** The not-ended job of this starter process (pid and start time: a reused pid is another job). */
  /** startTime null: any start time (an agent that could not read it). */
  async findJob(
    host: string,
    starterPid: number,
    starterStartTime: string | null,
  ): Promise<JobRecord | null> {
    return this.findJobNow(host, starterPid, starterStartTime);
  }

  private findJobNow(host: string, starterPid: number, starterStartTime: string | null): JobRecord | null {
    const r = this.db
      .prepare(
        `SELECT * FROM jobs WHERE host = ? AND starter_pid = ? AND (? IS NULL OR starter_start_time = ?)
         AND ended_at IS NULL AND cores_dir IS NULL ORDER BY created_at DESC`,
      )
      .get(host, starterPid, starterStartTime, starterStartTime) as JobRow | undefined;
    return r ? toJob(r) : null;
  }

  /** The job of the cores in this directory on this host (real path), if attached already. */
  async findCoreJob(host: string, coresDir: string): Promise<JobRecord | null> {
    return this.findCoreJobNow(host, coresDir);
  }

  private findCoreJobNow(host: string, coresDir: string): JobRecord | null {
    const r = this.db
      .prepare('SELECT * FROM jobs WHERE host = ? AND cores_dir = ? ORDER BY created_at DESC')
      .get(host, coresDir) as JobRow | undefined;
    return r ? toJob(r) : null;
  }

  /** Not-ended jobs on (host, pid) whose starter was another process: it is gone, so are they. */
  async endReusedJobs(
    host: string,
    starterPid: number,
    starterStartTime: string,
    at: number,
  ): Promise<number> {
    return this.write(() => this.endReusedJobsNow(host, starterPid, starterStartTime, at));
  }

  private endReusedJobsNow(host: string, starterPid: number, starterStartTime: string, at: number): number {
    return this.db
      .prepare(
        `UPDATE jobs SET ended_at = ? WHERE host = ? AND starter_pid = ? AND starter_start_time != ?
           AND ended_at IS NULL AND cores_dir IS NULL`,
      )
      .run(at, host, starterPid, starterStartTime).changes;
  }

  /** Inserts a job, or replaces the layout of the job with this id; audited in the same transaction. */
  async saveJob(job: JobRecord, audit: NewAudit): Promise<void> {
    this.write(() => this.db.transaction(() => this.saveJobNow(job, audit))());
  }

  private saveJobNow(job: JobRecord, audit: NewAudit): void {
    this.db
      .prepare(
        `INSERT INTO jobs (id, host, starter_pid, starter_start_time, uid, command, method, rank_count, layout,
               created_at, created_by, ended_at, cores_dir)
             VALUES (@id, @host, @starterPid, @starterStartTime, @uid, @command, @method, @rankCount, @layout,
               @createdAt, @createdBy, @endedAt, @coresDir)
             ON CONFLICT(id) DO UPDATE SET command = excluded.command, method = excluded.method,
               rank_count = excluded.rank_count, layout = excluded.layout, ended_at = excluded.ended_at
             WHERE jobs.uid = excluded.uid AND jobs.starter_start_time = excluded.starter_start_time`,
      )
      .run({
        id: job.id,
        host: job.host,
        starterPid: job.starterPid,
        starterStartTime: job.starterStartTime,
        uid: job.uid,
        command: job.command,
        method: job.method,
        rankCount: job.ranks.length,
        layout: JSON.stringify(job.ranks),
        createdAt: job.createdAt,
        createdBy: job.createdBy,
        endedAt: job.endedAt,
        coresDir: job.coresDir ?? null,
      });
    this.insertAudit(audit);
  }

  /**
   * An attach (a starter's job, or a directory of cores), all in one transaction: a starter's
   * other not-ended jobs on its (host, pid) with another start time end (that starter is gone);
   * the job this one is (same host, starter pid and start time, or same core directory) is
   * found; another owner's refuses the attach ({ ok: false, existing }: the ended jobs stay
   * ended); else the job is saved under the found job's id, creation and starter, audited with
   * that id.
   */
  async attachJob(
    job: JobRecord,
    audit: Omit<NewAudit, 'jobId'>,
  ): Promise<{ ok: true; job: JobRecord } | { ok: false; existing: JobRecord }> {
    return this.write(() =>
      this.db.transaction((): { ok: true; job: JobRecord } | { ok: false; existing: JobRecord } => {
        let existing: JobRecord | null;
        if (job.coresDir !== undefined) existing = this.findCoreJobNow(job.host, job.coresDir);
        else {
          this.endReusedJobsNow(job.host, job.starterPid, job.starterStartTime, this.clock());
          existing = this.findJobNow(job.host, job.starterPid, job.starterStartTime);
        }
        if (existing !== null && existing.uid !== job.uid) return { ok: false, existing };
        const saved: JobRecord =
          existing === null
            ? job
            : {
                ...job,
                id: existing.id,
                starterPid: existing.starterPid,
                starterStartTime: existing.starterStartTime,
                createdAt: existing.createdAt,
                createdBy: existing.createdBy,
              };
        this.saveJobNow(saved, { ...audit, jobId: saved.id });
        return { ok: true, job: saved };
      })(),
    );
  }

  async markJobEnded(id: JobId, at: number): Promise<void> {
    this.write(() => {
      this.db.prepare('UPDATE jobs SET ended_at = ? WHERE id = ? AND ended_at IS NULL').run(at, id);
    });
  }

  async job(id: string): Promise<JobRecord | null> {
    const r = this.db.prepare('SELECT * FROM jobs WHERE id = ?').get(id) as JobRow | undefined;
    return r ? toJob(r) : null;
  }

  /** Jobs of this uid (null = every job), newest first. */
  async jobs(uid: number | null): Promise<JobRecord[]> {
    const rows = (
      uid === null
        ? this.db.prepare('SELECT * FROM jobs ORDER BY created_at DESC').all()
        : this.db.prepare('SELECT * FROM jobs WHERE uid = ? ORDER BY created_at DESC').all(uid)
    ) as JobRow[];
    return rows.map(toJob);
  }

  // --- snapshots

  /**
   * Stores a snapshot, the request keys it answers, applies retention to its job and audits it:
   * all or nothing.
   */
  async insertSnapshot(
    s: NewSnapshot,
    audit: NewAudit,
    requests: readonly SnapshotRequestKey[] = [],
  ): Promise<{ removed: number }> {
    return this.write(() => {
      const m = s.meta;
      return this.db.transaction(() => {
        this.db
          .prepare(
            `INSERT INTO snapshots (${META_COLUMNS}, data) VALUES (@id, @jobId, @takenAt, @durationMicros, @ranks, @ok,
             @errors, @missing, @pendingSends, @pendingReceives, @unexpected, @digest, @missingRanks, @createdBy,
             @bytes, @storedBytes, @data)`,
          )
          .run({ ...m, missingRanks: JSON.stringify(m.missingRanks), data: s.gz });
        for (const r of requests) this.insertRequest(r, m.id);
        this.insertAudit(audit);
        return { removed: this.applyRetention(m.jobId) };
      })();
    });
  }

  /** Remembers that this request key got this snapshot (a request that joined one running). */
  async rememberRequest(r: SnapshotRequestKey, snapshotId: SnapshotId): Promise<void> {
    this.write(() => this.insertRequest(r, snapshotId));
  }

  /** The first snapshot a key got stays its answer. */
  private insertRequest(r: SnapshotRequestKey, snapshotId: string): void {
    this.db
      .prepare(
        `INSERT OR IGNORE INTO snapshot_requests (user_id, request_key, snapshot_id, created_at)
         VALUES (?, ?, ?, ?)`,
      )
      .run(r.userId, r.key, snapshotId, this.clock());
  }

  /** The snapshot stored for this request key, while it is kept. */
  async requestedSnapshot(r: SnapshotRequestKey): Promise<SnapshotMeta | null> {
    const row = this.db
      .prepare(
        `SELECT ${META_COLUMNS} FROM snapshots WHERE id =
           (SELECT snapshot_id FROM snapshot_requests WHERE user_id = ? AND request_key = ?)`,
      )
      .get(r.userId, r.key) as SnapshotRow | undefined;
    return row ? toMeta(row) : null;
  }

  /** Retention of one job's snapshots after an insert (store-retention.ts says what stays). */
  private applyRetention(jobId: string): number {
    let removed = 0;
    const { maxSnapshotsPerJob, maxAgeSeconds } = this.retention;
    const now = this.clock();
    if (maxSnapshotsPerJob > 0) {
      removed += this.db
        .prepare(countRetentionSql(SQLITE_PLACEHOLDERS))
        .run({ jobId, keep: maxSnapshotsPerJob, now }).changes;
    }
    if (maxAgeSeconds > 0) removed += this.applyAgeLimit(now);
    return removed;
  }

  private applyAgeLimit(now: number): number {
    return this.db
      .prepare(ageRetentionSql(SQLITE_PLACEHOLDERS))
      .run({ cutoff: now - this.retention.maxAgeSeconds * 1000, now }).changes;
  }

  /** Runs the age part of retention now (also done on every insert), and drops dead sessions. */
  async sweep(): Promise<number> {
    return this.write(() => {
      this.db.prepare('DELETE FROM sessions WHERE expires_at <= ?').run(this.clock());
      const auditAge = this.retention.auditAgeSeconds ?? 0;
      if (auditAge > 0) {
        const before = this.clock() - auditAge * 1000;
        this.db.prepare('DELETE FROM audit WHERE at < ?').run(before);
        // Ended jobs go with their snapshots and shares (ON DELETE CASCADE).
        this.db.prepare('DELETE FROM jobs WHERE ended_at IS NOT NULL AND ended_at < ?').run(before);
        // Ended watched jobs go with their samples and episodes (ON DELETE CASCADE).
        this.db.prepare('DELETE FROM watch_jobs WHERE ended_at IS NOT NULL AND ended_at < ?').run(before);
      }
      if (this.retention.maxAgeSeconds > 0) {
        this.db
          .prepare('DELETE FROM watch_samples WHERE at < ?')
          .run(this.clock() - this.retention.maxAgeSeconds * 1000);
      }
      if (this.retention.maxAgeSeconds <= 0) return 0;
      return this.applyAgeLimit(this.clock());
    });
  }

  async snapshotMeta(id: string): Promise<SnapshotMeta | null> {
    const r = this.db.prepare(`SELECT ${META_COLUMNS} FROM snapshots WHERE id = ?`).get(id) as
      | SnapshotRow
      | undefined;
    return r ? toMeta(r) : null;
  }

  async snapshotData(id: string): Promise<Buffer | null> {
    const r = this.db.prepare('SELECT data FROM snapshots WHERE id = ?').get(id) as
      | { data: Buffer }
      | undefined;
    return r ? r.data : null;
  }

  async snapshotOverview(id: string): Promise<Buffer | null> {
    const r = this.db.prepare('SELECT body FROM snapshot_overviews WHERE snapshot_id = ?').get(id) as
      | { body: Buffer }
      | undefined;
    return r ? r.body : null;
  }

  async putSnapshotOverview(id: string, body: Buffer): Promise<boolean> {
    // Only for a snapshot still stored: the SELECT finds none once retention removed it.
    const r = this.db
      .prepare(
        'INSERT OR IGNORE INTO snapshot_overviews (snapshot_id, body) SELECT id, ? FROM snapshots WHERE id = ?',
      )
      .run(body, id);
    return r.changes > 0;
  }

  /** History of a job, newest first. */
  async snapshots(jobId: string, limit: number): Promise<SnapshotMeta[]> {
    return (
      this.db
        .prepare(
          `SELECT ${META_COLUMNS} FROM snapshots WHERE job_id = ? ORDER BY taken_at DESC, rowid DESC LIMIT ?`,
        )
        .all(jobId, limit) as SnapshotRow[]
    ).map(toMeta);
  }

  async removedSnapshotJob(id: string): Promise<JobId | null> {
    const r = this.db
      .prepare(
        `SELECT job_id FROM audit WHERE snapshot_id = ? AND action = 'snapshot' AND job_id IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM snapshots WHERE id = ?) LIMIT 1`,
      )
      .get(id, id) as { job_id: string } | undefined;
    return r ? JobId(r.job_id) : null;
  }

  async countSnapshots(jobId?: string): Promise<number> {
    const r = (
      jobId === undefined
        ? this.db.prepare('SELECT COUNT(*) AS n FROM snapshots').get()
        : this.db.prepare('SELECT COUNT(*) AS n FROM snapshots WHERE job_id = ?').get(jobId)
    ) as { n: number };
    return r.n;
  }

  // --- shares

  async insertShare(share: ShareRecord, audit: NewAudit): Promise<void> {
    this.write(() => {
      this.db.transaction(() => {
        this.db
          .prepare(
            'INSERT INTO shares (id, snapshot_id, created_by, created_at, expires_at, made_by) VALUES (?, ?, ?, ?, ?, ?)',
          )
          .run(
            share.id,
            share.snapshotId,
            share.createdBy,
            share.createdAt,
            share.expiresAt,
            share.madeBy ?? null,
          );
        this.insertAudit(audit);
      })();
    });
  }

  /**
   * Live shares `viewer` may list (null = everyone's), newest first: the ones the user made
   * (never a system-made one by its name), and the system's of jobs of the user's uid but 0.
   */
  async liveShares(viewer: ShareViewer | null): Promise<ShareRecord[]> {
    const name = viewer?.name ?? null;
    const uid = viewer?.uid ?? null;
    const rows = this.db
      .prepare(
        `SELECT s.id, s.snapshot_id, s.created_by, s.created_at, s.expires_at, s.made_by FROM shares s
         WHERE s.expires_at > ? AND (? = 0
           OR (s.made_by IS NULL AND s.created_by = ?)
           OR (s.made_by IS NOT NULL AND ? IS NOT NULL AND ? <> 0 AND EXISTS (
             SELECT 1 FROM snapshots n JOIN jobs j ON j.id = n.job_id WHERE n.id = s.snapshot_id AND j.uid = ?)))
         ORDER BY s.created_at DESC LIMIT 1000`,
      )
      .all(this.clock(), viewer === null ? 0 : 1, name, uid, uid, uid) as ShareRow[];
    return rows.map(toShareRecord);
  }

  async revokeShare(id: string, audit: NewAudit): Promise<void> {
    this.write(() => {
      this.db.transaction(() => {
        this.db.prepare('DELETE FROM shares WHERE id = ?').run(id);
        this.insertAudit(audit);
      })();
    });
  }

  /** A share that has not expired; expired ones are as good as absent. */
  async liveShare(id: string): Promise<ShareRecord | null> {
    const r = this.db
      .prepare(
        'SELECT id, snapshot_id, created_by, created_at, expires_at, made_by FROM shares WHERE id = ? AND expires_at > ?',
      )
      .get(id, this.clock()) as ShareRow | undefined;
    return r ? toShareRecord(r) : null;
  }

  // --- audit

  async audit(a: NewAudit): Promise<void> {
    this.write(() => {
      this.insertAudit(a);
    });
  }

  private insertAudit(a: NewAudit): void {
    this.db
      .prepare('INSERT INTO audit (at, who, action, job_id, snapshot_id, detail) VALUES (?, ?, ?, ?, ?, ?)')
      .run(this.clock(), a.who, a.action, a.jobId ?? null, a.snapshotId ?? null, a.detail ?? '');
  }

  /** Newest first; `before` pages back by id. */
  async activity(limit: number, before?: number): Promise<AuditEntry[]> {
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
  // --- the hang watch (apps/server/src/watch/)

  /** The admins' watch policy, or null before anyone (or the flags at first start) set one. */
  async watchPolicy(): Promise<StoredWatchPolicy | null> {
    const r = this.db.prepare('SELECT policy, updated_at, updated_by FROM watch_policy WHERE id = 1').get() as
      | { policy: string; updated_at: number; updated_by: string }
      | undefined;
    return r
      ? { policy: JSON.parse(r.policy) as ApiWatchPolicy, updatedAt: r.updated_at, updatedBy: r.updated_by }
      : null;
  }

  /** Replaces the policy; audited in the same transaction. */
  async setWatchPolicy(policy: ApiWatchPolicy, audit: NewAudit): Promise<void> {
    this.write(() => {
      this.db.transaction(() => {
        this.db
          .prepare(
            `INSERT INTO watch_policy (id, policy, updated_at, updated_by) VALUES (1, ?, ?, ?)
             ON CONFLICT(id) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at,
               updated_by = excluded.updated_by`,
          )
          .run(JSON.stringify(policy), this.clock(), audit.who);
        this.insertAudit(audit);
      })();
    });
  }

  async watchJob(id: string): Promise<WatchJobRecord | null> {
    const r = this.db.prepare('SELECT * FROM watch_jobs WHERE id = ?').get(id) as WatchJobRow | undefined;
    return r ? toWatchJob(r) : null;
  }

  /** Watched jobs of this uid (null = all), live first, then newest first. */
  async watchJobs(uid: number | null): Promise<WatchJobRecord[]> {
    const rows = this.db
      .prepare(
        `SELECT * FROM watch_jobs WHERE (? IS NULL OR uid = ?)
         ORDER BY ended_at IS NOT NULL, first_seen DESC LIMIT 10000`,
      )
      .all(uid, uid) as WatchJobRow[];
    return rows.map(toWatchJob);
  }

  /**
   * A job an agent reports: inserted when new, else its info refreshed, last_seen moved and
   * (it was seen again after it was thought ended: an agent restarted) reopened.
   */
  async upsertWatchJob(j: {
    id: string;
    key: string;
    uid: number;
    jobId: JobId | null;
    info: WatchJobInfo;
    at: number;
  }): Promise<void> {
    this.write(() => {
      this.db
        .prepare(
          `INSERT INTO watch_jobs (id, key, uid, job_id, info, first_seen, last_seen)
           VALUES (@id, @key, @uid, @jobId, @info, @at, @at)
           ON CONFLICT(id) DO UPDATE SET info = excluded.info, last_seen = excluded.last_seen,
             job_id = COALESCE(excluded.job_id, watch_jobs.job_id), ended_at = NULL, end_reason = NULL`,
        )
        .run({ id: j.id, key: j.key, uid: j.uid, jobId: j.jobId, info: JSON.stringify(j.info), at: j.at });
    });
  }

  /** The job left every agent's report: ended at `at` (its last sample and snapshot stay). */
  async endWatchJob(id: string, at: number, reason: string | null): Promise<void> {
    this.write(() => {
      this.db.transaction(() => {
        this.db
          .prepare('UPDATE watch_jobs SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL')
          .run(at, reason, id);
        this.db
          .prepare('UPDATE watch_episodes SET ended_at = ? WHERE watch_id = ? AND ended_at IS NULL')
          .run(at, id);
      })();
    });
  }

  async setWatchEndReason(id: string, reason: string): Promise<void> {
    this.write(() => {
      this.db.prepare('UPDATE watch_jobs SET end_reason = ? WHERE id = ?').run(reason, id);
    });
  }

  /** One sample and the verdict it led to, in one transaction; samples beyond the cap go. */
  async insertWatchSample(sample: WatchSampleRecord, v: WatchVerdictUpdate): Promise<void> {
    const keep = this.retention.maxWatchSamplesPerJob ?? 500;
    this.write(() => {
      this.db.transaction(() => {
        this.db
          .prepare(
            `INSERT INTO watch_samples (watch_id, at, state, digest, ranks_read, cpu, stop_micros, snapshot_id)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          )
          .run(
            sample.watchId,
            sample.at,
            sample.state,
            sample.digest,
            sample.ranksRead,
            JSON.stringify(sample.cpu),
            sample.stopMicros,
            sample.snapshotId,
          );
        this.db
          .prepare(
            `UPDATE watch_jobs SET state = @state, since = @since, confidence = @confidence,
               least_progressed = @least, diagnosis = @diagnosis, evidence_snapshot_id = @evidence,
               last_snapshot_id = COALESCE(@storedId, last_snapshot_id),
               last_digest = COALESCE(@storedDigest, last_digest),
               last_state_stored = COALESCE(@storedState, last_state_stored)
             WHERE id = @id`,
          )
          .run({
            id: sample.watchId,
            state: v.state,
            since: v.since,
            confidence: v.confidence,
            least: v.leastProgressed,
            diagnosis: v.diagnosis,
            evidence: v.evidenceSnapshotId,
            storedId: v.stored?.snapshotId ?? null,
            storedDigest: v.stored?.digest ?? null,
            storedState: v.stored?.state ?? null,
          });
        if (keep > 0) {
          this.db
            .prepare(
              `DELETE FROM watch_samples WHERE watch_id = @id AND id NOT IN (
                 SELECT id FROM watch_samples WHERE watch_id = @id ORDER BY at DESC, id DESC LIMIT @keep)`,
            )
            .run({ id: sample.watchId, keep });
        }
      })();
    });
  }

  /** The job's samples, newest first. */
  async watchSamples(watchId: string, limit: number): Promise<WatchSampleRecord[]> {
    const rows = this.db
      .prepare(
        `SELECT watch_id, at, state, digest, ranks_read, cpu, stop_micros, snapshot_id FROM watch_samples
         WHERE watch_id = ? ORDER BY at DESC, id DESC LIMIT ?`,
      )
      .all(watchId, limit) as {
      watch_id: string;
      at: number;
      state: WatchState;
      digest: string | null;
      ranks_read: number;
      cpu: string;
      stop_micros: number;
      snapshot_id: string | null;
    }[];
    return rows.map((r) => ({
      watchId: r.watch_id,
      at: r.at,
      state: r.state,
      digest: r.digest,
      ranksRead: r.ranks_read,
      cpu: JSON.parse(r.cpu) as WatchSampleRecord['cpu'],
      stopMicros: r.stop_micros,
      snapshotId: r.snapshot_id === null ? null : SnapshotId(r.snapshot_id),
    }));
  }

  async fleetPage(q: FleetPageQuery): Promise<FleetPage> {
    const where = '(? IS NULL OR (uid = ? AND uid <> 0))';
    const total = (
      this.db.prepare(`SELECT COUNT(*) AS n FROM watch_jobs WHERE ${where}`).get(q.uid, q.uid) as {
        n: number;
      }
    ).n;
    const jobs = this.db
      .prepare(`SELECT * FROM watch_jobs WHERE ${where} ORDER BY ${FLEET_ORDER} LIMIT ? OFFSET ?`)
      .all(q.uid, q.uid, q.limit, q.offset) as WatchJobRow[];
    if (jobs.length === 0) return { total, jobs: [] };
    const ids = JSON.stringify(jobs.map((j) => j.id));
    const samples = this.db
      .prepare(
        `SELECT watch_id, at, state, snapshot_id, n FROM (
           SELECT watch_id, at, state, snapshot_id,
             ROW_NUMBER() OVER (PARTITION BY watch_id ORDER BY at DESC, id DESC) AS rn,
             COUNT(*) OVER (PARTITION BY watch_id) AS n
           FROM watch_samples WHERE watch_id IN (SELECT value FROM json_each(?))
         ) WHERE rn <= ? ORDER BY watch_id, rn`,
      )
      .all(ids, q.history) as FleetSampleRow[];
    const users = this.db
      .prepare(
        'SELECT uid, name FROM users WHERE uid IN (SELECT value FROM json_each(?)) ORDER BY is_admin, id',
      )
      .all(JSON.stringify([...new Set(jobs.map((j) => j.uid))])) as { uid: number; name: string }[];
    return { total, jobs: fleetEntries(jobs, samples, users) };
  }

  async countWatchSamples(watchId: string): Promise<number> {
    return (
      this.db.prepare('SELECT COUNT(*) AS n FROM watch_samples WHERE watch_id = ?').get(watchId) as {
        n: number;
      }
    ).n;
  }

  /** The job's open hang episode, if any. */
  async openEpisode(watchId: string): Promise<WatchEpisode | null> {
    const r = this.db
      .prepare(
        'SELECT * FROM watch_episodes WHERE watch_id = ? AND ended_at IS NULL ORDER BY id DESC LIMIT 1',
      )
      .get(watchId) as EpisodeRow | undefined;
    return r ? toEpisode(r) : null;
  }

  async episodes(watchId: string): Promise<WatchEpisode[]> {
    return (
      this.db
        .prepare('SELECT * FROM watch_episodes WHERE watch_id = ? ORDER BY id')
        .all(watchId) as EpisodeRow[]
    ).map(toEpisode);
  }

  /** Opens an episode (the caller checked none is open), with its snapshot and share link. */
  async openWatchEpisode(e: {
    watchId: string;
    startedAt: number;
    snapshotId: SnapshotId | null;
    shareId: string | null;
  }): Promise<number> {
    return this.write(() =>
      Number(
        this.db
          .prepare(
            'INSERT INTO watch_episodes (watch_id, started_at, snapshot_id, share_id) VALUES (?, ?, ?, ?)',
          )
          .run(e.watchId, e.startedAt, e.snapshotId, e.shareId).lastInsertRowid,
      ),
    );
  }

  async episodeNotified(id: number, at: number): Promise<void> {
    this.write(() => {
      this.db.prepare('UPDATE watch_episodes SET notified_at = ? WHERE id = ?').run(at, id);
    });
  }

  async closeWatchEpisode(watchId: string, at: number): Promise<void> {
    this.write(() => {
      this.db
        .prepare('UPDATE watch_episodes SET ended_at = ? WHERE watch_id = ? AND ended_at IS NULL')
        .run(at, watchId);
    });
  }

  // --- cluster leases (one statement: the same as PgStore's)

  async tryLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    const now = this.clock();
    return this.write(
      () =>
        this.db
          .prepare(
            `INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
             WHERE leases.holder = excluded.holder OR leases.expires_at <= ?
             RETURNING holder`,
          )
          .all(name, holder, now + ttlMs, now).length > 0,
    );
  }
}

interface EpisodeRow {
  id: number;
  watch_id: string;
  started_at: number;
  ended_at: number | null;
  snapshot_id: string | null;
  share_id: string | null;
  notified_at: number | null;
}

const toEpisode = (r: EpisodeRow): WatchEpisode => ({
  id: r.id,
  watchId: r.watch_id,
  startedAt: r.started_at,
  endedAt: r.ended_at,
  snapshotId: r.snapshot_id === null ? null : SnapshotId(r.snapshot_id),
  shareId: r.share_id,
  notifiedAt: r.notified_at,
});
