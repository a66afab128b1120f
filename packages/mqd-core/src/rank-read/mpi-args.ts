// The arguments of the MPI call a rank is inside: read from its frame while the rank is stopped
// (dest/source, tag, count, root, the datatype's size, the operation, the communicator handle),
// then matched to the walk's communicators after the resume (the peer's world rank, the
// communicator's id).
import {
  type Communicator,
  findMpiCall,
  foldMpiName,
  isWorld,
  type MpiFrame,
  type MqdError,
  mqdError,
  peerGlobalRank,
  type RankSnapshot,
  ROOTED_COLLECTIVES,
  SIGNED_COLLECTIVES,
} from '@mqd/model';
import type { ProcessImage } from '../inferior/process-image.js';
import type { Unwinder, UnwoundRank } from '../inferior/unwind.js';
import type { LibraryQuirks, RankMemory } from '../mqs/libraries/library.js';
import { HANDLE_READERS } from './call-handles.js';

/** An MPI call's arguments as read in the stop, before they are matched to the communicators. */
export interface RawMpiArgs {
  readonly call: MpiFrame;
  readonly peer: number | null;
  readonly tag: number | null;
  readonly count: number | null;
  /** A rooted collective's root argument. */
  readonly root: number | null;
  /** Bytes of one element of the datatype argument, where its handle says (call-handles.ts). */
  readonly typeSize: number | null;
  /** A reduction's predefined operation ("MPI_SUM"), where its handle says. */
  readonly op: string | null;
  readonly comm: { kind: 'id'; id: string } | null;
}

/**
 * The arguments of the rank's MPI call, read while it is stopped: dest/source, tag, count,
 * root, the datatype's size and the operation as the call's frame holds them (a collective's
 * from its own algorithm's frames inside it, where an optimised library lost them there), and
 * the communicator handle turned into what identifies it in the DLL's list
 * (LibraryQuirks.commIdOfHandle: Open MPI's c_index or context id, MPICH's MPIR_Comm address).
 * Best effort: null where unreadable.
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
  // What the public frame lost (an optimised library), from the frames inside the call.
  const name = foldMpiName(call.function);
  let inner: InnerFrame[] | null = null;
  // `own`: only the frames of this collective's own algorithm (".._allreduce_intra_.."): a
  // point-to-point helper inside it (MPIC_Recv, ompi_op_reduce) holds one segment's count.
  const innerWord = (names: readonly string[], own: boolean): bigint | null => {
    inner ??= innerArgs(unwinder, pid, image, mem, thread, call.frameIndex, physical);
    const algo = name.slice(4).toLowerCase();
    for (const f of inner) {
      if (own && !ownAlgorithm(f.fn, algo)) continue;
      for (const n of names) {
        const v = f.words.get(n);
        if (v !== undefined) return v;
      }
    }
    return null;
  };
  const word = (names: readonly string[]): bigint | null => {
    for (const n of names) {
      const v = words.get(n);
      if (v !== undefined) return v;
    }
    return null;
  };
  // The collectives whose arguments the analysis compares (call-facts.ts in @mqd/model).
  const collective = SIGNED_COLLECTIVES.has(name);
  const pick = (outer: readonly string[], inside: readonly string[]): bigint | null =>
    word(outer) ?? (collective ? innerWord(inside, true) : null);
  const root = word(['root']) ?? (ROOTED_COLLECTIVES.has(name) ? innerWord(['root'], false) : null);
  const count = int(['count']) ?? i32(collective ? innerWord(['count'], true) : null);
  const reader = HANDLE_READERS[quirks.library];
  const datatype = pick(['datatype'], ['datatype', 'dtype']);
  const op = pick(['op'], ['op']);
  return {
    call,
    peer: int(['dest', 'source', 'src']),
    tag: int(['tag']),
    count,
    root: i32(root),
    typeSize: datatype === null ? null : reader.typeSize(mem, datatype),
    op: op === null ? null : reader.opName(mem, op),
    comm,
  };
}

function i32(v: bigint | null): number | null {
  return v === null ? null : Number(BigInt.asIntN(32, v));
}

/** A library frame inside the call is this collective's own algorithm: "allreduce" in its name, no helper. */
function ownAlgorithm(fn: string, algo: string): boolean {
  const f = fn.toLowerCase();
  if (!f.includes(algo) || /op_reduce|reduce_local|mpic_/.test(f)) return false;
  // "reduce" is also in every allreduce frame.
  return algo !== 'reduce' || !f.includes('allreduce');
}

