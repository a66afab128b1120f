// Matching order of one rank and communicator: every candidate message addressed to the rank,
// whether it would satisfy each posted receive, and which receive takes which message. The
// model's analysis (near-miss.ts) answers "why not" only for candidates that differ in one
// field, and says nothing of who takes what; OrderView shows its answer where it has one
// (joined in ./near-misses.ts) and these local reasons for the rest.
//
// MPI matching, as the views explain it:
// - A message matches a receive when the communicator is the same, the receive's source is
//   ANY_SOURCE or the sender's rank in that communicator, and its tag is ANY_TAG or equal.
// - Posted receives are tried in queue order (index 0 first) and unexpected messages in
//   arrival order, so among several matches the earliest receive takes the earliest message
//   (non-overtaking). `takenBy` simulates that greedily over the candidates listed here;
//   messages from different senders have no defined order between them.
import { assertUnreachable, type Communicator, type JobSnapshot, type Operation } from '@mqd/model';
import { commLabel, indexRanks, resolveGlobalPeer, sameCommunicator } from '../snapshot-index.js';

export type MismatchReason =
  | { readonly kind: 'communicator-differs'; readonly want: string; readonly got: string }
  | { readonly kind: 'source-differs'; readonly want: number; readonly got: number | null }
  | { readonly kind: 'tag-differs'; readonly want: number; readonly got: number | null };

/** A message that could satisfy a receive of the rank: already arrived, or still pending at its sender. */
export interface Candidate {
  readonly origin: 'unexpected' | 'send';
  /** World rank of the sender, null when the library cannot say. */
  readonly fromRank: number | null;
  /** Sender's rank in the candidate's communicator, null when unknown. */
  readonly fromLocal: number | null;
  /** World rank of the process whose queue holds it. */
  readonly heldBy: number;
  readonly comm: Communicator;
  readonly position: number;
  readonly op: Operation;
}

export interface Verdict {
  readonly candidate: Candidate;
  readonly matches: boolean;
  readonly reasons: readonly MismatchReason[];
  /** The message is longer than the receive buffer: it would match, then fail with MPI_ERR_TRUNCATE. */
  readonly truncates: boolean;
}

export interface ReceiveRow {
  readonly position: number;
  readonly op: Operation;
  readonly anySource: boolean;
  readonly anyTag: boolean;
  /** Matching candidates first, then by fewest reasons; at most VERDICT_LIMIT. */
  readonly verdicts: readonly Verdict[];
  readonly matchCount: number;
  /** Verdicts left out of `verdicts` by the limit. */
  readonly omitted: number;
  /** Candidate index (into MatchingOrder.candidates) this receive would take, if any. */
  readonly takes: number | null;
}

export interface UnexpectedRow {
  readonly position: number;
  readonly op: Operation;
  /** Position of the first posted receive it matches: in a consistent snapshot there is none. */
  readonly firstMatchingReceive: number | null;
}

export interface MatchingOrder {
  readonly rank: number;
  readonly comm: Communicator;
  /** null when the library cannot show the queue. */
  readonly receives: readonly ReceiveRow[] | null;
  readonly unexpected: readonly UnexpectedRow[] | null;
  readonly sends: readonly Operation[] | null;
  readonly candidates: readonly Candidate[];
  /** Per candidate: position of the receive that would take it (greedy, in matching order), or null. */
  readonly takenBy: readonly (number | null)[];
}

/** Candidates listed per receive; a rank can have thousands (a gather at rank 0). */
export const VERDICT_LIMIT = 64;

export function reasonText(r: MismatchReason): string {
  switch (r.kind) {
    case 'communicator-differs':
      return `communicator differs (${r.got}, receive is on ${r.want})`;
    case 'source-differs':
      return `source differs (from ${r.got ?? 'unknown'}, receive wants ${r.want})`;
    case 'tag-differs':
      return `tag differs (${r.got ?? 'unknown'}, receive wants ${r.want})`;
    default:
      return assertUnreachable(r);
  }
}

/** Where a receive was posted: its communicator, the receiving world rank, the matrix side. */
export interface ReceiveSite {
  readonly comm: Communicator;
  readonly rank: number;
  readonly worldSize: number;
}

