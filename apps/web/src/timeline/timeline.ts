// Queue depth per rank and kind across a job's snapshots, which operations stayed unchanged
// since their rank's previous read (the usual sign of a hang: the same receive, same buffer,
// same peer and tag, snapshot after snapshot), and which ranks and snapshots were not read at
// all. The rules (what "the same operation" and "read" mean, how long nothing moved) are the
// model's (analysis/history.ts); this lays them out in typed arrays for 16,384 ranks, plus the
// pure geometry of the time and rank axes.
import {
  compressRanks,
  type JobSnapshot,
  type Operation,
  type QueueKind,
  type SnapshotChange,
  type SnapshotReadStatus,
  type Stillness,
  stillness,
  stillnessText,
  type UnchangedRun,
  walkOpHistory,
  worldSizeOf,
} from '@mqd/model';
import { type ScaleTime, scaleLinear, scaleTime } from 'd3';
import { formatSince } from '../format.js';
import { KIND_COUNT, KIND_INDEX } from '../matrix-types.js';

export interface TimelineInput {
  readonly id: string;
  readonly takenAt: string;
  readonly snapshot: JobSnapshot;
}

export interface PersistentOp {
  readonly rank: number;
  readonly commId: string;
  readonly commName: string;
  readonly kind: QueueKind;
  readonly op: Operation;
  /** Index of the first snapshot of its unbroken run (snapshots its rank was not read in do not break it). */
  readonly since: number;
  /** Snapshots of that run in which its rank was read. */
  readonly snapshots: number;
  /** The rank's last read: the last snapshot unless the rank was not read in it. */
  readonly lastRead: number;
}

/** Per snapshot and rank (Timeline.readState). */
export const RANK_ABSENT = 0;
export const RANK_READ = 1;
export const RANK_NOT_READ = 2;

export interface Timeline {
  readonly ids: readonly string[];
  readonly times: readonly string[];
  /** The same times, epoch ms. */
  readonly millis: readonly number[];
  readonly worldSize: number;
  /** Queue length: [snapshot * worldSize * 3 + rank * 3 + kind]. */
  readonly depth: Uint32Array;
  /** Of those, operations unchanged since their rank's previous read. */
  readonly persisted: Uint32Array;
  /** Sum over ranks: [snapshot * 3 + kind]. */
  readonly totals: Uint32Array;
  readonly persistedTotals: Uint32Array;
  /** [snapshot * worldSize + rank]: RANK_READ, RANK_NOT_READ (listed, state not ok) or RANK_ABSENT. */
  readonly readState: Uint8Array;
  /** Per snapshot: what was read, and what changed against each rank's previous read. */
  readonly status: readonly SnapshotReadStatus[];
  readonly changes: readonly SnapshotChange[];
  readonly stillness: Stillness | null;
  /**
   * [snapshot * 3 + kind]: 1 when some read rank's library showed that queue, 0 when none did
   * (the library cannot read it: "not readable", never a count of 0).
   */
  readonly readable: Uint8Array;
  /** One line: "No change since 10:47 PM (20 snapshots); ranks 0-3 wait." */
  readonly headline: string;
  /** Operations at their rank's last read that persisted through two reads or more, oldest run first. */
  readonly longest: readonly PersistentOp[];
  /** Longest is capped to this many entries. */
  readonly longestTotal: number;
  /** The snapshots, in time order (for the not-read reasons of a hovered cell). */
  readonly snapshots: readonly JobSnapshot[];
}

const LONGEST_LIMIT = 200;

/**
 * `run`: the run of equal snapshots over the job's whole history (use-series.ts counts it from
 * the snapshot list), so the headline's "since" is the run's first snapshot, not the window's.
 */
