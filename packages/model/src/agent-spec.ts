// The agent <-> aggregator protocol's messages (apps/server/src/protocol/agent-protocol.ts says
// how they travel and what each means): the one spec of their shapes and limits, from which the
// TypeScript types are made (Wire<>) and the validators compiled (checkWire, below). Both ends
// decode with apps/server agent-protocol-decode.ts, which adds the few rules a schema cannot
// say: each rank once, a discovered job's key, a captured rank's core or error. Limits of the
// snapshot's fields come from the snapshot spec. Only @sinclair/typebox; checkWire compiles
// (new Function) on first use, so it runs on the server and the agent, not under the
// dashboard's Content-Security-Policy.
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler';
import { type ValueError, ValueErrorType } from '@sinclair/typebox/value';
import { ApiEvalRequest, MAX_API_EVALS, MAX_CORES_DIR_CHARS, SLURM_JOB_PATTERN } from './api-spec.js';
import { ensureExists } from './assert.js';
import {
  CoreFileSource,
  JobSnapshot,
  LengthUnit,
  MAX_CODE_CHARS,
  MAX_HOST_CHARS,
  MAX_MESSAGE_CHARS,
  MAX_PATH_CHARS,
  MpiLibrary,
  RankSnapshot,
} from './snapshot-spec.js';
import type { DiscoveredJob, DiscoveredRank, DiscoveryOmitted, RankCounters } from './watch-spec.js';

/** 3: status.discovered and the `counters` request (the hang watch). */
export const AGENT_PROTOCOL_VERSION = 3 as const;
/** Ranks one request names, one chunk carries, one reply counts: as many as a snapshot holds. */
export const MAX_RANKS_PER_REQUEST: number = ensureExists(
  JobSnapshot.properties.ranks.maxItems,
  'JobSnapshot.ranks.maxItems',
);
/** The largest rank number (RankSnapshot.rank). */
export const MAX_RANK: number = ensureExists(
  RankSnapshot.properties.rank.maximum,
  'RankSnapshot.rank.maximum',
);
export const MAX_SEEN_JOBS = 1024;
/** A starter's or a located job's command line, in UTF-16 units; longer ones are cut (clipText). */
export const MAX_COMMAND_CHARS = 4096;
/** LocatedJob.method, in UTF-16 units. */
export const MAX_METHOD_CHARS = 64;
/** Request ids one `alive` message lists (an agent has a handful open at a time). */
export const MAX_ALIVE_IDS = 4096;
/** Request ids are in [1, MAX_REQUEST_ID]. */
export const MAX_REQUEST_ID = 0x7fffffff;
/** Nodes a located Slurm job names besides the agent's own (a job spans at most this many). */
export const MAX_OTHER_NODES = 65_536;
/** Discovered jobs one status lists (DiscoveredJob). */
export const MAX_DISCOVERED_JOBS = 1024;
/** A discovered Slurm job's name, partition and account, in UTF-16 units; longer ones are cut. */
export const MAX_SLURM_NAME_CHARS = 128;
/** A discovered job's key: `starter:` + a host (<= 255) + `:PID:STARTTIME`. */
export const MAX_DISCOVERED_KEY_CHARS = 320;
/** Uids status.discoveryScan.omitted names (one entry per uid). */
export const MAX_DISCOVERY_OMITTED = 1024;
/** A capture directory's name (CaptureParams.name): one path component. */
export const CAPTURE_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$';
export const CAPTURE_NAME_RE: RegExp = new RegExp(CAPTURE_NAME_PATTERN);
/** The key of a starter job: `starter:HOST:PID:STARTTIME`. */
export const STARTER_KEY_RE = /^starter:(.+):([0-9]+):([0-9]+)$/;

/**
 * A schema's type as the protocol hands it around: every property and list readonly. A chunk's
 * ranks stay as the snapshot spec types them (the hub stores them as they are).
 */
type Frozen<T> = T extends RankSnapshot[]
  ? T
  : T extends readonly (infer E)[]
    ? readonly Frozen<E>[]
    : T extends object
      ? { readonly [K in keyof T]: Frozen<T[K]> }
      : T;
export type Wire<T extends TSchema> = Frozen<Static<T>>;

const Strict = { additionalProperties: false } as const;
const Int = (minimum: number, maximum: number) => Type.Integer({ minimum, maximum });
const Text = (maxLength: number, minLength = 0, pattern?: string) =>
  Type.String(pattern === undefined ? { minLength, maxLength } : { minLength, maxLength, pattern });
