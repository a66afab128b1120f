// Near misses in deep queues: 20,000 receives against 20,000 unexpected messages that differ
// only in tag give one near miss per receive, each with a bounded list of candidates, found by
// one scan per kind of receive (the whole explanation of such a rank once ran out of memory).
import { explainSnapshot, MAX_NEAR_MISS_CANDIDATES, nearMisses } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { op, rank, snapshot, world } from './fixtures.js';

/** Rank 0 of two: `recvs` receives from rank 1 with tag 5000; `n` unexpected messages from rank 1 with `tag(i)`. */
function deep(recvs: number, tag: (i: number) => number, n: number) {
  const receives = Array.from({ length: recvs }, () => op({ peer: 1, tag: 5000, length: 4 }));
  const unexpected = Array.from({ length: n }, (_, i) => op({ peer: 1, tag: tag(i), length: 4 }));
  return snapshot(
    [
      rank(0, [world(2, 0, { receives, unexpected })]),
      rank(1, [world(2, 1, { receives: [op({ peer: 0, tag: 1 })], unexpected: [] })]),
    ],
    'mpich',
  );
}

describe('near misses in deep queues', () => {
  it('counts every receive, lists at most the limit, and keeps each list short', () => {
    const r = nearMisses(
      deep(20_000, () => 7, 20_000),
      { limit: 1000 },
    );
    expect(r.total).toBe(20_000);
    expect(r.items).toHaveLength(1000);
    for (const m of r.items) {
      expect(m.candidates.length).toBe(MAX_NEAR_MISS_CANDIDATES);
      expect(m.candidates[0]?.differs).toEqual(['tag']);
      expect(m.candidates[0]?.tag).toBe(7);
    }
  });

  it('the whole explanation of such a rank names the near miss', () => {
    const e = explainSnapshot(deep(20_000, (i) => 7 + (i % 3), 20_000));
    expect(e.nearMissTotal).toBe(20_000);
    expect(e.nearMisses[0]?.candidates[0]?.tag).toBe(7);
  });

  it('the candidates kept are the first in queue order', () => {
    const r = nearMisses(deep(3, (i) => 100 + i, 20_000));
    expect(r.items[0]?.candidates.map((c) => c.tag)).toEqual([100, 101, 102, 103, 104, 105, 106, 107]);
    // Identical receives share the one scan's answer.
    expect(r.items[1]?.candidates).toBe(r.items[0]?.candidates);
  });
});
