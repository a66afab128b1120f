// The matching order of one rank and communicator: every message that could be for the rank
// (its unexpected messages, the pending sends addressed to it), per posted receive whether
// each would satisfy it and why not, which receive takes which message, and the receive's near
// misses. The matching rule is match-rules.ts, the one near-miss.ts uses, so the near misses
// listed here are exactly those explainSnapshot reports for the same receive.
//
// Posted receives are tried in queue order (index 0 first). Unexpected messages have arrived,
// so they are matched before the sends still pending at their senders; among those, messages
// from different senders have no defined order, and the greedy pairing below (earliest receive
// takes the earliest matching message) is what the library would do for one sender
// (non-overtaking), a plausible answer for several.

import type { Communicator, JobSnapshot, Operation, RankSnapshot } from '../snapshot-spec.js';
import { isCollectiveInternal, type OpRef } from './comm.js';
import { type EntryGroup, groupEntries, opGroupKey } from './entry-groups.js';
import {
  compareLengths,
  diffMask,
  F_COMM,
  F_SOURCE,
  F_TAG,
  hidesUnexpected,
  isNear,
  isUserPending,
  type LengthCheck,
  type MatchField,
  type MatchSide,
  maskFields,
  receiveNotes,
  receiveSide,
  sendSide,
  unexpectedSide,
} from './match-rules.js';
import { type CommEntry, SnapshotIndex } from './snapshot-index.js';

export type { LengthCheck } from './match-rules.js';

/** Why a message does not satisfy a receive; `want`/`got` as the receive and the message say. */
export type MismatchReason =
  | { readonly kind: 'communicator-differs'; readonly want: string; readonly got: string }
  /** Ranks within the communicator when it is the same one, else world ranks; null = unknown. */
  | { readonly kind: 'source-differs'; readonly want: number | null; readonly got: number | null }
  | { readonly kind: 'tag-differs'; readonly want: number; readonly got: number | null };

/** A message that could satisfy a receive of the rank: already arrived, or still pending at its sender. */
export interface MatchCandidate {
  readonly origin: 'unexpected' | 'send';
  /** World rank of the sender, null when it cannot be known. */
  readonly fromRank: number | null;
  /** Sender's rank in the candidate's communicator, null when unknown. */
  readonly fromLocal: number | null;
  /** World rank of the process whose queue holds it. */
  readonly heldBy: number;
  readonly comm: Communicator;
  readonly position: number;
  readonly op: Operation;
  readonly ref: OpRef;
}

export interface MatchVerdict {
  /** Index into MatchingOrder.candidates. */
  readonly candidate: number;
  readonly matches: boolean;
  readonly differs: readonly MatchField[];
  readonly reasons: readonly MismatchReason[];
  /**
   * The message is longer than the receive buffer: it would match, then fail with
   * MPI_ERR_TRUNCATE. False when the snapshot cannot tell (see `lengths`).
   */
  readonly truncates: boolean;
  /**
   * The lengths compared (`longer`, `fits`), or why they could not be: `length-unknown`,
   * `units-differ` (MPICH ch4's unexpected messages count bytes, its receives elements).
   */
  readonly lengths: LengthCheck;
}

/** One near miss of a receive: a candidate that differs in at most one field. */
export interface NearMissLine {
  readonly ref: OpRef;
  /** Index into MatchingOrder.candidates. */
  readonly candidate: number;
  /** World rank of its sender, null when unknown. */
  readonly from: number | null;
  readonly tag: number | null;
  readonly differs: readonly MatchField[];
  readonly wouldMatch: boolean;
}

export interface ReceiveNearMisses {
  /** The receive's source as a world rank, null for MPI_ANY_SOURCE or unknown. */
  readonly peer: number | null;
  readonly tag: number | null;
  readonly lines: readonly NearMissLine[];
  /** Queues this needed but could not see, and what it reasoned from instead. */
  readonly notes: readonly string[];
}

