// The reader: a child process that loads one MPI library's message-queue DLL and answers
// snapshot requests. It is the reader: it runs as the targets' owner (the agent forks it with
// their uid/gid when it is root), sets PR_SET_NO_NEW_PRIVS and checks its own identity before it
// answers anything, and checks each pid's owner and start time again right before it touches
// it. It exists so that a DLL that segfaults, aborts or loops costs one snapshot, never the agent. It dies with its parent (PR_SET_PDEATHSIG), and because ranks
// are stopped with PTRACE_SEIZE, its death lets every rank run on.

import { readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { getHeapSpaceStatistics } from 'node:v8';
import { type MqdError, mqdError, type RankSnapshot, rankNotRead } from '@mqd/model';
import { OpenedCore } from '../inferior/core-image.js';
import { writeCore } from '../inferior/core-writer.js';
import { DebugFileRegistry } from '../inferior/debug-file-registry.js';
import { rankInEnviron } from '../inferior/proc.js';
import { lingeringTracees, stopProcess } from '../inferior/stopper.js';
import { getppid, setParentDeathSignal } from '../native/libc.js';
import type { OmpdReadOptions } from '../ompd/raw.js';
import { OneStopReader } from '../rank-read/one-stop.js';
import { dllNamedBy, dllNamedByCore } from './dll-name.js';
import { checkTarget, enterReader } from './identity.js';
import type {
  Captured,
  CaptureRequest,
  CoreFacts,
  CoreRef,
  ReaderMessage,
  ReaderRank,
  ReaderRequest,
  Resolved,
  ResolveRequest,
  SnapshotRequest,
} from './protocol.js';
import { SourceExcerpts } from './source-excerpts.js';
import { rankToWire } from './wire.js';

const SIGKILL = 9;
// Never outlive the agent: a host blocked in a DLL (or in the kernel for it) would otherwise stay
// behind as the owner after the agent is gone. A parent that ended before the prctl left us
// reparented (to init or a subreaper, so not necessarily pid 1): the parent is checked by pid.
const expectedParent = Number(process.env['MQD_READER_PARENT'] ?? Number.NaN);
if (setParentDeathSignal(SIGKILL) < 0) process.exit(1);
if (Number.isInteger(expectedParent) ? getppid() !== expectedParent : getppid() === 1) process.exit(1);
const entered = enterReader();
// Not who the agent asked for: say so and do nothing else (no request is ever handled).
const credentials = entered.ok ? entered.value : null;
if (!entered.ok) {
  process.send?.({ type: 'privdrop', error: entered.error } satisfies ReaderMessage, () => process.exit(1));
}
const registry = new DebugFileRegistry();
let session: OneStopReader | null = null;
let sessionError: MqdError | null = null;
let dllOpenMicros = 0;

function send(m: ReaderMessage, written?: () => void): void {
  process.send?.(m, undefined, undefined, written);
}

function openSession(req: SnapshotRequest): OneStopReader | MqdError {
  if (session) return session.dllPath === req.dll ? session : mqdError('MQD_E_INTERNAL', 'one DLL per host');
  if (sessionError) return sessionError;
  const t0 = process.hrtime.bigint();
  const s = OneStopReader.open(req.dll, {
    registry,
    readBudgetBytes: req.readBudgetBytes,
    stopTimeoutMs: req.stopTimeoutMs,
    whileStopped: (pid) => {
      if (currentHold > 0) {
        send({ type: 'stopped', id: currentId, pid });
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, currentHold);
      }
    },
  });
  dllOpenMicros = Number((process.hrtime.bigint() - t0) / 1000n);
  if (!s.ok) {
    sessionError = s.error;
    return s.error;
  }
  session = s.value;
  return session;
}

let currentId = 0;
/** The source excerpts of the request being answered (each file:line once per request). */
let sources = new SourceExcerpts();
let currentHold = 0;

/**
 * Set once this reader traces a thread it could not detach (it never reached a stop: a vfork
 * parent, a thread in a stalled file system's wait). The thread would enter a tracing stop as
 * soon as it left its wait and stay there while this process lives, so the reader says so
 * (`retiring`), answers nothing more and waits for its supervisor's SIGKILL: the kernel detaches
 * every tracee of a tracer that exits. It exits by itself if that does not come.
 */
let retired = false;
const RETIRE_FALLBACK_MS = 5000;

/** True (and `retiring` sent) when a failed stop left threads only this process's end releases. */
function retireIfTracing(id: number, pid: number): boolean {
  const left = lingeringTracees();
  if (left.size === 0) return false;
  retired = true;
  send({ type: 'retiring', id, pid, tids: [...left.keys()] });
  setTimeout(() => process.exit(1), RETIRE_FALLBACK_MS);
  return true;
}

