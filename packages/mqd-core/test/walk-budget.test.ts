// A 37.7 MB rank (200k unexpected messages) was walked, decoded, sent and
// serialised whole before the agent's message cap refused it (health 6 s, RSS 97 -> 376 MB, on
// every snapshot). The byte budget now applies in the reader's walk: a rank whose queue entries
// alone need more than maxRankBytes (at MIN_OPERATION_JSON_BYTES each) is stopped there, one
// entry past the budget, and answered MQD_E_TOO_LARGE naming the rank, the count and the budget;
// the other ranks of the snapshot are read as usual. The conformance target's endless (cyclic)
// receive queue is the deepest rank there is.
import { type JobSnapshot, type RankSnapshot, validateSnapshot } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { MIN_OPERATION_JSON_BYTES } from '../src/mqs/walk.js';
import { buildConformance, snapshottersPerTest, startTarget } from './conformance-kit.js';

const b = buildConformance();
const snapshotter = snapshottersPerTest();
const CYCLE = 4;

const rankOf = (s: JobSnapshot, r: number): RankSnapshot => {
  const x = s.ranks.find((y) => y.rank === r);
  if (!x) throw new Error(`rank ${r} missing`);
  return x;
};
const entries = (r: RankSnapshot) =>
  r.communicators.reduce(
    (n, c) => n + (c.sends?.length ?? 0) + (c.receives?.length ?? 0) + (c.unexpected?.length ?? 0),
    0,
  );

describe('the byte budget in the walk', () => {
  it('stops an endless queue one entry past the budget with MQD_E_TOO_LARGE; the other rank is read', async () => {
    const deep = await startTarget(b.target, b.dll, CYCLE, 0);
    const fine = await startTarget(b.target, b.dll, 0, 1);
    const budget = 64 * 1024;
    // The read budget (64 MiB by default) would stop the cycle too, but only after ~half a
    // million entries: the rank's byte budget stops it first.
    const { snapshot } = await snapshotter().snapshot(
      [
        { pid: deep.pid, rank: 0 },
        { pid: fine.pid, rank: 1 },
      ],
      { maxRankBytes: budget },
    );
    expect(validateSnapshot(snapshot).ok).toBe(true);
    const max = Math.floor(budget / MIN_OPERATION_JSON_BYTES);
    const r0 = rankOf(snapshot, 0);
    expect(r0.state).toMatchObject({ kind: 'error', code: 'MQD_E_TOO_LARGE' });
    expect(r0.state.kind === 'error' && r0.state.message).toMatch(
      new RegExp(
        `rank 0 \\(pid ${deep.pid}\\) .*${budget}-byte budget.*stopped at ${max + 1} entries \\(receives on communicator`,
      ),
    );
    expect(r0.communicators).toEqual([]);
    expect(rankOf(snapshot, 1).state).toEqual({ kind: 'ok' });
  });

  it('holds a rank whose entries fit exactly, refuses it one entry under', async () => {
    const t = await startTarget(b.target, b.dll, 0, 2);
    const s = snapshotter();
    const whole = rankOf((await s.snapshot([{ pid: t.pid, rank: 2 }])).snapshot, 2);
    const n = entries(whole);
    expect(n).toBeGreaterThan(1);
    const at = rankOf(
      (await s.snapshot([{ pid: t.pid, rank: 2 }], { maxRankBytes: n * MIN_OPERATION_JSON_BYTES })).snapshot,
      2,
    );
    expect(at.state).toEqual({ kind: 'ok' });
    expect(entries(at)).toBe(n);
    // Its JSON really is at least the estimate: the estimate never refuses a rank that fits.
    expect(JSON.stringify(at).length).toBeGreaterThanOrEqual(n * MIN_OPERATION_JSON_BYTES);
    const under = rankOf(
      (await s.snapshot([{ pid: t.pid, rank: 2 }], { maxRankBytes: n * MIN_OPERATION_JSON_BYTES - 1 }))
        .snapshot,
      2,
    );
    expect(under.state).toMatchObject({ kind: 'error', code: 'MQD_E_TOO_LARGE' });
  });
});
