// The store on PostgreSQL: the same StorePort as SqliteStore, over a pool of
// node-postgres clients, so several aggregators can share one database. The schema is the
// PostgreSQL side of the one migration history (store-schema.ts), applied under an advisory
// lock so instances starting together migrate once. Every method that writes more than one
// statement is one transaction on one client; a read that decides a write locks what it read
// (SELECT ... FOR UPDATE / FOR SHARE, or a transaction-scoped advisory lock for a row that does
// not exist yet), and a serialization failure or deadlock is retried.
//
// Errors: the database out of reach (refused, socket gone, connection terminated, admin
// shutdown: SQLSTATE 57P0x / class 08) is MQD_E_STORE_UNAVAILABLE, answered as a 503 while it
// lasts (the pool reconnects by itself); disk full (53100) or a read-only server (25006) is
// MQD_E_STORE_READONLY, as SQLite's full disk. Epoch-ms BIGINTs come back as JS numbers (a
// per-pool type parser: they stay far below 2^53), bytea as Buffers.
import { type ApiWatchPolicy, JobId, MqdException, mqdError, SnapshotId, type WatchState } from '@mqd/model';
import pg from 'pg';
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
  NewAudit,
  NewSnapshot,
  RetentionPolicy,
  SnapshotRequestKey,
  WatchVerdictUpdate,
} from './store.js';
import type { FleetPage, FleetPageQuery, StorePort } from './store-port.js';
import {
  ageRetentionSql,
  countRetentionSql,
  PG_AGE_PLACEHOLDERS,
  PG_COUNT_PLACEHOLDERS,
} from './store-retention.js';
import {
  FLEET_ORDER,
  type FleetSampleRow,
  fleetEntries,
  type JobRow,
  META_COLUMNS,
  type Migration,
  migrationsFor,
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

/** pg_advisory_lock's key while migrating ("mqd" + "mig" in ASCII). */
const MIGRATION_LOCK = 0x6d7164_6d6967;
/** The first key of the transaction-scoped advisory locks that guard a find-or-create. */
const ATTACH_LOCK_CLASS = 0x6d7164;

/** Socket-level errors that mean the server is not there (or went away). */
const UNREACHABLE_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOENT',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
]);

/** SQLSTATEs of a server that is going or not ready: admin/crash shutdown, cannot connect now. */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);
/** Disk full, read-only transaction (a hot standby, default_transaction_read_only), I/O error. */
const READONLY_SQLSTATES = new Set(['53100', '25006', '58030']);
/** Worth retrying the whole transaction: serialization failure, deadlock. */
const RETRY_SQLSTATES = new Set(['40001', '40P01']);

function errCode(e: unknown): string | undefined {
  const c = (e as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : undefined;
}

/** Whether `e` says the database cannot be reached (rather than refusing this statement). */
export function isUnavailable(e: unknown): boolean {
  const code = errCode(e);
  if (code !== undefined && (UNREACHABLE_ERRNOS.has(code) || UNAVAILABLE_SQLSTATES.has(code))) return true;
  if (code !== undefined && /^08[0-9A-Z]{3}$/.test(code)) return true;
  const msg = e instanceof Error ? e.message : '';
  return /Connection terminated|connection timeout|Client has encountered a connection error|Client was closed|timeout exceeded when trying to connect/i.test(
    msg,
  );
}

/** A pg error as the store's coded error (MqdException), or itself when it is not the store's fault. */
function toStoreError(e: unknown): unknown {
  if (e instanceof MqdException) return e;
  const code = errCode(e);
  const msg = e instanceof Error ? e.message : String(e);
  if (isUnavailable(e)) {
    // The driver's text names the database's host or socket: kept out of the API's answer.
    const why = code ?? (/terminated/i.test(msg) ? 'connection terminated' : 'connection closed');
    return Object.assign(
      new MqdException(mqdError('MQD_E_STORE_UNAVAILABLE', `the PostgreSQL store is out of reach (${why})`)),
      { cause: e },
    );
  }
  if (code !== undefined && READONLY_SQLSTATES.has(code)) {
    return new MqdException(
      mqdError('MQD_E_STORE_READONLY', `PostgreSQL refused the write (${code}: ${msg}); reads still work`),
    );
  }
  return e;
}

type Q = Pick<pg.ClientBase, 'query'>;

/** INT8 (bigint, count(*)) as a JS number; every other type as pg parses it. */
const TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8
      ? (v: string) => Number(v)
      : pg.types.getTypeParser(oid, format ?? 'text')) as pg.CustomTypesConfig['getTypeParser'],
};

