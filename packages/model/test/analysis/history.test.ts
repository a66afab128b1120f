import {
  type HistoryOp,
  isRankRead,
  type JobSnapshot,
  mqdError,
  notReadNote,
  type RankSnapshot,
  rankNotRead,
  rankNotReadText,
  snapshotReadStatus,
  spanText,
  stillness,
  stillnessText,
  walkOpHistory,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { failedRank, ompiJob, op, rank, snapshot, world } from './fixtures.js';

/** Rank r waits for tag 7 from r-1 (rank 0 from the last): nothing ever moves. */
const stuck = (n: number) => ompiJob(n, (r) => ({ receives: [op({ peer: (r + n - 1) % n, tag: 7 })] }));
const dropped = (r: number): RankSnapshot =>
  rankNotRead(
    { rank: r, pid: 1000 + r, host: 'n2' },
    mqdError('MQD_E_AGENT_MISSING', 'the agent on n2 is gone'),
    'agent-missing',
  );
/** The same job with every rank's agent gone. */
const allDropped = (n: number): JobSnapshot => snapshot(Array.from({ length: n }, (_, r) => dropped(r)));

describe('what was read', () => {
  it('tells read, partial and failed snapshots apart, with the reasons grouped', () => {
    expect(snapshotReadStatus(stuck(4)).kind).toBe('read');
    expect(notReadNote(snapshotReadStatus(stuck(4)))).toBeNull();
    const partial = snapshot([...stuck(4).ranks.slice(0, 2), dropped(2), dropped(3)]);
    const s = snapshotReadStatus(partial);
    expect([s.kind, s.read, s.notRead]).toEqual(['partial', 2, 2]);
    expect(notReadNote(s)).toBe('2 ranks not read: no agent answered (MQD_E_AGENT_MISSING)');
    const failed = snapshotReadStatus(allDropped(4));
    expect([failed.kind, failed.groups[0]?.ranks]).toEqual(['failed', '0-3']);
    const mixed = snapshotReadStatus(
      snapshot([dropped(0), dropped(1), failedRank(2), ...stuck(4).ranks.slice(3)]),
    );
    expect(notReadNote(mixed)).toBe(
      '3 ranks not read: ranks 0-1 no agent answered (MQD_E_AGENT_MISSING); rank 2 the read failed (MQD_E_PTRACE_DENIED)',
    );
    expect(isRankRead(dropped(0))).toBe(false);
    expect(rankNotReadText(dropped(3))).toBe(
      'rank 3 not read: no agent answered. MQD_E_AGENT_MISSING: the agent on n2 is gone: no agent is connected for this host; start `mqd agent` there',
    );
  });
});

describe('runs of unchanged operations across snapshots', () => {
  it('a failed snapshot between two equal ones keeps the run from the first', () => {
    const seen: HistoryOp[] = [];
    const h = walkOpHistory([stuck(2), allDropped(2), stuck(2)], (o) => seen.push(o));
    const last = seen.filter((o) => o.snapshot === 2);
    expect(last.map((o) => [o.rank.rank, o.since, o.readsInRun])).toEqual([
      [0, 0, 2],
      [1, 0, 2],
    ]);
    expect(h.snapshots.map((s) => [s.status.kind, s.compared, s.appeared, s.disappeared])).toEqual([
      ['read', 0, 0, 0],
      ['failed', 0, 0, 0],
      ['read', 2, 0, 0],
    ]);
    expect(Array.from(h.readRanks[1] ?? [])).toEqual([]);
  });

  it('a rank not read in one snapshot is compared with its last read; the others move on', () => {
    const moved = ompiJob(2, (r) => ({ receives: [op({ peer: 1 - r, tag: r === 0 ? 8 : 7 })] }));
    const seen: HistoryOp[] = [];
    // Rank 1 is not read in snapshot 1; rank 0 changes its tag in snapshot 2.
    const middle = snapshot([stuck(2).ranks[0] as RankSnapshot, dropped(1)]);
    walkOpHistory([stuck(2), middle, moved], (o) => seen.push(o));
    const last = seen.filter((o) => o.snapshot === 2).map((o) => [o.rank.rank, o.since]);
    expect(last).toEqual([
      [0, 2],
      [1, 0],
    ]);
  });

  it('counts equal operations as a multiset and a status change as a change', () => {
    const two = snapshot([
      rank(0, [world(2, 0, { receives: [op({ peer: 1, tag: 1 }), op({ peer: 1, tag: 1 })] })]),
    ]);
    const one = snapshot([rank(0, [world(2, 0, { receives: [op({ peer: 1, tag: 1 })] })])]);
    const matched = snapshot([
      rank(0, [world(2, 0, { receives: [op({ peer: 1, tag: 1, status: 'matched' })] })]),
    ]);
    const h = walkOpHistory([two, one, matched]);
    // A status change is the same operation, changed (mpi/operation.ts), not one gone and one new.
    expect(h.snapshots.map((s) => [s.unchanged, s.changed, s.appeared, s.disappeared])).toEqual([
      [0, 0, 0, 0],
      [1, 0, 0, 1],
      [0, 1, 0, 0],
    ]);
  });
});

describe('stillness: how long nothing moved', () => {
  it('spans failed snapshots instead of restarting at them', () => {
    const s = stillness(walkOpHistory([stuck(3), stuck(3), allDropped(3), stuck(3)]));
    expect(s).toEqual({
      since: 0,
      snapshots: 4,
      failed: 1,
      comparisons: 2,
      moving: false,
      appeared: 0,
      changed: 0,
      disappeared: 0,
    });
  });

  it('starts at the snapshot whose state has held since, and says when the last step moved', () => {
    const other = ompiJob(3, () => ({}));
    expect(stillness(walkOpHistory([other, stuck(3), stuck(3)]))).toMatchObject({
      since: 1,
      snapshots: 2,
      moving: false,
    });
    expect(stillness(walkOpHistory([stuck(3), other]))).toMatchObject({
      since: 1,
      snapshots: 1,
      moving: true,
    });
    // A leading failed snapshot proves nothing: the stretch begins at the first read one.
    expect(stillness(walkOpHistory([allDropped(3), stuck(3), stuck(3)]))).toMatchObject({
      since: 1,
      snapshots: 2,
    });
    expect(stillness(walkOpHistory([stuck(3)]))).toMatchObject({ since: 0, snapshots: 1, comparisons: 0 });
    expect(stillness(walkOpHistory([]))).toBeNull();
  });
});

describe('the headline', () => {
  const t0 = Date.parse('2026-03-01T10:00:00Z');
  const min = 60_000;
  it('says since when nothing moved, across how many snapshots, and who waits', () => {
    const h = walkOpHistory([stuck(4), stuck(4), allDropped(4), stuck(4)]);
    const times = [t0, t0 + min, t0 + 2 * min, t0 + 5 * min];
    expect(stillnessText(stillness(h), times, '0-3')).toBe(
      'No change since 10:00 (4 snapshots, 1 of them not read); ranks 0-3 wait.',
    );
    // The whole history's run, when the caller counted it: the window's tail is not its start.
    expect(
      stillnessText(stillness(h), times, '0-3', undefined, {
        since: t0 - 40 * min,
        snapshots: 44,
        failed: 1,
      }),
    ).toBe('No change since 09:20 (44 snapshots, 1 of them not read); ranks 0-3 wait.');
    expect(stillnessText(stillness(walkOpHistory([stuck(4)])), [t0], '0-3')).toBe(
      'One snapshot: take another to see what changes.',
    );
    expect(
      stillnessText(stillness(walkOpHistory([stuck(4), ompiJob(4, () => ({}))])), [t0, t0 + min], ''),
    ).toBe("Moving: 0 operations new and 4 operations gone since the ranks' previous reads.");
    expect(spanText(45_000)).toBe('45 s');
    expect(spanText(125 * min)).toBe('2 h 5 min');
  });
});
