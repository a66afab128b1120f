// A job's snapshots over time, read honestly: a rank that was not read (its agent dropped out,
// its read failed, its library showed no queues) is unknown, never empty. So a rank not read in
// snapshot k neither ends nor restarts the runs of its operations: they are compared with the
// last snapshot in which that rank was read, and a snapshot in which no rank was read is a gap,
// not a job whose queues emptied.
//
// Which operation is which across snapshots is mpi/operation.ts's rule (the same as the
// progress verdict's and the server's hung digest): a receive that became matched is the same
// operation, changed; its run of unchanged reads starts again.
import { codedText } from '../errors.js';
import { opKeys, pairOperations } from '../mpi/operation.js';
import type { JobSnapshot, Operation, QueueKind, RankSnapshot, RankState } from '../snapshot-spec.js';
import { ranksPhrase } from '../text.js';
import { compressRanks } from './ranges.js';

/** A rank's queues were read: anything else (error, no-queues, agent-missing) is unknown. */
export function isRankRead(r: Pick<RankSnapshot, 'state'>): boolean {
  return r.state.kind === 'ok';
}

export type NotReadKind = Exclude<RankState['kind'], 'ok'>;

/** The words for why a rank was not read, by state kind. */
export const NOT_READ_WORDS: Record<NotReadKind, string> = {
  'agent-missing': 'no agent answered',
  error: 'the read failed',
  'no-queues': 'the MPI library showed no queues',
};

/** Ranks not read for one reason (same state kind and code). */
export interface NotReadGroup {
  readonly kind: NotReadKind;
  readonly code: string;
  /** The first rank's message (others of the group differ only in host or pid, as a rule). */
  readonly message: string;
  /** As ranges ("0-3,7"). */
  readonly ranks: string;
  readonly count: number;
}

/**
 * read: every rank was read; partial: some were not; failed: none was (the snapshot says nothing
 * about the queues, and must be drawn as a gap, not as zero).
 */
export type SnapshotReadKind = 'read' | 'partial' | 'failed';

export interface SnapshotReadStatus {
  readonly kind: SnapshotReadKind;
  readonly ranks: number;
  readonly read: number;
  readonly notRead: number;
  /** Largest first. */
  readonly groups: readonly NotReadGroup[];
}

export function snapshotReadStatus(snap: Pick<JobSnapshot, 'ranks'>): SnapshotReadStatus {
  const byReason = new Map<string, { kind: NotReadKind; code: string; message: string; ranks: number[] }>();
  let read = 0;
  for (const r of snap.ranks) {
    const s = r.state;
    if (s.kind === 'ok') {
      read++;
      continue;
    }
    const key = `${s.kind}\u0001${s.code}`;
    const g = byReason.get(key);
    if (g) g.ranks.push(r.rank);
    else byReason.set(key, { kind: s.kind, code: s.code, message: s.message, ranks: [r.rank] });
  }
  const groups = [...byReason.values()]
    .map((g) => ({
      kind: g.kind,
      code: g.code,
      message: g.message,
      ranks: compressRanks(g.ranks),
      count: g.ranks.length,
    }))
    .sort((a, b) => b.count - a.count || a.code.localeCompare(b.code));
  const ranks = snap.ranks.length;
  const notRead = ranks - read;
  const kind: SnapshotReadKind = read === 0 ? 'failed' : notRead > 0 ? 'partial' : 'read';
  return { kind, ranks, read, notRead, groups };
}

/** "no agent answered (MQD_E_AGENT_MISSING)": one reason, short enough for a note. */
export function notReadReason(g: Pick<NotReadGroup, 'kind' | 'code'>): string {
  return `${NOT_READ_WORDS[g.kind]} (${g.code})`;
}

/**
 * The labelled note for a snapshot's unread ranks, or null when every rank was read:
 * "4 ranks not read: no agent answered (MQD_E_AGENT_MISSING)"; with several reasons each names
 * its ranks: "6 ranks not read: ranks 0-3 no agent answered (...); ranks 4-5 the read failed (...)".
 */
export function notReadNote(s: SnapshotReadStatus): string | null {
  if (s.notRead === 0) {
    return s.ranks === 0 ? 'No rank in this snapshot: nothing was read.' : null;
  }
  const head = `${s.notRead.toLocaleString('en-US')} ${s.notRead === 1 ? 'rank' : 'ranks'} not read`;
  const only = s.groups.length === 1 ? s.groups[0] : undefined;
  if (only) return `${head}: ${notReadReason(only)}`;
  return `${head}: ${s.groups.map((g) => `${ranksPhrase(g.ranks)} ${notReadReason(g)}`).join('; ')}`;
}

/** One rank's tooltip text: "rank 3 not read: no agent answered. MQD_E_AGENT_MISSING: ...". */
export function rankNotReadText(r: Pick<RankSnapshot, 'rank' | 'state'>): string | null {
  const s = r.state;
  if (s.kind === 'ok') return null;
  return `rank ${r.rank} not read: ${NOT_READ_WORDS[s.kind]}. ${codedText(s)}`;
}

