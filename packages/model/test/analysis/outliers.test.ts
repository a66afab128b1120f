// Outliers only when they are few (outliers.ts): in number (at most 16) and in share (at most
// 5% of the ranks), each in a class of at most 1% of the job; the queue shapes (classes.ts) and
// the stacks (stack-tree.ts) share the rule.
import {
  fewEnough,
  fewOutliers,
  OUTLIER_MAX_RANKS,
  outlierWhy,
  rankClasses,
  rareClassMax,
  syntheticRingDeadlock,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';

const cls = (...sizes: number[]) => {
  let next = 0;
  return sizes.map((s) => ({ members: Array.from({ length: s }, () => next++) }));
};

describe('the outlier rule', () => {
  it('1 of 4 ranks is a quarter of the job, not an outlier', () => {
    expect(fewOutliers(cls(3, 1), 4)).toEqual([]);
    expect(fewEnough(1, 4)).toBe(false);
  });

  it('1 of 64 and 2 of 1,024 are', () => {
    expect(fewOutliers(cls(63, 1), 64)).toEqual([63]);
    expect(fewOutliers(cls(1000, 22, 1, 1), 1024)).toEqual([1022, 1023]);
  });

  it('a class above 1% of the job is no outlier class', () => {
    // 1% of 1,024 is 10: a class of 11 is not rare, one of 10 is.
    expect(fewOutliers(cls(1013, 11), 1024)).toEqual([]);
    expect(fewOutliers(cls(1014, 10), 1024)).toHaveLength(10);
    expect(rareClassMax(16_384)).toBe(163);
  });

  it('thousands of ranks in small classes are not named: none rather than "and 4,079 more"', () => {
    const many = cls(12_000, ...Array.from({ length: 4384 }, () => 1));
    expect(fewOutliers(many, 16_384)).toEqual([]);
    expect(fewOutliers(cls(16_384 - OUTLIER_MAX_RANKS, OUTLIER_MAX_RANKS), 16_384)).toHaveLength(16);
    expect(fewOutliers(cls(16_384 - 17, 17), 16_384)).toEqual([]);
  });

  it('says what an outlier is, true to the job size', () => {
    expect(outlierWhy('a queue shape', 4)).toBe('a queue shape no other of the 4 ranks has');
    expect(outlierWhy('a queue shape', 16_384)).toBe('a queue shape at most 163 of the 16,384 ranks share');
  });

  it('queue-shape classes use it', () => {
    const small = syntheticRingDeadlock({ ranks: 4, style: 'mpich' });
    const r3 = small.ranks[3]?.communicators[0]?.receives?.[0];
    if (r3 === undefined) throw new Error('fixture: rank 3 has no receive');
    r3.tag = 8;
    expect(rankClasses(small).classTotal).toBe(2);
    expect(rankClasses(small).outliers).toBe('');
    const big = syntheticRingDeadlock({ ranks: 200, style: 'mpich' });
    const r5 = big.ranks[5]?.communicators[0]?.receives?.[0];
    if (r5 === undefined) throw new Error('fixture: rank 5 has no receive');
    r5.tag = 8;
    expect(rankClasses(big).outliers).toBe('5');
  });
});
