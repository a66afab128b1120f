export { formatSnapshot } from './format.js';
export {
  type CoreInfo,
  type CoreMappedFile,
  type CoreSegment,
  type CoreThread,
  coreBuildIdAt,
  readCoreBytes,
  readCoreInfo,
  readCoreInfoFd,
} from './inferior/core-file.js';
export { type CoreOpenOptions, OpenedCore } from './inferior/core-image.js';
export { type CoreWriteOptions, type CoreWritten, writeCore } from './inferior/core-writer.js';
export { DebugFile, type TypeRef } from './inferior/debug-file.js';
export { DebugFileRegistry } from './inferior/debug-file-registry.js';
export { type ElfInfo, readElfInfo } from './inferior/elf.js';
export {
  atPath,
  copyNew,
  fileKind,
  openDirNoFollow,
  openFailure,
  openSubdir,
  readRegularFile,
  writeNew,
} from './inferior/files-at.js';
/** `TargetMemory`: the former name, kept for @mqd/mpir. */
export { InferiorMemory, InferiorMemory as TargetMemory } from './inferior/memory.js';
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
} from './inferior/proc.js';
export { fileMappings, ProcessImage, readMaps } from './inferior/process-image.js';
export { HotPath } from './inferior/shim.js';
export { stopProcess } from './inferior/stopper.js';
export * as mqs from './mqs/mqs-spec.js';
export {
  type CoreRankRef,
  MqsSession,
  type RankRef,
  /** The former name of RankRef. */
  type RankRef as RankTarget,
  type SessionOptions,
} from './mqs/session.js';
export { nativeAllocations } from './native/alloc.js';
export { setParentDeathSignal } from './native/libc.js';
export { type PmixJob, type PmixProc, PmixTool, pmixProcTable } from './native/pmix.js';
export * as ptraceExt from './native/ptrace-ext.js';
export { assembleOpenMp, type OmpdProcess, type OmpdReadOptions } from './ompd/raw.js';
export { type OpenMpRead, type ReadOpenMpOptions, readOpenMp } from './ompd/read.js';
export { OmpdSession } from './ompd/session.js';
export { checkDllPolicy, DLL_POLICIES, type DllPolicy } from './policy/dll-policy.js';
export { OneStopReader, type RankReadOptions } from './rank-read/one-stop.js';
export {
  DEFAULT_READ_BUDGET_BYTES,
  ReaderClient,
  type ReaderClientOptions,
  type ReaderRun,
  readBudgetFromEnv,
} from './reader/client.js';
export {
  checkTarget,
  enterReader,
  type OwnerRule,
  type ProcCredentials,
  procCredentials,
  type ReaderCredentials,
  type ReaderIdentity,
  readerForkOptions,
  readerIdentity,
} from './reader/identity.js';
export type { Captured, ReaderRank, ReaderStats } from './reader/protocol.js';
export {
  type CoreSnapshotOptions,
  type CoreSnapshotTarget,
  rankFromCoreName,
  type SnapshotOptions,
  type SnapshotResult,
  type SnapshotTarget,
  Snapshotter,
} from './snapshotter.js';
