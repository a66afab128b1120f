// Identical queue entries grouped with counts (entry-groups.ts), and the matching order built on
// the groups: 20,000 equal receives are one group, scored once, and still each take their own
// message in queue order.
import { groupEntries, matchingOrder, opGroupKey, positionsText } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { op, rank, snapshot, world } from './fixtures.js';

describe('groupEntries', () => {
  it('groups by key in order of first appearance, with positions and counts', () => {
    const g = groupEntries(['a', 'b', 'a', 'c', 'a', 'b'], (s) => s);
    expect(g.map((x) => [x.key, x.count, x.positions])).toEqual([
      ['a', 3, [0, 2, 4]],
      ['b', 2, [1, 5]],
      ['c', 1, [3]],
    ]);
    expect(g[0]?.first).toBe('a');
    expect(groupEntries([], (s: string) => s)).toEqual([]);
  });

  it('counts queue entries alike whatever their buffers, apart when any field a person reads differs', () => {
    const a = op({ peer: 1, tag: 5000, buffer: '0x1000' });
    const b = op({ peer: 1, tag: 5000, buffer: '0x2000' });
    expect(opGroupKey(a)).toBe(opGroupKey(b));
    expect(opGroupKey(a)).not.toBe(opGroupKey(op({ peer: 1, tag: 5001 })));
    expect(opGroupKey(a)).not.toBe(opGroupKey(op({ peer: 2, tag: 5000 })));
    expect(opGroupKey(a)).not.toBe(opGroupKey(op({ peer: null, tag: 5000 })));
    expect(opGroupKey(a)).not.toBe(opGroupKey(op({ peer: 1, tag: 5000, length: 16 })));
    expect(opGroupKey(a)).not.toBe(opGroupKey(op({ peer: 1, tag: 5000, status: 'complete' })));
    // Open MPI prints each request's address in its extra text: no difference to a reader.
    expect(opGroupKey(op({ peer: 1, tag: 5000, request: '0xabc' }))).toBe(
      opGroupKey(op({ peer: 1, tag: 5000, request: '0x7f00dd' })),
    );
    expect(opGroupKey(a)).not.toBe(opGroupKey(op({ peer: 1, tag: 5000, request: '0xabc' })));
  });

  it('says positions as runs, cut after a few', () => {
    expect(positionsText([0])).toBe('#0');
    expect(positionsText(Array.from({ length: 20_000 }, (_, i) => i))).toBe('#0–#19,999');
    expect(positionsText([3, 7, 10, 11, 12])).toBe('#3, #7, #10–#12');
    expect(positionsText([0, 2, 4, 6, 8, 9], 2)).toBe('#0, #2 and 4 more');
  });
});

describe('matching order of deep queues', () => {
  /** Rank 0 of two: `recvs` receives from rank 1 with tag 5000, then `flood` unexpected messages from rank 1. */
  function deep(recvs: number, flood: (i: number) => number, n: number) {
    const receives = Array.from({ length: recvs }, (_, i) =>
      op({ peer: 1, tag: 5000, length: 4, buffer: `0x${(0x1000 + 4 * i).toString(16)}` }),
    );
    const unexpected = Array.from({ length: n }, (_, i) => op({ peer: 1, tag: flood(i), length: 4 }));
    return snapshot(
      [
        rank(0, [world(2, 0, { receives, unexpected })]),
        rank(1, [world(2, 1, { receives: [op({ peer: 0, tag: 1 })], unexpected: [] })]),
      ],
      'mpich',
    );
  }

  it('20,000 equal receives against 20,000 messages that match none: one group', () => {
    const snap = deep(20_000, (i) => 7 + (i % 1000), 20_000);
    const o = matchingOrder(snap, 0, '0');
    expect(o?.receiveGroups?.map((g) => [g.count, g.first.op.tag, g.first.source])).toEqual([
      [20_000, 5000, 1],
    ]);
    expect(o?.receives?.every((r) => r.takes === null && r.matchCount === 0)).toBe(true);
    // The flood: 1,000 tags, 20 messages each, none matching a receive.
    expect(o?.unexpectedGroups).toHaveLength(1000);
    expect(o?.unexpectedGroups?.[0]?.positions.slice(0, 3)).toEqual([0, 1000, 2000]);
    expect(o?.unexpected?.every((u) => u.firstMatchingReceive === null)).toBe(true);
  });

  it('equal receives still take their messages one each, earliest first', () => {
    // Three messages with tag 5000 among others: receives #0-#2 take them, #3-#4 find none left.
    const snap = deep(5, (i) => (i === 1 || i === 4 || i === 6 ? 5000 : 7), 8);
    const o = matchingOrder(snap, 0, '0');
    expect(o?.receiveGroups).toHaveLength(1);
    expect(o?.receives?.map((r) => r.takes)).toEqual([1, 4, 6, null, null]);
    expect(o?.receives?.[0]?.matchCount).toBe(3);
    expect(o?.takenBy.filter((t) => t !== null)).toEqual([0, 1, 2]);
    // Each tag-5000 message matches receive #0 first.
    expect(o?.unexpected?.filter((u) => u.firstMatchingReceive === 0).map((u) => u.position)).toEqual([
      1, 4, 6,
    ]);
  });
});
