export { formatSnapshot } from './format.js';
export { DllHost, type DllHostOptions, type HostRun } from './host/client.js';
export {
  checkDllPolicy,
  checkTarget,
  DLL_POLICIES,
  type DllPolicy,
  enterReader,
  type OwnerRule,
  type ProcCredentials,
  procCredentials,
  procStartTime,
  type ReaderCredentials,
  type ReaderIdentity,
  readerForkOptions,
  readerIdentity,
} from './host/identity.js';
export type { HostStats, HostTarget } from './host/protocol.js';
export * as mqs from './mqs/mqs-spec.js';
export { setParentDeathSignal } from './native/libc.js';
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