export interface PgStoreOptions {
  /** For tests of the migration machinery; default the PostgreSQL side of the history. */
  readonly migrations?: readonly Migration[];
  /** Pool size; default 10. */
  readonly maxConnections?: number;
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

export class PgStore implements StorePort {
  readonly dialect = 'postgres' as const;
  readOnlyReason: string | null = null;
  private closed = false;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly retention: RetentionPolicy,
    private readonly clock: () => number,
    readonly migrationsApplied: readonly number[],
  ) {}

  /**
   * Connects to the database at `url` (postgres:// or postgresql://; a Unix socket as
   * ?host=/dir) and brings its schema to the current version. Fails with
   * MQD_E_STORE_UNAVAILABLE when the database cannot be reached.
   */
  static async open(
    url: string,
    retention: RetentionPolicy,
    clock: () => number = Date.now,
    opts: PgStoreOptions = {},
  ): Promise<PgStore> {
    const pool = new pg.Pool({
      connectionString: url,
      max: opts.maxConnections ?? 10,
      types: TYPES,
      connectionTimeoutMillis: 10_000,
      idleTimeoutMillis: 30_000,
    });
    // An idle client whose server went away: the pool drops it; no unhandled 'error' event.
    pool.on('error', () => undefined);
    try {
      const applied = await PgStore.migrate(pool, opts.migrations ?? migrationsFor('postgres'), clock);
      return new PgStore(pool, retention, clock, applied);
    } catch (e) {
      await pool.end().catch(() => undefined);
      throw toStoreError(e);
    }
  }