interface InnerFrame {
  readonly fn: string;
  readonly words: ReadonlyMap<string, bigint>;
}

/** Inner frames searched for arguments the public call's own frame lost (an optimised library). */
const MAX_INNER_FRAMES = 8;

/**
 * The argument words of the library's frames inside the call, nearest first: an optimised
 * MPI_Reduce keeps `root` only as an entry value, while the algorithm it calls (Open MPI's
 * ompi_coll_base_reduce_intra_*) still holds it in a parameter of the same name.
 */
function innerArgs(
  unwinder: Unwinder,
  pid: number,
  image: Pick<ProcessImage, 'dwarfAt'>,
  mem: RankMemory,
  thread: UnwoundRank['threads'][number],
  callIndex: number,
  callPhysical: number,
): InnerFrame[] {
  const out: InnerFrame[] = [];
  let physical = callPhysical;
  for (let i = callIndex - 1, seen = 0; i >= 0 && seen < MAX_INNER_FRAMES; i--) {
    const f = thread.frames[i];
    if (f === undefined) break;
    // Frame i's physical index: i+1's, less one unless i is inlined into i+1's frame.
    if (!f.inlined) physical--;
    if (f.inlined || f.function === null) continue;
    seen++;
    const words = unwinder.frameArgs(pid, thread.tid, physical, f.function, (a) => mem.u64(a), image.dwarfAt);
    out.push({ fn: f.function, words });
  }
  return out;
}

/** The snapshot fields for what the unwinder gave: threads and mpiCall, or stacksError. */
export function stackFieldsOf(
  stacks: UnwoundRank | MqdError,
  raw: RawMpiArgs | null,
  communicators: readonly Communicator[],
  selfRank: number,
): Pick<RankSnapshot, 'threads' | 'stacksError' | 'mpiCall' | 'threadLimit'> {
  if ('code' in stacks) return { stacksError: { code: stacks.code, message: stacks.message } };
  const limit = threadLimitOf(stacks);
  const call = findMpiCall(stacks.threads);
  if (call === null) return { threads: stacks.threads, ...limit, mpiCall: null };
  let args: NonNullable<RankSnapshot['mpiCall']>['args'] = null;
  if (
    raw &&
    (raw.peer !== null ||
      raw.tag !== null ||
      raw.count !== null ||
      raw.root !== null ||
      raw.typeSize !== null ||
      raw.op !== null ||
      raw.comm !== null)
  ) {
    const comm = raw.comm ? communicators.find((c) => c.id === raw.comm?.id) : undefined;
    // Negative ranks are MPI_ANY_SOURCE / MPI_PROC_NULL, -1 tags MPI_ANY_TAG: null.
    const local = raw.peer !== null && raw.peer >= 0 ? raw.peer : null;
    // The model's rule, as for a queue entry: on an intercommunicator a rank of the remote group.
    const worldSize = communicators.find(isWorld)?.size ?? 0;
    const global =
      local === null || !comm ? null : peerGlobalRank({ local, global: null }, comm, selfRank, worldSize);
    args = {
      peer: raw.peer === null ? null : { local, global },
      tag: raw.tag !== null && raw.tag >= 0 ? raw.tag : null,
      communicator: comm ? comm.id : null,
      count: raw.count !== null && raw.count >= 0 ? raw.count : null,
      // MPI_ROOT / MPI_PROC_NULL (intercommunicator collectives) are negative: not a rank.
      ...(raw.root !== null && raw.root >= 0 ? { root: raw.root } : {}),
      ...(raw.typeSize === null ? {} : { typeSize: raw.typeSize }),
      ...(raw.op === null ? {} : { op: raw.op }),
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
