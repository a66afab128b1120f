// Open MPI (4.1 and 5.0): its DLL is libompi_dbg_msgq.so ("Open MPI message queue support...");
// communicators are listed by their context id (4.x, the 32-bit c_contextid) or c_index (5.x),
// MPI_COMM_WORLD is id 0, and ompi_mpi_communicators holds every communicator at that id.
import { LIBRARY_NAME } from '@mqd/model';
import type { LibraryQuirks, RankMemory } from './library.js';

/** ompi_communicator_t's c_flags bit for an intercommunicator (communicator/communicator.h). */
const OMPI_COMM_INTER = 0x1;

/** Most ompi_comm_f_to_c_table slots looked at (a corrupt size must not make the read unbounded). */
const MAX_TABLE_SLOTS = 1 << 16;

/** The field of ompi_communicator_t the DLL takes a communicator's id from, and whether signed. */
function idField(mem: RankMemory): { offset: number; signed: boolean } | null {
  // 5.x's DLL reads c_index (its c_contextid is a 16-byte extended id whose first word,
  // cid_base, is 0 for every communicator of a job without PMIx groups); 4.x has no c_index
  // and uses the 32-bit c_contextid.
  const index = mem.offsetOf('ompi_communicator_t', 'c_index');
  if (index >= 0) return { offset: index, signed: true };
  const cid = mem.offsetOf('ompi_communicator_t', 'c_contextid');
  return cid >= 0 ? { offset: cid, signed: false } : null;
}

/** World ranks by ompi_proc_t pointer of an ompi_group_t's members; null when unreadable. */
function groupProcs(mem: RankMemory, group: bigint | null): bigint[] | null {
  const countOff = mem.offsetOf('ompi_group_t', 'grp_proc_count');
  const ptrsOff = mem.offsetOf('ompi_group_t', 'grp_proc_pointers');
  if (group === null || group === 0n || countOff < 0 || ptrsOff < 0) return null;
  const n = mem.i32(group + BigInt(countOff));
  const ptrs = mem.u64(group + BigInt(ptrsOff));
  if (n === null || n < 0 || n > 1 << 24 || ptrs === null || ptrs === 0n) return null;
  const out: bigint[] = [];
  for (let i = 0; i < n; i++) {
    const p = mem.u64(ptrs + BigInt(8 * i));
    if (p === null) return null;
    out.push(p);
  }
  return out;
}

export const openMpi: LibraryQuirks = {
  library: 'openmpi',
  displayName: LIBRARY_NAME.openmpi,
  claims: (text) => /ompi|Open MPI/i.test(text),
  worldId: () => '0',

  /** ompi_mpi_communicators.addr[cid], its c_flags & OMPI_COMM_INTER, c_remote_group. */
  remoteGroup(mem, id) {
    if (!/^\d+$/.test(id)) return undefined;
    const list = mem.image.findSymbol('ompi_mpi_communicators');
    const addrOff = mem.offsetOf('opal_pointer_array_t', 'addr');
    const flagsOff = mem.offsetOf('ompi_communicator_t', 'c_flags');
    const localOff = mem.offsetOf('ompi_communicator_t', 'c_local_group');
    const remoteOff = mem.offsetOf('ompi_communicator_t', 'c_remote_group');
    if (!list || addrOff < 0 || flagsOff < 0 || remoteOff < 0 || localOff < 0) return undefined;
    const slots = mem.u64(list.address + BigInt(addrOff));
    if (slots === null || slots === 0n) return undefined;
    const commAt = (cid: number) => mem.u64(slots + BigInt(8 * cid));
    const comm = commAt(Number(id));
    if (comm === null || comm === 0n) return undefined;
    const flags = mem.i32(comm + BigInt(flagsOff));
    if (flags === null || (flags & OMPI_COMM_INTER) === 0) return undefined;
    // MPI_COMM_WORLD (cid 0)'s local group is the world.
    const world = commAt(0);
    const worldProcs = groupProcs(mem, world === null ? null : mem.u64(world + BigInt(localOff)));
    const remote = groupProcs(mem, mem.u64(comm + BigInt(remoteOff)));
    if (!worldProcs || !remote) return null;
    const index = new Map(worldProcs.map((p, i) => [p, i]));
    const ranks = remote.map((p) => index.get(p) ?? -1);
    return ranks.every((r) => r >= 0) ? ranks : null;
  },

  /** The id the DLL lists, read from the ompi_communicator_t the handle points to. */
  commIdOfHandle(mem, handle) {
    // As before the split: c_index when the type has it, else c_contextid, read as uint32.
    const field = idField(mem);
    const word = field ? mem.u64(handle + BigInt(field.offset)) : null;
    return word === null ? null : String(Number(BigInt.asUintN(32, word)));
  },

  /**
   * `ompi_comm_f_to_c_table` (an opal_pointer_array_t) holds every communicator at its Fortran
   * handle; each is matched to the DLL's id by the field the DLL takes that id from.
   */
  fortranHandles(mem, ids) {
    const out = new Map<string, number | null>(ids.map((id) => [id, null]));
    if (ids.length === 0) return out;
    const table = mem.image.findSymbol('ompi_comm_f_to_c_table');
    const sizeOff = mem.offsetOf('opal_pointer_array_t', 'size');
    const addrOff = mem.offsetOf('opal_pointer_array_t', 'addr');
    const field = idField(mem);
    if (!table || sizeOff < 0 || addrOff < 0 || !field) return out;
    const size = mem.i32(table.address + BigInt(sizeOff));
    const addr = mem.u64(table.address + BigInt(addrOff));
    if (size === null || addr === null) return out;
    const n = Math.min(Math.max(size, 0), MAX_TABLE_SLOTS);
    const slots = mem.bytes(addr, n * 8);
    if (!slots) return out;
    const view = new DataView(slots.buffer, slots.byteOffset, slots.byteLength);
    let wanted = out.size;
    for (let f = 0; f < n && wanted > 0; f++) {
      const comm = view.getBigUint64(f * 8, true);
      if (comm === 0n) continue;
      const raw = mem.i32(comm + BigInt(field.offset));
      if (raw === null) continue;
      const id = String(field.signed ? raw : raw >>> 0);
      if (out.has(id) && out.get(id) === null) {
        out.set(id, f);
        wanted--;
      }
    }
    return out;
  },
};
