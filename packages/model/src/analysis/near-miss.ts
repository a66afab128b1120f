// Near misses: the message a pending receive almost matches, and the receive a pending send
// almost meets. MPI matches on (communicator, source, tag); a hang is very often one of the
// three being wrong, and showing "rank 0 sent tag 7 where rank 1 waits for tag 8" names the
// bug directly. Candidates differ in at most one field (a full match that is still pending
// is shown too: the library has not progressed it).
import type { Operation, QueueKind } from '../snapshot-spec.js';
import { isCollectiveInternal, type OpRef } from './comm.js';
import { csr, IntVec } from './csr.js';
import {
  diffMask,
  hidesUnexpected,
  isNear,
  isUserPending,
  type MatchField,
  type MatchSide,
  maskFields,
  receiveNotes,
  receiveSide,
  sendSide,
  unexpectedSide,
} from './match-rules.js';
import type { CommEntry, SnapshotIndex } from './snapshot-index.js';

export type { MatchField } from './match-rules.js';

export interface NearMissCandidate {
  readonly op: OpRef;
  /** World rank of the candidate's sender (for a message) or source (for a receive); null = any/unknown. */
  readonly peer: number | null;
  readonly tag: number | null;
  readonly differs: MatchField[];
  readonly wouldMatch: boolean;
}

export interface NearMiss {
  /** A pending receive looking for its message, or a pending send looking for its receive. */
  readonly kind: 'receive' | 'send';
  readonly op: OpRef;
  /** The receive's source or the send's destination, as a world rank; null = MPI_ANY_SOURCE or unknown. */
  readonly peer: number | null;
  readonly tag: number | null;
  /** The first MAX_NEAR_MISS_CANDIDATES in queue order; identical entries share one list. */
  readonly candidates: readonly NearMissCandidate[];
  /** Queues this reasoning needed but could not see, and which side it reasoned from instead. */
  readonly notes: string[];
}

export interface NearMissResult {
  /** In matching order: by rank, then communicator, receives before sends, then queue index. */
  readonly items: NearMiss[];
  /** Entries found before `limit` cut the list. */
  readonly total: number;
}

export interface NearMissOptions {
  /** At most this many entries (default 1000). */
  readonly limit?: number;
}

/** Candidates kept per entry: the text names the first; a deep queue must not make millions. */
export const MAX_NEAR_MISS_CANDIDATES = 8;

/** What one scan found: whether any candidate, and the first few. */
interface Scan {
  readonly found: boolean;
  readonly candidates: readonly NearMissCandidate[];
}

const sideKey = (at: number, w: MatchSide) => `${at}|${w.keyId}|${w.peer}|${w.local}|${w.tag}`;