const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const RequestId = Int(1, MAX_REQUEST_ID);
const RankNo = Int(0, MAX_RANK);
const Pid = Int(1, 0x3fffffff);
const Uid = Int(0, 0xffffffff);
const Count = Int(0, Number.MAX_SAFE_INTEGER);
/** A finite measure >= 0 (bytes, seconds, a load average). */
const Measure = Type.Number({ minimum: 0 });
/** /proc/PID/stat start time: decimal clock ticks since boot. */
const StartTime = Text(20, 1, '^[0-9]+$');
/** An absolute path on the agent's node (a core file or a directory of them). */
const NodePath = Text(MAX_CORES_DIR_CHARS, 2, '^/[^\\0]*$');
const Host = Text(MAX_HOST_CHARS, 1);
const Command = Text(MAX_COMMAND_CHARS);
const AgentId = Text(64, 1, '^[A-Za-z0-9._:-]+$');
const RequestMethodSpec = Type.Union([
  Type.Literal('snapshot'),
  Type.Literal('locate'),
  Type.Literal('counters'),
  Type.Literal('capture'),
]);
export type RequestMethod = Static<typeof RequestMethodSpec>;

export const WireError = Type.Object(
  { code: Text(MAX_CODE_CHARS, 1), message: Text(MAX_MESSAGE_CHARS) },
  Strict,
);
export type WireError = Wire<typeof WireError>;

/** What the agent knows about the MPI library of the ranks it reads (JobSnapshot.mpi). */
export const MpiInfo = Type.Object(
  {
    library: MpiLibrary,
    /** Path of the message-queue DLL in use; null when none could be loaded. */
    dll: Nullable(Text(MAX_PATH_CHARS)),
    lengthUnit: LengthUnit,
  },
  Strict,
);
export type MpiInfo = Wire<typeof MpiInfo>;

export const AgentHandshake = Type.Object(
  {
    token: Text(512),
    protocol: Int(0, MAX_REQUEST_ID),
    agentId: AgentId,
    host: Host,
    version: Text(64),
  },
  Strict,
);
export type AgentHandshake = Wire<typeof AgentHandshake>;

export const AgentHealth = Type.Object(
  {
    rssBytes: Measure,
    heapUsedBytes: Measure,
    uptimeSeconds: Measure,
    loadAverage1m: Measure,
    activeRequests: Int(0, MAX_REQUEST_ID),
    lastError: Nullable(WireError),
  },
  Strict,
);
export type AgentHealth = Wire<typeof AgentHealth>;

/** One rank to read on this node. */
export const RankTarget = Type.Object(
  {
    rank: RankNo,
    pid: Pid,
    /** /proc/PID/stat start time when the job was located: with (host, pid) it pins the identity. */
    startTime: Type.Optional(StartTime),
    /** The rank's core file (a job read from cores): its path on this node. */
    core: Type.Optional(NodePath),
  },
  Strict,
);
export type RankTarget = Wire<typeof RankTarget>;

/** A rank pinned by its start time (DiscoveredRank; the targets of counters and capture). */
export const WireDiscoveredRank = Type.Object({ rank: RankNo, pid: Pid, startTime: StartTime }, Strict);
const PinnedRanks = Type.Array(WireDiscoveredRank, { maxItems: MAX_RANKS_PER_REQUEST });

/** One rank's core read (snapshot-spec CoreFileSource, with the protocol's tighter bounds). */
export const WireCoreFileSource = Type.Object(
  {
    rank: RankNo,
    path: Text(MAX_PATH_CHARS),
    pid: Int(1, Number.MAX_SAFE_INTEGER),
    signal: Int(0, 255),
    executable: Text(MAX_PATH_CHARS),
    writtenAt: Text(
      ensureExists(CoreFileSource.properties.writtenAt.maxLength, 'CoreFileSource.writtenAt.maxLength'),
      20,
      '^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?Z$',
    ),
  },
  Strict,
);

/** A rank of a located job and the node it runs on. */
export const LocatedRank = Type.Object(
  {
    rank: RankNo,
    pid: Pid,
    host: Host,
    /** /proc/PID/stat start time when the locator could read it (ranks on the starter's node). */
    startTime: Type.Optional(StartTime),
    /** The rank's core file, for a job read from cores. */
    core: Type.Optional(NodePath),
  },
  Strict,
);
export type LocatedRank = Wire<typeof LocatedRank>;

