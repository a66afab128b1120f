// The hang watch's verdict over time (docs/hang-watch.md): a job sampled every few
// minutes (per rank: /proc counters without a stop, then one short stop for the queues and
// stacks) is progressing, computing, waiting or hung. One snapshot cannot tell a hang from a
// slow job; the samples together can:
// - a rank is *in MPI* when its stacks show an MPI call (mpiCall), whatever its CPU: a rank
//   spinning in the library's progress loop waits, it does not compute;
// - something moved when the queues changed (compareSnapshots), a rank's MPI call changed, or a
//   rank outside MPI shows another stack;
// - a rank outside MPI is *alive* while its CPU time or its context switches grow: a rank
//   asleep between two sends wakes up, one blocked for good on a pipe does not.
// Hung needs the whole job: every rank read, each in MPI or (for the weaker verdict) outside it
// but not alive, and nothing moved over `hungAfterSamples` samples. A deadlock, collective hang
// or OpenMP hang the last snapshot proves on its own needs two agreeing samples, not more.
import { callKind } from '../mpi/calls.js';
import type { JobSnapshot, RankSnapshot } from '../snapshot-spec.js';
import type { RankCounters, WatchConfidence, WatchState } from '../watch-spec.js';
import { explainSnapshot } from './explain.js';
import type { Explanation } from './explain-types.js';
import { compareSnapshots } from './progress.js';
import { compressRanks, expandRanks } from './ranges.js';

export interface WatchSample {
  /** Epoch ms. */
  readonly at: number;
  /** Ranks /proc answered for (may be fewer than the job's). */
  readonly counters: readonly RankCounters[];
  readonly clockTicksPerSecond: number;
  /** The sample's short-stop snapshot; null when the ranks were not stopped (budget) or the read failed. */
  readonly snapshot: JobSnapshot | null;
}

export interface WatchVerdict {
  readonly state: WatchState;
  readonly confidence: WatchConfidence | null;
  /** The first sample (index into the samples) of the current state's run, within the window. */
  readonly sinceIndex: number | null;
  /** World ranks the others wait for. */
  readonly leastProgressed: readonly number[];
  /** The same as ranges ("0-3,7"). */
  readonly leastProgressedText: string;
  /** One line: the last snapshot's diagnosis when it has one, else the reason. */
  readonly diagnosis: string;
  /** Why this state, one sentence. */
  readonly reason: string;
  /** The sample whose snapshot shows the state best (the newest with a snapshot). */
  readonly evidenceIndex: number | null;
}

export interface WatchOptions {
  /** Samples in a row with nothing moved before a job blocked in MPI is hung (>= 2). */
  readonly hungAfterSamples: number;
  /** A rank outside MPI running, or using at least this share of one core, computes (default 0.1). */
  readonly busyShare?: number;
}

/** The most characters of the diagnosis line. */
export const MAX_WATCH_DIAGNOSIS_CHARS = 300;

type Where = 'in-mpi' | 'outside' | 'unknown';

interface RankPicture {
  readonly where: Where;
  /** The MPI call, or the main thread's frames (function:line) outside MPI. */
  readonly mark: string;
}

function mainThreadMark(r: RankSnapshot): string {
  const t = r.threads?.find((x) => x.main) ?? r.threads?.[0];
  if (t === undefined) return '';
  return t.frames.map((f) => `${f.function ?? f.pc}:${f.line ?? ''}`).join('|');
}

function picture(r: RankSnapshot): RankPicture {
  if (r.state.kind !== 'ok' || r.mpiCall === undefined) return { where: 'unknown', mark: '' };
  if (r.mpiCall !== null) return { where: 'in-mpi', mark: r.mpiCall.function };
  return { where: 'outside', mark: mainThreadMark(r) };
}

function pictures(s: JobSnapshot): Map<number, RankPicture> {
  const m = new Map<number, RankPicture>();
  for (const r of s.ranks) m.set(r.rank, picture(r));
  return m;
}

/** What happened between two samples that both have a snapshot. */
interface Interval {
  /** Queues, calls or the stacks of ranks outside MPI changed. */
  readonly moved: boolean;
  /** Ranks outside MPI whose CPU share reached busyShare. */
  readonly busy: number;
  /** Ranks outside MPI whose CPU time or context switches grew. */
  readonly alive: number;
  /** Ranks read in both, and of those outside MPI in the later one. */
  readonly read: number;
  readonly outside: number;
  /** Every rank of the later snapshot was read and none of them is of unknown whereabouts. */
  readonly allRead: boolean;
}

function counterMap(s: WatchSample): Map<number, RankCounters> {
  const m = new Map<number, RankCounters>();
  for (const c of s.counters) m.set(c.rank, c);
  return m;
}

