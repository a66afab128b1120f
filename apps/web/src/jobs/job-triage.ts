// What the jobs table says about each job at a glance. The state and since when are the
// server's, decided by the model's one rule (analysis/job-state.ts: the same words as Fleet,
// the API and /metrics); this file loads the rows (every live job, ended ones a page at a time,
// searched on the server), orders them (live hung first, then live, ended apart), filters them
// by the search box while the server's answer is on its way, and adds the last few snapshots
// as good / partly read / failed with, for jobs small enough to download here, the newest
// snapshot's one-line diagnosis (the model's diagnosisLine, the hang watch's words).
import {
  diagnosisLine,
  JOB_STATE_TEXT,
  JOBS_ENDED_PAGE_MAX,
  type JobStateWord,
  jobLabel,
  jobStateRank,
  ok,
  stateSinceText,
} from '@mqd/model';
import type { Api, ApiResult, JobSummary, JobsPage, SnapshotListEntry } from '../api.js';
import { cachedSnapshot, rememberSnapshot } from '../data.js';
import { explanationOf } from '../explanation.js';
import { formatSince } from '../format.js';

/** Past this many ranks the newest snapshot is not downloaded for the table's diagnosis. */
export const MAX_EXPLAIN_RANKS = 4096;
/** Snapshots shown per job. */
export const HISTORY_LENGTH = 8;

export type ReadKind = 'ok' | 'partial' | 'failed';

export interface HistoryDot {
  readonly id: SnapshotListEntry['id'];
  readonly takenAt: string;
  readonly read: ReadKind;
  /** Queues differ from the previous good read (null: no previous good read to compare). */
  readonly changed: boolean | null;
  readonly title: string;
}

export interface Triage {
  /** Oldest first, at most HISTORY_LENGTH. */
  readonly history: readonly HistoryDot[];
  /** The newest snapshot's diagnosis in one line (null: not computed here). */
  readonly line: string | null;
}

export function readKind(m: SnapshotListEntry['meta']): ReadKind {
  if (m.ok === 0) return 'failed';
  return m.errors > 0 || m.missing > 0 ? 'partial' : 'ok';
}

/** The last HISTORY_LENGTH snapshots, oldest first, each compared with the good read before it. */
export function historyOf(list: readonly SnapshotListEntry[]): HistoryDot[] {
  const sorted = [...list].sort((a, b) => a.takenAt.localeCompare(b.takenAt));
  let lastDigest: string | null = null;
  const dots: HistoryDot[] = sorted.map((s) => {
    const m = s.meta;
    const read = readKind(m);
    const changed = read === 'failed' || lastDigest === null ? null : m.digest !== lastDigest;
    if (read !== 'failed') lastDigest = m.digest;
    const what =
      read === 'failed'
        ? `not read (${m.errors} ranks failed, ${m.missing} missing)`
        : read === 'partial'
          ? `${m.ok} of ${m.ranks} ranks read`
          : `all ${m.ranks} ranks read`;
    const moved = changed === null ? '' : changed ? '; queues changed' : '; queues unchanged';
    return { id: s.id, takenAt: s.takenAt, read, changed, title: `${s.takenAt}: ${what}${moved}` };
  });
  return dots.slice(-HISTORY_LENGTH);
}

const ms = (iso: string | null | undefined): number | null => {
  if (iso === null || iso === undefined) return null;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t;
};

/** The state chip's words: "hung since 10:47 PM", "computing since …", "ended". */
export function stateText(
  job: JobSummary,
  now: number = Date.now(),
  timeZone?: string,
  locale?: string,
): string {
  return stateSinceText(
    {
      state: job.state,
      since: ms(job.since),
      pausedUntil: ms(job.pausedUntil),
    },
    (t) => formatSince(t, now, timeZone, locale),
  );
}

/** The word alone (the chip's class and data-verdict use the state itself). */
export const stateWordOf = (s: JobStateWord): string => JOB_STATE_TEXT[s];

