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

/**
 * At most this many entries: a job of 100,000 ranks has tens of thousands of communicators (one
 * per row and column of a grid), and a menu of them all takes the page seconds to build and no
 * one scrolls through it. The busiest come first (buildEdges sorts them by operations); the
 * others are reached from a cell's operations or through a link, and a selected one is always
 * listed.
 */
export const MENU_LIMIT = 200;

/** The menu's entries (the busiest MENU_LIMIT, and `selected`'s), and how many were left out. */
export function commMenuEntries(
  comms: readonly CommSummary[],
  selected: string | null = null,
  limit = MENU_LIMIT,
): { entries: CommMenuEntry[]; more: number } {
  const shown = comms.slice(0, limit);
  const extra = selected === null ? undefined : comms.slice(limit).find((c) => c.key === selected);
  if (extra !== undefined) shown.push(extra);
  return {
    entries: shown.map((c) => ({ value: c.key, text: commEntryText(c) })),
    more: comms.length - shown.length,
  };
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
