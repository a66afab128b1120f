// What the jobs table says about each job at a glance: the last verdict as a chip and the last
// few snapshots as good / partly read / failed. The server's job list carries the newest
// snapshot's counts and queue digest but no verdict, so the verdict is the model's
// (explainSnapshot, through explanationOf) on the newest snapshot, fetched for jobs small enough
// to download here; bigger jobs fall back to the digests (nothing moved between two reads).
import { assertUnreachable, ok, type Verdict } from '@mqd/model';
import type { Api, ApiResult, JobSummary, SnapshotListEntry } from '../api.js';
import { cachedSnapshot, rememberSnapshot } from '../data.js';
import { explanationOf } from '../explanation.js';

/** Past this many ranks the newest snapshot is not downloaded for the table's chip. */
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

export type ChipKind =
  | 'deadlock'
  | 'collective-hang'
  | 'openmp-hang'
  | 'stuck'
  | 'hung'
  | 'progressing'
  | 'idle'
  | 'not-read'
  | 'ended'
  | 'no-snapshot'
  | 'running';

export interface Triage {
  readonly chip: ChipKind;
  /** Why the chip says so (its title). */
  readonly why: string;
  /** Oldest first, at most HISTORY_LENGTH. */
  readonly history: readonly HistoryDot[];
}

export const CHIP_TEXT: Record<ChipKind, string> = {
  deadlock: 'deadlock',
  'collective-hang': 'hung in a collective',
  'openmp-hang': 'OpenMP deadlock',
  // The banner's word for the model's `stuck` verdict (its headline "Stuck"), in the chips' lower case.
  stuck: 'stuck',
  hung: 'hung',
  progressing: 'progressing',
  idle: 'idle',
  'not-read': 'last read failed',
  ended: 'ended',
  'no-snapshot': 'no snapshot yet',
  running: 'running',
};

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

/**
 * The chip from the model's verdict on the newest good snapshot (null when not computed) and the
 * history: a deadlock stays a deadlock; otherwise moved queues say "progressing", equal ones "hung".
 */
export function triageOf(job: JobSummary, history: readonly HistoryDot[], verdict: Verdict | null): Triage {
  const last = history.at(-1);
  if (job.state === 'ended') return { chip: 'ended', why: 'The job has ended', history };
  if (last === undefined) return { chip: 'no-snapshot', why: 'No snapshot of this job yet', history };
  if (last.read === 'failed')
    return { chip: 'not-read', why: `The newest snapshot read no rank: ${last.title}`, history };
  const moved = last.changed;
  const fromDigests = (): Triage =>
    moved === true
      ? { chip: 'progressing', why: 'The queues changed since the previous snapshot', history }
      : moved === false
        ? { chip: 'hung', why: 'The queues did not change since the previous snapshot', history }
        : job.state === 'looks-hung'
          ? { chip: 'hung', why: 'The server saw no change across its last snapshots', history }
          : { chip: 'running', why: 'One snapshot only: take another to see whether it moves', history };
  if (verdict === null) return fromDigests();
  switch (verdict) {
    case 'deadlock':
    case 'collective-hang':
    case 'openmp-hang':
      return { chip: verdict, why: 'The diagnosis of the newest snapshot', history };
    case 'progressing':
      return { chip: 'progressing', why: 'The diagnosis of the newest snapshot', history };
    case 'idle':
      return moved === true ? fromDigests() : { chip: 'idle', why: 'Nothing is queued', history };
    case 'stuck':
      // The model saw one snapshot only: queues that moved since the one before say it is not stuck.
      return moved === true
        ? fromDigests()
        : { chip: 'stuck', why: 'The diagnosis of the newest snapshot: every rank is blocked', history };
    case 'unknown':
      return fromDigests();
    default:
      return assertUnreachable(verdict);
  }
}

/** Loads a job's snapshot list and, when small enough, the newest snapshot's verdict. */
export async function loadTriage(api: Api, job: JobSummary, signal: AbortSignal): Promise<ApiResult<Triage>> {
  const list = await api.snapshots(job.id, signal);
  if (!list.ok) return list;
  const history = historyOf(list.value);
  const newest = [...list.value].sort((a, b) => b.takenAt.localeCompare(a.takenAt))[0];
  let verdict: Verdict | null = null;
  if (
    newest &&
    readKind(newest.meta) !== 'failed' &&
    newest.meta.ranks <= MAX_EXPLAIN_RANKS &&
    job.state !== 'ended'
  ) {
    let snap = cachedSnapshot(newest.id);
    if (!snap) {
      const got = await api.snapshot(newest.id, signal);
      // No verdict is not an error of the list: the chip falls back to the digests.
      if (got.ok) {
        snap = { takenAt: got.value.takenAt, jobId: got.value.jobId, snapshot: got.value.snapshot };
        rememberSnapshot(newest.id, snap);
      }
    }
    const e = snap ? explanationOf(snap.snapshot) : null;
    if (e && !('failed' in e)) verdict = e.verdict;
  }
  return ok(triageOf(job, history, verdict));
}
