import { type Communicator, explainSnapshot, type JobSnapshot } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { matchingOrder } from '../src/matching/match-reasons.js';
import { joinNearMisses, nearMissWhere, nearMissWhy } from '../src/matching/near-misses.js';
import { comm, op, rank, snapshot } from './fixtures.js';

const world = (r: number, over: Partial<Communicator> = {}) =>
  comm({ id: '0', name: 'MPI_COMM_WORLD', size: 3, localRank: r, ...over });
// A duplicate of the world under another name: same members, another communicator.
const dup = (r: number, over: Partial<Communicator> = {}) =>
  comm({ id: '5', name: 'dup', size: 3, localRank: r, group: [0, 1, 2], ...over });

/**
 * Rank 0 waits in a receive from rank 1 with tag 99 (world). Rank 1 sent tags 7 and 8: they sit
 * in rank 0's unexpected queue. Rank 2 has a pending send to rank 0 with tag 99, but on "dup".
 * `rank1` replaces rank 1's communicators.
 */
function wrongTag(rank1: Communicator[] = [world(1)]): JobSnapshot {
  return snapshot([
    rank(0, [
      world(0, { receives: [op(1, 1, 99, 16)], unexpected: [op(1, 1, 7, 16), op(1, 1, 8, 16)] }),
      dup(0),
    ]),
    rank(1, rank1),
    rank(2, [world(2), dup(2, { sends: [op(0, 0, 99, 16)] })]),
  ]);
}

function join(snap: JobSnapshot, maxNearMisses?: number) {
  const order = matchingOrder(snap, 0, '0');
  if (!order) throw new Error('no order for rank 0');
  const e = explainSnapshot(snap, [], maxNearMisses === undefined ? {} : { maxNearMisses });
  const comms = snap.ranks.find((r) => r.rank === 0)?.communicators ?? [];
  return { order, near: joinNearMisses(order, comms, e) };
}

describe("matching order: the model's near misses joined to the rows", () => {
  it('lists the tag near misses of the receive, and not the send that differs in two fields', () => {
    const { order, near } = join(wrongTag());
    expect(near.ambiguous).toBe(false);
    expect(near.truncated).toBe(false);
    expect([...near.byReceive.keys()]).toEqual([0]);
    const r = near.byReceive.get(0);
    expect(r?.peer).toBe(1);
    expect(r?.tag).toBe(99);
    const lines = r?.lines.map((l) => ({
      where: nearMissWhere(l.ref),
      from: l.from,
      tag: l.tag,
      differs: l.differs,
      wouldMatch: l.wouldMatch,
      local: l.candidate === null ? null : order.candidates[l.candidate]?.op.tag,
    }));
    expect(lines).toEqual([
      {
        where: 'unexpected message #0 at rank 0',
        from: 1,
        tag: 7,
        differs: ['tag'],
        wouldMatch: false,
        local: 7,
      },
      {
        where: 'unexpected message #1 at rank 0',
        from: 1,
        tag: 8,
        differs: ['tag'],
        wouldMatch: false,
        local: 8,
      },
    ]);
    // Rank 2's send on "dup" differs in communicator and source: the view's own list keeps it,
    // with both reasons, but it is no near miss.
    const local = order.receives?.[0]?.verdicts.find((v) => v.candidate.origin === 'send');
    expect(local?.candidate.heldBy).toBe(2);
    expect(local?.reasons.map((x) => x.kind)).toEqual(['communicator-differs', 'source-differs']);
    const first = r?.lines[0];
    if (!r || !first) throw new Error('no near miss');
    expect(nearMissWhy(first, r, order.comm.name)).toBe('tag differs (7, receive wants 99)');
    expect(r.notes).toEqual([]);
  });

  it("includes another rank's pending send that differs in communicator only, with the model's notes", () => {
    // Rank 1 also sends tag 99 to rank 0, on "dup"; its world send queue cannot be read.
    const snap = wrongTag([
      world(1, { sends: null, unavailable: { sends: { code: 'MQD_E_X', message: 'hidden' } } }),
      dup(1, { sends: [op(0, 0, 99, 16)] }),
    ]);
    const { order, near } = join(snap);
    const r = near.byReceive.get(0);
    if (!r) throw new Error('no near miss for receive #0');
    expect(r.lines.map((l) => [l.ref.queue, l.ref.rank, l.ref.commName, l.tag, l.differs])).toEqual([
      ['unexpected', 0, 'MPI_COMM_WORLD', 7, ['tag']],
      ['unexpected', 0, 'MPI_COMM_WORLD', 8, ['tag']],
      ['sends', 1, 'dup', 99, ['communicator']],
    ]);
    const send = r.lines[2];
    if (!send || send.candidate === null) throw new Error('the send is not joined to the view');
    expect(order.candidates[send.candidate]?.heldBy).toBe(1);
    expect(order.candidates[send.candidate]?.comm.name).toBe('dup');
    expect(nearMissWhy(send, r, order.comm.name)).toBe(
      'communicator differs (dup, receive is on MPI_COMM_WORLD)',
    );
    expect(r.notes).toEqual([
      "rank 1's send queue is not visible: reasoning from the unexpected messages at rank 0",
    ]);
    expect(near.caveats.some((c) => /send queues are not visible/.test(c))).toBe(true);
  });

  it('says when the analysis stopped at its limit', () => {
    const { near } = join(wrongTag(), 0);
    expect(near.truncated).toBe(true);
    expect(near.byReceive.size).toBe(0);
  });

  it('attaches nothing when two communicators of the rank share a key', () => {
    const split = (id: string, over: Partial<Communicator> = {}) =>
      comm({ id, name: 'split', size: 2, localRank: 0, ...over });
    const snap = snapshot([
      rank(0, [split('a', { receives: [op(1, null, 99, 8)], unexpected: [op(1, null, 7, 8)] }), split('b')]),
    ]);
    const order = matchingOrder(snap, 0, 'a');
    if (!order) throw new Error('no order');
    const near = joinNearMisses(order, snap.ranks[0]?.communicators ?? [], explainSnapshot(snap));
    expect(near.ambiguous).toBe(true);
    expect(near.byReceive.size).toBe(0);
  });
});
