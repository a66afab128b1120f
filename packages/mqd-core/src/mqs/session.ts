// The debugger side of one MQD DLL, hosted in this process: loads the DLL, gives it the
// callback tables, keeps image and process infos through their lifecycles, and reads the
// communicators and three queues of a stopped process. Runs inside the DLL host child
// (dll-host-main.ts): a DLL that crashes or loops takes this process down, not the agent.
import { readFileSync } from 'node:fs';
import {
  type Communicator,
  err,
  type MpiLibrary,
  type MqdError,
  mqdError,
  type Operation,
  ok,
  type RankSnapshot,
  type Result,
  rankNotRead,
} from '@mqd/model';
import koffi from 'koffi';
import { dlopen, dlsymAddress, RTLD_NOW } from '../native/libc.js';
import type { DebugFileRegistry, TypeRef } from '../target/debug-file.js';
import { EM_X86_64, ET_DYN, hostMachine, readElfInfo } from '../target/elf.js';
import { TargetMemory } from '../target/memory.js';
import { ProcessImage } from '../target/process-image.js';
import { stopProcess } from '../target/stopper.js';
import { findMpiCall, type MpiFrame, Unwinder, type UnwoundRank } from '../target/unwind.js';
import { libraryOfDll } from './library.js';
import {
  BASIC_CALLBACKS,
  COMMUNICATOR,
  DEBUGGER_CODES,
  ENTRY_POINTS,
  type EntryName,
  ERR_BUDGET,
  ERR_CALLBACK,
  ERR_NO_SYMBOL,
  ERR_NULL,
  ERR_READ,
  IMAGE_CALLBACKS,
  MQS_INTERFACE_COMPATIBILITY,
  mqs_end_of_list,
  mqs_ok,
  mqs_op_class,
  OPTIONAL_ENTRY_POINTS,
  PENDING_OPERATION,
  PROCESS_CALLBACKS,
  proto,
} from './mqs-spec.js';

type Fn = (...args: unknown[]) => unknown;
type KoffiLib = ReturnType<typeof koffi.load>;

export interface SessionOptions {
  readonly registry: DebugFileRegistry;
  readonly readBudgetBytes: number;
  readonly stopTimeoutMs: number;
  /** Hook for tests of the kill -9 guarantee: called while a rank is stopped. */
  readonly whileStopped?: (pid: number) => void;
}

export interface RankTarget {
  readonly pid: number;
  readonly rank: number;
  readonly host: string;
}

interface TargetProcess {
  readonly key: number;
  readonly imageKey: number;
  readonly pid: number;
  readonly startTime: string;
  rank: number;
  readonly image: ProcessImage;
  readonly memory: TargetMemory;
  imageInfo: bigint;
  processInfo: bigint;
  ready: boolean;
}

const QUEUES = [
  ['sends', mqs_op_class.pending_sends],
  ['receives', mqs_op_class.pending_receives],
  ['unexpected', mqs_op_class.unexpected_messages],
] as const;

function procStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return rest[19] ?? null; // field 22: starttime
  } catch {
    return null;
  }
}

function nativeString(s: string): unknown {
  const buf = koffi.alloc('char', Buffer.byteLength(s) + 1);
  koffi.encode(buf, 'char', s, Buffer.byteLength(s) + 1);
  return buf;
}

