// Open MPI (4.1 and 5.0): its DLL is libompi_dbg_msgq.so ("Open MPI message queue support...");
// communicators are listed by their context id (4.x, the 32-bit c_contextid) or c_index (5.x),
// MPI_COMM_WORLD is id 0, and ompi_mpi_communicators holds every communicator at that id.
import { LIBRARY_NAME } from '@mqd/model';
import type { CompletedCheck, LibraryQuirks, RankMemory } from './library.js';

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

// Request facts of 4.1 and 5.0 (ompi/request/request.h, request_dbg.h, wait_sync.h,
// mca/pml/base/pml_base_request.h): req_complete is a `void *` that is REQUEST_PENDING (0) or
// REQUEST_COMPLETED (1), or the ompi_wait_sync_t of a thread waiting on the request, installed
// by a compare-and-swap from REQUEST_PENDING and swapped for REQUEST_COMPLETED only when the
// request completes. The DLL reads that field through ompi_fetch_bool (non-zero: complete), so
// a request a thread waits on in MPI_Wait*, or a blocking call under MPI_THREAD_MULTIPLE,
// reads as complete.
const REQUEST_COMPLETED = 1;
/** ompi_request_type_t: OMPI_REQUEST_PML, the only requests in the PML's lists the DLL reads. */
const OMPI_REQUEST_PML = 0;
/** ompi_request_state_t: OMPI_REQUEST_ACTIVE. */
const OMPI_REQUEST_ACTIVE = 2;
/** MPI_ANY_TAG in Open MPI's mpi.h (MPI_ANY_SOURCE is -1 too: a peer below 0 is any source). */
const ANY = -1;
/** The DLL names the request in line 0 of its extra text (ompi_msgq_dll.c fetch_request). */
const RECEIVE_LINE = 'Receive: 0x';
const SEND_LINE = 'Send: 0x';
const HEX = /^[0-9a-f]{1,16}$/;
const MAX_LENGTH = BigInt(Number.MAX_SAFE_INTEGER);
/** A wait sync's `count` above this is not one (requests left to complete; Waitall over a huge array still fits). */
const MAX_SYNC_COUNT = 1 << 30;

/**
 * The check of a request the DLL called complete: its completion field, state, type and PML
 * flag, peer, tag, count and datatype size, read in one span from the request (a receive or a
 * send: both begin with mca_pml_base_request_t, which begins with ompi_request_t). Runs in the
 * stop for every such request (20,000 in a deep MPI_Waitall): one read into a reused buffer,
 * numbers rather than BigInts where the value fits.
 */
function openMpiCompletedCheck(mem: RankMemory): CompletedCheck | null {
  const complete = mem.offsetOf('ompi_request_t', 'req_complete');
  const state = mem.offsetOf('ompi_request_t', 'req_state');
  const type = mem.offsetOf('ompi_request_t', 'req_type');
  const pmlComplete = mem.offsetOf('mca_pml_base_request_t', 'req_pml_complete');
  const peer = mem.offsetOf('mca_pml_base_request_t', 'req_peer');
  const tag = mem.offsetOf('mca_pml_base_request_t', 'req_tag');
  const count = mem.offsetOf('mca_pml_base_request_t', 'req_count');
  const datatype = mem.offsetOf('mca_pml_base_request_t', 'req_datatype');
  const typeSize = mem.offsetOf('ompi_datatype_t', 'super.size');
  const ints = [state, type, pmlComplete, peer, tag];
  const words = [complete, count, datatype];
  if ([...ints, ...words, typeSize].some((o) => o < 0)) return null;
  const span = Math.max(...ints.map((o) => o + 4), ...words.map((o) => o + 8));
  const buf = new Uint8Array(span);
  const v = new DataView(buf.buffer);
  // ompi_wait_sync_t.count (offset 0 in 4.1 and 5.0 when the type is not in the debug info).
  const syncCountAt = BigInt(Math.max(0, mem.offsetOf('ompi_wait_sync_t', 'count')));
  // Every request of one MPI_Waitall shares its sync, and most their datatype: read each once.
  const syncs = new Map<bigint, boolean>();
  const sizes = new Map<bigint, bigint | null>();
  const isSync = (p: bigint): boolean => {
    let known = syncs.get(p);
    if (known === undefined) {
      const n = p % 8n === 0n ? mem.i32(p + syncCountAt) : null;
      known = n !== null && n > 0 && n <= MAX_SYNC_COUNT;
      syncs.set(p, known);
    }
    return known;
  };
  const sizeOf = (dt: bigint): bigint | null => {
    let known = sizes.get(dt);
    if (known === undefined) {
      known = dt === 0n ? null : mem.u64(dt + BigInt(typeSize));
      sizes.set(dt, known);
    }
    return known;
  };
  return (firstLine) => {
    const at = firstLine.startsWith(RECEIVE_LINE)
      ? RECEIVE_LINE.length
      : firstLine.startsWith(SEND_LINE)
        ? SEND_LINE.length
        : -1;
    if (at < 0) return null;
    const hex = firstLine.slice(at);
    if (!HEX.test(hex)) return null;
    if (!mem.readInto(BigInt(`0x${hex}`), buf)) return null;
    // 0: pending (the DLL said so too); 1: complete, as the DLL says.
    const low = v.getUint32(complete, true);
    const high = v.getUint32(complete + 4, true);
    if (high === 0 && (low === 0 || low === REQUEST_COMPLETED)) return null;
    if (v.getInt32(type, true) !== OMPI_REQUEST_PML || v.getInt32(state, true) !== OMPI_REQUEST_ACTIVE)
      return null;
    // The PML is done with it: the completion is being signalled, the DLL's word stands.
    if (v.getInt32(pmlComplete, true) !== 0) return null;
    if (!isSync(v.getBigUint64(complete, true))) return null;
    const p = v.getInt32(peer, true);
    const t = v.getInt32(tag, true);
    const size = sizeOf(v.getBigUint64(datatype, true));
    const bytes = size === null ? null : v.getBigUint64(count, true) * size;
    return {
      reason: 'waited-on',
      status: 'pending',
      peer: p < 0 ? null : p,
      tag: t === ANY ? null : t,
      length: bytes === null || bytes > MAX_LENGTH ? null : Number(bytes),
    };
  };
}

export const openMpi: LibraryQuirks = {
  library: 'openmpi',
  displayName: LIBRARY_NAME.openmpi,
  claims: (text) => /ompi|Open MPI/i.test(text),
  worldId: () => '0',
  completedCheck: openMpiCompletedCheck,
  correctionNotes: {
    'waited-on':
      "Open MPI's DLL calls these requests complete; the library's own state says a thread waits on them (their completion field holds the waiting thread's synchronisation object), so they are shown pending",
  },

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