/** Does the job match the search box: program, command, user, uid, job id or node (any word, case-insensitive)? */
export function matchesQuery(job: JobSummary, query: string): boolean {
  const words = query
    .toLowerCase()
    .split(/\s+/)
    .filter((w) => w !== '');
  if (words.length === 0) return true;
  const hay = [
    jobLabel(job.command).program,
    job.command,
    job.user ?? '',
    `uid ${job.uid}`,
    job.id,
    job.host,
    ...job.nodes,
  ]
    .join('\n')
    .toLowerCase();
  return words.every((w) => hay.includes(w));
}

/**
 * The rows as the table opens: live jobs by state (hung first: JOB_STATE_WORDS' order), the
 * longest in its state first, then ended jobs apart, in the server's order (newest ended first:
 * they come a page at a time).
 */
export function triageOrder(
  jobs: readonly JobSummary[],
  query = '',
): { live: JobSummary[]; ended: JobSummary[] } {
  const shown = jobs.filter((j) => matchesQuery(j, query));
  const since = (j: JobSummary) => ms(j.since) ?? Number.POSITIVE_INFINITY;
  const live = shown
    .filter((j) => j.state !== 'ended')
    .sort(
      (a, b) =>
        jobStateRank(a.state) - jobStateRank(b.state) || since(a) - since(b) || a.id.localeCompare(b.id),
    );
  const ended = shown.filter((j) => j.state === 'ended');
  return { live, ended };
}

/** Ended jobs per page the table asks the server for, and per "Show more ended jobs". */
export const ENDED_PAGE = 100;

/**
 * Every live job and the newest `endedWanted` ended ones matching `query`, searched and paged on
 * the server (pages of at most JOBS_ENDED_PAGE_MAX), each job once.
 */
export async function loadJobs(
  api: Api,
  query: string,
  endedWanted: number,
  signal?: AbortSignal,
): Promise<ApiResult<JobsPage>> {
  const q = query.trim() === '' ? {} : { q: query };
  const want = Math.max(1, endedWanted);
  const first = await api.jobsPage(
    { endedLimit: Math.min(want, JOBS_ENDED_PAGE_MAX), endedOffset: 0, ...q },
    signal,
  );
  if (!first.ok) return first;
  const byId = new Map(first.value.jobs.map((j) => [j.id, j]));
  let loaded = first.value.jobs.filter((j) => j.state === 'ended').length;
  let total = first.value.endedTotal;
  while (loaded < want && loaded < total) {
    const next = await api.jobsPage(
      { endedLimit: Math.min(want - loaded, JOBS_ENDED_PAGE_MAX), endedOffset: loaded, ...q },
      signal,
    );
    if (!next.ok) return next;
    const ended = next.value.jobs.filter((j) => j.state === 'ended');
    if (ended.length === 0) break;
    for (const j of ended) byId.set(j.id, j);
    loaded += ended.length;
    total = next.value.endedTotal;
  }
  return ok({ jobs: [...byId.values()], endedTotal: total, endedOffset: 0 });
}

/** Loads a job's snapshot list and, when small enough, the newest snapshot's diagnosis line. */
export async function loadTriage(api: Api, job: JobSummary, signal: AbortSignal): Promise<ApiResult<Triage>> {
  const list = await api.snapshots(job.id, signal);
  if (!list.ok) return list;
  const history = historyOf(list.value);
  const newest = [...list.value].sort((a, b) => b.takenAt.localeCompare(a.takenAt))[0];
  let line: string | null = null;
  if (
    newest &&
    readKind(newest.meta) !== 'failed' &&
    newest.meta.ranks <= MAX_EXPLAIN_RANKS &&
    job.state !== 'ended'
  ) {
    let snap = cachedSnapshot(newest.id);
    if (!snap) {
      const got = await api.snapshot(newest.id, signal);
      // No diagnosis is not an error of the list: the row shows the server's reason.
      if (got.ok) {
        snap = { takenAt: got.value.takenAt, jobId: got.value.jobId, snapshot: got.value.snapshot };
        rememberSnapshot(newest.id, snap);
      }
    }
    const e = snap ? explanationOf(snap.snapshot) : null;
    if (e && !('failed' in e)) line = diagnosisLine(e);
  }
  return ok({ history, line });
}
