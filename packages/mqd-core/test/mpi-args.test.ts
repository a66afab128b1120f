// What a call's datatype and operation handles say, per library (call-handles.ts): MPICH's
// builtin handles encode it, Open MPI's point to structures read through their debug info (here
// over a small memory of our own; the real libraries are read in stacks.mpi.test.ts).
import { describe, expect, it } from 'vitest';
import type { RankMemory } from '../src/mqs/libraries/library.js';
import { HANDLE_READERS } from '../src/rank-read/call-handles.js';

/** A RankMemory over a few bytes at known addresses, with the field offsets given. */
function memoryOf(bytes: Map<bigint, Uint8Array>, offsets: Record<string, number>): RankMemory {
  const read = (addr: bigint, len: number): Uint8Array | null => {
    for (const [base, b] of bytes) {
      if (addr >= base && addr + BigInt(len) <= base + BigInt(b.length)) {
        const at = Number(addr - base);
        return b.slice(at, at + len);
      }
    }
    return null;
  };
  return {
    image: { findSymbol: () => null, findType: () => null },
    bytes: read,
    readInto: (addr, into) => {
      const b = read(addr, into.length);
      if (b) into.set(b);
      return b !== null;
    },
    u64: (addr) => {
      const b = read(addr, 8);
      return b ? new DataView(b.buffer).getBigUint64(0, true) : null;
    },
    i32: (addr) => {
      const b = read(addr, 4);
      return b ? new DataView(b.buffer).getInt32(0, true) : null;
    },
    offsetOf: (type, field) => offsets[`${type}.${field}`] ?? -1,
  };
}

const none = memoryOf(new Map(), {});

describe('MPICH handles', () => {
  const r = HANDLE_READERS.mpich;
  it("reads the size MPICH's builtin datatype handles carry", () => {
    // mpi.h: MPI_CHAR 0x4c000101, MPI_INT 0x4c000405, MPI_DOUBLE 0x4c00080b.
    expect(r.typeSize(none, 0x4c000101n)).toBe(1);
    expect(r.typeSize(none, 0x4c000405n)).toBe(4);
    expect(r.typeSize(none, 0x4c00080bn)).toBe(8);
    // The frame holds the int in a 64-bit word: the upper half is not part of the handle.
    expect(r.typeSize(none, 0xffffffff4c000405n)).toBe(4);
  });

  it('names the predefined operations by their handles', () => {
    expect(r.opName(none, 0x58000003n)).toBe('MPI_SUM');
    expect(r.opName(none, 0x58000001n)).toBe('MPI_MAX');
    expect(r.opName(none, 0x5800000en)).toBe('MPI_NO_OP');
  });

  it('gives null, not a guess, for derived types, user operations and null handles', () => {
    expect(r.typeSize(none, 0x8c000003n)).toBeNull();
    expect(r.typeSize(none, 0x0c000000n)).toBeNull();
    // MPI_Op_create's handles are not builtin (kind bits 10: direct).
    expect(r.opName(none, 0x98000000n)).toBeNull();
    expect(r.opName(none, 0x58000000n)).toBeNull();
    expect(r.opName(none, 0x5800000fn)).toBeNull();
    // A datatype handle is not an operation.
    expect(r.opName(none, 0x4c000405n)).toBeNull();
  });
});

describe('Open MPI handles', () => {
  const r = HANDLE_READERS.openmpi;
  const int = new Uint8Array(64);
  new DataView(int.buffer).setBigUint64(24, 4n, true);
  const sum = new Uint8Array(96);
  sum.set(new TextEncoder().encode('MPI_SUM'), 16);
  const user = new Uint8Array(96);
  const mem = memoryOf(
    new Map([
      [0x1000n, int],
      [0x2000n, sum],
      [0x3000n, user],
    ]),
    { 'ompi_datatype_t.super.size': 24, 'ompi_op_t.o_name': 16 },
  );

  it("reads a datatype's size and an operation's name from the structures the handles point to", () => {
    expect(r.typeSize(mem, 0x1000n)).toBe(4);
    expect(r.opName(mem, 0x2000n)).toBe('MPI_SUM');
  });

  it('gives null for a user operation, unreadable memory, or types the debug info lacks', () => {
    expect(r.opName(mem, 0x3000n)).toBeNull();
    expect(r.typeSize(mem, 0x9000n)).toBeNull();
    expect(r.opName(mem, 0n)).toBeNull();
    expect(r.typeSize(none, 0x1000n)).toBeNull();
    expect(r.opName(none, 0x2000n)).toBeNull();
  });

  it('reads nothing for a library it does not know', () => {
    expect(HANDLE_READERS.unknown.typeSize(mem, 0x1000n)).toBeNull();
    expect(HANDLE_READERS.unknown.opName(mem, 0x2000n)).toBeNull();
  });
});
