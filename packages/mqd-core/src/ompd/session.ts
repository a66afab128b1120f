// The OMPD host of a reader: finds a stopped rank's OpenMP runtime, loads the OMPD
// library it names (`ompd_dll_locations`), serves that library's callbacks over the same target
// access as the queue walk (the shim's page cache, the process image's symbols, the stopped
// threads' registers) and reads every OpenMP thread's state, parallel region and task in the
// stop. Everything the library hands over is released in the same read (handle management as
// the spec chapter says); nothing outlives the stop but the library itself, its state names and
// the type layouts it caches per runtime build (see `Shared`: libompd's state is per process).
//
// Runs only in a reader child (reader-main.ts) or a test: a library that crashes or loops takes
// that process down; the supervisor (reader/client.ts) learns which library through `onEnter`.
import { existsSync } from 'node:fs';
import { basename, isAbsolute } from 'node:path';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import koffi from 'koffi';
import { debugFileSearch } from '../inferior/debug-search.js';
import { EM_X86_64, ET_DYN } from '../inferior/elf.js';
import { openLibraryFile } from '../inferior/library-file.js';
import type { MappedModule } from '../inferior/process-image.js';
import { targetTypeSizes } from '../inferior/type-sizes.js';
import { permanentAlloc } from '../native/alloc.js';
import { checkDllPolicy } from '../policy/dll-policy.js';
import { tlsRelocations } from './elf-symbols.js';
import {
  CALLBACK_NAMES,
  type CallbackName,
  callbackProto,
  ENTRY_POINTS,
  OMPD_ADDRESS_SIZE,
  OMPD_API_VERSION,
  OMPD_THREAD_ID_LWP,
  OMPD_THREAD_ID_PTHREAD,
  type OmpdEntry,
  ompd_rc,
  rcName,
  WANTED_ICVS,
  type WantedIcv,
} from './ompd-spec.js';
import { labelOf, type OmpdProcess, type OmpdReadOptions, type RawOmpThread, type RawOpenMp } from './raw.js';
import {
  fsBaseOf,
  readCString,
  readStringBytes,
  readU64,
  type SpaceContext,
  symbolAddress,
  type ThreadContext,
  tlsAddress,
} from './target-access.js';

type Fn = (...args: unknown[]) => unknown;

const libc = koffi.load('libc.so.6');
const cMalloc = libc.func('uintptr_t malloc(size_t n)') as (n: number) => number | bigint;
const cFree = libc.func('void free(uintptr_t p)') as (p: bigint) => void;

/**
 * File names of OpenMP runtimes: LLVM's libomp (and its libiomp5 / libgomp compatibility names),
 * Intel's libiomp5, GNU's libgomp (which has no OMPD library: such a rank reads as no runtime).
 */
const OPENMP_RUNTIME_NAME = /^lib(omp|iomp5|gomp)(-[0-9.]+)?\.so(\.[0-9.]+)?$/;

/** Entries of ompd_dll_locations looked at (the runtime writes two). */
const MAX_LOCATIONS = 16;
const MAX_PATH = 4096;

/** A loaded, initialised OMPD library. */
interface OmpdLibrary {
  readonly path: string;
  readonly version: string;
  readonly f: Record<OmpdEntry, Fn>;
  /** State value → name (ompd_enumerate_states), filled on the first address space. */
  states: Map<bigint, string> | null;
  /** ICV ids by our names (ompd_enumerate_icvs), filled on the first address space. */
  icvs: Partial<Record<WantedIcv, { id: bigint; scope: number }>> | null;
}

const hex = (v: bigint) => `0x${v.toString(16)}`;

/**
 * What libompd keeps for the whole process, so we keep it per process too. LLVM's library
 * stores the callback table of `ompd_initialize` in statics (omp-debug.cpp), reads the type
 * sizes once (`initTypeSizes`), and caches the runtime's type layouts per address-space context
 * pointer for the life of the process (TargetValue.cpp `TTypeFactory`). Hence:
 * - each library is loaded and initialised once per process, with the one callback table; the
 *   table stays registered for the process's life (closing one host must not pull it from
 *   under another host's reads: koffi then refuses the call, "non-registered callback");
 * - callbacks serve the host whose read is running (`active`);
 * - an address-space context is one key per runtime build (`spaceKeys`), so the library's type
 *   cache holds one entry per runtime and never answers one build's layout for another's (a
 *   fresh key per read made it grow with every read and re-read every layout);
 * - blocks from `alloc_memory` are counted for the process (a block may outlive a host).
 */
