import { Pid, Rank } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { makeJob, type RankEntry } from '../src/index.js';

const entry = (rank: number, pid: number, host: string): RankEntry => ({
  rank: Rank(rank),
  pid: Pid(pid),
  host,
  executable: '/bin/app',
});

describe('makeJob', () => {
  it('sorts ranks by rank and groups them by host, in rank order', () => {
    const job = makeJob('mpir', null, [
      entry(2, 12, 'b'),
      entry(0, 10, 'a'),
      entry(3, 13, 'a'),
      entry(1, 11, 'b'),
    ]);
    expect(job.ranks.map((r) => r.rank)).toEqual([0, 1, 2, 3]);
    expect(Object.keys(job.byHost).sort()).toEqual(['a', 'b']);
    expect(job.byHost['a']?.map((r) => r.pid)).toEqual([10, 13]);
    expect(job.byHost['b']?.map((r) => r.pid)).toEqual([11, 12]);
    expect(job.warnings).toEqual([]);
  });

  it('keeps its input untouched', () => {
    const input = [entry(1, 11, 'a'), entry(0, 10, 'a')];
    makeJob('pid-list', null, input);
    expect(input.map((r) => r.rank)).toEqual([1, 0]);
  });
});
