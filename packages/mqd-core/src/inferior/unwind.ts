// Call stacks of every thread of a stopped rank, unwound with libdw in the SAME stop as the
// queue read (stopper.ts holds every thread in a ptrace interrupt-stop; libdw is told so with
// assume_ptrace_stopped and never attaches or detaches by itself). Registers and memory come
// from the stopped threads through ptrace/process_vm_readv issued by libdw on this JS thread,
// the tracer thread.
//
// Costs are paid once: one Dwfl per process (reported from /proc/PID/maps and re-reported only
// when the maps text changes), one registered frame callback per Unwinder, and a symbol cache
// per (build-id, file address) shared by every process mapping the same file, so a warm
// snapshot symbolises with map lookups only.
import { accessSync, closeSync, constants as fsConstants, fstatSync, openSync, readFileSync } from 'node:fs';
import {
  type Frame,
  MAX_FRAMES_PER_THREAD,
  MAX_THREADS_PER_RANK,
  type MqdError,
  mqdError,
  type ThreadStack,
} from '@mqd/model';
import koffi from 'koffi';
import { nativeFree } from '../native/alloc.js';
import {
  alloc,
  allocDie,
  coreCallbacks,
  DW_AT,
  DW_TAG,
  dw,
  dwflError,
  ELF_C_READ_MMAP,
  ELF_K_ELF,
  EM_X86_64,
  ET_CORE,
  EV_CURRENT,
  elf,
  elfError,
  FrameCallback,
  procCallbacks,
  ThreadCallback,
} from '../native/libdw.js';
import { demangle } from './demangle.js';
import { concreteScopes, copyDie, dieBytes, setDie, statementLine } from './dwarf-dies.js';

import { ArgPlanner, evalOps, type FrameRegs } from './frame-args.js';
import { procStartTime } from './proc.js';
import type { DwarfAt } from './process-image.js';

export type { FrameRegs };

const cFree = koffi.load('libc.so.6').func('void free(void *ptr)');

/**
 * What one symbolised pc gives, without the pc and the module path (cached per build-id and
 * file address: two paths with one build-id, e.g. a copy or a debuglink-stripped twin, share it).
 */
interface FrameInfo {
  readonly function: string | null;
  readonly file: string | null;
  readonly line: number | null;
  readonly inlined: boolean;
}

interface ModuleInfo {
  readonly name: string | null;
  readonly key: string;
  readonly start: bigint;
  /**
   * Why libdw has no ELF file for this module (null: it has one). A core names files that may be
   * gone; what such a module symbolises to is not cached under its build-id, so the same module
   * found later (another key, `exe` given) is symbolised again.
   */
  readonly missing: string | null;
}

interface ProcDwfl {
  readonly dwfl: unknown;
  /** Live: the start time of the pid. Core: the core's path and the executable asked for. */
  readonly startTime: string;
  /** Live: /proc/PID/maps. Core: the file's identity (device, inode, size, mtime). */
  maps: string;
  readonly modules: Map<bigint, ModuleInfo>;
  /** A core file's libelf handle and descriptor, released after dwfl_end (null when live). */
  readonly core: { readonly elf: unknown; readonly fd: number; readonly pid: number } | null;
}

export interface UnwoundRank {
  readonly threads: ThreadStack[];
  /** Threads past MAX_THREADS_PER_RANK that were not unwound (capThreads). */
  readonly omitted: number;
}

/**
 * The threads a rank's read lists: the main thread, then the others by tid, at most `max`;
 * decided before any is unwound, so a rank with thousands of threads is not held stopped while
 * stacks that no snapshot can carry are unwound.
 */
export function capThreads(
  mainTid: number,
  tids: readonly number[],
  max: number = MAX_THREADS_PER_RANK,
): { readonly kept: number[]; readonly omitted: number } {
  const ordered = [...tids].sort((a, b) => (a === mainTid ? -1 : b === mainTid ? 1 : a - b));
  return { kept: ordered.slice(0, max), omitted: Math.max(0, ordered.length - max) };
}

