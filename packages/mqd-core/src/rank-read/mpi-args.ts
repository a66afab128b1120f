// The arguments of the MPI call a rank is inside: read from its frame while the rank is stopped
// (dest/source, tag, count, the communicator handle), then matched to the walk's communicators
// after the resume (the peer's world rank, the communicator's id).
import {
  type Communicator,
  findMpiCall,
  isWorld,
  type MpiFrame,
  type MqdError,
  mqdError,
  type RankSnapshot,
} from '@mqd/model';
import type { ProcessImage } from '../inferior/process-image.js';
import type { Unwinder, UnwoundRank } from '../inferior/unwind.js';
import type { LibraryQuirks, RankMemory } from '../mqs/libraries/library.js';

/** An MPI call's arguments as read in the stop, before they are matched to the communicators. */
export interface RawMpiArgs {
  readonly call: MpiFrame;
  readonly peer: number | null;
  readonly tag: number | null;
  readonly count: number | null;
  /** A rooted collective's root argument. */
  readonly root: number | null;
  /** Bytes of one element of the datatype argument, where its handle says (see datatypeSize). */
  readonly typeSize: number | null;
  readonly comm: { kind: 'id'; id: string } | null;
}

/**
 * The arguments of the rank's MPI call, read while it is stopped: dest/source, tag, count as
 * the call's frame holds them, and the communicator handle turned into what identifies it in
 * the DLL's list (LibraryQuirks.commIdOfHandle: Open MPI's c_index or context id, MPICH's
 * MPIR_Comm address). Best effort: null where unreadable.
 */
export function readMpiArgs(
  unwinder: Unwinder,
  pid: number,
  image: Pick<ProcessImage, 'dwarfAt'>,
  mem: RankMemory,
  quirks: LibraryQuirks,
  stacks: UnwoundRank,
): RawMpiArgs | null {
  const call = findMpiCall(stacks.threads);
  if (call === null) return null;
  const thread = stacks.threads.find((x) => x.tid === call.tid);
  if (!thread) return null;
  // Physical frame index: inlined frames share their caller's physical frame.
  let physical = 0;
  for (let i = 0; i < call.frameIndex; i++) if (!thread.frames[i]?.inlined) physical++;
  const fn = thread.frames[call.frameIndex]?.function ?? call.function;
  const words = unwinder.frameArgs(pid, call.tid, physical, fn, (a) => mem.u64(a), image.dwarfAt);
  const int = (names: string[]): number | null => {
    for (const n of names) {
      const v = words.get(n);
      if (v !== undefined) return Number(BigInt.asIntN(32, v));
    }
    return null;
  };
  const handle = words.get('comm') ?? null;
  const id = handle === null ? null : quirks.commIdOfHandle(mem, handle);
  const comm: RawMpiArgs['comm'] = id === null ? null : { kind: 'id', id };
  return {
    call,
    peer: int(['dest', 'source', 'src']),
    tag: int(['tag']),
    count: int(['count']),
    root: int(['root']) ?? innerRoot(unwinder, pid, image, mem, thread, call.frameIndex, physical),
    typeSize: datatypeSize(quirks.library, words.get('datatype') ?? null),
    comm,
  };
}

/**
 * Bytes of one element of a datatype handle, without reading the target: MPICH's builtin
 * handles (kind bits 30-31 = 01, as mpi.h defines MPI_INT 0x4c000405) carry the size in bits
 * 8-15. Open MPI's handles are pointers to structures whose layout differs by build: null, as
 * for derived types.
 */
export function datatypeSize(library: string, handle: bigint | null): number | null {
  if (handle === null || library !== 'mpich') return null;
  const h = Number(handle & 0xffffffffn);
  if (h >>> 30 !== 1) return null;
  const size = (h >>> 8) & 0xff;
  return size > 0 ? size : null;
}

/** Inner frames searched for a root the public call's own frame lost (an optimised library). */
const MAX_ROOT_FRAMES = 8;

