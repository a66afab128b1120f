import { haloCulprit, haloStuckBand, syntheticHaloSeries } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { KIND_INDEX } from '../src/matrix/edges.js';
import { buildTimeline, depthAt, totalsSeries } from '../src/timeline/timeline.js';
import { comm, op, rank, snapshot } from './fixtures.js';

describe('queue timeline', () => {
  it('counts depth per rank and kind, and operations unchanged since the previous snapshot', () => {
    const world = (receives: ReturnType<typeof op>[]) =>
      comm({ id: '0', name: 'MPI_COMM_WORLD', size: 2, localRank: 1, receives });
    const a = op(0, 0, 5, 8, '0xa');
    const b = op(0, 0, 6, 8, '0xb');
    const series = [
      {
        id: 's2',
        takenAt: '2026-01-01T00:01:00Z',
        snapshot: snapshot([rank(1, [world([a, { ...b, buffer: '0xc' }])])]),
      },
      { id: 's1', takenAt: '2026-01-01T00:00:00Z', snapshot: snapshot([rank(1, [world([a, b])])]) },
      { id: 's3', takenAt: '2026-01-01T00:02:00Z', snapshot: snapshot([rank(1, [world([a, a])])]) },
    ];
    const t = buildTimeline(series);
    expect(t.ids).toEqual(['s1', 's2', 's3']);
    expect(t.worldSize).toBe(2);
    expect([0, 1, 2].map((s) => depthAt(t, t.depth, s, 1, 'receives'))).toEqual([2, 2, 2]);
    // s2: a persisted, b was re-posted with another buffer. s3: only one of the two a's existed before.
    expect([0, 1, 2].map((s) => depthAt(t, t.persisted, s, 1, 'all'))).toEqual([0, 1, 1]);
    expect(t.longest.map((p) => [p.rank, p.op.buffer, p.since, p.snapshots])).toEqual([[1, '0xa', 0, 3]]);
  });

  it('finds the hung operations of the synthetic job and nothing that moves', () => {
    const ranks = 512;
    const t = buildTimeline(syntheticHaloSeries({ ranks, seed: 5 }, 3));
    const band = haloStuckBand(ranks);
    const culprit = haloCulprit(ranks);
    for (let r = band.from; r < band.to; r++) {
      expect(depthAt(t, t.persisted, 2, r, 'receives')).toBe(1);
    }
    expect(depthAt(t, t.persisted, 2, culprit, 'unexpected')).toBe(3);
    const ranksWithLongest = new Set(t.longest.map((p) => p.rank));
    expect(t.longestTotal).toBeGreaterThan(band.to - band.from);
    for (const r of ranksWithLongest) {
      const stuck =
        (r >= band.from && r < band.to) ||
        r === culprit ||
        r === 0 ||
        t.longest.some((p) => p.rank === r && p.commName === '');
      expect(stuck, `rank ${r} should not persist`).toBe(true);
    }
    expect(t.totals[2 * 3 + KIND_INDEX.unexpected]).toBeGreaterThan(0);
  });
});

describe('totals chart geometry', () => {
  it('draws the unchanged-since-previous line from the second snapshot, not from 0 at the first', () => {
    const world = (receives: ReturnType<typeof op>[]) =>
      comm({ id: '0', name: 'MPI_COMM_WORLD', size: 2, localRank: 1, receives });
    const a = op(0, 0, 5, 8, '0xa');
    const b = op(0, 0, 6, 8, '0xb');
    const t = buildTimeline([
      { id: 's1', takenAt: '2026-01-01T00:00:00Z', snapshot: snapshot([rank(1, [world([a, b])])]) },
      { id: 's2', takenAt: '2026-01-01T00:01:00Z', snapshot: snapshot([rank(1, [world([a, b])])]) },
      { id: 's3', takenAt: '2026-01-01T00:02:00Z', snapshot: snapshot([rank(1, [world([a])])]) },
    ]);
    const { totals, persisted } = totalsSeries(t, 'receives');
    expect(totals).toEqual([
      { snapshot: 0, value: 2 },
      { snapshot: 1, value: 2 },
      { snapshot: 2, value: 1 },
    ]);
    // The first snapshot has no previous one: no point, rather than a drop to 0.
    expect(persisted).toEqual([
      { snapshot: 1, value: 2 },
      { snapshot: 2, value: 1 },
    ]);
    expect(totalsSeries(buildTimeline([]), 'sends')).toEqual({ totals: [], persisted: [] });
  });
});
