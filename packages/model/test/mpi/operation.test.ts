// One definition of "the same operation" (mpi/operation.ts): the progress verdict and the
// history walk under the timeline agree on every pair of reads. Before, progress called a
// status change "changed" while the history counted it as one operation gone and one new, and
// progress ignored the system buffer flag.
import {
  compareSnapshots,
  type HistoryOp,
  type Operation,
  opIdentity,
  opStateKey,
  pairOperations,
  stillness,
  stillnessText,
  walkOpHistory,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { op, rank, snapshot, world } from '../analysis/fixtures.js';

const one = (o: Operation, takenAt?: string) =>
  snapshot([rank(0, [world(2, 0, { receives: [o] })])], 'openmpi', takenAt);
const LATER = '2026-03-01T10:05:00.000Z';

/** [unchanged, changed, appeared, disappeared] by the progress verdict and by the history walk. */
function both(a: Operation, b: Operation): [number[], number[]] {
  const k = compareSnapshots(one(a), one(b, LATER)).counts;
  const h = walkOpHistory([one(a), one(b, LATER)]).snapshots[1];
  return [
    [k.unchanged, k.changed, k.appeared, k.disappeared],
    [h?.unchanged ?? -1, h?.changed ?? -1, h?.appeared ?? -1, h?.disappeared ?? -1],
  ];
}

describe('the same operation across reads', () => {
  const pending = op({ peer: 1, tag: 7, request: '0xaaa0' });

  it('a status change is the same operation, changed, for progress and history alike', () => {
    const [p, h] = both(pending, { ...pending, status: 'matched' });
    expect(p).toEqual([0, 1, 0, 0]);
    expect(h).toEqual(p);
  });

  it('a new request address, buffer or system-buffer flag is another operation for both', () => {
    for (const other of [
      { ...pending, extraText: ['Send: 0xbbb0'] },
      { ...pending, buffer: '0x2000' },
      { ...pending, systemBuffer: true },
    ]) {
      const [p, h] = both(pending, other);
      expect(p).toEqual([0, 0, 1, 1]);
      expect(h).toEqual(p);
    }
  });

  it('identity leaves out the status and the actual match; the state key does not', () => {
    const matched: Operation = {
      ...pending,
      status: 'matched',
      actual: { peer: { local: 1, global: 1 }, tag: 7, length: 8 },
    };
    expect(opIdentity(0, '0', 'receives', pending)).toBe(opIdentity(0, '0', 'receives', matched));
    expect(opStateKey(0, '0', 'receives', pending)).not.toBe(opStateKey(0, '0', 'receives', matched));
    expect(opIdentity(0, '0', 'receives', pending)).not.toBe(opIdentity(0, '1', 'receives', pending));
    expect(opIdentity(0, '0', 'receives', pending)).not.toBe(opIdentity(0, '0', 'sends', pending));
  });

  it('pairs unchanged copies before changed ones', () => {
    const a = { identity: 'x', progress: 'pending' };
    const b = { identity: 'x', progress: 'matched' };
    // Later: the matched one first; a greedy pairing by identity would pair it with the pending
    // one it is not, and call both changed.
    const p = pairOperations([a, b], [b, a]);
    expect(p.change).toEqual(['unchanged', 'unchanged']);
    expect(Array.from(p.earlier)).toEqual([1, 0]);
    const q = pairOperations([a, a], [b]);
    expect([q.change, q.gone]).toEqual([['changed'], [1]]);
    // The same answers on the map path (more than a few operations on each side).
    const many = Array.from({ length: 20 }, (_, i) => ({ identity: `op${i}`, progress: 'pending' }));
    const big = pairOperations([...many, a, b], [b, a, ...many.slice(1)]);
    expect(big.change.slice(0, 2)).toEqual(['unchanged', 'unchanged']);
    expect(Array.from(big.earlier.slice(0, 2))).toEqual([21, 20]);
    expect(big.gone).toEqual([0]);
  });

  it("restarts a changed operation's run and says the job moved", () => {
    const seen: HistoryOp[] = [];
    const h = walkOpHistory([one(pending), one(pending), one({ ...pending, status: 'matched' })], (o) =>
      seen.push(o),
    );
    expect(seen.map((o) => [o.snapshot, o.since, o.readsInRun])).toEqual([
      [0, 0, 1],
      [1, 0, 2],
      [2, 2, 1],
    ]);
    const s = stillness(h);
    expect(s).toMatchObject({ moving: true, changed: 1, appeared: 0, disappeared: 0 });
    expect(stillnessText(s, [0, 1, 2], '0')).toBe(
      "Moving: 1 operation changed, 0 operations new and 0 operations gone since the ranks' previous reads.",
    );
  });
});
