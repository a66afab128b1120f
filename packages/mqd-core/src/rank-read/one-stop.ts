// The one-stop rank read: stop the rank, let the DLL walk its communicators and queues, unwind
// every thread and read the MPI call's arguments, read its OpenMP threads through OMPD, resume
// it; assemble after the resume. A core is read the same way with memory from the core and no
// stop. Runs inside the reader child (reader/reader-main.ts): a DLL that crashes or loops takes
// this process down, not the agent. The DLL itself, its callbacks and the walk are MqsSession's.
import {
  type EvalRequest,
  MAX_FRAMES_PER_THREAD,
  type MqdError,
  mqdError,
  ok,
  type RankSnapshot,
  type RankValue,
  type Result,
  rankNotRead,
} from '@mqd/model';
import { stopProcess } from '../inferior/stopper.js';
import { capThreads, Unwinder, type UnwoundRank } from '../inferior/unwind.js';
import {
  type CoreRankRef,
  type MqsProcess,
  MqsSession,
  type RankRef,
  type SessionOptions,
} from '../mqs/session.js';
import type { RawWalk, StopRecords } from '../mqs/walk.js';
import type { OmpdProcess, OmpdReadOptions, RawOpenMp } from '../ompd/raw.js';
import { OmpdSession } from '../ompd/session.js';
import { type PythonRead, readPython } from '../python/read.js';
import { readUcx, type UcxRead } from '../ucx/read.js';
import { ValueReader } from '../values/read.js';
import { type RawMpiArgs, readMpiArgs } from './mpi-args.js';
import { rankSnapshotOf } from './rank-snapshot.js';

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
  /** Expressions to read in the same stop (values/read.ts); each rank's values carry them in order. */
  readonly evals?: readonly EvalRequest[];
}

/** One DLL's session and the unwinder and OMPD session that read the same stops. */
export class OneStopReader {
  /** libdw unwinder for the stacks read in the same stop (created on first use). */
  private unwinder: Unwinder | null = null;
  /** The OMPD session for the OpenMP threads read in the same stop (created on first use). */
  private ompdSession: OmpdSession | null = null;
  /** The reader of expressions across ranks (created on first use). */
  private valueReader: ValueReader | null = null;

  private constructor(
    readonly session: MqsSession,
    private readonly opts: SessionOptions,
  ) {
    // A process the DLL forgets is forgotten by the unwinder too (its Dwfl, its cached frames).
    session.onForget = (pid) => this.unwinder?.drop(pid);
  }

  /** MqsSession.open, and a reader of ranks through it. */
  static open(dllPath: string, opts: SessionOptions): Result<OneStopReader, MqdError> {
    const s = MqsSession.open(dllPath, opts);
    return s.ok ? ok(new OneStopReader(s.value, opts)) : s;
  }

  get dllPath(): string {
    return this.session.dllPath;
  }

  /** Drops processes that are not in `keep` (the job shrank or ended). */
  retain(keep: ReadonlySet<number>): void {
    this.session.retain(keep);
  }

  close(): void {
    this.session.close();
    this.unwinder?.dispose();
    this.unwinder = null;
    this.ompdSession?.close();
    this.ompdSession = null;
    this.valueReader?.dispose();
    this.valueReader = null;
  }

  /** The OMPD session of this reader (tests: outstanding OMPD blocks, callback counts). */
  get ompd(): OmpdSession {
    if (!this.ompdSession) {
      const ompd = new OmpdSession();
      // libompd's print_string goes where the DLL's dprints go (MQD_DEBUG=dll: the rank's dllLog).
      ompd.onPrint = (line) => this.session.logToRank(`ompd: ${line}`);
      this.ompdSession = ompd;
    }
    return this.ompdSession;
  }

  /**
   * Stops the rank, reads every communicator and queue and (unless `stacks` is false) unwinds
   * every thread in the same stop, resumes it. Never throws for expected failures.
   */
  snapshotRank(r: RankRef, opts: RankReadOptions = {}): RankSnapshot {
    return this.session.withLog(() => this.readRank(r, opts));
  }

  /**
   * A rank from a core file: the same walk as a live stop, with memory served from the core
   * (no stop, nothing to resume), stacks and OpenMP threads from the core's threads. The core's
   * setup is forgotten afterwards: every core is read once.
   */
  snapshotCore(r: CoreRankRef, opts: RankReadOptions = {}): RankSnapshot {
    return this.session.withLog(() => this.readCore(r, opts));
  }

  private readRank(r: RankRef, opts: RankReadOptions): RankSnapshot {
    const s = this.session;
    const base = { rank: r.rank, pid: r.pid, host: r.host };
    const wantStacks = opts.stacks !== false;
    const tgt = s.process(r);
    if (!tgt.ok) {
      return { ...rankNotRead(base, tgt.error.error, tgt.error.kind), dll: s.dllInfo() };
    }
    const t = tgt.value;
    const stop = stopProcess(r.pid, this.opts.stopTimeoutMs);
    if (!stop.ok) return rankNotRead(base, stop.error);
    let walk: Result<RawWalk, MqdError>;
    let stacks: UnwoundRank | MqdError | null = null;
    let mpiArgs: RawMpiArgs | null = null;
    let openMp: RawOpenMp | null = null;
    let python: PythonRead | null = null;
    let ucx: UcxRead | null = null;
    let values: RankValue[] | null = null;
    let paused: number;
    let records: StopRecords;
    try {
      s.beginStop(t);
      this.opts.whileStopped?.(r.pid);
      walk = s.walk(t, opts.maxRankBytes);
      ucx = this.readUcx(t);
      // One stop serves all three: stacks and OpenMP threads describe the same instant as the queues.
      if (wantStacks) {
        stacks = this.readStacks(t, stop.value.tids);
        if (!('code' in stacks)) mpiArgs = this.readMpiArgs(t, stacks);
        // The same threads as the stacks (capThreads): the OpenMP list has the same limit.
        openMp = this.readOpenMp(t, capThreads(r.pid, stop.value.tids).kept, opts.ompd ?? {});
        python = this.readPython(t, capThreads(r.pid, stop.value.tids).kept);
      }
      if (opts.evals && opts.evals.length > 0) values = this.readValues(t, stacks, opts.evals);
    } finally {
      // Whatever happened, the rank runs again before anything else: even the copy of the
      // records out of the shim (16 MB for 40,000 operations) is made after the resume.
      paused = stop.value.resume();
      records = s.endStop();
    }
    // Decoding happens after the resume: the rank pays only for the walk.
    const snap = rankSnapshotOf(s, { base, walk, records, stacks, mpiArgs, paused, openMp, python, ucx });
    return values === null ? snap : { ...snap, values };
  }

