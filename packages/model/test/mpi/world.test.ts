// The world size and peers of a snapshot that holds some of a job's ranks: the index (what the
// matrix draws) and the analysis (matching order, wait-for graph) resolve every peer alike.
// Before, the model took ranks.length as the world size, so with 4 of 8 MPICH ranks a peer on
// MPICH's internal world copy (unnamed, no group, size 8) was unknown to the analysis while the
// web's own index (largest rank seen + 1) drew it.
import {
  analyzeWaits,
  buildWaitGraph,
  type Communicator,
  explainSnapshot,
  matchingOrder,
  PEER_ANY,
  PEER_UNKNOWN,
  SnapshotIndex,
  worldSizeOf,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { comm, op, rank, snapshot } from '../analysis/fixtures.js';

const N = 8;
/** MPICH lists no global peer: every peer is a local rank. */
const local = (peer: number | null, tag: number | null) => op({ peer, tag, global: null });

/** Ranks 0-3 of an 8-rank MPICH job; rank 3 receives from 5 on the world and from 6 on the world copy. */
function subset() {
  const ranks = [0, 1, 2, 3].map((r) => {
    const world: Communicator = { ...comm('MPI_COMM_WORLD', N, r, null, {}), world: true };
    const copy = comm('', N, r, null, {}, '2');
    const other = comm('halo', 10, r, null, {}, '3');
    if (r === 3) {
      world.receives?.push(local(5, 7), local(null, 8));
      copy.receives?.push(local(6, -10));
      // A communicator of 10 without a group: its local rank 9 names no world rank we can know.
      other.receives?.push(local(9, 1));
    }
    return rank(r, [world, copy, other]);
  });
  return snapshot(ranks, 'mpich');
}

describe('world size and peers with a subset of the ranks', () => {
  it("takes the world's size from MPI_COMM_WORLD, not from the ranks the snapshot holds", () => {
    const snap = subset();
    expect(snap.ranks.length).toBe(4);
    expect(worldSizeOf(snap)).toBe(N);
    const ix = new SnapshotIndex(snap);
    expect([ix.n, ix.worldSize]).toEqual([4, N]);
    expect(ix.positionOf(3)).toBe(3);
    expect(ix.positionOf(5)).toBeUndefined();
  });

  it('never makes the world smaller than a rank it names', () => {
    const snap = snapshot([
      rank(0, [comm('pair', 2, 0, [0, 11], { sends: [op({ peer: 1, tag: 1, global: 11 })] })]),
    ]);
    expect(worldSizeOf(snap)).toBe(12);
  });

  it('resolves peers outside the snapshot on the world and its copies, and keeps ANY_SOURCE apart from unknown', () => {
    const ix = new SnapshotIndex(subset());
    const pos = ix.idxOf(3);
    const entries = ix.comms.filter((c) => c.rankIdx === pos);
    const peersOf = (name: string) =>
      (entries.find((e) => e.comm.name === name)?.comm.receives ?? []).map((o) => {
        const e = entries.find((x) => x.comm.name === name);
        return e === undefined ? null : [ix.peerRank(o.peer, e), ix.peerIdx(o.peer, e)];
      });
    expect(peersOf('MPI_COMM_WORLD')).toEqual([
      [5, PEER_UNKNOWN],
      [PEER_ANY, PEER_ANY],
    ]);
    // ix.n (4) used to be the world size here: the copy was not world-like and 6 was unknown.
    expect(peersOf('')).toEqual([[6, PEER_UNKNOWN]]);
    expect(peersOf('halo')).toEqual([[PEER_UNKNOWN, PEER_UNKNOWN]]);
    expect(PEER_ANY).not.toBe(PEER_UNKNOWN);
  });

  it('the matching order names the same sources as the index', () => {
    const ix = new SnapshotIndex(subset());
    const world = matchingOrder(ix, 3, '0');
    expect(world?.receives?.map((r) => [r.source, r.anySource])).toEqual([
      [5, false],
      [null, true],
    ]);
    const copy = matchingOrder(ix, 3, '2');
    expect(copy?.receives?.map((r) => r.source)).toEqual([6]);
  });
});

describe('the wait-for graph with a subset of the ranks', () => {
  it('names a peer outside the snapshot instead of calling it unmapped', () => {
    const snap = subset();
    const w = analyzeWaits(buildWaitGraph(new SnapshotIndex(snap)));
    // Before, the wait for rank 5 was one of 2 "unmapped" peers; only the halo one is.
    expect([w.unresolvedWaits, w.outsideWaits, w.outsideRanks]).toEqual([1, 1, [5]]);
    const e = explainSnapshot(snap);
    expect(e.waits.outsideRanks).toBe('5');
    expect(e.limits.find((l) => l.code === 'peers-outside')?.text).toBe(
      '1 pending operation waits for rank 5, not in this snapshot (assumed satisfiable, like a rank not read)',
    );
    expect(e.limits.find((l) => l.code === 'peers-unmapped')?.text).toMatch(
      /^1 pending operations name a peer/,
    );
  });
});
