// The debugger side of one MQD DLL, hosted in this process: loads the DLL, gives it the
// callback tables, keeps image and process infos through their lifecycles, and reads the
// communicators and three queues of a stopped process. Runs inside the reader child
// (reader-main.ts): a DLL that crashes or loops takes this process down, not the agent.

import {
  type Communicator,
  clipText,
  err,
  isWorld,
  type LengthUnit,
  lengthUnitOfLibrary,
  MAX_FRAMES_PER_THREAD,
  MAX_MISSING_FIELD_CHARS,
  MAX_PATH_CHARS,
  MAX_RENAMED_FIELD_CHARS,
  MAX_VERSION_CHARS,
  type MpiLibrary,
  type MqdError,
  mqdError,
  type Operation,
  ok,
  quoteName,
  type RankSnapshot,
  type Result,
  rankNotRead,
} from '@mqd/model';
import koffi from 'koffi';
import type { OpenedCore } from '../inferior/core-image.js';
import type { DebugFileRegistry, TypeRef } from '../inferior/debug-file.js';
import { EM_X86_64, ET_DYN, hostMachine, readElfInfo } from '../inferior/elf.js';
import { procStartTime } from '../inferior/proc.js';
import { ProcessImage } from '../inferior/process-image.js';
import { HotPath, NATIVE_CALLBACKS, type NativeCallback } from '../inferior/shim.js';
import { stopProcess } from '../inferior/stopper.js';
import { type TypeSizes, targetTypeSizes } from '../inferior/type-sizes.js';
import { findMpiCall, type MpiFrame, Unwinder, type UnwoundRank } from '../inferior/unwind.js';
import { permanentAlloc } from '../native/alloc.js';
import { dlopen, dlsymAddress, RTLD_NOW } from '../native/libc.js';
import {
  assembleOpenMp,
  type OmpdProcess,
  type OmpdReadOptions,
  OmpdSession,
  type RawOpenMp,
} from '../ompd/session.js';
import {
  type CommunicatorHeader,
  decodeCommunicator,
  decodeGroup,
  decodeOperations,
  deriveGlobalRanks,
  isWorldHeader,
} from './decode.js';
import { FieldGaps, unexpectedLengthUnit } from './dll-fields.js';
import { fortranHandles } from './fortran-handles.js';
import { libraryOfDll } from './library.js';
import {
  BASIC_CALLBACKS,
  CALLBACK_FAILURE,
  CALLBACK_FAILURE_TEXT,
  COMMUNICATOR,
  ENTRY_POINTS,
  type EntryName,
  IMAGE_CALLBACKS,
  MQS_INTERFACE_COMPATIBILITY,
  mqs_end_of_list,
  mqs_no_information,
  mqs_ok,
  mqs_op_class,
  OPTIONAL_ENTRY_POINTS,
  PENDING_OPERATION,
  PROCESS_CALLBACKS,
  proto,
  WALK_OUT_OF_MEMORY,
} from './mqs-spec.js';

/**
 * `MQD_DEBUG=dll` (a comma list, read once, here; readers inherit the agent's environment): the
 * DLL's dprints made while a rank is read go into that rank as `dllLog`. Always kept, the last
 * 200, in `MqsSession.dprints`.
 */
const DEBUG_DLL = (process.env['MQD_DEBUG'] ?? '').split(',').includes('dll');

type Fn = (...args: unknown[]) => unknown;
type KoffiLib = ReturnType<typeof koffi.load>;

export interface SessionOptions {
  readonly registry: DebugFileRegistry;
  readonly readBudgetBytes: number;
  readonly stopTimeoutMs: number;
  /** Hook for tests of the kill -9 guarantee: called while a rank is stopped. */
  readonly whileStopped?: (pid: number) => void;
}

/** What one live read of a rank includes. */
export interface RankReadOptions {
  /** Unwind every thread (default true); the OpenMP threads are read with the stacks. */
  readonly stacks?: boolean;
  /** The site's policy and the supervisor's hook for the rank's OMPD library. */
  readonly ompd?: OmpdReadOptions;
  /**
   * The most bytes of snapshot JSON the rank may take (an agent's per-message cap): the walk
   * stops as soon as the queue entries walked would need more at MIN_OPERATION_JSON_BYTES
   * each, and the rank is an error MQD_E_TOO_LARGE, so nothing that large is decoded, sent
   * or serialised. Absent: only the read budget (readBudgetBytes) limits the walk.
   */
  readonly maxRankBytes?: number;
}

/**
 * The fewest bytes one queue entry takes in a snapshot's JSON (every field at its shortest, and
 * the comma after it): a rank whose entries alone pass its byte budget at this size is over it.
 */
export const MIN_OPERATION_JSON_BYTES =
  JSON.stringify({
    status: 'pending',
    peer: { local: null, global: null },
    tag: null,
    length: 0,
    actual: null,
    extraText: [],
    buffer: '0x0',
    systemBuffer: false,
  } satisfies Operation).length + 1;

/** Queue entries a rank may have under a byte budget (the walk stops one past it). */
function entryBudget(maxRankBytes: number | undefined): number {
  return maxRankBytes === undefined
    ? Number.POSITIVE_INFINITY
    : Math.floor(maxRankBytes / MIN_OPERATION_JSON_BYTES);
}

export interface RankRef {
  readonly pid: number;
  readonly rank: number;
  readonly host: string;
}

/** A rank read from a core file (issue 17); `pid` is a negative key standing for the core. */
export interface CoreRankRef extends RankRef {
  readonly core: OpenedCore;
}

interface MqsProcess {
  readonly key: number;
  readonly imageKey: number;
  readonly pid: number;
  readonly startTime: string;
  rank: number;
  readonly image: ProcessImage;
  ready: boolean;
}

/**
 * One queue as walked in the stop: which of the stop's raw records are its (they stay in the
 * shim until the rank is resumed, `StopRecords`), decoded after the resume.
 */
type RawQueue =
  | {
      readonly kind: 'records';
      /** Index of its first record among the stop's. */
      readonly first: number;
      readonly count: number;
      readonly rc: number;
      /** Our diagnosis when the walk broke off on a failed callback (never shown to the DLL). */
      readonly why: string | null;
    }
  /** mqs_setup_operation_iterator said mqs_no_information: the library cannot show this queue. */
  | { readonly kind: 'unavailable'; readonly rc: number }
  /** mqs_setup_operation_iterator failed with any other code: a DLL error, not "unsupported". */
  | { readonly kind: 'error'; readonly error: MqdError };

interface RawCommunicator {
  readonly header: CommunicatorHeader;
  readonly group: number[] | null;
  /** An intercommunicator's remote group (null: not readable); undefined for an intracommunicator. */
  readonly remoteGroup: number[] | null | undefined;
  readonly queues: readonly (readonly [(typeof QUEUES)[number][0], RawQueue])[];
}

/** Every record the walks of one stop read, copied out of the shim after the resume. */
type StopRecords = Buffer;

/** The walk of one stop: the communicators read, and the DLL error that cut it short, if any. */
interface RawWalk {
  readonly comms: RawCommunicator[];
  readonly error: MqdError | null;
  /** The id the library gives MPI_COMM_WORLD in this process (null: not known). */
  readonly worldId: string | null;
  /** Each communicator's Fortran handle by id (fortran-handles.ts); empty for libraries it does not know. */
  readonly fortran: ReadonlyMap<string, number | null>;
}

const QUEUES = [
  ['sends', mqs_op_class.pending_sends],
  ['receives', mqs_op_class.pending_receives],
  ['unexpected', mqs_op_class.unexpected_messages],
] as const;

/**
 * A DLL's has_queues message is a printf format with at most one `%s` (the image or process
 * name) and no other token; `%%` is a literal percent sign. Anything else is left as written.
 */
export function substituteName(format: string, name: string): string {
  let used = false;
  return format.replace(/%(%|s)/g, (m, c: string) => {
    if (c === '%') return '%';
    if (used) return m;
    used = true;
    return name;
  });
}

function nativeString(s: string): unknown {
  // Cached per code for the session's life: the DLL may keep the pointer.
  const buf = permanentAlloc('char', Buffer.byteLength(s) + 1);
  koffi.encode(buf, 'char', s, Buffer.byteLength(s) + 1);
  return buf;
}

