// The OpenMP threads of one process without an MQD DLL: stop it (SEIZE + INTERRUPT), read
// through OMPD in the stop, resume, assemble. OneStopReader.snapshotRank (rank-read/one-stop.ts) does the same inside its one
// stop per rank; this entry point serves non-MPI processes and the OMPD tests.
import { type MqdError, mqdError, type OpenMpRuntime } from '@mqd/model';
import { DebugFileRegistry } from '../inferior/debug-file-registry.js';
import { ProcessImage } from '../inferior/process-image.js';
import { HotPath } from '../inferior/shim.js';
import { stopProcess } from '../inferior/stopper.js';
import { assembleOpenMp, type OmpdReadOptions, type RawOpenMp } from './raw.js';
import { OmpdSession } from './session.js';

export interface ReadOpenMpOptions extends OmpdReadOptions {
  /** The OMPD host to use (default: one shared by this process). */
  readonly host?: OmpdSession;
  readonly registry?: DebugFileRegistry;
  readonly stopTimeoutMs?: number;
  /** Bytes one read may take from the target (the hot path's budget). */
  readonly readBudgetBytes?: number;
}

export interface OpenMpRead {
  /** The runtime's threads; null: no OpenMP runtime; absent when openmpError says why. */
  readonly openmp?: OpenMpRuntime | null;
  readonly openmpError?: MqdError;
  /** How long the process was stopped, microseconds (0 when it was not stopped). */
  readonly pausedMicros: number;
}

let shared: { host: OmpdSession; registry: DebugFileRegistry } | null = null;

/** The OpenMP threads of `pid`, read in one stop. Never throws for expected failures. */
export function readOpenMp(pid: number, opts: ReadOpenMpOptions = {}): OpenMpRead {
  shared ??= { host: new OmpdSession(), registry: new DebugFileRegistry() };
  const host = opts.host ?? shared.host;
  const hot = HotPath.get();
  if (!hot.ok) return { openmpError: hot.error, pausedMicros: 0 };
  const image = ProcessImage.load(pid, opts.registry ?? shared.registry);
  if (!image.ok) return { openmpError: image.error, pausedMicros: 0 };
  const key = hot.value.newKey();
  hot.value.set(key, pid, 0, 0, opts.readBudgetBytes ?? 64 << 20);
  let raw: RawOpenMp;
  let paused = 0;
  try {
    const stop = stopProcess(pid, opts.stopTimeoutMs ?? 2000);
    if (!stop.ok) return { openmpError: stop.error, pausedMicros: 0 };
    try {
      hot.value.beginStop(key);
      raw = host.read({ pid, tids: stop.value.tids, image: image.value, memKey: key, hot: hot.value }, opts);
    } catch (e) {
      raw = {
        kind: 'error',
        error: mqdError('MQD_E_INTERNAL', `reading OpenMP of pid ${pid}: ${(e as Error).message}`),
      };
    } finally {
      paused = stop.value.resume();
      hot.value.endStop();
    }
  } finally {
    hot.value.drop(key);
  }
  return { ...assembleOpenMp(raw), pausedMicros: paused };
}
