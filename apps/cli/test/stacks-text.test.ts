// The text of `mqd snapshot --stacks`: STAT-style indentation, ranges and counts per frame.
import { type JobSnapshot, syntheticStacksJob, type ThreadStack } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { stacksText } from '../src/stacks-text.js';

function thread(tid: number, outermostFirst: string[], main = true): ThreadStack {
  return {
    tid,
    name: 'app',
    main,
    frames: outermostFirst
      .map((fn) => ({
        pc: '0x401000',
        function: fn,
        module: '/bin/app',
        file: null,
        line: null,
        inlined: false,
      }))
      .reverse(),
    truncated: false,
    error: null,
  };
}

function job(paths: (r: number) => string[] | null): JobSnapshot {
  const base = syntheticStacksJob({ ranks: 4, scenario: 'collective-mismatch' });
  return {
    ...base,
    ranks: base.ranks.map((r) => {
      const { threads: _t, mpiCall: _c, ...rest } = r;
      const p = paths(r.rank);
      return p === null ? rest : { ...rest, threads: [thread(r.pid, p)], mpiCall: null };
    }),
  };
}

describe('mqd snapshot --stacks text', () => {
  it('prints the tree with ranges and counts, then the classes (no outliers: 1 of 4 ranks is not few)', () => {
    const text = stacksText(job((r) => (r < 3 ? ['main', 'MPI_Barrier'] : ['main', 'MPI_Allreduce'])));
    expect(text).toBe(
      [
        'stacks (4 ranks, main threads, 2 distinct):',
        '[0-3] (4) main',
        '  [0-2] (3) MPI_Barrier',
        '  [3] MPI_Allreduce',
        'classes (ranks with the same whole stack):',
        '  [0-2] (3) main > MPI_Barrier',
        '  [3] (1) main > MPI_Allreduce',
        // Rank 3 alone is a quarter of the job: no outlier is named.
      ].join('\n'),
    );
  });

  it('says which ranks have no stacks, and when none has', () => {
    expect(stacksText(job((r) => (r === 2 ? null : ['main', 'MPI_Recv'])))).toContain('no stacks: [2]');
    expect(stacksText(job(() => null))).toBe('stacks: none in this snapshot (not read on ranks [0-3])');
  });

  it('counts threads apart from ranks with --all-threads', () => {
    const base = job(() => ['main', 'MPI_Recv']);
    const snap: JobSnapshot = {
      ...base,
      ranks: base.ranks.map((r) => ({
        ...r,
        threads: [
          ...(r.threads ?? []),
          thread(r.pid + 1, ['clone3', 'poll'], false),
          thread(r.pid + 2, ['clone3', 'poll'], false),
        ],
      })),
    };
    const text = stacksText(snap, { threads: 'all' });
    expect(text).toContain('stacks (12 threads of 4 ranks, 2 distinct):');
    expect(text).toContain('[0-3] (4 ranks, 8 threads) clone3');
  });
});