const SYMBOL_CACHE_MAX = 200_000;
/** DWARF x86_64 register numbers libdw can recover in outer frames, plus rsp (7). */
const ARG_REGS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15];

function threadName(pid: number, tid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').replace(/\n$/, '').slice(0, 64);
  } catch {
    return null;
  }
}

const hex = (v: bigint) => `0x${v.toString(16)}`;

/** libelf wants elf_version(EV_CURRENT) once per process before elf_begin. */
let elfReady = false;

/**
 * Unwinds stopped processes. One per reader (session); owns every native block and the
 * registered callback it uses, freed by dispose().
 */
export class Unwinder {
  private readonly procs = new Map<number, ProcDwfl>();
  private readonly symbols = new Map<string, FrameInfo[]>();
  private readonly callbacks: unknown;
  private readonly frameCb: unknown;
  /** Scratch blocks of this unwinder, freed by dispose(). */
  private readonly owned: unknown[] = [];
  // Out-parameters, reused by every call (never held by C past the call).
  private readonly pcBuf = this.own(alloc(8));
  private readonly actBuf = this.own(alloc(8));
  private readonly regBuf = this.own(alloc(8));
  private readonly biasBuf = this.own(alloc(8));
  private readonly offBuf = this.own(alloc(8));
  private readonly lineBuf = this.own(alloc(8));
  private readonly scopesBuf = this.own(alloc(8));
  private readonly attrBuf = this.own(alloc(32));
  private readonly filesBuf = this.own(alloc(16));
  private readonly startBuf = this.own(alloc(8));
  private readonly symBuf = this.own(alloc(32));
  private readonly shndxBuf = this.own(alloc(8));
  private readonly elfBuf = this.own(alloc(8));
  private readonly symBiasBuf = this.own(alloc(8));
  private readonly nBuf = this.own(alloc(8));
  private readonly dieA = this.own(allocDie());
  private readonly dieB = this.own(allocDie());
  /** The DWARF half of argument reads, cached per (build-id, offset, function). */
  private readonly planner = new ArgPlanner();
  private readonly pcView: BigUint64Array;
  private readonly actView: Uint8Array;
  private readonly regView: BigUint64Array;
  private readonly lineView: Int32Array;
  // State of the unwind in progress (the callback cannot take JS arguments).
  private cur: { pcs: bigint[]; act: boolean[]; limit: number; regsAt: number; regs: FrameRegs[] } = {
    pcs: [],
    act: [],
    limit: 0,
    regsAt: -1,
    regs: [],
  };
  private disposed = false;
  /** Core files only (made on the first unwindCore): Dwfl_Callbacks and the thread callback. */
  private coreCbs: unknown = null;
  private threadCb: unknown = null;
  /** Tids dwfl_getthreads reports, collected by threadCb. */
  private threadTids: number[] = [];

  constructor() {
    this.callbacks = procCallbacks(process.env['MQD_DEBUGINFO_PATH'] ?? null);
    this.frameCb = koffi.register((frame: unknown) => this.onFrame(frame), koffi.pointer(FrameCallback));
    this.pcView = new BigUint64Array(koffi.view(this.pcBuf, 8));
    this.actView = new Uint8Array(koffi.view(this.actBuf, 8));
    this.regView = new BigUint64Array(koffi.view(this.regBuf, 8));
    this.lineView = new Int32Array(koffi.view(this.lineBuf, 8));
  }

  private onFrame(frame: unknown): number {
    try {
      const c = this.cur;
      if (!dw.dwfl_frame_pc(frame, this.pcBuf, this.actBuf)) return 1; // DWARF_CB_ABORT
      const pc = this.pcView[0] ?? 0n;
      const activation = (this.actView[0] ?? 0) !== 0;
      if (c.regsAt >= 0) {
        // Argument pass: registers of frame regsAt and the stack pointer of its caller (= CFA).
        const idx = c.pcs.length;
        if (idx === c.regsAt || idx === c.regsAt + 1) {
          const regs = new Map<number, bigint>();
          for (const r of idx === c.regsAt ? ARG_REGS : [7]) {
            if (dw.dwfl_frame_reg(frame, r, this.regBuf) === 0) regs.set(r, this.regView[0] ?? 0n);
          }
          c.regs.push({ pc, regs, cfa: null });
        }
        c.pcs.push(pc);
        return c.pcs.length > c.regsAt + 1 ? 1 : 0;
      }
      if (c.pcs.length >= c.limit) {
        c.pcs.push(pc); // one more than the cap: marks truncation
        return 1;
      }
      c.pcs.push(pc);
      c.act.push(activation);
      return 0;
    } catch {
      return 1; // never throw into C (koffi trap 2, README.md)
    }
  }

