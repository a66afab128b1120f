// The message matrix starts from one flat table of every queued operation, as a struct of
// typed arrays (Perfetto's slice tracks do the same): it is walked once per snapshot, copied to
// the aggregation worker without a structured clone of the snapshot, and scanned linearly for
// the operations of a clicked cell. This file has no runtime dependency on @mqd/model, so the
// worker bundle stays small; build-edges.ts fills the table from a snapshot.
import type { QueueKind } from '@mqd/model';

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

import { ANY_PEER, KIND_INDEX } from '../matrix-types.js';

/** The columns the aggregation needs (what goes to the worker). */
export interface EdgeColumns {
  readonly worldSize: number;
  readonly length: number;
  /** World rank of the sender: the matrix row. ANY_PEER for ANY_SOURCE receives or unknown senders (peerUnknown tells them apart). */
  readonly src: Int32Array;
  /** World rank of the receiver: the matrix column. ANY_PEER when a send's destination is unknown. */
  readonly dst: Int32Array;
  /** KIND_SENDS / KIND_RECEIVES / KIND_UNEXPECTED. */
  readonly kind: Uint8Array;
  /** Operation.length, in the operation's unit (its kind's: EdgeTable.kindUnit). */
  readonly size: Float64Array;
  readonly tag: Int32Array;
  /** 1 when the tag is MPI_ANY_TAG (tag column then holds 0). */
  readonly tagAny: Uint8Array;
  /** Index into EdgeTable.comms. */
  readonly comm: Uint32Array;
  /**
   * 1 when the operation's ANY_PEER is a peer that cannot be resolved (the model's PEER_UNKNOWN),
   * 0 for MPI_ANY_SOURCE (PEER_ANY) and for resolved peers: the strip holds both, told apart.
   */
  readonly peerUnknown: Uint8Array;
}

/** A communicator as the filters see it: one key across all processes that share it. */
export interface CommSummary {
  readonly key: string;
  readonly label: string;
  readonly ops: number;
  /** The communicator's name ("" when unnamed) and size, as its first process reports them. */
  readonly name: string;
  readonly size: number;
  /**
   * Its world ranks as ranges ("0-510" or "0,2,4"): the group when the library shows it, else
   * the processes that reported it. For a per-rank family (SELF_FAMILY) every member's rank.
   */
  readonly members: string;
  /** How many ranks `members` names. */
  readonly memberCount: number;
}

/**
 * Key suffix of a family of size-1 communicators: every rank's MPI_COMM_SELF (or a dup of it)
 * has its own group, so commKey gives each rank its own key. The matrix shows them as one
 * entry, "MPI_COMM_SELF#1#each", not 16,384.
 */
export const SELF_FAMILY = 'each';

/** The matrix's key for a communicator key: size-1 communicators fold into their name's family. */
export function matrixCommKey(key: string): string {
  const m = /^(.*)#1#[^#]*$/.exec(key);
  return m ? `${m[1]}#1#${SELF_FAMILY}` : key;
}

/**
 * The unit of the lengths of one queue kind across the snapshot: one unit, 'mixed' when its
 * operations count in different units (an MPMD job of MPICH ch3 and ch4 ranks), null when the
 * kind has no operation. MPICH ch4's unexpected messages count bytes, all else elements.
 */
export type { KindUnit } from '../matrix-types.js';

import type { KindUnit } from '../matrix-types.js';

export interface EdgeTable extends EdgeColumns {
  /** Per kind (KIND_SENDS...), the unit its `size` values are in. */
  readonly kindUnit: readonly KindUnit[];
  /** Position in snapshot.ranks of the process whose queue holds the operation. */
  readonly owner: Int32Array;
  /** Position of the communicator in that process's communicators. */
  readonly commPos: Uint32Array;
  /** Position in the queue (0 = matched first). */
  readonly opPos: Uint32Array;
  readonly comms: readonly CommSummary[];
}

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
