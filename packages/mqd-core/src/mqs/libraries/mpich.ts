// MPICH (4.0 and 4.2, ch3 and ch4): its DLL is libtvmpich.so ("MPICH message queue support...");
// communicators are listed by their MPIR_Comm's address, MPI_COMM_WORLD is
// &MPIR_Comm_builtin[0], and the Fortran handle of a communicator is its C handle.
import { LIBRARY_NAME } from '@mqd/model';
import type { LibraryQuirks, RankMemory } from './library.js';

/** MPIR_Comm's comm_kind for an intercommunicator (MPIR_COMM_KIND__INTERCOMM). */
const INTERCOMM = 1;

/**
 * MPIDI_rank_map_mode (src/mpid/ch4/include/mpidpre.h, MPICH 4.0.2; the same in 4.2): the
 * DWARF gives the enumerators but DebugFile reads no enumerator values, so they are spelled here.
 */
const RANK_MAP = {
  DIRECT: 0,
  DIRECT_INTRA: 1,
  OFFSET: 2,
  OFFSET_INTRA: 3,
  STRIDE: 4,
  STRIDE_INTRA: 5,
  STRIDE_BLOCK: 6,
  STRIDE_BLOCK_INTRA: 7,
  LUT: 8,
  LUT_INTRA: 9,
  MLUT: 10,
} as const;

const INTRA_MODES: readonly number[] = [
  RANK_MAP.DIRECT_INTRA,
  RANK_MAP.OFFSET_INTRA,
  RANK_MAP.STRIDE_INTRA,
  RANK_MAP.STRIDE_BLOCK_INTRA,
  RANK_MAP.LUT_INTRA,
];

/** ch3: comm->dev.vcrt->vcr_table[i]->pg_rank, the world rank of remote rank i. */
function vcRanks(mem: RankMemory, comm: bigint): number[] | null {
  const devOff = mem.offsetOf('MPIR_Comm', 'dev');
  const vcrtOff = mem.offsetOf('MPIDI_CH3I_comm_t', 'vcrt');
  const sizeOff = mem.offsetOf('MPIDI_VCRT', 'size');
  const tableOff = mem.offsetOf('MPIDI_VCRT', 'vcr_table');
  const rankOff = mem.offsetOf('MPIDI_VC', 'pg_rank');
  if (devOff < 0 || vcrtOff < 0 || sizeOff < 0 || tableOff < 0 || rankOff < 0) return null;
  const vcrt = mem.u64(comm + BigInt(devOff + vcrtOff));
  if (vcrt === null || vcrt === 0n) return null;
  const n = mem.i32(vcrt + BigInt(sizeOff));
  if (n === null || n < 0 || n > 1 << 24) return null;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const vc = mem.u64(vcrt + BigInt(tableOff + 8 * i));
    const r = vc === null || vc === 0n ? null : mem.i32(vc + BigInt(rankOff));
    if (r === null || r < 0) return null;
    out.push(r);
  }
  return out;
}

/**
 * ch4: comm->dev.ch4.map (MPIDI_rank_map_t), which on an intercommunicator maps each remote
 * rank to (avtid, lpid) as MPIDIU_comm_rank_to_pid does (src/mpid/ch4/src/ch4_proc.h). lpid is
 * the world rank for the processes of this job (address-vector table 0); a rank of another
 * table (a spawned or connected job) has no world rank here: null.
 */