export const LocatedJob = Type.Object(
  {
    ranks: Type.Array(LocatedRank, { maxItems: MAX_RANKS_PER_REQUEST }),
    /** How the ranks were found, e.g. "mpir-proctable" or "process-tree". */
    method: Text(MAX_METHOD_CHARS, 1),
    /** Owner of the starter: only this uid (or an admin) sees and snapshots the job. */
    uid: Uid,
    /** The starter's command line, for display. */
    command: Command,
    /** The starter's /proc/PID/stat start time: (host, pid, startTime) is the job's identity. */
    starterStartTime: StartTime,
    /** The pid that stands for the job here when no starter pid located it (a Slurm job's first process). */
    starterPid: Type.Optional(Pid),
    /** A job read from cores: the directory (real path) its cores were found in. */
    coresDir: Type.Optional(NodePath),
    /** A Slurm job's other nodes (Slurm's names, normalised as hosts are): their agents locate their ranks. */
    otherNodes: Type.Optional(Type.Array(Host, { maxItems: MAX_OTHER_NODES })),
  },
  Strict,
);
export type LocatedJob = Wire<typeof LocatedJob>;

/** An MPI starter (mpirun/mpiexec) an agent sees on its node, before anyone attaches to it. */
export const SeenStarter = Type.Object(
  {
    starterPid: Pid,
    uid: Uid,
    command: Command,
    /** /proc/PID/stat start time (see LocatedJob.starterStartTime). */
    startTime: Type.Optional(StartTime),
  },
  Strict,
);
export type SeenStarter = Wire<typeof SeenStarter>;

/** A discovered job (watch-spec.ts DiscoveredJob) as a status carries it. */
export const WireDiscoveredJob = Type.Object(
  {
    key: Text(MAX_DISCOVERED_KEY_CHARS, 1),
    kind: Type.Union([Type.Literal('slurm'), Type.Literal('starter')]),
    /** A Slurm job id as discovery reports it: digits only. */
    slurmJob: Type.Optional(Text(20, 1, '^[0-9]{1,20}$')),
    starterPid: Type.Optional(Pid),
    starterStartTime: Type.Optional(StartTime),
    uid: Uid,
    command: Command,
    startedAt: Count,
    jobName: Type.Optional(Text(MAX_SLURM_NAME_CHARS)),
    partition: Type.Optional(Text(MAX_SLURM_NAME_CHARS)),
    account: Type.Optional(Text(MAX_SLURM_NAME_CHARS)),
    worldSize: Type.Optional(Int(1, MAX_RANK + 1)),
    watch: Type.Union([Type.Literal('on'), Type.Literal('off')]),
    ranks: PinnedRanks,
  },
  Strict,
);

export const WireDiscoveryOmitted = Type.Object({ uid: Uid, jobs: Int(1, 0x7fffffff) }, Strict);

/** status.discoveryScan: whether status.discovered lists every job of the node, and what it left out. */
export const DiscoveryScanInfo = Type.Object(
  {
    complete: Type.Boolean(),
    omitted: Type.Array(WireDiscoveryOmitted, { maxItems: MAX_DISCOVERY_OMITTED }),
  },
  Strict,
);
export type DiscoveryScanInfo = Wire<typeof DiscoveryScanInfo>;

export const SnapshotParams = Type.Object(
  {
    ranks: Type.Array(RankTarget, { maxItems: MAX_RANKS_PER_REQUEST }),
    timeoutMs: Int(1, MAX_REQUEST_ID),
    /** The job owner's uid: the agent reads only ranks of this uid (ReadOptions.ownerUid). */
    ownerUid: Type.Optional(Uid),
    /** An admin asked to read uid-0 ranks (ReadOptions.allowRoot); never set for other users. */
    allowRoot: Type.Optional(Type.Boolean()),
    /** The hang watch's sample (ReadOptions.light): no forced collection in the reader after it. */
    light: Type.Optional(Type.Boolean()),
    /** Expressions each rank reads in the same stop (RankSnapshot.values), as the API caps them. */
    evals: Type.Optional(Type.Array(ApiEvalRequest, { maxItems: MAX_API_EVALS })),
  },
  Strict,
);
export type SnapshotParams = Wire<typeof SnapshotParams>;

