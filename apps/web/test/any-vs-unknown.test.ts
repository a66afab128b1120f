// The matrix's any-sender strip holds receives posted with MPI_ANY_SOURCE (the model's
// PEER_ANY) and operations whose sender cannot be resolved (PEER_UNKNOWN). They share the strip
// but the edge table, the pyramid, the tooltip, the cell list and the legend keep them apart.

import { buildEdges } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { localSnapshot } from '../src/data.js';
import { CellOps } from '../src/matrix/CellOps.js';
import { cellLines } from '../src/matrix/cell-text.js';
import { anySenderSplit, compileFilter, NO_FILTER } from '../src/matrix/edges.js';
import { MatrixLegend } from '../src/matrix/MatrixLegend.js';
import { buildPyramid, stripTotals, stripUnknown } from '../src/matrix/pyramid.js';
import { rankNotes } from '../src/matrix/rank-notes.js';
import { ANY_PEER, KIND_RECEIVES } from '../src/matrix-types.js';
import { contextOf } from '../src/snapshot-context.js';
import { factsOfSnapshot } from '../src/snapshot-facts.js';
import { comm, op, rank, snapshot } from './fixtures.js';

/**
 * Ranks 0 and 1 of 4. Rank 1 posted a receive from MPI_ANY_SOURCE on the world (tag 3) and a receive from
 * local 1 of "pair", a communicator of 2 whose group the library did not report (tag 4): that
 * sender names no world rank.
 */
function anyAndUnknown() {
  const world = (r: number, over = {}) =>
    comm({ id: '0', name: 'MPI_COMM_WORLD', size: 4, localRank: r, world: true, ...over });
  return snapshot([
    rank(0, [world(0)]),
    rank(1, [
      world(1, { receives: [op(null, null, 3, 8)] }),
      comm({ id: '9', name: 'pair', size: 2, localRank: 0, receives: [op(1, null, 4, 8)] }),
    ]),
  ]);
}

describe('MPI_ANY_SOURCE and an unknown sender on the any-sender strip', () => {
  const s = anyAndUnknown();
  const edges = buildEdges(s);
  const filter = compileFilter(NO_FILTER, edges.comms);
  const pyramid = buildPyramid(edges, filter);
  const level = pyramid.levels[0];
  if (!level) throw new Error('no level 0');

  it('the edge table marks which strip entry is unknown', () => {
    const byTag = new Map<number, number>();
    for (let e = 0; e < edges.length; e++) {
      expect(edges.src[e]).toBe(ANY_PEER);
      expect(edges.dst[e]).toBe(1);
      byTag.set(edges.tag[e] ?? -1, edges.peerUnknown[e] ?? -1);
    }
    expect(Object.fromEntries(byTag)).toEqual({ 3: 0, 4: 1 });
    expect(anySenderSplit(edges, filter, { row: ANY_PEER, col: 1, size: 1 })).toEqual({
      wildcard: [0, 1, 0],
      unknown: [0, 1, 0],
    });
  });

  it('the pyramid counts the unknown part of each strip segment, at every level', () => {
    for (const l of pyramid.levels) {
      const col = l.blockSize === 1 ? 1 : 0;
      expect(stripUnknown(l, col)[KIND_RECEIVES]).toBe(1);
      expect(l.anyRowCount[col * 3 + KIND_RECEIVES]).toBe(2);
    }
    expect(stripTotals(pyramid)).toEqual({ wildcard: [0, 1, 0], unknown: [0, 1, 0] });
  });

  it('the tooltip says them apart', () => {
    const lines = cellLines(
      { level, blockRow: ANY_PEER, blockCol: 1, row: ANY_PEER, col: 1, size: 1 },
      {
        n: edges.worldSize,
        kindUnit: edges.kindUnit,
        lengthUnit: 'bytes',
        notes: rankNotes(factsOfSnapshot(s).notRead, edges.worldSize, null),
        rankIndex: contextOf(s).index,
        snapshot: s,
      },
      'click to list them',
    );
    expect(lines[0]).toBe('MPI_ANY_SOURCE or unknown sender → receiver 1');
    expect(lines).toContain('MPI_ANY_SOURCE: 1 posted receive; sender unknown: 1 posted receive');
  });

  it('the cell list counts them apart and marks each row', () => {
    const html = renderToStaticMarkup(
      createElement(CellOps, {
        data: localSnapshot('peers', s, true),
        edges,
        filter,
        cell: { row: ANY_PEER, col: 1, size: 1 },
        setUrl: () => {},
      }),
    );
    expect(html).toContain(
      '<p data-testid="cell-any-split">MPI_ANY_SOURCE: 1 posted receive; sender unknown: 1 posted receive</p>',
    );
    expect([...html.matchAll(/data-peer="(\w+)">([^<]*)</g)].map((m) => `${m[1]}:${m[2]}`).sort()).toEqual([
      'any:ANY',
      'unknown:local 1 (world ?)',
    ]);
  });

  it('the legend names both and counts them apart', () => {
    const html = renderToStaticMarkup(
      createElement(MatrixLegend, {
        cycles: null,
        notes: rankNotes(factsOfSnapshot(s).notRead, edges.worldSize, null),
        strip: stripTotals(pyramid),
      }),
    );
    const row = /data-testid="matrix-any-row">(.*?)<\/span><span/.exec(html)?.[1] ?? '';
    const text = row.replace(/<[^>]*>/g, '');
    expect(text).toContain('receives from MPI_ANY_SOURCE');
    expect(text).toContain('operations whose sender is unknown');
    expect(text).toContain('(MPI_ANY_SOURCE: 1 posted receive; sender unknown: 1 posted receive)');
  });
});
