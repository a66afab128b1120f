// The message matrix's edges on the page: the model's edge table (@mqd/model's edges/edge-table.ts:
// one flat table of every queued operation, as a struct of typed arrays) and its filters
// (edges/edge-filter.ts), with what the cell panel and the worker add. This file's runtime
// imports are the model's worker-light leaves only, so the worker bundle stays small.

export {
  type CompiledFilter,
  compileFilter,
  edgePasses,
  isNoFilter,
  type MatrixFilter,
  NO_FILTER,
} from '@mqd/model/edge-filter';
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

import { type CompiledFilter, edgePasses } from '@mqd/model/edge-filter';
import type { EdgeColumns } from '@mqd/model/edge-table';
import { ANY_PEER } from '../matrix-types.js';

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
