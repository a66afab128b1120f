// The message matrix's table of every queued operation, as a struct of typed arrays (Perfetto's
// slice tracks do the same): filled once per snapshot (build-edges.ts, in the page or on the
// server for the snapshot's overview), copied to the dashboard's aggregation worker without a
// structured clone of the snapshot, and scanned linearly for the operations of a clicked cell.
//
// A leaf with no runtime import: the dashboard's worker bundle imports it alone
// (`@mqd/model/edge-table`), so it stays small.
import { type LengthUnit, QUEUE_KINDS, type QueueKind } from '../snapshot-spec.js';

/** Sender or receiver index of an operation whose peer is MPI_ANY_SOURCE or unknown (EdgeColumns.peerUnknown tells which). */
export const ANY_PEER = -1;

/** Queue kinds as small integers, for typed arrays. */
export const KIND_SENDS = 0;
export const KIND_RECEIVES = 1;
export const KIND_UNEXPECTED = 2;
export const KIND_COUNT = 3;
export const KIND_INDEX: Record<QueueKind, number> = {
  sends: KIND_SENDS,
  receives: KIND_RECEIVES,
  unexpected: KIND_UNEXPECTED,
};
export const KIND_OF_INDEX: readonly QueueKind[] = QUEUE_KINDS;

/** The unit a queue kind's sizes are in: one length unit, `mixed` across ranks, null when none is known. */
export type KindUnit = LengthUnit | 'mixed' | null;

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

/** Every typed-array column of an EdgeTable, by name (the order of EdgeColumns, then the positions). */
export const EDGE_TABLE_COLUMNS = [
  'src',
  'dst',
  'kind',
  'size',
  'tag',
  'tagAny',
  'comm',
  'peerUnknown',
  'owner',
  'commPos',
  'opPos',
] as const;

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
