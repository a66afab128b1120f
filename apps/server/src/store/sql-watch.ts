// The hang watch's part of the store (apps/server/src/watch/): its policy, watched jobs,
// samples, fleet pages and hang episodes, each query written once for both dialects.
import { type ApiWatchPolicy, SnapshotId, type WatchState } from '@mqd/model';
import type { StoredWatchPolicy, WatchEpisode, WatchJobRecord, WatchSampleRecord } from '../shared/types.js';
import { SqlStoreBase } from './sql-dialect.js';
import type { FleetPage, FleetPageQuery, NewAudit, StorePort, WatchVerdictUpdate } from './store-port.js';
import {
  FLEET_ORDER,
  type FleetSampleRow,
  fleetEntries,
  toWatchJob,
  type WatchJobRow,
} from './store-schema.js';

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

interface SampleRow {
  watch_id: string;
  at: number;
  state: WatchState;
  digest: string | null;
  ranks_read: number;
  cpu: string;
  stop_micros: number;
  snapshot_id: string | null;
}

const END_EPISODES = 'UPDATE watch_episodes SET ended_at = @at WHERE watch_id = @id AND ended_at IS NULL';

export class SqlWatchStore extends SqlStoreBase {
  /** The admins' watch policy, or null before anyone (or the flags at first start) set one. */
  async watchPolicy(): Promise<StoredWatchPolicy | null> {
    const r = await this.d.get<{ policy: string; updated_at: number; updated_by: string }>(
      'SELECT policy, updated_at, updated_by FROM watch_policy WHERE id = 1',
    );
    return r
      ? { policy: JSON.parse(r.policy) as ApiWatchPolicy, updatedAt: r.updated_at, updatedBy: r.updated_by }
      : null;
  }

  /** Replaces the policy; audited in the same transaction. */
  async setWatchPolicy(policy: ApiWatchPolicy, audit: NewAudit): Promise<void> {
    await this.d.transaction(async (x) => {
      await x.run(
        `INSERT INTO watch_policy (id, policy, updated_at, updated_by) VALUES (1, @policy, @at, @by)
         ON CONFLICT (id) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at,
           updated_by = excluded.updated_by`,
        { policy: JSON.stringify(policy), at: this.clock(), by: audit.who },
      );
      await this.insertAudit(x, audit);
    });
  }

  async watchJob(id: string): Promise<WatchJobRecord | null> {
    const r = await this.d.get<WatchJobRow>('SELECT * FROM watch_jobs WHERE id = @id', { id });
    return r ? toWatchJob(r) : null;
  }

  /** Watched jobs of this uid (null = all), live first, then newest first. */
  async watchJobs(uid: number | null): Promise<WatchJobRecord[]> {
    const rows = await this.d.all<WatchJobRow>(
      `SELECT * FROM watch_jobs WHERE (CAST(@uid AS INTEGER) IS NULL OR uid = CAST(@uid AS INTEGER))
       ORDER BY ended_at IS NOT NULL, first_seen DESC LIMIT 10000`,
      { uid },
    );
    return rows.map(toWatchJob);
  }

  /**
   * A job an agent reports: inserted when new, else its info refreshed, last_seen moved and
   * (it was seen again after it was thought ended: an agent restarted) reopened.
   */
  async upsertWatchJob(j: Parameters<StorePort['upsertWatchJob']>[0]): Promise<void> {
    await this.w(
      `INSERT INTO watch_jobs (id, key, uid, job_id, info, first_seen, last_seen)
       VALUES (@id, @key, @uid, @jobId, @info, @at, @at)
       ON CONFLICT (id) DO UPDATE SET info = excluded.info, last_seen = excluded.last_seen,
         job_id = COALESCE(excluded.job_id, watch_jobs.job_id), ended_at = NULL, end_reason = NULL`,
      { id: j.id, key: j.key, uid: j.uid, jobId: j.jobId, info: JSON.stringify(j.info), at: j.at },
    );
  }

  /** The job left every agent's report: ended at `at` (its last sample and snapshot stay). */
  async endWatchJob(id: string, at: number, reason: string | null): Promise<void> {
    await this.d.transaction(async (x) => {
      await x.run(
        'UPDATE watch_jobs SET ended_at = @at, end_reason = @reason WHERE id = @id AND ended_at IS NULL',
        { at, reason, id },
      );
      await x.run(END_EPISODES, { at, id });
    });
  }

  async setWatchEndReason(id: string, reason: string): Promise<void> {
    await this.w('UPDATE watch_jobs SET end_reason = @reason WHERE id = @id', { reason, id });
  }

