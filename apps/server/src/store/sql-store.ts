// The store, written once for both dialects: every query and every row mapping is here (the
// hang watch's in sql-watch.ts), run through a Dialect (sql-dialect.ts; dialect-sqlite.ts,
// dialect-pg.ts) that says how its database takes them. Queries name their parameters @name;
// a dialect translates that to its own placeholders.
// The SQL is the part both databases read alike (CAST(@x AS TEXT) where PostgreSQL must know a
// parameter's type, ON CONFLICT ... DO NOTHING / DO UPDATE, RETURNING); what only one of them
// has (a list parameter, row locks, advisory locks, how a refused write is told) is the
// dialect's.
//
// Each "read, decide, write" that must be atomic is one transaction: on SQLite nothing else
// runs on the connection meanwhile; on PostgreSQL what was read is locked (d.forUpdate /
// d.forShare, or d.lockName for a row that does not exist yet) and the transaction is retried
// on a serialization failure or deadlock.
import { JobId, type SnapshotId } from '@mqd/model';
import type {
  AuditAction,
  AuditEntry,
  JobRecord,
  ShareRecord,
  ShareViewer,
  SnapshotMeta,
  User,
} from '../shared/types.js';
import type { Executor } from './sql-dialect.js';
import { SqlWatchStore } from './sql-watch.js';
import type { NewAudit, NewSnapshot, SnapshotRequestKey, StorePort } from './store-port.js';
import { AGE_RETENTION_SQL, COUNT_RETENTION_SQL } from './store-retention.js';
import {
  type JobRow,
  META_COLUMNS,
  type ShareRow,
  type SnapshotRow,
  toJob,
  toMeta,
  toShareRecord,
  toUser,
  type UserRow,
  unreadableColumn,
} from './store-schema.js';

interface AuditRow {
  id: number;
  at: number;
  who: string;
  action: AuditAction;
  job_id: string | null;
  snapshot_id: string | null;
  detail: string;
}

const USER_COLUMNS = 'id, name, uid, is_admin';
const SHARE_COLUMNS = 's.id, s.snapshot_id, s.created_by, s.created_at, s.expires_at, s.made_by';
const INSERT_SESSION =
  'INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES (@hash, @userId, @now, @expiresAt)';

type Attach = { ok: true; job: JobRecord } | { ok: false; existing: JobRecord };

/** The StorePort over a Dialect: SqliteStore and PgStore are this class on theirs. */
export class SqlStore extends SqlWatchStore implements StorePort {
  // --- users and sessions

  /** Creates the user, or updates uid/admin (and the token when given) of an existing name. */
  async upsertUser(u: Parameters<StorePort['upsertUser']>[0]): Promise<User> {
    const row = await this.d.write(() =>
      this.d.get<UserRow>(
        `INSERT INTO users (name, uid, is_admin, token_hash, token_expires_at, created_at)
         VALUES (@name, @uid, @admin, @tokenHash, @expires, @now)
         ON CONFLICT (name) DO UPDATE SET uid = excluded.uid, is_admin = excluded.is_admin,
           token_hash = COALESCE(excluded.token_hash, users.token_hash),
           token_expires_at = CASE WHEN excluded.token_hash IS NULL THEN users.token_expires_at
                                   ELSE excluded.token_expires_at END
         RETURNING ${USER_COLUMNS}`,
        {
          name: u.name,
          uid: u.uid,
          admin: u.admin ? 1 : 0,
          tokenHash: u.tokenHash,
          expires: u.tokenExpiresAt ?? null,
          now: this.clock(),
        },
      ),
    );
    return toUser(row as UserRow);
  }

  async userByTokenHash(hash: string): Promise<User | null> {
    const r = await this.loginToken(hash);
    return r === null || r === 'expired' ? null : r;
  }

  /** The user of a live login token; 'expired' when it is past its expiry. */
  loginToken(hash: string): Promise<User | 'expired' | null> {
    return this.loginTokenOn(this.d, hash, '');
  }

