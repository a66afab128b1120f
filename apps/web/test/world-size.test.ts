// With a subset of a job's ranks in a snapshot, the matrix and the deadlock analysis must name
// the same peer for every operation: both take the world size and the peer rules from the model
// (mpi/world.ts). Before, the matrix took "largest rank seen + 1" and the analysis the number of
// ranks listed, so a world copy's peer was a rank for one and unknown for the other.
import { buildEdges, PEER_ANY, PEER_UNKNOWN } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { localSnapshot } from '../src/data.js';
import { ANY_PEER, KIND_OF_INDEX, KIND_SENDS } from '../src/matrix-types.js';
import { RankView } from '../src/rank/RankView.js';
import { contextOf } from '../src/snapshot-context.js';
import { buildTimeline } from '../src/timeline/timeline.js';
import { DEFAULT_STATE } from '../src/url-state.js';
import { comm, op, rank, snapshot } from './fixtures.js';

/** Ranks 0 and 1 of an 8-rank job: the others' agents did not report. */
function subset() {
  const world = (r: number, over = {}) =>
    comm({ id: '0', name: 'MPI_COMM_WORLD', size: 8, localRank: r, world: true, ...over });
  // The library's own copy of the world (MPICH): no group, the world's size, not flagged world.
  const copy = (r: number, over = {}) => comm({ id: '7', name: '', size: 8, localRank: r, ...over });
  return snapshot([
    rank(0, [world(0, { sends: [op(7, null, 1, 8)] }), copy(0, { sends: [op(6, null, 2, 8)] })]),
    rank(1, [world(1, { receives: [op(null, null, 3, 8), op(5, null, 4, 8)] }), copy(1)]),
  ]);
}

describe('world size and peers with a subset of ranks', () => {
  it('the matrix and the analysis agree on the world and on every peer', () => {
    const s = subset();
    const ix = contextOf(s).index;
    const edges = buildEdges(s);
    expect(ix.worldSize).toBe(8);
    expect(edges.worldSize).toBe(ix.worldSize);
    const seen: [string, number][] = [];
    for (let e = 0; e < edges.length; e++) {
      const owner = edges.owner[e] ?? -1;
      const ce = ix.comms[(ix.commStart[owner] ?? 0) + (edges.commPos[e] ?? 0)];
      if (ce === undefined) throw new Error(`edge ${e}: no communicator`);
      const kind = KIND_OF_INDEX[edges.kind[e] ?? 0] ?? 'sends';
      const o = ce.comm[kind]?.[edges.opPos[e] ?? 0];
      if (o === undefined) throw new Error(`edge ${e}: no operation`);
      const peer = ix.peerRank(o.peer, ce);
      const drawn = edges.kind[e] === KIND_SENDS ? edges.dst[e] : edges.src[e];
      expect(drawn).toBe(peer === PEER_ANY || peer === PEER_UNKNOWN ? ANY_PEER : peer);
      seen.push([`${ce.rank}:${kind}:${o.tag}`, peer]);
    }
    expect(seen.sort()).toEqual([
      ['0:sends:1', 7],
      // The world copy's peer is a world rank, not unknown, for both.
      ['0:sends:2', 6],
      ['1:receives:3', PEER_ANY],
      ['1:receives:4', 5],
    ]);
  });

  it('the timeline has a row for every rank of the world, read or not', () => {
    const s = subset();
    expect(buildTimeline([{ id: 'a', takenAt: s.takenAt, snapshot: s }]).worldSize).toBe(8);
  });

  it('a receive from MPI_ANY_SOURCE and one from an unknown source read differently', () => {
    const s = subset();
    // Rank 1's receive on a communicator of 2 whose group the library did not report: local 1
    // names no world rank the rules can find.
    const unknownSource = {
      ...s,
      ranks: s.ranks.map((r) =>
        r.rank !== 1
          ? r
          : {
              ...r,
              communicators: [
                ...r.communicators,
                comm({ id: '9', name: 'pair', size: 2, localRank: 0, receives: [op(1, null, 5, 8)] }),
              ],
            },
      ),
    };
    const ix = contextOf(unknownSource).index;
    const ce = ix.comms.find((c) => c.rank === 1 && c.comm.id === '9');
    const any = ix.comms.find((c) => c.rank === 1 && c.comm.id === '0');
    expect(ce && ix.peerRank(ce.comm.receives?.[0]?.peer ?? op(0, 0, 0, 0).peer, ce)).toBe(PEER_UNKNOWN);
    expect(any && ix.peerRank(any.comm.receives?.[0]?.peer ?? op(0, 0, 0, 0).peer, any)).toBe(PEER_ANY);
    const html = renderToStaticMarkup(
      createElement(RankView, {
        api: {} as Api,
        url: { ...DEFAULT_STATE, view: 'rank', rank: 1 },
        setUrl: () => {},
        data: localSnapshot('peers', unknownSource, true),
      }),
    );
    const from = [
      ...html.matchAll(
        /<tr><td>\d+<\/td><td>pending<\/td><td class="[^"]*">([^<]*)<\/td><td class="[^"]*">(\d+)</g,
      ),
    ].map((m) => `${m[2]}:${m[1]}`);
    expect(from.sort()).toEqual(['3:ANY', '4:5', '5:local 1 (world ?)']);
  });
});
