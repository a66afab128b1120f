export { Snapshotter, type SnapshotOptions, type SnapshotResult, type SnapshotTarget } from './snapshotter.js';
export { DllHost, type DllHostOptions, type HostRun } from './host/client.js';
export type { HostStats, HostTarget } from './host/protocol.js';
export { DebugFile, DebugFileRegistry, type TypeRef } from './target/debug-file.js';
export { ProcessImage, readMaps } from './target/process-image.js';
export { TargetMemory } from './target/memory.js';
export { stopProcess } from './target/stopper.js';
export { readElfInfo, type ElfInfo } from './target/elf.js';
export {
  RANK_ENV_VARS,
  processExists,
  processState,
  rankFromEnviron,
  readEnviron,
  shortHostname,
  tracerPid,
} from './target/proc.js';
export * as mqs from './mqs/mqs-spec.js';
export { formatSnapshot } from './format.js';