export function buildTimeline(inputs: readonly TimelineInput[], run: UnchangedRun | null = null): Timeline {
  const series = [...inputs].sort((a, b) => a.takenAt.localeCompare(b.takenAt));
  const snapshots = series.map((s) => s.snapshot);
  const worldSize = series.reduce((m, s) => Math.max(m, worldSizeOf(s.snapshot)), 0);
  const stride = worldSize * KIND_COUNT;
  const depth = new Uint32Array(series.length * stride);
  const persisted = new Uint32Array(series.length * stride);
  const totals = new Uint32Array(series.length * KIND_COUNT);
  const persistedTotals = new Uint32Array(series.length * KIND_COUNT);
  const readState = new Uint8Array(series.length * worldSize);
  const readable = new Uint8Array(series.length * KIND_COUNT);
  snapshots.forEach((snap, si) => {
    for (const r of snap.ranks) {
      if (r.state.kind !== 'ok') continue;
      for (const c of r.communicators)
        for (const q of ['sends', 'receives', 'unexpected'] as const)
          if (c[q] !== null) readable[si * KIND_COUNT + KIND_INDEX[q]] = 1;
    }
  });
  // Per rank: the persisted operations of the snapshot its last visited operation came from,
  // and whether it had a pending send or receive there.
  const lastOps = new Map<number, { snapshot: number; ops: PersistentOp[]; waits: boolean }>();
  const history = walkOpHistory(snapshots, (h) => {
    const k = KIND_INDEX[h.queue];
    const r = h.rank.rank;
    const at = h.snapshot * stride + r * KIND_COUNT + k;
    depth[at] = (depth[at] ?? 0) + 1;
    totals[h.snapshot * KIND_COUNT + k] = (totals[h.snapshot * KIND_COUNT + k] ?? 0) + 1;
    if (h.since < h.snapshot) {
      persisted[at] = (persisted[at] ?? 0) + 1;
      persistedTotals[h.snapshot * KIND_COUNT + k] = (persistedTotals[h.snapshot * KIND_COUNT + k] ?? 0) + 1;
    }
    let mine = lastOps.get(r);
    if (!mine || mine.snapshot !== h.snapshot) {
      mine = { snapshot: h.snapshot, ops: [], waits: false };
      lastOps.set(r, mine);
    }
    if (h.queue !== 'unexpected' && h.op.status === 'pending') mine.waits = true;
    if (h.readsInRun >= 2) {
      const c = h.rank.communicators[h.commIndex];
      mine.ops.push({
        rank: r,
        commId: c?.id ?? '',
        commName: c?.name ?? '',
        kind: h.queue,
        op: h.op,
        since: h.since,
        snapshots: h.readsInRun,
        lastRead: h.snapshot,
      });
    }
  });
  const lastRead = new Int32Array(worldSize).fill(-1);
  snapshots.forEach((snap, si) => {
    for (const r of snap.ranks) {
      if (r.rank >= worldSize) continue;
      readState[si * worldSize + r.rank] = r.state.kind === 'ok' ? RANK_READ : RANK_NOT_READ;
    }
  });
  history.readRanks.forEach((ranks, si) => {
    for (const r of ranks) if (r < worldSize) lastRead[r] = si;
  });
  const longest: PersistentOp[] = [];
  const waiting: number[] = [];
  for (const [r, mine] of lastOps) {
    // A rank read later with nothing queued has no operation left from this snapshot.
    if (mine.snapshot !== lastRead[r]) continue;
    longest.push(...mine.ops);
    if (mine.waits) waiting.push(r);
  }
  longest.sort((a, b) => a.since - b.since || b.snapshots - a.snapshots || a.rank - b.rank);
  const millis = series.map((s) => Date.parse(s.takenAt));
  const still = stillness(history);
  return {
    ids: series.map((s) => s.id),
    times: series.map((s) => s.takenAt),
    millis,
    worldSize,
    depth,
    persisted,
    totals,
    persistedTotals,
    readState,
    readable,
    status: history.snapshots.map((s) => s.status),
    changes: history.snapshots,
    stillness: still,
    headline: stillnessText(still, millis, compressRanks(waiting), (t) => formatSince(t), run),
    longest: longest.slice(0, LONGEST_LIMIT),
    longestTotal: longest.length,
    snapshots,
  };
}

/** Depth of one cell for a kind selector ('all' sums the three kinds). */
export function depthAt(
  t: Timeline,
  arr: Uint32Array,
  snapshot: number,
  rank: number,
  kind: QueueKind | 'all',
): number {
  const o = snapshot * t.worldSize * KIND_COUNT + rank * KIND_COUNT;
  if (kind === 'all') return (arr[o] ?? 0) + (arr[o + 1] ?? 0) + (arr[o + 2] ?? 0);
  return arr[o + KIND_INDEX[kind]] ?? 0;
}

/** One point of the totals chart: a snapshot (its index in the timeline) and a count, null = unknown. */
export interface ChartPoint {
  readonly snapshot: number;
  readonly value: number | null;
}

/**
 * The totals chart of one kind: the queue depth at every snapshot (null where no rank was
 * read: a gap, not a drop to 0), and the operations unchanged since their rank's previous read
 * from the second snapshot on (null where nothing could be compared). The first snapshot has no
 * previous one, so that line has no point there.
 */