  private dwflFor(pid: number): ProcDwfl | MqdError {
    const start = procStartTime(pid);
    if (start === null) return mqdError('MQD_E_NO_STACKS', `pid ${pid} is gone`);
    let maps: string;
    try {
      maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
    } catch (e) {
      return mqdError('MQD_E_NO_STACKS', `cannot read /proc/${pid}/maps: ${(e as Error).message}`);
    }
    const old = this.procs.get(pid);
    if (old && old.startTime === start && old.maps === maps) return old;
    if (old) this.drop(pid);
    const dwfl = dw.dwfl_begin(this.callbacks);
    if (!dwfl) return mqdError('MQD_E_NO_STACKS', `dwfl_begin: ${dwflError()}`);
    dw.dwfl_report_begin(dwfl);
    const rc = dw.dwfl_linux_proc_report(dwfl, pid) as number;
    if (rc !== 0 || (dw.dwfl_report_end(dwfl, null, null) as number) !== 0) {
      const e = mqdError(
        'MQD_E_NO_STACKS',
        `dwfl_linux_proc_report(${pid}): ${rc > 0 ? `errno ${rc}` : dwflError()}`,
      );
      dw.dwfl_end(dwfl);
      return e;
    }
    // Our stopper holds every thread: libdw must not attach or detach by itself.
    if ((dw.dwfl_linux_proc_attach(dwfl, pid, true) as number) !== 0) {
      const e = mqdError('MQD_E_NO_STACKS', `dwfl_linux_proc_attach(${pid}): ${dwflError()}`);
      dw.dwfl_end(dwfl);
      return e;
    }
    const p: ProcDwfl = { dwfl, startTime: start, maps, modules: new Map(), core: null };
    this.procs.set(pid, p);
    return p;
  }

  /** Raw pcs of one thread, innermost first; `limit + 1` entries means truncated. */
  private framesOf(p: ProcDwfl, tid: number, limit: number): { pcs: bigint[]; act: boolean[]; rc: number } {
    this.cur = { pcs: [], act: [], limit, regsAt: -1, regs: [] };
    const rc = dw.dwfl_getthread_frames(p.dwfl, tid, this.frameCb, null) as number;
    const { pcs, act } = this.cur;
    this.cur = { pcs: [], act: [], limit: 0, regsAt: -1, regs: [] };
    return { pcs, act, rc };
  }

  /**
   * Unwinds every thread in `tids` of stopped process `pid` (the main thread first).
   * Must run between stopProcess and resume, on the tracer thread.
   */
  unwind(
    pid: number,
    tids: readonly number[],
    maxFrames = MAX_FRAMES_PER_THREAD,
    dwarfAt: DwarfAt | null = null,
  ): UnwoundRank | MqdError {
    if (this.disposed) throw new Error('Unwinder used after dispose');
    const p = this.dwflFor(pid);
    if ('code' in p) return p;
    return this.stacksOf(p, pid, tids, maxFrames, (tid) => threadName(pid, tid), `pid ${pid}`, dwarfAt);
  }

