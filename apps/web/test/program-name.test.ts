// The header names the program a snapshot's ranks run (the module holding main), not only the
// job's opaque id: real recorded snapshots of every build, a C++ fixture, and a snapshot without
// stacks (no name rather than a wrong one).
import { syntheticRingDeadlock } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { programOf } from '../src/format.js';
import { GOLDEN_MPIS, golden } from './golden.js';

describe('programOf', () => {
  it.each(GOLDEN_MPIS)('%s: wrong_tag and ring_ssend are named by their executables', (mpi) => {
    expect(programOf(golden(mpi, 'wrong_tag'))).toBe('wrong_tag');
    expect(programOf(golden(mpi, 'ring_ssend'))).toBe('ring_ssend');
  });

  it('is null when no stack was read', () => {
    const s = syntheticRingDeadlock({ ranks: 4 });
    const bare = { ...s, ranks: s.ranks.map(({ threads: _t, ...r }) => r) };
    expect(programOf(bare)).toBeNull();
  });
});
