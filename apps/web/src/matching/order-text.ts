// The sentences of the matching-order view. The model (matchingOrder of @mqd/model) decides
// which receive takes which message and which fields differ; this only words its answer.
import {
  assertUnreachable,
  type MatchField,
  type MatchingOrder,
  type MismatchReason,
  type NearMissLine,
  type OpRef,
  type ReceiveNearMisses,
} from '@mqd/model';
import { formatTag } from '../format.js';

export function reasonText(r: MismatchReason): string {
  switch (r.kind) {
    case 'communicator-differs':
      return `communicator differs (${r.got}, receive is on ${r.want})`;
    case 'source-differs':
      return `source differs (from ${r.got ?? 'unknown'}, receive wants ${r.want ?? 'unknown'})`;
    case 'tag-differs':
      return `tag differs (${r.got ?? 'unknown'}, receive wants ${r.want})`;
    default:
      return assertUnreachable(r);
  }
}

/** Which candidate a receive takes, as a user-facing phrase. */
export function takenByText(order: MatchingOrder, candidateIndex: number): string {
  const c = order.candidates[candidateIndex];
  if (!c) return '';
  return c.origin === 'unexpected'
    ? `unexpected message #${c.position} from rank ${c.fromRank ?? '?'}`
    : `pending send #${c.position} on rank ${c.heldBy}`;
}

/** A near miss's "why", from the fields that differ. */
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
