import { cycleMarks, findDeadlocks, rankMarks } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { ompiJob, op } from './fixtures.js';

describe('what the matrix can mark of the cycles', () => {
  it('marks a receive from ANY_SOURCE on the any-sender strip, not on a possible sender cell', () => {
    // 0 waits for 1; 1 waits for ANY_SOURCE; 2 waits for 0: nobody can send to 1.
    const snap = ompiJob(3, (r) => {
      if (r === 0) return { receives: [op({ peer: 1, tag: 1 })] };
      if (r === 1) return { receives: [op({ peer: null, global: null, tag: 2 })] };
      return { receives: [op({ peer: 0, tag: 3 })] };
    });
    const w = findDeadlocks(snap);
    const m = cycleMarks(w.cycles, w.cycleTotal);
    // 0's receive from 1: sender 1 -> receiver 0. 1's wildcard receive: the strip under column 1.
    expect(m.cells).toEqual([{ row: 1, col: 0 }]);
    expect(m.anySource).toEqual([1]);
    expect([m.cyclesMarked, m.cycleTotal, m.cellsCut]).toEqual([1, 1, false]);
  });

  it('says when the cycles found are more than those the analysis kept', () => {
    // Eight pairs, each waiting for the other: eight cycles, of which the analysis keeps 3.
    const snap = ompiJob(16, (r) => ({ receives: [op({ peer: r ^ 1, tag: 1 })] }));
    const w = findDeadlocks(snap, { maxCycles: 3 });
    const m = cycleMarks(w.cycles, w.cycleTotal);
    expect([m.cyclesMarked, m.cycleTotal, m.cells.length]).toEqual([3, 8, 6]);
    const cut = cycleMarks(w.cycles, w.cycleTotal, 3);
    expect([cut.cells.length, cut.cellsCut]).toEqual([3, true]);
  });
});

describe('ranks marked on the axes', () => {
  it('names the odd ranks out of a collective and the class outliers', () => {
    const marks = rankMarks({
      collectiveMismatches: [
        {
          commKey: 'w',
          commName: 'MPI_COMM_WORLD',
          text: '',
          groups: [
            {
              call: 'MPI_Barrier',
              where: 'call',
              blocking: true,
              commName: 'MPI_COMM_WORLD',
              ranks: '0-2',
              rankCount: 3,
            },
            {
              call: 'MPI_Allreduce',
              where: 'call',
              blocking: true,
              commName: 'MPI_COMM_WORLD',
              ranks: '3',
              rankCount: 1,
            },
            { call: null, where: 'unread', blocking: false, commName: null, ranks: '4', rankCount: 1 },
          ],
        },
      ],
      collectives: [],
      outliers: '3',
    });
    expect(marks.oddOut).toEqual([
      {
        ranks: '3',
        why: 'rank 3 in MPI_Allreduce on MPI_COMM_WORLD while ranks 0-2 in MPI_Barrier on MPI_COMM_WORLD',
      },
    ]);
    expect(marks.outliers).toBe('3');
  });
});