  /** Unwinds and symbolises `tids` of one Dwfl, the thread `mainTid` first. */
  private stacksOf(
    p: ProcDwfl,
    mainTid: number,
    tids: readonly number[],
    maxFrames: number,
    nameOf: (tid: number) => string | null,
    what: string,
    dwarfAt: DwarfAt | null = null,
  ): UnwoundRank | MqdError {
    const { kept: ordered, omitted } = capThreads(mainTid, tids);
    const threads: ThreadStack[] = [];
    let failures = 0;
    let firstError: string | null = null;
    for (const tid of ordered) {
      const { pcs, act, rc } = this.framesOf(p, tid, maxFrames);
      const truncated = pcs.length > maxFrames;
      if (truncated) pcs.length = maxFrames;
      let error: MqdError | null = null;
      if (rc === -1) {
        const msg = dwflError();
        error = mqdError(
          'MQD_E_NO_STACKS',
          `thread ${tid}: unwinding stopped after ${pcs.length} frames: ${msg}`,
        );
        if (pcs.length === 0) {
          failures++;
          firstError ??= msg;
        }
      }
      const frames: Frame[] = [];
      let cut = truncated;
      for (let i = 0; i < pcs.length; i++) {
        const raw = pcs[i] ?? 0n;
        // A return address points after the call: symbolise the call instruction itself.
        const pc = act[i] === false && raw > 0n ? raw - 1n : raw;
        const { module, infos } = this.symbolise(p, pc, dwarfAt);
        for (const info of infos) {
          if (frames.length >= maxFrames) {
            cut = true; // inlined frames pushed the stack past the cap
            break;
          }
          frames.push({
            pc: hex(pc),
            function: info.function,
            module,
            file: info.file,
            line: info.line,
            inlined: info.inlined,
          });
        }
      }
      threads.push({
        tid,
        name: nameOf(tid),
        main: tid === mainTid,
        frames,
        truncated: cut,
        error,
      });
    }
    if (threads.length > 0 && failures === threads.length) {
      return mqdError(
        'MQD_E_NO_STACKS',
        `${what}: no thread could be unwound (${firstError ?? 'no frames'})`,
      );
    }
    return { threads, omitted };
  }

  /**
   * Stacks of every thread in a core file (the thread whose tid equals the core's pid first).
   * `key` is a negative number chosen by the caller that stands for this core wherever a pid is
   * taken (frameRegisters, frameArgs, drop, retain). Modules come from the core's notes and are
   * found by build-id (libdw's core support, as `eu-stack --core`); `exe` names the executable
   * when the path the core records is gone. The core stays open (mapped) until the key is dropped.
   */
  unwindCore(
    key: number,
    corePath: string,
    opts: { readonly exe?: string; readonly maxFrames?: number } = {},
  ): UnwoundRank | MqdError {
    if (this.disposed) throw new Error('Unwinder used after dispose');
    if (!(Number.isInteger(key) && key < 0))
      throw new Error(`unwindCore: key ${key} is not a negative integer`);
    const p = this.coreDwfl(key, corePath, opts.exe ?? null);
    if ('code' in p) return p;
    const core = p.core;
    if (!core) throw new Error(`unwindCore: key ${key} is a live process`);
    this.threadTids = [];
    const rc = dw.dwfl_getthreads(p.dwfl, this.threadCb, null) as number;
    const tids = this.threadTids;
    this.threadTids = [];
    if (rc !== 0 || tids.length === 0) {
      return mqdError(
        'MQD_E_NO_STACKS',
        `core ${corePath}: no threads in its notes${rc !== 0 ? ` (${dwflError()})` : ''}`,
      );
    }
    const r = this.stacksOf(
      p,
      core.pid,
      tids,
      opts.maxFrames ?? MAX_FRAMES_PER_THREAD,
      () => null, // a core has no per-thread names
      `core ${corePath}`,
    );
    if ('code' in r) return r;
    // A file the core names but libdw cannot find (moved, deleted, another machine) leaves its
    // frames nameless and its unwinding guessed: say which, rather than return such stacks.
    const missing = [...p.modules.values()].filter((m) => m.missing !== null);
    if (missing.length > 0) {
      const what = missing.map((m) => `${m.name ?? '?'} (${m.missing})`).join(', ');
      return mqdError(
        'MQD_E_NO_STACKS',
        `core ${corePath}: a file its stacks run through cannot be found: ${what}; pass the executable (exe) or read the core where it was written`,
      );
    }
    return r;
  }

