import { describe, expect, it } from 'vitest';
import { collectCandidates, matchingOrder, reasonText } from '../src/matching/match-reasons.js';
import { comm, op, rank, snapshot } from './fixtures.js';

/**
 * Rank 1 posted (in order): #0 from 0 tag 5, #1 ANY_SOURCE tag 5, #2 from 2 ANY_TAG, #3 from 0 tag 99.
 * Candidates: rank 0 has two pending sends to 1 (tag 5, then tag 6); rank 2 one (tag 5, 64 B);
 * rank 1 holds an unexpected message from 2 on "other" (tag 5).
 */
function fixture() {
  const world = (r: number, over = {}) =>
    comm({ id: '0', name: 'MPI_COMM_WORLD', size: 3, localRank: r, ...over });
  return snapshot([
    rank(0, [world(0, { sends: [op(1, 1, 5, 16), op(1, 1, 6, 16)] })]),
    rank(1, [
      world(1, { receives: [op(0, 0, 5, 16), op(null, null, 5, 32), op(2, 2, null, 32), op(0, 0, 99, 16)] }),
      comm({ id: '8', name: 'other', size: 3, localRank: 1, unexpected: [op(2, 2, 5, 8)] }),
    ]),
    rank(2, [world(2, { sends: [op(1, 1, 5, 64)] })]),
  ]);
}

describe('matching order (local stand-in for model analysis)', () => {
  it('collects unexpected messages of the rank and sends addressed to it', () => {
    const c = collectCandidates(fixture(), 1);
    expect(c.map((x) => [x.origin, x.heldBy, x.op.tag])).toEqual([
      ['send', 0, 5],
      ['send', 0, 6],
      ['unexpected', 1, 5],
      ['send', 2, 5],
    ]);
  });

  it('says why each candidate does or does not match each receive', () => {
    const order = matchingOrder(fixture(), 1, '0');
    if (!order?.receives) throw new Error('no receives');
    const [r0, r1, r2, r3] = order.receives;
    const summary = (row: typeof r0) =>
      row?.verdicts.map((v) => [v.candidate.heldBy, v.candidate.op.tag, v.reasons.map((r) => r.kind)]);
    // #0 wants source 0 tag 5: only rank 0's first send.
    expect(r0?.matchCount).toBe(1);
    expect(summary(r0)).toEqual([
      [0, 5, []],
      [0, 6, ['tag-differs']],
      [2, 5, ['source-differs']],
      [1, 5, ['communicator-differs', 'source-differs']],
    ]);
    // #1 is ANY_SOURCE tag 5: rank 0's tag-5 send and rank 2's send both match.
    expect(r1?.anySource).toBe(true);
    expect(r1?.matchCount).toBe(2);
    // #2 is from 2 with ANY_TAG: rank 2's send matches and is longer than the buffer.
    expect(r2?.anyTag).toBe(true);
    const v2 = r2?.verdicts[0];
    expect(v2?.matches).toBe(true);
    expect(v2?.truncates).toBe(true);
    // #3 wants tag 99: nothing can satisfy it.
    expect(r3?.matchCount).toBe(0);
    expect(r3?.takes).toBeNull();
    expect(reasonText({ kind: 'tag-differs', want: 99, got: 5 })).toBe('tag differs (5, receive wants 99)');
  });

  it('hands each message to the earliest matching receive (non-overtaking)', () => {
    const order = matchingOrder(fixture(), 1, '0');
    if (!order?.receives) throw new Error('no receives');
    const took = order.receives.map((r) => (r.takes === null ? null : order.candidates[r.takes]?.heldBy));
    // #0 takes rank 0's tag-5 send, so ANY_SOURCE #1 gets rank 2's; #2 has nothing left.
    expect(took).toEqual([0, 2, null, null]);
    expect(order.takenBy).toEqual([0, null, null, 1]);
  });

  it('flags an unexpected message that a posted receive would match', () => {
    const world = comm({
      id: '0',
      name: 'MPI_COMM_WORLD',
      size: 2,
      localRank: 0,
      receives: [op(1, 1, 3, 8)],
      unexpected: [op(1, 1, 4, 8), op(1, 1, 3, 8)],
    });
    const order = matchingOrder(snapshot([rank(0, [world])]), 0, '0');
    expect(order?.unexpected?.map((u) => u.firstMatchingReceive)).toEqual([null, 0]);
  });

  it('returns null for a communicator the rank does not have', () => {
    expect(matchingOrder(fixture(), 1, 'nope')).toBeNull();
    expect(matchingOrder(fixture(), 7, '0')).toBeNull();
  });
});
