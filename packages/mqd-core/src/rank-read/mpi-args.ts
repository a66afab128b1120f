// The arguments of the MPI call a rank is inside: read from its frame while the rank is stopped
// (dest/source, tag, count, the communicator handle), then matched to the walk's communicators
// after the resume (the peer's world rank, the communicator's id).
import {
  type Communicator,
  findMpiCall,
  isWorld,
  type MpiFrame,
  type MqdError,
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
  return { call, peer: int(['dest', 'source', 'src']), tag: int(['tag']), count: int(['count']), comm };
}

/** The snapshot fields for what the unwinder gave: threads and mpiCall, or stacksError. */
export function stackFieldsOf(
  stacks: UnwoundRank | MqdError,
  raw: RawMpiArgs | null,
  communicators: readonly Communicator[],
): Pick<RankSnapshot, 'threads' | 'stacksError' | 'mpiCall'> {
  if ('code' in stacks) return { stacksError: { code: stacks.code, message: stacks.message } };
  const call = findMpiCall(stacks.threads);
  if (call === null) return { threads: stacks.threads, mpiCall: null };
  let args: NonNullable<RankSnapshot['mpiCall']>['args'] = null;
  if (raw && (raw.peer !== null || raw.tag !== null || raw.count !== null || raw.comm !== null)) {
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
    };
  }
  return { threads: stacks.threads, mpiCall: { function: call.function, tid: call.tid, args } };
}
