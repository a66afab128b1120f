// One job's state in one vocabulary, and since when: the words the banner, Jobs, Fleet, the
// API, /metrics and the hang watch's notifications all show. The input is the job's snapshots
// over time (their queue digests: equal = nothing moved, by mpi/operation.ts's rule) and, when
// known, the hang watch's verdict (watch.ts, which also sees the ranks' CPU counters) and the
// newest snapshot's diagnosis.
//
// "Since" is the time of the first snapshot of the current run of equal states, whatever the
// window a view holds: for a job that does not move, the first snapshot of the run of equal
// digests; for a moving one, the first of the run of snapshots that each differ from the one
// before. A snapshot in which no rank was read is a gap: it neither ends nor starts a run.
import { JOB_STATES, type JobState } from '../api-spec.js';
import type { WatchConfidence, WatchState } from '../watch-spec.js';
import type { Verdict } from './explain-types.js';

/** The one vocabulary: the hang watch's states, and `ended` for a job that is gone (the API's JobState). */
export type JobStateWord = JobState;

export const JOB_STATE_WORDS: readonly JobStateWord[] = JOB_STATES;

/** The API's words are the watch's and `ended`, neither more nor fewer. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
const sameWords: Same<JobState, WatchState | 'ended'> = true;
void sameWords;

/** What a person reads for each state (lower case; a view capitalises at a sentence's start). */
export const JOB_STATE_TEXT: Record<JobStateWord, string> = {
  hung: 'hung',
  waiting: 'waiting',
  progressing: 'progressing',
  computing: 'computing',
  unknown: 'not known yet',
  ended: 'ended',
};

/** Triage order: hung first, ended last. */
export function jobStateRank(s: JobStateWord): number {
  return JOB_STATE_WORDS.indexOf(s);
}

/**
 * The state word for the diagnosis of one snapshot on its own (explainSnapshot's verdict):
 * a proven deadlock, collective or OpenMP hang, and ranks all blocked ("stuck") are `hung`;
 * nothing queued is `computing` (no rank waits in a visible MPI operation).
 */
export function stateOfVerdict(v: Verdict): JobStateWord {
  switch (v) {
    case 'deadlock':
    case 'collective-hang':
    case 'openmp-hang':
    case 'stuck':
      return 'hung';
    case 'progressing':
      return 'progressing';
    case 'idle':
      return 'computing';
    default:
      return 'unknown';
  }
}

/** One snapshot of the job as the state needs it. */
export interface JobStateStep {
  /** Epoch ms. */
  readonly at: number;
  /** The queues' digest (equal = nothing moved). */
  readonly digest: string;
  /** Ranks in the snapshot, and of those read (state ok). */
  readonly ranks: number;
  readonly read: number;
  /** Operations the ranks wait on (pending sends + receives; unexpected messages wait on no one). */
  readonly pending: number;
}

/** The hang watch's verdict on the job, when it watches it. */
export interface JobStateWatch {
  readonly state: WatchState;
  /** Epoch ms: when the watch's state began (null: not known). */
  readonly since: number | null;
  readonly diagnosis: string;
  readonly confidence: WatchConfidence | null;
  /** The watch is out of stop budget: its last verdict holds until this time (epoch ms). */
  readonly pausedUntil?: number | null;
}

export interface JobStateInput {
  /** The job's snapshots, oldest first (any order is sorted by time). */
  readonly steps: readonly JobStateStep[];
  readonly ended: boolean;
  /** Equal, fully read snapshots with something pending before a job is hung (>= 2). */
  readonly hungAfter: number;
  readonly watch?: JobStateWatch | null;
  /**
   * The newest snapshot's one-line diagnosis, when known: it words the answer, it does not
   * decide the state (the server and a browser decide alike, with or without it).
   */
  readonly diagnosis?: string | null;
}

export interface JobStateAnswer {
  readonly state: JobStateWord;
  /** Epoch ms: the first snapshot of the current run of equal states (null: no snapshot read). */
  readonly since: number | null;
  /** Snapshots from `since` to the newest, gaps included. */
  readonly sinceSnapshots: number;
  /** Epoch ms: the first snapshot of the current run of equal digests (null: none read). */
  readonly unchangedSince: number | null;
  /** Snapshots in that run, gaps included (1: the newest differs from the one before). */
  readonly unchangedSnapshots: number;
  /** Why this state, one sentence. */
  readonly reason: string;
  /** The one-line diagnosis (the watch's or the newest snapshot's), else the reason. */
  readonly diagnosis: string;
  readonly confidence: WatchConfidence | null;
  /** Set while the hang watch's sampling is paused by its stop budget (epoch ms). */
  readonly pausedUntil: number | null;
}

interface Runs {
  /** Index (into the sorted steps) of the first read step of the equal run, -1: none read. */
  readonly equalFrom: number;
  /** Read steps in the equal run. */
  readonly equalReads: number;
  /** Every read step of the equal run had every rank read. */
  readonly equalComplete: boolean;
  /** Index of the first step of the run of changes ending at the newest read step. */
  readonly movingFrom: number;
  /** Read steps in all (an earlier read exists when > equalReads). */
  readonly reads: number;
  readonly newest: JobStateStep | null;
}