/** What a locate request names: a starter pid on the node, a Slurm job id ("1234", "1234.0"), or a core directory. */
export const LocateTarget = Type.Union([
  Type.Object({ starterPid: Pid }, Strict),
  Type.Object({ slurmJob: Text(32, 1, SLURM_JOB_PATTERN) }, Strict),
  Type.Object({ coresDir: NodePath }, Strict),
]);
export type LocateTarget = Wire<typeof LocateTarget>;
export const LOCATE_KEYS = ['starterPid', 'slurmJob', 'coresDir'] as const;

/** What a `counters` request names: ranks pinned by start time, and the uid they must belong to. */
export const CountersParams = Type.Object({ ranks: PinnedRanks, ownerUid: Uid }, Strict);
export type CountersParams = Wire<typeof CountersParams>;

/** Parameters of a `capture` request: ranks pinned by start time, their owner, the directory's name. */
export const CaptureParams = Type.Object(
  {
    ranks: PinnedRanks,
    ownerUid: Uid,
    /** One path component: the agent writes into `<its first core dir>/<name>`. */
    name: Text(200, 1, CAPTURE_NAME_PATTERN),
  },
  Strict,
);
export type CaptureParams = Wire<typeof CaptureParams>;

export const SnapshotResult = Type.Object(
  {
    count: Int(0, MAX_RANKS_PER_REQUEST),
    mpi: Nullable(MpiInfo),
    durationMicros: Count,
    /** A core job: the cores read (JobSnapshot.source.cores). */
    cores: Type.Optional(Type.Array(WireCoreFileSource, { maxItems: MAX_RANKS_PER_REQUEST })),
  },
  Strict,
);
export type SnapshotResult = Wire<typeof SnapshotResult>;

/** What /proc says about one rank (watch-spec.ts RankCounters). */
export const WireRankCounters = Type.Object(
  { rank: RankNo, cpuTicks: Count, switches: Count, state: Text(1, 1, '^[A-Za-z]$') },
  Strict,
);

/** A rank whose counters could not be read, and why (MQD_E_PID_REUSED, MQD_E_FOREIGN_PROCESS...). */
export const CounterError = Type.Object({ rank: RankNo, error: WireError }, Strict);
export type CounterError = Wire<typeof CounterError>;

/** The answer to a `counters` request: every asked rank in `ranks` or in `errors`. */
export const CountersResult = Type.Object(
  {
    ranks: Type.Array(WireRankCounters, { maxItems: MAX_RANKS_PER_REQUEST }),
    errors: Type.Array(CounterError, { maxItems: MAX_RANKS_PER_REQUEST }),
    /** USER_HZ: the unit of RankCounters.cpuTicks. */
    clockTicksPerSecond: Int(1, 1_000_000),
    /** Epoch ms of the read. */
    at: Count,
  },
  Strict,
);
export type CountersResult = Wire<typeof CountersResult>;

/** One rank of a capture: its core's file name and size, or why it has none. */
export const CapturedRank = Type.Object(
  {
    rank: RankNo,
    pid: Pid,
    /** The core's file name in `dir`; null when it was not written. */
    core: Nullable(Text(255, 1, '^[A-Za-z0-9][A-Za-z0-9._-]*$')),
    bytes: Count,
    /** How long the rank was stopped for its core, microseconds (0 when it was not stopped). */
    pausedMicros: Count,
    error: Nullable(WireError),
  },
  Strict,
);
export type CapturedRank = Wire<typeof CapturedRank>;

/** The answer to a `capture` request: the directory (real path) and every asked rank. */
export const CaptureResult = Type.Object(
  { dir: NodePath, ranks: Type.Array(CapturedRank, { maxItems: MAX_RANKS_PER_REQUEST }) },
  Strict,
);
export type CaptureResult = Wire<typeof CaptureResult>;

// --- messages, aggregator -> agent ---------------------------------------------------------

export const WelcomeMessage = Type.Object(
  {
    type: Type.Literal('welcome'),
    protocol: Int(0, MAX_REQUEST_ID),
    agentId: AgentId,
    maxMessageBytes: Int(1024, Number.MAX_SAFE_INTEGER),
    statusIntervalMs: Int(10, MAX_REQUEST_ID),
    keepaliveMs: Int(10, MAX_REQUEST_ID),
  },
  Strict,
);
const request = <M extends RequestMethod, P extends TSchema>(method: M, params: P) =>
  Type.Object({ type: Type.Literal('request'), id: RequestId, method: Type.Literal(method), params }, Strict);
