// Identical entries of a long list, grouped with their count: 20,000 posted receives from rank 1
// with tag 5000 are one line "20,000 × from rank 1, tag 5000, 4 B", not 20,000 rows. The one
// rule for the matching order, the rank view's queues and the matrix cell's list (opGroupKey
// says when two queue entries are the same), and for any other list with a key (the diagnosis
// banner's lines).

import type { Operation } from '../snapshot-spec.js';

/** Entries with the same key, in the order of the input. */
export interface EntryGroup<T> {
  readonly key: string;
  /** The group's first entry: what the group's line shows. */
  readonly first: T;
  /** Every entry, in input order. */
  readonly items: readonly T[];
  /** Index of each entry in the input, ascending. */
  readonly positions: readonly number[];
  readonly count: number;
}

/**
 * Groups `items` by `keyOf`: one group per distinct key, the groups in the order of their first
 * entry, each group's entries in input order. Entries need not be adjacent to share a group: a
 * group's positions say where each one is.
 */
export function groupEntries<T>(
  items: readonly T[],
  keyOf: (item: T, index: number) => string,
): EntryGroup<T>[] {
  const byKey = new Map<string, { key: string; first: T; items: T[]; positions: number[] }>();
  const order: { key: string; first: T; items: T[]; positions: number[] }[] = [];
  items.forEach((item, i) => {
    const key = keyOf(item, i);
    let g = byKey.get(key);
    if (g === undefined) {
      g = { key, first: item, items: [], positions: [] };
      byKey.set(key, g);
      order.push(g);
    }
    g.items.push(item);
    g.positions.push(i);
  });
  return order.map((g) => ({ ...g, count: g.items.length }));
}

/**
 * What makes two queue entries the same to a person reading the list: status (and a corrected
 * one), peer, tag, length and its unit, what actually matched, the system buffer and the
 * library's extra text. Addresses are left out, the buffer's and those in the extra text (Open
 * MPI prints each request's): every request has its own.
 */
const ADDRESS = /0x[0-9a-f]+/gi;

export function opGroupKey(op: Operation): string {
  const a = op.actual;
  return [
    op.status,
    op.corrected ?? '',
    op.peer.local ?? 'any',
    op.peer.global ?? 'any',
    op.tag ?? 'any',
    op.lengthUnknown === true ? '?' : op.length,
    op.lengthUnit ?? '',
    op.systemBuffer ? 'b' : '',
    a === null ? '' : `${a.peer.local ?? '-'}/${a.peer.global ?? '-'}/${a.tag ?? '-'}/${a.length ?? '-'}`,
    op.extraText.join('\u0001').replace(ADDRESS, '0x'),
  ].join('\u0000');
}

/**
 * Queue positions as a person reads them: "#0–#19,999", "#3, #7, #10–#12"; at most `max` runs,
 * then "and N more".
 */
export function positionsText(positions: readonly number[], max = 4): string {
  const runs: [number, number][] = [];
  for (const p of positions) {
    const last = runs[runs.length - 1];
    if (last !== undefined && p === last[1] + 1) last[1] = p;
    else runs.push([p, p]);
  }
  const fmt = (n: number) => `#${n.toLocaleString('en-US')}`;
  const shown = runs.slice(0, max).map(([a, b]) => (a === b ? fmt(a) : `${fmt(a)}–${fmt(b)}`));
  const rest = runs.slice(max).reduce((s, [a, b]) => s + b - a + 1, 0);
  return rest > 0 ? `${shown.join(', ')} and ${rest.toLocaleString('en-US')} more` : shown.join(', ');
}
