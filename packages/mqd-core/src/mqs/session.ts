// The debugger side of one MQD DLL, hosted in this process: loads the DLL, gives it the
// callback tables, keeps image and process infos through their lifecycles, and walks the
// communicators and three queues of a stopped process. Runs inside the reader child
// (reader/reader-main.ts): a DLL that crashes or loops takes this process down, not the agent.
// The one-stop read of a rank (stop, walk, unwind, OMPD, resume) is rank-read/one-stop.ts;
// each MPI library's quirks are in libraries/.

import {
  clipText,
  err,
  MAX_MISSING_FIELD_CHARS,
  MAX_PATH_CHARS,
  MAX_RENAMED_FIELD_CHARS,
  MAX_VERSION_CHARS,
  type MpiLibrary,
  type MqdError,
  mqdError,
  ok,
  quoteName,
  type RankSnapshot,
  type Result,
} from '@mqd/model';
import koffi from 'koffi';
import type { OpenedCore } from '../inferior/core-image.js';
import type { DebugFileRegistry } from '../inferior/debug-file-registry.js';
import { procStartTime } from '../inferior/proc.js';
import { ProcessImage } from '../inferior/process-image.js';
import type { HotPath } from '../inferior/shim.js';
import { type TypeSizes, targetTypeSizes } from '../inferior/type-sizes.js';
import { dlsymAddress } from '../native/libc.js';
import { decodeCommunicator, decodeGroup } from './decode.js';
import { callbackTable, type Fn, type KoffiLib, loadDll, nativeString } from './dll-load.js';
import { DllTypes } from './dll-types.js';
import { newestFirstQueue, quirksOfDll } from './libraries/index.js';
import {
  type CompletedCheck,
  type CorrectedStatus,
  type LibraryQuirks,
  type RankMemory,
  rankMemory,
} from './libraries/library.js';
import {
  BASIC_CALLBACKS,
  CALLBACK_FAILURE,
  CALLBACK_FAILURE_TEXT,
  COMMUNICATOR,
  ENTRY_POINTS,
  type EntryName,
  IMAGE_CALLBACKS,
  mqs_end_of_list,
  mqs_no_information,
  mqs_ok,
  OPTIONAL_ENTRY_POINTS,
  PENDING_OPERATION,
  PROCESS_CALLBACKS,
} from './mqs-spec.js';
import {
  assembleWalk,
  entryBudget,
  findCorrections,
  MIN_OPERATION_JSON_BYTES,
  QUEUES,
  type QueueName,
  type RawCommunicator,
  type RawQueue,
  type RawWalk,
  type StopRecords,
  stopMemoryError,
  substituteName,
} from './walk.js';

export { MIN_OPERATION_JSON_BYTES } from './walk.js';

/**
 * `MQD_DEBUG=dll` (a comma list, read once, here; readers inherit the agent's environment): the
 * DLL's dprints made while a rank is read go into that rank as `dllLog`. Always kept, the last
 * 200, in `MqsSession.dprints`.
 */
const DEBUG_DLL = (process.env['MQD_DEBUG'] ?? '').split(',').includes('dll');

export interface SessionOptions {
  readonly registry: DebugFileRegistry;
  readonly readBudgetBytes: number;
  readonly stopTimeoutMs: number;
  /** Hook for tests of the kill -9 guarantee: called while a rank is stopped. */
  readonly whileStopped?: (pid: number) => void;
}

/** Which rank to read: its pid, its rank in MPI_COMM_WORLD, the host it runs on. */
export interface RankRef {
  readonly pid: number;
  readonly rank: number;
  readonly host: string;
}

/** A rank read from a core file; `pid` is a negative key standing for the core. */
export interface CoreRankRef extends RankRef {
  readonly core: OpenedCore;
}

/** Why a process could not be set up: the DLL found no queues, or an error. */
export interface NotSetUp {
  readonly kind: 'error' | 'no-queues';
  readonly error: MqdError;
}

/** A process the DLL has set up (its image and process infos), by the shim keys of both. */
export interface MqsProcess {
  readonly key: number;
  readonly imageKey: number;
  readonly pid: number;
  readonly startTime: string;
  rank: number;
  readonly image: ProcessImage;
  ready: boolean;
}

