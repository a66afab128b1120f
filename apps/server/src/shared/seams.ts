// The seams between the agent and the code that touches MPI processes. The real reader
// (mqd-core through the MPI library's message-queue DLL) and the real locator (MPIR attach to
// mpirun, packages/mpir) are injected as options, so this package never loads koffi itself and
// tests run against the fakes in fakes.ts.
import type {
  ApiEvalRequest,
  CaptureResult,
  CoreFileSource,
  CountersParams,
  CountersResult,
  DiscoveredJob,
  DiscoveredRank,
  DiscoveryScan,
  LocatedJob,
  MpiInfo,
  RankSnapshot,
  RankTarget,
  Result,
  SeenStarter,
} from '@mqd/model';

// The shapes the agent protocol carries are the protocol's (packages/model agent-spec.ts).
export type {
  CapturedRank,
  CaptureParams,
  CaptureResult,
  CounterError,
  CountersParams,
  CountersResult,
  LocatedJob,
  LocatedRank,
  MpiInfo,
  RankTarget,
  SeenStarter,
} from '@mqd/model';

export interface ReadOptions {
  /** This node's name, for RankSnapshot.host. */
  readonly host: string;
  /** The whole read must end by then; the reader marks ranks it could not finish as errors. */
  readonly timeoutMs: number;
  /** Aborted when the aggregator gives up on the request (disconnect, agent shutdown). */
  readonly signal: AbortSignal;
  /**
   * The job owner's uid: every rank must belong to it (ranks of another uid are refused with
   * MQD_E_FOREIGN_PROCESS and never stopped), and the reader runs with that uid's rights.
   * Absent only where no check applies (a reader that already runs as the user).
   */
  readonly ownerUid?: number;
  /** An admin asked to read processes of uid 0 (refused otherwise with MQD_E_ROOT_PROCESS). */
  readonly allowRoot?: boolean;
  /**
   * The most bytes of JSON one rank may take (what fits one agent message): a rank whose queues
   * pass it is stopped in the reader's walk and answered MQD_E_TOO_LARGE, never built whole.
   */
  readonly maxRankBytes?: number;
  /**
   * A light read (the hang watch's sample): the same stop and the same ranks, without the
   * reader's forced collection after it (reader-main.ts collectIfGrown).
   */
  readonly light?: boolean;
  /**
   * Expressions to read on every rank in the same stop (RankSnapshot.values, in this order),
   * as the agent protocol caps them: printable text, evaluated read-only by the reader.
   */
  readonly evals?: readonly ApiEvalRequest[];
}

/**
 * Reads the message queues of ranks on this node. It should return one RankSnapshot per target
 * (a rank it could not read is a RankSnapshot with state error); it may also throw or reject,
 * and the agent then turns every rank it did not return into an error rank.
 */
export interface RankReader {
  read(ranks: readonly RankTarget[], opts: ReadOptions): Promise<RankSnapshot[]>;
  /** The library and DLL the reader uses; null until it has loaded one. */
  readonly mpi: MpiInfo | null;
  /**
   * Reads ranks from their core files (every target has `core`): one RankSnapshot per target
   * (pid = the pid in the core) and the facts of each core read (JobSnapshot.source.cores).
   * `opts.ownerUid` is the uid owning the files; the agent has checked paths and owner.
   * Absent where the reader cannot read cores.
   */
  readCores?(cores: readonly RankTarget[], opts: ReadOptions): Promise<CoreRead>;
  /**
   * Writes one core per rank and a `mqd capture` manifest into `dir` (an absolute path the
   * agent chose inside its first allowed core directory), everything made by processes that
   * are the ranks' owner `opts.ownerUid` (the real one: apps/cli capture-owner.ts and
   * Snapshotter.capture), each rank stopped only while its core is written. Every asked rank
   * is answered in `ranks`. Absent where the reader cannot capture.
   */
  capture?(
    ranks: readonly DiscoveredRank[],
    dir: string,
    opts: { readonly host: string; readonly ownerUid: number; readonly signal: AbortSignal },
  ): Promise<Result<CaptureResult>>;
}

export interface CoreRead {
  readonly ranks: RankSnapshot[];
  readonly cores: CoreFileSource[];
}

/** Finds the ranks of a job from its starter; runs on the starter's node. */
export interface JobLocator {
  locate(starterPid: number): Promise<Result<LocatedJob>>;
  /** The ranks of a Slurm job (JOBID or JOBID.STEP) on this node; absent where Slurm is not. */
  locateSlurm?(job: string): Promise<Result<LocatedJob>>;
  /**
   * The cores of a directory (real path, already checked to be allowed): one rank per core
   * from a `mqd capture` manifest or the files' names (rank-N.core), the pid from each core's
   * notes, uid = the files' owner, and `core` set on every rank. Absent where cores are not read.
   */
  locateCores?(dir: string): Promise<Result<LocatedJob>>;
  /** Starters visible on this node, reported in the agent's status; optional. */
  list?(): Promise<readonly SeenStarter[]>;
}

/**
 * Finds the MPI jobs of this node by itself (the hang watch; the real one is packages/mpir
 * discoverJobs, a read-only /proc scan): the agent lists them in every status.
 */
export interface JobDiscovery {
  discover(): Promise<readonly DiscoveredJob[]>;
  /**
   * The jobs with whether the list is all the node runs (a scan cut at a cap is not): the agent
   * calls this instead of discover() when it is there. Absent: a list is complete when it is
   * within MAX_DISCOVERED_JOBS.
   */
  scan?(): Promise<DiscoveryScan>;
  /**
   * The /proc counters of ranks of this node, read without stopping them, with the checks of
   * a snapshot (start time, owner): the real one is packages/mpir rankCounters (wrapped in
   * apps/cli real-discovery.ts, so this package never loads @mqd/core); the fakes answer
   * with settable numbers. Every asked rank in `ranks` or in `errors`.
   */
  counters(params: CountersParams): Promise<Omit<CountersResult, 'at'>>;
}
