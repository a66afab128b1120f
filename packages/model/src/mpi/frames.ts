// Which frames of a stack are MPI's: the one place that decides, for the unwinder (which public
// call a rank is inside), the analysis (the user's line that made the call), the Stacks and
// rank views (which rows to mark). Callers that hold only names pass `module: null`.
import type { Frame, RankSnapshot, ThreadStack } from '../snapshot-spec.js';
import { mixedFrames } from './python-frames.js';

/** The part of a frame these rules read: its function name and the path (or file name) of its module. */
export interface FrameName {
  readonly function: string | null;
  /** Path or bare file name of the frame's module; null when unknown (names only, or unmapped). */
  readonly module: string | null;
}

/** A public MPI entry point: MPI_X or its profiling twin PMPI_X (X starts with a capital). */
const PUBLIC_MPI = /^P?MPI_[A-Z][A-Za-z0-9_]*$/;

/**
 * MPICH 4's binding layer: PMPI_X checks its arguments and calls internal_X, often as a tail
 * call (MPICH 4.2.1's PMPI_Waitall jumps to internal_Waitall), so no PMPI_X frame is left on the
 * stack. An `internal_X` frame of the MPI library stands for MPI_X then.
 */
const MPICH_INTERNAL = /^internal_([A-Z][A-Za-z0-9_]*)$/;

/** Shared objects that are the MPI library itself (libmpi.so.40, libmpich.so.12, libmpi_mpifh.so). */
const MPI_LIBRARY = /(?:^|\/)lib(?:mpi|mpich)[^/]*\.so/;

/** The frame's name without a demangled argument list ("MPI_Recv(...)" -> "MPI_Recv"). */
function bareName(fn: string): string {
  const i = fn.indexOf('(');
  return i < 0 ? fn : fn.slice(0, i);
}

/** "PMPI_Ssend" and "MPI_Ssend" are the same call. */
export function foldMpiName(fn: string): string {
  return fn.startsWith('PMPI_') ? fn.slice(1) : fn;
}

/** `PMPI_Ssend` -> `MPI_Ssend`; null for anything that is not a public MPI entry point. */
export function publicMpiName(fn: string | null): string | null {
  if (fn === null) return null;
  const bare = bareName(fn);
  return PUBLIC_MPI.test(bare) ? foldMpiName(bare) : null;
}

/** `internal_Waitall` -> `MPI_Waitall` (MPICH 4's binding frames); null for any other name. */
export function mpichInternalName(fn: string | null): string | null {
  if (fn === null) return null;
  const m = MPICH_INTERNAL.exec(bareName(fn));
  return m === null ? null : `MPI_${m[1]}`;
}

/**
 * Library functions that stand for the public call that entered them, where that call's own
 * frame is gone: Open MPI's MPI_Finalize and MPI_Abort end in a tail call (PMPI_Finalize jumps to
 * ompi_mpi_finalize), so a rank blocked in MPI_Finalize shows only `ompi_mpi_finalize < main`.
 */
const LIBRARY_ENTRIES: ReadonlyMap<string, string> = new Map([
  ['ompi_mpi_finalize', 'MPI_Finalize'],
  ['ompi_mpi_abort', 'MPI_Abort'],
]);

/** `ompi_mpi_finalize` -> `MPI_Finalize` (see LIBRARY_ENTRIES); null for any other name. */
export function libraryEntryCall(fn: string | null): string | null {
  if (fn === null) return null;
  const bare = bareName(fn);
  const at = bare.indexOf('@');
  return LIBRARY_ENTRIES.get(at < 0 ? bare : bare.slice(0, at)) ?? null;
}

/** The module (a path or a bare file name) is the MPI library itself. */
export function isMpiLibraryModule(module: string | null): boolean {
  return module !== null && MPI_LIBRARY.test(module);
}

/**
 * The public MPI call a frame stands for, PMPI_ folded: an MPI_X/PMPI_X frame, or an MPICH
 * `internal_X` frame of the MPI library (or of an unknown module: a caller with names only).
 * An `internal_X` of another module (the user's program) is not MPI's. Null when neither.
 */
export function mpiCallOfFrame(f: FrameName): string | null {
  const pub = publicMpiName(f.function);
  if (pub !== null) return pub;
  if (f.module !== null && !isMpiLibraryModule(f.module)) return null;
  return mpichInternalName(f.function) ?? libraryEntryCall(f.function);
}

/** The frame is an MPI call's (see mpiCallOfFrame): the rows the views mark as MPI. */
export function isMpiFrame(f: FrameName): boolean {
  return mpiCallOfFrame(f) !== null;
}

/** The same, for a bare function name (a caller without modules: stack classes, search). */
export function isMpiFunction(fn: string | null): boolean {
  return mpiCallOfFrame({ function: fn, module: null }) !== null;
}

/**
 * The outermost MPI call frame of one stack: the call the user made (an MPI call inside another,
 * as MPI_Finalize's barrier, is the library's). `order` says how `frames` are stored: a snapshot's
 * ThreadStack innermost first, a stack class's names outermost first. Null when none.
 */
export function outermostMpiFrame(
  frames: readonly FrameName[],
  order: 'innermost-first' | 'outermost-first',
): { readonly index: number; readonly function: string } | null {
  const n = frames.length;
  for (let k = 0; k < n; k++) {
    const i = order === 'innermost-first' ? n - 1 - k : k;
    const f = frames[i];
    const name = f === undefined ? null : mpiCallOfFrame(f);
    if (name !== null) return { index: i, function: name };
  }
  return null;
}

