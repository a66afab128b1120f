// Queue depth per rank and kind across a job's snapshots, and which operations persisted
// unchanged from one snapshot to the next (the usual sign of a hang: the same receive, same
// buffer, same peer and tag, snapshot after snapshot). Pure; typed arrays for 16,384 ranks.
import type { JobSnapshot, Operation, QueueKind } from '@mqd/model';
import { KIND_COUNT, KIND_INDEX, KIND_OF_INDEX } from '../matrix/edges.js';
import { indexRanks } from '../snapshot-index.js';

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
  /** Index of the first snapshot of the unbroken run that reaches the last snapshot. */
  readonly since: number;
  /** Snapshots in that run. */
  readonly snapshots: number;
}

export interface Timeline {
  readonly ids: readonly string[];
  readonly times: readonly string[];
  readonly worldSize: number;
  /** Queue length: [snapshot * worldSize * 3 + rank * 3 + kind]. */
  readonly depth: Uint32Array;
  /** Of those, operations also present, unchanged, in the previous snapshot. */
  readonly persisted: Uint32Array;
  /** Sum over ranks: [snapshot * 3 + kind]. */
  readonly totals: Uint32Array;
  readonly persistedTotals: Uint32Array;
  /** Operations present in the last snapshot that persisted through at least two snapshots, longest first. */
  readonly longest: readonly PersistentOp[];
  /** Longest run is capped to this many entries. */
  readonly longestTotal: number;
}

/** Identity of an operation across snapshots: everything the library reports about it. */
export function opKey(rank: number, commId: string, kind: QueueKind, op: Operation): string {
  return `${rank}|${commId}|${kind}|${op.peer.local}|${op.peer.global}|${op.tag}|${op.length}|${op.buffer}|${op.status}|${op.systemBuffer ? 1 : 0}`;
}

const LONGEST_LIMIT = 200;

export function buildTimeline(inputs: readonly TimelineInput[]): Timeline {
  const series = [...inputs].sort((a, b) => a.takenAt.localeCompare(b.takenAt));
  const worldSize = series.reduce((m, s) => Math.max(m, indexRanks(s.snapshot).worldSize), 0);
  const stride = worldSize * KIND_COUNT;
  const depth = new Uint32Array(series.length * stride);
  const persisted = new Uint32Array(series.length * stride);
  const totals = new Uint32Array(series.length * KIND_COUNT);
  const persistedTotals = new Uint32Array(series.length * KIND_COUNT);
  // key -> how many copies were in the previous snapshot, and when their run began.
  let prev = new Map<string, { copies: number; since: number }>();
  let lastOps: PersistentOp[] = [];
  series.forEach((s, si) => {
    const cur = new Map<string, { copies: number; since: number }>();
    const ops: PersistentOp[] = [];
    for (const r of s.snapshot.ranks) {
      for (const c of r.communicators) {
        for (const kind of KIND_OF_INDEX) {
          const q = c[kind];
          if (!q) continue;
          const k = KIND_INDEX[kind];
          const at = si * stride + r.rank * KIND_COUNT + k;
          depth[at] = (depth[at] ?? 0) + q.length;
          totals[si * KIND_COUNT + k] = (totals[si * KIND_COUNT + k] ?? 0) + q.length;
          for (const op of q) {
            const key = opKey(r.rank, c.id, kind, op);
            const before = prev.get(key);
            let since = si;
            // Equal operations are counted as a multiset: two identical receives persist only if both were there before.
            if (before && before.copies > 0) {
              before.copies--;
              since = before.since;
              persisted[at] = (persisted[at] ?? 0) + 1;
              persistedTotals[si * KIND_COUNT + k] = (persistedTotals[si * KIND_COUNT + k] ?? 0) + 1;
            }
            const entry = cur.get(key);
            if (entry) {
              entry.copies++;
              entry.since = Math.max(entry.since, since);
            } else cur.set(key, { copies: 1, since });
            if (si === series.length - 1 && since < si) {
              ops.push({
                rank: r.rank,
                commId: c.id,
                commName: c.name,
                kind,
                op,
                since,
                snapshots: si - since + 1,
              });
            }
          }
        }
      }
    }
    prev = cur;
    lastOps = ops;
  });
  lastOps.sort((a, b) => b.snapshots - a.snapshots || a.rank - b.rank);
  return {
    ids: series.map((s) => s.id),
    times: series.map((s) => s.takenAt),
    worldSize,
    depth,
    persisted,
    totals,
    persistedTotals,
    longest: lastOps.slice(0, LONGEST_LIMIT),
    longestTotal: lastOps.length,
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

/** One point of the totals chart: a snapshot (its index in the timeline) and a count. */
export interface ChartPoint {
  readonly snapshot: number;
  readonly value: number;
}

/**
 * The totals chart of one kind: the queue depth at every snapshot, and the operations
 * unchanged since the previous snapshot from the second snapshot on. The first snapshot has no
 * previous one: there is nothing to compare, which is not zero, so that line has no point there.
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
    totals.push({ snapshot: s, value: at(t.totals, s) });
    if (s > 0) persisted.push({ snapshot: s, value: at(t.persistedTotals, s) });
  }
  return { totals, persisted };
}