  /** The Dwfl of a core (re-used while the same file and executable are asked for under `key`). */
  private coreDwfl(key: number, corePath: string, exe: string | null): ProcDwfl | MqdError {
    let fd: number;
    try {
      fd = openSync(corePath, 'r');
    } catch (e) {
      return mqdError('MQD_E_CORE_INVALID', `cannot open core ${corePath}: ${(e as Error).message}`);
    }
    const ident = `${corePath}\0${exe ?? ''}`;
    let fileId: string;
    try {
      const st = fstatSync(fd);
      fileId = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
    } catch (e) {
      closeSync(fd);
      return mqdError('MQD_E_CORE_INVALID', `cannot stat core ${corePath}: ${(e as Error).message}`);
    }
    const old = this.procs.get(key);
    if (old?.core && old.startTime === ident && old.maps === fileId) {
      closeSync(fd);
      return old;
    }
    if (old) this.drop(key);
    if (exe !== null) {
      try {
        accessSync(exe, fsConstants.R_OK);
      } catch (e) {
        closeSync(fd);
        return mqdError(
          'MQD_E_NO_STACKS',
          `core ${corePath}: the executable ${exe} cannot be read: ${(e as Error).message}`,
        );
      }
    }
    // Every exit below releases what was made so far, in reverse order.
    let handle: unknown = null;
    let dwfl: unknown = null;
    const fail = (code: 'MQD_E_CORE_INVALID' | 'MQD_E_NO_STACKS', detail: string): MqdError => {
      const e = mqdError(code, detail);
      if (dwfl) dw.dwfl_end(dwfl);
      if (handle) elf.elf_end(handle);
      closeSync(fd);
      return e;
    };
    if (!elfReady) {
      if ((elf.elf_version(EV_CURRENT) as number) === 0)
        return fail('MQD_E_NO_STACKS', `elf_version: ${elfError()}`);
      elfReady = true;
    }
    handle = elf.elf_begin(fd, ELF_C_READ_MMAP, null);
    if (!handle) return fail('MQD_E_CORE_INVALID', `${corePath}: ${elfError()}`);
    const ehdr = (elf.elf_kind(handle) as number) === ELF_K_ELF ? elf.elf64_getehdr(handle) : null;
    if (!ehdr) return fail('MQD_E_CORE_INVALID', `${corePath} is not a 64-bit ELF file`);
    const hdr = new DataView(koffi.view(ehdr, 20));
    const type = hdr.getUint16(16, true);
    const machine = hdr.getUint16(18, true);
    if (type !== ET_CORE || machine !== EM_X86_64) {
      return fail(
        'MQD_E_CORE_INVALID',
        `${corePath} is an ELF file of type ${type} for machine ${machine}, not an x86_64 core (type ${ET_CORE}, machine ${EM_X86_64})`,
      );
    }
    if (this.coreCbs === null) {
      this.coreCbs = coreCallbacks(process.env['MQD_DEBUGINFO_PATH'] ?? null);
      this.threadCb = koffi.register(
        (thread: unknown) => this.onThread(thread),
        koffi.pointer(ThreadCallback),
      );
    }
    dwfl = dw.dwfl_begin(this.coreCbs);
    if (!dwfl) return fail('MQD_E_NO_STACKS', `dwfl_begin: ${dwflError()}`);
    dw.dwfl_report_begin(dwfl);
    if ((dw.dwfl_core_file_report(dwfl, handle, exe) as number) < 0) {
      return fail('MQD_E_NO_STACKS', `dwfl_core_file_report(${corePath}): ${dwflError()}`);
    }
    if ((dw.dwfl_report_end(dwfl, null, null) as number) !== 0) {
      return fail('MQD_E_NO_STACKS', `dwfl_report_end(${corePath}): ${dwflError()}`);
    }
    const pid = dw.dwfl_core_file_attach(dwfl, handle) as number;
    if (pid < 0) return fail('MQD_E_NO_STACKS', `dwfl_core_file_attach(${corePath}): ${dwflError()}`);
    const p: ProcDwfl = {
      dwfl,
      startTime: ident,
      maps: fileId,
      modules: new Map(),
      core: { elf: handle, fd, pid },
    };
    this.procs.set(key, p);
    return p;
  }

