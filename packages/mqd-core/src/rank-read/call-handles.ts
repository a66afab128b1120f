// What an MPI call's datatype and operation handles say, per library: one table entry each, so
// reading a call's arguments never asks which library it is. MPICH's builtin handles are
// integers that encode what they name; Open MPI's are pointers to the library's own structures,
// read through their debug info.
import type { MpiLibrary } from '@mqd/model';
import type { RankMemory } from '../mqs/libraries/library.js';

export interface HandleReader {
  /** Bytes of one element of a datatype handle; null for a derived type or an unreadable one. */
  typeSize(mem: RankMemory, handle: bigint): number | null;
  /** A predefined operation's name ("MPI_SUM"); null for a user operation or an unreadable one. */
  opName(mem: RankMemory, handle: bigint): string | null;
}

/** MPICH's predefined operations in mpi.h order: MPI_MAX is 0x58000001 ... MPI_NO_OP 0x5800000e. */
const MPICH_OPS: readonly string[] = [
  'MPI_MAX',
  'MPI_MIN',
  'MPI_SUM',
  'MPI_PROD',
  'MPI_LAND',
  'MPI_BAND',
  'MPI_LOR',
  'MPI_BOR',
  'MPI_LXOR',
  'MPI_BXOR',
  'MPI_MINLOC',
  'MPI_MAXLOC',
  'MPI_REPLACE',
  'MPI_NO_OP',
];

/** MPICH handle bits: kind in 30-31 (01 = builtin), object type in 26-29 (MPIR_OP = 6 for operations). */
const MPICH_BUILTIN = 1;
const MPICH_OP_PREFIX = 0x58000000;

const mpich: HandleReader = {
  // Builtin datatypes carry their size in bits 8-15 (MPI_INT is 0x4c000405).
  typeSize: (_mem, handle) => {
    const h = Number(handle & 0xffffffffn);
    if (h >>> 30 !== MPICH_BUILTIN) return null;
    const size = (h >>> 8) & 0xff;
    return size > 0 ? size : null;
  },
  opName: (_mem, handle) => {
    const h = Number(handle & 0xffffffffn);
    if ((h & 0xffffff00) >>> 0 !== MPICH_OP_PREFIX) return null;
    return MPICH_OPS[(h & 0xff) - 1] ?? null;
  },
};

/** Most bytes of an ompi_op_t's o_name read (MPI_MAX_OBJECT_NAME is 64). */
const OMPI_NAME_BYTES = 64;
const OP_NAME = /^MPI_[A-Z_]+$/;

const openMpi: HandleReader = {
  // ompi_datatype_t begins with its opal_datatype_t, whose `size` is one element's bytes.
  typeSize: (mem, handle) => {
    const off = mem.offsetOf('ompi_datatype_t', 'super.size');
    if (off < 0 || handle === 0n) return null;
    const v = mem.u64(handle + BigInt(off));
    return v === null || v <= 0n || v > 0xffffffffn ? null : Number(v);
  },
  // Predefined operations are named in their ompi_op_t ("MPI_SUM"); user ones have no such name.
  opName: (mem, handle) => {
    const off = mem.offsetOf('ompi_op_t', 'o_name');
    if (off < 0 || handle === 0n) return null;
    const b = mem.bytes(handle + BigInt(off), OMPI_NAME_BYTES);
    if (b === null) return null;
    const end = b.indexOf(0);
    const name = new TextDecoder().decode(b.subarray(0, end < 0 ? b.length : end));
    return OP_NAME.test(name) ? name : null;
  },
};

const none: HandleReader = { typeSize: () => null, opName: () => null };

export const HANDLE_READERS: Readonly<Record<MpiLibrary, HandleReader>> = {
  mpich,
  openmpi: openMpi,
  unknown: none,
};