export function findNearMisses(ix: SnapshotIndex, opts: NearMissOptions = {}): NearMissResult {
  const limit = opts.limit ?? 1000;
  const { n, comms, ok } = ix;
  // Pending p2p sends bucketed by destination position (CSR of (comm entry, queue index)).
  const destOf = new IntVec();
  const sendAt = new IntVec();
  const sendComm = new IntVec();
  const sendIndex = new IntVec();
  for (let ci = 0; ci < comms.length; ci++) {
    const ce = comms[ci];
    const sends = ce?.comm.sends;
    if (ce === undefined || sends === null || sends === undefined || ok[ce.rankIdx] === 0) continue;
    for (let index = 0; index < sends.length; index++) {
      const op = sends[index];
      if (op === undefined || !isUserPending(ce, op)) continue;
      const dest = ix.peerIdx(op.peer, ce);
      if (dest < 0) continue;
      destOf.push(dest);
      sendAt.push(sendComm.length);
      sendComm.push(ci);
      sendIndex.push(index);
    }
  }
  const sendsTo = csr(n, destOf, sendAt);
  const items: NearMiss[] = [];
  let total = 0;
  const receiveScans = new Map<string, Scan>();
  const sendScans = new Map<string, Scan & { readonly hiddenReceives: boolean }>();
  const worldOf = (idx: number) => (idx >= 0 ? (ix.rankOf[idx] ?? null) : null);
  const candidate = (
    ce: CommEntry,
    queue: QueueKind,
    index: number,
    peer: number,
    op: Operation,
    m: number,
  ) => ({
    op: ix.opRef(ce, queue, index),
    peer: worldOf(peer),
    tag: op.tag,
    differs: maskFields(m),
    wouldMatch: m === 0,
  });

  /**
   * Candidates for one receive at rank position i: unexpected messages there, then pending
   * sends aimed at it. With `out` null only whether one exists is wanted.
   */
  const scanReceive = (
    i: number,
    start: number,
    end: number,
    want: MatchSide,
    out: NearMissCandidate[] | null,
  ): boolean => {
    let found = false;
    for (let cj = start; cj < end; cj++) {
      const ue = comms[cj];
      const queue = ue?.comm.unexpected;
      if (ue === undefined || queue === null || queue === undefined) continue;
      for (let mi = 0; mi < queue.length; mi++) {
        const msg = queue[mi];
        if (msg === undefined || isCollectiveInternal(msg, ue.internal)) continue;
        const have = unexpectedSide(ix, ue, msg);
        const m = diffMask(want, have);
        if (!isNear(m)) continue;
        if (out === null) return true;
        found = true;
        out.push(candidate(ue, 'unexpected', mi, have.peer, msg, m));
        if (out.length >= MAX_NEAR_MISS_CANDIDATES) return true;
      }
    }
    const sEnd = sendsTo.start[i + 1] ?? 0;
    for (let p = sendsTo.start[i] ?? 0; p < sEnd; p++) {
      const at = sendsTo.items[p] ?? 0;
      const se = comms[sendComm.get(at)];
      const si = sendIndex.get(at);
      const send = se?.comm.sends?.[si];
      if (se === undefined || send === undefined) continue;
      const m = diffMask(want, sendSide(se, send));
      if (!isNear(m)) continue;
      if (out === null) return true;
      found = true;
      out.push(candidate(se, 'sends', si, se.rankIdx, send, m));
      if (out.length >= MAX_NEAR_MISS_CANDIDATES) return true;
    }
    return found;
  };

  for (let i = 0; i < n; i++) {
    if (ok[i] === 0) continue;
    const start = ix.commStart[i] ?? 0;
    const end = ix.commStart[i + 1] ?? 0;
    const hiddenUnexpected = hidesUnexpected(ix, i);
    for (let ci = start; ci < end; ci++) {
      const ce = comms[ci];
      const receives = ce?.comm.receives;
      if (ce === undefined || receives === null || receives === undefined) continue;
      for (let index = 0; index < receives.length; index++) {
        const recv = receives[index];
        if (recv === undefined || !isUserPending(ce, recv)) continue;
        const want = receiveSide(ix, ce, recv);
        // Identical receives (a deep queue of one kind) find the same candidates: scanned once.
        const key = sideKey(i, want);
        let scan = receiveScans.get(key);
        if (scan === undefined) {
          const out: NearMissCandidate[] = [];
          scan = { found: scanReceive(i, start, end, want, out), candidates: out };
          receiveScans.set(key, scan);
        }
        const building = items.length < limit;
        const { candidates } = scan;
        if (!scan.found) continue;
        total++;
        if (!building) continue;
        const notes = receiveNotes(ix, ce, want.peer, hiddenUnexpected);
        items.push({
          kind: 'receive',
          op: ix.opRef(ce, 'receives', index),
          peer: worldOf(want.peer),
          tag: recv.tag,
          candidates,
          notes,
        });
      }
    }
    for (let ci = start; ci < end; ci++) {
      const ce = comms[ci];
      const sends = ce?.comm.sends;
      if (ce === undefined || sends === null || sends === undefined) continue;
      for (let index = 0; index < sends.length; index++) {
        const send = sends[index];
        if (send === undefined || !isUserPending(ce, send)) continue;
        const dest = ix.peerIdx(send.peer, ce);
        if (dest < 0 || ok[dest] === 0) continue;
        const have = sendSide(ce, send);
        // Identical sends to one rank meet the same receives there: scanned once.
        const key = sideKey(dest, have);
        let scan = sendScans.get(key);
        if (scan === undefined) {
          const out: NearMissCandidate[] = [];
          let hidden = false;
          const dStart = ix.commStart[dest] ?? 0;
          const dEnd = ix.commStart[dest + 1] ?? 0;
          receivesAt: for (let cj = dStart; cj < dEnd; cj++) {
            const de = comms[cj];
            const queue = de?.comm.receives;
            if (de === undefined || queue === undefined) continue;
            if (queue === null) {
              if (de.keyId === ce.keyId) hidden = true;
              continue;
            }
            for (let ri = 0; ri < queue.length; ri++) {
              const recv = queue[ri];
              if (recv === undefined || !isUserPending(de, recv)) continue;
              const want = receiveSide(ix, de, recv);
              const m = diffMask(want, have);
              // Exactly one field: a full match is already listed under the receive.
              if (m === 0 || !isNear(m)) continue;
              out.push(candidate(de, 'receives', ri, want.peer, recv, m));
              if (out.length >= MAX_NEAR_MISS_CANDIDATES) break receivesAt;
            }
          }
          scan = { found: out.length > 0, candidates: out, hiddenReceives: hidden };
          sendScans.set(key, scan);
        }
        const building = items.length < limit;
        const { candidates, hiddenReceives } = scan;
        if (!scan.found) continue;
        total++;
        if (!building) continue;
        const notes = hiddenReceives
          ? [
              `rank ${worldOf(dest)}'s posted receives are not visible: whether one waits for this send cannot be checked`,
            ]
          : [];
        items.push({
          kind: 'send',
          op: ix.opRef(ce, 'sends', index),
          peer: worldOf(dest),
          tag: send.tag,
          candidates,
          notes,
        });
      }
    }
  }
  return { items, total };
}