export interface ReceiveRow {
  readonly position: number;
  readonly op: Operation;
  /** The receive's source as a world rank, null for MPI_ANY_SOURCE or unknown. */
  readonly source: number | null;
  readonly anySource: boolean;
  readonly anyTag: boolean;
  /** Matching candidates first, then by fewest differing fields; at most VERDICT_LIMIT. */
  readonly verdicts: readonly MatchVerdict[];
  readonly matchCount: number;
  /** Verdicts left out of `verdicts` by the limit. */
  readonly omitted: number;
  /** Candidate index this receive would take, if any. */
  readonly takes: number | null;
  /**
   * The near misses, as explainSnapshot lists them for this receive; null when the analysis
   * lists none (a receive that is not pending, collective traffic, or no candidate is near).
   */
  readonly nearMisses: ReceiveNearMisses | null;
}

export interface UnexpectedRow {
  readonly position: number;
  readonly op: Operation;
  /** World rank of the sender, null when unknown. */
  readonly from: number | null;
  /** Position of the first posted receive it matches: in a consistent snapshot there is none. */
  readonly firstMatchingReceive: number | null;
}

export interface SendRow {
  readonly position: number;
  readonly op: Operation;
  /** World rank of the destination, null when unknown. */
  readonly to: number | null;
}

export interface MatchingOrder {
  readonly rank: number;
  readonly comm: Communicator;
  /** null when the library cannot show the queue. */
  readonly receives: readonly ReceiveRow[] | null;
  readonly unexpected: readonly UnexpectedRow[] | null;
  readonly sends: readonly SendRow[] | null;
  /** Unexpected messages of the rank (all communicators, in order), then pending sends addressed to it (by rank). */
  readonly candidates: readonly MatchCandidate[];
  /** Per candidate: position of the receive that would take it, or null. */
  readonly takenBy: readonly (number | null)[];
  /** The same lists with identical entries grouped (groupEntries by opGroupKey), for views to draw. */
  readonly receiveGroups: readonly EntryGroup<ReceiveRow>[] | null;
  readonly unexpectedGroups: readonly EntryGroup<UnexpectedRow>[] | null;
  readonly sendGroups: readonly EntryGroup<SendRow>[] | null;
}

/** Verdicts listed per receive; a rank can have thousands of candidates (a gather at rank 0). */
export const VERDICT_LIMIT = 64;

interface Scored {
  readonly candidate: MatchCandidate;
  readonly entry: CommEntry;
  readonly side: MatchSide;
  /** Eligible for near misses: user point-to-point traffic still pending. */
  readonly user: boolean;
}

/** The world rank of an operation's peer by the index's rule; null for MPI_ANY_SOURCE or unknown. */
function worldPeer(ix: SnapshotIndex, e: CommEntry, op: Operation): number | null {
  const g = ix.peerRank(op.peer, e);
  return g < 0 ? null : g;
}

/**
 * The matching order of world rank `rank` on its communicator with id `commId`, or null when
 * there is no such rank or communicator. Pass the snapshot's SnapshotIndex when there is one.
 */
