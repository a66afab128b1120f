// The words of the Fleet view's jobs table: the watch mode, the state chip,
// "since", the least-progressed ranks, a job's program line, the order of the rows, and the
// policy in words. The model decides every state (analysis/watch.ts, on the server); this file
// only says it. Pure: no DOM, no React, so it is tested in node (test/fleet-text.test.ts).
import {
  type ApiFleetJob,
  type ApiFleetSample,
  type ApiWatchPolicy,
  assertUnreachable,
  JOB_STATE_TEXT,
  jobLabel,
  ranksPhrase,
  type WatchConfidence,
  type WatchMode,
  type WatchState,
} from '@mqd/model';
import { formatSince } from '../format.js';
import type { FleetSort } from '../url-state.js';

/** Whether the watcher samples a job, as a person reads it. */
export function watchModeText(mode: WatchMode): string {
  switch (mode) {
    case 'on':
      return 'watched';
    case 'off-by-job':
      return 'not watched: the job opted out (MQD_WATCH=off)';
    case 'off-by-policy':
      return 'not watched: outside the policy';
    case 'disabled':
      return 'watch is off';
    case 'budget':
      return 'stop budget used up this hour';
    default:
      return assertUnreachable(mode);
  }
}

/** The state's word alone (the history cells and the sort use it): the model's one vocabulary. */
export function stateWord(state: WatchState): string {
  return JOB_STATE_TEXT[state];
}

function confidenceText(c: WatchConfidence): string {
  switch (c) {
    case 'high':
      return 'high confidence';
    case 'medium':
      return 'medium confidence';
    case 'low':
      return 'low confidence';
    default:
      return assertUnreachable(c);
  }
}

/** A time of day for "since": format.ts's one helper (the viewer's clock; the date on another day). */
export { formatSince };

/**
 * What the state chip says: "hung since 03:12 (high confidence)", "waiting", "not known yet";
 * while the stop budget pauses sampling, the last verdict with "· sampling paused until 04:12".
 */
export function stateChipText(
  job: Pick<ApiFleetJob, 'state' | 'since' | 'confidence' | 'pausedUntil'>,
  now: number = Date.now(),
  timeZone?: string,
  locale?: string,
): string {
  const paused =
    job.pausedUntil === undefined || job.pausedUntil === null
      ? ''
      : ` · sampling paused until ${formatSince(job.pausedUntil, now, timeZone, locale)}`;
  if (job.state !== 'hung') return `${stateWord(job.state)}${paused}`;
  const since = job.since === null ? '' : ` since ${formatSince(job.since, now, timeZone, locale)}`;
  const confidence = job.confidence === null ? '' : ` (${confidenceText(job.confidence)})`;
  return `hung${since}${confidence}${paused}`;
}

/** "ended at 03:40 (TIMEOUT)" for a job that ended, null while it runs. */
export function endedText(
  job: Pick<ApiFleetJob, 'endedAt' | 'endReason'>,
  now: number = Date.now(),
  timeZone?: string,
): string | null {
  if (job.endedAt === null) return null;
  const reason = job.endReason === null || job.endReason === '' ? '' : ` (${job.endReason})`;
  return `ended at ${formatSince(job.endedAt, now, timeZone)}${reason}`;
}

/** "least progressed: ranks 0-3", "least progressed: rank 2"; null when the watch named none. */
export function leastProgressedText(ranges: string): string | null {
  const r = ranges.trim();
  return r === '' ? null : `least progressed: ${ranksPhrase(r)}`;
}

/**
 * The program the job runs, as the Jobs view names it: the server's `program` (Slurm's job name,
 * else the executable), except when that is the starter itself ("mpirun"): then the program the
 * starter's command line runs ("mpirun -np 4 ./wrong_tag" reads "wrong_tag").
 */
export function programText(job: Pick<ApiFleetJob, 'program' | 'command'>): string {
  const label = jobLabel(job.command);
  return label.launcher !== '' && job.program === label.launcher ? label.program : job.program;
}

/** The program and what names the job: "Slurm job 1234", or the starter's host and pid. */
export function jobIdText(job: Pick<ApiFleetJob, 'kind' | 'slurmJob' | 'key'>): string {
  if (job.kind === 'slurm' && job.slurmJob !== null) return `Slurm job ${job.slurmJob}`;
  // starter:HOST:PID:STARTTIME (watch-spec.ts DiscoveredJob.key)
  const m = /^starter:(.+):(\d+):\d+$/.exec(job.key);
  return m === null ? job.key : `pid ${m[2]} on ${m[1]}`;
}

/** "debug / proj42", "debug", "—". */
export function placeText(job: Pick<ApiFleetJob, 'partition' | 'account'>): string {
  const parts = [job.partition, job.account].filter((x): x is string => x !== null && x !== '');
  return parts.length === 0 ? '—' : parts.join(' / ');
}

/** "4 ranks on node01, node02", "1 rank on node01"; long node lists are cut short. */
export function ranksOnNodesText(job: Pick<ApiFleetJob, 'rankCount' | 'nodes'>): string {
  const ranks = `${job.rankCount.toLocaleString('en-US')} ${job.rankCount === 1 ? 'rank' : 'ranks'}`;
  if (job.nodes.length === 0) return ranks;
  const shown = job.nodes.slice(0, 3).join(', ');
  const more =
    job.nodes.length > 3 ? ` and ${(job.nodes.length - 3).toLocaleString('en-US')} more nodes` : '';
  return `${ranks} on ${shown}${more}`;
}