  private onThread(thread: unknown): number {
    try {
      this.threadTids.push(dw.dwfl_thread_tid(thread) as number);
      return 0; // DWARF_CB_OK
    } catch {
      return 1; // never throw into C (koffi trap 2, README.md)
    }
  }

  /**
   * Registers of physical frame `index` (0 = innermost, counted as libdw unwinds, inlined
   * frames excluded) of a stopped thread, and its CFA (the stack pointer of its caller).
   */
  frameRegisters(pid: number, tid: number, index: number): FrameRegs | null {
    const p = this.procs.get(pid);
    if (!p) return null;
    this.cur = { pcs: [], act: [], limit: MAX_FRAMES_PER_THREAD, regsAt: index, regs: [] };
    dw.dwfl_getthread_frames(p.dwfl, tid, this.frameCb, null);
    const got = this.cur.regs;
    this.cur = { pcs: [], act: [], limit: 0, regsAt: -1, regs: [] };
    const self = got[0];
    if (!self) return null;
    const caller = got[1];
    return { pc: self.pc, regs: self.regs, cfa: caller?.regs.get(7) ?? null };
  }

  private moduleOf(p: ProcDwfl, mod: unknown): ModuleInfo {
    const addr = BigInt(koffi.address(mod));
    const hit = p.modules.get(addr);
    if (hit) return hit;
    const main: (string | null)[] = [null];
    const debug: (string | null)[] = [null];
    const nameRet = dw.dwfl_module_info(mod, null, this.startBuf, null, null, null, main, debug) as
      | string
      | null;
    const start = new BigUint64Array(koffi.view(this.startBuf, 8))[0] ?? 0n;
    const name = nameRet ?? main[0] ?? null;
    const bits: unknown[] = [null];
    const vaddr = [0n];
    const n = dw.dwfl_module_build_id(mod, bits, vaddr) as number;
    let key = `${name ?? '?'}@${start.toString(16)}`;
    if (n > 0 && bits[0]) {
      const b = new Uint8Array(koffi.decode(bits[0], koffi.array('uint8_t', n)) as number[]);
      key = Buffer.from(b).toString('hex');
    }
    const missing = dw.dwfl_module_getelf(mod, this.biasBuf) ? null : dwflError();
    const info: ModuleInfo = { name, key, start, missing };
    p.modules.set(addr, info);
    return info;
  }

  /** The frames one pc stands for: inlined instances innermost first, then the function itself. */
  private symbolise(
    p: ProcDwfl,
    pc: bigint,
    dwarfAt: DwarfAt | null,
  ): { module: string | null; infos: FrameInfo[] } {
    const mod = dw.dwfl_addrmodule(p.dwfl, pc);
    if (!mod) return { module: null, infos: [{ function: null, file: null, line: null, inlined: false }] };
    const m = this.moduleOf(p, mod);
    const key = `${m.key}:${(pc - m.start).toString(16)}`;
    let infos = this.symbols.get(key);
    if (!infos) {
      const src = dwarfAt?.(pc) ?? { mod, addr: pc };
      infos = this.symboliseSlow(src.mod, src.addr);
      if (m.missing === null) {
        if (this.symbols.size >= SYMBOL_CACHE_MAX) this.symbols.clear();
        this.symbols.set(key, infos);
      }
    }
    return { module: m.name, infos };
  }

