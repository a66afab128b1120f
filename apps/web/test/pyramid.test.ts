import { buildEdges, syntheticHaloJob, syntheticRingDeadlock, validateSnapshot } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import {
  ANY_PEER,
  compileFilter,
  type EdgeTable,
  edgePasses,
  edgesInCell,
  KIND_COUNT,
  type MatrixFilter,
  NO_FILTER,
} from '../src/matrix/edges.js';
import {
  blockValues,
  buildCoarsePyramid,
  buildPyramid,
  findBlock,
  levelForDensity,
  type Pyramid,
  pyramidBuffers,
  stripTotals,
} from '../src/matrix/pyramid.js';
import { fourRanks } from './fixtures.js';

/** The slow, obvious aggregation, to check the fast one against. */
function bruteForce(t: EdgeTable, filter: MatrixFilter, blockSize: number) {
  const f = compileFilter(filter, t.comms);
  const cells = new Map<string, { count: number[]; bytes: number[] }>();
  for (let i = 0; i < t.length; i++) {
    if (!edgePasses(t, f, i)) continue;
    const s = t.src[i] ?? 0;
    const d = t.dst[i] ?? 0;
    const key = `${s === ANY_PEER ? 'A' : Math.floor(s / blockSize)},${d === ANY_PEER ? 'U' : Math.floor(d / blockSize)}`;
    const cell = cells.get(key) ?? { count: [0, 0, 0], bytes: [0, 0, 0] };
    const k = t.kind[i] ?? 0;
    cell.count[k] = (cell.count[k] ?? 0) + 1;
    cell.bytes[k] = (cell.bytes[k] ?? 0) + (t.size[i] ?? 0);
    cells.set(key, cell);
  }
  return cells;
}

function checkAgainstBruteForce(t: EdgeTable, filter: MatrixFilter, p: Pyramid) {
  for (const level of p.levels) {
    const expected = bruteForce(t, filter, level.blockSize);
    let stored = 0;
    for (let r = 0; r < level.dim; r++) {
      for (let i = level.rowPtr[r] ?? 0; i < (level.rowPtr[r + 1] ?? 0); i++) {
        stored++;
        const c = level.col[i] ?? 0;
        const want = expected.get(`${r},${c}`);
        expect(want, `level ${level.level} block ${r},${c} should be empty`).toBeDefined();
        expect(Array.from(level.count.subarray(i * KIND_COUNT, i * KIND_COUNT + 3))).toEqual(want?.count);
        expect(Array.from(level.bytes.subarray(i * KIND_COUNT, i * KIND_COUNT + 3))).toEqual(want?.bytes);
      }
    }
    const blocks = [...expected.keys()].filter((k) => !k.includes('A') && !k.includes('U'));
    expect(stored, `level ${level.level} stored blocks`).toBe(blocks.length);
    for (const [key, want] of expected) {
      const [a, b] = key.split(',');
      if (a === 'A')
        expect(blockValues(level, ANY_PEER, Number(b))).toEqual({ count: want.count, bytes: want.bytes });
      if (b === 'U')
        expect(blockValues(level, Number(a), ANY_PEER)).toEqual({ count: want.count, bytes: want.bytes });
    }
  }
}

describe('buildEdges', () => {
  it('puts each operation at (sender, receiver) and resolves peers through groups', () => {
    const t = buildEdges(fourRanks());
    expect(t.worldSize).toBe(4);
    expect(t.length).toBe(7);
    const rows = Array.from({ length: t.length }, (_, i) => [t.src[i], t.dst[i], t.kind[i], t.size[i]]);
    expect(rows).toEqual([
      [0, 1, 0, 10],
      [0, 1, 0, 20],
      [0, 1, 1, 100],
      [ANY_PEER, 1, 1, 8],
      [3, 2, 2, 30],
      [3, 2, 0, 40], // "pair" local 0 -> group[0] = world 2
      [3, ANY_PEER, 0, 50], // unnamed, no group: destination unknown
    ]);
    // Keys come from the model's commKey (name, size, group), labels say what a user sees.
    expect(t.comms.map((c) => [c.key, c.label, c.ops])).toEqual([
      ['MPI_COMM_WORLD#4#world', 'MPI_COMM_WORLD', 5],
      ['#2#?', '(unnamed 9, size 2)', 1],
      ['pair#2#2,3', 'pair', 1],
    ]);
  });
});