function interval(a: WatchSample, b: WatchSample, busyShare: number): Interval {
  const sa = a.snapshot;
  const sb = b.snapshot;
  if (sa === null || sb === null) throw new Error('interval needs two snapshots');
  const step = compareSnapshots(sa, sb, { maxExamples: 0 });
  const pa = pictures(sa);
  const pb = pictures(sb);
  const ca = counterMap(a);
  const cb = counterMap(b);
  const seconds = Math.max(0.001, (b.at - a.at) / 1000);
  const hz = b.clockTicksPerSecond > 0 ? b.clockTicksPerSecond : 100;
  let moved = step.verdict === 'progressing';
  let busy = 0;
  let alive = 0;
  let read = 0;
  let outside = 0;
  let allRead = true;
  for (const [rank, now] of pb) {
    if (now.where === 'unknown') {
      allRead = false;
      continue;
    }
    const before = pa.get(rank);
    if (before === undefined || before.where === 'unknown') continue;
    read++;
    if (before.where !== now.where || before.mark !== now.mark) moved = true;
    if (now.where !== 'outside') continue;
    outside++;
    const x = ca.get(rank);
    const y = cb.get(rank);
    if (x === undefined || y === undefined) continue;
    const ticks = y.cpuTicks - x.cpuTicks;
    // Running now, or a fair share of a core since the last sample (a loaded node shares its cores).
    if (y.state === 'R' || ticks / hz / seconds >= busyShare) busy++;
    if (ticks > 0 || y.switches > x.switches) alive++;
  }
  return { moved, busy, alive, read, outside, allRead };
}

function unknownVerdict(reason: string, evidenceIndex: number | null): WatchVerdict {
  return {
    state: 'unknown',
    confidence: null,
    sinceIndex: null,
    leastProgressed: [],
    leastProgressedText: '',
    diagnosis: reason,
    reason,
    evidenceIndex,
  };
}

function clipLine(s: string): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length <= MAX_WATCH_DIAGNOSIS_CHARS ? one : `${one.slice(0, MAX_WATCH_DIAGNOSIS_CHARS - 1)}…`;
}

interface Proof {
  readonly proven: boolean;
  readonly least: number[];
  readonly line: string;
}

/** What the newest snapshot says on its own (explainSnapshot over it and the one before). */
function proof(last: JobSnapshot, previous: JobSnapshot | null): Proof {
  const e = explainSnapshot(last, previous === null ? [] : [previous], { maxCycles: 4, maxNearMisses: 4 });
  const proven = e.verdict === 'deadlock' || e.verdict === 'collective-hang' || e.verdict === 'openmp-hang';
  // A progress counter that tells ranks apart is the authority: the smallest numbers are behind.
  const counted = e.progressCounter?.least;
  if (counted !== undefined && counted !== null)
    return { proven, least: [...counted.ranks], line: diagnosisLine(e) };
  const least = new Set<number>();
  const add = (ranges: string) => {
    for (const r of expandRanks(ranges) ?? []) least.add(r);
  };
  // Only ranks whose progress differs from the others': a cycle's ranks when others wait behind
  // it, the members a collective waits for, an OpenMP deadlock others wait on, a free rank
  // others wait for; never every rank of a cycle that holds the whole job.
  if (e.deadlock !== null && e.deadlock.blockedBehind !== '') {
    for (const c of e.deadlock.cycles) for (const r of c.ranks) least.add(r);
  }
  for (const c of e.collectives) add(c.waitingFor);
  const mm = e.collectiveMismatches[0];
  if (mm !== undefined && mm.differs === undefined && e.verdict === 'collective-hang') {
    for (const g of mm.groups)
      if (!(g.where === 'call' && g.blocking && callKind(g.call ?? '') === 'collective')) add(g.ranks);
  }
  if (e.behindOpenMp !== '') for (const r of e.openmp.deadlockedRanks) least.add(r);
  if (least.size === 0) add(e.waits.waitingOnFree);
  if (least.size >= e.rankCount) least.clear();
  return { proven, least: [...least].sort((x, y) => x - y), line: diagnosisLine(e) };
}

/**
 * A snapshot's diagnosis in one line (the hang watch's, Fleet's and Jobs' diagnosis column):
 * "Deadlock: ranks 0-3 wait in MPI_Ssend ... at FILE:LINE", at most MAX_WATCH_DIAGNOSIS_CHARS.
 */
export function diagnosisLine(e: Explanation): string {
  // The first group names the call, peer, tag and source line ("Ranks 0-3 wait in MPI_Ssend
  // ... at FILE:LINE"); the cycle line repeats the ranks edge by edge, too long for one line.
  const group = e.diagnosis.groups[0]?.text ?? '';
  const first = e.headline !== '' && /^Ranks? /.test(group) ? `r${group.slice(1)}` : group;
  const head = e.headline === '' ? '' : `${e.headline}: `;
  // A wait on a rank that will never act, or a collective whose members cannot meet: the
  // verdict's own statement names both sides, where the first group names only one.
  const stated =
    (e.verdict === 'deadlock' && e.deadlock?.cycles.length === 0 && e.diagnosis.deadEnd !== null) ||
    (e.verdict === 'collective-hang' && e.collectiveMismatches.length > 0);
  const lead = e.lead.split(/(?<=\.)\s/)[0] ?? e.lead;
  const line = stated
    ? `${head}${lead}`
    : first === ''
      ? (e.summary.split(/(?<=\.)\s/)[0] ?? e.summary)
      : `${head}${first}`;
  return clipLine(line);
}