/** Each request by its method. */
export const REQUEST_MESSAGES = {
  snapshot: request('snapshot', SnapshotParams),
  locate: request('locate', LocateTarget),
  counters: request('counters', CountersParams),
  capture: request('capture', CaptureParams),
} as const;
export const RefusedMessage = Type.Object(
  { type: Type.Literal('refused'), refId: Nullable(RequestId), error: WireError },
  Strict,
);
export const ServerMessage = Type.Union([
  WelcomeMessage,
  REQUEST_MESSAGES.snapshot,
  REQUEST_MESSAGES.locate,
  REQUEST_MESSAGES.counters,
  REQUEST_MESSAGES.capture,
  RefusedMessage,
]);
export type ServerMessage = Wire<typeof ServerMessage>;

// --- messages, agent -> aggregator ---------------------------------------------------------

export const StatusMessage = Type.Object(
  {
    type: Type.Literal('status'),
    health: AgentHealth,
    mpi: Nullable(MpiInfo),
    jobs: Type.Array(SeenStarter, { maxItems: MAX_SEEN_JOBS }),
    discovered: Type.Array(WireDiscoveredJob, { maxItems: MAX_DISCOVERED_JOBS }),
    /** Absent from agents that predate it. */
    discoveryScan: Type.Optional(DiscoveryScanInfo),
  },
  Strict,
);
/** Part of the answer to snapshot request `id`; each rank is checked on its own (checkRank). */
export const ChunkMessage = Type.Object(
  {
    type: Type.Literal('chunk'),
    id: RequestId,
    ranks: Type.Array(RankSnapshot, { maxItems: MAX_RANKS_PER_REQUEST }),
  },
  Strict,
);
export const AliveMessage = Type.Object(
  { type: Type.Literal('alive'), ids: Type.Array(RequestId, { maxItems: MAX_ALIVE_IDS }) },
  Strict,
);
const reply = <M extends RequestMethod, R extends TSchema>(method: M, result: R) =>
  Type.Object(
    {
      type: Type.Literal('reply'),
      id: RequestId,
      method: Type.Literal(method),
      ok: Type.Literal(true),
      result,
    },
    Strict,
  );
/** Each successful reply by its method. */
export const REPLY_MESSAGES = {
  snapshot: reply('snapshot', SnapshotResult),
  locate: reply('locate', LocatedJob),
  counters: reply('counters', CountersResult),
  capture: reply('capture', CaptureResult),
} as const;
export const FailedReplyMessage = Type.Object(
  {
    type: Type.Literal('reply'),
    id: RequestId,
    method: RequestMethodSpec,
    ok: Type.Literal(false),
    error: WireError,
  },
  Strict,
);
export const ReplyMessage = Type.Union([
  REPLY_MESSAGES.snapshot,
  REPLY_MESSAGES.locate,
  REPLY_MESSAGES.counters,
  REPLY_MESSAGES.capture,
  FailedReplyMessage,
]);
export type ReplyMessage = Wire<typeof ReplyMessage>;
export const AgentMessage = Type.Union([StatusMessage, ChunkMessage, AliveMessage, ReplyMessage]);
export type AgentMessage = Wire<typeof AgentMessage>;

// The watch shapes (watch-spec.ts) and the wire's are one: a change to either fails to compile.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const same = <T extends true>(): T | undefined => undefined;
same<Same<Wire<typeof WireDiscoveredJob>, DiscoveredJob>>();
same<Same<Wire<typeof WireDiscoveredRank>, DiscoveredRank>>();
same<Same<Wire<typeof WireDiscoveryOmitted>, DiscoveryOmitted>>();
same<Same<Wire<typeof WireRankCounters>, RankCounters>>();
same<Same<Wire<typeof WireCoreFileSource>, CoreFileSource>>();

// --- at the edge ---------------------------------------------------------------------------
// How both ends read a message: the status and the chunk first as envelopes (a status's
// entries and scan, and a chunk's ranks, are checked one by one, so one bad entry is dropped
// alone), every schema compiled once, on first use (TypeBox's TypeCompiler, as checkRank).

/** A schema of this spec (what checkWire takes). */
export type WireSchema = TSchema;