  private async loginTokenOn(x: Executor, hash: string, lock: string): Promise<User | 'expired' | null> {
    const r = await x.get<UserRow & { token_expires_at: number | null }>(
      `SELECT ${USER_COLUMNS}, token_expires_at FROM users WHERE token_hash = @hash${lock}`,
      { hash },
    );
    if (!r) return null;
    if (r.token_expires_at !== null && r.token_expires_at <= this.clock()) return 'expired';
    return toUser(r);
  }

  /** Revokes the user's login token and ends every session made with it. */
  revokeToken(name: string, audit: NewAudit): Promise<boolean> {
    return this.d.transaction(async (x) => {
      const u = await x.get<{ id: number }>(`SELECT id FROM users WHERE name = @name${this.d.forUpdate}`, {
        name,
      });
      if (!u) return false;
      await x.run('UPDATE users SET token_hash = NULL WHERE id = @id', { id: u.id });
      await x.run('DELETE FROM sessions WHERE user_id = @id', { id: u.id });
      await this.insertAudit(x, audit);
      return true;
    });
  }

  /** The name of the (first, non-admin first) user with this uid, for the fleet and notices. */
  async userNameOfUid(uid: number): Promise<string | null> {
    const r = await this.d.get<{ name: string }>(
      'SELECT name FROM users WHERE uid = @uid ORDER BY is_admin, id LIMIT 1',
      { uid },
    );
    return r?.name ?? null;
  }

  async userByName(name: string): Promise<User | null> {
    const r = await this.d.get<UserRow>(`SELECT ${USER_COLUMNS} FROM users WHERE name = @name`, { name });
    return r ? toUser(r) : null;
  }

  async createSession(tokenHash: string, userId: number, expiresAt: number): Promise<void> {
    await this.w(INSERT_SESSION, { hash: tokenHash, userId, now: this.clock(), expiresAt });
  }

  /**
   * A login: the session is made only while the login token is live, in one transaction with
   * the check (a token revoked meanwhile makes no session; on PostgreSQL the revocation's
   * UPDATE waits for the shared lock, then ends the session too).
   */
  loginSession(
    loginTokenHash: string,
    sessionHash: string,
    expiresAt: number,
  ): Promise<User | 'expired' | null> {
    return this.d.transaction(async (x) => {
      const r = await this.loginTokenOn(x, loginTokenHash, this.d.forShare);
      if (r === null || r === 'expired') return r;
      await x.run(INSERT_SESSION, { hash: sessionHash, userId: r.id, now: this.clock(), expiresAt });
      return r;
    });
  }

  async userBySession(tokenHash: string): Promise<User | null> {
    // A session dies with the login token it was made from (expiry here, revocation deletes it).
    const r = await this.d.get<UserRow>(
      `SELECT u.id, u.name, u.uid, u.is_admin FROM sessions s JOIN users u ON u.id = s.user_id
       WHERE s.token_hash = @hash AND s.expires_at > @now
         AND (u.token_expires_at IS NULL OR u.token_expires_at > @now)`,
      { hash: tokenHash, now: this.clock() },
    );
    return r ? toUser(r) : null;
  }

  async deleteSession(tokenHash: string): Promise<void> {
    await this.w('DELETE FROM sessions WHERE token_hash = @hash', { hash: tokenHash });
  }

  // --- jobs

  /** The not-ended job of this starter process; startTime null: any start time. */
  findJob(host: string, starterPid: number, starterStartTime: string | null): Promise<JobRecord | null> {
    return this.findJobOn(this.d, host, starterPid, starterStartTime);
  }

  private async findJobOn(
    x: Executor,
    host: string,
    pid: number,
    startTime: string | null,
  ): Promise<JobRecord | null> {
    const r = await x.get<JobRow>(
      `SELECT * FROM jobs WHERE host = @host AND starter_pid = @pid
         AND (CAST(@startTime AS TEXT) IS NULL OR starter_start_time = CAST(@startTime AS TEXT))
         AND ended_at IS NULL AND cores_dir IS NULL ORDER BY created_at DESC LIMIT 1`,
      { host, pid, startTime },
    );
    return r ? toJob(r) : null;
  }

