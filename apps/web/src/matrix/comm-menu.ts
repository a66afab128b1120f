// The matrix's communicator menu: one entry per communicator the filter can select, in words a
// user reads at 16,384 ranks. Every rank's MPI_COMM_SELF is one entry (the model's buildEdges folds size-1
// communicators into a family), and each entry names its ranks as the model phrases a rank set
// ("even ranks 0-510", "ranks 0-2, 5"), never a list cut with "...".
import { ranksPhrase } from '@mqd/model';
import { formatCount, plural } from '../format.js';
import { type CommSummary, SELF_FAMILY } from './edges.js';

export interface CommMenuEntry {
  /** The filter value (url `comm`): CommSummary.key. */
  readonly value: string;
  readonly text: string;
}

export function commMenuEntries(comms: readonly CommSummary[]): CommMenuEntry[] {
  return comms.map((c) => ({ value: c.key, text: commEntryText(c) }));
}

function commEntryText(c: CommSummary): string {
  const ops = plural(c.ops, 'operation');
  const ranks = ranksPhrase(c.members);
  if (c.key.endsWith(`#1#${SELF_FAMILY}`)) {
    const name = c.name === '' ? 'unnamed size-1 communicators' : c.name;
    return `${name}: one per rank, ${ranks} (${ops})`;
  }
  const name = c.name === '' ? 'unnamed communicator' : c.name;
  // Without groups, same-named communicators of one size are one key (commKey): say their size,
  // since the ranks named are all their members together.
  const size = c.memberCount === c.size ? '' : ` of ${formatCount(c.size)}`;
  return `${name}${size}: ${ranks} (${ops})`;
}