  private symboliseSlow(mod: unknown, pc: bigint): FrameInfo[] {
    const symName = dw.dwfl_module_addrinfo(
      mod,
      pc,
      this.offBuf,
      this.symBuf,
      this.shndxBuf,
      this.elfBuf,
      this.symBiasBuf,
    ) as string | null;
    // The CU holding pc (its line table and its scopes), once for both.
    const cudie = dw.dwfl_module_addrdie(mod, pc, this.biasBuf);
    const bias = new BigUint64Array(koffi.view(this.biasBuf, 8))[0] ?? 0n;
    const pos = (cudie ? statementLine(cudie, pc - bias) : null) ?? this.libdwLine(mod, pc);
    const outer: FrameInfo = {
      function: symName ? demangle(symName) : null,
      file: pos.file,
      line: pos.line,
      inlined: false,
    };
    // Inlined call sites at this pc, from the DWARF scopes (innermost first).
    if (!cudie) return [outer];
    const n = dw.dwarf_getscopes(cudie, pc - bias, this.scopesBuf) as number;
    if (n <= 0) return [outer];
    const scopesPtr = koffi.decode(this.scopesBuf, 'void *');
    try {
      const inl: { name: string | null; callFile: number | null; callLine: number | null }[] = [];
      const die = this.dieA;
      // dwarf_getscopes stops being concrete at the innermost inlined instance: past it come
      // that inline's abstract origin and the origin's own parents, so a pc four inline levels
      // deep (MPICH ch4: MPIDI_progress_test < MPID_Progress_test < MPID_Mprobe <
      // internal_Mprobe < PMPI_Mprobe) gave one inlined frame where gdb shows four. The
      // concrete chain is the DIEs that hold the innermost scope, found by offset.
      copyDie(scopesPtr, 0, die);
      const scopes = concreteScopes(
        cudie,
        BigInt(dw.dwarf_dieoffset(die) as number | bigint),
        die,
        this.dieB,
      );
      if (scopes.length === 0) for (let i = 0; i < n; i++) scopes.push(dieBytes(scopesPtr, i));
      for (const scope of scopes) {
        setDie(scope, die);
        const tag = dw.dwarf_tag(die) as number;
        if (tag === DW_TAG.subprogram) break;
        if (tag !== DW_TAG.inlined_subroutine) continue;
        inl.push({
          name: this.dieName(die),
          callFile: this.udata(die, DW_AT.call_file),
          callLine: this.udata(die, DW_AT.call_line),
        });
      }
      if (inl.length === 0) return [outer];
      // The innermost inline instance keeps the line-table position; each outer frame is at
      // the call site (DW_AT_call_file/line) of the instance inside it.
      const files = this.srcFiles(cudie);
      const out: FrameInfo[] = [];
      let at = { file: pos.file, line: pos.line };
      for (const f of inl) {
        out.push({ function: f.name, file: at.file, line: at.line, inlined: true });
        at = {
          file: f.callFile !== null ? (files(f.callFile) ?? null) : null,
          line: f.callLine !== null && f.callLine > 0 ? f.callLine : null,
        };
      }
      out.push({ ...outer, file: at.file, line: at.line });
      return out;
    } finally {
      cFree(scopesPtr);
    }
  }

  /** The source position libdw gives for `pc` (the last line-table row at it): the fallback. */
  private libdwLine(mod: unknown, pc: bigint): { file: string | null; line: number | null } {
    const src = dw.dwfl_module_getsrc(mod, pc);
    if (!src) return { file: null, line: null };
    this.lineView[0] = 0;
    const f = dw.dwfl_lineinfo(src, null, this.lineBuf, null, null, null) as string | null;
    const line = this.lineView[0] ?? 0;
    return f ? { file: f, line: line > 0 ? line : null } : { file: null, line: null };
  }

  private udata(die: unknown, at: number): number | null {
    if (!dw.dwarf_attr_integrate(die, at, this.attrBuf)) return null;
    const v = [0n];
    return (dw.dwarf_formudata(this.attrBuf, v) as number) === 0 ? Number(v[0]) : null;
  }

  private dieName(die: unknown): string | null {
    for (const at of [DW_AT.linkage_name, DW_AT.MIPS_linkage_name, DW_AT.name]) {
      if (!dw.dwarf_attr_integrate(die, at, this.attrBuf)) continue;
      const s = dw.dwarf_formstring(this.attrBuf) as string | null;
      if (s) return demangle(s);
    }
    return null;
  }