interface Shared {
  readonly libs: Map<string, Result<OmpdLibrary, MqdError>>;
  readonly spaces: Map<number, SpaceContext>;
  readonly threads: Map<number, ThreadContext>;
  readonly spaceKeys: Map<string, number>;
  readonly blocks: Map<bigint, number>;
  readonly registered: ReturnType<typeof koffi.register>[];
  table: unknown;
  active: OmpdSession | null;
  nextKey: number;
}

/** The address-space context key of a runtime: one per build (build-id, else path), for the process. */
function spaceKey(runtime: MappedModule): number {
  const id = runtime.file.buildId ?? `path:${runtime.path}`;
  let key = shared.spaceKeys.get(id);
  if (key === undefined) {
    key = shared.nextKey++;
    shared.spaceKeys.set(id, key);
  }
  return key;
}

const shared: Shared = {
  libs: new Map(),
  spaces: new Map(),
  threads: new Map(),
  spaceKeys: new Map(),
  blocks: new Map(),
  registered: [],
  table: null,
  active: null,
  nextKey: 1,
};

function failed(what: string, rc: number, lib: string): MqdError {
  return mqdError('MQD_E_OMPD_FAILED', `${what} returned ${rcName(rc)} (${lib})`);
}

/**
 * The OMPD side of one reader (its log, counts and reads); the libraries, their callback table
 * and the context keys are the process's (`Shared`). Thread contexts are valid for one read.
 */
export class OmpdSession {
  private closed = false;
  /** print_string output, the last 200 (MQD_DEBUG=dll also puts the read's into the rank log). */
  readonly log: string[] = [];
  /** Receives print_string lines while a rank is read (the session's dllLog). */
  onPrint: ((line: string) => void) | null = null;
  /** Callbacks served, by name (tests, diagnostics). */
  readonly counts: Partial<Record<CallbackName, number>> = {};

  /**
   * Blocks any libompd of this process allocated through alloc_memory and has not freed (or we
   * have not freed for it); 0 between reads when nothing leaks.
   */
  outstandingBlocks(): number {
    return shared.blocks.size;
  }

  /**
   * Ends this host's reads. The libraries stay loaded and initialised and the callback table
   * registered: libompd keeps pointing at it, and other hosts of this process use it.
   */
  close(): void {
    this.closed = true;
  }

  /**
   * Reads the OpenMP threads of a stopped rank, in the stop. Never throws for expected failures:
   * no runtime is `none`, anything else a coded reason.
   */
  read(target: OmpdProcess, opts: OmpdReadOptions = {}): RawOpenMp {
    if (this.closed) return { kind: 'error', error: mqdError('MQD_E_INTERNAL', 'the OMPD host is closed') };
    const found = this.locate(target, opts);
    if (found === null) return { kind: 'none' };
    if (!found.ok) return { kind: 'error', error: found.error };
    const { runtime, path } = found.value;
    opts.onEnter?.(path);
    const previous = shared.active;
    shared.active = this;
    const space = spaceKey(runtime);
    try {
      const lib = this.library(path);
      if (!lib.ok) return { kind: 'error', error: lib.error };
      shared.spaces.set(space, { target, runtime, fsBase: new Map() });
      const r = this.readSpace(lib.value, space, target);
      if (!r.ok) return { kind: 'error', error: r.error };
      return {
        kind: 'read',
        runtime: runtime.path,
        ompd: path,
        version: lib.value.version,
        threads: r.value,
        image: target.image,
      };
    } finally {
      shared.spaces.delete(space);
      for (const [k, t] of shared.threads) if (t.space === space) shared.threads.delete(k);
      shared.active = previous;
    }
  }