  /** The job of the cores in this directory on this host (real path), if attached already. */
  findCoreJob(host: string, coresDir: string): Promise<JobRecord | null> {
    return this.findCoreJobOn(this.d, host, coresDir);
  }

  private async findCoreJobOn(x: Executor, host: string, dir: string): Promise<JobRecord | null> {
    const r = await x.get<JobRow>(
      'SELECT * FROM jobs WHERE host = @host AND cores_dir = @dir ORDER BY created_at DESC LIMIT 1',
      { host, dir },
    );
    return r ? toJob(r) : null;
  }

  /** Not-ended jobs on (host, pid) whose starter was another process: it is gone, so are they. */
  endReusedJobs(host: string, starterPid: number, starterStartTime: string, at: number): Promise<number> {
    return this.d.write(() => this.endReusedJobsOn(this.d, host, starterPid, starterStartTime, at));
  }

  private endReusedJobsOn(x: Executor, host: string, pid: number, startTime: string, at: number) {
    return x.run(
      `UPDATE jobs SET ended_at = @at WHERE host = @host AND starter_pid = @pid
         AND starter_start_time != @startTime AND ended_at IS NULL AND cores_dir IS NULL`,
      { at, host, pid, startTime },
    );
  }

  /** Inserts a job, or replaces the layout of the job with this id; audited in the same transaction. */
  async saveJob(job: JobRecord, audit: NewAudit): Promise<void> {
    await this.d.transaction((x) => this.saveJobOn(x, job, audit));
  }

  private async saveJobOn(x: Executor, job: JobRecord, audit: NewAudit): Promise<void> {
    await x.run(
      `INSERT INTO jobs (id, host, starter_pid, starter_start_time, uid, command, method, rank_count, layout,
         created_at, created_by, ended_at, cores_dir)
       VALUES (@id, @host, @starterPid, @starterStartTime, @uid, @command, @method, @rankCount, @layout,
         @createdAt, @createdBy, @endedAt, @coresDir)
       ON CONFLICT (id) DO UPDATE SET command = excluded.command, method = excluded.method,
         rank_count = excluded.rank_count, layout = excluded.layout, ended_at = excluded.ended_at
       WHERE jobs.uid = excluded.uid AND jobs.starter_start_time = excluded.starter_start_time`,
      {
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
      },
    );
    await this.insertAudit(x, audit);
  }

