// The message matrix's filters over the model's edge table (@mqd/model's edges/edge-table.ts:
// one flat table of every queued operation, as a struct of typed arrays): a filter compiled once,
// then tested per edge by the aggregation worker and the cell panel. This file's runtime imports
// are the model's worker-light leaf only, so the worker bundle stays small.
import type { QueueKind } from '@mqd/model';

export {
  type CommSummary,
  type EdgeColumns,
  type EdgeTable,
  type KindUnit,
  matrixCommKey,
  SELF_FAMILY,
} from '@mqd/model/edge-table';
// The kind codes and ANY_PEER are the leaf ../matrix-types.ts's (shared code imports them there).
export {
  ANY_PEER,
  KIND_COUNT,
  KIND_INDEX,
  KIND_OF_INDEX,
  KIND_RECEIVES,
  KIND_SENDS,
  KIND_UNEXPECTED,
} from '../matrix-types.js';

import { type CommSummary, type EdgeColumns, matrixCommKey } from '@mqd/model/edge-table';
import { ANY_PEER, KIND_INDEX } from '../matrix-types.js';

/** What the matrix shows. Edges failing any test are left out of every count. */
export interface MatrixFilter {
  /** A CommSummary.key, or null for all communicators. */
  readonly comm: string | null;
  /** Only this tag (MPI_ANY_TAG receives included: they would take it); null = all tags. */
  readonly tag: number | null;
  readonly kinds: readonly QueueKind[];
  /** Only operations to or from these world ranks, as ranges ("0-2,5"); null = all ranks. */
  readonly ranks?: string | null;
}

export const NO_FILTER: MatrixFilter = { comm: null, tag: null, kinds: ['sends', 'receives', 'unexpected'] };

/** A filter compiled against one table: a predicate on edge indices. */
export interface CompiledFilter {
  readonly commIndex: number;
  readonly tag: number | null;
  readonly kindMask: number;
  /** 1 for each selected world rank (index = rank); null = every rank passes. */
  readonly rankMask: Uint8Array | null;
}

/** "0-2,5" as a mask (this file has no runtime dependency on @mqd/model, so no expandRanks). */
function rankMask(text: string): Uint8Array {
  let max = -1;
  const parts = text.split(',').map((p) => p.split('-').map(Number));
  for (const p of parts) max = Math.max(max, ...p.filter(Number.isFinite));
  const mask = new Uint8Array(Math.min(max + 1, 1 << 24));
  for (const [lo = 0, hi = lo] of parts) for (let r = lo; r <= hi && r < mask.length; r++) mask[r] = 1;
  return mask;
}

export function compileFilter(filter: MatrixFilter, comms: readonly CommSummary[]): CompiledFilter {
  let kindMask = 0;
  for (const k of filter.kinds) kindMask |= 1 << KIND_INDEX[k];
  // An unknown communicator key matches nothing (-2), rather than silently showing everything.
  // A link naming one rank's MPI_COMM_SELF selects the family it belongs to.
  const want = filter.comm === null ? null : matrixCommKey(filter.comm);
  const commIndex = want === null ? -1 : comms.findIndex((c) => c.key === want);
  return {
    commIndex: filter.comm !== null && commIndex < 0 ? -2 : commIndex,
    tag: filter.tag,
    kindMask,
    rankMask: filter.ranks ? rankMask(filter.ranks) : null,
  };
}

export function edgePasses(t: EdgeColumns, f: CompiledFilter, i: number): boolean {
  if (((f.kindMask >> (t.kind[i] ?? 0)) & 1) === 0) return false;
  if (f.commIndex !== -1 && t.comm[i] !== f.commIndex) return false;
  if (f.tag !== null && t.tagAny[i] === 0 && t.tag[i] !== f.tag) return false;
  const m = f.rankMask;
  if (m !== null && m[t.src[i] ?? -1] !== 1 && m[t.dst[i] ?? -1] !== 1) return false;
  return true;
}

export type { CellRange } from '../matrix-types.js';

import type { CellRange } from '../matrix-types.js';

function inRange(v: number, start: number, size: number): boolean {
  return start === ANY_PEER ? v === ANY_PEER : v >= start && v < start + size;
}

/** Edge indices of the operations in a cell (or a block, or a strip segment), in table order. */
export function edgesInCell(
  t: EdgeColumns,
  f: CompiledFilter,
  cell: CellRange,
  limit: number,
): { indices: number[]; total: number } {
  const indices: number[] = [];
  let total = 0;
  for (let i = 0; i < t.length; i++) {
    if (!inRange(t.src[i] ?? 0, cell.row, cell.size) || !inRange(t.dst[i] ?? 0, cell.col, cell.size))
      continue;
    if (!edgePasses(t, f, i)) continue;
    total++;
    if (indices.length < limit) indices.push(i);
  }
  return { indices, total };
}

/**
 * Operations of an any-sender strip segment (row ANY_PEER) that pass the filter, per kind:
 * receives from MPI_ANY_SOURCE apart from operations whose sender is unknown.
 */
export function anySenderSplit(
  t: EdgeColumns,
  f: CompiledFilter,
  cell: CellRange,
): { wildcard: number[]; unknown: number[] } {
  const wildcard = [0, 0, 0];
  const unknown = [0, 0, 0];
  if (cell.row !== ANY_PEER) return { wildcard, unknown };
  for (let i = 0; i < t.length; i++) {
    if (t.src[i] !== ANY_PEER || !inRange(t.dst[i] ?? 0, cell.col, cell.size) || !edgePasses(t, f, i))
      continue;
    const into = t.peerUnknown[i] === 1 ? unknown : wildcard;
    const k = t.kind[i] ?? 0;
    into[k] = (into[k] ?? 0) + 1;
  }
  return { wildcard, unknown };
}

/** The columns only, as fresh copies whose buffers can be transferred to a worker. */
export function copyColumns(t: EdgeColumns): EdgeColumns {
  return {
    worldSize: t.worldSize,
    length: t.length,
    src: t.src.slice(),
    dst: t.dst.slice(),
    kind: t.kind.slice(),
    size: t.size.slice(),
    tag: t.tag.slice(),
    tagAny: t.tagAny.slice(),
    comm: t.comm.slice(),
    peerUnknown: t.peerUnknown.slice(),
  };
}

export function columnBuffers(t: EdgeColumns): ArrayBuffer[] {
  return [t.src, t.dst, t.kind, t.size, t.tag, t.tagAny, t.comm, t.peerUnknown].map(
    (a) => a.buffer as ArrayBuffer,
  );
}