  private static async migrate(pool: pg.Pool, migrations: readonly Migration[], clock: () => number) {
    const c = await pool.connect();
    try {
      // Two instances starting together: the second waits here and then finds nothing to do.
      await c.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      try {
        // Created only when missing: a current schema opens without a write (a read-only server).
        const exists = (
          await c.query<{ e: boolean }>("SELECT to_regclass('schema_version') IS NOT NULL AS e")
        ).rows[0]?.e;
        if (!exists) {
          await c.query(
            'CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)',
          );
        }
        const current = (await c.query<{ v: number | null }>('SELECT MAX(version) AS v FROM schema_version'))
          .rows[0]?.v;
        const applied: number[] = [];
        for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
          if (m.version <= (current ?? 0)) continue;
          // Each migration and its version row commit together (PostgreSQL's DDL is transactional).
          await c.query('BEGIN');
          try {
            await c.query(m.sql);
            await c.query('INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)', [
              m.version,
              clock(),
            ]);
            await c.query('COMMIT');
          } catch (e) {
            await c.query('ROLLBACK').catch(() => undefined);
            throw e;
          }
          applied.push(m.version);
        }
        return applied;
      } finally {
        await c.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
      }
    } finally {
      c.release();
    }
  }

  get isOpen(): boolean {
    return !this.closed;
  }

  // --- plumbing

  /** One statement on any pooled client. */
  private async q<R extends pg.QueryResultRow>(sql: string, params: readonly unknown[] = []): Promise<R[]> {
    try {
      return (await this.pool.query<R>(sql, params as unknown[])).rows;
    } catch (e) {
      throw toStoreError(e);
    }
  }

  /** A write of one statement; returns the rows changed. */
  private async w(sql: string, params: readonly unknown[] = []): Promise<number> {
    return this.write(async () => (await this.pool.query(sql, params as unknown[])).rowCount ?? 0);
  }

  /** A write: a refusal (disk full, read-only) is remembered in readOnlyReason until a write works. */
  private async write<T>(fn: () => Promise<T>): Promise<T> {
    try {
      const r = await fn();
      this.readOnlyReason = null;
      return r;
    } catch (e) {
      const err = toStoreError(e);
      if (err instanceof MqdException && err.code === 'MQD_E_STORE_READONLY')
        this.readOnlyReason = err.message;
      throw err;
    }
  }

  /** `fn` in one transaction on one client, retried on a serialization failure or deadlock. */
  private async tx<T>(fn: (c: Q) => Promise<T>): Promise<T> {
    return this.write(async () => {
      for (let attempt = 1; ; attempt++) {
        const c = await this.pool.connect();
        let broken = false;
        try {
          await c.query('BEGIN');
          const r = await fn(c);
          await c.query('COMMIT');
          return r;
        } catch (e) {
          broken = isUnavailable(e);
          if (!broken) await c.query('ROLLBACK').catch(() => undefined);
          if (attempt < 5 && RETRY_SQLSTATES.has(errCode(e) ?? '')) continue;
          throw e;
        } finally {
          // A client whose connection broke is destroyed, not returned to the pool.
          c.release(broken);
        }
      }
    });
  }

  async schemaVersion(): Promise<number> {
    return (await this.q<{ v: number | null }>('SELECT MAX(version) AS v FROM schema_version'))[0]?.v ?? 0;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }

  // --- users and sessions

  async upsertUser(u: {
    name: string;
    uid: number | null;
    admin: boolean;
    tokenHash: string | null;
    tokenExpiresAt?: number | null;
  }): Promise<User> {
    const rows = await this.write(() =>
      this.pool.query<UserRow>(
        `INSERT INTO users (name, uid, is_admin, token_hash, token_expires_at, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (name) DO UPDATE SET uid = excluded.uid, is_admin = excluded.is_admin,
           token_hash = COALESCE(excluded.token_hash, users.token_hash),
           token_expires_at = CASE WHEN excluded.token_hash IS NULL THEN users.token_expires_at
                                   ELSE excluded.token_expires_at END
         RETURNING id, name, uid, is_admin`,
        [u.name, u.uid, u.admin ? 1 : 0, u.tokenHash, u.tokenExpiresAt ?? null, this.clock()],
      ),
    );
    return toUser(rows.rows[0] as UserRow);
  }

  async userByTokenHash(hash: string): Promise<User | null> {
    const r = await this.loginToken(hash);
    return r === null || r === 'expired' ? null : r;
  }

  private async loginTokenOn(c: Q, hash: string, lock: boolean): Promise<User | 'expired' | null> {
    const r = (
      await c.query<UserRow & { token_expires_at: number | null }>(
        `SELECT id, name, uid, is_admin, token_expires_at FROM users WHERE token_hash = $1${lock ? ' FOR SHARE' : ''}`,
        [hash],
      )
    ).rows[0];
    if (!r) return null;
    if (r.token_expires_at !== null && r.token_expires_at <= this.clock()) return 'expired';
    return toUser(r);
  }

  async loginToken(hash: string): Promise<User | 'expired' | null> {
    try {
      return await this.loginTokenOn(this.pool, hash, false);
    } catch (e) {
      throw toStoreError(e);
    }
  }

  async revokeToken(name: string, audit: NewAudit): Promise<boolean> {
    return this.tx(async (c) => {
      const u = (await c.query<{ id: number }>('SELECT id FROM users WHERE name = $1 FOR UPDATE', [name]))
        .rows[0];
      if (!u) return false;
      await c.query('UPDATE users SET token_hash = NULL WHERE id = $1', [u.id]);
      await c.query('DELETE FROM sessions WHERE user_id = $1', [u.id]);
      await this.insertAudit(c, audit);
      return true;
    });
  }

  async userNameOfUid(uid: number): Promise<string | null> {
    const r = await this.q<{ name: string }>(
      'SELECT name FROM users WHERE uid = $1 ORDER BY is_admin, id LIMIT 1',
      [uid],
    );
    return r[0]?.name ?? null;
  }

  async userByName(name: string): Promise<User | null> {
    const r = await this.q<UserRow>('SELECT id, name, uid, is_admin FROM users WHERE name = $1', [name]);
    return r[0] ? toUser(r[0]) : null;
  }

  async createSession(tokenHash: string, userId: number, expiresAt: number): Promise<void> {
    await this.w(
      'INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)',
      [tokenHash, userId, this.clock(), expiresAt],
    );
  }

  async loginSession(
    loginTokenHash: string,
    sessionHash: string,
    expiresAt: number,
  ): Promise<User | 'expired' | null> {
    return this.tx(async (c) => {
      // FOR SHARE: a revocation (UPDATE of this row) waits for the session to exist, then ends it.
      const r = await this.loginTokenOn(c, loginTokenHash, true);
      if (r === null || r === 'expired') return r;
      await c.query(
        'INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)',
        [sessionHash, r.id, this.clock(), expiresAt],
      );
      return r;
    });
  }

  async userBySession(tokenHash: string): Promise<User | null> {
    const now = this.clock();
    const r = await this.q<UserRow>(
      `SELECT u.id, u.name, u.uid, u.is_admin FROM sessions s JOIN users u ON u.id = s.user_id
       WHERE s.token_hash = $1 AND s.expires_at > $2
         AND (u.token_expires_at IS NULL OR u.token_expires_at > $2)`,
      [tokenHash, now],
    );
    return r[0] ? toUser(r[0]) : null;
  }

  async deleteSession(tokenHash: string): Promise<void> {
    await this.w('DELETE FROM sessions WHERE token_hash = $1', [tokenHash]);
  }

  // --- jobs

  private async findJobOn(
    c: Q,
    host: string,
    starterPid: number,
    starterStartTime: string | null,
  ): Promise<JobRecord | null> {
    const r = (
      await c.query<JobRow>(
        `SELECT * FROM jobs WHERE host = $1 AND starter_pid = $2
         AND ($3::text IS NULL OR starter_start_time = $3)
         AND ended_at IS NULL AND cores_dir IS NULL ORDER BY created_at DESC LIMIT 1`,
        [host, starterPid, starterStartTime],
      )
    ).rows[0];
    return r ? toJob(r) : null;
  }

  async findJob(
    host: string,
    starterPid: number,
    starterStartTime: string | null,
  ): Promise<JobRecord | null> {
    try {
      return await this.findJobOn(this.pool, host, starterPid, starterStartTime);
    } catch (e) {
      throw toStoreError(e);
    }
  }

  private async findCoreJobOn(c: Q, host: string, coresDir: string): Promise<JobRecord | null> {
    const r = (
      await c.query<JobRow>(
        'SELECT * FROM jobs WHERE host = $1 AND cores_dir = $2 ORDER BY created_at DESC LIMIT 1',
        [host, coresDir],
      )
    ).rows[0];
    return r ? toJob(r) : null;
  }

  async findCoreJob(host: string, coresDir: string): Promise<JobRecord | null> {
    try {
      return await this.findCoreJobOn(this.pool, host, coresDir);
    } catch (e) {
      throw toStoreError(e);
    }
  }

  private async endReusedJobsOn(
    c: Q,
    host: string,
    starterPid: number,
    starterStartTime: string,
    at: number,
  ): Promise<number> {
    return (
      (
        await c.query(
          `UPDATE jobs SET ended_at = $1 WHERE host = $2 AND starter_pid = $3 AND starter_start_time != $4
           AND ended_at IS NULL AND cores_dir IS NULL`,
          [at, host, starterPid, starterStartTime],
        )
      ).rowCount ?? 0
    );
  }

  async endReusedJobs(
    host: string,
    starterPid: number,
    starterStartTime: string,
    at: number,
  ): Promise<number> {
    return this.write(() => this.endReusedJobsOn(this.pool, host, starterPid, starterStartTime, at));
  }

  private async saveJobOn(c: Q, job: JobRecord, audit: NewAudit): Promise<void> {
    await c.query(
      `INSERT INTO jobs (id, host, starter_pid, starter_start_time, uid, command, method, rank_count, layout,
         created_at, created_by, ended_at, cores_dir)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
       ON CONFLICT (id) DO UPDATE SET command = excluded.command, method = excluded.method,
         rank_count = excluded.rank_count, layout = excluded.layout, ended_at = excluded.ended_at
       WHERE jobs.uid = excluded.uid AND jobs.starter_start_time = excluded.starter_start_time`,
      [
        job.id,
        job.host,
        job.starterPid,
        job.starterStartTime,
        job.uid,
        job.command,
        job.method,
        job.ranks.length,
        JSON.stringify(job.ranks),
        job.createdAt,
        job.createdBy,
        job.endedAt,
        job.coresDir ?? null,
      ],
    );
    await this.insertAudit(c, audit);
  }

  async saveJob(job: JobRecord, audit: NewAudit): Promise<void> {
    await this.tx((c) => this.saveJobOn(c, job, audit));
  }

  async attachJob(
    job: JobRecord,
    audit: Omit<NewAudit, 'jobId'>,
  ): Promise<{ ok: true; job: JobRecord } | { ok: false; existing: JobRecord }> {
    return this.tx(async (c): Promise<{ ok: true; job: JobRecord } | { ok: false; existing: JobRecord }> => {
      // Two instances attaching the same new job at once: the second waits here, then finds
      // the first's row (no row exists yet to lock with FOR UPDATE).
      const identity = JSON.stringify(
        job.coresDir !== undefined
          ? ['cores', job.host, job.coresDir]
          : ['starter', job.host, job.starterPid],
      );
      await c.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [ATTACH_LOCK_CLASS, identity]);
      let existing: JobRecord | null;
      if (job.coresDir !== undefined) existing = await this.findCoreJobOn(c, job.host, job.coresDir);
      else {
        await this.endReusedJobsOn(c, job.host, job.starterPid, job.starterStartTime, this.clock());
        existing = await this.findJobOn(c, job.host, job.starterPid, job.starterStartTime);
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
      await this.saveJobOn(c, saved, { ...audit, jobId: saved.id });
      return { ok: true, job: saved };
    });
  }

  async markJobEnded(id: JobId, at: number): Promise<void> {
    await this.w('UPDATE jobs SET ended_at = $1 WHERE id = $2 AND ended_at IS NULL', [at, id]);
  }

  async job(id: string): Promise<JobRecord | null> {
    const r = await this.q<JobRow>('SELECT * FROM jobs WHERE id = $1', [id]);
    return r[0] ? toJob(r[0]) : null;
  }

  async jobs(uid: number | null): Promise<JobRecord[]> {
    const rows =
      uid === null
        ? await this.q<JobRow>('SELECT * FROM jobs ORDER BY created_at DESC')
        : await this.q<JobRow>('SELECT * FROM jobs WHERE uid = $1 ORDER BY created_at DESC', [uid]);
    return rows.map(toJob);
  }

  // --- snapshots

  async insertSnapshot(
    s: NewSnapshot,
    audit: NewAudit,
    requests: readonly SnapshotRequestKey[] = [],
  ): Promise<{ removed: number }> {
    const m = s.meta;
    return this.tx(async (c) => {
      // One job's inserts and retention in turn (its row locked), so "keep the newest N" holds
      // when two instances store snapshots of one job at once.
      await c.query('SELECT id FROM jobs WHERE id = $1 FOR UPDATE', [m.jobId]);
      await c.query(
        `INSERT INTO snapshots (${META_COLUMNS}, data)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
        [
          m.id,
          m.jobId,
          m.takenAt,
          m.durationMicros,
          m.ranks,
          m.ok,
          m.errors,
          m.missing,
          m.pendingSends,
          m.pendingReceives,
          m.unexpected,
          m.digest,
          JSON.stringify(m.missingRanks),
          m.createdBy,
          m.bytes,
          m.storedBytes,
          s.gz,
        ],
      );
      for (const r of requests) await this.insertRequest(c, r, m.id);
      await this.insertAudit(c, audit);
      return { removed: await this.applyRetention(c, m.jobId) };
    });
  }

  async rememberRequest(r: SnapshotRequestKey, snapshotId: SnapshotId): Promise<void> {
    await this.write(() => this.insertRequest(this.pool, r, snapshotId));
  }

  /** The first snapshot a key got stays its answer. */
  private async insertRequest(c: Q, r: SnapshotRequestKey, snapshotId: string): Promise<void> {
    await c.query(
      `INSERT INTO snapshot_requests (user_id, request_key, snapshot_id, created_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT (user_id, request_key) DO NOTHING`,
      [r.userId, r.key, snapshotId, this.clock()],
    );
  }

  async requestedSnapshot(r: SnapshotRequestKey): Promise<SnapshotMeta | null> {
    const row = await this.q<SnapshotRow>(
      `SELECT ${META_COLUMNS} FROM snapshots WHERE id =
         (SELECT snapshot_id FROM snapshot_requests WHERE user_id = $1 AND request_key = $2)`,
      [r.userId, r.key],
    );
    return row[0] ? toMeta(row[0]) : null;
  }

  /** Retention of one job's snapshots after an insert (store-retention.ts says what stays). */
  private async applyRetention(c: Q, jobId: string): Promise<number> {
    let removed = 0;
    const { maxSnapshotsPerJob, maxAgeSeconds } = this.retention;
    const now = this.clock();
    if (maxSnapshotsPerJob > 0) {
      removed +=
        (await c.query(countRetentionSql(PG_COUNT_PLACEHOLDERS), [jobId, maxSnapshotsPerJob, now]))
          .rowCount ?? 0;
    }
    if (maxAgeSeconds > 0) removed += await this.applyAgeLimit(c, now);
    return removed;
  }

  private async applyAgeLimit(c: Q, now: number): Promise<number> {
    const cutoff = now - this.retention.maxAgeSeconds * 1000;
    return (await c.query(ageRetentionSql(PG_AGE_PLACEHOLDERS), [cutoff, now])).rowCount ?? 0;
  }

  async sweep(): Promise<number> {
    return this.tx(async (c) => {
      await c.query('DELETE FROM sessions WHERE expires_at <= $1', [this.clock()]);
      const auditAge = this.retention.auditAgeSeconds ?? 0;
      if (auditAge > 0) {
        const before = this.clock() - auditAge * 1000;
        await c.query('DELETE FROM audit WHERE at < $1', [before]);
        await c.query('DELETE FROM jobs WHERE ended_at IS NOT NULL AND ended_at < $1', [before]);
        await c.query('DELETE FROM watch_jobs WHERE ended_at IS NOT NULL AND ended_at < $1', [before]);
      }
      if (this.retention.maxAgeSeconds <= 0) return 0;
      const cutoff = this.clock() - this.retention.maxAgeSeconds * 1000;
      await c.query('DELETE FROM watch_samples WHERE at < $1', [cutoff]);
      return this.applyAgeLimit(c, this.clock());
    });
  }

  async snapshotMeta(id: string): Promise<SnapshotMeta | null> {
    const r = await this.q<SnapshotRow>(`SELECT ${META_COLUMNS} FROM snapshots WHERE id = $1`, [id]);
    return r[0] ? toMeta(r[0]) : null;
  }

  async snapshotData(id: string): Promise<Buffer | null> {
    const r = await this.q<{ data: Buffer }>('SELECT data FROM snapshots WHERE id = $1', [id]);
    return r[0] ? r[0].data : null;
  }

  async snapshotOverview(id: string): Promise<Buffer | null> {
    const r = await this.q<{ body: Buffer }>('SELECT body FROM snapshot_overviews WHERE snapshot_id = $1', [
      id,
    ]);
    return r[0] ? r[0].body : null;
  }

  async putSnapshotOverview(id: string, body: Buffer): Promise<boolean> {
    // Only for a snapshot still stored; a concurrent delete of the snapshot leaves none either
    // (the foreign key's row lock), and two instances storing at once keep the first.
    const r = await this.w(
      `INSERT INTO snapshot_overviews (snapshot_id, body) SELECT id, $1 FROM snapshots WHERE id = $2
       ON CONFLICT (snapshot_id) DO NOTHING`,
      [body, id],
    );
    return r > 0;
  }

  async snapshots(jobId: string, limit: number): Promise<SnapshotMeta[]> {
    return (
      await this.q<SnapshotRow>(
        `SELECT ${META_COLUMNS} FROM snapshots WHERE job_id = $1 ORDER BY taken_at DESC, rowid DESC LIMIT $2`,
        [jobId, limit],
      )
    ).map(toMeta);
  }

  async removedSnapshotJob(id: string): Promise<JobId | null> {
    const r = await this.q<{ job_id: string }>(
      `SELECT job_id FROM audit WHERE snapshot_id = $1 AND action = 'snapshot' AND job_id IS NOT NULL
         AND NOT EXISTS (SELECT 1 FROM snapshots WHERE id = $1) LIMIT 1`,
      [id],
    );
    return r[0] ? JobId(r[0].job_id) : null;
  }

  async countSnapshots(jobId?: string): Promise<number> {
    const r =
      jobId === undefined
        ? await this.q<{ n: number }>('SELECT COUNT(*) AS n FROM snapshots')
        : await this.q<{ n: number }>('SELECT COUNT(*) AS n FROM snapshots WHERE job_id = $1', [jobId]);
    return r[0]?.n ?? 0;
  }

  // --- shares

  async insertShare(share: ShareRecord, audit: NewAudit): Promise<void> {
    await this.tx(async (c) => {
      await c.query(
        'INSERT INTO shares (id, snapshot_id, created_by, created_at, expires_at, made_by) VALUES ($1, $2, $3, $4, $5, $6)',
        [share.id, share.snapshotId, share.createdBy, share.createdAt, share.expiresAt, share.madeBy ?? null],
      );
      await this.insertAudit(c, audit);
    });
  }

  /** As SqliteStore.liveShares: the user's own by name (never a system-made one), the system's by the job's uid. */
  async liveShares(viewer: ShareViewer | null): Promise<ShareRecord[]> {
    return (
      await this.q<ShareRow>(
        `SELECT s.id, s.snapshot_id, s.created_by, s.created_at, s.expires_at, s.made_by FROM shares s
         WHERE s.expires_at > $1 AND (NOT $2::boolean
           OR (s.made_by IS NULL AND s.created_by = $3::text)
           OR (s.made_by IS NOT NULL AND $4::integer IS NOT NULL AND $4::integer <> 0 AND EXISTS (
             SELECT 1 FROM snapshots n JOIN jobs j ON j.id = n.job_id WHERE n.id = s.snapshot_id AND j.uid = $4::integer)))
         ORDER BY s.created_at DESC LIMIT 1000`,
        [this.clock(), viewer !== null, viewer?.name ?? null, viewer?.uid ?? null],
      )
    ).map(toShareRecord);
  }

  async revokeShare(id: string, audit: NewAudit): Promise<void> {
    await this.tx(async (c) => {
      await c.query('DELETE FROM shares WHERE id = $1', [id]);
      await this.insertAudit(c, audit);
    });
  }

  async liveShare(id: string): Promise<ShareRecord | null> {
    const r = await this.q<ShareRow>(
      'SELECT id, snapshot_id, created_by, created_at, expires_at, made_by FROM shares WHERE id = $1 AND expires_at > $2',
      [id, this.clock()],
    );
    return r[0] ? toShareRecord(r[0]) : null;
  }

  // --- audit

  async audit(a: NewAudit): Promise<void> {
    await this.write(() => this.insertAudit(this.pool, a));
  }

  private async insertAudit(c: Q, a: NewAudit): Promise<void> {
    await c.query(
      'INSERT INTO audit (at, who, action, job_id, snapshot_id, detail) VALUES ($1, $2, $3, $4, $5, $6)',
      [this.clock(), a.who, a.action, a.jobId ?? null, a.snapshotId ?? null, a.detail ?? ''],
    );
  }

  async activity(limit: number, before?: number): Promise<AuditEntry[]> {
    const rows = await this.q<{
      id: number;
      at: number;
      who: string;
      action: AuditAction;
      job_id: string | null;
      snapshot_id: string | null;
      detail: string;
    }>(
      'SELECT id, at, who, action, job_id, snapshot_id, detail FROM audit WHERE id < $1 ORDER BY id DESC LIMIT $2',
      [before ?? Number.MAX_SAFE_INTEGER, limit],
    );
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

  // --- leases

  async tryLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    const now = this.clock();
    return this.write(async () => {
      // One statement: the insert, or the update of a free, expired or own lease, is atomic
      // against another instance's (ON CONFLICT takes the row lock).
      const r = await this.pool.query(
        `INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
         WHERE leases.holder = excluded.holder OR leases.expires_at <= $4
         RETURNING holder`,
        [name, holder, now + ttlMs, now],
      );
      return (r.rowCount ?? 0) > 0;
    });
  }

  // --- the hang watch

  async watchPolicy(): Promise<StoredWatchPolicy | null> {
    const r = (
      await this.q<{ policy: string; updated_at: number; updated_by: string }>(
        'SELECT policy, updated_at, updated_by FROM watch_policy WHERE id = 1',
      )
    )[0];
    return r
      ? { policy: JSON.parse(r.policy) as ApiWatchPolicy, updatedAt: r.updated_at, updatedBy: r.updated_by }
      : null;
  }

  async setWatchPolicy(policy: ApiWatchPolicy, audit: NewAudit): Promise<void> {
    await this.tx(async (c) => {
      await c.query(
        `INSERT INTO watch_policy (id, policy, updated_at, updated_by) VALUES (1, $1, $2, $3)
         ON CONFLICT (id) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at,
           updated_by = excluded.updated_by`,
        [JSON.stringify(policy), this.clock(), audit.who],
      );
      await this.insertAudit(c, audit);
    });
  }

  async watchJob(id: string): Promise<WatchJobRecord | null> {
    const r = await this.q<WatchJobRow>('SELECT * FROM watch_jobs WHERE id = $1', [id]);
    return r[0] ? toWatchJob(r[0]) : null;
  }

  async watchJobs(uid: number | null): Promise<WatchJobRecord[]> {
    return (
      await this.q<WatchJobRow>(
        `SELECT * FROM watch_jobs WHERE ($1::integer IS NULL OR uid = $1)
         ORDER BY ended_at IS NOT NULL, first_seen DESC LIMIT 10000`,
        [uid],
      )
    ).map(toWatchJob);
  }

  async upsertWatchJob(j: {
    id: string;
    key: string;
    uid: number;
    jobId: JobId | null;
    info: WatchJobInfo;
    at: number;
  }): Promise<void> {
    await this.w(
      `INSERT INTO watch_jobs (id, key, uid, job_id, info, first_seen, last_seen)
       VALUES ($1, $2, $3, $4, $5, $6, $6)
       ON CONFLICT (id) DO UPDATE SET info = excluded.info, last_seen = excluded.last_seen,
         job_id = COALESCE(excluded.job_id, watch_jobs.job_id), ended_at = NULL, end_reason = NULL`,
      [j.id, j.key, j.uid, j.jobId, JSON.stringify(j.info), j.at],
    );
  }

  async endWatchJob(id: string, at: number, reason: string | null): Promise<void> {
    await this.tx(async (c) => {
      await c.query(
        'UPDATE watch_jobs SET ended_at = $1, end_reason = $2 WHERE id = $3 AND ended_at IS NULL',
        [at, reason, id],
      );
      await c.query('UPDATE watch_episodes SET ended_at = $1 WHERE watch_id = $2 AND ended_at IS NULL', [
        at,
        id,
      ]);
    });
  }

  async setWatchEndReason(id: string, reason: string): Promise<void> {
    await this.w('UPDATE watch_jobs SET end_reason = $1 WHERE id = $2', [reason, id]);
  }

  async insertWatchSample(sample: WatchSampleRecord, v: WatchVerdictUpdate): Promise<void> {
    const keep = this.retention.maxWatchSamplesPerJob ?? 500;
    await this.tx(async (c) => {
      // The job's row first: two samples of one job go in turn, and the cap below sees both.
      await c.query(
        `UPDATE watch_jobs SET state = $2, since = $3, confidence = $4,
           least_progressed = $5, diagnosis = $6, evidence_snapshot_id = $7,
           last_snapshot_id = COALESCE($8, last_snapshot_id),
           last_digest = COALESCE($9, last_digest),
           last_state_stored = COALESCE($10, last_state_stored)
         WHERE id = $1`,
        [
          sample.watchId,
          v.state,
          v.since,
          v.confidence,
          v.leastProgressed,
          v.diagnosis,
          v.evidenceSnapshotId,
          v.stored?.snapshotId ?? null,
          v.stored?.digest ?? null,
          v.stored?.state ?? null,
        ],
      );
      await c.query(
        `INSERT INTO watch_samples (watch_id, at, state, digest, ranks_read, cpu, stop_micros, snapshot_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [
          sample.watchId,
          sample.at,
          sample.state,
          sample.digest,
          sample.ranksRead,
          JSON.stringify(sample.cpu),
          sample.stopMicros,
          sample.snapshotId,
        ],
      );
      if (keep > 0) {
        await c.query(
          `DELETE FROM watch_samples WHERE watch_id = $1 AND id NOT IN (
             SELECT id FROM watch_samples WHERE watch_id = $1 ORDER BY at DESC, id DESC LIMIT $2)`,
          [sample.watchId, keep],
        );
      }
    });
  }

  async watchSamples(watchId: string, limit: number): Promise<WatchSampleRecord[]> {
    const rows = await this.q<{
      watch_id: string;
      at: number;
      state: WatchState;
      digest: string | null;
      ranks_read: number;
      cpu: string;
      stop_micros: number;
      snapshot_id: string | null;
    }>(
      `SELECT watch_id, at, state, digest, ranks_read, cpu, stop_micros, snapshot_id FROM watch_samples
       WHERE watch_id = $1 ORDER BY at DESC, id DESC LIMIT $2`,
      [watchId, limit],
    );
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
    const where = '($1::integer IS NULL OR (uid = $1::integer AND uid <> 0))';
    const total = Number(
      (await this.q<{ n: number }>(`SELECT COUNT(*) AS n FROM watch_jobs WHERE ${where}`, [q.uid]))[0]?.n ??
        0,
    );
    const jobs = await this.q<WatchJobRow>(
      `SELECT * FROM watch_jobs WHERE ${where} ORDER BY ${FLEET_ORDER} LIMIT $2 OFFSET $3`,
      [q.uid, q.limit, q.offset],
    );
    if (jobs.length === 0) return { total, jobs: [] };
    const samples = await this.q<FleetSampleRow>(
      `SELECT watch_id, at, state, snapshot_id, n FROM (
         SELECT watch_id, at, state, snapshot_id,
           ROW_NUMBER() OVER (PARTITION BY watch_id ORDER BY at DESC, id DESC) AS rn,
           COUNT(*) OVER (PARTITION BY watch_id) AS n
         FROM watch_samples WHERE watch_id = ANY($1::text[])
       ) w WHERE rn <= $2 ORDER BY watch_id, rn`,
      [jobs.map((j) => j.id), q.history],
    );
    const users = await this.q<{ uid: number; name: string }>(
      'SELECT uid, name FROM users WHERE uid = ANY($1::integer[]) ORDER BY is_admin, id',
      [[...new Set(jobs.map((j) => j.uid))]],
    );
    return { total, jobs: fleetEntries(jobs, samples, users) };
  }

  async countWatchSamples(watchId: string): Promise<number> {
    return (
      (
        await this.q<{ n: number }>('SELECT COUNT(*) AS n FROM watch_samples WHERE watch_id = $1', [watchId])
      )[0]?.n ?? 0
    );
  }

  async openEpisode(watchId: string): Promise<WatchEpisode | null> {
    const r = await this.q<EpisodeRow>(
      'SELECT * FROM watch_episodes WHERE watch_id = $1 AND ended_at IS NULL ORDER BY id DESC LIMIT 1',
      [watchId],
    );
    return r[0] ? toEpisode(r[0]) : null;
  }

  async episodes(watchId: string): Promise<WatchEpisode[]> {
    return (
      await this.q<EpisodeRow>('SELECT * FROM watch_episodes WHERE watch_id = $1 ORDER BY id', [watchId])
    ).map(toEpisode);
  }

  async openWatchEpisode(e: {
    watchId: string;
    startedAt: number;
    snapshotId: SnapshotId | null;
    shareId: string | null;
  }): Promise<number> {
    return this.write(async () => {
      const r = await this.pool.query<{ id: number }>(
        'INSERT INTO watch_episodes (watch_id, started_at, snapshot_id, share_id) VALUES ($1, $2, $3, $4) RETURNING id',
        [e.watchId, e.startedAt, e.snapshotId, e.shareId],
      );
      return (r.rows[0] as { id: number }).id;
    });
  }

  async episodeNotified(id: number, at: number): Promise<void> {
    await this.w('UPDATE watch_episodes SET notified_at = $1 WHERE id = $2', [at, id]);
  }

  async closeWatchEpisode(watchId: string, at: number): Promise<void> {
    await this.w('UPDATE watch_episodes SET ended_at = $1 WHERE watch_id = $2 AND ended_at IS NULL', [
      at,
      watchId,
    ]);
  }
}
