// @mqd/testkit: real hung MPI jobs for tests. See README.md.
export {
  DEFAULT_DISPOSE_TIMEOUT_MS,
  DEFAULT_LAUNCH_TIMEOUT_MS,
  FIXTURES_DIR,
  MPI_LABELS,
  MPI_NAMES,
  MPI_VERSIONS,
  type MpiName,
  mpiCacheDir,
} from './config.js';
export {
  CORNER_FIXTURES,
  type CornerFixture,
  type ExpectedComm,
  type ExpectedCornerComm,
  type ExpectedCornerOp,
  type ExpectedOp,
  expectedBlockingCall,
  expectedCornerQueues,
  expectedQueues,
  HANG_FIXTURES,
  type HangFixture,
  isHangFixture,
  MPI_QUEUE_TRAITS,
  type MpiQueueTraits,
} from './expected-queues.js';
export {
  blocksOffMainThread,
  CPP_RING_FRAMES,
  expectedStackCall,
  STACK_FIXTURES,
  type StackFixture,
} from './expected-stacks.js';
export {
  DEBUGLINK_FIXTURES,
  DEBUGLINK_SUFFIX,
  fixtureBinary,
  listFixtures,
  mpiAvailable,
  mpiMissingMessage,
  mpiPrefix,
  requireMpi,
} from './fixtures.js';
export {
  GOLDEN_DIR,
  GOLDEN_FIXTURES,
  GOLDEN_MPI_ROOT,
  GOLDEN_REPO_ROOT,
  GOLDEN_TIME,
  goldenFile,
  listGolden,
  normaliseSnapshot,
} from './golden.js';
export {
  disposeAll,
  type FixtureJob,
  type JobExit,
  type LaunchOptions,
  launchFixture,
  liveJobCount,
  parseReadyLines,
  type RankProcess,
  starterCommand,
  type WaitCondition,
} from './launch.js';
export {
  type DumpedComm,
  type DumpedOp,
  type DumpedProcess,
  mqsDump,
  mqsDumpBinary,
  parseMqsDump,
  queueDll,
} from './mqs-dump.js';
export {
  descendants,
  identify,
  isGone,
  isRunning,
  isZombie,
  listProcesses,
  liveDescendants,
  type ProcIdentity,
  type ProcStat,
  parseStat,
  readEnviron,
  readStat,
  statOf,
} from './procfs.js';
export {
  type SlurmCluster,
  type SlurmJob,
  type SubmitOptions,
  slurmAvailable,
  startSlurm,
} from './slurm.js';
export {
  type BlockedCheck,
  frameMatcher,
  mainThreadStack,
  parseEuStack,
  rankBlockedIn,
  type StackResult,
  type StackSample,
} from './stack.js';
export {
  done,
  failed,
  type Poll,
  pending,
  WaitFailedError,
  type WaitOptions,
  WaitTimeoutError,
  waitFor,
} from './wait.js';
