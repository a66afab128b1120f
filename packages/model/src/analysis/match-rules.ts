// MPI's matching rule, once, for every analysis that pairs a message with a receive (the near
// misses, the matching order of one rank): a message matches a receive when the communicator
// is the same (commKey, across processes), the receive's source is MPI_ANY_SOURCE or the
// sender, and its tag is MPI_ANY_TAG or equal. Differences are a bit mask so the scans over
// 16,384 ranks allocate nothing until a candidate is kept.

import { PEER_ANY } from '../mpi/world.js';
import { type LengthUnit, type Operation, opLengthUnit } from '../snapshot-spec.js';
import { isCollectiveInternal } from './comm.js';
import type { CommEntry, SnapshotIndex } from './snapshot-index.js';

export type MatchField = 'tag' | 'source' | 'communicator';

export const F_COMM = 1;
export const F_SOURCE = 2;
export const F_TAG = 4;

/** One side of a match: a receive (what it wants) or a message (what it carries). */
export interface MatchSide {
  /** SnapshotIndex key id of the communicator. */
  readonly keyId: number;
  /**
   * Rank position of the receive's source or of the message's sender: PEER_ANY for
   * MPI_ANY_SOURCE, PEER_UNKNOWN when it cannot be mapped to a process of the snapshot.
   */
  readonly peer: number;
  /** The same peer as a rank in the communicator, null when unknown (or ANY). */
  readonly local: number | null;
  /** null = MPI_ANY_TAG (receives only). */
  readonly tag: number | null;
}

/**
 * The fields in which message `have` fails receive `want` (0 = it matches). Within one
 * communicator the local ranks decide the source when both are known (they need no group);
 * otherwise the rank positions do, and two peers that cannot be mapped are not told apart:
 * the analysis assumes what it cannot check is satisfiable.
 */
export function diffMask(want: MatchSide, have: MatchSide): number {
  let m = 0;
  if (want.keyId !== have.keyId) m |= F_COMM;
  if (want.peer !== PEER_ANY) {
    const byLocal =
      m === 0 && want.local !== null && want.local >= 0 && have.local !== null && have.local >= 0;
    if (byLocal ? want.local !== have.local : want.peer !== have.peer) m |= F_SOURCE;
  }
  if (want.tag !== null && want.tag !== have.tag) m |= F_TAG;
  return m;
}

/** At most one field differs: a near miss (0 is a full match). */
export const isNear = (m: number): boolean => (m & (m - 1)) === 0;

export function maskFields(m: number): MatchField[] {
  const out: MatchField[] = [];
  if (m & F_COMM) out.push('communicator');
  if (m & F_SOURCE) out.push('source');
  if (m & F_TAG) out.push('tag');
  return out;
}

/**
 * How a message's length compares with a receive's buffer: `longer` (it would match, then fail
 * with MPI_ERR_TRUNCATE), `fits`, or why the snapshot cannot tell: `length-unknown` (the library
 * could not say one of them) or `units-differ` (MPICH ch4: an unexpected message counts the bytes
 * that arrived, a receive counts elements of a datatype the snapshot does not have, so neither
 * can be converted).
 */
export type LengthCheck = 'fits' | 'longer' | 'length-unknown' | 'units-differ';

/** Compares message `msg` with receive `recv`; `unit` is the snapshot's mpi.lengthUnit. */
export function compareLengths(recv: Operation, msg: Operation, unit: LengthUnit): LengthCheck {
  if (recv.lengthUnknown || msg.lengthUnknown) return 'length-unknown';
  if (opLengthUnit(recv, unit) !== opLengthUnit(msg, unit)) return 'units-differ';
  return msg.length > recv.length ? 'longer' : 'fits';
}

/** A posted receive as the matching rule sees it. */
export function receiveSide(ix: SnapshotIndex, ce: CommEntry, recv: Operation): MatchSide {
  return { keyId: ce.keyId, peer: ix.peerIdx(recv.peer, ce), local: recv.peer.local, tag: recv.tag };
}

/** An unexpected message already at the receiver: its sender is the operation's peer. */
export function unexpectedSide(ix: SnapshotIndex, ce: CommEntry, msg: Operation): MatchSide {
  return { keyId: ce.keyId, peer: ix.peerIdx(msg.peer, ce), local: msg.peer.local, tag: msg.tag };
}

/** A pending send still at its sender (rank position `ce.rankIdx`). */
export function sendSide(ce: CommEntry, send: Operation): MatchSide {
  return { keyId: ce.keyId, peer: ce.rankIdx, local: ce.comm.localRank, tag: send.tag };
}

/** Point-to-point traffic of the user (not the library's collective traffic), still pending. */
export function isUserPending(ce: CommEntry, op: Operation): boolean {
  return op.status === 'pending' && !isCollectiveInternal(op, ce.internal);
}

/**
 * What a near-miss search for one receive could not see: the rank's unexpected queues, the
 * source's send queue. Sentences for people; the same for every view that lists near misses.
 */
export function receiveNotes(
  ix: SnapshotIndex,
  ce: CommEntry,
  source: number,
  hiddenUnexpected: boolean,
): string[] {
  const notes: string[] = [];
  const worldOf = (idx: number) => ix.rankOf[idx] ?? null;
  if (hiddenUnexpected) {
    notes.push(
      `rank ${ce.rank}'s unexpected queue is not visible: messages already delivered cannot be checked; reasoning from the senders' send queues`,
    );
  }
  if (source >= 0) {
    const sc = ix.findComm(source, ce.keyId);
    if (ix.ok[source] === 0) notes.push(`rank ${worldOf(source)}'s queues were not read`);
    else if (sc === undefined || sc.comm.sends === null) {
      notes.push(
        `rank ${worldOf(source)}'s send queue is not visible: reasoning from the unexpected messages at rank ${ce.rank}`,
      );
    }
  }
  return notes;
}

/** Whether any communicator of rank position `idx` hides its unexpected queue. */
export function hidesUnexpected(ix: SnapshotIndex, idx: number): boolean {
  const end = ix.commStart[idx + 1] ?? 0;
  for (let cj = ix.commStart[idx] ?? 0; cj < end; cj++)
    if (ix.comms[cj]?.comm.unexpected === null) return true;
  return false;
}