  private readCore(r: CoreRankRef, opts: RankReadOptions): RankSnapshot {
    const s = this.session;
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
    const set = s.coreProcess(r);
    if (!set.ok) return { ...rankNotRead(base, set.error.error, set.error.kind), dll: s.dllInfo() };
    const t = set.value;
    let walk: Result<RawWalk, MqdError>;
    let stacks: UnwoundRank | MqdError | null = null;
    let mpiArgs: RawMpiArgs | null = null;
    let openMp: RawOpenMp | null = null;
    let python: PythonRead | null = null;
    let ucx: UcxRead | null = null;
    let records: StopRecords;
    try {
      s.beginStop(t);
      walk = s.walk(t, opts.maxRankBytes);
      ucx = this.readUcx(t);
      if (opts.stacks !== false) {
        stacks = this.readCoreStacks(r);
        if (!('code' in stacks)) mpiArgs = this.readMpiArgs(t, stacks);
        // As live: the threads of the core's NT_PRSTATUS notes, each with its saved fs_base.
        openMp = this.readOpenMp(
          t,
          capThreads(
            r.core.info.pid,
            r.core.info.threads.map((x) => x.tid),
          ).kept,
          // A caller that passes no OMPD options gets the strictest policy, never less than the site's.
          opts.ompd ?? { policy: 'root-owned' },
          {
            label: `the core ${r.core.path}`,
            threadPointers: r.core.threadPointers(),
            fileOnDisk: (p) => r.core.fileOnDisk(p),
          },
        );
        python = this.readPython(
          t,
          r.core.info.threads.map((x) => x.tid),
        );
      }
    } finally {
      records = s.endStop();
      s.forget(t);
    }
    return rankSnapshotOf(s, { base, walk, records, stacks, mpiArgs, paused: 0, openMp, python, ucx });
  }

  /** The expressions read in this stop, in the frames they name (values/read.ts). */
  private readValues(
    t: MqsProcess,
    stacks: UnwoundRank | MqdError | null,
    evals: readonly EvalRequest[],
  ): RankValue[] {
    this.valueReader ??= new ValueReader();
    return this.valueReader.read(evals, {
      pid: t.pid,
      image: t.image,
      mem: this.session.memory(t),
      threads: stacks === null || 'code' in stacks ? null : stacks.threads,
      unwinder: stacks === null || 'code' in stacks ? null : this.unwinder,
    });
  }

  private readStacks(t: MqsProcess, tids: readonly number[]): UnwoundRank | MqdError {
    try {
      this.unwinder ??= new Unwinder();
      return this.unwinder.unwind(t.pid, tids, MAX_FRAMES_PER_THREAD, t.image.dwarfAt);
    } catch (e) {
      return mqdError('MQD_E_NO_STACKS', `pid ${t.pid}: ${(e as Error).message}`);
    }
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

  private readMpiArgs(t: MqsProcess, stacks: UnwoundRank): RawMpiArgs | null {
    if (!this.unwinder) return null;
    return readMpiArgs(this.unwinder, t.pid, t.image, this.session.memory(t), this.session.quirks, stacks);
  }

  /** The rank's queues from UCX when its Open MPI runs the ucx PML (null: another PML). */
  private readUcx(t: MqsProcess): UcxRead | null {
    if (this.session.quirks.library !== 'openmpi') return null;
    try {
      return readUcx(t.image, this.session.memory(t));
    } catch (e) {
      return {
        kind: 'error',
        library: null,
        error: mqdError('MQD_E_UCX_READ', `reading the UCX queues of pid ${t.pid}: ${(e as Error).message}`),
      };
    }
  }

  /** The rank's CPython frames through the stop's memory (null: it runs no CPython). */
  private readPython(t: MqsProcess, tids: readonly number[]): PythonRead | null {
    try {
      return readPython(t.image, this.session.memory(t), tids, MAX_FRAMES_PER_THREAD);
    } catch (e) {
      return {
        version: 'unknown',
        error: mqdError(
          'MQD_E_INTERNAL',
          `reading the CPython frames of pid ${t.pid}: ${(e as Error).message}`,
        ),
        threads: new Map(),
      };
    }
  }

  /** The rank's OpenMP threads through its runtime's OMPD library, in the stop or from a core. */
  private readOpenMp(
    t: MqsProcess,
    tids: readonly number[],
    opts: OmpdReadOptions,
    core: Pick<OmpdProcess, 'label' | 'threadPointers' | 'fileOnDisk'> = {},
  ): RawOpenMp {
    const sizes = this.session.typeSizesOf(t);
    try {
      return this.ompd.read(
        {
          ...core,
          pid: t.pid,
          tids,
          image: t.image,
          memKey: t.key,
          hot: this.session.hotPath,
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
}