function ch4MapRanks(mem: RankMemory, comm: bigint): number[] | null {
  const mapOff = mem.offsetOf('MPIR_Comm', 'dev.ch4.map');
  const remoteSizeOff = mem.offsetOf('MPIR_Comm', 'remote_size');
  const f = (field: string) => mem.offsetOf('MPIDI_rank_map_t', field);
  const off = {
    mode: f('mode'),
    avtid: f('avtid'),
    size: f('size'),
    offset: f('reg.offset'),
    strideOffset: f('reg.stride.offset'),
    stride: f('reg.stride.stride'),
    blocksize: f('reg.stride.blocksize'),
    lut: f('irreg.lut.lpid'),
    mlut: f('irreg.mlut.gpid'),
  };
  const gpid = mem.image.findType('MPIDI_gpid_t');
  const gpidAvtid = gpid ? gpid.file.fieldOffset(gpid, 'avtid') : -1;
  const gpidLpid = gpid ? gpid.file.fieldOffset(gpid, 'lpid') : -1;
  const gpidSize = gpid ? gpid.file.sizeOf(gpid) : -1;
  if (mapOff < 0 || remoteSizeOff < 0 || Object.values(off).some((o) => o < 0)) return null;
  const map = comm + BigInt(mapOff);
  const at = (o: number) => mem.i32(map + BigInt(o));
  const mode = at(off.mode);
  const avtid = at(off.avtid);
  const n = at(off.size);
  // The map of an intercommunicator covers its remote group.
  if (mode === null || avtid === null || n === null || n !== mem.i32(comm + BigInt(remoteSizeOff)))
    return null;
  if (n < 0 || n > 1 << 24) return null;
  // A non-_INTRA mode names its table; only table 0 holds this job's world.
  if (!INTRA_MODES.includes(mode) && mode !== RANK_MAP.MLUT && avtid !== 0) return null;
  const ranks = (lpidOf: (r: number) => number | null): number[] | null => {
    const out: number[] = [];
    for (let r = 0; r < n; r++) {
      const lpid = lpidOf(r);
      if (lpid === null || lpid < 0) return null;
      out.push(lpid);
    }
    return out;
  };
  switch (mode) {
    case RANK_MAP.DIRECT:
    case RANK_MAP.DIRECT_INTRA:
      return ranks((r) => r);
    case RANK_MAP.OFFSET:
    case RANK_MAP.OFFSET_INTRA: {
      const o = at(off.offset);
      return o === null ? null : ranks((r) => r + o);
    }
    case RANK_MAP.STRIDE:
    case RANK_MAP.STRIDE_INTRA: {
      const o = at(off.strideOffset);
      const stride = at(off.stride);
      return o === null || stride === null ? null : ranks((r) => r * stride + o);
    }
    case RANK_MAP.STRIDE_BLOCK:
    case RANK_MAP.STRIDE_BLOCK_INTRA: {
      const o = at(off.strideOffset);
      const stride = at(off.stride);
      const block = at(off.blocksize);
      if (o === null || stride === null || block === null || block <= 0) return null;
      return ranks((r) => Math.trunc(r / block) * (stride - block) + r + o);
    }
    case RANK_MAP.LUT:
    case RANK_MAP.LUT_INTRA: {
      const lpids = mem.u64(map + BigInt(off.lut));
      if (lpids === null || lpids === 0n) return null;
      return ranks((r) => mem.i32(lpids + BigInt(4 * r)));
    }
    case RANK_MAP.MLUT: {
      const gpids = mem.u64(map + BigInt(off.mlut));
      if (gpids === null || gpids === 0n || gpidAvtid < 0 || gpidLpid < 0 || gpidSize <= 0) return null;
      return ranks((r) => {
        const entry = gpids + BigInt(r * gpidSize);
        return mem.i32(entry + BigInt(gpidAvtid)) === 0 ? mem.i32(entry + BigInt(gpidLpid)) : null;
      });
    }
    default:
      // MPIDI_RANK_MAP_NONE or a mode this reader does not know.
      return null;
  }
}

/**
 * Lists MPICH keeps only for debuggers (src/mpi/debugger/dbginit.c): every entry is put at the
 * head (MPIR_Sendq_head in 4.0 and 4.2; MPIR_Recvq_head and MPIR_Unexpq_head, MPIR_Debugq since
 * 4.1, where the DLL reads posted receives and unexpected messages from them instead of the
 * device's own queues), so the DLL reports them newest first. A DLL that asks for one of these
 * symbols gets that queue reversed into matching order (oldest first), as the interface means
 * it (docs/mpi-facts.md, "MPICH 4.2.1").
 */
const NEWEST_FIRST_LISTS: ReadonlyMap<string, 'sends' | 'receives' | 'unexpected'> = new Map([
  ['MPIR_Sendq_head', 'sends'],
  ['MPIR_Recvq_head', 'receives'],
  ['MPIR_Unexpq_head', 'unexpected'],
]);

