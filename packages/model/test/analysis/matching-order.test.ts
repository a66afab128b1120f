// The matching order of one rank (matching-order.ts): candidates, verdicts, who takes what, and
// the near misses, which must be the very ones explainSnapshot reports (one matching engine).
// Moved here from the web's former match-reasons and near-misses tests with the engine.
import {
  type Communicator,
  commKey,
  explainSnapshot,
  type JobSnapshot,
  type MatchingOrder,
  matchingOrder,
  type NearMiss,
  nearMisses,
  type Operation,
  type RankSnapshot,
  suggestedOrderComm,
  suggestedOrderRank,
  syntheticRingDeadlock,
  syntheticWrongTagHang,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';

function op(local: number | null, global: number | null, tag: number | null, length: number): Operation {
  return {
    status: 'pending',
    peer: { local, global },
    tag,
    length,
    actual: null,
    extraText: [],
    buffer: '0x1000',
    systemBuffer: false,
  };
}

function comm(
  over: Partial<Communicator> & Pick<Communicator, 'id' | 'name' | 'size' | 'localRank'>,
): Communicator {
  return { group: null, sends: [], receives: [], unexpected: [], unavailable: {}, ...over };
}

function rank(r: number, communicators: Communicator[]): RankSnapshot {
  return { rank: r, pid: 100 + r, host: 'n1', state: { kind: 'ok' }, pausedMicros: 10, communicators };
}

function snapshot(ranks: RankSnapshot[]): JobSnapshot {
  return {
    schemaVersion: 1,
    takenAt: '2026-01-01T00:00:00.000Z',
    durationMicros: 100,
    mpi: { library: 'mpich', dll: '/x/libtvmpich.so', lengthUnit: 'bytes' },
    ranks,
  };
}

function orderOf(snap: JobSnapshot, r: number, commId: string): MatchingOrder {
  const order = matchingOrder(snap, r, commId);
  if (!order) throw new Error(`no matching order for rank ${r} comm ${commId}`);
  return order;
}

/**
 * Rank 1 posted (in order): #0 from 0 tag 5, #1 ANY_SOURCE tag 5, #2 from 2 ANY_TAG, #3 from 0 tag 99.
 * Candidates: rank 1 holds an unexpected message from 2 on "other" (tag 5); rank 0 has two
 * pending sends to 1 (tag 5, then tag 6); rank 2 one (tag 5, 64 B).
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

describe('matching order of one rank', () => {
  it('collects the unexpected messages of the rank first, then the sends addressed to it', () => {
    const order = orderOf(fixture(), 1, '0');
    expect(order.candidates.map((x) => [x.origin, x.heldBy, x.op.tag, x.fromRank])).toEqual([
      ['unexpected', 1, 5, 2],
      ['send', 0, 5, 0],
      ['send', 0, 6, 0],
      ['send', 2, 5, 2],
    ]);
  });

  it('says why each candidate does or does not match each receive', () => {
    const order = orderOf(fixture(), 1, '0');
    if (!order.receives) throw new Error('no receives');
    const [r0, r1, r2, r3] = order.receives;
    const summary = (row: typeof r0) =>
      row?.verdicts.map((v) => {
        const c = order.candidates[v.candidate];
        return [c?.heldBy, c?.op.tag, v.reasons.map((r) => r.kind)];
      });
    // #0 wants source 0 tag 5: only rank 0's first send.
    expect(r0?.matchCount).toBe(1);
    expect(summary(r0)).toEqual([
      [0, 5, []],
      [0, 6, ['tag-differs']],
      [2, 5, ['source-differs']],
      [1, 5, ['communicator-differs', 'source-differs']],
    ]);
    expect(r0?.verdicts[3]?.reasons).toEqual([
      { kind: 'communicator-differs', want: 'MPI_COMM_WORLD', got: 'other' },
      // Across communicators, world ranks.
      { kind: 'source-differs', want: 0, got: 2 },
    ]);
    expect(r0?.verdicts[1]?.reasons).toEqual([{ kind: 'tag-differs', want: 5, got: 6 }]);
    // #1 is ANY_SOURCE tag 5: rank 0's tag-5 send and rank 2's send both match.
    expect(r1?.anySource).toBe(true);
    expect(r1?.source).toBeNull();
    expect(r1?.matchCount).toBe(2);
    // #2 is from 2 with ANY_TAG: rank 2's send matches and is longer than the buffer.
    expect(r2?.anyTag).toBe(true);
    const v2 = r2?.verdicts[0];
    expect(v2?.matches).toBe(true);
    expect(v2?.truncates).toBe(true);
    // #3 wants tag 99: nothing can satisfy it.
    expect(r3?.matchCount).toBe(0);
    expect(r3?.takes).toBeNull();
  });

  it('hands each message to the earliest matching receive (non-overtaking)', () => {
    const order = orderOf(fixture(), 1, '0');
    if (!order.receives) throw new Error('no receives');
    const took = order.receives.map((r) => (r.takes === null ? null : order.candidates[r.takes]?.heldBy));
    // #0 takes rank 0's tag-5 send, so ANY_SOURCE #1 gets rank 2's; #2 has nothing left.
    expect(took).toEqual([0, 2, null, null]);
    expect(order.takenBy).toEqual([null, 0, null, 1]);
  });

  it('takes an unexpected message (already arrived) before a pending send', () => {
    const world = (r: number, over = {}) =>
      comm({ id: '0', name: 'MPI_COMM_WORLD', size: 2, localRank: r, ...over });
    const snap = snapshot([
      rank(0, [world(0, { receives: [op(1, 1, 3, 8)], unexpected: [op(1, 1, 3, 8)] })]),
      rank(1, [world(1, { sends: [op(0, 0, 3, 8)] })]),
    ]);
    const order = orderOf(snap, 0, '0');
    expect(order.receives?.[0]?.takes).toBe(0);
    expect(order.candidates[0]?.origin).toBe('unexpected');
    expect(order.takenBy).toEqual([0, null]);
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
    expect(order?.unexpected?.map((u) => u.from)).toEqual([1, 1]);
  });

  it('tells sources apart by local rank on a communicator whose group is unknown', () => {
    // "split" has no group and is not world-sized: local ranks cannot be mapped to world ranks,
    // yet within the communicator the receive from local 1 is not satisfied by local 0's message.
    const split = (over: Partial<Communicator>) =>
      comm({ id: 's', name: 'split', size: 2, localRank: 0, ...over });
    const snap = snapshot([
      rank(0, [split({ receives: [op(1, null, 4, 8)], unexpected: [op(0, null, 4, 8), op(1, null, 4, 8)] })]),
      rank(1, []),
      rank(2, []),
    ]);
    const order = orderOf(snap, 0, 's');
    const row = order.receives?.[0];
    expect(row?.takes).toBe(1);
    expect(row?.verdicts.map((v) => [v.candidate, v.reasons])).toEqual([
      [1, []],
      [0, [{ kind: 'source-differs', want: 1, got: 0 }]],
    ]);
  });

  it('returns null for a communicator or rank the snapshot does not have', () => {
    expect(matchingOrder(fixture(), 1, 'nope')).toBeNull();
    expect(matchingOrder(fixture(), 7, '0')).toBeNull();
  });

  it('resolves peers of sends and receives with the snapshot as the only world', () => {
    const order = orderOf(fixture(), 0, '0');
    expect(order.sends?.map((s) => s.to)).toEqual([1, 1]);
    const other = orderOf(fixture(), 1, '0');
    expect(other.receives?.map((r) => r.source)).toEqual([0, null, 2, 0]);
  });

  it('opens the first rank with a posted receive, on its busiest communicator', () => {
    const snap = fixture();
    expect(suggestedOrderRank(snap)).toBe(1);
    const r1 = snap.ranks[1];
    if (!r1) throw new Error('no rank 1');
    expect(suggestedOrderComm(r1, null)?.id).toBe('0');
    expect(suggestedOrderComm(r1, '8')?.id).toBe('8');
    expect(suggestedOrderComm(r1, 'gone')?.id).toBe('0');
    expect(suggestedOrderRank(snapshot([rank(3, []), rank(4, [])]))).toBe(3);
  });
});

const world3 = (r: number, over: Partial<Communicator> = {}) =>
  comm({ id: '0', name: 'MPI_COMM_WORLD', size: 3, localRank: r, ...over });
// A duplicate of the world under another name: same members, another communicator.
const dup = (r: number, over: Partial<Communicator> = {}) =>
  comm({ id: '5', name: 'dup', size: 3, localRank: r, group: [0, 1, 2], ...over });

/**
 * Rank 0 waits in a receive from rank 1 with tag 99 (world). Rank 1 sent tags 7 and 8: they sit
 * in rank 0's unexpected queue. Rank 2 has a pending send to rank 0 with tag 99, but on "dup".
 * `rank1` replaces rank 1's communicators.
 */
function wrongTag(rank1: Communicator[] = [world3(1)]): JobSnapshot {
  return snapshot([
    rank(0, [
      world3(0, { receives: [op(1, 1, 99, 16)], unexpected: [op(1, 1, 7, 16), op(1, 1, 8, 16)] }),
      dup(0),
    ]),
    rank(1, rank1),
    rank(2, [world3(2), dup(2, { sends: [op(0, 0, 99, 16)] })]),
  ]);
}

/** The near misses explainSnapshot lists for the receives of every rank, keyed by receive. */
function modelNearMisses(snap: JobSnapshot): Map<string, NearMiss> {
  const out = new Map<string, NearMiss>();
  for (const m of nearMisses(snap, { limit: 1_000_000 }).items) {
    if (m.kind === 'receive') out.set(`${m.op.rank}|${m.op.commKey}|${m.op.index}`, m);
  }
  return out;
}

/** Every receive of every rank and communicator: its near misses equal the model's near misses. */
function expectOneEngine(snap: JobSnapshot): number {
  const model = modelNearMisses(snap);
  let seen = 0;
  for (const r of snap.ranks) {
    for (const c of r.communicators) {
      const order = orderOf(snap, r.rank, c.id);
      for (const row of order.receives ?? []) {
        const m = model.get(`${r.rank}|${commKey(c)}|${row.position}`);
        if (row.nearMisses === null) {
          expect(m).toBeUndefined();
          continue;
        }
        seen++;
        expect(m).toBeDefined();
        expect({ peer: row.nearMisses.peer, tag: row.nearMisses.tag, notes: row.nearMisses.notes }).toEqual({
          peer: m?.peer,
          tag: m?.tag,
          notes: m?.notes,
        });
        expect(
          row.nearMisses.lines.map((l) => ({
            op: l.ref,
            peer: l.from,
            tag: l.tag,
            differs: l.differs,
            wouldMatch: l.wouldMatch,
          })),
        ).toEqual(m?.candidates);
      }
    }
  }
  return seen;
}

describe("matching order: the analysis's near misses, from the same engine", () => {
  it('lists the tag near misses of the receive, and not the send that differs in two fields', () => {
    const order = orderOf(wrongTag(), 0, '0');
    const r = order.receives?.[0]?.nearMisses;
    if (!r) throw new Error('no near miss for receive #0');
    expect(r.peer).toBe(1);
    expect(r.tag).toBe(99);
    expect(
      r.lines.map((l) => ({
        queue: l.ref.queue,
        index: l.ref.index,
        from: l.from,
        tag: l.tag,
        differs: l.differs,
        wouldMatch: l.wouldMatch,
        local: order.candidates[l.candidate]?.op.tag,
      })),
    ).toEqual([
      { queue: 'unexpected', index: 0, from: 1, tag: 7, differs: ['tag'], wouldMatch: false, local: 7 },
      { queue: 'unexpected', index: 1, from: 1, tag: 8, differs: ['tag'], wouldMatch: false, local: 8 },
    ]);
    // Rank 2's send on "dup" differs in communicator and source: the verdicts keep it, with
    // both reasons, but it is no near miss.
    const send = order.receives?.[0]?.verdicts.find((v) => order.candidates[v.candidate]?.origin === 'send');
    expect(order.candidates[send?.candidate ?? -1]?.heldBy).toBe(2);
    expect(send?.reasons.map((x) => x.kind)).toEqual(['communicator-differs', 'source-differs']);
    expect(r.notes).toEqual([]);
    expect(expectOneEngine(wrongTag())).toBe(1);
  });

  it("includes another rank's pending send that differs in communicator only, with the model's notes", () => {
    // Rank 1 also sends tag 99 to rank 0, on "dup"; its world send queue cannot be read.
    const snap = wrongTag([
      world3(1, { sends: null, unavailable: { sends: { code: 'MQD_E_X', message: 'hidden' } } }),
      dup(1, { sends: [op(0, 0, 99, 16)] }),
    ]);
    const order = orderOf(snap, 0, '0');
    const r = order.receives?.[0]?.nearMisses;
    if (!r) throw new Error('no near miss for receive #0');
    expect(r.lines.map((l) => [l.ref.queue, l.ref.rank, l.ref.commName, l.tag, l.differs])).toEqual([
      ['unexpected', 0, 'MPI_COMM_WORLD', 7, ['tag']],
      ['unexpected', 0, 'MPI_COMM_WORLD', 8, ['tag']],
      ['sends', 1, 'dup', 99, ['communicator']],
    ]);
    const send = r.lines[2];
    expect(order.candidates[send?.candidate ?? -1]?.heldBy).toBe(1);
    expect(order.candidates[send?.candidate ?? -1]?.comm.name).toBe('dup');
    expect(r.notes).toEqual([
      "rank 1's send queue is not visible: reasoning from the unexpected messages at rank 0",
    ]);
    // The explanation's limits say so with a code, not only in English.
    expect(explainSnapshot(snap).limits.map((l) => l.code)).toContain('sends-hidden');
    expect(expectOneEngine(snap)).toBe(1);
  });

  it('lists no near miss for a receive that is complete or collective traffic', () => {
    const snap = snapshot([
      rank(0, [
        world3(0, {
          receives: [{ ...op(1, 1, 5, 8), status: 'complete' }, op(1, 1, -12, 8)],
          unexpected: [op(1, 1, 6, 8), op(1, 1, -13, 8)],
        }),
      ]),
    ]);
    const order = orderOf(snap, 0, '0');
    expect(order.receives?.map((r) => r.nearMisses)).toEqual([null, null]);
    expect(expectOneEngine(snap)).toBe(0);
  });

  it('agrees with explainSnapshot on every receive of the synthetic jobs', () => {
    let seen = 0;
    for (const snap of [
      syntheticWrongTagHang({ ranks: 8 }),
      syntheticWrongTagHang({ ranks: 8, style: 'mpich' }),
      syntheticRingDeadlock({ ranks: 6, style: 'openmpi' }),
      syntheticRingDeadlock({ ranks: 6, style: 'mpich' }),
      wrongTag(),
      fixture(),
    ]) {
      seen += expectOneEngine(snap);
    }
    expect(seen).toBeGreaterThan(0);
  });
});
