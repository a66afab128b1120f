import {
  cycleMarks,
  type Explanation,
  explainSnapshot,
  type JobSnapshot,
  syntheticIdle,
  syntheticRingDeadlock,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { bannerText } from '../src/explanation.js';

/** The cells the matrix outlines (MatrixView: cycleMarks of the explanation's deadlock). */
const cycleCells = (e: Explanation) =>
  e.deadlock ? cycleMarks(e.deadlock.cycles, e.deadlock.cycleTotal).cells : [];

const sorted = (cells: { row: number; col: number }[]) =>
  cells.map((c) => [c.row, c.col]).sort((a, b) => (a[0] ?? 0) - (b[0] ?? 0) || (a[1] ?? 0) - (b[1] ?? 0));

describe('cycle cells outlined in the matrix', () => {
  it('a ring of sends: the cells sender r -> receiver r+1', () => {
    const cells = cycleCells(explainSnapshot(syntheticRingDeadlock({ ranks: 8, style: 'openmpi' })));
    expect(sorted(cells)).toEqual([0, 1, 2, 3, 4, 5, 6, 7].map((r) => [r, (r + 1) % 8]));
  });

  it('a cycle of receives: the cells of the messages each rank waits for (sender row, receiver column)', () => {
    const recv = (from: number) => ({
      status: 'pending' as const,
      peer: { local: from, global: from },
      tag: 5,
      length: 4,
      actual: null,
      extraText: [],
      buffer: '0x10',
      systemBuffer: false,
    });
    const rank = (r: number, from: number) => ({
      rank: r,
      pid: 100 + r,
      host: 'h',
      state: { kind: 'ok' as const },
      pausedMicros: 10,
      communicators: [
        {
          id: '0',
          name: 'MPI_COMM_WORLD',
          size: 3,
          localRank: r,
          group: null,
          sends: [],
          receives: [recv(from)],
          unexpected: [],
          unavailable: {},
        },
      ],
    });
    const snap: JobSnapshot = {
      schemaVersion: 1,
      takenAt: '2026-01-01T00:00:00.000Z',
      durationMicros: 1,
      mpi: { library: 'openmpi', dll: null, lengthUnit: 'bytes' },
      // 0 waits for a message from 2, 1 from 0, 2 from 1.
      ranks: [rank(0, 2), rank(1, 0), rank(2, 1)],
    };
    expect(sorted(cycleCells(explainSnapshot(snap)))).toEqual([
      [0, 1],
      [1, 2],
      [2, 0],
    ]);
  });

  it('nothing to outline without a deadlock', () => {
    expect(cycleCells(explainSnapshot(syntheticIdle({ ranks: 4 })))).toEqual([]);
  });
});

describe('the diagnosis banner', () => {
  it('says the verdict once: "Deadlock" then the rest of the statement, not "Deadlock Deadlock: ..."', () => {
    const e = explainSnapshot(syntheticRingDeadlock({ ranks: 8, style: 'openmpi' }));
    const b = bannerText(e);
    expect(b).toEqual({ verdict: 'Deadlock', lead: '8 of 8 ranks can never proceed.' });
    expect(`${b.verdict} ${b.lead}`.match(/deadlock/gi)).toHaveLength(1);
  });

  it('an idle job and a summary without a verdict statement', () => {
    const idle = bannerText(explainSnapshot(syntheticIdle({ ranks: 4 })));
    expect(idle.verdict).toBe('Idle');
    expect(idle.lead).not.toMatch(/^Idle/);
    expect(
      bannerText({ verdict: 'stuck', headline: '', lead: '', summary: 'Stacks: 4 ranks in MPI_Recv. More.' }),
    ).toEqual({ verdict: 'Stuck', lead: 'Stacks: 4 ranks in MPI_Recv.' });
  });
});
