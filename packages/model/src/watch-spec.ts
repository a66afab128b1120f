// The hang watch's shapes (docs/hang-watch.md): what an agent discovers on its node,
// the /proc counters it samples without stopping anything, the admin's watch policy, and the
// fleet as the aggregator lists it. The REST routes that carry them are in api-spec.ts
// (`fleet`, `watchPolicy`, `setWatchPolicy`); the agent-protocol messages in
// apps/server/src/protocol/agent-protocol.ts. Browser-safe: only @sinclair/typebox.
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import type { JobId as JobIdT, SnapshotId as SnapshotIdT } from './brand.js';

const Count = Type.Integer({ minimum: 0 });
const Text = Type.String();
const IsoTime = Type.String({ format: 'date-time' });
const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const JobIdText = Type.Unsafe<JobIdT>(Type.String({ minLength: 1, maxLength: 64 }));
const SnapshotIdText = Type.Unsafe<SnapshotIdT>(Type.String({ minLength: 1, maxLength: 64 }));
const Names = Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { maxItems: 1024 });

// --- agent side (plain types; the agent protocol's guard checks them) -------------------------

/** The environment variable a job sets to `off` to keep the watcher away from it. */
export const WATCH_OPT_OUT_VARIABLE = 'MQD_WATCH';

/** One rank of a discovered job on the reporting node. */
export interface DiscoveredRank {
  readonly rank: number;
  readonly pid: number;
  /** /proc/PID/stat field 22 (decimal clock ticks since boot): pins the identity. */
  readonly startTime: string;
}

/**
 * An MPI job one agent finds on its node by itself (no one attached): a Slurm job (every step
 * merged, keyed by the Slurm job id, so one job spanning nodes is one cluster job) or the ranks
 * under one starter (mpirun/mpiexec/prterun/hydra) outside Slurm.
 */
export interface DiscoveredJob {
  /** `slurm:JOBID` or `starter:HOST:PID:STARTTIME`: equal on every node for one Slurm job. */
  readonly key: string;
  readonly kind: 'slurm' | 'starter';
  readonly slurmJob?: string;
  readonly starterPid?: number;
  readonly starterStartTime?: string;
  readonly uid: number;
  /** The starter's or the first rank's command line, clipped. */
  readonly command: string;
  /** Epoch ms: the starter's (or the earliest rank's) start. */
  readonly startedAt: number;
  readonly jobName?: string;
  readonly partition?: string;
  readonly account?: string;
  /** The world size the ranks' environment names, when it does. */
  readonly worldSize?: number;
  /** `off` when any rank (or the starter) has MQD_WATCH=off in its environment. */
  readonly watch: 'on' | 'off';
  /** This node's ranks of the job: processes that map an MPI library and name their rank. */
  readonly ranks: readonly DiscoveredRank[];
}

/** How many jobs of one uid a node's discovery report left out (over its caps). */
export interface DiscoveryOmitted {
  readonly uid: number;
  readonly jobs: number;
}

/**
 * One scan of a node: its jobs and whether that list is all there is. A report cut at a cap
 * (or by a failed read of /proc) is `complete: false`: a job missing from it may still run, so
 * the aggregator must not take its absence for an end.
 */
export interface DiscoveryScan {
  readonly jobs: readonly DiscoveredJob[];
  readonly complete: boolean;
  /** Per uid, the jobs left out; empty when complete (at most one entry per uid). */
  readonly omitted: readonly DiscoveryOmitted[];
}

/** What /proc says about one rank, read without stopping it. */
export interface RankCounters {
  readonly rank: number;
  /** utime + stime of every thread, clock ticks (/proc/PID/stat fields 14 + 15). */
  readonly cpuTicks: number;
  /** voluntary + nonvoluntary context switches of every thread (/proc/PID/task/* /status). */
  readonly switches: number;
  /** /proc/PID/stat field 3 of the main thread: R, S, D, T, t, Z... */
  readonly state: string;
}

// --- aggregator side (REST) ------------------------------------------------------------------

/** A watched job's state over time (packages/model analysis/watch.ts decides it). */
export const WatchState = Type.Union([
  Type.Literal('progressing'),
  Type.Literal('computing'),
  Type.Literal('waiting'),
  Type.Literal('hung'),
  /** Not enough samples yet, or the last sample could not read the ranks. */
  Type.Literal('unknown'),
]);
export type WatchState = Static<typeof WatchState>;
export const WATCH_STATES: readonly WatchState[] = ['progressing', 'computing', 'waiting', 'hung', 'unknown'];

export const WatchConfidence = Type.Union([
  Type.Literal('low'),
  Type.Literal('medium'),
  Type.Literal('high'),
]);
export type WatchConfidence = Static<typeof WatchConfidence>;

/**
 * Whether the watcher samples a job: `on`; `off-by-job` (MQD_WATCH=off in its environment);
 * `off-by-policy` (its user, partition, account or program is not in the policy); `disabled` (watch off
 * for the whole cluster); `budget` (its ranks' stop time this hour is used up: /proc samples
 * only until the hour turns).
 */
export const WatchMode = Type.Union([
  Type.Literal('on'),
  Type.Literal('off-by-job'),
  Type.Literal('off-by-policy'),
  Type.Literal('disabled'),
  Type.Literal('budget'),
]);
export type WatchMode = Static<typeof WatchMode>;

