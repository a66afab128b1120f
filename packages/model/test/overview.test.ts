// The overview's body (edges/overview.ts): what the server encodes the page decodes unchanged,
// and a body that is not one is refused with a reason, never half-read.
import { describe, expect, it } from 'vitest';
import {
  buildCoarsePyramid,
  buildEdges,
  buildOverview,
  buildPyramid,
  compileFilter,
  decodeOverview,
  decodeOverviewFirst,
  EDGE_TABLE_COLUMNS,
  encodeOverview,
  explainSnapshot,
  fillEdgePositions,
  firstScreenLevel,
  type Level,
  levelArrays,
  NO_FILTER,
  OVERVIEW_HEADER_BYTES,
  overviewFirstLength,
  pyramidFrom,
  syntheticRingDeadlock,
  syntheticWrongTagHang,
} from '../src/index.js';

const COLUMNS = EDGE_TABLE_COLUMNS;

describe('snapshot overview body', () => {
  it.each([
    ['ring deadlock', syntheticRingDeadlock({ ranks: 64, seed: 3 })],
    ['wrong-tag hang', syntheticWrongTagHang({ ranks: 33, seed: 5 })],
  ])('round-trips the explanation, the edge table and the header (%s)', (_, snap) => {
    const body = encodeOverview(buildOverview(snap));
    const d = decodeOverview(body);
    if (!d.ok) throw new Error(d.error);
    const o = d.value;
    expect(o.explanation).toEqual(JSON.parse(JSON.stringify(explainSnapshot(snap))));
    const e = buildEdges(snap);
    // Sent without the positions: they are filled from the snapshot, as buildEdges has them.
    expect(o.positions).toBe(false);
    expect([...o.edges.owner].every((v) => v === 0)).toBe(true);
    expect(fillEdgePositions(snap, o.edges)).toBe(true);
    expect(o.edges.comms).toEqual(e.comms);
    for (const c of COLUMNS) expect([...o.edges[c]], c).toEqual([...e[c]]);
    expect(o.head.rankCount).toBe(snap.ranks.length);
    expect(o.readStatus.read).toBe(snap.ranks.length);
    // A body that does not start on an 8-byte boundary (a slice of a larger buffer) decodes too.
    const shifted = new Uint8Array(body.length + 3);
    shifted.set(body, 3);
    const again = decodeOverview(shifted.subarray(3));
    expect(again.ok && [...again.value.edges.size]).toEqual([...e.size]);
  });

  it('sends lengths that are not 32-bit integers as floats, and refuses positions of another snapshot', () => {
    const snap = syntheticRingDeadlock({ ranks: 16, seed: 4 });
    const o = buildOverview(snap);
    o.edges.size[0] = 2 ** 33;
    o.edges.size[1] = 0.5;
    const d = decodeOverview(encodeOverview(o));
    if (!d.ok) throw new Error(d.error);
    expect([...d.value.edges.size]).toEqual([...o.edges.size]);
    // Another snapshot's operations do not fit this table.
    expect(fillEdgePositions(syntheticRingDeadlock({ ranks: 32, seed: 4 }), d.value.edges)).toBe(false);
  });

  it('refuses what is not an overview, saying why', () => {
    const body = encodeOverview(buildOverview(syntheticRingDeadlock({ ranks: 16, seed: 1 })));
    const why = (b: Uint8Array) => {
      const d = decodeOverview(b);
      return d.ok ? 'accepted' : d.error;
    };
    expect(why(Uint8Array.from('{"snapshot":1}', (c) => c.charCodeAt(0)))).toMatch(/no MQDO header/);
    expect(why(body.subarray(0, body.length - 1))).toMatch(/bytes, where \d+ edges take/);
    const v2 = body.slice();
    v2[4] = 2;
    expect(why(v2)).toMatch(/format 2/);
    const longJson = body.slice();
    new DataView(longJson.buffer).setUint32(8, body.length, true);
    expect(why(longJson)).toMatch(/runs past the end/);
    // A sender rank past the world: the matrix would index outside its rows.
    const d = decodeOverview(body);
    if (!d.ok) throw new Error(d.error);
    // 23 bytes an edge (the lengths fit 32 bits here): size first, then src.
    const srcAt = body.length - d.value.edges.length * 23 + d.value.edges.length * 4;
    const badRank = body.slice();
    new DataView(badRank.buffer).setInt32(srcAt, 1 << 20, true);
    expect(why(badRank)).toMatch(/edge 0 names a rank outside the world/);
  });

  /** A level's arrays and scale, as plain values to compare. */
  const plain = (l: Level) => ({
    level: l.level,
    dim: l.dim,
    arrays: levelArrays(l).map((a) => [...a]),
    max: [l.maxCount, l.maxBytes],
  });

  it.each([
    ["64 ranks: level 0, the whole pyramid's first", 64],
    ["3,000 ranks: level 2, the coarse pyramid's first", 3000],
  ])("has a first part that decodes from its own bytes, with the page pyramid's level (%s)", (_, ranks) => {
    const snap = syntheticRingDeadlock({ ranks, seed: 7 });
    const body = encodeOverview(buildOverview(snap));
    // The page reads the body as it arrives: the header says how much the first part needs.
    expect(overviewFirstLength(body.subarray(0, OVERVIEW_HEADER_BYTES - 1))).toBeNull();
    const firstEnd = overviewFirstLength(body.subarray(0, OVERVIEW_HEADER_BYTES));
    expect(firstEnd).toBeGreaterThan(OVERVIEW_HEADER_BYTES);
    const first = decodeOverviewFirst(body.slice(0, firstEnd ?? 0));
    if (!first.ok) throw new Error(first.error);
    const whole = decodeOverview(body);
    if (!whole.ok) throw new Error(whole.error);
    expect(first.value.explanation).toEqual(whole.value.explanation);
    expect(first.value.matrix).toEqual({
      worldSize: ranks,
      length: whole.value.edges.length,
      kindUnit: whole.value.edges.kindUnit,
    });
    // Exactly the level the page's own pyramid (no filter) draws a whole matrix from first.
    const e = buildEdges(snap);
    const f = compileFilter(NO_FILTER, e.comms);
    const page = buildCoarsePyramid(e, f) ?? buildPyramid(e, f);
    const level = page.levels[page.finest];
    if (!first.value.firstLevel || !level) throw new Error('no first level');
    expect(plain(first.value.firstLevel)).toEqual(plain(level));
    expect(first.value.firstLevel.level).toBe(ranks > 1024 ? 2 : 0);
    expect(plain(whole.value.firstLevel as Level)).toEqual(plain(level));
  });

  it("sends a coarser first level when the coarse pyramid's first holds too many blocks", () => {
    const e = buildEdges(syntheticRingDeadlock({ ranks: 3000, seed: 7 }));
    const page = buildPyramid(e, compileFilter(NO_FILTER, e.comms));
    const atShift = firstScreenLevel(e);
    expect(atShift.level).toBe(2);
    // A limit below what level 2 holds: the first level above it that fits, exactly the page's.
    const limit = atShift.col.length - 1;
    const coarser = firstScreenLevel(e, limit);
    expect(coarser.level).toBeGreaterThan(2);
    expect(coarser.col.length).toBeLessThanOrEqual(limit);
    expect(plain(coarser)).toEqual(plain(page.levels[coarser.level] as Level));
    // Level i of a pyramid made from a first level, made when first read, is 2^i ranks a side
    // (the finest below it): what the page's level caption says without making the level.
    const fromFirst = pyramidFrom(e.worldSize, coarser);
    fromFirst.levels.forEach((l, i) => {
      expect(l.blockSize, `level ${i}`).toBe(2 ** Math.max(i, fromFirst.finest));
      if (i >= coarser.level) expect(plain(l)).toEqual(plain(page.levels[i] as Level));
    });
  });

  it('refuses a first part cut short or whose level does not fit its length, saying why', () => {
    const body = encodeOverview(buildOverview(syntheticRingDeadlock({ ranks: 64, seed: 2 })));
    const firstEnd = overviewFirstLength(body) ?? 0;
    const why = (b: Uint8Array) => {
      const d = decodeOverviewFirst(b);
      return d.ok ? 'accepted' : d.error;
    };
    expect(why(body.slice(0, firstEnd))).toBe('accepted');
    // Cut inside the level's arrays: never read past the bytes that arrived.
    expect(why(body.slice(0, firstEnd - 8))).toMatch(/the first part runs past the end/);
    // A first part that says it is longer than its JSON and level take.
    const longer = body.slice();
    new DataView(longer.buffer).setUint32(12, firstEnd + 8, true);
    expect(why(longer)).toMatch(/the first part is \d+ bytes, where its level takes \d+/);
    // Not an overview of this format: no first part to wait for either.
    const v2 = body.slice(0, OVERVIEW_HEADER_BYTES);
    v2[4] = 2;
    expect(overviewFirstLength(v2)).toBeNull();
  });

  it('sends no first level when there is none, and refuses a level whose columns are out of order', () => {
    const o = buildOverview(syntheticRingDeadlock({ ranks: 16, seed: 2 }));
    const none = decodeOverview(encodeOverview({ ...o, firstLevel: null }));
    expect(none.ok && none.value.firstLevel).toBeNull();
    const level = o.firstLevel;
    if (!level) throw new Error('no first level');
    // A row with two blocks whose columns are swapped: the renderer's binary search relies on order.
    const row = [...Array(level.dim).keys()].find(
      (r) => (level.rowPtr[r + 1] ?? 0) - (level.rowPtr[r] ?? 0) >= 2,
    );
    if (row === undefined) throw new Error('no row with two blocks');
    const at = level.rowPtr[row] ?? 0;
    const col = level.col.slice();
    [col[at], col[at + 1]] = [col[at + 1] ?? 0, col[at] ?? 0];
    const d = decodeOverview(encodeOverview({ ...o, firstLevel: { ...level, col } }));
    expect(d.ok ? 'accepted' : d.error).toMatch(
      new RegExp(`first level's row ${row} has a column out of order`),
    );
  });
});