export const mpich: LibraryQuirks = {
  library: 'mpich',
  displayName: LIBRARY_NAME.mpich,
  claims: (text) => /tvmpich|\bMPICH\b/i.test(text),
  newestFirstLists: NEWEST_FIRST_LISTS,

  /** The DLL's ids are MPIR_Comm addresses: MPI_COMM_WORLD is MPIR_Comm_builtin[0]. */
  worldId(image) {
    const sym = image.findSymbol('MPIR_Comm_builtin');
    return sym ? `0x${sym.address.toString(16)}` : null;
  },

  /** The MPIR_Comm at the id's address, comm_kind, remote_group's lrank_to_lpid. */
  remoteGroup(mem, id) {
    if (!/^0x[0-9a-f]+$/.test(id)) return undefined;
    const comm = BigInt(id);
    const kindOff = mem.offsetOf('MPIR_Comm', 'comm_kind');
    const remoteOff = mem.offsetOf('MPIR_Comm', 'remote_group');
    if (kindOff < 0 || remoteOff < 0) return undefined;
    const kind = mem.i32(comm + BigInt(kindOff));
    if (kind !== INTERCOMM) return undefined;
    const group = mem.u64(comm + BigInt(remoteOff));
    // ch3 makes the remote MPIR_Group only when asked (MPI_Comm_remote_group): then the
    // virtual connections of the remote ranks, each with its rank in the process group. ch4 has
    // no VC table: the remote ranks are in the communicator's rank map.
    if (group === 0n) return vcRanks(mem, comm) ?? ch4MapRanks(mem, comm);
    const sizeOff = mem.offsetOf('MPIR_Group', 'size');
    const mapOff = mem.offsetOf('MPIR_Group', 'lrank_to_lpid');
    const pmap = mem.image.findType('MPII_Group_pmap_t');
    const lpidOff = pmap ? pmap.file.fieldOffset(pmap, 'lpid') : -1;
    const stride = pmap ? pmap.file.sizeOf(pmap) : -1;
    if (group === null || group === 0n || sizeOff < 0 || mapOff < 0 || lpidOff < 0 || stride <= 0)
      return null;
    const n = mem.i32(group + BigInt(sizeOff));
    const map = mem.u64(group + BigInt(mapOff));
    if (n === null || n < 0 || n > 1 << 24 || map === null || map === 0n) return null;
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      // lpid: the process's index in MPI_COMM_WORLD for processes of the same job.
      const lpid = mem.u64(map + BigInt(i * stride + lpidOff));
      if (lpid === null || lpid > 0x7fffffffn) return null;
      out.push(Number(lpid));
    }
    return out;
  },

  /** MPICH handles: kind in bits 30-31 (1 builtin, 2 direct), index in the low 26 bits. */
  commIdOfHandle(mem, handle) {
    const h = Number(BigInt.asUintN(32, handle));
    const kind = h >>> 30;
    const table = kind === 1 ? 'MPIR_Comm_builtin' : kind === 2 ? 'MPIR_Comm_direct' : null;
    const sym = table ? mem.image.findSymbol(table) : null;
    const ty = mem.image.findType('MPIR_Comm');
    const size = ty ? ty.file.sizeOf(ty) : -1;
    if (!sym || size <= 0) return null;
    const addr = sym.address + BigInt((h & 0x3ffffff) * size);
    return `0x${addr.toString(16)}`;
  },

  /** The Fortran handle is the C handle, MPIR_Comm.handle, at the id's address. */
  fortranHandles(mem, ids) {
    const out = new Map<string, number | null>(ids.map((id) => [id, null]));
    if (ids.length === 0) return out;
    const handleOff = mem.offsetOf('MPIR_Comm', 'handle');
    if (handleOff < 0) return out;
    for (const id of out.keys()) {
      if (!/^0x[0-9a-f]+$/.test(id)) continue;
      const h = mem.i32(BigInt(id) + BigInt(handleOff));
      if (h !== null) out.set(id, h);
    }
    return out;
  },
};