/** The admins' watch policy (`mqd serve --watch...` flags, then the admin view). */
export const ApiWatchPolicy = Type.Object(
  {
    enabled: Type.Boolean(),
    /** Seconds between samples of one job. */
    periodSeconds: Type.Integer({ minimum: 1, maximum: 86_400 }),
    /** Empty: everyone. */
    users: Names,
    partitions: Names,
    accounts: Names,
    /**
     * Only jobs whose program (the one the starter's command runs, as the command names it) or
     * starter is one of these: an entry with a `/` is a path prefix (`/scratch/proj/`), else a
     * file name (`lammps`). Absent or empty: every program.
     */
    programs: Type.Optional(Names),
    /** The most time any one rank may spend stopped by the watcher per hour, ms. */
    stopBudgetMsPerRankHour: Type.Integer({ minimum: 0, maximum: 3_600_000 }),
    /** Consecutive samples with nothing moved before a job blocked in MPI is called hung. */
    hungAfterSamples: Type.Integer({ minimum: 2, maximum: 1000 }),
    /**
     * When a job becomes hung, keep `mqd capture` cores of its ranks (once per episode), written
     * as the job's owner into a subdirectory of each node agent's first `--core-dir`. Absent: off.
     */
    captureCores: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type ApiWatchPolicy = Static<typeof ApiWatchPolicy>;

export const DEFAULT_WATCH_POLICY: ApiWatchPolicy = {
  enabled: false,
  periodSeconds: 180,
  users: [],
  partitions: [],
  accounts: [],
  stopBudgetMsPerRankHour: 1000,
  hungAfterSamples: 3,
};

/** One sample of a job as the fleet view draws it. */
export const ApiFleetSample = Type.Object({
  at: IsoTime,
  state: WatchState,
  /** A full snapshot was stored with this sample (the job's state changed). */
  snapshotId: Nullable(SnapshotIdText),
});
export type ApiFleetSample = Static<typeof ApiFleetSample>;

/** One rank's core kept by the watcher at a hang, or why it was not. */
export const ApiFleetCoreRank = Type.Object({
  rank: Count,
  host: Text,
  /** The core's file name in its node's directory; null when it was not written. */
  core: Nullable(Text),
  bytes: Count,
  /** Why the rank has no core (a coded message), else null. */
  error: Nullable(Text),
});
export type ApiFleetCoreRank = Static<typeof ApiFleetCoreRank>;

/**
 * The cores the watcher kept of a hung job (policy `captureCores`): per node the directory
 * (open it as a job with the attach `{coresDir}`), per rank its core or why not.
 */
export const ApiFleetCores = Type.Object({
  /** When the capture ended. */
  at: IsoTime,
  /** The episode (hang) it belongs to: the episode's start. */
  episodeStart: IsoTime,
  /** One entry per node: the directory its agent wrote (null with the reason when none). */
  dirs: Type.Array(Type.Object({ host: Text, dir: Nullable(Text), error: Nullable(Text) })),
  ranks: Type.Array(ApiFleetCoreRank),
});
export type ApiFleetCores = Static<typeof ApiFleetCores>;

/** One discovered job (the cluster's, merged over its nodes). */
export const ApiFleetJob = Type.Object({
  /** DiscoveredJob.key. */
  key: Text,
  /** The store's job (attach-equivalent record) once the watcher or a user registered it. */
  jobId: Nullable(JobIdText),
  kind: Type.Union([Type.Literal('slurm'), Type.Literal('starter')]),
  slurmJob: Nullable(Text),
  /** The program: Slurm's job name, else the executable's name. */
  program: Text,
  command: Text,
  uid: Count,
  user: Nullable(Text),
  partition: Nullable(Text),
  account: Nullable(Text),
  nodes: Type.Array(Text),
  rankCount: Count,
  startedAt: IsoTime,
  /** When the job was last seen by any agent; set once it ended. */
  endedAt: Nullable(IsoTime),
  /** Slurm's end state when known (TIMEOUT, CANCELLED, FAILED, COMPLETED), else null. */
  endReason: Nullable(Text),
  watch: WatchMode,
  state: WatchState,
  /** When the job entered `state`. */
  since: Nullable(IsoTime),
  /** The stop budget is used up: the verdict is the last one sampled, until then. */
  pausedUntil: Type.Optional(Nullable(IsoTime)),
  confidence: Nullable(WatchConfidence),
  /** The ranks the others wait for: the least progressed (as ranges, e.g. "0-3,7"). */
  leastProgressed: Text,
  /** The one-line diagnosis of the last full snapshot, or the verdict's reason. */
  diagnosis: Text,
  /** The snapshot behind the verdict (for a hung job: the one that shows the hang). */
  snapshotId: Nullable(SnapshotIdText),
  /** Newest last, at most 24. */
  history: Type.Array(ApiFleetSample),
  samples: Count,
  /** Stop time used this hour by the job's most-stopped rank, and the policy's limit (ms). */
  stopMsThisHour: Count,
  stopBudgetMs: Count,
  /** The cores kept at the job's latest hang (policy captureCores); absent or null: none. */
  cores: Type.Optional(Nullable(ApiFleetCores)),
});
export type ApiFleetJob = Static<typeof ApiFleetJob>;