function handle(req: ReaderRequest): void {
  if (req.type === 'ping') {
    send({ type: 'pong', id: req.id });
    return;
  }
  if (req.type === 'resolve') {
    resolve(req);
    return;
  }
  if (req.type === 'capture') {
    capture(req);
    return;
  }
  const s = openSession(req);
  if (!(s instanceof OneStopReader)) {
    send({ type: 'failed', id: req.id, error: s });
    return;
  }
  currentId = req.id;
  currentHold = req.holdStoppedMs ?? 0;
  s.retain(new Set(req.keepPids));
  sources = new SourceExcerpts();
  for (const t of req.targets) {
    send({ type: 'begin', id: req.id, pid: t.pid });
    // The rank's byte budget bounds its walk (nothing that large is decoded or sent back).
    const budget = {
      ...(t.maxRankBytes !== undefined ? { maxRankBytes: t.maxRankBytes } : {}),
      ...(req.evals !== undefined && req.evals.length > 0 ? { evals: req.evals } : {}),
    };
    const ompd: OmpdReadOptions = {
      ...(req.ompdPolicy !== undefined ? { policy: req.ompdPolicy } : {}),
      ...(req.ompdRefused !== undefined ? { refused: req.ompdRefused } : {}),
      // Sent before the call: if the library crashes or loops, the supervisor knows it was it.
      onEnter: (library) => send({ type: 'ompd', id: req.id, pid: t.pid, library }),
    };
    if (t.core) {
      sendRank(req, readCore(s, t, t.core, { stacks: req.stacks !== false, ompd, ...budget }));
      continue;
    }
    const refused = refusal(t);
    sendRank(
      req,
      refused
        ? rankNotRead(t, refused)
        : s.snapshotRank(t, { stacks: req.stacks !== false, ompd, ...budget }),
    );
    if (retireIfTracing(req.id, t.pid)) return;
  }
  // Counters are cumulative over the life of this reader.
  send(
    {
      type: 'done',
      id: req.id,
      library: s.session.library,
      version: s.session.version,
      stats: {
        dllOpenMicros,
        fetches: s.session.callbackCounts['fetch_data'] ?? 0,
        typeLookups: s.session.callbackCounts['find_type'] ?? 0,
        filesIndexed: registry.size,
        jsCallbacks: s.session.jsCallbackCount(),
        readSyscalls: s.session.callbackCounts['syscalls'] ?? 0,
      },
    },
    // Once every message is written: a deep rank's tail still queued in the channel would
    // otherwise wait for the whole collection before the agent gets it.
    req.light === true ? collectIfGrown : collectIfDue,
  );
}

/**
 * One rank to the supervisor: its operations as columns (wire.ts; a deep rank's object graph
 * cost more to serialise and deserialise than to read), or as objects when asked or when a value
 * does not fit the columns.
 */
function sendRank(req: SnapshotRequest, read: RankSnapshot): void {
  // After the rank runs again, as the owner: the source around its user frames.
  const rank = sources.attach(read);
  const wire = req.wire === 'objects' ? null : rankToWire(rank);
  if (wire) send({ type: 'rank-columns', id: req.id, rank: wire });
  else send({ type: 'rank', id: req.id, rank });
}

/**
 * A reader lives for days and answers a snapshot every few seconds; left alone, V8 lets dead
 * snapshot records pile up in its old generation for hundreds of snapshots before a full
 * collection, and the reader's RSS climbs 20-60 MB before it falls back. So after a request is
 * answered (the agent has its answer, the reader is idle) it collects, at most once per
 * GC_INTERVAL_MS: every time at a serving pace, every few dozen snapshots back to back.
 * (client.ts starts readers with --expose-gc; without it this does nothing.)
 */
const GC_INTERVAL_MS = 1000;
let lastGc = 0;
function collectIfDue(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  const now = Date.now();
  if (!gc || now - lastGc < GC_INTERVAL_MS) return;
  gc();
  lastGc = Date.now();
  oldSpaceAfterGc = oldSpaceUsed();
}

/**
 * After a light read (the hang watch's sample, a few KB of records every few minutes) a full
 * collection costs the reader more CPU than the read itself (about 25 ms against 12 ms for two
 * ranks, apps/cli/bench/watch-overhead.bench.ts): it collects only when the old space grew by
 * LIGHT_GC_GROWTH_BYTES since the last full collection, which bounds the growth the same way.
 */
const LIGHT_GC_GROWTH_BYTES = 4 * 1024 * 1024;
let oldSpaceAfterGc = 0;
function oldSpaceUsed(): number {
  return getHeapSpaceStatistics().find((x) => x.space_name === 'old_space')?.space_used_size ?? 0;
}
function collectIfGrown(): void {
  if (oldSpaceUsed() - oldSpaceAfterGc < LIGHT_GC_GROWTH_BYTES) return;
  collectIfDue();
}

/** One rank from a core file: opened here (as the file's owner), read, closed. */
function readCore(
  s: OneStopReader,
  t: ReaderRank,
  ref: CoreRef,
  opts: { readonly stacks: boolean; readonly ompd: OmpdReadOptions },
): RankSnapshot {
  const core = OpenedCore.open(ref.path, registry, coreOptions(ref));
  if (!core.ok) return rankNotRead(t, core.error);
  try {
    return s.snapshotCore({ pid: t.pid, rank: t.rank, host: t.host, core: core.value }, opts);
  } finally {
    core.value.close();
  }
}

