// The model's near misses (explainSnapshot in @mqd/model, analysis/near-miss.ts) joined to the
// rows of the matching-order view. The analysis owns what "almost matches" means and which
// fields differ; this file only finds its entries for the receives on screen and, for each
// candidate, the same message in the view's own candidate list (so a line can say which
// receive takes it). Pure, so it is unit-tested without a DOM.
import {
  assertUnreachable,
  type Communicator,
  commKey,
  type Explanation,
  type MatchField,
  type NearMiss,
  type OpRef,
} from '@mqd/model';
import { formatTag } from '../format.js';
import type { Candidate, MatchingOrder } from './match-reasons.js';

/** One candidate the analysis found for a receive: it differs in at most one field. */
export interface NearMissLine {
  /** Where the candidate message is queued (an unexpected message or a pending send). */
  readonly ref: OpRef;
  /** World rank of its sender, null when unknown. */
  readonly from: number | null;
  readonly tag: number | null;
  readonly differs: readonly MatchField[];
  readonly wouldMatch: boolean;
  /** Index into MatchingOrder.candidates of the same message, null when the view cannot tell which it is. */
  readonly candidate: number | null;
}

export interface ReceiveNearMisses {
  readonly position: number;
  /** The receive's source as a world rank, null for MPI_ANY_SOURCE or unknown. */
  readonly peer: number | null;
  readonly tag: number | null;
  readonly lines: readonly NearMissLine[];
  /** The analysis's notes: queues it needed but could not see, and what it reasoned from instead. */
  readonly notes: readonly string[];
}

export interface OrderNearMisses {
  /** By receive position; a pending receive missing here has no near miss (unless `truncated`). */
  readonly byReceive: ReadonlyMap<number, ReceiveNearMisses>;
  /** The analysis listed fewer near misses than it found: a receive missing here may still have some. */
  readonly truncated: boolean;
  /**
   * Another communicator of this rank has the same key (same name and size, no group: MPICH's
   * split communicators), so an entry of the analysis cannot be placed on one of them: none is shown.
   */
  readonly ambiguous: boolean;
  /** The analysis's limits that bear on matching: hidden unexpected messages or send queues. */
  readonly caveats: readonly string[];
}

type NearMissSource = Pick<Explanation, 'nearMisses' | 'nearMissTotal' | 'limits'>;

/** The analysis's limits that say a message could be queued where no one can see it. */
const MATCHING_LIMIT = /unexpected|send/i;

const refKey = (rank: number, queue: string, key: string, index: number) =>
  `${rank}|${queue}|${key}|${index}`;

function candidateKey(c: Candidate, keys: Map<Communicator, string>): string {
  let key = keys.get(c.comm);
  if (key === undefined) {
    key = commKey(c.comm);
    keys.set(c.comm, key);
  }
  return refKey(c.heldBy, c.origin === 'unexpected' ? 'unexpected' : 'sends', key, c.position);
}

/**
 * The near misses of the receives in `order`. `rankComms` are the communicators of the order's
 * rank (to notice a key shared by two of them); `e` is the snapshot's explanation.
 */
export function joinNearMisses(
  order: MatchingOrder,
  rankComms: readonly Communicator[],
  e: NearMissSource,
): OrderNearMisses {
  const key = commKey(order.comm);
  const ambiguous = rankComms.filter((c) => commKey(c) === key).length > 1;
  const truncated = e.nearMissTotal > e.nearMisses.length;
  const caveats = e.limits.filter((l) => MATCHING_LIMIT.test(l));
  const byReceive = new Map<number, ReceiveNearMisses>();
  if (ambiguous) return { byReceive, truncated, ambiguous, caveats };

  // The view's candidates by OpRef; a ref two of them share (an ambiguous key) maps to none.
  const keys = new Map<Communicator, string>();
  const local = new Map<string, number | null>();
  order.candidates.forEach((c, i) => {
    const k = candidateKey(c, keys);
    local.set(k, local.has(k) ? null : i);
  });

  for (const m of e.nearMisses) {
    if (!isReceiveOf(m, order.rank, key)) continue;
    const lines = m.candidates.map(
      (c): NearMissLine => ({
        ref: c.op,
        from: c.peer,
        tag: c.tag,
        differs: c.differs,
        wouldMatch: c.wouldMatch,
        candidate: local.get(refKey(c.op.rank, c.op.queue, c.op.commKey, c.op.index)) ?? null,
      }),
    );
    byReceive.set(m.op.index, { position: m.op.index, peer: m.peer, tag: m.tag, lines, notes: m.notes });
  }
  return { byReceive, truncated, ambiguous, caveats };
}

function isReceiveOf(m: NearMiss, rank: number, key: string): boolean {
  return m.kind === 'receive' && m.op.queue === 'receives' && m.op.rank === rank && m.op.commKey === key;
}

/** The candidate line's "why", from the fields the analysis says differ. */
export function nearMissWhy(line: NearMissLine, recv: ReceiveNearMisses, commName: string): string {
  if (line.wouldMatch) return 'matches: the library has not paired them yet';
  return line.differs.map((f) => fieldText(f, line, recv, commName)).join('; ');
}

function fieldText(f: MatchField, line: NearMissLine, recv: ReceiveNearMisses, commName: string): string {
  switch (f) {
    case 'tag':
      return `tag differs (${formatTag(line.tag)}, receive wants ${formatTag(recv.tag)})`;
    case 'source':
      return `source differs (rank ${line.from ?? '?'}, receive wants ${recv.peer === null ? 'ANY' : `rank ${recv.peer}`})`;
    case 'communicator':
      return `communicator differs (${line.ref.commName || 'unnamed'}, receive is on ${commName || 'unnamed'})`;
    default:
      return assertUnreachable(f);
  }
}

/** "unexpected message #1 at rank 0" / "pending send #0 on rank 2". */
export function nearMissWhere(ref: OpRef): string {
  return ref.queue === 'unexpected'
    ? `unexpected message #${ref.index} at rank ${ref.rank}`
    : ref.queue === 'sends'
      ? `pending send #${ref.index} on rank ${ref.rank}`
      : `posted receive #${ref.index} on rank ${ref.rank}`;
}