  // ---- finding the runtime and its library ----------------------------------------------
  private locate(
    target: OmpdProcess,
    opts: OmpdReadOptions,
  ): Result<{ runtime: MappedModule; path: string }, MqdError> | null {
    // Only the executable (a static runtime) and libraries named like an OpenMP runtime are
    // searched: indexing the symbol table of every module a process maps (libc, libstdc++, the
    // MPI libraries' full .symtab) inside the stop would cost every rank without OpenMP.
    const candidates = target.image.modules.filter(
      (m) => m.path === target.image.exe || OPENMP_RUNTIME_NAME.test(basename(m.path)),
    );
    const runtime = candidates.find((m) => m.file.symbol('ompd_dll_locations') !== undefined);
    if (!runtime) {
      const stripped = candidates.map((m) => strippedRuntime(target, m)).find((e) => e !== null);
      return stripped ? err(stripped) : null;
    }
    const where = `${labelOf(target)}'s OpenMP runtime ${runtime.path}`;
    const sym = (name: string) => {
      const s = runtime.file.symbol(name);
      return s ? s.value + runtime.bias : null;
    };
    const stateAt = sym('ompd_state');
    const listAt = sym('ompd_dll_locations');
    const state = stateAt === null ? null : readU64(target, stateAt);
    const list = listAt === null ? null : readU64(target, listAt);
    if (stateAt === null) {
      return err(mqdError('MQD_E_OMPD_LOAD', `${where} defines ompd_dll_locations but no ompd_state`));
    }
    if (state === null || list === null) {
      return err(mqdError('MQD_E_OMPD_FAILED', `${where}: its OMPD variables could not be read`));
    }
    if (state === 0n || list === 0n) {
      return err(
        mqdError(
          'MQD_E_OMPD_DISABLED',
          `${where} keeps no OMPD state (ompd_state ${state}, ompd_dll_locations ${hex(list)}): the job must run with OMP_DEBUG=enabled`,
        ),
      );
    }
    const tried: string[] = [];
    for (let i = 0; i < MAX_LOCATIONS; i++) {
      const p = readU64(target, list + BigInt(8 * i));
      if (p === null || p === 0n) break;
      const name = readCString(target, p, MAX_PATH);
      if (name === null) break;
      tried.push(name);
      // Relative names are for a debugger's own search path; only a file the runtime names exactly
      // (a core's under its sysroot when it is there).
      if (!isAbsolute(name)) continue;
      const here = target.fileOnDisk?.(name) ?? name;
      if (!existsSync(here)) continue;
      const refused = opts.refused?.[here];
      if (refused !== undefined) {
        return err(
          mqdError(
            'MQD_E_OMPD_CRASHED',
            `${here} (named by ${where}) ${refused}; this reader does not load it again`,
          ),
        );
      }
      const allowed = checkDllPolicy(here, opts.policy ?? 'any');
      if (!allowed.ok) return err(allowed.error);
      return ok({ runtime, path: allowed.value });
    }
    return err(
      mqdError(
        'MQD_E_OMPD_LOAD',
        `${where} names no OMPD library that exists here (ompd_dll_locations: ${tried.length ? tried.join(', ') : 'empty'})`,
      ),
    );
  }

  /** Loads and initialises the library at `path` once per process (its failure is kept too). */
  private library(path: string): Result<OmpdLibrary, MqdError> {
    let lib = shared.libs.get(path);
    if (!lib) {
      lib = this.load(path);
      shared.libs.set(path, lib);
    }
    return lib;
  }