export function matchingOrder(
  snapshot: JobSnapshot | SnapshotIndex,
  rank: number,
  commId: string,
): MatchingOrder | null {
  const ix = snapshot instanceof SnapshotIndex ? snapshot : new SnapshotIndex(snapshot);
  const idx = ix.idxOf(rank);
  if (idx < 0) return null;
  const start = ix.commStart[idx] ?? 0;
  const end = ix.commStart[idx + 1] ?? 0;
  let here: CommEntry | undefined;
  for (let k = start; k < end; k++) if (ix.comms[k]?.comm.id === commId) here = ix.comms[k];
  if (here === undefined) return null;
  const ce = here;
  const comm = ce.comm;
  const world = (e: CommEntry, op: Operation) => worldPeer(ix, e, op);
  const unit = ix.snap.mpi.lengthUnit;

  const scored = collect(ix, idx);
  const candidates = scored.map((s) => s.candidate);
  const taken = new Int32Array(candidates.length).fill(-1);
  const hiddenUnexpected = hidesUnexpected(ix, idx);
  // The near-miss analysis skips ranks whose queues were not read.
  const readable = ix.ok[idx] === 1;

  // Identical receives (opGroupKey) see the same candidates the same way: each group is
  // scored once, so 20,000 equal receives against 20,000 messages cost 20,000 comparisons, not
  // 400 million. Only which message each one takes differs, decided below in queue order.
  const recvQueue = comm.receives;
  const recvGroups =
    recvQueue === null ? null : groupEntries(recvQueue, (op) => opGroupKey(op)).map((g) => score(g.first, g));
  function score(op: Operation, g: EntryGroup<Operation>) {
    const want = receiveSide(ix, ce, op);
    const userRecv = isUserPending(ce, op);
    const byFields: MatchVerdict[][] = [[], [], [], []];
    const lines: NearMissLine[] = [];
    const matching: number[] = [];
    scored.forEach((s, i) => {
      const m = diffMask(want, s.side);
      if (m === 0) matching.push(i);
      const differs = maskFields(m);
      if (readable && userRecv && s.user && isNear(m)) {
        lines.push({
          ref: s.candidate.ref,
          candidate: i,
          from: s.side.peer >= 0 ? (ix.rankOf[s.side.peer] ?? null) : null,
          tag: s.candidate.op.tag,
          differs,
          wouldMatch: m === 0,
        });
      }
      const bucket = byFields[differs.length];
      if (bucket && bucket.length < VERDICT_LIMIT) {
        const lengths = compareLengths(op, s.candidate.op, unit);
        bucket.push({
          candidate: i,
          matches: m === 0,
          differs,
          reasons: reasons(m, op, ce, s, world(ce, op)),
          truncates: m === 0 && lengths === 'longer',
          lengths,
        });
      }
    });
    const verdicts = byFields.flat().slice(0, VERDICT_LIMIT);
    const nearMisses: ReceiveNearMisses | null =
      lines.length === 0
        ? null
        : {
            peer: want.peer >= 0 ? (ix.rankOf[want.peer] ?? null) : null,
            tag: op.tag,
            lines,
            notes: receiveNotes(ix, ce, want.peer, hiddenUnexpected),
          };
    return { op, want, positions: g.positions, verdicts, matching, nearMisses, next: 0 };
  }
  let receives: ReceiveRow[] | null = null;
  if (recvQueue !== null && recvGroups !== null) {
    const groupOf = new Int32Array(recvQueue.length);
    recvGroups.forEach((g, gi) => {
      for (const p of g.positions) groupOf[p] = gi;
    });
    receives = recvQueue.map((op, position): ReceiveRow => {
      const g = recvGroups[groupOf[position] ?? 0] as NonNullable<typeof recvGroups>[number];
      let takes: number | null = null;
      if (op.status !== 'complete') {
        // Earliest receive takes the earliest matching message not taken yet.
        while (g.next < g.matching.length && taken[g.matching[g.next] ?? 0] !== -1) g.next++;
        const c = g.matching[g.next];
        if (c !== undefined) {
          taken[c] = position;
          takes = c;
          g.next++;
        }
      }
      return {
        position,
        op,
        source: world(ce, op),
        anySource: op.peer.local === null && op.peer.global === null,
        anyTag: op.tag === null,
        verdicts: g.verdicts,
        matchCount: g.matching.length,
        omitted: candidates.length - g.verdicts.length,
        takes,
        nearMisses: g.nearMisses,
      };
    });
  }

  // The first pending receive each kind of unexpected message matches, per group of both.
  const unexpected =
    comm.unexpected === null
      ? null
      : (() => {
          const rows: UnexpectedRow[] = new Array(comm.unexpected.length);
          for (const g of groupEntries(comm.unexpected, (op) => opGroupKey(op))) {
            const side = unexpectedSide(ix, ce, g.first);
            let first: number | null = null;
            for (const rg of recvGroups ?? []) {
              if (rg.op.status === 'complete' || diffMask(rg.want, side) !== 0) continue;
              const p = rg.positions[0] ?? 0;
              if (first === null || p < first) first = p;
            }
            g.items.forEach((op, k) => {
              const position = g.positions[k] ?? 0;
              rows[position] = { position, op, from: world(ce, op), firstMatchingReceive: first };
            });
          }
          return rows;
        })();
  const sends = comm.sends?.map((op, position): SendRow => ({ position, op, to: world(ce, op) })) ?? null;
  const takenBy = Array.from(taken, (t) => (t >= 0 ? t : null));
  const byOp = <R extends { readonly op: Operation }>(rows: readonly R[] | null) =>
    rows === null ? null : groupEntries(rows, (r) => opGroupKey(r.op));
  return {
    rank,
    comm,
    receives,
    unexpected,
    sends,
    receiveGroups: byOp(receives),
    unexpectedGroups: byOp(unexpected),
    sendGroups: byOp(sends),
    candidates,
    takenBy,
  };
}

