// The message matrix's filters over the edge table (edge-table.ts): a filter compiled once, then
// tested per edge by the aggregation (pyramid.ts: the page's worker, and the server for the
// overview's first level) and the page's cell panel. A worker-light leaf like edge-table.ts: its
// runtime imports are that file only, so the page's matrix worker bundle stays small.
import { QUEUE_KINDS, type QueueKind } from '../snapshot-spec.js';
import { type CommSummary, type EdgeColumns, KIND_INDEX, matrixCommKey } from './edge-table.js';

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

export const NO_FILTER: MatrixFilter = { comm: null, tag: null, kinds: [...QUEUE_KINDS] };

/** Whether `f` lets every edge through (what the overview's first level was aggregated with). */
export function isNoFilter(f: MatrixFilter): boolean {
  return (
    f.comm === null &&
    f.tag === null &&
    (f.ranks ?? null) === null &&
    NO_FILTER.kinds.every((k) => f.kinds.includes(k))
  );
}

/** A filter compiled against one table: a predicate on edge indices. */
export interface CompiledFilter {
  readonly commIndex: number;
  readonly tag: number | null;
  readonly kindMask: number;
  /** 1 for each selected world rank (index = rank); null = every rank passes. */
  readonly rankMask: Uint8Array | null;
}

/** "0-2,5" as a mask (this leaf imports nothing from the model's index, so no expandRanks). */
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