/** One operation as the history walk sees it. */
export interface HistoryOp {
  readonly snapshot: number;
  readonly rank: RankSnapshot;
  readonly commIndex: number;
  readonly queue: QueueKind;
  readonly op: Operation;
  /**
   * First snapshot of the operation's unbroken run: it was there, unchanged, in every snapshot
   * since in which its rank was read. Equal to `snapshot` for an operation new in it (or in the
   * rank's first read).
   */
  readonly since: number;
  /** Snapshots of that run in which the rank was read (1 for a new operation). */
  readonly readsInRun: number;
}

/** One operation at its rank's last read, with when its run of unchanged reads began. */
interface Remembered {
  readonly identity: string;
  readonly progress: string;
  since: number;
  reads: number;
}

/** How one snapshot compares with the ranks' previous reads. */
export interface SnapshotChange {
  readonly status: SnapshotReadStatus;
  /**
   * Ranks compared with an earlier read of theirs. 0 for the first snapshot, a failed one, or
   * one whose read ranks were never read before: nothing was compared, which is not "no change".
   */
  readonly compared: number;
  /** Operations of compared ranks new since their previous read. */
  readonly appeared: number;
  /** Operations of compared ranks still there whose status (or actual match) changed. */
  readonly changed: number;
  /** Operations of compared ranks gone since their previous read. */
  readonly disappeared: number;
  /** Operations of compared ranks still there, unchanged. */
  readonly unchanged: number;
}

export interface OpHistory {
  readonly snapshots: readonly SnapshotChange[];
  /** World ranks read in each snapshot: [snapshot][i] is a sorted list. */
  readonly readRanks: readonly Int32Array[];
}

const NO_VISIT = (_h: HistoryOp): void => {};

/**
 * Walks snapshots in the given (time) order, calling `visit` for every operation of every read
 * rank with its run (HistoryOp), and says per snapshot what changed against each rank's last read.
 * Equal operations of a rank are a multiset: two identical receives persist only if both were
 * there before.
 */
export function walkOpHistory(
  series: readonly Pick<JobSnapshot, 'ranks'>[],
  visit: (h: HistoryOp) => void = NO_VISIT,
): OpHistory {
  const memory = new Map<number, Remembered[]>();
  const snapshots: SnapshotChange[] = [];
  const readRanks: Int32Array[] = [];
  series.forEach((snap, si) => {
    let compared = 0;
    let appeared = 0;
    let changed = 0;
    let disappeared = 0;
    let unchanged = 0;
    const readHere: number[] = [];
    for (const r of snap.ranks) {
      if (!isRankRead(r)) continue;
      readHere.push(r.rank);
      const before = memory.get(r.rank);
      const cur: Remembered[] = [];
      for (const c of r.communicators) {
        for (const queue of QUEUES) {
          const q = c[queue];
          if (!q) continue;
          for (const op of q) {
            // The communicator's id names it within one process, and the rank is in the key:
            // cheaper than commKey, which hashes a 16,384-member group per rank.
            const k = opKeys(r.rank, c.id, queue, op);
            cur.push({ identity: k.identity, progress: k.progress, since: si, reads: 1 });
          }
        }
      }
      if (before) {
        compared++;
        const pairs = pairOperations(before, cur);
        cur.forEach((o, j) => {
          const change = pairs.change[j];
          if (change === 'unchanged') {
            const prev = before[pairs.earlier[j] ?? -1];
            if (prev) {
              o.since = prev.since;
              o.reads = prev.reads + 1;
            }
            unchanged++;
          } else if (change === 'changed') changed++;
          else appeared++;
        });
        disappeared += pairs.gone.length;
      }
      if (visit !== NO_VISIT) {
        // The same order as above: the j-th operation of the rank is cur[j].
        let j = 0;
        r.communicators.forEach((c, commIndex) => {
          for (const queue of QUEUES) {
            const q = c[queue];
            if (!q) continue;
            for (const op of q) {
              const o = cur[j++];
              if (o)
                visit({ snapshot: si, rank: r, commIndex, queue, op, since: o.since, readsInRun: o.reads });
            }
          }
        });
      }
      if (before && cur.length > 1 && cur.some((o) => o.since !== cur[0]?.since)) {
        // Of equal copies the newest run is the one that is sure to be unbroken.
        const newest = new Map<string, Remembered>();
        const state = (o: Remembered) => `${o.identity}\u0001${o.progress}`;
        for (const o of cur) {
          const n = newest.get(state(o));
          if (n === undefined || o.since > n.since) newest.set(state(o), o);
        }
        for (const o of cur) {
          const n = newest.get(state(o));
          if (n !== undefined && n !== o) {
            o.since = n.since;
            o.reads = n.reads;
          }
        }
      }
      memory.set(r.rank, cur);
    }
    readHere.sort((a, b) => a - b);
    readRanks.push(Int32Array.from(readHere));
    snapshots.push({ status: snapshotReadStatus(snap), compared, appeared, changed, disappeared, unchanged });
  });
  return { snapshots, readRanks };
}

const QUEUES: readonly QueueKind[] = ['sends', 'receives', 'unexpected'];