  /** One sample and the verdict it led to, in one transaction; samples beyond the cap go. */
  async insertWatchSample(sample: WatchSampleRecord, v: WatchVerdictUpdate): Promise<void> {
    const keep = this.retention.maxWatchSamplesPerJob ?? 500;
    await this.d.transaction(async (x) => {
      // The job's row first: two samples of one job go in turn, and the cap below sees both.
      await x.run(
        `UPDATE watch_jobs SET state = @state, since = @since, confidence = @confidence,
           least_progressed = @least, diagnosis = @diagnosis, evidence_snapshot_id = @evidence,
           last_snapshot_id = COALESCE(CAST(@storedId AS TEXT), last_snapshot_id),
           last_digest = COALESCE(CAST(@storedDigest AS TEXT), last_digest),
           last_state_stored = COALESCE(CAST(@storedState AS TEXT), last_state_stored)
         WHERE id = @id`,
        {
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
        },
      );
      await x.run(
        `INSERT INTO watch_samples (watch_id, at, state, digest, ranks_read, cpu, stop_micros, snapshot_id)
         VALUES (@watchId, @at, @state, @digest, @ranksRead, @cpu, @stopMicros, @snapshotId)`,
        {
          watchId: sample.watchId,
          at: sample.at,
          state: sample.state,
          digest: sample.digest,
          ranksRead: sample.ranksRead,
          cpu: JSON.stringify(sample.cpu),
          stopMicros: sample.stopMicros,
          snapshotId: sample.snapshotId,
        },
      );
      if (keep > 0) {
        await x.run(
          `DELETE FROM watch_samples WHERE watch_id = @id AND id NOT IN (
             SELECT id FROM watch_samples WHERE watch_id = @id ORDER BY at DESC, id DESC LIMIT @keep)`,
          { id: sample.watchId, keep },
        );
      }
    });
  }

  /** The job's samples, newest first. */
  async watchSamples(watchId: string, limit: number): Promise<WatchSampleRecord[]> {
    const rows = await this.d.all<SampleRow>(
      `SELECT watch_id, at, state, digest, ranks_read, cpu, stop_micros, snapshot_id FROM watch_samples
       WHERE watch_id = @watchId ORDER BY at DESC, id DESC LIMIT @limit`,
      { watchId, limit },
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

  async countWatchSamples(watchId: string): Promise<number> {
    return (
      (
        await this.d.get<{ n: number }>('SELECT COUNT(*) AS n FROM watch_samples WHERE watch_id = @watchId', {
          watchId,
        })
      )?.n ?? 0
    );
  }

  /** One fleet page with each job's samples count, newest samples and user name: four queries. */
  async fleetPage(q: FleetPageQuery): Promise<FleetPage> {
    const where = '(CAST(@uid AS INTEGER) IS NULL OR (uid = CAST(@uid AS INTEGER) AND uid <> 0))';
    const total =
      (await this.d.get<{ n: number }>(`SELECT COUNT(*) AS n FROM watch_jobs WHERE ${where}`, { uid: q.uid }))
        ?.n ?? 0;
    const jobs = await this.d.all<WatchJobRow>(
      `SELECT * FROM watch_jobs WHERE ${where} ORDER BY ${FLEET_ORDER} LIMIT @limit OFFSET @offset`,
      { uid: q.uid, limit: q.limit, offset: q.offset },
    );
    if (jobs.length === 0) return { total, jobs: [] };
    const samples = await this.d.all<FleetSampleRow>(
      `SELECT watch_id, at, state, snapshot_id, n FROM (
         SELECT watch_id, at, state, snapshot_id,
           ROW_NUMBER() OVER (PARTITION BY watch_id ORDER BY at DESC, id DESC) AS rn,
           COUNT(*) OVER (PARTITION BY watch_id) AS n
         FROM watch_samples WHERE ${this.d.inList('watch_id', 'ids', 'text')}
       ) w WHERE rn <= @history ORDER BY watch_id, rn`,
      { ids: this.d.list(jobs.map((j) => j.id)), history: q.history },
    );
    const users = await this.d.all<{ uid: number; name: string }>(
      `SELECT uid, name FROM users WHERE ${this.d.inList('uid', 'uids', 'integer')} ORDER BY is_admin, id`,
      { uids: this.d.list([...new Set(jobs.map((j) => j.uid))]) },
    );
    return { total, jobs: fleetEntries(jobs, samples, users) };
  }

  /** The job's open hang episode, if any. */
  async openEpisode(watchId: string): Promise<WatchEpisode | null> {
    const r = await this.d.get<EpisodeRow>(
      'SELECT * FROM watch_episodes WHERE watch_id = @watchId AND ended_at IS NULL ORDER BY id DESC LIMIT 1',
      { watchId },
    );
    return r ? toEpisode(r) : null;
  }

  async episodes(watchId: string): Promise<WatchEpisode[]> {
    return (
      await this.d.all<EpisodeRow>('SELECT * FROM watch_episodes WHERE watch_id = @watchId ORDER BY id', {
        watchId,
      })
    ).map(toEpisode);
  }

  /** Opens an episode (the caller checked none is open), with its snapshot and share link. */
  async openWatchEpisode(e: Parameters<StorePort['openWatchEpisode']>[0]): Promise<number> {
    const r = await this.d.write(() =>
      this.d.get<{ id: number }>(
        `INSERT INTO watch_episodes (watch_id, started_at, snapshot_id, share_id)
         VALUES (@watchId, @startedAt, @snapshotId, @shareId) RETURNING id`,
        { watchId: e.watchId, startedAt: e.startedAt, snapshotId: e.snapshotId, shareId: e.shareId },
      ),
    );
    return Number((r as { id: number }).id);
  }

  async episodeNotified(id: number, at: number): Promise<void> {
    await this.w('UPDATE watch_episodes SET notified_at = @at WHERE id = @id', { at, id });
  }

  async closeWatchEpisode(watchId: string, at: number): Promise<void> {
    await this.w(END_EPISODES, { at, id: watchId });
  }
}