/**
 * A reader root started as someone (switched) reads only cores of that uid: root chose the
 * identity from the path's owner, and the file there may have been replaced since.
 */
const coreOwner =
  credentials !== null && process.env['MQD_READER_SWITCHED'] === '1' ? credentials.uid : undefined;

function coreOptions(ref: CoreRef): { exe?: string; sysroot?: string; owner?: number } {
  return {
    ...(ref.exe !== undefined ? { exe: ref.exe } : {}),
    ...(ref.sysroot !== undefined ? { sysroot: ref.sysroot } : {}),
    ...(coreOwner !== undefined ? { owner: coreOwner } : {}),
  };
}

/** The DLL a core's process named, and what the core says about the process. */
function resolveCore(pid: number, ref: CoreRef): Resolved {
  const opened = OpenedCore.open(ref.path, registry, coreOptions(ref));
  if (!opened.ok) return { pid, error: opened.error };
  const core = opened.value;
  try {
    const env = core.environ();
    const rank = env ? rankInEnviron(env) : null;
    const facts: CoreFacts = {
      pid: core.info.pid,
      rank: rank?.rank ?? null,
      rankVariable: rank?.variable ?? null,
      host: env?.get('SLURMD_NODENAME') ?? env?.get('HOSTNAME') ?? null,
      signal: core.info.signal,
      executable: core.image.exe,
    };
    const dll = dllNamedByCore(core);
    return dll.ok ? { pid, dll: dll.value, core: facts } : { pid, error: dll.error, core: facts };
  } finally {
    core.close();
  }
}

/** Cores of live ranks, one stop each (the rank runs again as soon as its core is written). */
function capture(req: CaptureRequest): void {
  let tracing: number | null = null;
  const answers: Captured[] = req.targets.map((t) => {
    if (tracing !== null) {
      return {
        pid: t.pid,
        rank: t.rank,
        error: mqdError(
          'MQD_E_STOP_FAILED',
          `not captured: the reader ended to let go of threads of pid ${tracing} that never stopped; capture this rank again`,
        ),
      };
    }
    const answer = captureOne(req, t);
    if (lingeringTracees().size > 0) tracing = t.pid;
    return answer;
  });
  // `retiring` first: the supervisor must not send this reader another request once it has the answers.
  if (tracing !== null) retireIfTracing(req.id, tracing);
  send({ type: 'captured', id: req.id, answers });
}

/** One rank's core: checked, stopped, written, resumed. */
function captureOne(req: CaptureRequest, t: ReaderRank): Captured {
  const refused = refusal(t);
  if (refused) return { pid: t.pid, rank: t.rank, error: refused };
  let executable = '';
  try {
    executable = readlinkSync(`/proc/${t.pid}/exe`);
  } catch {
    executable = '';
  }
  const stop = stopProcess(t.pid, req.stopTimeoutMs);
  if (!stop.ok) return { pid: t.pid, rank: t.rank, error: stop.error };
  const name = `rank-${t.rank}.core`;
  let written: ReturnType<typeof writeCore>;
  let paused: number;
  try {
    written = writeCore(t.pid, stop.value.tids, join(req.dir, name));
  } finally {
    paused = stop.value.resume();
  }
  if (!written.ok) return { pid: t.pid, rank: t.rank, error: written.error };
  return {
    pid: t.pid,
    rank: t.rank,
    core: name,
    bytes: written.value.bytes,
    executable,
    pausedMicros: paused,
  };
}

function resolve(req: ResolveRequest): void {
  const answers: Resolved[] = req.targets.map((t) => {
    if (t.core) return resolveCore(t.pid, t.core);
    const refused = checkTarget(t.pid, t);
    if (refused) return { pid: t.pid, error: refused };
    const dll = dllNamedBy(t.pid, registry);
    return dll.ok ? { pid: t.pid, dll: dll.value } : { pid: t.pid, error: dll.error };
  });
  send({ type: 'resolved', id: req.id, answers });
}

/** The agent checked `t`; check again here, right before the stop (the pid may have changed hands). */
function refusal(t: ReaderRank): MqdError | null {
  if (t.ownerUid === undefined) return null;
  return checkTarget(t.pid, {
    ownerUid: t.ownerUid,
    allowRoot: t.allowRoot ?? false,
    startTime: t.startTime,
  });
}

process.on('message', (m: ReaderRequest) => {
  if (!credentials || retired) return;
  try {
    handle(m);
  } catch (e) {
    send({
      type: 'failed',
      id: m.id,
      error: mqdError('MQD_E_INTERNAL', `DLL host: ${(e as Error).stack ?? String(e)}`),
    });
  }
});
process.on('disconnect', () => process.exit(0));
if (credentials) send({ type: 'ready', pid: process.pid, credentials });