/**
 * How long the job has not moved, counted back from the last snapshot: the first snapshot of
 * the stretch in which no compared rank's queues changed. Snapshots with no rank read (failed)
 * and ranks not read are skipped, never taken for a change: a dropout does not restart it.
 */
export interface Stillness {
  /** Index of the first snapshot of the stretch (the last one when the last comparison moved). */
  readonly since: number;
  /** Snapshots in the stretch, the failed ones included. */
  readonly snapshots: number;
  /** Of those, snapshots in which no rank was read. */
  readonly failed: number;
  /** Comparisons in the stretch that found no change (0: nothing could be compared). */
  readonly comparisons: number;
  /** The last comparison found a change: the job is moving. */
  readonly moving: boolean;
  /** Operations new, changed and gone in the change that began the stretch (0 when none was seen). */
  readonly appeared: number;
  readonly changed: number;
  readonly disappeared: number;
}

export function stillness(h: OpHistory): Stillness | null {
  const n = h.snapshots.length;
  if (n === 0) return null;
  let since = n - 1;
  let comparisons = 0;
  let moving = false;
  let appeared = 0;
  let changed = 0;
  let disappeared = 0;
  for (let i = n - 1; i >= 0; i--) {
    const s = h.snapshots[i];
    if (s === undefined) break;
    if (s.compared > 0 && (s.appeared > 0 || s.changed > 0 || s.disappeared > 0)) {
      // The state of snapshot i is the one that has held since.
      moving = comparisons === 0;
      appeared = s.appeared;
      changed = s.changed;
      disappeared = s.disappeared;
      since = i;
      break;
    }
    if (s.compared > 0) comparisons++;
    since = i;
  }
  // The stretch starts at the first snapshot that was read: a leading failed one proves nothing.
  while (since < n - 1 && h.snapshots[since]?.status.kind === 'failed') since++;
  let failed = 0;
  for (let i = since; i < n; i++) if (h.snapshots[i]?.status.kind === 'failed') failed++;
  return { since, snapshots: n - since, failed, comparisons, moving, appeared, changed, disappeared };
}

/** "40 s", "5 min", "2 h 5 min": a span between snapshots, rounded to what a person reads. */
export function spanText(millis: number): string {
  const s = Math.max(0, Math.round(millis / 1000));
  if (s < 60) return `${s} s`;
  const min = Math.round(s / 60);
  if (min < 60) return `${min} min`;
  const h = Math.floor(min / 60);
  return min % 60 === 0 ? `${h} h` : `${h} h ${min % 60} min`;
}

/** A run of equal snapshots counted over the job's whole history (analysis/job-state.ts), not a view's window. */
export interface UnchangedRun {
  /** Epoch ms of the run's first snapshot. */
  readonly since: number;
  readonly snapshots: number;
  /** Of those, snapshots in which no rank was read. */
  readonly failed: number;
}

/** "22:47" (UTC): the default clock of stillnessText; a view passes its own. */
const utcClock = (ms: number): string => new Date(ms).toISOString().slice(11, 16);

/**
 * The timeline's headline: what the series says about the job, in one line.
 * `times` are the snapshots' times (epoch ms, the walk's order); `waiting` the ranks with
 * operations queued at their last read, as ranges ("" when none). A still job reads
 * "No change since 22:47 (40 snapshots); ranks 0-3 wait.": since the first snapshot of the run
 * of equal snapshots, `run` when the caller counted it over the whole history (the series may
 * hold only the latest snapshots), else within the series.
 */
export function stillnessText(
  s: Stillness | null,
  times: readonly number[],
  waiting: string,
  time: (ms: number) => string = utcClock,
  run: UnchangedRun | null = null,
): string {
  if (s === null) return 'No snapshot yet.';
  const n = times.length;
  if (n === 1 && run === null) return 'One snapshot: take another to see what changes.';
  if (s.moving) {
    const count = (k: number) => `${k.toLocaleString('en-US')} ${k === 1 ? 'operation' : 'operations'}`;
    const changed = s.changed > 0 ? `${count(s.changed)} changed, ` : '';
    return `Moving: ${changed}${count(s.appeared)} new and ${count(s.disappeared)} gone since the ranks' previous reads.`;
  }
  if (s.comparisons === 0 && run === null)
    return 'Nothing to compare yet: no rank was read in two snapshots.';
  const windowFrom = times[s.since] ?? 0;
  // The whole history's run starts no later than the window's (the window is its tail).
  const longer = run !== null && run.snapshots >= s.snapshots;
  const from = longer ? run.since : windowFrom;
  const count = longer ? run.snapshots : s.snapshots;
  const failedN = longer ? run.failed : s.failed;
  const failed = failedN > 0 ? `, ${failedN.toLocaleString('en-US')} of them not read` : '';
  const who =
    waiting === '' ? 'nothing queued' : `${ranksPhrase(waiting)} ${/[-,]/.test(waiting) ? 'wait' : 'waits'}`;
  return `No change since ${time(from)} (${count.toLocaleString('en-US')} snapshots${failed}); ${who}.`;
}
