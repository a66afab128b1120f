import {
  explainSnapshot,
  type JobSnapshot,
  syntheticCollectiveHang,
  syntheticIdle,
  syntheticProgressingPair,
  syntheticRingDeadlock,
  syntheticStuckPair,
  syntheticWrongTagHang,
  validateSnapshot,
  withUnreadableRanks,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';

const valid = (s: JobSnapshot) => {
  const r = validateSnapshot(s);
  if (!r.ok) throw new Error(r.error.message);
  return true;
};

describe('synthetic snapshots', () => {
  it('are deterministic for a seed and differ across seeds', () => {
    expect(syntheticRingDeadlock({ ranks: 8, seed: 3 })).toEqual(
      syntheticRingDeadlock({ ranks: 8, seed: 3 }),
    );
    expect(syntheticRingDeadlock({ ranks: 8, seed: 3 })).not.toEqual(
      syntheticRingDeadlock({ ranks: 8, seed: 4 }),
    );
  });

  it('validate and explain as what they model', () => {
    const cases: [string, JobSnapshot, JobSnapshot[], string][] = [
      ['ring openmpi', syntheticRingDeadlock({ ranks: 64 }), [], 'deadlock'],
      ['ring mpich', syntheticRingDeadlock({ ranks: 64, style: 'mpich' }), [], 'deadlock'],
      ['wrong tag', syntheticWrongTagHang({ ranks: 64 }), [], 'deadlock'],
      ['wrong tag mpich', syntheticWrongTagHang({ ranks: 63, style: 'mpich' }), [], 'deadlock'],
      ['idle', syntheticIdle({ ranks: 64 }), [], 'idle'],
      ['collective', syntheticCollectiveHang({ ranks: 64, seed: 9 }), [], 'collective-hang'],
      ['progressing', ...pair(syntheticProgressingPair({ ranks: 64 })), 'progressing'],
      ['stuck', ...pair(syntheticStuckPair({ ranks: 64 })), 'stuck'],
    ];
    for (const [name, snap, previous, verdict] of cases) {
      expect(valid(snap), name).toBe(true);
      for (const p of previous) expect(valid(p), name).toBe(true);
      expect(explainSnapshot(snap, previous).verdict, name).toBe(verdict);
    }
  });

  it('model the libraries: Open MPI hides unexpected messages, MPICH sends and global ranks', () => {
    const o = syntheticRingDeadlock({ ranks: 4 }).ranks[1]?.communicators[0];
    expect([o?.sends?.length, o?.unexpected, o?.id]).toEqual([1, null, '0']);
    const m = syntheticRingDeadlock({ ranks: 4, style: 'mpich' });
    const w1 = m.ranks[1]?.communicators[0];
    const w2 = m.ranks[2]?.communicators[0];
    expect([w1?.sends, w1?.unexpected?.length, w1?.receives?.[0]?.peer]).toEqual([
      null,
      1,
      { local: 2, global: null },
    ]);
    expect(w1?.id).not.toBe(w2?.id);
    expect(m.mpi.lengthUnit).toBe('elements');
  });

  it('scale to 16,384 ranks with a few operations each, still valid', () => {
    const s = syntheticRingDeadlock({ ranks: 16_384, style: 'mpich' });
    expect(s.ranks).toHaveLength(16_384);
    expect(valid(s)).toBe(true);
  });

  it('mark ranks unreadable on request', () => {
    const s = withUnreadableRanks(syntheticIdle({ ranks: 4 }), [2]);
    expect(valid(s)).toBe(true);
    expect(s.ranks.map((r) => r.state.kind)).toEqual(['ok', 'ok', 'error', 'ok']);
  });
});

function pair(p: [JobSnapshot, JobSnapshot]): [JobSnapshot, JobSnapshot[]] {
  return [p[1], [p[0]]];
}