  private load(path: string): Result<OmpdLibrary, MqdError> {
    // Held open and checked first (never blocks, a regular file of bounded size), then loaded
    // through its held directory: its RUNPATH may be $ORIGIN (library-file.ts).
    const opened = openLibraryFile(path, 'directory');
    if (!opened.ok) {
      const r = opened.error;
      return err(mqdError('MQD_E_OMPD_LOAD', r.elf ? r.elf.message : `the OMPD library ${path} ${r.why}`));
    }
    const file = opened.value;
    const elf = file.elf;
    if (elf.class !== 64 || elf.machine !== EM_X86_64 || elf.type !== ET_DYN) {
      file.close();
      return err(
        mqdError(
          'MQD_E_OMPD_LOAD',
          `${path} is not an x86_64 ELF64 shared object (class ${elf.class}, machine ${elf.machine})`,
        ),
      );
    }
    let f: Record<OmpdEntry, Fn>;
    try {
      const lib = koffi.load(file.loadPath);
      const fns: Partial<Record<OmpdEntry, Fn>> = {};
      for (const [name, sig] of Object.entries(ENTRY_POINTS)) fns[name as OmpdEntry] = lib.func(sig) as Fn;
      f = fns as Record<OmpdEntry, Fn>;
    } catch (e) {
      return err(mqdError('MQD_E_OMPD_LOAD', `${path}: ${(e as Error).message}`));
    }
    const v = new BigInt64Array(1);
    let rc = f.ompd_get_api_version(v) as number;
    if (rc !== ompd_rc.ok) return err(failed('ompd_get_api_version', rc, path));
    if (v[0] !== BigInt(OMPD_API_VERSION)) {
      return err(
        mqdError(
          'MQD_E_OMPD_LOAD',
          `${path} speaks OMPD API version ${v[0]}; this reader speaks ${OMPD_API_VERSION}`,
        ),
      );
    }
    const s = new BigUint64Array(1);
    rc = f.ompd_get_version_string(s) as number;
    // The library owns this string (static): read it, never free it.
    const version = rc === ompd_rc.ok && s[0] ? this.hostString(s[0], 1024) : '';
    rc = f.ompd_initialize(
      BigInt(OMPD_API_VERSION),
      BigInt(koffi.address(OmpdSession.callbackTable())),
    ) as number;
    if (rc !== ompd_rc.ok) return err(failed('ompd_initialize', rc, path));
    return ok({ path, version, f, states: null, icvs: null });
  }

  // ---- the read ----------------------------------------------------------------------------
  private readSpace(lib: OmpdLibrary, space: number, target: OmpdProcess): Result<RawOmpThread[], MqdError> {
    const f = lib.f;
    const out = new BigUint64Array(1);
    let rc = f.ompd_process_initialize(BigInt(space), out) as number;
    if (rc !== ompd_rc.ok) return err(failed(`ompd_process_initialize (${labelOf(target)})`, rc, lib.path));
    const handle = out[0] ?? 0n;
    try {
      if (lib.states === null) {
        const states = this.enumerateStates(lib, handle);
        if (!states.ok) return states;
        lib.states = states.value;
      }
      lib.icvs ??= this.enumerateIcvs(lib, handle);
      const threads: RawOmpThread[] = [];
      for (const tid of [...target.tids].sort((a, b) => a - b)) {
        const id = new Int32Array([tid]);
        rc = f.ompd_get_thread_handle(handle, BigInt(OMPD_THREAD_ID_LWP), 4n, id, out) as number;
        // unavailable: not a thread of the OpenMP runtime (an MPI progress thread...).
        if (rc === ompd_rc.unavailable) continue;
        if (rc !== ompd_rc.ok) return err(failed(`ompd_get_thread_handle (tid ${tid})`, rc, lib.path));
        const th = out[0] ?? 0n;
        try {
          const t = this.readThread(lib, th, tid);
          if (!t.ok) return t;
          threads.push(t.value);
        } finally {
          f.ompd_rel_thread_handle(th);
        }
      }
      return ok(threads);
    } finally {
      f.ompd_rel_address_space_handle(handle);
    }
  }

  private readThread(lib: OmpdLibrary, th: bigint, tid: number): Result<RawOmpThread, MqdError> {
    const f = lib.f;
    const state = new BigInt64Array(1);
    const wait = new BigUint64Array(1);
    const rc = f.ompd_get_state(th, state, wait) as number;
    if (rc !== ompd_rc.ok) return err(failed(`ompd_get_state (tid ${tid})`, rc, lib.path));
    const s = state[0] ?? 0n;
    const name = lib.states?.get(s) ?? `state 0x${s.toString(16)}`;
    const threadNum = this.icv(lib, th, 'threadNum');
    const out = new BigUint64Array(1);
    let parallel: RawOmpThread['parallel'] = null;
    if ((f.ompd_get_curr_parallel_handle(th, out) as number) === ompd_rc.ok) {
      const ph = out[0] ?? 0n;
      try {
        const teamSize = this.icv(lib, ph, 'teamSize');
        const level = this.icv(lib, ph, 'levels');
        // Level 0 is the initial thread's own team: no parallel region.
        if (teamSize !== null && level !== null && level > 0) {
          parallel = { teamSize, level, activeLevel: this.icv(lib, ph, 'activeLevels') };
        }
      } finally {
        f.ompd_rel_parallel_handle(ph);
      }
    }
    let task: RawOmpThread['task'] = null;
    if ((f.ompd_get_curr_task_handle(th, out) as number) === ompd_rc.ok) {
      const tk = out[0] ?? 0n;
      try {
        const entry = new BigUint64Array(OMPD_ADDRESS_SIZE / 8);
        const frc = f.ompd_get_task_function(tk, entry) as number;
        const at = entry[1] ?? 0n;
        task = {
          entry: frc === ompd_rc.ok && at !== 0n ? at : null,
          implicit: this.icv(lib, tk, 'implicitTask'),
        };
      } finally {
        f.ompd_rel_task_handle(tk);
      }
    }
    return ok({ tid, threadNum, state: name, waitId: wait[0] ?? 0n, parallel, task });
  }