/** A status as the edge reads it first: its lists' entries, and its scan, are checked one by one. */
export const StatusEnvelope = Type.Object(
  {
    ...StatusMessage.properties,
    jobs: Type.Array(Type.Unknown(), { maxItems: MAX_SEEN_JOBS }),
    discovered: Type.Array(Type.Unknown(), { maxItems: MAX_DISCOVERED_JOBS }),
    discoveryScan: Type.Optional(Type.Unknown()),
  },
  Strict,
);
/** A chunk as the edge reads it first: each rank is checked on its own (checkRank). */
export const ChunkEnvelope = Type.Object(
  { ...ChunkMessage.properties, ranks: Type.Array(Type.Unknown(), { maxItems: MAX_RANKS_PER_REQUEST }) },
  Strict,
);

/** Why a value is refused: the field (`.params.ranks[0].pid`, '' for the value itself) and what it wants. */
export interface WireFault {
  readonly path: string;
  readonly message: string;
}

const compiled = new Map<TSchema, TypeCheck<TSchema>>();

/** null when `v` matches `schema`, else its first bad field in the order the fields are written. */
export function checkWire(schema: TSchema, v: unknown): WireFault | null {
  let c = compiled.get(schema);
  if (c === undefined) {
    c = TypeCompiler.Compile(schema);
    compiled.set(schema, c);
  }
  if (c.Check(v)) return null;
  const e = firstError(c.Errors(v));
  return e === undefined
    ? { path: '', message: 'does not match' }
    : { path: wireFieldPath(e.path), message: explain(e) };
}

/** A JSON pointer (`/communicators/0/sends/1`) as a field path (`.communicators[0].sends[1]`). */
export function wireFieldPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((k) => (/^\d+$/.test(k) ? `[${k}]` : `.${k.replace(/~1/g, '/').replace(/~0/g, '~')}`))
    .join('');
}

/** Errors that say only that the value has another type, or a field another variant has. */
const SHALLOW: ReadonlySet<ValueErrorType> = new Set([
  ValueErrorType.ObjectAdditionalProperties,
  ValueErrorType.Null,
  ValueErrorType.String,
  ValueErrorType.Number,
  ValueErrorType.Integer,
  ValueErrorType.Boolean,
  ValueErrorType.Object,
  ValueErrorType.Array,
  ValueErrorType.Literal,
]);

/**
 * The first bad field, unknown fields first: a missing field is reported by its own check
 * (`expected a string ...`); a union by its variant whose first error lies deepest, and at
 * equal depth one about the value itself (a malformed Slurm id rather than "not a starter pid").
 */
function firstError(errors: Iterable<ValueError>): ValueError | undefined {
  let missing: ValueError | undefined;
  for (const e of errors) {
    if (e.type === ValueErrorType.ObjectRequiredProperty) {
      missing ??= e;
      continue;
    }
    if (e.type !== ValueErrorType.Union) return e;
    const score = (f: ValueError) => f.path.split('/').length * 2 + (SHALLOW.has(f.type) ? 0 : 1);
    let best: ValueError | undefined;
    for (const variant of e.errors) {
      const f = firstError(variant);
      if (f !== undefined && score(f) > (best === undefined ? score(e) : score(best))) best = f;
    }
    return best ?? e;
  }
  return missing;
}

/** What the schema at a bad field wants, in the words of the protocol's refusals. */
function wants(s: TSchema): string {
  const any = s['anyOf'] as TSchema[] | undefined;
  if (any !== undefined) {
    const consts = any.map((x) => x['const']);
    return consts.every((c) => typeof c === 'string')
      ? `expected one of ${consts.join(', ')}`
      : any.map(wants).join(' or ');
  }
  if (s['const'] !== undefined) return `expected ${JSON.stringify(s['const'])}`;
  switch (s['type']) {
    case 'integer':
      return `expected an integer in [${s['minimum']}, ${s['maximum']}]`;
    case 'number':
      return 'expected a finite number >= 0';
    case 'string':
      return `expected a string of ${s['minLength'] ?? 0}..${s['maxLength']} characters`;
    case 'boolean':
      return 'expected a boolean';
    case 'array':
      return 'expected an array';
    case 'null':
      return 'expected null';
    default:
      return s['type'] === 'object' ? 'expected an object' : 'does not match';
  }
}

function explain(e: ValueError): string {
  if (e.type === ValueErrorType.ObjectAdditionalProperties) return 'unknown field';
  if (e.type === ValueErrorType.ArrayMaxItems) return `more than ${e.schema['maxItems']} items`;
  if (e.type === ValueErrorType.StringPattern) return `does not match ${e.schema['pattern']}`;
  return wants(e.schema);
}