/** Rows first: hung, waiting, not sampled, computing, progressing; jobs that ended last. */
const STATE_ORDER: Readonly<Record<WatchState, number>> = {
  hung: 0,
  waiting: 1,
  unknown: 2,
  computing: 3,
  progressing: 4,
};

const sinceMs = (j: Pick<ApiFleetJob, 'since'>): number => {
  const t = j.since === null ? Number.NaN : Date.parse(j.since);
  return Number.isNaN(t) ? Number.POSITIVE_INFINITY : t;
};

/**
 * The rows in the order `by` asks for, a new array. `state`: running jobs before ended ones,
 * hung first (see STATE_ORDER), then the longest in its state first. `since`: the longest in
 * its state first whatever the state, jobs without a time last. Ties: the program, then the key.
 */
export function sortFleetJobs<J extends Pick<ApiFleetJob, 'state' | 'since' | 'endedAt' | 'program' | 'key'>>(
  jobs: readonly J[],
  by: FleetSort,
): J[] {
  const tie = (a: J, b: J) => a.program.localeCompare(b.program) || a.key.localeCompare(b.key);
  const bySince = (a: J, b: J) => {
    const d = sinceMs(a) - sinceMs(b);
    return Number.isNaN(d) ? 0 : d;
  };
  const ended = (j: J) => (j.endedAt === null ? 0 : 1);
  const cmp =
    by === 'state'
      ? (a: J, b: J) =>
          ended(a) - ended(b) || STATE_ORDER[a.state] - STATE_ORDER[b.state] || bySince(a, b) || tie(a, b)
      : (a: J, b: J) => bySince(a, b) || tie(a, b);
  return [...jobs].sort(cmp);
}

/** The last `max` samples, oldest first, each with the words its cell stands for. */
export function historyCells(
  history: readonly ApiFleetSample[],
  now: number = Date.now(),
  timeZone?: string,
  max = 24,
): { readonly state: WatchState; readonly label: string; readonly snapshot: boolean }[] {
  return history.slice(-max).map((s) => ({
    state: s.state,
    label: `${formatSince(s.at, now, timeZone)}: ${stateWord(s.state)}`,
    snapshot: s.snapshotId !== null,
  }));
}

/** The history's text alternative: "last 3 samples: 03:01 waiting, 03:03 hung, 03:05 hung". */
export function historyText(
  history: readonly ApiFleetSample[],
  now: number = Date.now(),
  timeZone?: string,
): string {
  const cells = historyCells(history, now, timeZone);
  if (cells.length === 0) return 'no samples yet';
  const n = cells.length === 1 ? 'last sample' : `last ${cells.length} samples`;
  return `${n}: ${cells.map((c) => c.label.replace(': ', ' ')).join(', ')}`;
}

/** "every job", "users alice, bob; partition debug": whom the policy watches. */
export function policyScopeText(
  p: Pick<ApiWatchPolicy, 'users' | 'partitions' | 'accounts' | 'programs'>,
): string {
  const part = (one: string, names: readonly string[]) =>
    names.length === 0 ? null : `${names.length === 1 ? one : `${one}s`} ${names.join(', ')}`;
  const parts = [
    part('user', p.users),
    part('partition', p.partitions),
    part('account', p.accounts),
    part('program', p.programs ?? []),
  ].filter((x) => x !== null);
  return parts.length === 0 ? 'every job' : `only jobs of ${parts.join('; ')}`;
}

/** The policy in one sentence, for everyone who opens the view. */
export function policyText(p: ApiWatchPolicy): string {
  if (!p.enabled) return 'The hang watch is off: no job is sampled.';
  return (
    `The hang watch samples ${policyScopeText(p)} every ${p.periodSeconds.toLocaleString('en-US')} s; ` +
    `a job blocked in MPI with nothing moving over ${p.hungAfterSamples} samples is called hung; ` +
    `each rank is stopped at most ${p.stopBudgetMsPerRankHour.toLocaleString('en-US')} ms per hour.`
  );
}

/**
 * "cores kept: 4 ranks in node1:/cores/watch-…, node2:/cores/watch-…"; with the nodes that kept
 * none and why. Null when the watch kept no cores of the job.
 */
export function coresText(job: Pick<ApiFleetJob, 'cores'>): string | null {
  const c = job.cores;
  if (c === undefined || c === null) return null;
  const kept = c.ranks.filter((r) => r.error === null).length;
  const dirs = c.dirs.filter((d) => d.dir !== null).map((d) => `${d.host}:${d.dir}`);
  const failed = c.dirs
    .filter((d) => d.dir === null)
    .map((d) => `${d.host} (${d.error ?? 'no reason given'})`);
  const parts = [
    dirs.length === 0
      ? 'no cores kept'
      : `cores kept: ${kept} of ${c.ranks.length} ranks in ${dirs.join(', ')}`,
    ...(failed.length === 0 ? [] : [`none on ${failed.join(', ')}`]),
  ];
  return parts.join('; ');
}