  private srcFiles(cudie: unknown): (idx: number) => string | null {
    const filesBuf = this.filesBuf;
    let loaded: { files: unknown; n: number } | null | undefined;
    return (idx) => {
      if (loaded === undefined) {
        loaded = null;
        const nBuf = this.nBuf;
        if ((dw.dwarf_getsrcfiles(cudie, filesBuf, nBuf) as number) === 0) {
          loaded = {
            files: koffi.decode(filesBuf, 'void *'),
            n: Number(new BigUint64Array(koffi.view(nBuf, 8))[0] ?? 0n),
          };
        }
      }
      if (!loaded || idx >= loaded.n) return null;
      return (dw.dwarf_filesrc(loaded.files, idx, null, null) as string | null) ?? null;
    };
  }

  /**
   * The formal parameters of the function `fnName` at physical frame `index` of a stopped
   * thread, read where the DWARF location at that pc is simple enough: DW_OP_fbreg on a
   * DW_OP_call_frame_cfa frame base, DW_OP_breg*, DW_OP_reg* (registers libdw recovered for that
   * frame), literals with DW_OP_stack_value; location lists through dwarf_getlocation_addr.
   * Values are the raw 64-bit words (callers narrow ints); unreadable parameters are absent.
   */
  frameArgs(
    pid: number,
    tid: number,
    index: number,
    fnName: string,
    read: (addr: bigint) => bigint | null,
    dwarfAt: DwarfAt | null = null,
  ): Map<string, bigint> {
    const out = new Map<string, bigint>();
    const p = this.procs.get(pid);
    if (!p) return out;
    const regs = this.frameRegisters(pid, tid, index);
    if (!regs) return out;
    const pc = index === 0 ? regs.pc : regs.pc - 1n;
    const mod = dw.dwfl_addrmodule(p.dwfl, pc);
    if (!mod) return out;
    // The DWARF half (which parameters, which location expression at this pc) is cached per
    // (build-id, offset, function): a warm snapshot evaluates copied ops in JS only.
    const m = this.moduleOf(p, mod);
    const key = `${m.key}:${(pc - m.start).toString(16)}:${fnName}`;
    const plan = this.planner.plan(key, () => dwarfAt?.(pc) ?? { mod, addr: pc }, fnName);
    if (plan === null) return out;
    let frameBase: bigint | null = regs.cfa;
    if (plan.frameBase !== 'cfa') {
      const fb = plan.frameBase === null ? null : evalOps(plan.frameBase, regs, null);
      frameBase = fb === null ? null : fb.kind === 'value' ? fb.v : fb.kind === 'mem' ? fb.addr : regs.cfa;
    }
    for (const param of plan.params) {
      const loc = evalOps(param.ops, regs, frameBase);
      if (loc === null || loc.kind === 'cfa') continue;
      const v = loc.kind === 'value' ? loc.v : read(loc.addr);
      if (v !== null) out.set(param.name, v);
    }
    return out;
  }

  /** Forget a process (exited, or no longer part of the job): its Dwfl is ended. */
  drop(pid: number): void {
    const p = this.procs.get(pid);
    if (!p) return;
    this.procs.delete(pid);
    dw.dwfl_end(p.dwfl);
    if (p.core) {
      // libdw is done with the core's Elf only after dwfl_end; the mapping goes with elf_end.
      elf.elf_end(p.core.elf);
      closeSync(p.core.fd);
    }
  }

  retain(keep: ReadonlySet<number>): void {
    for (const pid of [...this.procs.keys()]) if (!keep.has(pid)) this.drop(pid);
  }

  /** Ends every Dwfl and unregisters the frame callback. */
  dispose(): void {
    if (this.disposed) return;
    for (const pid of [...this.procs.keys()]) this.drop(pid);
    koffi.unregister(this.frameCb as Parameters<typeof koffi.unregister>[0]);
    if (this.threadCb !== null) koffi.unregister(this.threadCb as Parameters<typeof koffi.unregister>[0]);
    for (const b of this.owned.splice(0)) nativeFree(b);
    this.planner.dispose();
    this.disposed = true;
  }

  private own(block: unknown): unknown {
    this.owned.push(block);
    return block;
  }

  get cachedSymbols(): number {
    return this.symbols.size;
  }
}
