// @mqd/mpir: find every rank of an MPI job. See README.md.
export {
  type AttachOptions,
  attachStarter,
  type MpirSymbols,
  mpirSymbols,
  type PidTarget,
  processTreeRanks,
  ranksFromPids,
  readMpirTable,
} from './attach.js';
export { type CounterTarget, type RankCountersRead, rankCounters } from './counters.js';
export {
  clockTicksPerSecond,
  DISCOVERY_LIMITS,
  type DiscoverOptions,
  DiscoveryCache,
  discoverJobs,
  discoverNode,
  fairShare,
  type Proc,
  type ProcSource,
  REAL_PROCFS,
  STARTER_NAMES,
  startTimeToEpochMs,
  watchOptedOut,
} from './discover.js';
export { type LocalHost, localHost, normaliseHost } from './host.js';
export {
  type AcquisitionMethod,
  type JobRanks,
  METHOD_CHOICES,
  type MethodChoice,
  makeJob,
  type RankEntry,
  type StarterInfo,
} from './job.js';
export { type JobExit, type LaunchedJob, type LaunchOptions, launchUnderTool } from './launch.js';
export { type PmixStarter, pmixStarterKind, withStopInInit } from './pmix-launch.js';
export {
  decodeProcdescs,
  LP64_PROCDESC,
  MAX_PROCTABLE_SIZE,
  type ProcdescLayout,
  procdescLayout,
  type RawProcdesc,
  staleEntryReason,
} from './procdesc.js';
export { descendants, isAlive } from './procfs.js';
export {
  defaultSlurmRunner,
  parseSlurmJob,
  type SlurmJobInfo,
  type SlurmJobSpec,
  type SlurmRanks,
  type SlurmRunner,
  slurmJobInfo,
  slurmLocalPids,
  slurmRanks,
} from './slurm.js';
export {
  type AttachedSnapshot,
  type LocalRanks,
  localRanks,
  localTargets,
  type SnapshotAttachOptions,
  snapshotAttach,
} from './snapshot.js';