describe('buildPyramid', () => {
  it('counts and sums exactly at rank level, with both strips', () => {
    const t = buildEdges(fourRanks());
    const p = buildPyramid(t, compileFilter(NO_FILTER, t.comms));
    const l0 = p.levels[0];
    if (!l0) throw new Error('no level 0');
    expect(p.ops).toBe(7);
    expect(blockValues(l0, 0, 1)).toEqual({ count: [2, 1, 0], bytes: [30, 100, 0] });
    expect(blockValues(l0, 3, 2)).toEqual({ count: [1, 0, 1], bytes: [40, 0, 30] });
    expect(blockValues(l0, ANY_PEER, 1)).toEqual({ count: [0, 1, 0], bytes: [0, 8, 0] });
    expect(blockValues(l0, 3, ANY_PEER)).toEqual({ count: [1, 0, 0], bytes: [50, 0, 0] });
    expect(findBlock(l0, 1, 0)).toBe(-1);
    expect(l0.maxCount).toBe(3);
    expect(l0.maxBytes).toBe(130);
    // 2x2 blocks: block (0,0) holds ranks 0-1 x 0-1; block (1,1) ranks 2-3 x 2-3.
    const l1 = p.levels[1];
    if (!l1) throw new Error('no level 1');
    expect(l1.dim).toBe(2);
    expect(blockValues(l1, 0, 0)).toEqual({ count: [2, 1, 0], bytes: [30, 100, 0] });
    expect(blockValues(l1, 1, 1)).toEqual({ count: [1, 0, 1], bytes: [40, 0, 30] });
    expect(blockValues(l1, ANY_PEER, 0)).toEqual({ count: [0, 1, 0], bytes: [0, 8, 0] });
    expect(p.levels.at(-1)?.dim).toBe(1);
  });

  it('filters by communicator, by tag (ANY_TAG receives included) and by kind', () => {
    const t = buildEdges(fourRanks());
    const build = (f: MatrixFilter) => buildPyramid(t, compileFilter(f, t.comms));
    const pair = build({ ...NO_FILTER, comm: 'pair#2#2,3' });
    expect(pair.ops).toBe(1);
    expect(blockValues(pair.levels[0] ?? fail(), 3, 2)).toEqual({ count: [1, 0, 0], bytes: [40, 0, 0] });
    const tag9 = build({ ...NO_FILTER, tag: 9 });
    expect(tag9.ops).toBe(2);
    const recvOnly = build({ ...NO_FILTER, kinds: ['receives'] });
    expect(recvOnly.ops).toBe(2);
    expect(build({ ...NO_FILTER, comm: 'name:no-such-comm' }).ops).toBe(0);
  });

  it('matches a brute-force aggregation at every level of a 1,000-rank synthetic job', () => {
    const snap = syntheticHaloJob({ ranks: 1000, seed: 3 });
    expect(validateSnapshot(snap).ok).toBe(true);
    const t = buildEdges(snap);
    expect(t.worldSize).toBe(1000);
    for (const filter of [
      NO_FILTER,
      { ...NO_FILTER, kinds: ['unexpected', 'sends'] } satisfies MatrixFilter,
      { ...NO_FILTER, comm: 'row_comm#32#?' },
      { ...NO_FILTER, tag: 11 },
    ]) {
      const p = buildPyramid(t, compileFilter(filter, t.comms));
      checkAgainstBruteForce(t, filter, p);
      let passing = 0;
      const f = compileFilter(filter, t.comms);
      for (let i = 0; i < t.length; i++) if (edgePasses(t, f, i)) passing++;
      expect(p.ops).toBe(passing);
      expect(passing, 'every filter of this test selects something').toBeGreaterThan(0);
    }
  });

  it('filters to operations to or from the selected ranks (the stacks view selection)', () => {
    const snap = syntheticHaloJob({ ranks: 1000, seed: 3 });
    const t = buildEdges(snap);
    const selected = new Set([0, 1, 2, 3, 500, 997, 998, 999]);
    let expected = 0;
    for (let i = 0; i < t.length; i++) {
      if (selected.has(t.src[i] ?? -1) || selected.has(t.dst[i] ?? -1)) expected++;
    }
    const filter: MatrixFilter = { ...NO_FILTER, ranks: '0-3,500,997-999' };
    const p = buildPyramid(t, compileFilter(filter, t.comms));
    expect(expected).toBeGreaterThan(0);
    expect(p.ops).toBe(expected);
    checkAgainstBruteForce(t, filter, p);
  });

  it('lists the operations of a block and of a strip segment', () => {
    const t = buildEdges(fourRanks());
    const f = compileFilter(NO_FILTER, t.comms);
    expect(edgesInCell(t, f, { row: 0, col: 0, size: 2 }, 10)).toEqual({ indices: [0, 1, 2], total: 3 });
    expect(edgesInCell(t, f, { row: ANY_PEER, col: 0, size: 2 }, 10)).toEqual({ indices: [3], total: 1 });
    expect(edgesInCell(t, f, { row: 2, col: ANY_PEER, size: 2 }, 10)).toEqual({ indices: [6], total: 1 });
    expect(edgesInCell(t, f, { row: 0, col: 0, size: 2 }, 1)).toEqual({ indices: [0], total: 3 });
  });

  it('picks the finest level whose blocks are at least one pixel', () => {
    const t = buildEdges(syntheticHaloJob({ ranks: 1024 }));
    const p = buildPyramid(t, compileFilter(NO_FILTER, t.comms));
    expect(levelForDensity(p, 0.1).blockSize).toBe(1);
    expect(levelForDensity(p, 1).blockSize).toBe(1);
    // 1.9 ranks per pixel: 1-rank blocks would be half a pixel wide and could be skipped.
    expect(levelForDensity(p, 1.9).blockSize).toBe(2);
    expect(levelForDensity(p, 2).blockSize).toBe(2);
    expect(levelForDensity(p, 33).blockSize).toBe(64);
    expect(levelForDensity(p, 1e9).dim).toBe(1);
  });
});