export class MqsSession {
  readonly library: MpiLibrary;
  /** What this library needs beyond the mqs_* interface (libraries/). */
  readonly quirks: LibraryQuirks;
  readonly version: string;
  private readonly fns: Record<EntryName, Fn>;
  private readonly getCommGroup: Fn | null;
  private readonly keep: unknown[] = [];
  private readonly processes = new Map<number, MqsProcess>();
  private readonly byPid = new Map<number, MqsProcess>();
  private readonly byImage = new Map<number, MqsProcess>();
  /** The target types the DLL found, and the fields it missed (dll-types.ts). */
  private readonly types = new DllTypes();
  /** Queues this DLL walks from a list that holds the newest entry first (LibraryQuirks.newestFirstLists). */
  private readonly newestFirst = new Set<QueueName>();
  private readonly errorStrings = new Map<number, unknown>();
  /** The native hot path: process callbacks, memory reads, queue walks (shim.ts). */
  private readonly hot: HotPath;
  /** The DLL's mqs_next_operation, for walks run natively. */
  private readonly nextOperation: bigint;
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
  /** Called with the pid of every process the DLL forgets (the one-stop reader drops its unwinder state). */
  onForget: ((pid: number) => void) | null = null;

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
    this.quirks = quirksOfDll(dllPath, this.version);
    this.library = this.quirks.library;
    this.basicCb = this.table(BASIC_CALLBACKS, this.basicImpl());
    this.imageCb = this.table(IMAGE_CALLBACKS, this.imageImpl());
    this.processCb = this.table(PROCESS_CALLBACKS, this.processImpl());
    this.fns.mqs_setup_basic_callbacks(this.basicCb);
  }

  /** Vets and loads a DLL (dll-load.ts: ELF, this machine's architecture, compatibility level 2, width 8). */
  static open(dllPath: string, opts: SessionOptions): Result<MqsSession, MqdError> {
    const dll = loadDll(dllPath);
    if (!dll.ok) return dll;
    const { lib, handle, hot } = dll.value;
    try {
      return ok(new MqsSession(dllPath, lib, handle, hot, opts));
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
    return callbackTable(names, impl, this.hot, this.keep, this.jsCounts);
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
          const newest = newestFirstQueue(name);
          if (newest) this.newestFirst.add(newest);
          if (addr) koffi.encode(addr, 'uint64_t', s.address);
          return mqs_ok;
        }),
      find_type: (image, name, _lang) =>
        this.guard(0, () => {
          const t = this.byImage.get(Number(image));
          if (!t || typeof name !== 'string') return 0;
          return this.types.find(t.image, name);
        }),
      field_offset: (type, field) =>
        this.guard(-1, () => {
          return typeof field === 'string' ? this.types.fieldOffset(Number(type), field) : -1;
        }),
      sizeof: (type) =>
        this.guard(-1, () => {
          return this.types.sizeOf(Number(type));
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
  /** Destroys the DLL's infos of a process and forgets it. */
  forget(t: MqsProcess): void {
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
    this.onForget?.(t.pid);
  }

  /** Drops processes that are not in `keep` (the job shrank or ended). */
  retain(keep: ReadonlySet<number>): void {
    for (const t of [...this.processes.values()]) if (!keep.has(t.pid)) this.forget(t);
  }

  close(): void {
    for (const t of [...this.processes.values()]) this.forget(t);
  }

  /** A line for the log of the rank being read (MQD_DEBUG=dll: its dllLog), e.g. libompd's prints. */
  logToRank(line: string): void {
    if (DEBUG_DLL && this.rankLog && this.rankLog.length < 200) this.rankLog.push(line);
  }

  /** The process of a live rank, set up (image + process lifecycles) on first use. */
  process(r: RankRef): Result<MqsProcess, NotSetUp> {
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
  private setUp(t: MqsProcess): Result<true, NotSetUp> {
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
   * The process of a rank read from a core file, set up afresh with its memory served from the
   * core's regions (every core is read once: the reader forgets it after the read).
   */
  coreProcess(r: CoreRankRef): Result<MqsProcess, NotSetUp> {
    const old = this.byPid.get(r.pid);
    if (old) this.forget(old);
    const t = this.register(r, 'core', r.core.image);
    this.hot.setRegions(t.key, r.core.regions);
    const set = this.setUp(t);
    return set.ok ? ok(t) : set;
  }

  /** Opens the stop of `t` in the shim: the reads from here on share one page cache and budget. */
  beginStop(t: MqsProcess): void {
    this.hot.beginStop(t.key);
  }

  /** Closes the stop: the records its walks read, copied out of the shim (after the resume). */
  endStop(): StopRecords {
    const records = this.hot.takeRecords(PENDING_OPERATION.size);
    this.hot.endStop();
    return records;
  }

  /** The stopped process's symbols, types and memory (through the stop's page cache). */
  memory(t: MqsProcess): RankMemory {
    return rankMemory(
      t.image,
      (addr, len) => {
        const b = new Uint8Array(len);
        return this.hot.read(t.key, addr, len, b) ? b : null;
      },
      (addr, into) => this.hot.read(t.key, addr, into.length, into),
    );
  }

  /** The target's type sizes, read from its executable's ELF when it was set up. */
  typeSizesOf(t: MqsProcess): TypeSizes | undefined {
    return this.typeSizes.get(t.key);
  }

  /** The native hot path this session reads through (OMPD's callbacks read the same memory). */
  get hotPath(): HotPath {
    return this.hot;
  }

  /**
   * The walk, while the rank is stopped: every communicator's record and group, and each queue's
   * raw records (the DLL's mqs_next_operation run in C until it stops). Nothing is decoded here.
   * A DLL error cuts the walk short and is kept (with what was read before it): the rank is then
   * an error carrying the DLL's message, never "ok" with fewer communicators.
   */
  walk(t: MqsProcess, maxRankBytes?: number): Result<RawWalk, MqdError> {
    const f = this.fns;
    const maxEntries = entryBudget(maxRankBytes);
    let walked = 0;
    this.callbackFailures = [];
    const worldId = this.quirks.worldId(t.image);
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
    // The library's own state, for the operations its DLL may call complete wrongly (prepared
    // once per stop, at the first queue with entries).
    let check: CompletedCheck | null | undefined;
    const completedCheck = () => {
      if (check === undefined) {
        try {
          check = this.quirks.completedCheck?.(this.memory(t)) ?? null;
        } catch (e) {
          this.dprints.push(`debugger: preparing the status check: ${(e as Error).message}`);
          check = null;
        }
      }
      return check;
    };
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
        const queues: [QueueName, RawQueue][] = [];
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
          const corrections = q === 'unexpected' ? undefined : this.correctionsOf(t, walk, completedCheck);
          queues.push([
            q,
            {
              kind: 'records',
              first: walk.first,
              count: walk.count,
              rc: walk.rc,
              why,
              ...(corrections ? { corrections } : {}),
            },
          ]);
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

  /**
   * In the stop: the statuses of this walk's records that the library's own state corrects
   * (LibraryQuirks.completedCheck; walk.ts findCorrections). A corrupt target costs only the
   * corrections, never the walk.
   */
  private correctionsOf(
    t: MqsProcess,
    walk: { readonly first: number; readonly count: number },
    completedCheck: () => CompletedCheck | null,
  ): ReadonlyMap<number, CorrectedStatus> | undefined {
    if (walk.count === 0 || !this.quirks.completedCheck) return undefined;
    const check = completedCheck();
    if (!check) return undefined;
    try {
      return findCorrections(
        (first, n, into) => this.hot.copyRecords(first, n, PENDING_OPERATION.size, into),
        walk.first,
        walk.count,
        check,
      );
    } catch (e) {
      this.dprints.push(`debugger: checking statuses of pid ${t.pid}: ${(e as Error).message}`);
      return undefined;
    }
  }

  /** The communicators' Fortran handles, read in the same stop as the walk. */
  private fortranOf(t: MqsProcess, comms: readonly RawCommunicator[]): ReadonlyMap<string, number | null> {
    return this.quirks.fortranHandles(
      this.memory(t),
      comms.map((c) => c.header.id),
    );
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
      return this.quirks.remoteGroup(this.memory(t), id);
    } catch (e) {
      this.dprints.push(`debugger: reading the kind of communicator ${id}: ${(e as Error).message}`);
    }
    return undefined;
  }

  /** Turns the walk's raw records into the model's communicators (after the rank resumed, walk.ts). */
  assemble(walk: RawWalk, records: StopRecords): ReturnType<typeof assembleWalk> {
    return assembleWalk(walk, records, {
      libraryName: this.quirks.displayName,
      unexpectedUnit: this.types.unexpectedLengthUnit(this.library),
      newestFirst: this.newestFirst,
      dllError: (code, what, why) => this.dllError(code, what, undefined, why),
      ...(this.quirks.correctionNotes ? { correctionNotes: this.quirks.correctionNotes } : {}),
    });
  }

  /** The stop's memory failure that makes the whole read fail (walk.ts stopMemoryError). */
  private memoryError(t: MqsProcess): MqdError | null {
    return stopMemoryError(this.hot.failure(t.key), t, this.opts.readBudgetBytes);
  }

  /**
   * The DLL that read a rank, recorded on the rank (MPMD jobs read by two DLLs). Its texts come
   * from the DLL the job names and the field names it asks for: cut to the snapshot spec's
   * limits here, so the rank is never refused downstream (a 1,040-character
   * missingFields entry was stored, then refused by the dashboard's decoder).
   */
  dllInfo(): { path: string; version: string; missingFields?: string[]; renamedFields?: string[] } {
    const { missingFields, renamedFields } = this.types.gaps();
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
  withLog(read: () => RankSnapshot): RankSnapshot {
    if (!DEBUG_DLL) return read();
    const log: string[] = [];
    this.rankLog = log;
    try {
      return { ...read(), dllLog: log };
    } finally {
      this.rankLog = null;
    }
  }
}
