// Which snapshots retention removes: one SQL text for both dialects (parameters @name, as
// every query of sql-store.ts). Equal snapshots are those of equal queue digests
// (SnapshotMeta.digest); a run is a job's consecutive equal snapshots in the order taken.
//
// Kept whatever the limits, per job:
// - under the count limit: the newest N, the first snapshot of each of the newest N runs, the
//   ones the hang watch points at (a watched job's verdict evidence and last stored snapshot, an
//   open hang episode's, i.e. the one its notification names) and every snapshot a live share
//   link opens;
// - under the age limit: a live share link's snapshot; and while the job is not ended, its newest
//   snapshot, the first snapshot of its current run and the ones the watch points at.
// So the first snapshot of a hang, and the links printed or sent for it, stay while the job is
// hung; the count limit still bounds a job whose every snapshot differs (each is its own run).

/** 1 where a snapshot starts a run of its job (its digest differs from the one before), else 0. */
const STARTS_RUN = `CASE WHEN LAG(digest) OVER (PARTITION BY job_id ORDER BY taken_at, rowid) = digest
  THEN 0 ELSE 1 END`;

/** Snapshot ids the hang watch points at and live share links open. */
const POINTED_AT = `
  SELECT evidence_snapshot_id FROM watch_jobs WHERE evidence_snapshot_id IS NOT NULL
  UNION SELECT last_snapshot_id FROM watch_jobs WHERE last_snapshot_id IS NOT NULL
  UNION SELECT snapshot_id FROM watch_episodes WHERE ended_at IS NULL AND snapshot_id IS NOT NULL`;
const SHARED = 'SELECT snapshot_id FROM shares WHERE expires_at > @now';

/** Deletes one job's snapshots past the count limit (parameters: jobId, keep, now). */
export const COUNT_RETENTION_SQL = `
    WITH seq AS (
      SELECT id, taken_at, rowid AS r,
        ROW_NUMBER() OVER (ORDER BY taken_at DESC, rowid DESC) AS newest,
        ${STARTS_RUN} AS starts_run
      FROM snapshots WHERE job_id = @jobId
    ),
    run_firsts AS (
      SELECT id FROM seq WHERE starts_run = 1 ORDER BY taken_at DESC, r DESC LIMIT @keep
    )
    DELETE FROM snapshots WHERE job_id = @jobId
      AND id IN (SELECT id FROM seq WHERE newest > @keep)
      AND id NOT IN (SELECT id FROM run_firsts)
      AND id NOT IN (${POINTED_AT})
      AND id NOT IN (${SHARED})`;

/**
 * Deletes the snapshots older than the age limit (parameters: cutoff, now). Only the jobs that
 * have such snapshots are ordered into runs.
 */
export const AGE_RETENTION_SQL = `
    WITH seq AS (
      SELECT id, job_id, taken_at, rowid AS r,
        ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY taken_at DESC, rowid DESC) AS newest,
        ${STARTS_RUN} AS starts_run
      FROM snapshots
      WHERE job_id IN (SELECT DISTINCT job_id FROM snapshots WHERE taken_at < @cutoff)
        AND job_id IN (SELECT id FROM jobs WHERE ended_at IS NULL)
    ),
    current_run AS (
      SELECT id, ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY taken_at DESC, r DESC) AS k
      FROM seq WHERE starts_run = 1
    ),
    live_kept AS (
      SELECT id FROM seq WHERE newest = 1
      UNION SELECT id FROM current_run WHERE k = 1
      UNION SELECT id FROM seq WHERE id IN (${POINTED_AT})
    )
    DELETE FROM snapshots WHERE taken_at < @cutoff
      AND id NOT IN (SELECT id FROM live_kept)
      AND id NOT IN (${SHARED})`;