  /** An attach's find-or-create, in one transaction (StorePort.attachJob says what it does). */
  attachJob(job: JobRecord, audit: Omit<NewAudit, 'jobId'>): Promise<Attach> {
    return this.d.transaction(async (x): Promise<Attach> => {
      // Two instances attaching the same new job at once: the second waits here, then finds
      // the first's row.
      await this.d.lockName(
        x,
        JSON.stringify(
          job.coresDir !== undefined
            ? ['cores', job.host, job.coresDir]
            : ['starter', job.host, job.starterPid],
        ),
      );
      let existing: JobRecord | null;
      if (job.coresDir !== undefined) existing = await this.findCoreJobOn(x, job.host, job.coresDir);
      else {
        await this.endReusedJobsOn(x, job.host, job.starterPid, job.starterStartTime, this.clock());
        existing = await this.findJobOn(x, job.host, job.starterPid, job.starterStartTime);
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
      await this.saveJobOn(x, saved, { ...audit, jobId: saved.id });
      return { ok: true, job: saved };
    });
  }

  async markJobEnded(id: JobId, at: number): Promise<void> {
    await this.w('UPDATE jobs SET ended_at = @at WHERE id = @id AND ended_at IS NULL', { at, id });
  }

  async job(id: string): Promise<JobRecord | null> {
    const r = await this.d.get<JobRow>('SELECT * FROM jobs WHERE id = @id', { id });
    return r ? toJob(r) : null;
  }

  /** Jobs of this uid (null = every job), newest first. */
  async jobs(uid: number | null): Promise<JobRecord[]> {
    const rows =
      uid === null
        ? await this.d.all<JobRow>('SELECT * FROM jobs ORDER BY created_at DESC')
        : await this.d.all<JobRow>('SELECT * FROM jobs WHERE uid = @uid ORDER BY created_at DESC', { uid });
    return rows.map(toJob);
  }

  // --- snapshots

  /** Stores a snapshot, the request keys it answers, its job's retention and its audit row: all or nothing. */
  insertSnapshot(
    s: NewSnapshot,
    audit: NewAudit,
    requests: readonly SnapshotRequestKey[] = [],
  ): Promise<{ removed: number }> {
    const m = s.meta;
    return this.d.transaction(async (x) => {
      // One job's inserts and retention in turn (its row locked), so "keep the newest N" holds
      // when two instances store snapshots of one job at once.
      await this.d.lockRow(x, 'jobs', m.jobId);
      await x.run(
        `INSERT INTO snapshots (${META_COLUMNS}, data) VALUES (@id, @jobId, @takenAt, @durationMicros, @ranks,
           @ok, @errors, @missing, @pendingSends, @pendingReceives, @unexpected, @digest, @missingRanks,
           @createdBy, @bytes, @storedBytes, @unreadable, @data)`,
        {
          id: m.id,
          jobId: m.jobId,
          takenAt: m.takenAt,
          durationMicros: m.durationMicros,
          ranks: m.ranks,
          ok: m.ok,
          errors: m.errors,
          missing: m.missing,
          pendingSends: m.pendingSends,
          pendingReceives: m.pendingReceives,
          unexpected: m.unexpected,
          digest: m.digest,
          missingRanks: JSON.stringify(m.missingRanks),
          createdBy: m.createdBy,
          bytes: m.bytes,
          storedBytes: m.storedBytes,
          unreadable: unreadableColumn(m.unreadable),
          data: s.gz,
        },
      );
      for (const r of requests) await this.insertRequest(x, r, m.id);
      await this.insertAudit(x, audit);
      return { removed: await this.applyRetention(x, m.jobId) };
    });
  }

  /** Remembers that this request key got this snapshot (a request that joined one running). */
  async rememberRequest(r: SnapshotRequestKey, snapshotId: SnapshotId): Promise<void> {
    await this.d.write(() => this.insertRequest(this.d, r, snapshotId));
  }

  /** The first snapshot a key got stays its answer. */
  private async insertRequest(x: Executor, r: SnapshotRequestKey, snapshotId: string): Promise<void> {
    await x.run(
      `INSERT INTO snapshot_requests (user_id, request_key, snapshot_id, created_at)
       VALUES (@userId, @key, @snapshotId, @now) ON CONFLICT (user_id, request_key) DO NOTHING`,
      { userId: r.userId, key: r.key, snapshotId, now: this.clock() },
    );
  }

  /** The snapshot stored for this request key, while it is kept. */
  async requestedSnapshot(r: SnapshotRequestKey): Promise<SnapshotMeta | null> {
    const row = await this.d.get<SnapshotRow>(
      `SELECT ${META_COLUMNS} FROM snapshots WHERE id =
         (SELECT snapshot_id FROM snapshot_requests WHERE user_id = @userId AND request_key = @key)`,
      { userId: r.userId, key: r.key },
    );
    return row ? toMeta(row) : null;
  }

  /** Retention of one job's snapshots after an insert (store-retention.ts says what stays). */
  private async applyRetention(x: Executor, jobId: string): Promise<number> {
    let removed = 0;
    const { maxSnapshotsPerJob, maxAgeSeconds } = this.retention;
    const now = this.clock();
    if (maxSnapshotsPerJob > 0)
      removed += await x.run(COUNT_RETENTION_SQL, { jobId, keep: maxSnapshotsPerJob, now });
    if (maxAgeSeconds > 0) removed += await this.applyAgeLimit(x, now);
    return removed;
  }

  private applyAgeLimit(x: Executor, now: number): Promise<number> {
    return x.run(AGE_RETENTION_SQL, { cutoff: now - this.retention.maxAgeSeconds * 1000, now });
  }

  /** Runs the age part of retention now (also done on every insert), and drops dead sessions. */
  sweep(): Promise<number> {
    return this.d.transaction(async (x) => {
      await x.run('DELETE FROM sessions WHERE expires_at <= @now', { now: this.clock() });
      const auditAge = this.retention.auditAgeSeconds ?? 0;
      if (auditAge > 0) {
        const before = this.clock() - auditAge * 1000;
        await x.run('DELETE FROM audit WHERE at < @before', { before });
        // Ended jobs go with their snapshots and shares (ON DELETE CASCADE).
        await x.run('DELETE FROM jobs WHERE ended_at IS NOT NULL AND ended_at < @before', { before });
        // Ended watched jobs go with their samples and episodes (ON DELETE CASCADE).
        await x.run('DELETE FROM watch_jobs WHERE ended_at IS NOT NULL AND ended_at < @before', { before });
      }
      if (this.retention.maxAgeSeconds <= 0) return 0;
      await x.run('DELETE FROM watch_samples WHERE at < @cutoff', {
        cutoff: this.clock() - this.retention.maxAgeSeconds * 1000,
      });
      return this.applyAgeLimit(x, this.clock());
    });
  }

  async snapshotMeta(id: string): Promise<SnapshotMeta | null> {
    const r = await this.d.get<SnapshotRow>(`SELECT ${META_COLUMNS} FROM snapshots WHERE id = @id`, { id });
    return r ? toMeta(r) : null;
  }

  async snapshotData(id: string): Promise<Buffer | null> {
    return (
      (await this.d.get<{ data: Buffer }>('SELECT data FROM snapshots WHERE id = @id', { id }))?.data ?? null
    );
  }

  async snapshotOverview(id: string): Promise<Buffer | null> {
    const r = await this.d.get<{ body: Buffer }>(
      'SELECT body FROM snapshot_overviews WHERE snapshot_id = @id',
      {
        id,
      },
    );
    return r?.body ?? null;
  }

  async putSnapshotOverview(id: string, body: Buffer): Promise<boolean> {
    // Only for a snapshot still stored (the SELECT finds none once retention removed it; on
    // PostgreSQL a concurrent delete waits on the foreign key's row lock); the first one stays.
    const n = await this.w(
      `INSERT INTO snapshot_overviews (snapshot_id, body) SELECT id, @body FROM snapshots WHERE id = @id
       ON CONFLICT (snapshot_id) DO NOTHING`,
      { body, id },
    );
    return n > 0;
  }

  /** History of a job, newest first. */
  async snapshots(jobId: string, limit: number): Promise<SnapshotMeta[]> {
    return (
      await this.d.all<SnapshotRow>(
        `SELECT ${META_COLUMNS} FROM snapshots WHERE job_id = @jobId ORDER BY taken_at DESC, rowid DESC LIMIT @limit`,
        { jobId, limit },
      )
    ).map(toMeta);
  }

  /** The newest `limit` snapshots of each of these jobs, newest first: one query for them all. */
  async snapshotsOfJobs(jobIds: readonly string[], limit: number): Promise<Map<string, SnapshotMeta[]>> {
    const out = new Map<string, SnapshotMeta[]>(jobIds.map((id) => [id, []]));
    if (jobIds.length === 0) return out;
    const rows = await this.d.all<SnapshotRow>(
      `SELECT ${META_COLUMNS} FROM (
         SELECT ${META_COLUMNS},
           ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY taken_at DESC, rowid DESC) AS rn
         FROM snapshots WHERE ${this.d.inList('job_id', 'ids', 'text')}
       ) s WHERE rn <= @limit ORDER BY job_id, rn`,
      { ids: this.d.list([...new Set(jobIds)]), limit },
    );
    for (const r of rows) {
      const m = toMeta(r);
      out.get(m.jobId)?.push(m);
    }
    return out;
  }

  async removedSnapshotJob(id: string): Promise<JobId | null> {
    const r = await this.d.get<{ job_id: string }>(
      `SELECT job_id FROM audit WHERE snapshot_id = @id AND action = 'snapshot' AND job_id IS NOT NULL
         AND NOT EXISTS (SELECT 1 FROM snapshots WHERE id = @id) LIMIT 1`,
      { id },
    );
    return r ? JobId(r.job_id) : null;
  }

  async countSnapshots(jobId?: string): Promise<number> {
    const r =
      jobId === undefined
        ? await this.d.get<{ n: number }>('SELECT COUNT(*) AS n FROM snapshots')
        : await this.d.get<{ n: number }>('SELECT COUNT(*) AS n FROM snapshots WHERE job_id = @jobId', {
            jobId,
          });
    return r?.n ?? 0;
  }

  // --- shares

  async insertShare(share: ShareRecord, audit: NewAudit): Promise<void> {
    await this.d.transaction(async (x) => {
      await x.run(
        `INSERT INTO shares (id, snapshot_id, created_by, created_at, expires_at, made_by)
         VALUES (@id, @snapshotId, @createdBy, @createdAt, @expiresAt, @madeBy)`,
        {
          id: share.id,
          snapshotId: share.snapshotId,
          createdBy: share.createdBy,
          createdAt: share.createdAt,
          expiresAt: share.expiresAt,
          madeBy: share.madeBy ?? null,
        },
      );
      await this.insertAudit(x, audit);
    });
  }

  /**
   * Live shares `viewer` may list (null = everyone's), newest first: the ones the user made
   * (never a system-made one by its name), and the system's of jobs of the user's uid but 0.
   */
  async liveShares(viewer: ShareViewer | null): Promise<ShareRecord[]> {
    const rows = await this.d.all<ShareRow>(
      `SELECT ${SHARE_COLUMNS} FROM shares s
       WHERE s.expires_at > @now AND (@scoped = 0
         OR (s.made_by IS NULL AND s.created_by = CAST(@name AS TEXT))
         OR (s.made_by IS NOT NULL AND CAST(@uid AS INTEGER) IS NOT NULL AND CAST(@uid AS INTEGER) <> 0
           AND EXISTS (SELECT 1 FROM snapshots n JOIN jobs j ON j.id = n.job_id
                       WHERE n.id = s.snapshot_id AND j.uid = CAST(@uid AS INTEGER))))
       ORDER BY s.created_at DESC LIMIT 1000`,
      {
        now: this.clock(),
        scoped: viewer === null ? 0 : 1,
        name: viewer?.name ?? null,
        uid: viewer?.uid ?? null,
      },
    );
    return rows.map(toShareRecord);
  }

  async revokeShare(id: string, audit: NewAudit): Promise<void> {
    await this.d.transaction(async (x) => {
      await x.run('DELETE FROM shares WHERE id = @id', { id });
      await this.insertAudit(x, audit);
    });
  }

  /** A share that has not expired; expired ones are as good as absent. */
  async liveShare(id: string): Promise<ShareRecord | null> {
    const r = await this.d.get<ShareRow>(
      `SELECT ${SHARE_COLUMNS} FROM shares s WHERE s.id = @id AND s.expires_at > @now`,
      { id, now: this.clock() },
    );
    return r ? toShareRecord(r) : null;
  }

  // --- audit

  async audit(a: NewAudit): Promise<void> {
    await this.d.write(() => this.insertAudit(this.d, a));
  }

  /** Newest first; `before` pages back by id. */
  async activity(limit: number, before?: number): Promise<AuditEntry[]> {
    const rows = await this.d.all<AuditRow>(
      'SELECT id, at, who, action, job_id, snapshot_id, detail FROM audit WHERE id < @before ORDER BY id DESC LIMIT @limit',
      { before: before ?? Number.MAX_SAFE_INTEGER, limit },
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

  // --- cluster leases

  async tryLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    const now = this.clock();
    // One statement: the insert, or the update of a free, expired or own lease, is atomic
    // against another instance's (ON CONFLICT takes the row lock).
    const rows = await this.d.write(() =>
      this.d.all(
        `INSERT INTO leases (name, holder, expires_at) VALUES (@name, @holder, @expires)
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
         WHERE leases.holder = excluded.holder OR leases.expires_at <= @now
         RETURNING holder`,
        { name, holder, expires: now + ttlMs, now },
      ),
    );
    return rows.length > 0;
  }
}