/** Where the public MPI call is on a thread: the outermost MPI frame. */
export interface MpiFrame {
  readonly function: string;
  readonly tid: number;
  /** Index in ThreadStack.frames. */
  readonly frameIndex: number;
}

/** The main thread first, then the others; the outermost MPI frame of the first thread inside one. */
export function findMpiCall(threads: readonly ThreadStack[]): MpiFrame | null {
  const ordered = [...threads].sort((a, b) => Number(b.main) - Number(a.main));
  for (const t of ordered) {
    const at = outermostMpiFrame(t.frames, 'innermost-first');
    if (at !== null) return { function: at.function, tid: t.tid, frameIndex: at.index };
  }
  return null;
}

/**
 * Functions of the MPI library, its runtime and the C library: MPI_X/PMPI_X, MPICH's binding
 * layer (`internal_X`) and internals (MPIR_, MPID, MPIDI_, MPIDU_, MPII_, MPL_, MPIC_), Open MPI's
 * (ompi_, mca_, opal_, orte_, prte_), PMIx and PMI, UCX (ucp_, uct_, ucs_), and libc/pthread
 * frames where a rank waits (poll, futex, start routines). Names only where a user's function
 * is unlikely to share them: other libraries (libfabric, hwloc, libevent) go by their module.
 */
const RUNTIME_FUNCTION =
  /^(?:P?MPIX?_|internal_[A-Z]|MPIR_|MPID|MPIU_|MPII_|MPL_|MPIC_|MPIO_|ADIOI?_|ompi_|mca_|opal_|orte_|prte_|prrte_|pmix|PMIx_|PMI2?_|ucp_|uct_|ucs_|__libc_|__GI_|__pthread|pthread_|start_thread$|_start$|clone3?$|__clone|poll$|__poll|ppoll$|epoll_|select$|__select|nanosleep$|__nanosleep|clock_nanosleep|__clock_nanosleep|sched_yield$|__sched_yield|__vdso_|syscall$|__futex|futex|__lll_|usleep$|sleep$|__sleep|read$|__read|write$|__write|recv$|__recv|recvmsg$|sendmsg$)/;

/**
 * Shared objects of the MPI library and its runtime (with Open MPI's plugins, mca_FRAMEWORK_COMPONENT.so,
 * e.g. the PMIx progress thread of mca_pmix_pmix3x.so), the C and math libraries and the dynamic loader, and the
 * kernel's vDSO (MPICH's progress loop reads the clock there: `__vdso_clock_gettime`).
 */
const RUNTIME_MODULE =
  /^(?:libmpi(?:ch|cxx|fort|_mpifh|_usempi\w*)?|libmpich\w*|libpmpi|libopen-(?:pal|rte)|libopen-orted\w*|libpmix|libprrte|libpmi2?|libucp|libuct|libucs|libucm|libfabric|libpsm\w*|libhwloc|libevent\w*|libc|libm|libmvec|libgcc_s|libpthread|ld-linux[\w-]*|ld|linux-vdso|linux-gate|mca_\w+\.so)(?:[.-]|$)/;

function moduleBase(path: string): string {
  const i = path.lastIndexOf('/');
  return i < 0 ? path : path.slice(i + 1);
}

/**
 * The frame belongs to the MPI library, its runtime or the C library, not to the user's code:
 * its module is one of those libraries, or its function has one of their names (a static
 * build, or a frame without a module). The one rule the model uses to find the user's line.
 */
export function isRuntimeFrame(f: FrameName): boolean {
  if (f.module !== null && RUNTIME_MODULE.test(moduleBase(f.module))) return true;
  return f.function !== null && RUNTIME_FUNCTION.test(f.function);
}

/** Where in the user's code a rank is: a thread, the frame's depth in it (0 innermost) and the frame. */
export interface UserFrame {
  readonly tid: number;
  readonly index: number;
  readonly frame: Frame;
}

/**
 * The innermost frame outside the MPI and runtime libraries on the thread in the rank's MPI
 * call (its main thread when it is in none): the user's line that made the call. Null when the
 * stacks were not read or every frame is the runtime's.
 */
export function userFrame(r: RankSnapshot): UserFrame | null {
  const ts = r.threads;
  if (ts === undefined || ts.length === 0) return null;
  const tid = r.mpiCall?.tid;
  const t =
    (tid === undefined ? undefined : ts.find((x) => x.tid === tid)) ?? ts.find((x) => x.main) ?? ts[0];
  return t === undefined ? null : threadUserFrame(t);
}

/**
 * The innermost frame of one thread outside the MPI and runtime libraries; null when every frame
 * is theirs. In a CPython thread the Python frames stand in for the interpreter's (mixedFrames):
 * the user's frame is then a Python frame, at the index of its evaluation-loop frame.
 */
export function threadUserFrame(t: ThreadStack): UserFrame | null {
  const mixed = mixedFrames(t);
  for (let i = 0; i < mixed.frames.length; i++) {
    const f = mixed.frames[i];
    if (f !== undefined && !isRuntimeFrame(f) && (f.function !== null || f.file !== null)) {
      return { tid: t.tid, index: mixed.at[i] ?? i, frame: f };
    }
  }
  return null;
}