/** Decodes a target int the DLL widened into 8 bytes: negative or unknown -> null. */
function decodeRank(v: DataView, off: number, commSize: number): number | null {
  const lo = v.getInt32(off, true);
  const hi = v.getInt32(off + 4, true);
  if (hi !== 0 && hi !== -1) return null;
  if (lo < 0) return null;
  // MPICH reads a receive's source as 2 bytes: ANY_SOURCE (-2) shows as 65534.
  if ((lo === 0xfffe || lo === 0xffff) && commSize < 0xfffe) return null;
  return lo;
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
      global = comm.name === 'MPI_COMM_WORLD' ? local : (comm.group?.[local] ?? null);
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

function decodeLength(v: DataView, off: number): number | null {
  const big = v.getBigInt64(off, true);
  if (big < 0n) return null;
  // A widened int -1 (0x00000000ffffffff) means "unknown" too.
  if (big === 0xffffffffn) return null;
  return Number(big);
}

export class MqsSession {
  readonly library: MpiLibrary;
  readonly version: string;
  private readonly fns: Record<EntryName, Fn>;
  private readonly getCommGroup: Fn | null;
  private readonly keep: unknown[] = [];
  private readonly processes = new Map<number, TargetProcess>();
  private readonly byPid = new Map<number, TargetProcess>();
  private readonly byImage = new Map<number, TargetProcess>();
  private readonly types = new Map<number, TypeRef>();
  private readonly typeKeys = new Map<string, number>();
  private readonly errorStrings = new Map<number, unknown>();
  private nextKey = 1;
  /** libdw unwinder for the stacks read in the same stop (created on first use). */
  private unwinder: Unwinder | null = null;
  private readonly basicCb: unknown;
  private readonly imageCb: unknown;
  private readonly processCb: unknown;
  readonly dprints: string[] = [];
  /** Which callbacks the DLL used, for conformance tests and diagnostics. */
  readonly callbackCounts: Record<string, number> = {};

  private constructor(
    readonly dllPath: string,
    lib: KoffiLib,
    private readonly opts: SessionOptions,
  ) {
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
    let lib: KoffiLib;
    try {
      lib = koffi.load(dllPath);
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
      return ok(new MqsSession(dllPath, lib, opts));
    } catch (e) {
      return err(
        mqdError('MQD_E_DLL_INCOMPATIBLE', `${dllPath} lacks an entry point: ${(e as Error).message}`),
      );
    }
  }

  // ---- callback tables ------------------------------------------------------------------
  private table<K extends string>(names: readonly K[], impl: Record<K, Fn>): unknown {
    const block = koffi.alloc('uintptr_t', names.length);
    const view = new BigUint64Array(koffi.view(block, 8 * names.length));
    names.forEach((n, i) => {
      const p = proto[n as keyof typeof proto];
      const f = impl[n];
      if (n === 'malloc' || n === 'free') {
        // libc's own malloc/free: no JS round trip per allocation (ffi-lessons trap 3).
        const libc = dlopen('libc.so.6', RTLD_NOW);
        view[i] = 'handle' in libc ? dlsymAddress(libc.handle, n) : 0n;
        return;
      }
      const counted = (...args: unknown[]) => {
        this.callbackCounts[n] = (this.callbackCounts[n] ?? 0) + 1;
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
      // A callback must never throw into C (ffi-lessons trap 2).
      this.dprints.push(`callback error: ${(e as Error).message}`);
      return fallback;
    }
  }

  private basicImpl(): Record<(typeof BASIC_CALLBACKS)[number], Fn> {
    const unused: Fn = () => 0;
    return {
      malloc: unused,
      free: unused,
      dprints: (text) =>
        this.guard(undefined, () => {
          if (this.dprints.length < 200) this.dprints.push(String(text));
        }),
      errorstring: (code) =>
        this.guard(0n, () => {
          const c = Number(code);
          let s = this.errorStrings.get(c);
          if (!s) {
            s = nativeString(
              DEBUGGER_CODES[c as keyof typeof DEBUGGER_CODES] ?? `debugger: unknown error ${c}`,
            );
            this.errorStrings.set(c, s);
          }
          return BigInt(koffi.address(s));
        }),
      put_image_info: (image, info) =>
        this.guard(undefined, () => {
          const t = this.byImage.get(Number(image));
          if (t) t.imageInfo = BigInt(info as number | bigint);
        }),
      get_image_info: (image) => this.guard(0n, () => this.byImage.get(Number(image))?.imageInfo ?? 0n),
      put_process_info: (proc, info) =>
        this.guard(undefined, () => {
          const t = this.processes.get(Number(proc));
          if (t) t.processInfo = BigInt(info as number | bigint);
        }),
      get_process_info: (proc) => this.guard(0n, () => this.processes.get(Number(proc))?.processInfo ?? 0n),
    };
  }

  private imageImpl(): Record<(typeof IMAGE_CALLBACKS)[number], Fn> {
    return {
      get_type_sizes: (_proc, sizes) =>
        this.guard(undefined, () => {
          if (!sizes) return;
          // Only the 5 standard fields: Open MPI's 7-int struct gets the rest from the target.
          const v = new Int32Array(koffi.view(sizes, 20));
          v.set([2, 4, 8, 8, 8]);
        }),
      find_function: (image, name, _lang, addr) =>
        this.guard(ERR_CALLBACK, () => {
          const t = this.byImage.get(Number(image));
          if (!t || typeof name !== 'string') return ERR_NULL;
          const a = t.image.hintFunction(name);
          if (a === null) return ERR_NO_SYMBOL;
          t.image.preferModuleOf(a);
          if (addr) koffi.encode(addr, 'uint64_t', a);
          return mqs_ok;
        }),
      find_symbol: (image, name, addr) =>
        this.guard(ERR_CALLBACK, () => {
          const t = this.byImage.get(Number(image));
          if (!t || typeof name !== 'string') return ERR_NULL;
          const s = t.image.findSymbol(name);
          if (!s) return ERR_NO_SYMBOL;
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
          }
          return key;
        }),
      field_offset: (type, field) =>
        this.guard(-1, () => {
          const ty = this.types.get(Number(type));
          if (!ty || typeof field !== 'string') return -1;
          return ty.file.fieldOffset(ty, field);
        }),
      sizeof: (type) =>
        this.guard(-1, () => {
          const ty = this.types.get(Number(type));
          return ty ? ty.file.sizeOf(ty) : -1;
        }),
    };
  }

  private processImpl(): Record<(typeof PROCESS_CALLBACKS)[number], Fn> {
    return {
      get_global_rank: (proc) => this.guard(-1, () => this.processes.get(Number(proc))?.rank ?? -1),
      get_image: (proc) => this.guard(0, () => this.processes.get(Number(proc))?.imageKey ?? 0),
      fetch_data: (proc, addr, size, buf) =>
        this.guard(ERR_CALLBACK, () => {
          const t = this.processes.get(Number(proc));
          const n = Number(size);
          if (!t || !buf) return ERR_NULL;
          if (n <= 0) return mqs_ok;
          const out = new Uint8Array(koffi.view(buf, n));
          if (t.memory.read(BigInt(addr as number | bigint), n, out)) return mqs_ok;
          out.fill(0);
          return t.memory.lastFailure === 'budget' ? ERR_BUDGET : ERR_READ;
        }),
      target_to_host: (_proc, src, dst, size) =>
        this.guard(undefined, () => {
          const n = Number(size);
          if (!src || !dst || n <= 0) return;
          // Exactly n bytes, same byte order on this host: a plain copy.
          new Uint8Array(koffi.view(dst, n)).set(new Uint8Array(koffi.view(src, n)));
        }),
    };
  }

  // ---- DLL errors -------------------------------------------------------------------------
  private dllError(code: number, what: string): MqdError {
    let text: string;
    if (code >= 1000 && code in DEBUGGER_CODES) text = DEBUGGER_CODES[code as keyof typeof DEBUGGER_CODES];
    else {
      try {
        text = String(this.fns.mqs_dll_error_string(code) ?? `error ${code}`);
      } catch {
        text = `error ${code}`;
      }
    }
    return mqdError('MQD_E_DLL_ERROR', `${what} returned ${code} (${text})`);
  }

  // ---- processes ----------------------------------------------------------------------------
  private forget(t: TargetProcess): void {
    if (t.processInfo !== 0n) this.fns.mqs_destroy_process_info(t.processInfo);
    if (t.imageInfo !== 0n) this.fns.mqs_destroy_image_info(t.imageInfo);
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
  }

  /** The target process for a pid, set up (image + process lifecycles) on first use. */
  private target(r: RankTarget): Result<TargetProcess, { kind: 'error' | 'no-queues'; error: MqdError }> {
    const start = procStartTime(r.pid);
    if (start === null)
      return err({ kind: 'error', error: mqdError('MQD_E_NO_SUCH_PID', `no process ${r.pid}`) });
    const old = this.byPid.get(r.pid);
    if (old && old.startTime === start && old.ready) {
      old.rank = r.rank;
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
    const key = this.nextKey++;
    const imageKey = this.nextKey++;
    const t: TargetProcess = {
      key,
      imageKey,
      pid: r.pid,
      startTime: start,
      rank: r.rank,
      image: img.value,
      memory: new TargetMemory(r.pid, this.opts.readBudgetBytes),
      imageInfo: 0n,
      processInfo: 0n,
      ready: false,
    };
    this.processes.set(key, t);
    this.byImage.set(imageKey, t);
    this.byPid.set(r.pid, t);
    // One image per address space: find_symbol answers must be relocated for this process.
    let rc = this.fns.mqs_setup_image(imageKey, this.imageCb) as number;
    if (rc !== mqs_ok) {
      const e = this.dllError(rc, 'mqs_setup_image');
      this.forget(t);
      return err({ kind: 'error', error: e });
    }
    const msg: (string | null)[] = [null];
    rc = this.fns.mqs_image_has_queues(imageKey, msg) as number;
    if (rc !== mqs_ok) {
      const text = (msg[0] ?? '').replace(/%s/g, img.value.exe);
      const missingType = /missing|type|not found|debug/i.test(text) || rc >= 100;
      this.forget(t);
      return err({
        kind: 'no-queues',
        error: mqdError(
          missingType ? 'MQD_E_NO_DEBUG_INFO' : 'MQD_E_NO_QUEUES',
          `the DLL found no queue support in ${img.value.exe}: ${text || this.dllError(rc, 'mqs_image_has_queues').message}`,
        ),
      });
    }
    t.memory.newStop();
    rc = this.fns.mqs_setup_process(key, this.processCb) as number;
    if (rc !== mqs_ok) {
      // Open MPI returns an error without storing process info: never call it again for this pid.
      const e = this.dllError(rc, 'mqs_setup_process');
      this.forget(t);
      return err({ kind: 'error', error: e });
    }
    const pmsg: (string | null)[] = [null];
    rc = this.fns.mqs_process_has_queues(key, pmsg) as number;
    if (rc !== mqs_ok) {
      const text = pmsg[0] ?? this.dllError(rc, 'mqs_process_has_queues').message;
      this.forget(t);
      return err({
        kind: 'no-queues',
        error: mqdError('MQD_E_NO_QUEUES', `pid ${r.pid}: ${text}`),
      });
    }
    t.ready = true;
    return ok(t);
  }

  /**
   * Stops the rank, reads every communicator and queue and (unless `stacks` is false) unwinds
   * every thread in the same stop, resumes it. Never throws for expected failures.
   */
  snapshotRank(r: RankTarget, opts: { readonly stacks?: boolean } = {}): RankSnapshot {
    const base = { rank: r.rank, pid: r.pid, host: r.host };
    const wantStacks = opts.stacks !== false;
    const tgt = this.target(r);
    if (!tgt.ok) {
      return rankNotRead(base, tgt.error.error, tgt.error.kind);
    }
    const t = tgt.value;
    const stop = stopProcess(r.pid, this.opts.stopTimeoutMs);
    if (!stop.ok) return rankNotRead(base, stop.error);
    let comms: Result<{ communicators: Communicator[]; walkError: MqdError | null }, MqdError>;
    let stacks: UnwoundRank | MqdError | null = null;
    let rawArgs: RawMpiArgs | null = null;
    let paused: number;
    try {
      t.memory.newStop();
      this.opts.whileStopped?.(r.pid);
      comms = this.readCommunicators(t);
      // One stop serves both: the stacks describe the same instant as the queues.
      if (wantStacks) {
        stacks = this.readStacks(r.pid, stop.value.tids);
        if (!('code' in stacks)) rawArgs = this.readMpiArgs(t, stacks);
      }
    } finally {
      // Whatever happened, the rank runs again before anything else.
      paused = stop.value.resume();
    }
    const stackFields =
      stacks === null ? {} : stackFieldsOf(stacks, rawArgs, comms.ok ? comms.value.communicators : []);
    if (!comms.ok) {
      return { ...rankNotRead(base, comms.error, 'error', paused), ...stackFields };
    }
    const { communicators, walkError } = comms.value;
    return {
      ...base,
      state: walkError ? { kind: 'error', ...walkError } : { kind: 'ok' },
      pausedMicros: paused,
      communicators,
      ...stackFields,
    };
  }

  /**
   * The arguments of the rank's MPI call, read while it is stopped: dest/source, tag, count as
   * the call's frame holds them, and the communicator handle turned into what identifies it in
   * the DLL's list (Open MPI: the context id read from the ompi_communicator_t; MPICH: the
   * MPIR_Comm address of a builtin or direct handle). Best effort: null where unreadable.
   */
  private readMpiArgs(t: TargetProcess, stacks: UnwoundRank): RawMpiArgs | null {
    const call = findMpiCall(stacks.threads);
    if (call === null || !this.unwinder) return null;
    const thread = stacks.threads.find((x) => x.tid === call.tid);
    if (!thread) return null;
    // Physical frame index: inlined frames share their caller's physical frame.
    let physical = 0;
    for (let i = 0; i < call.frameIndex; i++) if (!thread.frames[i]?.inlined) physical++;
    const fn = thread.frames[call.frameIndex]?.function ?? call.function;
    const words = this.unwinder.frameArgs(t.pid, call.tid, physical, fn, (a) => t.memory.readU64(a));
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
        const ty = t.image.findType('ompi_communicator_t');
        const off = ty ? ty.file.fieldOffset(ty, 'c_contextid') : -1;
        const word = off >= 0 ? t.memory.readU64(handle + BigInt(off)) : null;
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

  private readStacks(pid: number, tids: readonly number[]): UnwoundRank | MqdError {
    try {
      this.unwinder ??= new Unwinder();
      return this.unwinder.unwind(pid, tids);
    } catch (e) {
      return mqdError('MQD_E_NO_STACKS', `pid ${pid}: ${(e as Error).message}`);
    }
  }

  private readCommunicators(
    t: TargetProcess,
  ): Result<{ communicators: Communicator[]; walkError: MqdError | null }, MqdError> {
    const f = this.fns;
    let rc = f.mqs_update_communicator_list(t.key) as number;
    if (rc !== mqs_ok) return err(this.memoryError(t) ?? this.dllError(rc, 'mqs_update_communicator_list'));
    rc = f.mqs_setup_communicator_iterator(t.key) as number;
    if (rc !== mqs_ok) {
      const me = this.memoryError(t);
      if (me) return err(me);
      return ok({ communicators: [], walkError: null }); // no communicator yet (before MPI_Init completes)
    }
    const commBuf = koffi.alloc('uint8_t', COMMUNICATOR.size);
    const opBuf = koffi.alloc('uint8_t', PENDING_OPERATION.size);
    const commView = new DataView(koffi.view(commBuf, COMMUNICATOR.size));
    const commBytes = new Uint8Array(koffi.view(commBuf, COMMUNICATOR.size));
    const opBytes = new Uint8Array(koffi.view(opBuf, PENDING_OPERATION.size));
    const opView = new DataView(koffi.view(opBuf, PENDING_OPERATION.size));
    const out: Communicator[] = [];
    const raw: { comm: Communicator; worldish: boolean }[] = [];
    let walkError: MqdError | null = null;
    for (let guard = 0; guard < 1_000_000; guard++) {
      commBytes.fill(0);
      rc = f.mqs_get_communicator(t.key, commBuf) as number;
      if (rc !== mqs_ok) break;
      const size = Number(commView.getBigInt64(COMMUNICATOR.size_, true));
      const localRank = commView.getInt32(COMMUNICATOR.local_rank, true);
      const uid = commView.getBigUint64(COMMUNICATOR.unique_id, true);
      const nameBytes = commBytes.subarray(COMMUNICATOR.name, COMMUNICATOR.name + COMMUNICATOR.nameLen);
      const z = nameBytes.indexOf(0);
      const name = Buffer.from(z >= 0 ? nameBytes.subarray(0, z) : nameBytes).toString('utf8');
      // MPI_COMM_NULL shows up as size 0 (local rank 4294967294): never listed.
      const isNull = size <= 0 || name === 'MPI_COMM_NULL';
      if (!isNull) {
        let group: number[] | null = null;
        if (this.getCommGroup && size > 0 && size < 1 << 24) {
          const g = koffi.alloc('int', size);
          if ((this.getCommGroup(t.key, g) as number) === mqs_ok) {
            const arr = Array.from(new Int32Array(koffi.view(g, 4 * size)));
            group = arr.every((x) => x >= 0) ? arr : null;
          }
        }
        const comm: Communicator = {
          id: uid < 1_000_000n ? uid.toString() : `0x${uid.toString(16)}`,
          name,
          size,
          localRank,
          group,
          sends: null,
          receives: null,
          unexpected: null,
          unavailable: {},
        };
        for (const [q, cls] of QUEUES) {
          rc = f.mqs_setup_operation_iterator(t.key, cls) as number;
          if (rc !== mqs_ok) {
            const me = this.memoryError(t);
            if (me) return err(me);
            comm.unavailable[q] = mqdError(
              'MQD_E_QUEUE_UNSUPPORTED',
              `${this.libraryName()}'s DLL cannot show ${q === 'unexpected' ? 'unexpected messages' : `pending ${q}`} (mqs_setup_operation_iterator returned ${rc})`,
            );
            continue;
          }
          const ops: Operation[] = [];
          for (let n = 0; n < 10_000_000; n++) {
            opBytes.fill(0); // MPICH leaves lines of extra_text untouched: start clean each time
            rc = f.mqs_next_operation(t.key, opBuf) as number;
            if (rc !== mqs_ok) break;
            ops.push(this.decodeOp(opView, opBytes, size));
          }
          const me = this.memoryError(t);
          if (me) return err(me);
          if (rc !== mqs_end_of_list && rc !== mqs_ok) {
            // The walk broke off (an unreadable pointer, a DLL error): what was read is kept,
            // and the rank says plainly that this queue is partial.
            walkError ??= this.dllError(
              rc,
              `the walk of ${q} on communicator '${name}' broke off after ${ops.length} entries: mqs_next_operation`,
            );
          }
          comm[q] = ops;
        }
        raw.push({ comm, worldish: name === 'MPI_COMM_WORLD' });
      }
      rc = f.mqs_next_communicator(t.key) as number;
      if (rc !== mqs_ok) break;
    }
    // Derive what the library leaves unknown. MPI_COMM_WORLD's group is the identity by
    // definition, so it is never listed (snapshot-spec.ts) and local == global there. Elsewhere
    // the group is the authority: Open MPI copies the local rank into a send's actual global
    // rank, MPICH leaves global ranks -1.
    for (const { comm, worldish } of raw) {
      if (worldish) comm.group = null;
      const group = comm.group;
      const toGlobal = worldish ? (l: number) => l : group ? (l: number) => group[l] : null;
      for (const q of ['sends', 'receives', 'unexpected'] as const) {
        if (!toGlobal) continue;
        for (const op of comm[q] ?? []) {
          if (op.peer.local !== null) op.peer.global = toGlobal(op.peer.local) ?? op.peer.global;
          if (op.actual && op.actual.peer.local !== null) {
            op.actual.peer.global = toGlobal(op.actual.peer.local) ?? op.actual.peer.global;
          }
        }
      }
      out.push(comm);
    }
    return ok({ communicators: out, walkError });
  }

  private memoryError(t: TargetProcess): MqdError | null {
    switch (t.memory.lastFailure) {
      case 'budget':
        return mqdError(
          'MQD_E_READ_BUDGET',
          `more than ${this.opts.readBudgetBytes} bytes read from pid ${t.pid} in one stop`,
        );
      case 'gone':
        return mqdError('MQD_E_PID_EXITED', `pid ${t.pid} exited during the read`);
      case 'denied':
        return mqdError('MQD_E_PTRACE_DENIED', `cannot read the memory of pid ${t.pid}`);
      default:
        return null; // unmapped reads end list walks; the DLL decides what they mean
    }
  }

  private libraryName(): string {
    return this.library === 'openmpi' ? 'Open MPI' : this.library === 'mpich' ? 'MPICH' : 'This MPI library';
  }

  private decodeOp(v: DataView, bytes: Uint8Array, commSize: number): Operation {
    const P = PENDING_OPERATION;
    const status = v.getInt32(P.status, true);
    const tagWild = v.getInt32(P.tag_wild, true) !== 0;
    const rawTag = v.getInt32(P.desired_tag, true);
    const extraText: string[] = [];
    for (let i = 0; i < P.extraLines; i++) {
      const line = bytes.subarray(P.extra_text + i * P.extraLineLen, P.extra_text + (i + 1) * P.extraLineLen);
      const z = line.indexOf(0);
      const s = Buffer.from(z >= 0 ? line.subarray(0, z) : line).toString('utf8');
      if (s.length > 0) extraText.push(s);
    }
    const desiredGlobal = decodeRank(v, P.desired_global_rank, 1 << 30);
    const op: Operation = {
      status: status === 2 ? 'complete' : status === 1 ? 'matched' : 'pending',
      peer: { local: decodeRank(v, P.desired_local_rank, commSize), global: desiredGlobal },
      // MPI_ANY_TAG is -1 in both libraries; MPICH does not set tag_wild.
      tag: tagWild || rawTag === -1 ? null : rawTag,
      length: decodeLength(v, P.desired_length) ?? 0,
      actual: null,
      extraText,
      buffer: `0x${v.getBigUint64(P.buffer, true).toString(16)}`,
      systemBuffer: v.getInt32(P.system_buffer, true) !== 0,
    };
    if (op.status !== 'pending') {
      const aTag = v.getInt32(P.actual_tag, true);
      op.actual = {
        peer: {
          local: decodeRank(v, P.actual_local_rank, commSize),
          global: decodeRank(v, P.actual_global_rank, 1 << 30),
        },
        tag: aTag === -1 ? null : aTag,
        length: decodeLength(v, P.actual_length),
      };
    }
    return op;
  }
}
