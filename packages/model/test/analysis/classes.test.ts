import {
  compressRanks,
  expandRanks,
  rankClasses,
  syntheticCollectiveHang,
  syntheticRingDeadlock,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { failedRank, ompiJob, op } from './fixtures.js';

describe('rank ranges', () => {
  it('compresses and expands rank lists', () => {
    expect(compressRanks([20, 0, 1, 2, 3, 17, 21, 22, 2])).toBe('0-3,17,20-22');
    expect(compressRanks([])).toBe('');
    expect(compressRanks([5])).toBe('5');
    expect(expandRanks('0-3,17,20-22')).toEqual([0, 1, 2, 3, 17, 20, 21, 22]);
    expect(expandRanks('3-1')).toBeNull();
    expect(expandRanks('x')).toBeNull();
  });
});

describe('rank classes', () => {
  it('puts every rank of a 1024-rank ring in one class', () => {
    const c = rankClasses(syntheticRingDeadlock({ ranks: 1024 }));
    expect(c).toEqual({
      peers: 'relative',
      classes: [
        {
          size: 1024,
          ranks: '0-1023',
          example: 0,
          shape: [
            'sends MPI_COMM_WORLD/1024 peer +1 tag 7 len 4096 pending',
            'receives MPI_COMM_WORLD/1024 peer +1023 tag 5 len 4096 complete',
            'receives MPI_COMM_WORLD/1024 peer +1 tag 7 len 4096 pending',
          ],
        },
      ],
      classTotal: 1,
      outliers: '',
    });
  });

  it('singles out the ranks that differ', () => {
    const snap = syntheticRingDeadlock({ ranks: 1024, style: 'mpich' });
    // Rank 17's receive uses another tag; rank 500 could not be read.
    const recv = snap.ranks[17]?.communicators[0]?.receives?.[0];
    if (recv === undefined) throw new Error('fixture: rank 17 has no receive');
    recv.tag = 8;
    snap.ranks[500] = failedRank(500);
    const c = rankClasses(snap);
    expect(c.classTotal).toBe(3);
    expect(c.classes.map((x) => [x.size, x.ranks])).toEqual([
      [1022, '0-16,18-499,501-1023'],
      [1, '17'],
      [1, '500'],
    ]);
    expect(c.classes[2]?.shape).toEqual(['state error MQD_E_PTRACE_DENIED']);
    expect(c.outliers).toBe('17,500');
  });

  it('keeps wildcards and ranks with nothing pending apart', () => {
    const snap = ompiJob(4, (r) => {
      if (r === 0) return {};
      if (r === 1) return { receives: [op({ peer: null, global: null, tag: null })] };
      return { receives: [op({ peer: r - 1, tag: 1 })] };
    });
    const c = rankClasses(snap);
    expect(c.classes.map((x) => [x.ranks, x.shape])).toEqual([
      ['2-3', ['receives MPI_COMM_WORLD/4 peer +3 tag 1 len 8 pending']],
      ['0', ['(nothing in any queue)']],
      ['1', ['receives MPI_COMM_WORLD/4 peer any tag any len 8 pending']],
    ]);
    // Two ranks of four are half the job: no outliers.
    expect(c.outliers).toBe('');
  });

  it('uses absolute peers when that gives fewer classes (everyone waiting for a root)', () => {
    const c = rankClasses(syntheticCollectiveHang({ ranks: 256, laggard: 9 }));
    expect(c.peers).toBe('absolute');
    expect(c.classes.map((x) => [x.size, x.ranks])).toEqual([
      [254, '1-8,10-255'],
      [1, '0'],
      [1, '9'],
    ]);
    expect(c.classes[0]?.shape).toEqual(['receives (unnamed)/256 peer =0 tag -1073741822 len 0 pending']);
    expect(c.classes[2]?.shape).toEqual(['receives MPI_COMM_WORLD/256 peer =0 tag 3 len 2 pending']);
    expect(c.outliers).toBe('0,9');
  });
});
