// The size of one element of a call's datatype, from the handle alone (MPICH's builtin handles
// encode it; see datatypeSize). The real-library path is checked by the send_send_large
// fixture (apps/cli/test/explain-classes.mpi.test.ts), whose MPICH size comes only from here.
import { describe, expect, it } from 'vitest';
import { datatypeSize } from '../src/rank-read/mpi-args.js';

describe('datatypeSize', () => {
  it("reads the size MPICH's builtin handles carry", () => {
    // mpi.h: MPI_CHAR 0x4c000101, MPI_INT 0x4c000405, MPI_DOUBLE 0x4c00080b.
    expect(datatypeSize('mpich', 0x4c000101n)).toBe(1);
    expect(datatypeSize('mpich', 0x4c000405n)).toBe(4);
    expect(datatypeSize('mpich', 0x4c00080bn)).toBe(8);
    // The frame holds the int in a 64-bit word: the upper half is not part of the handle.
    expect(datatypeSize('mpich', 0xffffffff4c000405n)).toBe(4);
  });

  it('gives null, not a guess, for derived types, MPI_DATATYPE_NULL and other libraries', () => {
    expect(datatypeSize('mpich', 0x8c000003n)).toBeNull();
    expect(datatypeSize('mpich', 0x0c000000n)).toBeNull();
    expect(datatypeSize('mpich', null)).toBeNull();
    // Open MPI's handle is a pointer: its low bits say nothing about the size.
    expect(datatypeSize('openmpi', 0x4c000405n)).toBeNull();
  });
});
