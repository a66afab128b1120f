// The progress counter (progress-counter.ts): an expression the request marked `progress` names
// the least-progressed ranks by its smallest number, in the explanation's summary, its lines and
// the CLI text, and in the hang watch's least-progressed ranks; equal numbers say nothing; a
// value that could not be read is said so, never taken for 0.
import {
  explainSnapshot,
  formatExplanation,
  type JobSnapshot,
  progressCounter,
  type RankValue,
  syntheticStacksJob,
  type WatchSample,
  watchVerdict,
  withUnreadableRanks,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { golden } from '../golden.js';

type Reading = number | 'optimized-out';

/** `snap` with `expr` read on each rank (reading(rank)), marked a progress counter unless `plain`. */
function withCounter(
  snap: JobSnapshot,
  reading: (rank: number) => Reading,
  o: { expr?: string; plain?: boolean; before?: RankValue[] } = {},
): JobSnapshot {
  const expr = o.expr ?? 'step';
  return {
    ...snap,
    ranks: snap.ranks.map((r) => {
      if (r.state.kind !== 'ok') return r;
      const x = reading(r.rank);
      const mark = o.plain === true ? {} : { progress: true as const };
      const v: RankValue =
        x === 'optimized-out'
          ? {
              expr,
              frame: 'solve',
              ...mark,
              error: { code: 'MQD_E_EVAL_OPTIMIZED_OUT', message: `${expr} is optimized out here` },
            }
          : { expr, frame: 'solve', ...mark, value: { text: String(x), type: 'int', number: x } };
      return { ...r, values: [...(o.before ?? []), v] };
    }),
  };
}

const job8 = () => syntheticStacksJob({ ranks: 8, scenario: 'ssend-ring' });

describe('the progress counter in the explanation', () => {
  it('names the rank behind with its number and the others grouped, in the summary, the lines and the CLI text', () => {
    const e = explainSnapshot(withCounter(job8(), (r) => (r === 3 ? 41 : 42)));
    const pc = e.progressCounter;
    expect(pc?.least).toEqual({ value: 41, ranks: [3] });
    expect(pc?.others).toEqual([{ value: 42, ranks: [0, 1, 2, 4, 5, 6, 7] }]);
    expect(pc?.unreadable).toEqual([]);
    expect(pc?.line.text).toBe('Least progressed: rank 3 (step = 41; ranks 0-2, 4-7: 42)');
    expect(pc?.line.ranks).toBe('3');
    // The rank behind is a link; the others' group links to the stacks of those ranks.
    expect(pc?.line.parts.filter((p) => p.kind === 'rank' || p.kind === 'ranks').map((p) => p.text)).toEqual([
      'rank 3',
      'ranks 0-2, 4-7',
    ]);
    expect(e.summary).toContain('Least progressed: rank 3 (step = 41; ranks 0-2, 4-7: 42).');
    expect(formatExplanation(e).split('\n')).toContain(
      'Least progressed: rank 3 (step = 41; ranks 0-2, 4-7: 42)',
    );
  });

  it('says nothing when every rank read the same number: the text is that of no counter', () => {
    const plain = job8();
    const e = explainSnapshot(withCounter(plain, () => 42));
    expect(e.progressCounter).toBeUndefined();
    expect(formatExplanation(e)).toBe(formatExplanation(explainSnapshot(plain)));
    expect(e.summary).not.toMatch(/progress/i);
  });

  it('an expression not marked a counter changes nothing', () => {
    const plain = job8();
    const e = explainSnapshot(withCounter(plain, (r) => (r === 3 ? 41 : 42), { plain: true }));
    expect(e.progressCounter).toBeUndefined();
    expect(formatExplanation(e)).toBe(formatExplanation(explainSnapshot(plain)));
  });

  it('a value that could not be read is said so, not taken for 0', () => {
    const e = explainSnapshot(withCounter(job8(), (r) => (r === 2 ? 'optimized-out' : r === 3 ? 41 : 42)));
    expect(e.progressCounter?.least).toEqual({ value: 41, ranks: [3] });
    expect(e.progressCounter?.unreadable).toEqual([2]);
    expect(e.progressCounter?.line.text).toBe(
      'Least progressed: rank 3 (step = 41; ranks 0-1, 4-7: 42); step could not be read as a number on rank 2: its progress is unknown',
    );
  });

  it('equal numbers with unreadable ranks: no rank is called behind, the unreadable ones are named', () => {
    // Rank 6 was not read at all (no values); rank 5's counter is optimized out.
    const snap = withCounter(withUnreadableRanks(job8(), [6]), (r) => (r === 5 ? 'optimized-out' : 42));
    const pc = explainSnapshot(snap).progressCounter;
    expect(pc?.least).toBeNull();
    expect(pc?.unreadable).toEqual([5, 6]);
    expect(pc?.line.text).toBe(
      'Progress unknown: step could not be read as a number on ranks 5-6 (ranks 0-4, 7: 42)',
    );
  });

  it('several numbers: smallest first, the ones past three counted; the first marked expression counts', () => {
    const before: RankValue[] = [
      { expr: 'iter', frame: 'solve', value: { text: '1', type: 'int', number: 1 } },
    ];
    const snap = withCounter(job8(), (r) => [7, 9, 8, 8, 10, 11, 12, 12][r] ?? 0, {
      expr: 'st->prog->step',
      before,
    });
    const pc = progressCounter(snap.ranks);
    expect(pc?.expr).toBe('st->prog->step');
    expect(pc?.least).toEqual({ value: 7, ranks: [0] });
    expect(pc?.others.map((g) => g.value)).toEqual([8, 9, 10, 11, 12]);
    // A name that is not one plain token is quoted (views isolate it).
    expect(pc?.line.text).toBe(
      'Least progressed: rank 0 (\u201cst->prog->step\u201d = 7; ranks 2-3: 8; rank 1: 9; rank 4: 10; 2 more values)',
    );
  });
});

describe('the progress counter in the hang watch', () => {
  const samples = (snap: JobSnapshot): WatchSample[] =>
    [0, 1].map((i) => ({
      at: 1_800_000_000_000 + i * 60_000,
      clockTicksPerSecond: 100,
      snapshot: snap,
      counters: snap.ranks.map((r) => ({ rank: r.rank, cpuTicks: 0, switches: 0, state: 'S' })),
    }));
  const opts = { hungAfterSamples: 3 };

  it('is the authority for the least progressed ranks; equal numbers fall back to the waits', () => {
    // collective_mismatch: ranks 0-2 in MPI_Barrier wait for rank 3, which never entered it.
    const barrier = golden('mpich', 'collective_mismatch');
    expect(watchVerdict(samples(barrier), opts).leastProgressedText).toBe('3');
    const behind = withCounter(barrier, (r) => (r === 1 ? 4 : 5));
    expect(watchVerdict(samples(behind), opts).leastProgressedText).toBe('1');
    const equal = withCounter(barrier, () => 5);
    expect(watchVerdict(samples(equal), opts).leastProgressedText).toBe('3');
  });
});