export function totalsSeries(
  t: Timeline,
  kind: QueueKind,
): { totals: ChartPoint[]; persisted: ChartPoint[] } {
  const k = KIND_INDEX[kind];
  const at = (arr: Uint32Array, s: number) => {
    const v = arr[s * KIND_COUNT + k];
    if (v === undefined) throw new Error(`timeline: no total for snapshot ${s} of ${t.ids.length}`);
    return v;
  };
  const totals: ChartPoint[] = [];
  const persisted: ChartPoint[] = [];
  for (let s = 0; s < t.ids.length; s++) {
    // A queue no read rank's library could show is unknown: a gap, like a snapshot not read.
    const failed = t.status[s]?.kind === 'failed' || !isReadable(t, s, kind);
    totals.push({ snapshot: s, value: failed ? null : at(t.totals, s) });
    if (s > 0)
      persisted.push({
        snapshot: s,
        value: failed || (t.changes[s]?.compared ?? 0) === 0 ? null : at(t.persistedTotals, s),
      });
  }
  return { totals, persisted };
}

/** Some read rank's library showed this queue in snapshot `s` (false: "not readable"). */
export function isReadable(t: Pick<Timeline, 'readable' | 'status'>, s: number, kind: QueueKind): boolean {
  if (t.status[s]?.kind === 'failed') return true;
  return t.readable[s * KIND_COUNT + KIND_INDEX[kind]] === 1;
}

/** Kinds some read snapshot could not read on any rank (the legend's "not readable" entry). */
export function unreadableKinds(t: Pick<Timeline, 'readable' | 'status' | 'ids'>): QueueKind[] {
  const out: QueueKind[] = [];
  for (const k of ['sends', 'receives', 'unexpected'] as const)
    for (let s = 0; s < t.ids.length; s++)
      if (!isReadable(t, s, k)) {
        out.push(k);
        break;
      }
  return out;
}

/**
 * Rank axis ticks: distinct whole ranks in [0, n), about one per `minPx` of the axis, so the
 * axis never reads "0 1 1 2 2" (fractional ticks printed as integers).
 */
export function rankTicks(n: number, px: number, minPx = 28): number[] {
  if (n <= 0) return [];
  const count = Math.max(1, Math.floor(px / minPx));
  const ticks = scaleLinear()
    .domain([0, n - 1])
    .ticks(Math.min(count, n))
    .filter((v) => Number.isInteger(v) && v >= 0 && v < n);
  return ticks.length > 0 ? ticks : [0];
}

/** Widest and narrowest snapshot column of the heatmap, CSS px. */
export const MAX_COLUMN_PX = 40;
export const MIN_COLUMN_PX = 2;
/** Least CSS px between two time labels. */
export const TIME_LABEL_PX = 90;

export interface TimeLayout {
  /** Snapshot time (epoch ms) to the x of its column's centre. */
  readonly x: ScaleTime<number, number>;
  /** Width of a snapshot column. */
  readonly column: number;
  /** Time ticks, thinned so that no two labels are closer than TIME_LABEL_PX. */
  readonly ticks: Date[];
}

/**
 * A real time axis over the snapshots: each at its time, so a pause between snapshots is a
 * gap. Columns are as wide as the closest pair allows (within MIN/MAX_COLUMN_PX); a single
 * snapshot (or several at one time) is centred with a minute either side.
 */
export function timeLayout(millis: readonly number[], width: number): TimeLayout {
  const valid = millis.filter(Number.isFinite);
  const lo = valid.length > 0 ? Math.min(...valid) : 0;
  const hi = valid.length > 0 ? Math.max(...valid) : 0;
  const x = scaleTime<number, number>();
  let column = MAX_COLUMN_PX;
  if (hi <= lo) {
    column = Math.max(MIN_COLUMN_PX, Math.min(MAX_COLUMN_PX, width / 3));
    x.domain([new Date(lo - 60_000), new Date(lo + 60_000)]).range([0, width]);
  } else {
    const sorted = [...valid].sort((a, b) => a - b);
    let gap = hi - lo;
    for (let i = 1; i < sorted.length; i++) {
      const d = (sorted[i] ?? 0) - (sorted[i - 1] ?? 0);
      if (d > 0 && d < gap) gap = d;
    }
    // Twice: the column width decides the inner width, which decides the closest gap in px.
    for (let i = 0; i < 2; i++) {
      const inner = Math.max(1, width - column);
      column = Math.max(MIN_COLUMN_PX, Math.min(MAX_COLUMN_PX, (gap / (hi - lo)) * inner * 0.8));
    }
    x.domain([new Date(lo), new Date(hi)]).range([column / 2, Math.max(column / 2, width - column / 2)]);
  }
  const ticks: Date[] = [];
  let last = Number.NEGATIVE_INFINITY;
  // Labels print whole seconds: sub-second ticks would print the same second twice.
  const wholeSeconds = hi - lo >= 2000;
  for (const t of x.ticks(Math.max(2, Math.floor(width / TIME_LABEL_PX)))) {
    if (wholeSeconds && t.getTime() % 1000 !== 0) continue;
    const px = x(t);
    if (px - last < TIME_LABEL_PX || px < 0 || px > width) continue;
    ticks.push(t);
    last = px;
  }
  return { x, column, ticks };
}