function fail(): never {
  throw new Error('missing level');
}

describe('the coarse pyramid drawn first at large worlds', () => {
  it('has exactly the whole pyramid levels from its finest up, and the same totals', () => {
    const t = buildEdges(syntheticRingDeadlock({ ranks: 5000, seed: 2 }));
    for (const filter of [NO_FILTER, { ...NO_FILTER, kinds: ['sends' as const] }]) {
      const f = compileFilter(filter, t.comms);
      const whole = buildPyramid(t, f);
      const coarse = buildCoarsePyramid(t, f);
      if (coarse === null) throw new Error('5,000 ranks should get a coarse pyramid');
      // 5,000 ranks: the first level with at most 1,024 blocks a side is level 3 (625 blocks).
      expect(coarse.finest).toBe(3);
      expect(whole.finest).toBe(0);
      expect(coarse.ops).toBe(whole.ops);
      expect(coarse.levels).toHaveLength(whole.levels.length);
      for (let i = coarse.finest; i < whole.levels.length; i++)
        expect(coarse.levels[i]).toEqual(whole.levels[i]);
      // Below its finest it holds that level again (drawn coarser until the whole one comes).
      expect(coarse.levels[0]).toBe(coarse.levels[3]);
      expect(stripTotals(coarse)).toEqual(stripTotals(whole));
      // Each buffer transferred once.
      const buffers = pyramidBuffers(coarse);
      expect(new Set(buffers).size).toBe(buffers.length);
    }
    expect(
      buildCoarsePyramid(
        buildEdges(syntheticRingDeadlock({ ranks: 1024, seed: 2 })),
        compileFilter(NO_FILTER, []),
      ),
    ).toBeNull();
  });
});