  /** An ICV of a handle of the ICV's scope, or null (unknown ICV, or the library said no). */
  private icv(lib: OmpdLibrary, handle: bigint, which: WantedIcv): number | null {
    const icv = lib.icvs?.[which];
    if (!icv) return null;
    const v = new BigInt64Array(1);
    const rc = lib.f.ompd_get_icv_from_scope(handle, icv.scope, icv.id, v) as number;
    return rc === ompd_rc.ok ? Number(v[0] ?? 0n) : null;
  }

  /** Every state name, once per library; each name string is freed with free_memory (the spec). */
  private enumerateStates(lib: OmpdLibrary, handle: bigint): Result<Map<bigint, string>, MqdError> {
    const states = new Map<bigint, string>();
    const next = new BigInt64Array(1);
    const name = new BigUint64Array(1);
    const more = new BigInt64Array(1);
    // ompt_state_undefined (0x102) starts the enumeration.
    let current = 0x102n;
    for (let i = 0; i < 1024; i++) {
      name[0] = 0n;
      const rc = lib.f.ompd_enumerate_states(handle, current, next, name, more) as number;
      if (rc !== ompd_rc.ok) return err(failed('ompd_enumerate_states', rc, lib.path));
      const at = name[0] ?? 0n;
      if (at !== 0n) {
        states.set(next[0] ?? 0n, this.hostString(at, 128));
        this.release(at);
      }
      if ((more[0] ?? 0n) === 0n) break;
      current = next[0] ?? 0n;
    }
    return ok(states);
  }

  private enumerateIcvs(
    lib: OmpdLibrary,
    handle: bigint,
  ): Partial<Record<WantedIcv, { id: bigint; scope: number }>> {
    const wanted = new Map<string, WantedIcv>(
      Object.entries(WANTED_ICVS).map(([k, v]) => [v, k as WantedIcv]),
    );
    const found: Partial<Record<WantedIcv, { id: bigint; scope: number }>> = {};
    const next = new BigUint64Array(1);
    const name = new BigUint64Array(1);
    const scope = new Int32Array(1);
    const more = new Int32Array(1);
    let current = 0n;
    for (let i = 0; i < 1024; i++) {
      name[0] = 0n;
      const rc = lib.f.ompd_enumerate_icvs(handle, current, next, name, scope, more) as number;
      if (rc !== ompd_rc.ok) break;
      const at = name[0] ?? 0n;
      if (at !== 0n) {
        const n = this.hostString(at, 128);
        this.release(at);
        const key = wanted.get(n);
        if (key && !found[key]) found[key] = { id: next[0] ?? 0n, scope: scope[0] ?? 0 };
      }
      if ((more[0] ?? 0) === 0) break;
      current = next[0] ?? 0n;
    }
    return found;
  }

  /** A NUL-terminated string in our own memory (one libompd returned). */
  private hostString(addr: bigint, max: number): string {
    const s = koffi.decode(Number(addr), 'char', -1) as string;
    return s.slice(0, max);
  }

  /** Frees a block libompd allocated through alloc_memory and handed to us. */
  private release(addr: bigint): void {
    if (shared.blocks.delete(addr)) cFree(addr);
  }