/**
 * A rooted collective's root from the library's frames inside the call, nearest first: an
 * optimised MPI_Reduce keeps `root` only as an entry value, while the algorithm it calls
 * (Open MPI's ompi_coll_base_reduce_intra_*) still holds it in a parameter of the same name.
 */
function innerRoot(
  unwinder: Unwinder,
  pid: number,
  image: Pick<ProcessImage, 'dwarfAt'>,
  mem: RankMemory,
  thread: UnwoundRank['threads'][number],
  callIndex: number,
  callPhysical: number,
): number | null {
  let physical = callPhysical;
  for (let i = callIndex - 1, seen = 0; i >= 0 && seen < MAX_ROOT_FRAMES; i--) {
    const f = thread.frames[i];
    if (f === undefined) break;
    // Frame i's physical index: i+1's, less one unless i is inlined into i+1's frame.
    if (!f.inlined) physical--;
    if (f.inlined || f.function === null) continue;
    seen++;
    const v = unwinder
      .frameArgs(pid, thread.tid, physical, f.function, (a) => mem.u64(a), image.dwarfAt)
      .get('root');
    if (v !== undefined) return Number(BigInt.asIntN(32, v));
  }
  return null;
}

/** The snapshot fields for what the unwinder gave: threads and mpiCall, or stacksError. */
export function stackFieldsOf(
  stacks: UnwoundRank | MqdError,
  raw: RawMpiArgs | null,
  communicators: readonly Communicator[],
): Pick<RankSnapshot, 'threads' | 'stacksError' | 'mpiCall' | 'threadLimit'> {
  if ('code' in stacks) return { stacksError: { code: stacks.code, message: stacks.message } };
  const limit = threadLimitOf(stacks);
  const call = findMpiCall(stacks.threads);
  if (call === null) return { threads: stacks.threads, ...limit, mpiCall: null };
  let args: NonNullable<RankSnapshot['mpiCall']>['args'] = null;
  if (
    raw &&
    (raw.peer !== null || raw.tag !== null || raw.count !== null || raw.root !== null || raw.comm !== null)
  ) {
    const comm = raw.comm ? communicators.find((c) => c.id === raw.comm?.id) : undefined;
    // Negative ranks are MPI_ANY_SOURCE / MPI_PROC_NULL, -1 tags MPI_ANY_TAG: null.
    const local = raw.peer !== null && raw.peer >= 0 ? raw.peer : null;
    let global: number | null = null;
    if (local !== null && comm) {
      global = isWorld(comm) ? local : (comm.group?.[local] ?? null);
    }
    args = {
      peer: raw.peer === null ? null : { local, global },
      tag: raw.tag !== null && raw.tag >= 0 ? raw.tag : null,
      communicator: comm ? comm.id : null,
      count: raw.count !== null && raw.count >= 0 ? raw.count : null,
      // MPI_ROOT / MPI_PROC_NULL (intercommunicator collectives) are negative: not a rank.
      ...(raw.root !== null && raw.root >= 0 ? { root: raw.root } : {}),
      ...(raw.typeSize === null ? {} : { typeSize: raw.typeSize }),
    };
  }
  return { threads: stacks.threads, ...limit, mpiCall: { function: call.function, tid: call.tid, args } };
}

/** The rank's threadLimit when capThreads left threads out (a limit, not an error of the read). */
function threadLimitOf(stacks: UnwoundRank): Pick<RankSnapshot, 'threadLimit'> {
  if (stacks.omitted <= 0) return {};
  const listed = stacks.threads.length;
  const e = mqdError(
    'MQD_E_THREAD_LIMIT',
    `${listed + stacks.omitted} threads: the stacks of the first ${listed} are listed, ${stacks.omitted} more were stopped with them but not unwound`,
  );
  return { threadLimit: { code: e.code, message: e.message, omitted: stacks.omitted } };
}
