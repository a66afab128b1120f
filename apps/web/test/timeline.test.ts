import {
  haloCulprit,
  haloStuckBand,
  type JobSnapshot,
  mqdError,
  rankNotRead,
  syntheticHaloSeries,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { formatSince } from '../src/format.js';
import { KIND_INDEX } from '../src/matrix-types.js';
import {
  buildTimeline,
  depthAt,
  RANK_NOT_READ,
  RANK_READ,
  rankTicks,
  timeLayout,
  totalsSeries,
  unreadableKinds,
} from '../src/timeline/timeline.js';
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

describe('not read is never empty', () => {
  const world = (r: number, receives: ReturnType<typeof op>[]) =>
    comm({ id: '0', name: 'MPI_COMM_WORLD', size: 2, localRank: r, receives });
  const stuck = (takenAt: string): JobSnapshot =>
    snapshot(
      [rank(0, [world(0, [op(1, 1, 5, 8, '0xa')])]), rank(1, [world(1, [op(0, 0, 6, 8, '0xb')])])],
      takenAt,
    );
  const dropout = (takenAt: string): JobSnapshot =>
    snapshot(
      [0, 1].map((r) =>
        rankNotRead(
          { rank: r, pid: 100 + r, host: 'n1' },
          mqdError('MQD_E_AGENT_MISSING', 'the agent on n1 is gone'),
          'agent-missing',
        ),
      ),
      takenAt,
    );
  const series = [
    { id: 's1', takenAt: '2026-01-01T00:00:00Z', snapshot: stuck('2026-01-01T00:00:00Z') },
    { id: 's2', takenAt: '2026-01-01T00:01:00Z', snapshot: dropout('2026-01-01T00:01:00Z') },
    { id: 's3', takenAt: '2026-01-01T00:05:00Z', snapshot: stuck('2026-01-01T00:05:00Z') },
  ];

  it('a failed snapshot between two equal ones keeps "unchanged since" at the first time', () => {
    const t = buildTimeline(series);
    expect(t.longest.map((p) => [p.rank, t.times[p.since], p.snapshots, p.lastRead])).toEqual([
      [0, '2026-01-01T00:00:00Z', 2, 2],
      [1, '2026-01-01T00:00:00Z', 2, 2],
    ]);
    // The operations of the last snapshot persisted although the one before read nothing.
    expect(depthAt(t, t.persisted, 2, 0, 'all')).toBe(1);
    expect(t.headline).toBe(
      `No change since ${formatSince('2026-01-01T00:00:00Z')} (3 snapshots, 1 of them not read); ranks 0-1 wait.`,
    );
    // With the job's whole run (use-series.ts counts it from the snapshot list): its start, not the window's.
    const whole = buildTimeline(series, {
      since: Date.parse('2025-12-31T23:00:00Z'),
      snapshots: 40,
      failed: 1,
    });
    expect(whole.headline).toBe(
      `No change since ${formatSince('2025-12-31T23:00:00Z')} (40 snapshots, 1 of them not read); ranks 0-1 wait.`,
    );
  });

  it('marks the unread ranks and draws the failed snapshot as a gap, not as 0', () => {
    const t = buildTimeline(series);
    expect(Array.from(t.readState)).toEqual([
      RANK_READ,
      RANK_READ,
      RANK_NOT_READ,
      RANK_NOT_READ,
      RANK_READ,
      RANK_READ,
    ]);
    expect(t.status.map((s) => s.kind)).toEqual(['read', 'failed', 'read']);
    const { totals, persisted } = totalsSeries(t, 'receives');
    expect(totals.map((p) => p.value)).toEqual([2, null, 2]);
    expect(persisted.map((p) => p.value)).toEqual([null, 2]);
  });

  it('draws a queue the library cannot read as a gap and names it "not readable", never 0', () => {
    // Every read rank's library showed no unexpected queue (null, with its reason).
    const blind = series.map((x) => ({
      ...x,
      snapshot: {
        ...x.snapshot,
        ranks: x.snapshot.ranks.map((r) => ({
          ...r,
          communicators: r.communicators.map((c) => ({
            ...c,
            unexpected: null,
            unavailable: {
              unexpected: mqdError('MQD_E_DLL_ERROR', 'mqs_setup_operation_iterator returned 1'),
            },
          })),
        })),
      },
    }));
    const t = buildTimeline(blind);
    expect(totalsSeries(t, 'unexpected').totals.map((p) => p.value)).toEqual([null, null, null]);
    expect(totalsSeries(t, 'receives').totals.map((p) => p.value)).toEqual([2, null, 2]);
    expect(unreadableKinds(t)).toEqual(['unexpected']);
    // Read: a count of 0 is a 0.
    expect(totalsSeries(buildTimeline(series), 'unexpected').totals.map((p) => p.value)).toEqual([
      0,
      null,
      0,
    ]);
    expect(unreadableKinds(buildTimeline(series))).toEqual([]);
  });

  it('keeps the operations of a rank not read in the last snapshot, as of its last read', () => {
    const t = buildTimeline([
      series[0] as (typeof series)[number],
      { id: 's2b', takenAt: '2026-01-01T00:02:00Z', snapshot: stuck('2026-01-01T00:02:00Z') },
      { id: 's3b', takenAt: '2026-01-01T00:03:00Z', snapshot: dropout('2026-01-01T00:03:00Z') },
    ]);
    expect(t.longest.map((p) => [p.rank, p.since, p.lastRead])).toEqual([
      [0, 0, 1],
      [1, 0, 1],
    ]);
  });
});

describe('timeline axes', () => {
  it('rank ticks are distinct whole ranks inside the job at any size', () => {
    for (const n of [1, 4, 17, 512, 16384]) {
      for (const px of [40, 300, 900]) {
        const ticks = rankTicks(n, px);
        expect(ticks.length, `${n} ranks, ${px} px`).toBeGreaterThan(0);
        expect(new Set(ticks).size).toBe(ticks.length);
        for (const v of ticks) {
          expect(Number.isInteger(v)).toBe(true);
          expect(v).toBeGreaterThanOrEqual(0);
          expect(v).toBeLessThan(n);
        }
        // Never more labels than the axis has room for.
        expect(ticks.length).toBeLessThanOrEqual(Math.max(1, Math.floor(px / 28)) + 1);
      }
    }
    expect(rankTicks(4, 300)).toEqual([0, 1, 2, 3]);
  });

  it('places snapshots by their time: a pause is a gap', () => {
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    const millis = [t0, t0 + 10_000, t0 + 20_000, t0 + 600_000];
    const { x, column, ticks } = timeLayout(millis, 1000);
    const px = millis.map((m) => x(m));
    const at = (i: number) => px[i] ?? Number.NaN;
    expect(at(1) - at(0)).toBeCloseTo(at(2) - at(1), 6);
    // 10 s against 580 s: the last gap is 58 times the first.
    expect((at(3) - at(2)) / (at(1) - at(0))).toBeCloseTo(58, 6);
    expect(px[0]).toBeCloseTo(column / 2, 6);
    expect(px[3]).toBeCloseTo(1000 - column / 2, 6);
    expect(column).toBeLessThanOrEqual(at(1) - at(0));
    const tx = ticks.map((t) => x(t));
    for (let i = 1; i < tx.length; i++) expect((tx[i] ?? 0) - (tx[i - 1] ?? 0)).toBeGreaterThanOrEqual(90);
  });

  it('labels whole seconds only when snapshots are seconds apart', () => {
    const t0 = Date.parse('2026-01-01T00:00:00.300Z');
    const { ticks } = timeLayout([t0, t0 + 1500, t0 + 4200], 1200);
    expect(ticks.length).toBeGreaterThan(1);
    for (const t of ticks) expect(t.getTime() % 1000).toBe(0);
  });

  it('draws a single snapshot in the middle, one column wide', () => {
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    const { x, column } = timeLayout([t0], 600);
    expect(x(t0)).toBeCloseTo(300, 6);
    expect(column).toBeGreaterThan(2);
    expect(column).toBeLessThanOrEqual(40);
  });
});