  // ---- the callbacks ---------------------------------------------------------------------
  /** The process's one callback table (permanent: libompd keeps it; koffi trap 1, README.md). */
  private static callbackTable(): unknown {
    if (shared.table) return shared.table;
    const impl = OmpdSession.callbacks();
    const block = permanentAlloc('uintptr_t', CALLBACK_NAMES.length);
    const view = new BigUint64Array(koffi.view(block, 8 * CALLBACK_NAMES.length));
    CALLBACK_NAMES.forEach((n, i) => {
      const f = impl[n];
      const counted = (...args: unknown[]) => {
        const host = shared.active;
        if (host) host.counts[n] = (host.counts[n] ?? 0) + 1;
        try {
          return f(...args);
        } catch (e) {
          // Never throw into C (koffi trap 2, README.md).
          host?.print(`debugger: callback ${n} failed: ${(e as Error).message}`);
          return ompd_rc.callback_error;
        }
      };
      const ptr = koffi.register(counted, koffi.pointer(callbackProto[n]));
      shared.registered.push(ptr);
      view[i] = BigInt(koffi.address(ptr));
    });
    shared.table = block;
    return block;
  }

  private print(line: string): void {
    if (this.log.length >= 200) this.log.shift();
    this.log.push(line);
    this.onPrint?.(line);
  }

  /** The callbacks, serving the host whose read is running (a call outside any read fails). */
  private static callbacks(): Record<CallbackName, Fn> {
    const host = (): OmpdSession => {
      if (!shared.active) throw new Error('called outside any read');
      return shared.active;
    };
    const space = (ctx: unknown): SpaceContext | undefined => shared.spaces.get(Number(ctx));
    const thread = (tctx: unknown): ThreadContext | null | undefined =>
      Number(tctx) === 0 ? null : shared.threads.get(Number(tctx));
    const address = (p: unknown): bigint => new BigUint64Array(koffi.view(p, OMPD_ADDRESS_SIZE))[1] ?? 0n;
    const copy: Fn = (ctx, input, unit, count, output) => {
      if (!space(ctx) || !input || !output) return ompd_rc.bad_input;
      // Same byte order and sizes on both sides (x86_64 host, LP64 targets only).
      const n = Number(unit) * Number(count);
      new Uint8Array(koffi.view(output, n)).set(new Uint8Array(koffi.view(input, n)));
      return ompd_rc.ok;
    };
    return {
      alloc_memory: (nbytes, ptr) => {
        if (!ptr) return ompd_rc.bad_input;
        const a = BigInt(cMalloc(Math.max(1, Number(nbytes))));
        if (a === 0n) return ompd_rc.nomem;
        shared.blocks.set(a, Number(nbytes));
        koffi.encode(ptr, 'uint64_t', a);
        return ompd_rc.ok;
      },
      free_memory: (p) => {
        const a = BigInt(p as number | bigint);
        if (a === 0n) return ompd_rc.ok;
        if (!shared.blocks.delete(a)) return ompd_rc.bad_input; // not ours: never free it
        cFree(a);
        return ompd_rc.ok;
      },
      print_string: (text) => {
        host().print(
          String(text ?? '')
            .replace(/\n$/, '')
            .slice(0, 4096),
        );
        return ompd_rc.ok;
      },
      sizeof_type: (ctx, sizes) => {
        const s = space(ctx);
        if (!s || !sizes) return ompd_rc.bad_input;
        // The executable as opened here (a core's may be under --exe or --sysroot).
        const img = s.target.image;
        const got = s.target.typeSizes
          ? ok(s.target.typeSizes)
          : targetTypeSizes(img.modules.find((m) => m.path === img.exe)?.file.path ?? img.exe);
        if (!got.ok) return ompd_rc.unsupported;
        const [short, int, long, longLong, pointer] = got.value;
        new Uint8Array(koffi.view(sizes, 6)).set([1, short, int, long, longLong, pointer]);
        return ompd_rc.ok;
      },
      symbol_addr_lookup: (ctx, tctx, name, addr, file) => {
        const s = space(ctx);
        const th = thread(tctx);
        if (!s || th === undefined || typeof name !== 'string' || !addr) return ompd_rc.bad_input;
        const f = typeof file === 'string' ? file : null;
        let a: bigint | null = null;
        if (th) a = tlsAddress(s, th, name, f);
        a ??= symbolAddress(s, name, f);
        if (a === null) return ompd_rc.error;
        const out = new BigUint64Array(koffi.view(addr, OMPD_ADDRESS_SIZE));
        out[0] = 0n;
        out[1] = a;
        return ompd_rc.ok;
      },
      read_memory: (ctx, _tctx, addr, nbytes, buffer) => {
        const s = space(ctx);
        if (!s || !addr || !buffer) return ompd_rc.bad_input;
        const n = Number(nbytes);
        if (n === 0) return ompd_rc.ok;
        const into = new Uint8Array(koffi.view(buffer, n));
        return s.target.hot.read(s.target.memKey, address(addr), n, into) ? ompd_rc.ok : ompd_rc.error;
      },
      write_memory: () => ompd_rc.unsupported, // a reader never changes its target
      read_string: (ctx, _tctx, addr, nbytes, buffer) => {
        const s = space(ctx);
        if (!s || !addr || !buffer) return ompd_rc.bad_input;
        const n = Number(nbytes);
        if (n === 0) return ompd_rc.bad_input;
        const bytes = readStringBytes(s.target, address(addr), n - 1);
        if (bytes === null) return ompd_rc.error;
        const into = new Uint8Array(koffi.view(buffer, bytes.length + 1));
        into.set(bytes);
        into[bytes.length] = 0;
        return ompd_rc.ok;
      },
      device_to_host: copy,
      host_to_device: copy,
      get_thread_context_for_thread_id: (ctx, kind, size, id, out) => {
        const s = space(ctx);
        if (!s || !id || !out) return ompd_rc.bad_input;
        const k = Number(kind);
        const n = Number(size);
        const raw = new DataView(koffi.view(id, n));
        let tid: number | null = null;
        if (k === OMPD_THREAD_ID_LWP) {
          tid = n === 4 ? raw.getInt32(0, true) : n === 8 ? Number(raw.getBigInt64(0, true)) : null;
        } else if (k === OMPD_THREAD_ID_PTHREAD) {
          // glibc x86_64: a pthread_t is the thread's TCB, which fs_base points at.
          if (n !== 8) return ompd_rc.bad_input;
          const want = raw.getBigUint64(0, true);
          tid = s.target.tids.find((t) => fsBaseOf(s, t) === want) ?? null;
        } else {
          return ompd_rc.unsupported;
        }
        if (tid === null || !s.target.tids.includes(tid)) return ompd_rc.bad_input;
        const fsBase = fsBaseOf(s, tid);
        if (fsBase === null) return ompd_rc.error;
        const key = shared.nextKey++;
        shared.threads.set(key, { space: Number(ctx), tid, fsBase });
        koffi.encode(out, 'uint64_t', BigInt(key));
        return ompd_rc.ok;
      },
    };
  }
}