/** An MPI call's arguments as read in the stop, before they are matched to the communicators. */
interface RawMpiArgs {
  readonly call: MpiFrame;
  readonly peer: number | null;
  readonly tag: number | null;
  readonly count: number | null;
  readonly comm: { kind: 'id'; id: string } | null;
}

/** The snapshot fields for what the unwinder gave: threads and mpiCall, or stacksError. */
function stackFieldsOf(
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

export class MqsSession {
  readonly library: MpiLibrary;
  readonly version: string;
  private readonly fns: Record<EntryName, Fn>;
  private readonly getCommGroup: Fn | null;
  private readonly keep: unknown[] = [];
  private readonly processes = new Map<number, MqsProcess>();
  private readonly byPid = new Map<number, MqsProcess>();
  private readonly byImage = new Map<number, MqsProcess>();
  private readonly types = new Map<number, TypeRef>();
  private readonly typeKeys = new Map<string, number>();
  /** The name each type key was found by (mqs_find_type), for fieldGaps. */
  private readonly typeNames = new Map<number, string>();
  /** Fields the DLL asked for that the library lacks (dll-fields.ts). */
  private readonly fieldGaps = new FieldGaps();
  /** Queues this DLL walks from a list that holds the newest entry first (NEWEST_FIRST_LISTS). */
  private readonly newestFirst = new Set<'sends' | 'receives' | 'unexpected'>();
  private readonly errorStrings = new Map<number, unknown>();
  /** The native hot path: process callbacks, memory reads, queue walks (shim.ts). */
  private readonly hot: HotPath;
  /** The DLL's mqs_next_operation, for walks run natively. */
  private readonly nextOperation: bigint;
  /** libdw unwinder for the stacks read in the same stop (created on first use). */
  private unwinder: Unwinder | null = null;
  /** The OMPD host for the OpenMP threads read in the same stop (created on first use, issue 15). */
  private ompdHost: OmpdSession | null = null;
  private readonly basicCb: unknown;
  private readonly imageCb: unknown;
  private readonly processCb: unknown;
  /** The DLL's mqs_dprints, the last 200 (MQD_DEBUG=dll also writes them to stderr). */
  readonly dprints: string[] = [];
  /**
   * Why our callbacks failed since the last DLL call began (find_symbol of what, a NULL
   * argument...): the DLL only got mqs_no_information; this is added to the DLL's error.
   */
  private callbackFailures: string[] = [];
  /** The dprints of the rank being read, when MQD_DEBUG=dll asks for them. */
  private rankLog: string[] | null = null;
  /** Target type sizes per process key (from its executable's ELF, inferior/type-sizes.ts). */
  private readonly typeSizes = new Map<number, TypeSizes>();
  /** Callbacks answered in JavaScript so far (the native ones are counted by the shim). */
  private readonly jsCounts: Record<string, number> = {};

  private constructor(
    readonly dllPath: string,
    lib: KoffiLib,
    dllHandle: unknown,
    hot: HotPath,
    private readonly opts: SessionOptions,
  ) {
    this.hot = hot;
    this.nextOperation = dlsymAddress(dllHandle, 'mqs_next_operation');
    if (this.nextOperation === 0n) throw new Error('mqs_next_operation not found');
    const fns: Partial<Record<EntryName, Fn>> = {};
    for (const [name, sig] of Object.entries(ENTRY_POINTS)) fns[name as EntryName] = lib.func(sig) as Fn;
    this.fns = fns as Record<EntryName, Fn>;
    let group: Fn | null = null;
    try {
      group = lib.func(OPTIONAL_ENTRY_POINTS.mqs_get_comm_group) as Fn;
    } catch {
      group = null; // optional entry point: MPICH's DLL has none
    }
    this.getCommGroup = group;
    this.version = String(this.fns.mqs_version_string() ?? '');
    this.library = libraryOfDll(dllPath, this.version);
    this.basicCb = this.table(BASIC_CALLBACKS, this.basicImpl());
    this.imageCb = this.table(IMAGE_CALLBACKS, this.imageImpl());
    this.processCb = this.table(PROCESS_CALLBACKS, this.processImpl());
    this.fns.mqs_setup_basic_callbacks(this.basicCb);
  }

  /** Vets and loads a DLL: ELF, this machine's architecture, compatibility level 2, width 8. */
  static open(dllPath: string, opts: SessionOptions): Result<MqsSession, MqdError> {
    const elf = readElfInfo(dllPath);
    if (!elf.ok) return elf;
    if (elf.value.machine !== hostMachine() || elf.value.class !== 64) {
      return err(
        mqdError(
          'MQD_E_DLL_WRONG_ARCH',
          `${dllPath} is ELF${elf.value.class} machine ${elf.value.machine}; this debugger is ELF64 machine ${EM_X86_64}`,
        ),
      );
    }
    if (elf.value.type !== ET_DYN)
      return err(mqdError('MQD_E_DLL_NOT_ELF', `${dllPath} is not a shared object`));
    const hot = HotPath.get();
    if (!hot.ok) return hot;
    let lib: KoffiLib;
    let handle: unknown;
    try {
      lib = koffi.load(dllPath);
      // The same file opened again gives koffi's handle back: for entry points' addresses.
      const h = dlopen(dllPath, RTLD_NOW);
      if (!('handle' in h)) throw new Error(h.error);
      handle = h.handle;
    } catch (e) {
      return err(mqdError('MQD_E_DLL_LOAD', `dlopen ${dllPath}: ${(e as Error).message}`));
    }
    let compat: number;
    let width: number;
    try {
      compat = lib.func(ENTRY_POINTS.mqs_version_compatibility)() as number;
      width = lib.func(ENTRY_POINTS.mqs_dll_taddr_width)() as number;
    } catch (e) {
      return err(mqdError('MQD_E_DLL_INCOMPATIBLE', `${dllPath} is not an MQD DLL: ${(e as Error).message}`));
    }
    if (compat !== MQS_INTERFACE_COMPATIBILITY) {
      return err(
        mqdError(
          'MQD_E_DLL_INCOMPATIBLE',
          `${dllPath} has compatibility level ${compat}, expected ${MQS_INTERFACE_COMPATIBILITY}`,
        ),
      );
    }
    if (width !== 8) {
      return err(
        mqdError(
          'MQD_E_DLL_WRONG_ARCH',
          `${dllPath} uses ${width}-byte target addresses; this debugger reads 8-byte ones`,
        ),
      );
    }
    try {
      return ok(new MqsSession(dllPath, lib, handle, hot.value, opts));
    } catch (e) {
      return err(
        mqdError('MQD_E_DLL_INCOMPATIBLE', `${dllPath} lacks an entry point: ${(e as Error).message}`),
      );
    }
  }

  /**
   * Which callbacks the DLL used, for conformance tests and diagnostics: this session's JS
   * callbacks plus the native ones (counted by the shim for the whole process; a reader hosts one
   * session).
   */
  get callbackCounts(): Record<string, number> {
    const out: Record<string, number> = { ...this.jsCounts };
    for (const [name, n] of Object.entries(this.hot.counts())) out[name] = (out[name] ?? 0) + n;
    return out;
  }

  /** Callbacks the DLL made into JavaScript so far. */
  jsCallbackCount(): number {
    return Object.values(this.jsCounts).reduce((a, b) => a + b, 0);
  }

  // ---- callback tables ------------------------------------------------------------------
  private table<K extends string>(names: readonly K[], impl: Partial<Record<K, Fn>>): unknown {
    const block = permanentAlloc('uintptr_t', names.length);
    const view = new BigUint64Array(koffi.view(block, 8 * names.length));
    names.forEach((n, i) => {
      const p = proto[n as keyof typeof proto];
      const f = impl[n];
      if (n in NATIVE_CALLBACKS) {
        view[i] = this.hot.addresses[n as NativeCallback];
        return;
      }
      if (n === 'malloc' || n === 'free') {
        // libc's own malloc/free: no JS round trip per allocation (koffi trap 3, README.md).
        const libc = dlopen('libc.so.6', RTLD_NOW);
        view[i] = 'handle' in libc ? dlsymAddress(libc.handle, n) : 0n;
        return;
      }
      if (!f) throw new Error(`no implementation of callback ${n}`);
      const counted = (...args: unknown[]) => {
        this.jsCounts[n] = (this.jsCounts[n] ?? 0) + 1;
        return f(...args);
      };
      const ptr = koffi.register(counted, koffi.pointer(p));
      this.keep.push(ptr, counted);
      view[i] = BigInt(koffi.address(ptr));
    });
    this.keep.push(block);
    return block;
  }

  private guard<T>(fallback: T, f: () => T): T {
    try {
      return f();
    } catch (e) {
      // A callback must never throw into C (koffi trap 2, README.md).
      this.dprints.push(`callback error: ${(e as Error).message}`);
      this.noteFailure(`internal error in a callback: ${(e as Error).message}`);
      return fallback;
    }
  }

  /** Keeps our reason for a failed callback (bounded), and answers the DLL mqs_no_information. */
  private noteFailure(why: string): number {
    if (this.callbackFailures.length < 8) this.callbackFailures.push(why);
    return CALLBACK_FAILURE;
  }

  private basicImpl(): Partial<Record<(typeof BASIC_CALLBACKS)[number], Fn>> {
    const unused: Fn = () => 0;
    return {
      malloc: unused,
      free: unused,
      dprints: (text) =>
        this.guard(undefined, () => {
          const line = String(text).replace(/\n$/, '').slice(0, 4096);
          if (this.dprints.length >= 200) this.dprints.shift();
          this.dprints.push(line);
          if (this.rankLog && this.rankLog.length < 200) this.rankLog.push(line);
        }),
      errorstring: (code) =>
        this.guard(0n, () => {
          const c = Number(code);
          let s = this.errorStrings.get(c);
          if (!s) {
            // Our callbacks return only mqs_no_information; any other code is not ours.
            s = nativeString(
              c === CALLBACK_FAILURE
                ? CALLBACK_FAILURE_TEXT
                : `debugger: ${c} is not a code of this debugger (its callbacks fail only with mqs_no_information)`,
            );
            this.errorStrings.set(c, s);
          }
          return BigInt(koffi.address(s));
        }),
      // put/get_image_info and put/get_process_info: kept natively (shim.ts)
    };
  }

  private imageImpl(): Record<(typeof IMAGE_CALLBACKS)[number], Fn> {
    return {
      get_type_sizes: (proc, sizes) =>
        this.guard(undefined, () => {
          if (!sizes) return;
          // The target's, from its ELF (setUp refused any target they are not LP64 for).
          const got = this.typeSizes.get(Number(proc));
          if (!got) {
            this.noteFailure(`get_type_sizes for an unknown process handle ${String(proc)}`);
            return;
          }
          // Only the 5 standard fields: Open MPI's 7-int struct gets the rest from the target.
          new Int32Array(koffi.view(sizes, 20)).set(got);
        }),
      find_function: (image, name, _lang, addr) =>
        this.guard(CALLBACK_FAILURE, () => {
          const t = this.byImage.get(Number(image));
          if (!t) return this.noteFailure(`find_function: unknown image handle ${String(image)}`);
          if (typeof name !== 'string') return this.noteFailure('find_function: NULL name from the DLL');
          const a = t.image.hintFunction(name);
          if (a === null) return this.noteFailure(`find_function: no function ${name} in ${t.image.exe}`);
          t.image.preferModuleOf(a);
          if (addr) koffi.encode(addr, 'uint64_t', a);
          return mqs_ok;
        }),
      find_symbol: (image, name, addr) =>
        this.guard(CALLBACK_FAILURE, () => {
          const t = this.byImage.get(Number(image));
          if (!t) return this.noteFailure(`find_symbol: unknown image handle ${String(image)}`);
          if (typeof name !== 'string') return this.noteFailure('find_symbol: NULL name from the DLL');
          const s = t.image.findSymbol(name);
          if (!s) return this.noteFailure(`find_symbol: no symbol ${name} in pid ${t.pid}`);
          const newest = NEWEST_FIRST_LISTS.get(name);
          if (newest) this.newestFirst.add(newest);
          if (addr) koffi.encode(addr, 'uint64_t', s.address);
          return mqs_ok;
        }),
      find_type: (image, name, _lang) =>
        this.guard(0, () => {
          const t = this.byImage.get(Number(image));
          if (!t || typeof name !== 'string') return 0;
          const ty = t.image.findType(name);
          if (!ty) return 0;
          const k = `${ty.file.buildId ?? ty.file.path}:${String(ty.dwarf === null ? 0 : koffi.address(ty.dwarf))}:${ty.offset}`;
          let key = this.typeKeys.get(k);
          if (key === undefined) {
            key = this.types.size + 1;
            this.typeKeys.set(k, key);
            this.types.set(key, ty);
            this.typeNames.set(key, name);
          }
          return key;
        }),
      field_offset: (type, field) =>
        this.guard(-1, () => {
          const ty = this.types.get(Number(type));
          if (!ty || typeof field !== 'string') return -1;
          const off = ty.file.fieldOffset(ty, field);
          if (off >= 0) return off;
          return this.fieldGaps.answer(this.typeNames.get(Number(type)) ?? '?', field, (path) =>
            ty.file.fieldOffset(ty, path),
          );
        }),
      sizeof: (type) =>
        this.guard(-1, () => {
          const ty = this.types.get(Number(type));
          return ty ? ty.file.sizeOf(ty) : -1;
        }),
    };
  }

  private processImpl(): Partial<Record<(typeof PROCESS_CALLBACKS)[number], Fn>> {
    // get_global_rank, get_image, fetch_data, target_to_host: all answered natively (shim.ts).
    return {};
  }

  // ---- DLL errors -------------------------------------------------------------------------
  /**
   * The DLL's own message for its code (mqs_dll_error_string), then our diagnosis of the
   * callbacks that failed under it (`why`, the session's notes, the reads that failed in this
   * stop of process `t`): the DLL saw only mqs_no_information.
   */
  private dllError(code: number, what: string, t?: MqsProcess, why?: string | null): MqdError {
    let text: string;
    try {
      text = String(this.fns.mqs_dll_error_string(code) ?? '');
    } catch (e) {
      text = `mqs_dll_error_string failed: ${(e as Error).message}`;
    }
    // The session's notes and the stop's reads belong to the call just made, only when `t` is given.
    const ours = [why ?? null, ...(t ? this.callbackFailures : []), t ? this.readDiagnosis(t) : null].filter(
      (x): x is string => x !== null && x !== '',
    );
    const tail = ours.length ? `; debugger: ${[...new Set(ours)].join('; ')}` : '';
    return mqdError('MQD_E_DLL_ERROR', `${what} returned ${code} (${text || 'no text'})${tail}`);
  }

  /** Our account of the reads that failed in this stop of `t` (the shim's kind and address). */
  private readDiagnosis(t: MqsProcess): string | null {
    const f = this.hot.readFailures(t.key);
    if (!f) return null;
    const n = f.count === 1 ? 'a read' : `${f.count} reads`;
    return `${n} of target memory failed (${f.kind ?? 'unreadable'}), the first at 0x${f.firstAddress.toString(16)}`;
  }

  // ---- processes ----------------------------------------------------------------------------
  private forget(t: MqsProcess): void {
    const processInfo = this.hot.info(t.key);
    const imageInfo = this.hot.info(t.imageKey);
    if (processInfo !== 0n) this.fns.mqs_destroy_process_info(processInfo);
    if (imageInfo !== 0n) this.fns.mqs_destroy_image_info(imageInfo);
    this.hot.drop(t.key);
    this.hot.drop(t.imageKey);
    this.typeSizes.delete(t.key);
    this.hot.endStop();
    this.processes.delete(t.key);
    this.byImage.delete(t.imageKey);
    this.byPid.delete(t.pid);
    this.unwinder?.drop(t.pid);
  }

  /** Drops processes that are not in `keep` (the job shrank or ended). */
  retain(keep: ReadonlySet<number>): void {
    for (const t of [...this.processes.values()]) if (!keep.has(t.pid)) this.forget(t);
  }

  close(): void {
    for (const t of [...this.processes.values()]) this.forget(t);
    this.unwinder?.dispose();
    this.unwinder = null;
    this.ompdHost?.close();
    this.ompdHost = null;
  }

  /** The OMPD host of this session (tests: outstanding OMPD blocks, callback counts). */
  get ompd(): OmpdSession {
    if (!this.ompdHost) {
      const host = new OmpdSession();
      // libompd's print_string goes where the DLL's dprints go (MQD_DEBUG=dll: the rank's dllLog).
      host.onPrint = (line) => {
        if (DEBUG_DLL && this.rankLog && this.rankLog.length < 200) this.rankLog.push(`ompd: ${line}`);
      };
      this.ompdHost = host;
    }
    return this.ompdHost;
  }

  /** The target process for a pid, set up (image + process lifecycles) on first use. */
  private target(r: RankRef): Result<MqsProcess, { kind: 'error' | 'no-queues'; error: MqdError }> {
    const start = procStartTime(r.pid);
    if (start === null)
      return err({ kind: 'error', error: mqdError('MQD_E_NO_SUCH_PID', `no process ${r.pid}`) });
    const old = this.byPid.get(r.pid);
    if (old && old.startTime === start && old.ready) {
      if (old.rank !== r.rank) {
        old.rank = r.rank;
        this.hot.set(old.key, old.pid, old.rank, old.imageKey, this.opts.readBudgetBytes);
      }
      return ok(old);
    }
    if (old) this.forget(old);
    const img = ProcessImage.load(r.pid, this.opts.registry);
    if (!img.ok) return err({ kind: 'error', error: img.error });
    if (!img.value.mpiLibrary()) {
      return err({
        kind: 'error',
        error: mqdError('MQD_E_NOT_MPI', `pid ${r.pid} (${img.value.exe}) maps no MPI library`),
      });
    }
    const t = this.register(r, start, img.value);
    const set = this.setUp(t);
    return set.ok ? ok(t) : set;
  }

  /** Slots in the hot path for a process and its image, before the DLL's lifecycles. */
  private register(r: RankRef, startTime: string, image: ProcessImage): MqsProcess {
    const key = this.hot.newKey();
    const imageKey = this.hot.newKey();
    const t: MqsProcess = { key, imageKey, pid: r.pid, startTime, rank: r.rank, image, ready: false };
    this.hot.set(key, r.pid, r.rank, imageKey, this.opts.readBudgetBytes);
    this.hot.set(imageKey, r.pid, r.rank, 0, 0);
    this.processes.set(key, t);
    this.byImage.set(imageKey, t);
    this.byPid.set(r.pid, t);
    return t;
  }

  /** The DLL's image and process lifecycles for a registered target; forgets it on failure. */
  private setUp(t: MqsProcess): Result<true, { kind: 'error' | 'no-queues'; error: MqdError }> {
    const { key, imageKey } = t;
    const exe = t.image.exe;
    // The DLL reads the target through these sizes: a target they would be wrong for is refused.
    const sizes = targetTypeSizes(exe);
    if (!sizes.ok) {
      this.forget(t);
      return err({ kind: 'error', error: sizes.error });
    }
    this.typeSizes.set(key, sizes.value);
    this.callbackFailures = [];
    // One image per address space: find_symbol answers must be relocated for this process.
    let rc = this.fns.mqs_setup_image(imageKey, this.imageCb) as number;
    if (rc !== mqs_ok) {
      const e = this.dllError(rc, 'mqs_setup_image');
      this.forget(t);
      return err({ kind: 'error', error: e });
    }
    const msg: (string | null)[] = [null];
    this.callbackFailures = [];
    rc = this.fns.mqs_image_has_queues(imageKey, msg) as number;
    if (rc !== mqs_ok) {
      const text = substituteName(msg[0] ?? '', exe);
      const missingType = /missing|type|not found|debug/i.test(text) || rc >= 100;
      this.forget(t);
      return err({
        kind: 'no-queues',
        error: mqdError(
          missingType ? 'MQD_E_NO_DEBUG_INFO' : 'MQD_E_NO_QUEUES',
          `the DLL found no queue support in ${exe}: ${text || this.dllError(rc, 'mqs_image_has_queues').message}`,
        ),
      });
    }
    this.hot.beginStop(key);
    this.callbackFailures = [];
    rc = this.fns.mqs_setup_process(key, this.processCb) as number;
    if (rc !== mqs_ok) {
      // Open MPI returns an error without storing process info: never call it again for this pid.
      const e = this.memoryError(t) ?? this.dllError(rc, 'mqs_setup_process', t);
      this.hot.endStop();
      this.forget(t);
      return err({ kind: 'error', error: e });
    }
    const pmsg: (string | null)[] = [null];
    this.callbackFailures = [];
    rc = this.fns.mqs_process_has_queues(key, pmsg) as number;
    if (rc !== mqs_ok) {
      // A printf format with at most one %s, for the process's name (the interface text).
      const text =
        pmsg[0] !== null && pmsg[0] !== undefined
          ? substituteName(pmsg[0], `${exe} (pid ${t.pid})`)
          : this.dllError(rc, 'mqs_process_has_queues', t).message;
      const me = this.memoryError(t);
      this.hot.endStop();
      this.forget(t);
      return err(
        me
          ? { kind: 'error', error: me }
          : { kind: 'no-queues', error: mqdError('MQD_E_NO_QUEUES', `pid ${t.pid}: ${text}`) },
      );
    }
    t.ready = true;
    this.hot.endStop();
    return ok(true);
  }

  /**
   * A rank from a core file: the same walk as a live stop, with memory served from the core
   * (no stop, nothing to resume), stacks and OpenMP threads from the core's threads. The core's
   * setup is forgotten afterwards: every core is read once.
   */
  snapshotCore(r: CoreRankRef, opts: RankReadOptions = {}): RankSnapshot {
    return this.withLog(() => this.readCore(r, opts));
  }

  private readCore(r: CoreRankRef, opts: RankReadOptions): RankSnapshot {
    const base = { rank: r.rank, pid: r.pid, host: r.host };
    const img = r.core.image;
    const changed = r.core.changedFiles();
    const vital = changed.find(
      (c) => c.path === img.exe || /\/lib(mpi|mpich|open-pal|open-rte|pmix)[^/]*\.so/.test(c.path),
    );
    if (vital) {
      return rankNotRead(
        base,
        mqdError(
          'MQD_E_CORE_BUILD_ID',
          `${r.core.path}: ${vital.path}${vital.onDisk !== vital.path ? ` (read from ${vital.onDisk})` : ''} has build-id ${vital.fileBuildId} here, the core records ${vital.coreBuildId}`,
        ),
      );
    }
    if (!img.mpiLibrary()) {
      return rankNotRead(
        base,
        mqdError('MQD_E_NOT_MPI', `the process of ${r.core.path} (${img.exe}) mapped no MPI library`),
      );
    }
    const old = this.byPid.get(r.pid);
    if (old) this.forget(old);
    const t = this.register(r, 'core', img);
    this.hot.setRegions(t.key, r.core.regions);
    const set = this.setUp(t);
    if (!set.ok) return { ...rankNotRead(base, set.error.error, set.error.kind), dll: this.dllInfo() };
    let raw: Result<RawWalk, MqdError>;
    let stacks: UnwoundRank | MqdError | null = null;
    let rawArgs: RawMpiArgs | null = null;
    let rawOmp: RawOpenMp | null = null;
    let records: StopRecords;
    try {
      this.hot.beginStop(t.key);
      raw = this.readCommunicators(t, opts.maxRankBytes);
      if (opts.stacks !== false) {
        stacks = this.readCoreStacks(r);
        if (!('code' in stacks)) rawArgs = this.readMpiArgs(t, stacks);
        // As live: the threads of the core's NT_PRSTATUS notes, each with its saved fs_base.
        rawOmp = this.readOpenMp(
          t,
          r.core.info.threads.map((x) => x.tid),
          // A caller that passes no OMPD options gets the strictest policy, never less than the site's.
          opts.ompd ?? { policy: 'root-owned' },
          {
            label: `the core ${r.core.path}`,
            threadPointers: r.core.threadPointers(),
            fileOnDisk: (p) => r.core.fileOnDisk(p),
          },
        );
      }
    } finally {
      records = this.hot.takeRecords(PENDING_OPERATION.size);
      this.hot.endStop();
      this.forget(t);
    }
    return this.rankOf(base, raw, records, stacks, rawArgs, 0, rawOmp);
  }

  private readCoreStacks(r: CoreRankRef): UnwoundRank | MqdError {
    try {
      this.unwinder ??= new Unwinder();
      const exe = r.core.exeOnDisk;
      return this.unwinder.unwindCore(r.pid, r.core.path, exe !== null ? { exe } : {});
    } catch (e) {
      return mqdError('MQD_E_NO_STACKS', `${r.core.path}: ${(e as Error).message}`);
    }
  }

  /**
   * Stops the rank, reads every communicator and queue and (unless `stacks` is false) unwinds
   * every thread in the same stop, resumes it. Never throws for expected failures.
   */
  snapshotRank(r: RankRef, opts: RankReadOptions = {}): RankSnapshot {
    return this.withLog(() => this.readRank(r, opts));
  }

  private readRank(r: RankRef, opts: RankReadOptions): RankSnapshot {
    const base = { rank: r.rank, pid: r.pid, host: r.host };
    const wantStacks = opts.stacks !== false;
    const tgt = this.target(r);
    if (!tgt.ok) {
      return { ...rankNotRead(base, tgt.error.error, tgt.error.kind), dll: this.dllInfo() };
    }
    const t = tgt.value;
    const stop = stopProcess(r.pid, this.opts.stopTimeoutMs);
    if (!stop.ok) return rankNotRead(base, stop.error);
    let raw: Result<RawWalk, MqdError>;
    let stacks: UnwoundRank | MqdError | null = null;
    let rawArgs: RawMpiArgs | null = null;
    let rawOmp: RawOpenMp | null = null;
    let paused: number;
    let records: StopRecords;
    try {
      this.hot.beginStop(t.key);
      this.opts.whileStopped?.(r.pid);
      raw = this.readCommunicators(t, opts.maxRankBytes);
      // One stop serves all three: stacks and OpenMP threads describe the same instant as the queues.
      if (wantStacks) {
        stacks = this.readStacks(t, stop.value.tids);
        if (!('code' in stacks)) rawArgs = this.readMpiArgs(t, stacks);
        rawOmp = this.readOpenMp(t, stop.value.tids, opts.ompd ?? {});
      }
    } finally {
      // Whatever happened, the rank runs again before anything else: even the copy of the
      // records out of the shim (16 MB for 40,000 operations) is made after the resume.
      paused = stop.value.resume();
      records = this.hot.takeRecords(PENDING_OPERATION.size);
      this.hot.endStop();
    }
    // Decoding happens after the resume: the rank pays only for the walk.
    return this.rankOf(base, raw, records, stacks, rawArgs, paused, rawOmp);
  }

  /** The rank's OpenMP threads through its runtime's OMPD library, in the stop or from a core (issue 15). */
  private readOpenMp(
    t: MqsProcess,
    tids: readonly number[],
    opts: OmpdReadOptions,
    core: Pick<OmpdProcess, 'label' | 'threadPointers' | 'fileOnDisk'> = {},
  ): RawOpenMp {
    const sizes = this.typeSizes.get(t.key);
    try {
      return this.ompd.read(
        {
          ...core,
          pid: t.pid,
          tids,
          image: t.image,
          memKey: t.key,
          hot: this.hot,
          // Read once per process when it was set up: not the executable's header again per stop.
          ...(sizes !== undefined ? { typeSizes: sizes } : {}),
        },
        opts,
      );
    } catch (e) {
      return {
        kind: 'error',
        error: mqdError(
          'MQD_E_INTERNAL',
          `reading OpenMP of ${core.label ?? `pid ${t.pid}`}: ${(e as Error).message}`,
        ),
      };
    }
  }

  /**
   * The rank's snapshot from what one read gave (a stop, or a core): the walk decoded, the
   * stacks and the MPI call beside the queues, the DLL that read it.
   */
  private rankOf(
    base: { rank: number; pid: number; host: string },
    raw: Result<RawWalk, MqdError>,
    records: StopRecords,
    stacks: UnwoundRank | MqdError | null,
    rawArgs: RawMpiArgs | null,
    paused: number,
    rawOmp: RawOpenMp | null = null,
  ): RankSnapshot {
    const comms = raw.ok ? ok(this.assemble(raw.value, records)) : raw;
    const omp = rawOmp === null ? {} : assembleOpenMp(rawOmp);
    const stackFields = {
      ...(stacks === null ? {} : stackFieldsOf(stacks, rawArgs, comms.ok ? comms.value.communicators : [])),
      ...omp,
    };
    if (stackFields.threads && omp.openmp) {
      // The stacks' threads carry their OpenMP state (joined by tid).
      const byTid = new Map(omp.openmp.threads.map((x) => [x.tid, x.state]));
      stackFields.threads = stackFields.threads.map((x) => {
        const state = byTid.get(x.tid);
        return state === undefined ? x : { ...x, ompState: state };
      });
    }
    if (!comms.ok) {
      return { ...rankNotRead(base, comms.error, 'error', paused), ...stackFields, dll: this.dllInfo() };
    }
    const { communicators, walkError } = comms.value;
    return {
      ...base,
      state: walkError ? { kind: 'error', ...walkError } : { kind: 'ok' },
      pausedMicros: paused,
      communicators,
      ...stackFields,
      dll: this.dllInfo(),
    };
  }

  /**
   * The arguments of the rank's MPI call, read while it is stopped: dest/source, tag, count as
   * the call's frame holds them, and the communicator handle turned into what identifies it in
   * the DLL's list (Open MPI: c_index (5.x) or the context id (4.x) read from the
   * ompi_communicator_t; MPICH: the MPIR_Comm address of a builtin or direct handle). Best
   * effort: null where unreadable.
   */
  private readMpiArgs(t: MqsProcess, stacks: UnwoundRank): RawMpiArgs | null {
    const call = findMpiCall(stacks.threads);
    if (call === null || !this.unwinder) return null;
    const thread = stacks.threads.find((x) => x.tid === call.tid);
    if (!thread) return null;
    // Physical frame index: inlined frames share their caller's physical frame.
    let physical = 0;
    for (let i = 0; i < call.frameIndex; i++) if (!thread.frames[i]?.inlined) physical++;
    const fn = thread.frames[call.frameIndex]?.function ?? call.function;
    const words = this.unwinder.frameArgs(
      t.pid,
      call.tid,
      physical,
      fn,
      (a) => this.readU64(t, a),
      t.image.dwarfAt,
    );
    const int = (names: string[]): number | null => {
      for (const n of names) {
        const v = words.get(n);
        if (v !== undefined) return Number(BigInt.asIntN(32, v));
      }
      return null;
    };
    const handle = words.get('comm') ?? null;
    let comm: RawMpiArgs['comm'] = null;
    if (handle !== null) {
      if (this.library === 'openmpi') {
        // The id the DLL lists: 4.x's uint32 c_contextid; 5.x's DLL reads c_index (its
        // c_contextid is a 16-byte extended id whose first word, cid_base, is 0 for every
        // communicator of a job without PMIx groups).
        const ty = t.image.findType('ompi_communicator_t');
        const index = ty ? ty.file.fieldOffset(ty, 'c_index') : -1;
        const off = index >= 0 ? index : ty ? ty.file.fieldOffset(ty, 'c_contextid') : -1;
        const word = off >= 0 ? this.readU64(t, handle + BigInt(off)) : null;
        if (word !== null) comm = { kind: 'id', id: String(Number(BigInt.asUintN(32, word))) };
      } else if (this.library === 'mpich') {
        // MPICH handles: kind in bits 30-31 (1 builtin, 2 direct), index in the low 26 bits.
        const h = Number(BigInt.asUintN(32, handle));
        const kind = h >>> 30;
        const table = kind === 1 ? 'MPIR_Comm_builtin' : kind === 2 ? 'MPIR_Comm_direct' : null;
        const sym = table ? t.image.findSymbol(table) : null;
        const ty = t.image.findType('MPIR_Comm');
        const size = ty ? ty.file.sizeOf(ty) : -1;
        if (sym && size > 0) {
          const addr = sym.address + BigInt((h & 0x3ffffff) * size);
          comm = { kind: 'id', id: `0x${addr.toString(16)}` };
        }
      }
    }
    return { call, peer: int(['dest', 'source', 'src']), tag: int(['tag']), count: int(['count']), comm };
  }

  private readStacks(t: MqsProcess, tids: readonly number[]): UnwoundRank | MqdError {
    try {
      this.unwinder ??= new Unwinder();
      return this.unwinder.unwind(t.pid, tids, MAX_FRAMES_PER_THREAD, t.image.dwarfAt);
    } catch (e) {
      return mqdError('MQD_E_NO_STACKS', `pid ${t.pid}: ${(e as Error).message}`);
    }
  }

  private readU64(t: MqsProcess, addr: bigint): bigint | null {
    const b = new Uint8Array(8);
    return this.hot.read(t.key, addr, 8, b) ? new DataView(b.buffer).getBigUint64(0, true) : null;
  }

  /**
   * The walk, while the rank is stopped: every communicator's record and group, and each queue's
   * raw records (the DLL's mqs_next_operation run in C until it stops). Nothing is decoded here.
   * A DLL error cuts the walk short and is kept (with what was read before it): the rank is then
   * an error carrying the DLL's message, never "ok" with fewer communicators.
   */
  private readCommunicators(t: MqsProcess, maxRankBytes?: number): Result<RawWalk, MqdError> {
    const f = this.fns;
    const maxEntries = entryBudget(maxRankBytes);
    let walked = 0;
    this.callbackFailures = [];
    const worldId = this.worldId(t);
    let rc = f.mqs_update_communicator_list(t.key) as number;
    if (rc !== mqs_ok)
      return err(this.memoryError(t) ?? this.dllError(rc, 'mqs_update_communicator_list', t));
    rc = f.mqs_setup_communicator_iterator(t.key) as number;
    if (rc === mqs_end_of_list) {
      // No communicator yet (before MPI_Init completes), unless the process vanished under us.
      const me = this.memoryError(t);
      return me ? err(me) : ok({ comms: [], error: null, worldId, fortran: new Map() });
    }
    if (rc !== mqs_ok)
      return err(this.memoryError(t) ?? this.dllError(rc, 'mqs_setup_communicator_iterator', t));
    // JS memory handed to the DLL for the length of each call: nothing native to free.
    const commBytes = new Uint8Array(COMMUNICATOR.size);
    const out: RawCommunicator[] = [];
    const stop = (e: MqdError): Result<RawWalk, MqdError> =>
      ok({ comms: out, error: e, worldId, fortran: this.fortranOf(t, out) });
    for (let guard = 0; guard < 1_000_000; guard++) {
      commBytes.fill(0);
      this.callbackFailures = [];
      rc = f.mqs_get_communicator(t.key, commBytes) as number;
      if (rc !== mqs_ok) {
        const me = this.memoryError(t);
        if (me) return err(me);
        return stop(this.dllError(rc, `mqs_get_communicator (communicator ${out.length + 1})`, t));
      }
      const header = decodeCommunicator(commBytes);
      if (!header.isNull) {
        let group: number[] | null = null;
        if (this.getCommGroup && header.size > 0 && header.size < 1 << 24) {
          const g = new Int32Array(header.size);
          // Optional: mqs_no_information or an error leaves the group unknown (null).
          if ((this.getCommGroup(t.key, g) as number) === mqs_ok) group = decodeGroup(g);
        }
        // The interface has no notion of intercommunicators: read the library's own flag.
        const remoteGroup = this.remoteGroupOf(t, header.id);
        const queues: [(typeof QUEUES)[number][0], RawQueue][] = [];
        for (const [q, cls] of QUEUES) {
          this.callbackFailures = [];
          rc = f.mqs_setup_operation_iterator(t.key, cls) as number;
          if (rc !== mqs_ok) {
            const me = this.memoryError(t);
            if (me) return err(me);
            // mqs_no_information: the library cannot show this queue. Any other code is an error.
            queues.push([
              q,
              rc === mqs_no_information
                ? { kind: 'unavailable', rc }
                : {
                    kind: 'error',
                    error: this.dllError(
                      rc,
                      `mqs_setup_operation_iterator(${q}) on communicator '${header.name}'`,
                      t,
                    ),
                  },
            ]);
            continue;
          }
          const failedBefore = this.hot.readFailures(t.key)?.count ?? 0;
          // One entry past the budget at most: reading it proves the rank is over.
          const walk = this.hot.walkOps(
            this.nextOperation,
            t.key,
            Math.min(10_000_000, maxEntries - walked + 1),
          );
          walked += walk.count;
          const me = this.memoryError(t);
          if (me) return err(me);
          if (walked > maxEntries) {
            return err(
              mqdError(
                'MQD_E_TOO_LARGE',
                `rank ${t.rank} (pid ${t.pid}) has more queue entries than its ${maxRankBytes}-byte budget can hold: the walk stopped at ${walked} entries (${q} on communicator ${quoteName(header.name)}), over ${maxEntries} at ${MIN_OPERATION_JSON_BYTES} bytes or more each (the budget is the aggregator's --max-message-bytes)`,
              ),
            );
          }
          const failed = this.hot.readFailures(t.key);
          const why =
            walk.rc === mqs_end_of_list || walk.rc === mqs_ok
              ? null
              : [
                  ...this.callbackFailures,
                  failed && failed.count > failedBefore ? this.readDiagnosis(t) : null,
                ]
                  .filter((x) => x !== null)
                  .join('; ');
          queues.push([q, { kind: 'records', first: walk.first, count: walk.count, rc: walk.rc, why }]);
        }
        out.push({ header, group, remoteGroup, queues });
      }
      this.callbackFailures = [];
      rc = f.mqs_next_communicator(t.key) as number;
      if (rc === mqs_end_of_list) break;
      if (rc !== mqs_ok) {
        const me = this.memoryError(t);
        if (me) return err(me);
        return stop(this.dllError(rc, `mqs_next_communicator (after communicator '${header.name}')`, t));
      }
    }
    return ok({ comms: out, error: null, worldId, fortran: this.fortranOf(t, out) });
  }

  /** The communicators' Fortran handles, read in the same stop as the walk (issue 14). */
  private fortranOf(t: MqsProcess, comms: readonly RawCommunicator[]): ReadonlyMap<string, number | null> {
    if (this.library !== 'openmpi' && this.library !== 'mpich') return new Map();
    const read = (addr: bigint, len: number): Uint8Array | null => {
      const b = new Uint8Array(len);
      return this.hot.read(t.key, addr, len, b) ? b : null;
    };
    return fortranHandles(
      this.library,
      t.image,
      read,
      comms.map((c) => c.header.id),
    );
  }

  private readI32(t: MqsProcess, addr: bigint): number | null {
    const b = new Uint8Array(4);
    return this.hot.read(t.key, addr, 4, b) ? new DataView(b.buffer).getInt32(0, true) : null;
  }

  /** Offset of `field` in the target's type `type` (-1: no such type or field). */
  private offsetOf(t: MqsProcess, type: string, field: string): number {
    const ty = t.image.findType(type);
    return ty ? ty.file.fieldOffset(ty, field) : -1;
  }

  /**
   * Whether the communicator with this id is an intercommunicator, read from the library's own
   * structures (the mqs_* interface cannot say): undefined for an intracommunicator (or when the
   * library or its types are unknown), else the world ranks of its remote group (null when they
   * cannot be read). On an intercommunicator an operation's peer is a rank of the remote group;
   * the DLLs translate it through the local group (Open MPI: c_local_group), which is wrong.
   */
  private remoteGroupOf(t: MqsProcess, id: string): number[] | null | undefined {
    try {
      if (this.library === 'openmpi') return this.ompiRemoteGroup(t, id);
      if (this.library === 'mpich') return this.mpichRemoteGroup(t, id);
    } catch (e) {
      this.dprints.push(`debugger: reading the kind of communicator ${id}: ${(e as Error).message}`);
    }
    return undefined;
  }

  /** Open MPI: ompi_mpi_communicators.addr[cid], its c_flags & OMPI_COMM_INTER, c_remote_group. */
  private ompiRemoteGroup(t: MqsProcess, id: string): number[] | null | undefined {
    const OMPI_COMM_INTER = 0x1;
    if (!/^\d+$/.test(id)) return undefined;
    const list = t.image.findSymbol('ompi_mpi_communicators');
    const addrOff = this.offsetOf(t, 'opal_pointer_array_t', 'addr');
    const flagsOff = this.offsetOf(t, 'ompi_communicator_t', 'c_flags');
    const localOff = this.offsetOf(t, 'ompi_communicator_t', 'c_local_group');
    const remoteOff = this.offsetOf(t, 'ompi_communicator_t', 'c_remote_group');
    if (!list || addrOff < 0 || flagsOff < 0 || remoteOff < 0 || localOff < 0) return undefined;
    const slots = this.readU64(t, list.address + BigInt(addrOff));
    if (slots === null || slots === 0n) return undefined;
    const commAt = (cid: number) => this.readU64(t, slots + BigInt(8 * cid));
    const comm = commAt(Number(id));
    if (comm === null || comm === 0n) return undefined;
    const flags = this.readI32(t, comm + BigInt(flagsOff));
    if (flags === null || (flags & OMPI_COMM_INTER) === 0) return undefined;
    // World ranks by ompi_proc_t pointer: MPI_COMM_WORLD (cid 0)'s local group is the world.
    const procs = (group: bigint | null): bigint[] | null => {
      const countOff = this.offsetOf(t, 'ompi_group_t', 'grp_proc_count');
      const ptrsOff = this.offsetOf(t, 'ompi_group_t', 'grp_proc_pointers');
      if (group === null || group === 0n || countOff < 0 || ptrsOff < 0) return null;
      const n = this.readI32(t, group + BigInt(countOff));
      const ptrs = this.readU64(t, group + BigInt(ptrsOff));
      if (n === null || n < 0 || n > 1 << 24 || ptrs === null || ptrs === 0n) return null;
      const out: bigint[] = [];
      for (let i = 0; i < n; i++) {
        const p = this.readU64(t, ptrs + BigInt(8 * i));
        if (p === null) return null;
        out.push(p);
      }
      return out;
    };
    const world = commAt(0);
    const worldProcs = procs(world === null ? null : this.readU64(t, world + BigInt(localOff)));
    const remote = procs(this.readU64(t, comm + BigInt(remoteOff)));
    if (!worldProcs || !remote) return null;
    const index = new Map(worldProcs.map((p, i) => [p, i]));
    const ranks = remote.map((p) => index.get(p) ?? -1);
    return ranks.every((r) => r >= 0) ? ranks : null;
  }

  /** MPICH: the MPIR_Comm at the id's address, comm_kind, remote_group's lrank_to_lpid. */
  private mpichRemoteGroup(t: MqsProcess, id: string): number[] | null | undefined {
    const INTERCOMM = 1;
    if (!/^0x[0-9a-f]+$/.test(id)) return undefined;
    const comm = BigInt(id);
    const kindOff = this.offsetOf(t, 'MPIR_Comm', 'comm_kind');
    const remoteOff = this.offsetOf(t, 'MPIR_Comm', 'remote_group');
    if (kindOff < 0 || remoteOff < 0) return undefined;
    const kind = this.readI32(t, comm + BigInt(kindOff));
    if (kind !== INTERCOMM) return undefined;
    const group = this.readU64(t, comm + BigInt(remoteOff));
    // ch3 makes the remote MPIR_Group only when asked (MPI_Comm_remote_group): then the
    // virtual connections of the remote ranks, each with its rank in the process group. ch4 has
    // no VC table: the remote ranks are in the communicator's rank map.
    if (group === 0n) return this.mpichVcRanks(t, comm) ?? this.mpichCh4MapRanks(t, comm);
    const sizeOff = this.offsetOf(t, 'MPIR_Group', 'size');
    const mapOff = this.offsetOf(t, 'MPIR_Group', 'lrank_to_lpid');
    const pmap = t.image.findType('MPII_Group_pmap_t');
    const lpidOff = pmap ? pmap.file.fieldOffset(pmap, 'lpid') : -1;
    const stride = pmap ? pmap.file.sizeOf(pmap) : -1;
    if (group === null || group === 0n || sizeOff < 0 || mapOff < 0 || lpidOff < 0 || stride <= 0)
      return null;
    const n = this.readI32(t, group + BigInt(sizeOff));
    const map = this.readU64(t, group + BigInt(mapOff));
    if (n === null || n < 0 || n > 1 << 24 || map === null || map === 0n) return null;
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      // lpid: the process's index in MPI_COMM_WORLD for processes of the same job.
      const lpid = this.readU64(t, map + BigInt(i * stride + lpidOff));
      if (lpid === null || lpid > 0x7fffffffn) return null;
      out.push(Number(lpid));
    }
    return out;
  }

  /** MPICH ch3: comm->dev.vcrt->vcr_table[i]->pg_rank, the world rank of remote rank i. */
  private mpichVcRanks(t: MqsProcess, comm: bigint): number[] | null {
    const devOff = this.offsetOf(t, 'MPIR_Comm', 'dev');
    const vcrtOff = this.offsetOf(t, 'MPIDI_CH3I_comm_t', 'vcrt');
    const sizeOff = this.offsetOf(t, 'MPIDI_VCRT', 'size');
    const tableOff = this.offsetOf(t, 'MPIDI_VCRT', 'vcr_table');
    const rankOff = this.offsetOf(t, 'MPIDI_VC', 'pg_rank');
    if (devOff < 0 || vcrtOff < 0 || sizeOff < 0 || tableOff < 0 || rankOff < 0) return null;
    const vcrt = this.readU64(t, comm + BigInt(devOff + vcrtOff));
    if (vcrt === null || vcrt === 0n) return null;
    const n = this.readI32(t, vcrt + BigInt(sizeOff));
    if (n === null || n < 0 || n > 1 << 24) return null;
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const vc = this.readU64(t, vcrt + BigInt(tableOff + 8 * i));
      const r = vc === null || vc === 0n ? null : this.readI32(t, vc + BigInt(rankOff));
      if (r === null || r < 0) return null;
      out.push(r);
    }
    return out;
  }

  /**
   * MPICH ch4: comm->dev.ch4.map (MPIDI_rank_map_t), which on an intercommunicator maps each
   * remote rank to (avtid, lpid) as MPIDIU_comm_rank_to_pid does (src/mpid/ch4/src/ch4_proc.h).
   * lpid is the world rank for the processes of this job (address-vector table 0); a rank of
   * another table (a spawned or connected job) has no world rank here: null.
   */
  private mpichCh4MapRanks(t: MqsProcess, comm: bigint): number[] | null {
    // MPIDI_rank_map_mode (src/mpid/ch4/include/mpidpre.h, MPICH 4.0.2; the same in 4.2): the
    // DWARF gives the enumerators but DebugFile reads no enumerator values, so they are spelled here.
    const DIRECT = 0;
    const DIRECT_INTRA = 1;
    const OFFSET = 2;
    const OFFSET_INTRA = 3;
    const STRIDE = 4;
    const STRIDE_INTRA = 5;
    const STRIDE_BLOCK = 6;
    const STRIDE_BLOCK_INTRA = 7;
    const LUT = 8;
    const LUT_INTRA = 9;
    const MLUT = 10;
    const mapOff = this.offsetOf(t, 'MPIR_Comm', 'dev.ch4.map');
    const remoteSizeOff = this.offsetOf(t, 'MPIR_Comm', 'remote_size');
    const f = (field: string) => this.offsetOf(t, 'MPIDI_rank_map_t', field);
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
    const gpid = t.image.findType('MPIDI_gpid_t');
    const gpidAvtid = gpid ? gpid.file.fieldOffset(gpid, 'avtid') : -1;
    const gpidLpid = gpid ? gpid.file.fieldOffset(gpid, 'lpid') : -1;
    const gpidSize = gpid ? gpid.file.sizeOf(gpid) : -1;
    if (mapOff < 0 || remoteSizeOff < 0 || Object.values(off).some((o) => o < 0)) return null;
    const map = comm + BigInt(mapOff);
    const at = (o: number) => this.readI32(t, map + BigInt(o));
    const mode = at(off.mode);
    const avtid = at(off.avtid);
    const n = at(off.size);
    // The map of an intercommunicator covers its remote group.
    if (mode === null || avtid === null || n === null || n !== this.readI32(t, comm + BigInt(remoteSizeOff)))
      return null;
    if (n < 0 || n > 1 << 24) return null;
    const intra = [DIRECT_INTRA, OFFSET_INTRA, STRIDE_INTRA, STRIDE_BLOCK_INTRA, LUT_INTRA].includes(mode);
    // A non-_INTRA mode names its table; only table 0 holds this job's world.
    if (!intra && mode !== MLUT && avtid !== 0) return null;
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
      case DIRECT:
      case DIRECT_INTRA:
        return ranks((r) => r);
      case OFFSET:
      case OFFSET_INTRA: {
        const o = at(off.offset);
        return o === null ? null : ranks((r) => r + o);
      }
      case STRIDE:
      case STRIDE_INTRA: {
        const o = at(off.strideOffset);
        const stride = at(off.stride);
        return o === null || stride === null ? null : ranks((r) => r * stride + o);
      }
      case STRIDE_BLOCK:
      case STRIDE_BLOCK_INTRA: {
        const o = at(off.strideOffset);
        const stride = at(off.stride);
        const block = at(off.blocksize);
        if (o === null || stride === null || block === null || block <= 0) return null;
        return ranks((r) => Math.trunc(r / block) * (stride - block) + r + o);
      }
      case LUT:
      case LUT_INTRA: {
        const lpids = this.readU64(t, map + BigInt(off.lut));
        if (lpids === null || lpids === 0n) return null;
        return ranks((r) => this.readI32(t, lpids + BigInt(4 * r)));
      }
      case MLUT: {
        const gpids = this.readU64(t, map + BigInt(off.mlut));
        if (gpids === null || gpids === 0n || gpidAvtid < 0 || gpidLpid < 0 || gpidSize <= 0) return null;
        return ranks((r) => {
          const entry = gpids + BigInt(r * gpidSize);
          return this.readI32(t, entry + BigInt(gpidAvtid)) === 0
            ? this.readI32(t, entry + BigInt(gpidLpid))
            : null;
        });
      }
      default:
        // MPIDI_RANK_MAP_NONE or a mode this reader does not know.
        return null;
    }
  }

  /**
   * The id the library gives MPI_COMM_WORLD in this process: Open MPI's context id 0, MPICH's
   * MPIR_Comm_builtin[0] (its ids are MPIR_Comm addresses), 0 for any other library (ours).
   * Null when it cannot be known (MPICH without the symbol).
   */
  private worldId(t: MqsProcess): string | null {
    if (this.library === 'mpich') {
      const sym = t.image.findSymbol('MPIR_Comm_builtin');
      return sym ? `0x${sym.address.toString(16)}` : null;
    }
    return '0';
  }

  /** Turns the walk's raw records into the model's communicators (after the rank resumed). */
  private assemble(
    walk: RawWalk,
    records: StopRecords,
  ): {
    communicators: Communicator[];
    walkError: MqdError | null;
  } {
    let walkError: MqdError | null = null;
    const unexpectedUnit = this.unexpectedLengthUnit();
    const communicators = walk.comms.map(({ header, group, remoteGroup, queues }) => {
      const comm: Communicator = {
        id: header.id,
        name: header.name,
        size: header.size,
        localRank: header.localRank,
        group,
        sends: null,
        receives: null,
        unexpected: null,
        unavailable: {},
      };
      if (walk.worldId !== null) comm.world = isWorldHeader(header, group, walk.worldId);
      const fortran = walk.fortran.get(header.id);
      if (fortran !== undefined) comm.fortranHandle = fortran;
      if (remoteGroup !== undefined) comm.remoteGroup = remoteGroup;
      for (const [q, rq] of queues) {
        if (rq.kind === 'unavailable') {
          comm.unavailable[q] = mqdError(
            'MQD_E_QUEUE_UNSUPPORTED',
            `${this.libraryName()}'s DLL cannot show ${q === 'unexpected' ? 'unexpected messages' : `pending ${q}`} (mqs_setup_operation_iterator returned ${rq.rc})`,
          );
          continue;
        }
        if (rq.kind === 'error') {
          // Not "unsupported": the DLL failed. The queue is unknown and the rank says why.
          comm.unavailable[q] = rq.error;
          walkError ??= rq.error;
          continue;
        }
        if (rq.rc === WALK_OUT_OF_MEMORY) {
          walkError ??= mqdError(
            'MQD_E_INTERNAL',
            `the reader ran out of memory walking ${q} on communicator '${header.name}' after ${rq.count} entries`,
          );
        }
        const size = PENDING_OPERATION.size;
        const ops = decodeOperations(
          records.subarray(rq.first * size, (rq.first + rq.count) * size),
          rq.count,
          header.size,
        );
        // Entries counted in another unit than the snapshot's say so (Operation.lengthUnit).
        const unit = q === 'unexpected' ? unexpectedUnit : undefined;
        if (unit !== undefined) for (const op of ops) op.lengthUnit = unit;
        // MPICH's debugger lists are newest first; matching order is oldest first.
        if (this.newestFirst.has(q)) ops.reverse();
        comm[q] = ops;
        if (rq.rc !== mqs_end_of_list && rq.rc !== mqs_ok && rq.rc !== WALK_OUT_OF_MEMORY) {
          // The walk broke off (an unreadable pointer, a DLL error): what was read is kept,
          // and the rank says plainly that this queue is partial.
          walkError ??= this.dllError(
            rq.rc,
            `the walk of ${q} on communicator '${header.name}' broke off after ${rq.count} entries: mqs_next_operation`,
            undefined,
            rq.why,
          );
        }
      }
      return deriveGlobalRanks(comm);
    });
    // A walk cut short before all communicators were listed outranks a partial queue.
    return { communicators, walkError: walk.error ?? walkError };
  }

  private memoryError(t: MqsProcess): MqdError | null {
    switch (this.hot.failure(t.key)) {
      case 'budget':
        return mqdError(
          'MQD_E_READ_BUDGET',
          `more than ${this.opts.readBudgetBytes} bytes read from pid ${t.pid} in one stop`,
        );
      case 'gone':
        return mqdError('MQD_E_PID_EXITED', `pid ${t.pid} exited during the read`);
      case 'denied':
        return mqdError('MQD_E_PTRACE_DENIED', `cannot read the memory of pid ${t.pid}`);
      case 'missing':
        return mqdError(
          'MQD_E_CORE_MISSING_PAGES',
          `the core of rank ${t.rank} lacks memory the queues are in (a page the kernel did not dump, in no file found here)`,
        );
      default:
        return null; // unmapped reads end list walks; the DLL decides what they mean
    }
  }

  /**
   * The unit of this DLL's unexpected-message lengths when it differs from the snapshot's
   * (lengthUnitOfLibrary): MPICH ch4's are bytes (dll-fields.ts unexpectedLengthUnit, known from
   * the types the DLL found), every other MPICH length counts elements. Undefined when the same.
   */
  private unexpectedLengthUnit(): LengthUnit | undefined {
    const unit = unexpectedLengthUnit(this.typeNames.values());
    return unit === lengthUnitOfLibrary(this.library) ? undefined : unit;
  }

  /**
   * The DLL that read a rank, recorded on the rank (MPMD jobs read by two DLLs). Its texts come
   * from the DLL the job names and the field names it asks for: cut to the snapshot spec's
   * limits here, so the rank is never refused downstream (issue 27: a 1,040-character
   * missingFields entry was stored, then refused by the dashboard's decoder).
   */
  private dllInfo(): { path: string; version: string; missingFields?: string[]; renamedFields?: string[] } {
    const { missingFields, renamedFields } = this.fieldGaps.info();
    return {
      path: clipText(this.dllPath, MAX_PATH_CHARS),
      version: clipText(this.version, MAX_VERSION_CHARS),
      ...(missingFields === undefined
        ? {}
        : { missingFields: missingFields.map((f) => clipText(f, MAX_MISSING_FIELD_CHARS)) }),
      ...(renamedFields === undefined
        ? {}
        : { renamedFields: renamedFields.map((f) => clipText(f, MAX_RENAMED_FIELD_CHARS)) }),
    };
  }

  /** Runs the read of one rank, collecting its dprints into `dllLog` when MQD_DEBUG=dll. */
  private withLog(read: () => RankSnapshot): RankSnapshot {
    if (!DEBUG_DLL) return read();
    const log: string[] = [];
    this.rankLog = log;
    try {
      return { ...read(), dllLog: log };
    } finally {
      this.rankLog = null;
    }
  }

  private libraryName(): string {
    return this.library === 'openmpi' ? 'Open MPI' : this.library === 'mpich' ? 'MPICH' : 'This MPI library';
  }
}
