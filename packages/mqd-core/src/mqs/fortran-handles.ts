// Fortran handles of communicators (issue 14): what MPI_Comm_c2f returns for each communicator
// the DLL listed, the INTEGER a `use mpi` / mpif.h program holds (`MPI_VAL` under mpi_f08). The
// mqs_* interface cannot say; the library's own structures can, through its debug info:
// - Open MPI: `ompi_comm_f_to_c_table` (an opal_pointer_array_t) holds every communicator at
//   its Fortran handle; each communicator is matched to the DLL's id by the field the DLL takes
//   that id from (`c_index` in 5.x, the 32-bit `c_contextid` in 4.x).
// - MPICH: the Fortran handle is the C handle, `MPIR_Comm.handle`, and the DLL's id is the
//   MPIR_Comm's address.
// Read while the rank is stopped (the same page cache as the queue walk); best effort: a
// communicator whose handle cannot be read gets null, never a guess.
import type { MpiLibrary } from '@mqd/model';
import type { ProcessImage } from '../inferior/process-image.js';

/** Reads `len` bytes of the stopped target at `addr`; null when unreadable. */
export type ReadBytes = (addr: bigint, len: number) => Uint8Array | null;

/** Most Open MPI table slots looked at (a corrupt size must not make the read unbounded). */
const MAX_TABLE_SLOTS = 1 << 16;

const u64 = (b: Uint8Array): bigint => new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0, true);
const i32 = (b: Uint8Array): number => new DataView(b.buffer, b.byteOffset, 4).getInt32(0, true);
const u32 = (b: Uint8Array): number => new DataView(b.buffer, b.byteOffset, 4).getUint32(0, true);

/**
 * The Fortran handle of each communicator id the DLL gave (ids as the snapshot writes them:
 * decimal for Open MPI, 0x-hex addresses for MPICH). Ids with no readable handle map to null.
 */
export function fortranHandles(
  library: MpiLibrary,
  image: Pick<ProcessImage, 'findSymbol' | 'findType'>,
  read: ReadBytes,
  ids: readonly string[],
): Map<string, number | null> {
  const out = new Map<string, number | null>(ids.map((id) => [id, null]));
  if (ids.length === 0) return out;
  if (library === 'openmpi') openMpiHandles(image, read, out);
  else if (library === 'mpich') mpichHandles(image, read, out);
  return out;
}

function openMpiHandles(
  image: Pick<ProcessImage, 'findSymbol' | 'findType'>,
  read: ReadBytes,
  out: Map<string, number | null>,
): void {
  const table = image.findSymbol('ompi_comm_f_to_c_table');
  const tableType = image.findType('opal_pointer_array_t');
  const commType = image.findType('ompi_communicator_t');
  if (!table || !tableType || !commType) return;
  const sizeOff = tableType.file.fieldOffset(tableType, 'size');
  const addrOff = tableType.file.fieldOffset(tableType, 'addr');
  // 5.x: the DLL's id is c_index; 4.x has no c_index and uses the 32-bit c_contextid.
  const indexOff = commType.file.fieldOffset(commType, 'c_index');
  const idOff = indexOff >= 0 ? indexOff : commType.file.fieldOffset(commType, 'c_contextid');
  if (sizeOff < 0 || addrOff < 0 || idOff < 0) return;
  const sizeBytes = read(table.address + BigInt(sizeOff), 4);
  const addrBytes = read(table.address + BigInt(addrOff), 8);
  if (!sizeBytes || !addrBytes) return;
  const size = Math.min(Math.max(i32(sizeBytes), 0), MAX_TABLE_SLOTS);
  const slots = read(u64(addrBytes), size * 8);
  if (!slots) return;
  let wanted = out.size;
  for (let f = 0; f < size && wanted > 0; f++) {
    const comm = u64(slots.subarray(f * 8, f * 8 + 8));
    if (comm === 0n) continue;
    const idBytes = read(comm + BigInt(idOff), 4);
    if (!idBytes) continue;
    const id = String(indexOff >= 0 ? i32(idBytes) : u32(idBytes));
    if (out.has(id) && out.get(id) === null) {
      out.set(id, f);
      wanted--;
    }
  }
}

function mpichHandles(
  image: Pick<ProcessImage, 'findSymbol' | 'findType'>,
  read: ReadBytes,
  out: Map<string, number | null>,
): void {
  const commType = image.findType('MPIR_Comm');
  if (!commType) return;
  const handleOff = commType.file.fieldOffset(commType, 'handle');
  if (handleOff < 0) return;
  for (const id of out.keys()) {
    if (!/^0x[0-9a-f]+$/.test(id)) continue;
    const b = read(BigInt(id) + BigInt(handleOff), 4);
    if (b) out.set(id, i32(b));
  }
}