/**
 * The job's state after the newest of `samples` (oldest first). Samples without a snapshot (no
 * stop: budget used up, read failed) are skipped for everything but the CPU counters.
 */
export function watchVerdict(samples: readonly WatchSample[], opts: WatchOptions): WatchVerdict {
  const hungAfter = Math.max(2, Math.floor(opts.hungAfterSamples));
  const busyShare = opts.busyShare ?? 0.1;
  const withSnap: number[] = [];
  samples.forEach((s, i) => {
    if (s.snapshot !== null) withSnap.push(i);
  });
  const lastIndex = withSnap.at(-1);
  if (lastIndex === undefined) return unknownVerdict('no sample has stopped the ranks yet', null);
  const last = samples[lastIndex]?.snapshot ?? null;
  if (last === null) return unknownVerdict('no sample has stopped the ranks yet', null);
  if (!last.ranks.some((r) => r.state.kind === 'ok')) {
    return unknownVerdict('the last sample could not read any rank', lastIndex);
  }
  if (withSnap.length < 2) return unknownVerdict('one sample so far: the next one tells', lastIndex);

  // Intervals newest first, until one moved: the run of still intervals ending now.
  const intervals: Interval[] = [];
  for (let k = withSnap.length - 1; k >= 1; k--) {
    const a = samples[withSnap[k - 1] ?? 0];
    const b = samples[withSnap[k] ?? 0];
    if (a === undefined || b === undefined) break;
    intervals.push(interval(a, b, busyShare));
  }
  const newest = intervals[0];
  if (newest === undefined) return unknownVerdict('one sample so far: the next one tells', lastIndex);
  const previousIndex = withSnap[withSnap.length - 2];
  const previous = previousIndex === undefined ? null : (samples[previousIndex]?.snapshot ?? null);
  const p = proof(last, previous);
  const verdict = (
    state: WatchState,
    confidence: WatchConfidence,
    runLength: number,
    reason: string,
    least: readonly number[],
  ): WatchVerdict => ({
    state,
    confidence,
    sinceIndex: withSnap[Math.max(0, withSnap.length - 1 - runLength)] ?? null,
    leastProgressed: least,
    leastProgressedText: compressRanks(least),
    diagnosis: state === 'hung' || state === 'waiting' ? p.line || reason : reason,
    reason,
    evidenceIndex: lastIndex,
  });
  const runOf = (pred: (iv: Interval) => boolean): number => {
    let n = 0;
    while (n < intervals.length && pred(intervals[n] as Interval)) n++;
    return n;
  };

  const computing = (iv: Interval) => iv.read > 0 && iv.outside * 2 >= iv.read && iv.busy * 2 >= iv.outside;
  if (computing(newest)) {
    const n = runOf(computing);
    return verdict('computing', 'high', n, `${newest.busy} of ${newest.read} ranks compute outside MPI`, []);
  }
  if (newest.moved) {
    const n = runOf((iv) => iv.moved && !computing(iv));
    return verdict('progressing', 'high', n, 'messages moved or ranks went on since the last sample', []);
  }
  // Nothing moved. Blocked: every rank read and in MPI; still: the same, or outside MPI but not alive.
  const blocked = (iv: Interval) => !iv.moved && iv.allRead && iv.outside === 0;
  const still = (iv: Interval) => !iv.moved && iv.allRead && iv.alive === 0 && iv.busy === 0;
  const needed = p.proven ? 1 : hungAfter - 1;
  const nBlocked = runOf(blocked);
  if (nBlocked >= needed) {
    const why = p.proven
      ? 'the last snapshot proves it and nothing moved since the one before'
      : `every rank is blocked in MPI and nothing moved over ${nBlocked + 1} samples`;
    return verdict('hung', p.proven ? 'high' : 'medium', nBlocked, why, p.least);
  }
  const nStill = runOf(still);
  if (nStill >= 2 * (hungAfter - 1)) {
    return verdict(
      'hung',
      'low',
      nStill,
      `nothing moved over ${nStill + 1} samples; the ranks outside MPI neither ran nor woke up`,
      p.least,
    );
  }
  const n = runOf((iv) => !iv.moved && !computing(iv));
  const reason = !newest.allRead
    ? 'nothing moved since the last sample, and some ranks could not be read'
    : newest.outside > 0
      ? `nothing moved since the last sample; ${newest.outside} ranks are outside MPI and may still send`
      : `nothing moved over ${n + 1} samples so far; hung after ${hungAfter}`;
  return verdict('waiting', 'medium', n, reason, p.least);
}