/** Why `c` would not satisfy receive `recv` posted at `site`; empty = it matches. */
export function mismatchReasons(recv: Operation, site: ReceiveSite, c: Candidate): MismatchReason[] {
  const { comm } = site;
  const out: MismatchReason[] = [];
  const sameComm = c.comm === comm || sameCommunicator(c.comm, comm);
  if (!sameComm) out.push({ kind: 'communicator-differs', want: commLabel(comm), got: commLabel(c.comm) });
  const wantSource = recv.peer.local;
  if (wantSource !== null && wantSource >= 0) {
    // Compare within the communicator when it is the same one; otherwise world ranks are all we share.
    const got = sameComm ? c.fromLocal : c.fromRank;
    const want = sameComm ? wantSource : resolveGlobalPeer(recv, comm, site.rank, site.worldSize);
    if (want !== null && got !== want) out.push({ kind: 'source-differs', want, got });
  }
  if (recv.tag !== null && c.op.tag !== recv.tag)
    out.push({ kind: 'tag-differs', want: recv.tag, got: c.op.tag });
  return out;
}

/** Messages that could be for `rank`: its unexpected queues (all communicators) and every pending send addressed to it. */
export function collectCandidates(snapshot: JobSnapshot, rank: number): Candidate[] {
  const out: Candidate[] = [];
  const { worldSize } = indexRanks(snapshot);
  for (const r of snapshot.ranks) {
    for (const c of r.communicators) {
      if (r.rank === rank) {
        c.unexpected?.forEach((op, position) => {
          out.push({
            origin: 'unexpected',
            fromRank: resolveGlobalPeer(op, c, r.rank, worldSize),
            fromLocal: op.peer.local,
            heldBy: r.rank,
            comm: c,
            position,
            op,
          });
        });
      }
      c.sends?.forEach((op, position) => {
        if (op.status === 'complete' || resolveGlobalPeer(op, c, r.rank, worldSize) !== rank) return;
        out.push({
          origin: 'send',
          fromRank: r.rank,
          fromLocal: c.localRank,
          heldBy: r.rank,
          comm: c,
          position,
          op,
        });
      });
    }
  }
  return out;
}

/** The matching order of `rank` on its communicator with id `commId`, or null when there is no such communicator. */
export function matchingOrder(snapshot: JobSnapshot, rank: number, commId: string): MatchingOrder | null {
  const proc = snapshot.ranks.find((r) => r.rank === rank);
  const comm = proc?.communicators.find((c) => c.id === commId);
  if (!proc || !comm) return null;
  const candidates = collectCandidates(snapshot, rank);
  const site: ReceiveSite = { comm, rank, worldSize: indexRanks(snapshot).worldSize };
  const taken = new Int32Array(candidates.length).fill(-1);
  const receives =
    comm.receives?.map((op, position): ReceiveRow => {
      // Keep the most telling verdicts: matches, then near misses (one reason), then the rest.
      const byReasons: Verdict[][] = [[], [], [], []];
      let matchCount = 0;
      let takes: number | null = null;
      candidates.forEach((candidate, i) => {
        const reasons = mismatchReasons(op, site, candidate);
        const matches = reasons.length === 0;
        if (matches) {
          matchCount++;
          // Greedy, in matching order: unexpected messages (arrival order) come before pending sends.
          if (takes === null && op.status !== 'complete' && taken[i] === -1) {
            taken[i] = position;
            takes = i;
          }
        }
        const bucket = byReasons[Math.min(reasons.length, 3)];
        if (bucket && bucket.length < VERDICT_LIMIT) {
          bucket.push({ candidate, matches, reasons, truncates: matches && candidate.op.length > op.length });
        }
      });
      const verdicts = byReasons.flat().slice(0, VERDICT_LIMIT);
      return {
        position,
        op,
        anySource: op.peer.local === null,
        anyTag: op.tag === null,
        verdicts,
        matchCount,
        omitted: candidates.length - verdicts.length,
        takes,
      };
    }) ?? null;
  const unexpected =
    comm.unexpected?.map((op, position): UnexpectedRow => {
      const asCandidate: Candidate = {
        origin: 'unexpected',
        fromRank: resolveGlobalPeer(op, comm, rank, site.worldSize),
        fromLocal: op.peer.local,
        heldBy: rank,
        comm,
        position,
        op,
      };
      const first =
        comm.receives?.findIndex((recv) => mismatchReasons(recv, site, asCandidate).length === 0) ?? -1;
      return { position, op, firstMatchingReceive: first >= 0 ? first : null };
    }) ?? null;
  const takenBy = Array.from(taken, (t) => (t >= 0 ? t : null));
  return { rank, comm, receives, unexpected, sends: comm.sends, candidates, takenBy };
}

/** Which candidate a given receive takes, as a user-facing sentence. */
export function takenByText(order: MatchingOrder, candidateIndex: number): string {
  const c = order.candidates[candidateIndex];
  if (!c) return '';
  return c.origin === 'unexpected'
    ? `unexpected message #${c.position} from rank ${c.fromRank ?? '?'}`
    : `pending send #${c.position} on rank ${c.heldBy}`;
}