function runs(steps: readonly JobStateStep[]): Runs {
  const read: number[] = [];
  steps.forEach((s, i) => {
    if (s.read > 0) read.push(i);
  });
  const last = read.at(-1);
  if (last === undefined) {
    return {
      equalFrom: -1,
      equalReads: 0,
      equalComplete: false,
      movingFrom: -1,
      reads: 0,
      newest: null,
    };
  }
  const newest = steps[last] ?? null;
  let k = read.length - 1;
  let complete = true;
  while (k >= 0) {
    const s = steps[read[k] ?? 0];
    if (s === undefined || s.digest !== newest?.digest) break;
    if (s.read < s.ranks) complete = false;
    k--;
  }
  const equalFrom = read[k + 1] ?? last;
  const equalReads = read.length - 1 - k;
  // The run of changes: read steps each differing from the read step before.
  let m = read.length - 1;
  while (m >= 1 && steps[read[m] ?? 0]?.digest !== steps[read[m - 1] ?? 0]?.digest) m--;
  return {
    equalFrom,
    equalReads,
    equalComplete: complete,
    movingFrom: read[m] ?? last,
    reads: read.length,
    newest,
  };
}

/** The job's state and since when (see the file's head). */
export function jobState(input: JobStateInput): JobStateAnswer {
  const steps = [...input.steps].sort((a, b) => a.at - b.at);
  const hungAfter = Math.max(2, Math.floor(input.hungAfter));
  const r = runs(steps);
  const count = (from: number) => (from < 0 ? 0 : steps.length - from);
  const unchangedSince = r.equalFrom < 0 ? null : (steps[r.equalFrom]?.at ?? null);
  const unchangedSnapshots = count(r.equalFrom);
  const line = input.diagnosis ?? '';
  const answer = (
    state: JobStateWord,
    from: number,
    reason: string,
    over: Partial<Pick<JobStateAnswer, 'since' | 'diagnosis' | 'confidence' | 'pausedUntil'>> = {},
  ): JobStateAnswer => ({
    state,
    since: from < 0 ? null : (steps[from]?.at ?? null),
    sinceSnapshots: count(from),
    unchangedSince,
    unchangedSnapshots,
    reason,
    diagnosis: line !== '' && state !== 'progressing' ? line : reason,
    confidence: null,
    pausedUntil: null,
    ...over,
  });

  if (input.ended)
    return answer('ended', r.equalFrom, 'the job has ended', { diagnosis: 'the job has ended' });

  const w = input.watch ?? null;
  if (w !== null && w.state !== 'unknown') {
    // The watch sees the ranks' CPU as well as their queues: its verdict decides. Its since is
    // the first sample of its run; a stored snapshot run that began earlier is the same run.
    const from = w.state === 'progressing' ? r.movingFrom : r.equalFrom;
    const stepSince = from < 0 ? null : (steps[from]?.at ?? null);
    const since =
      w.since === null
        ? stepSince
        : stepSince === null || w.state === 'progressing'
          ? w.since
          : Math.min(w.since, stepSince);
    return answer(w.state, from, w.diagnosis, {
      since,
      diagnosis: w.diagnosis,
      confidence: w.confidence,
      pausedUntil: w.pausedUntil ?? null,
    });
  }

  const newest = r.newest;
  if (newest === null) {
    return answer('unknown', -1, steps.length === 0 ? 'no snapshot yet' : 'no snapshot could read any rank');
  }
  if (r.equalReads === 1 && r.reads > 1) {
    return answer('progressing', r.movingFrom, 'the queues changed since the previous snapshot');
  }
  if (newest.pending === 0) {
    return answer('computing', r.equalFrom, 'no rank waits in a visible MPI operation');
  }
  if (r.equalReads >= hungAfter && r.equalComplete) {
    return answer(
      'hung',
      r.equalFrom,
      `nothing moved over ${r.equalReads} snapshots with every rank read and operations pending`,
    );
  }
  if (r.equalReads === 1) {
    return answer('waiting', r.equalFrom, 'one snapshot so far: the next one tells whether it moves');
  }
  return answer(
    'waiting',
    r.equalFrom,
    r.equalComplete
      ? `nothing moved over ${r.equalReads} snapshots so far; hung after ${hungAfter}`
      : 'nothing moved, but some ranks could not be read',
  );
}

/**
 * "hung since 22:47", "computing since 22:40", "ended"; with a budget pause:
 * "hung since 22:47 · sampling paused until 23:47". `time` formats an epoch ms as the view does.
 */
export function stateSinceText(
  a: Pick<JobStateAnswer, 'state' | 'since' | 'pausedUntil'>,
  time: (ms: number) => string,
): string {
  const word = JOB_STATE_TEXT[a.state];
  const since =
    a.since === null || a.state === 'ended' || a.state === 'unknown' ? '' : ` since ${time(a.since)}`;
  const paused = a.pausedUntil === null ? '' : ` · sampling paused until ${time(a.pausedUntil)}`;
  return `${word}${since}${paused}`;
}

/** "No change since 22:47 (40 snapshots)", or null when the newest snapshot changed or none was read. */
export function unchangedText(
  a: Pick<JobStateAnswer, 'unchangedSince' | 'unchangedSnapshots'>,
  time: (ms: number) => string,
): string | null {
  if (a.unchangedSince === null || a.unchangedSnapshots < 2) return null;
  return `No change since ${time(a.unchangedSince)} (${a.unchangedSnapshots.toLocaleString('en-US')} snapshots)`;
}