/**
 * A stripped LLVM/Intel OpenMP runtime whose debug file was not found: its OMPD symbols
 * (`ompd_dll_locations`, `__kmp_gtid`, the `ompd_*` layout variables) are LOCAL, so only in the
 * .symtab that went into the debug file. Says which file and where to install the debug file;
 * null when `m` is not such a runtime (GNU's libgomp, which has no OMPD, is never one).
 */
function strippedRuntime(target: OmpdProcess, m: MappedModule): MqdError | null {
  if (m.path === target.image.exe || m.file.symbol('__kmpc_fork_call') === undefined) return null;
  const rel = tlsRelocations(m.file.path);
  if (rel === null || rel.hasSymtab || m.file.separateDebugFile() !== null) return null;
  // Where libdw looked: next to the file as opened here (a core's may be under --sysroot).
  const places = debugFileSearch(m.file.path, m.file.buildId, rel.debuglink);
  return mqdError(
    'MQD_E_OMPD_NO_SYMBOLS',
    `${labelOf(target)}'s OpenMP runtime ${m.path} is stripped (no .symtab) and its debug file was not found ` +
      `(build-id ${m.file.buildId ?? 'none'}${rel.debuglink ? `, .gnu_debuglink ${rel.debuglink}` : ''}); ` +
      // Capped: the snapshot's messages are at most 4096 characters (a long MQD_DEBUGINFO_PATH).
      `looked for ${places.join(', ')}`.slice(0, 3000),
  );
}
