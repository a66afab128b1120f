export { formatSnapshot } from './format.js';
export { DllHost, type DllHostOptions, type HostRun } from './host/client.js';
export type { HostStats, HostTarget } from './host/protocol.js';
export * as mqs from './mqs/mqs-spec.js';
export * as ptraceExt from './native/ptrace-ext.js';
export {
  type SnapshotOptions,
  type SnapshotResult,
  type SnapshotTarget,
  Snapshotter,
} from './snapshotter.js';
export { DebugFile, DebugFileRegistry, type TypeRef } from './target/debug-file.js';
export { type ElfInfo, readElfInfo } from './target/elf.js';
export { TargetMemory } from './target/memory.js';
export {
  processExists,
  processState,
  RANK_ENV_VARS,
  rankFromEnviron,
  readEnviron,
  shortHostname,
  tracerPid,
} from './target/proc.js';
export { ProcessImage, readMaps } from './target/process-image.js';
export { stopProcess } from './target/stopper.js';
