// What one matrix cell holds, in lines of text: the pointer's tooltip and the keyboard focus's
// announcement say the same thing (ranks, counts and sizes per queue, ranks not read, marks).
import {
  type JobSnapshot,
  notReadReason,
  QUEUE_KINDS,
  QUEUE_LABEL,
  type QueueKind,
  rankNotReadText,
  type SnapshotIndex,
} from '@mqd/model';
import { formatCount, formatKindSize } from '../format.js';

/** Where a world rank sits in the snapshot, and the world's size (the model's SnapshotIndex). */
type RankIndex = Pick<SnapshotIndex, 'worldSize' | 'positionOf'>;

import { ANY_PEER, KIND_INDEX, type KindUnit } from './edges.js';
import { blockValues, stripUnknown } from './pyramid.js';
import type { RankNotes } from './rank-notes.js';
import type { MatrixHit } from './renderer.js';

export interface CellTextContext {
  /** Ranks per matrix side. */
  readonly n: number;
  readonly kindUnit: readonly KindUnit[];
  readonly lengthUnit: 'bytes' | 'elements';
  readonly notes: RankNotes;
  /** Null (as is `snapshot`) while only the snapshot's overview is here: why a rank was not read is then not known yet. */
  readonly rankIndex: RankIndex | null;
  readonly snapshot: JobSnapshot | null;
}

export function rangeText(start: number, size: number, n: number, anyText: string): string {
  if (start === ANY_PEER) return anyText;
  const end = Math.min(n, start + size) - 1;
  return end <= start ? String(start) : `${start}–${end}`;
}

/** Per-kind counts as words: "3 posted receives, 1 unexpected message"; "none" when all are 0. */
function kindCounts(counts: readonly number[]): string {
  const parts: string[] = [];
  for (const k of QUEUE_KINDS as readonly QueueKind[]) {
    const c = counts[KIND_INDEX[k]] ?? 0;
    if (c > 0) parts.push(`${formatCount(c)} ${c === 1 ? QUEUE_LABEL[k].replace(/s$/, '') : QUEUE_LABEL[k]}`);
  }
  return parts.length === 0 ? 'none' : parts.join(', ');
}

/**
 * The any-sender strip's two meanings counted apart: "MPI_ANY_SOURCE: 3 posted
 * receives; sender unknown: 1 posted receive". Per kind, indexed by KIND_INDEX.
 */
export function anySenderText(wildcard: readonly number[], unknown: readonly number[]): string {
  return `MPI_ANY_SOURCE: ${kindCounts(wildcard)}; sender unknown: ${kindCounts(unknown)}`;
}

/** Who the senders of an any-sender strip segment are, from its two counts. */
export function anySenderLabel(wildcard: number, unknown: number): string {
  if (unknown === 0) return 'MPI_ANY_SOURCE';
  if (wildcard === 0) return 'unknown sender';
  return 'MPI_ANY_SOURCE or unknown sender';
}

/** The cell's lines; `action` ends them when the cell has operations ("click to list them"). */
export function cellLines(hit: MatrixHit, ctx: CellTextContext, action: string): string[] {
  const v = blockValues(hit.level, hit.blockRow, hit.blockCol);
  const unknown = hit.row === ANY_PEER ? stripUnknown(hit.level, hit.blockCol) : ([0, 0, 0] as const);
  const wildcard = v.count.map((c, i) => c - (unknown[i] ?? 0));
  const sum = (a: readonly number[]) => a.reduce((x, y) => x + y, 0);
  const senders = rangeText(hit.row, hit.size, ctx.n, anySenderLabel(sum(wildcard), sum(unknown)));
  const receivers = rangeText(hit.col, hit.size, ctx.n, 'unknown destination');
  const lines: string[] = [`${hit.row === ANY_PEER ? senders : `sender ${senders}`} → receiver ${receivers}`];
  let total = 0;
  for (const k of QUEUE_KINDS as readonly QueueKind[]) {
    const i = KIND_INDEX[k];
    const c = v.count[i] ?? 0;
    total += c;
    if (c > 0)
      lines.push(
        `${QUEUE_LABEL[k]}: ${formatCount(c)} (${formatKindSize(v.bytes[i] ?? 0, ctx.kindUnit[i] ?? null, ctx.lengthUnit)})`,
      );
  }
  if (hit.row === ANY_PEER && sum(v.count) > 0) lines.push(anySenderText(wildcard, unknown));
  const about = [
    ...rankLines(ctx, hit.row, hit.size, 'sender', 'its sends are unknown'),
    ...(hit.col !== hit.row || hit.size > 1
      ? rankLines(ctx, hit.col, hit.size, 'receiver', 'its receives are unknown')
      : []),
  ];
  // Zero operations among ranks not read is what was seen, not what is there.
  if (total === 0)
    lines.push(about.some((l) => l.includes('not read')) ? 'no operations known' : 'no operations');
  lines.push(...about);
  if (total > 0) lines.push(action);
  return lines;
}

/** Not read / odd out / outlier lines for the ranks of a row or column range. */
function rankLines(
  ctx: CellTextContext,
  start: number,
  size: number,
  role: string,
  unknown: string,
): string[] {
  if (start < 0) return [];
  const end = Math.min(ctx.n, start + size);
  const out: string[] = [];
  const unread: string[] = [];
  for (let r = start; r < end; r++) {
    if (ctx.notes.notRead?.[r] === 1) {
      const pos = ctx.rankIndex?.positionOf(r);
      const entry = pos === undefined ? undefined : ctx.snapshot?.ranks[pos];
      if (entry && entry.state.kind !== 'ok')
        unread.push(size === 1 ? (rankNotReadText(entry) ?? '') : notReadReason(entry.state));
      else if (ctx.snapshot === null)
        unread.push(size === 1 ? `rank ${r} not read` : 'the reasons load with the snapshot');
    }
    if (size === 1) for (const w of ctx.notes.why.get(r) ?? []) out.push(`${role} rank ${r}: ${w}`);
  }
  if (unread.length > 0) {
    out.unshift(
      size === 1
        ? `${unread[0]} (${unknown})`
        : `${formatCount(unread.length)} ${role} ranks not read: ${[...new Set(unread)].join('; ')}`,
    );
  }
  return out;
}