/** The candidates of rank position `idx`: its unexpected messages, then the sends addressed to it. */
function collect(ix: SnapshotIndex, idx: number): Scored[] {
  const out: Scored[] = [];
  const start = ix.commStart[idx] ?? 0;
  const end = ix.commStart[idx + 1] ?? 0;
  for (let k = start; k < end; k++) {
    const e = ix.comms[k];
    if (e === undefined) continue;
    e.comm.unexpected?.forEach((op, position) => {
      const side = unexpectedSide(ix, e, op);
      out.push({
        candidate: {
          origin: 'unexpected',
          fromRank: worldPeer(ix, e, op),
          fromLocal: op.peer.local,
          heldBy: e.rank,
          comm: e.comm,
          position,
          op,
          ref: ix.opRef(e, 'unexpected', position),
        },
        entry: e,
        side,
        user: !isCollectiveInternal(op, e.internal),
      });
    });
  }
  for (const e of ix.comms) {
    e.comm.sends?.forEach((op, position) => {
      if (op.status === 'complete' || ix.peerIdx(op.peer, e) !== idx) return;
      out.push({
        candidate: {
          origin: 'send',
          fromRank: e.rank,
          fromLocal: e.comm.localRank,
          heldBy: e.rank,
          comm: e.comm,
          position,
          op,
          ref: ix.opRef(e, 'sends', position),
        },
        entry: e,
        side: sendSide(e, op),
        // Near misses look only at sends of ranks whose queues were read.
        user: isUserPending(e, op) && ix.ok[e.rankIdx] === 1,
      });
    });
  }
  return out;
}

function reasons(
  m: number,
  recv: Operation,
  ce: CommEntry,
  s: Scored,
  wantWorld: number | null,
): MismatchReason[] {
  const out: MismatchReason[] = [];
  if (m & F_COMM)
    out.push({ kind: 'communicator-differs', want: commText(ce.comm), got: commText(s.candidate.comm) });
  if (m & F_SOURCE) {
    // Within one communicator its own ranks; across communicators world ranks are all they share.
    const same = (m & F_COMM) === 0;
    out.push({
      kind: 'source-differs',
      want: same ? recv.peer.local : wantWorld,
      got: same ? s.candidate.fromLocal : s.candidate.fromRank,
    });
  }
  if (m & F_TAG && recv.tag !== null)
    out.push({ kind: 'tag-differs', want: recv.tag, got: s.candidate.op.tag });
  return out;
}

/** A communicator as a person reads it: its name, or what it is when unnamed. */
export function commText(c: Communicator): string {
  return c.name !== '' ? c.name : `(unnamed ${c.id}, size ${c.size})`;
}

/** The rank the matching order opens when none is chosen: the first with a posted receive (the usual suspect). */
export function suggestedOrderRank(snapshot: JobSnapshot): number | null {
  for (const r of snapshot.ranks) {
    if (r.communicators.some((c) => (c.receives?.length ?? 0) > 0)) return r.rank;
  }
  return snapshot.ranks[0]?.rank ?? null;
}

/** The communicator to open: the wanted one, else the one with the most queued operations. */
export function suggestedOrderComm(rank: RankSnapshot, wanted: string | null): Communicator | null {
  const hit = wanted === null ? undefined : rank.communicators.find((c) => c.id === wanted);
  if (hit) return hit;
  let best: Communicator | null = null;
  let bestOps = -1;
  for (const c of rank.communicators) {
    const ops = (c.receives?.length ?? 0) + (c.unexpected?.length ?? 0) + (c.sends?.length ?? 0);
    if (ops > bestOps) {
      best = c;
      bestOps = ops;
    }
  }
  return best;
}
