export { formatSnapshot } from './format.js';
export {
  DEFAULT_READ_BUDGET_BYTES,
  DllHost,
  type DllHostOptions,
  type HostRun,
  readBudgetFromEnv,
} from './host/client.js';
export {
  checkDllPolicy,
  checkTarget,
  DLL_POLICIES,
  type DllPolicy,
  enterReader,
  type OwnerRule,
  type ProcCredentials,
  procCredentials,
  type ReaderCredentials,
  type ReaderIdentity,
  readerForkOptions,
  readerIdentity,
} from './host/identity.js';
export type { Captured, HostStats, HostTarget } from './host/protocol.js';
export * as mqs from './mqs/mqs-spec.js';
export { MqsSession, type RankReadOptions, type RankTarget, type SessionOptions } from './mqs/session.js';
export { HotPath } from './mqs/shim.js';
export { nativeAllocations } from './native/alloc.js';
export { setParentDeathSignal } from './native/libc.js';
export { type PmixJob, type PmixProc, PmixTool, pmixProcTable } from './native/pmix.js';
export * as ptraceExt from './native/ptrace-ext.js';
export { assembleOpenMp, OmpdHost, type OmpdReadOptions, type OmpdTarget } from './ompd/host.js';
export { type OpenMpRead, type ReadOpenMpOptions, readOpenMp } from './ompd/read.js';
export {
  type CoreSnapshotOptions,
  type CoreSnapshotTarget,
  rankFromCoreName,
  type SnapshotOptions,
  type SnapshotResult,
  type SnapshotTarget,
  Snapshotter,
} from './snapshotter.js';
export {
  type CoreInfo,
  type CoreMappedFile,
  type CoreSegment,
  type CoreThread,
  coreBuildIdAt,
  readCoreBytes,
  readCoreInfo,
  readCoreInfoFd,
} from './target/core-file.js';
export { type CoreOpenOptions, OpenedCore } from './target/core-image.js';
export { type CoreWriteOptions, type CoreWritten, writeCore } from './target/core-writer.js';
export { DebugFile, DebugFileRegistry, type TypeRef } from './target/debug-file.js';
export { type ElfInfo, readElfInfo } from './target/elf.js';
export {
  atPath,
  copyNew,
  fileKind,
  openDirNoFollow,
  openFailure,
  openSubdir,
  readRegularFile,
  writeNew,
} from './target/files-at.js';
export { TargetMemory } from './target/memory.js';
export {
  type ProcStat,
  parseProcStat,
  processExists,
  processState,
  procStartTime,
  RANK_ENV_VARS,
  rankFromEnviron,
  readEnviron,
  readProcStat,
  shortHostname,
  tracerPid,
} from './target/proc.js';
export { fileMappings, ProcessImage, readMaps } from './target/process-image.js';
export { stopProcess } from './target/stopper.js';
