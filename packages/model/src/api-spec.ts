// The aggregator's REST API and its /ui socket.io events: the one spec of every shape that
// crosses between apps/server and apps/web (the snapshot itself is snapshot-spec.ts). The
// server builds its route schemas from API_ROUTES (request validation, response
// serialisation, OpenAPI, and through the TypeBox type provider the handlers' types); the
// web decodes every response and event with api-validate.ts against the same definitions.
// Adding or renaming a field here changes both ends: a mismatch fails to compile, not to show.
//
// Conventions:
// - Every route lives under /api; `url` below is relative to it, in Fastify's `:param` syntax.
// - Times are ISO 8601 UTC strings (`2026-03-01T00:00:00.000Z`); the server keeps epoch ms.
// - Ids are non-empty text: job and snapshot ids are random base64url, audit ids integers.
// - Errors are always ApiErrorBody `{statusCode, code, message}` with an MQD_E_* code and a
//   message `CODE: what happened: what to do`.
// - A stored snapshot is sent as stored: in a schema it is a reference to the shared
//   `JobSnapshot` schema (registered by the server under that $id), checked by
//   validateSnapshot where it is decoded.
// Browser-safe: only @sinclair/typebox.
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import type { JobId as JobIdT, SnapshotId as SnapshotIdT } from './brand.js';
import { OVERVIEW_MEDIA_TYPE } from './edges/overview.js';
import {
  CodedError,
  type JobSnapshot,
  LengthUnit,
  MAX_EVAL_EXPR_CHARS,
  MpiLibrary,
  QueueKind,
} from './snapshot-spec.js';
import { ApiFleetJob, ApiWatchPolicy } from './watch-spec.js';

const Int = Type.Integer();
const Count = Type.Integer({ minimum: 0 });
const Text = Type.String();
const Bool = Type.Boolean();
const IsoTime = Type.String({ format: 'date-time' });
const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const JobIdText = Type.Unsafe<JobIdT>(Type.String({ minLength: 1, maxLength: 64 }));
const SnapshotIdText = Type.Unsafe<SnapshotIdT>(Type.String({ minLength: 1, maxLength: 64 }));

// --- shared schemas (registered by $id on the server, referenced by routes) ------------------

/** Every error reply. `statusCode` repeats the HTTP status. */
export const ApiErrorBody = Type.Object(
  {
    statusCode: Int,
    code: Text,
    message: Text,
  },
  { $id: 'ApiError', description: 'A coded error: `message` is `CODE: what happened: what to do`.' },
);
export type ApiErrorBody = Static<typeof ApiErrorBody>;

/** A reference to ApiErrorBody: the one way a route schema names its error replies. */
export const ApiErrorRef = Type.Unsafe<ApiErrorBody>(Type.Ref('ApiError'));
/** A reference to the snapshot format (snapshot-spec.ts), registered under $id JobSnapshot. */
export const JobSnapshotRef = Type.Unsafe<JobSnapshot>(Type.Ref('JobSnapshot'));
/** $ids of the shared schemas; the OpenAPI document lists exactly these as components. */
export const SHARED_SCHEMA_IDS = ['ApiError', 'JobSnapshot'] as const;

// --- records ----------------------------------------------------------------------------------

/** A user as the API shows them (never their token). */
export const ApiUser = Type.Object({
  name: Text,
  /** The Unix uid whose jobs this user sees; null = none (unless admin). */
  uid: Nullable(Type.Integer({ minimum: 0 })),
  admin: Bool,
});
export type ApiUser = Static<typeof ApiUser>;

/**
 * Queue kinds no read rank's MPI library could show (null on every communicator that has the
 * queue): their count is unknown, not 0. Absent or empty: every kind was read.
 */
export const UnreadableQueues = Type.Array(QueueKind, { maxItems: 3 });

/**
 * One stored snapshot's metadata and queue summary, flat (no nested `summary`). Counts are
 * over all ranks; `partial` = some ranks are agent-missing (`missing > 0`).
 */
export const ApiSnapshotMeta = Type.Object({
  id: SnapshotIdText,
  jobId: JobIdText,
  takenAt: IsoTime,
  durationMicros: Count,
  createdBy: Text,
  partial: Type.Boolean({ description: 'some ranks are agent-missing' }),
  /** Ranks in the snapshot = ok + errors + missing. */
  ranks: Count,
  ok: Count,
  /** Ranks in state error or no-queues. */
  errors: Count,
  /** Ranks in state agent-missing. */
  missing: Count,
  missingRanks: Type.Array(Count, { description: 'agent-missing ranks (first 4096)' }),
  pendingSends: Count,
  pendingReceives: Count,
  unexpected: Count,
  unreadable: Type.Optional(UnreadableQueues),
  digest: Type.String({ description: 'sha256 of the queues: equal = nothing moved' }),
  /** Bytes of the snapshot JSON, and of what is stored (gzip). */
  bytes: Count,
  storedBytes: Count,
});
export type ApiSnapshotMeta = Static<typeof ApiSnapshotMeta>;

/** The one vocabulary of a job's state (analysis/job-state.ts decides it). */
export const JobState = Type.Union([
  Type.Literal('hung'),
  Type.Literal('waiting'),
  Type.Literal('progressing'),
  Type.Literal('computing'),
  Type.Literal('unknown'),
  Type.Literal('ended'),
]);
export type JobState = Static<typeof JobState>;
export const JOB_STATES: readonly JobState[] = [
  'hung',
  'waiting',
  'progressing',
  'computing',
  'unknown',
  'ended',
];

/** An attached job. `state` is decided by the server from its newest snapshots. */
export const ApiJob = Type.Object({
  id: JobIdText,
  /** Node of the starter. */
  host: Text,
  starterPid: Type.Integer({ minimum: 1 }),
  uid: Count,
  /** The owner's name when the server knows it (a dashboard user of that uid, else the node's passwd). */
  user: Type.Optional(Nullable(Text)),
  command: Text,
  /** How the ranks were found, e.g. `mpir-proctable`. */
  method: Text,
  rankCount: Count,
  /** Ranks per node and whether that node's agent is connected now. */
  hosts: Type.Array(Type.Object({ host: Text, ranks: Count, agentConnected: Bool })),
  createdAt: IsoTime,
  createdBy: Text,
  endedAt: Nullable(IsoTime),
  state: JobState,
  /** The first snapshot of the current run of equal states, and snapshots since (gaps included). */
  since: Type.Optional(Nullable(IsoTime)),
  sinceSnapshots: Type.Optional(Count),
  /** The first snapshot of the current run of equal queue digests, and snapshots in that run. */
  unchangedSince: Type.Optional(Nullable(IsoTime)),
  unchangedSnapshots: Type.Optional(Count),
  /** The hang watch's one-line diagnosis, else why the state. */
  diagnosis: Type.Optional(Text),
  /** The hang watch's stop budget is used up: its last verdict holds until then. */
  pausedUntil: Type.Optional(Nullable(IsoTime)),
  lastSnapshotAt: Nullable(IsoTime),
  lastSnapshot: Nullable(ApiSnapshotMeta),
  /**
   * Set for a job read from core files (attach `{coresDir}`): the directory, as resolved on the
   * server (symlinks followed). Such a job never ends and is not auto-snapshotted: its
   * snapshots are all equal.
   */
  coresDir: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
});
export type ApiJob = Static<typeof ApiJob>;

/** An MPI starter an agent sees that nobody attached yet. */
export const ApiStarter = Type.Object({
  host: Text,
  starterPid: Type.Integer({ minimum: 1 }),
  uid: Count,
  command: Text,
});
export type ApiStarter = Static<typeof ApiStarter>;

/** What an agent last reported about its process (agent-protocol.ts `status`). */
export const ApiAgentHealth = Type.Object({
  rssBytes: Type.Number(),
  heapUsedBytes: Type.Number(),
  uptimeSeconds: Type.Number(),
  loadAverage1m: Type.Number(),
  activeRequests: Count,
  lastError: Nullable(CodedError),
});
export type ApiAgentHealth = Static<typeof ApiAgentHealth>;

/** One per-node agent, connected or recently disconnected. */
export const ApiAgent = Type.Object({
  agentId: Text,
  host: Text,
  version: Text,
  connected: Bool,
  connectedAt: IsoTime,
  lastSeenAt: IsoTime,
  disconnectedAt: Nullable(IsoTime),
  /** null until the agent's first status report. */
  health: Nullable(ApiAgentHealth),
  /** null until the agent's reader has loaded an MPI library's DLL. */
  mpi: Nullable(Type.Object({ library: MpiLibrary, dll: Nullable(Text), lengthUnit: LengthUnit })),
  /** Starters the agent sees on its node. */
  jobs: Type.Array(Type.Object({ starterPid: Type.Integer({ minimum: 1 }), uid: Count, command: Text })),
  /** Messages accepted from it, refused from it, and its requests still open. */
  messages: Count,
  refused: Count,
  pending: Count,
  /**
   * The aggregator instance this agent is connected to, when several instances share a
   * PostgreSQL store (docs/deploy/cluster.md); absent with one instance.
   */
  instance: Type.Optional(Text),
});
export type ApiAgent = Static<typeof ApiAgent>;

/**
 * One audit entry. `action` is open text on purpose (`login`, `attach`, `snapshot`, `share`,
 * `user-create`, `agent-connect`, `agent-disconnect` today): a newer server's action is shown.
 */
export const ApiAuditEntry = Type.Object({
  id: Count,
  at: IsoTime,
  who: Text,
  action: Text,
  jobId: Nullable(JobIdText),
  snapshotId: Nullable(SnapshotIdText),
  detail: Text,
});
export type ApiAuditEntry = Static<typeof ApiAuditEntry>;

/** A job whose queue digest stayed equal over its last `snapshots` snapshots. */
export const ApiHungJob = Type.Object({
  jobId: JobIdText,
  /** takenAt of the oldest of the equal snapshots. */
  since: IsoTime,
  snapshots: Count,
  digest: Text,
  pendingSends: Count,
  pendingReceives: Count,
  unexpected: Count,
  unreadable: Type.Optional(UnreadableQueues),
  lastSnapshotId: SnapshotIdText,
});
export type ApiHungJob = Static<typeof ApiHungJob>;

/** Jobs per GET /fleet page unless `limit` says otherwise, and the most one page holds. */
export const FLEET_PAGE_DEFAULT = 200;
export const FLEET_PAGE_MAX = 500;
/** Most ended jobs one GET /jobs page holds (`endedLimit`). */
export const JOBS_ENDED_PAGE_MAX = 1000;

/** A live share link. */
export const ApiShare = Type.Object({
  id: Text,
  snapshotId: SnapshotIdText,
  createdBy: Text,
  createdAt: IsoTime,
  expiresAt: IsoTime,
  /**
   * Present when the system made the link (`watch`: a hang notification's): no user owns it;
   * the owner of its job and the admins list and revoke it.
   */
  madeBy: Type.Optional(Type.Literal('watch')),
});
export type ApiShare = Static<typeof ApiShare>;

/** A stored snapshot with its metadata. */
export const ApiSnapshotWithMeta = Type.Object({ meta: ApiSnapshotMeta, snapshot: JobSnapshotRef });
export type ApiSnapshotWithMeta = Static<typeof ApiSnapshotWithMeta>;

// --- requests ---------------------------------------------------------------------------------

/** Path ids (jobs, snapshots, shares): short base64url-ish text. */
/**
 * A client's key for one snapshot request (header `Idempotency-Key`): a retry with the same key
 * (after a lost answer) gets the snapshot the first request stored, or joins it while it runs,
 * and stores nothing twice. A fresh key per new request; keys are per user.
 */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
export const RequestKey = Type.String({ minLength: 8, maxLength: 128, pattern: '^[A-Za-z0-9._:-]+$' });

export const IdParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' }),
});
const UserName = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._@-]+$' });

/** A function name in an eval request (EvalRequest.frame's limit). */
const MAX_EVAL_FRAME_CHARS = 1024;
/** Most expressions one snapshot request reads on each rank (`evals` of takeSnapshot). */
export const MAX_API_EVALS = 8;
/**
 * An expression for the reader to evaluate on every rank, and the function whose frame it is
 * read in: printable ASCII only (C, C++ and Fortran expressions and function names need no
 * more), length-capped as the snapshot format caps them.
 */
export const ApiEvalRequest = Type.Object(
  {
    expr: Type.String({ minLength: 1, maxLength: MAX_EVAL_EXPR_CHARS, pattern: '^[ -~]+$' }),
    frame: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_EVAL_FRAME_CHARS, pattern: '^[ -~]+$' })),
    /** A progress counter: the diagnosis's least-progressed ranks are those with its smallest number (EvalRequest.progress). */
    progress: Type.Optional(Type.Literal(true)),
  },
  { additionalProperties: false },
);
export type ApiEvalRequest = Static<typeof ApiEvalRequest>;
/** The snapshot request's body (optional): expressions to read on every rank in the same stop. */
export const TakeSnapshotBody = Type.Object(
  { evals: Type.Optional(Type.Array(ApiEvalRequest, { maxItems: MAX_API_EVALS })) },
  { additionalProperties: false },
);
export type TakeSnapshotBody = Static<typeof TakeSnapshotBody>;

/** A group of ranks that read one same value (ValueGroup of analysis/values.ts), its ranks compressed. */
export const ApiValueGroup = Type.Object({
  text: Text,
  number: Nullable(Type.Number()),
  code: Nullable(Text),
  count: Count,
  /** The ranks as "0-2,4-7", cut at MAX_VALUE_RANKS_CHARS (ending in "…"). */
  ranks: Text,
  /** The group's lowest ranks (at most 8): links to their rank detail. */
  first: Type.Array(Count, { maxItems: 8 }),
});
export type ApiValueGroup = Static<typeof ApiValueGroup>;
/** Numeric values against rank: the ranks in order, cut into at most MAX_VALUE_BINS bins. */
export const ApiValueBin = Type.Object({
  /** The bin's first and last rank (ranks in ascending order). */
  lo: Count,
  hi: Count,
  /** The smallest and largest number read in the bin; null when no rank of it has a number. */
  min: Nullable(Type.Number()),
  max: Nullable(Type.Number()),
});
export type ApiValueBin = Static<typeof ApiValueBin>;
/** One expression across a snapshot's ranks, aggregated on the server (summarizeValues). */
export const ApiValueSummary = Type.Object({
  expr: Text,
  frame: Nullable(Text),
  /** Ranks with a reading (a value or a coded message). */
  read: Count,
  /** Largest first, at most MAX_VALUE_GROUPS; `groupsOmitted` more were left out. */
  groups: Type.Array(ApiValueGroup),
  groupsOmitted: Count,
  min: Nullable(Type.Object({ value: Type.Number(), ranks: Text })),
  max: Nullable(Type.Object({ value: Type.Number(), ranks: Text })),
  /** The few ranks whose value differs from the rest, with their value; the others' value. */
  outliers: Type.Array(Type.Object({ rank: Count, text: Text })),
  others: Nullable(Text),
  bins: Type.Array(ApiValueBin),
  /** Ranks with no reading of this expression, compressed ("" when none). */
  unread: Text,
});
export type ApiValueSummary = Static<typeof ApiValueSummary>;
export const MAX_VALUE_GROUPS = 32;
export const MAX_VALUE_BINS = 128;
export const MAX_VALUE_RANKS_CHARS = 200;

/**
 * The share request; `maxSeconds` is the server's --max-share-ttl-seconds (the schema in
 * API_ROUTES has no maximum; the server registers the route with its own).
 */
export const shareBody = (maxSeconds?: number) =>
  Type.Object(
    {
      expiresInSeconds: Type.Optional(
        Type.Integer(maxSeconds === undefined ? { minimum: 1 } : { minimum: 1, maximum: maxSeconds }),
      ),
    },
    { additionalProperties: false },
  );

// --- routes -----------------------------------------------------------------------------------

export type HttpMethod = 'GET' | 'POST' | 'DELETE';
/** Who may call a route: anyone, a logged-in user, or an admin. */
export type RouteAuth = 'public' | 'user' | 'admin';

export interface RouteSpec {
  readonly method: HttpMethod;
  /** Under /api, Fastify syntax (`/jobs/:id`). */
  readonly url: string;
  readonly auth: RouteAuth;
  /** OpenAPI tag and summary. */
  readonly tag: string;
  readonly summary: string;
  readonly description?: string;
  readonly params?: TSchema;
  readonly querystring?: TSchema;
  readonly body?: TSchema;
  /** Request headers the route reads (lower-case names; other headers pass). */
  readonly headers?: TSchema;
  /** The success status and its body (`Type.Null()` for 204). */
  readonly status: 200 | 201 | 204;
  readonly response: TSchema;
  /** Where a JobSnapshot sits in the response ('' = the body itself): validated in full there. */
  readonly snapshotAt?: '' | 'snapshot';
  /** The success body is an encoded snapshot overview (edges/overview.ts, decodeOverview), not JSON. */
  readonly overview?: true;
  /** Error statuses this route documents (all with ApiErrorBody). */
  readonly errors: readonly number[];
  /** Left out of the OpenAPI document. */
  readonly hide?: boolean;
}

const route = <const R extends RouteSpec>(r: R): R => r;

/** The body of the overview routes: binary, laid out as packages/model edges/overview.ts says. */
const OverviewBody = Type.Unsafe<Uint8Array>({
  type: 'string',
  format: 'binary',
  description: `${OVERVIEW_MEDIA_TYPE}: "MQDO", format (u32 LE), JSON length (u32 LE), the JSON part, padding to 8, the edge columns`,
});
const OVERVIEW_DESCRIPTION =
  'Computed once per snapshot on the server (explainSnapshot, buildEdges of packages/model) and stored beside it; ' +
  'the dashboard draws the diagnosis and the matrix from it before the whole snapshot has arrived.';
/** Errors every route behind the login can give. */
const AUTHED = [401, 403] as const;

/** A Slurm job as `squeue` shows it: JOBID, or JOBID.STEP (a number, `batch` or `extern`). */
export const SLURM_JOB_PATTERN = '^[0-9]{1,10}(\\.([0-9]{1,10}|batch|extern))?$';
export const SLURM_JOB_RE: RegExp = new RegExp(SLURM_JOB_PATTERN);
/** Longest core directory path an attach may name (PATH_MAX). */
export const MAX_CORES_DIR_CHARS = 4096;

export const API_ROUTES = {
  health: route({
    method: 'GET',
    url: '/health',
    auth: 'public',
    tag: 'public',
    summary: 'Liveness, versions and the number of connected agents',
    status: 200,
    response: Type.Object({
      status: Type.Literal('ok'),
      version: Text,
      protocol: Type.Integer({ description: 'agent protocol version' }),
      schemaVersion: Type.Integer({ description: 'store schema version' }),
      instance: Type.Optional(
        Type.String({
          minLength: 1,
          maxLength: 300,
          description: 'which aggregator instance answered, when several share a PostgreSQL store',
        }),
      ),
      agents: Count,
    }),
    errors: [],
  }),
  openapi: route({
    method: 'GET',
    url: '/openapi.json',
    auth: 'public',
    tag: 'public',
    summary: 'This API as an OpenAPI 3 document',
    status: 200,
    response: Type.Object({ openapi: Text, paths: Type.Object({}, { additionalProperties: true }) }),
    errors: [],
    hide: true,
  }),
  login: route({
    method: 'POST',
    url: '/login',
    auth: 'public',
    tag: 'public',
    summary: 'Exchange a login token for a session (cookie, and bearer token in the body)',
    description:
      'A live session cookie of another user is kept (409 MQD_E_SESSION_CONFLICT) unless `switchUser` is true: ' +
      'the dashboard sends it only after the person confirmed the switch.',
    body: Type.Object(
      { token: Type.String({ minLength: 1, maxLength: 512 }), switchUser: Type.Optional(Bool) },
      { additionalProperties: false },
    ),
    status: 200,
    response: Type.Object({ user: ApiUser, sessionToken: Text, expiresAt: IsoTime }),
    errors: [400, 401, 409, 429],
  }),
  logout: route({
    method: 'POST',
    url: '/logout',
    auth: 'public',
    tag: 'public',
    summary: 'End the session of this cookie or bearer token',
    status: 200,
    response: Type.Object({ ok: Bool }),
    errors: [],
  }),
  shared: route({
    method: 'GET',
    url: '/shared/:id',
    auth: 'public',
    tag: 'public',
    summary: 'A shared snapshot, read-only, without login, until the link expires',
    params: IdParams,
    status: 200,
    response: Type.Object({ meta: ApiSnapshotMeta, snapshot: JobSnapshotRef, expiresAt: IsoTime }),
    snapshotAt: 'snapshot',
    errors: [400, 404, 429],
  }),
  sharedOverview: route({
    method: 'GET',
    url: '/shared/:id/overview',
    auth: 'public',
    tag: 'public',
    summary: "A shared snapshot's overview (what the dashboard draws first), until the link expires",
    description: OVERVIEW_DESCRIPTION,
    params: IdParams,
    status: 200,
    response: OverviewBody,
    overview: true,
    errors: [400, 404, 429, 500, 503],
  }),
  me: route({
    method: 'GET',
    url: '/me',
    auth: 'user',
    tag: 'users',
    summary: 'The logged-in user',
    status: 200,
    response: Type.Object({ user: ApiUser }),
    errors: [401],
  }),
  jobs: route({
    method: 'GET',
    url: '/jobs',
    auth: 'user',
    tag: 'jobs',
    summary: 'Attached jobs, and starters the agents see that nobody attached yet',
    description:
      'Every live job, hung first (then by state, the longest in its state first); with `endedLimit`, ' +
      'only that many ended jobs from `endedOffset` (the newest ended first) and `endedTotal`, the ended ' +
      'jobs in all; without it, every ended job. `q`: jobs whose program, command, user, job id or node ' +
      'hold every word (case-insensitive).',
    querystring: Type.Object(
      {
        endedLimit: Type.Optional(Type.Integer({ minimum: 1, maximum: JOBS_ENDED_PAGE_MAX })),
        endedOffset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
        q: Type.Optional(Type.String({ maxLength: 200 })),
      },
      { additionalProperties: false },
    ),
    status: 200,
    response: Type.Object({
      jobs: Type.Array(ApiJob),
      starters: Type.Array(ApiStarter),
      /** With `endedLimit`: ended jobs (matching `q`) in all; `jobs` holds [endedOffset, endedOffset + endedLimit) of them. */
      endedTotal: Type.Optional(Count),
      endedOffset: Type.Optional(Count),
    }),
    errors: [400, 401],
  }),
  attach: route({
    method: 'POST',
    url: '/jobs/attach',
    auth: 'user',
    tag: 'jobs',
    summary:
      'Attach to a job by its starter pid, by its Slurm job id, or to a directory of its core files, through the agent on that node',
    description:
      'Without host, the only connected agent is used, or the one agent that reports this starter pid. ' +
      'A Slurm job (JOBID or JOBID.STEP) is located by the agent of its node (scontrol); the owner is the ' +
      "job's Slurm user. A core directory (absolute path; one core per rank, a `mqd capture` manifest or " +
      'files named rank-N.core) must resolve, symlinks followed, inside a directory the admin allows ' +
      '(`mqd serve --core-dir DIR`, MQD_CORE_DIRS; 403 MQD_E_FORBIDDEN otherwise); its cores must all ' +
      'belong to one uid, the owner of the job; a non-admin may open only their own cores, uid 0 only admins.',
    body: Type.Union([
      Type.Object(
        {
          host: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
          starterPid: Type.Integer({ minimum: 1, maximum: 0x3fffffff }),
        },
        { additionalProperties: false },
      ),
      Type.Object(
        {
          host: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
          slurmJob: Type.String({ pattern: SLURM_JOB_PATTERN, maxLength: 32 }),
        },
        { additionalProperties: false },
      ),
      Type.Object(
        {
          host: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
          coresDir: Type.String({ minLength: 1, maxLength: MAX_CORES_DIR_CHARS }),
        },
        { additionalProperties: false },
      ),
    ]),
    status: 201,
    response: Type.Object({ job: ApiJob }),
    errors: [400, ...AUTHED, 404, 409, 410, 422, 429, 502, 503, 504],
  }),
  job: route({
    method: 'GET',
    url: '/jobs/:id',
    auth: 'user',
    tag: 'jobs',
    summary: 'One job',
    params: IdParams,
    status: 200,
    response: Type.Object({ job: ApiJob }),
    errors: [400, ...AUTHED, 404],
  }),
  takeSnapshot: route({
    method: 'POST',
    url: '/jobs/:id/snapshots',
    auth: 'user',
    tag: 'jobs',
    summary: "Snapshot every rank of the job through each host's agent, merge and store",
    description:
      'Ranks whose agent is gone or too slow are in the snapshot in state agent-missing; `partial` says so. ' +
      'With an `Idempotency-Key` header, a retry with the same key returns the snapshot the first request ' +
      'stored (or joins it while it runs) instead of taking another; the same key for another job is 409. ' +
      '`evals`: expressions each rank reads in the same stop (RankSnapshot.values; GET /snapshots/:id/values aggregates them).',
    params: IdParams,
    headers: Type.Object({ [IDEMPOTENCY_KEY_HEADER]: Type.Optional(RequestKey) }),
    // Optional: a request without a body (validated as null) reads no expressions.
    body: Type.Union([TakeSnapshotBody, Type.Null()]),
    status: 201,
    response: Type.Object({ snapshot: ApiSnapshotMeta }),
    errors: [400, ...AUTHED, 404, 409, 410, 413, 429, 503],
  }),
  jobSnapshots: route({
    method: 'GET',
    url: '/jobs/:id/snapshots',
    auth: 'user',
    tag: 'jobs',
    summary: 'Snapshot history of a job, newest first',
    params: IdParams,
    querystring: Type.Object(
      { limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }) },
      { additionalProperties: false },
    ),
    status: 200,
    response: Type.Object({ snapshots: Type.Array(ApiSnapshotMeta) }),
    errors: [400, ...AUTHED, 404],
  }),
  snapshot: route({
    method: 'GET',
    url: '/snapshots/:id',
    auth: 'user',
    tag: 'snapshots',
    summary: 'A stored snapshot with its summary',
    params: IdParams,
    status: 200,
    response: ApiSnapshotWithMeta,
    snapshotAt: 'snapshot',
    errors: [400, ...AUTHED, 404],
  }),
  snapshotOverview: route({
    method: 'GET',
    url: '/snapshots/:id/overview',
    auth: 'user',
    tag: 'snapshots',
    summary: "A stored snapshot's overview: its explanation, the matrix's edge table and its header",
    description: OVERVIEW_DESCRIPTION,
    params: IdParams,
    status: 200,
    response: OverviewBody,
    overview: true,
    errors: [400, ...AUTHED, 404, 500, 503],
  }),
  snapshotValues: route({
    method: 'GET',
    url: '/snapshots/:id/values',
    auth: 'user',
    tag: 'snapshots',
    summary:
      'Each expression the snapshot read, across its ranks: groups, min/max, outliers and value against rank',
    description:
      "Aggregated on the server (summarizeValues of packages/model), so the browser never gets every rank's value.",
    params: IdParams,
    status: 200,
    response: Type.Object({ values: Type.Array(ApiValueSummary) }),
    errors: [400, ...AUTHED, 404],
  }),
  exportSnapshot: route({
    method: 'GET',
    url: '/snapshots/:id/export',
    auth: 'user',
    tag: 'snapshots',
    summary: 'The snapshot as a JSON file (the packages/model snapshot format)',
    params: IdParams,
    status: 200,
    response: JobSnapshotRef,
    snapshotAt: '',
    errors: [400, ...AUTHED, 404],
  }),
  share: route({
    method: 'POST',
    url: '/snapshots/:id/share',
    auth: 'user',
    tag: 'shares',
    summary: 'A read-only link to this snapshot that works without login until it expires',
    params: IdParams,
    body: shareBody(),
    status: 201,
    response: Type.Object({
      id: Text,
      url: Type.String({ description: 'the dashboard page of the frozen snapshot (/s/<id>)' }),
      apiUrl: Type.String({ description: 'the same snapshot as JSON (/api/shared/<id>)' }),
      expiresAt: IsoTime,
    }),
    errors: [400, ...AUTHED, 404, 429],
  }),
  shares: route({
    method: 'GET',
    url: '/shares',
    auth: 'user',
    tag: 'shares',
    summary:
      "The live share links this user created, and the hang watch's links to this user's jobs (every live link for admins)",
    status: 200,
    response: Type.Object({ shares: Type.Array(ApiShare) }),
    errors: [401],
  }),
  revokeShare: route({
    method: 'DELETE',
    url: '/shares/:id',
    auth: 'user',
    tag: 'shares',
    summary: 'Revoke a share link: it stops working at once',
    params: IdParams,
    status: 204,
    response: Type.Null(),
    errors: [400, 401, 404],
  }),
  agents: route({
    method: 'GET',
    url: '/admin/agents',
    auth: 'admin',
    tag: 'admin',
    summary: 'Connected and recently disconnected agents, with their health',
    status: 200,
    response: Type.Object({
      agents: Type.Array(ApiAgent),
      /** Agent messages and handshakes the hub refused since it started. */
      refusedMessages: Count,
      refusedHandshakes: Count,
    }),
    errors: [...AUTHED],
  }),
  activity: route({
    method: 'GET',
    url: '/admin/activity',
    auth: 'admin',
    tag: 'admin',
    summary: 'The audit trail, newest first (page back with before=<id>)',
    querystring: Type.Object(
      {
        limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
        before: Type.Optional(Type.Integer({ minimum: 1 })),
      },
      { additionalProperties: false },
    ),
    status: 200,
    response: Type.Object({ entries: Type.Array(ApiAuditEntry) }),
    errors: [400, ...AUTHED],
  }),
  hung: route({
    method: 'GET',
    url: '/admin/hung',
    auth: 'admin',
    tag: 'admin',
    summary: 'Jobs whose queues did not change over their last N snapshots',
    querystring: Type.Object(
      { snapshots: Type.Optional(Type.Integer({ minimum: 2, maximum: 1000 })) },
      { additionalProperties: false },
    ),
    status: 200,
    response: Type.Object({
      /** How many equal snapshots in a row make a job look hung. */
      snapshots: Count,
      jobs: Type.Array(ApiHungJob),
    }),
    errors: [400, ...AUTHED],
  }),
  fleet: route({
    method: 'GET',
    url: '/fleet',
    auth: 'user',
    tag: 'watch',
    summary: 'Every MPI job the agents discovered, with its hang-watch state (admins: all; users: their own)',
    description:
      'A page of `limit` jobs from `offset`: live hung jobs first, then the other live ones, then ended ones ' +
      '(newest first in each); `total` counts every job this user may see. Discovery is as the last watch ' +
      'round (or a background refresh at most every few seconds) left it. Rate limited per user (429 ' +
      'MQD_E_RATE_LIMITED with Retry-After).',
    querystring: Type.Object(
      {
        limit: Type.Integer({ minimum: 1, maximum: FLEET_PAGE_MAX, default: FLEET_PAGE_DEFAULT }),
        offset: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }),
        /** Search: every word in the program, command, user, job id, Slurm id or a node (case-insensitive). */
        q: Type.Optional(Type.String({ maxLength: 200 })),
      },
      { additionalProperties: false },
    ),
    status: 200,
    response: Type.Object({
      policy: ApiWatchPolicy,
      jobs: Type.Array(ApiFleetJob),
      /** Jobs this user may see in all; `jobs` is the page [offset, offset + limit) of them. */
      total: Count,
      offset: Count,
    }),
    errors: [400, ...AUTHED, 429],
  }),
  watchPolicy: route({
    method: 'GET',
    url: '/admin/watch',
    auth: 'admin',
    tag: 'admin',
    summary: "The hang watch's policy",
    status: 200,
    response: ApiWatchPolicy,
    errors: [...AUTHED],
  }),
  setWatchPolicy: route({
    method: 'POST',
    url: '/admin/watch',
    auth: 'admin',
    tag: 'admin',
    summary: "Replace the hang watch's policy (kept in the store; audited)",
    body: ApiWatchPolicy,
    status: 200,
    response: ApiWatchPolicy,
    errors: [400, ...AUTHED],
  }),
  createUser: route({
    method: 'POST',
    url: '/admin/users',
    auth: 'admin',
    tag: 'admin',
    summary: 'Create a user (or give an existing one a new token); the token is shown once',
    body: Type.Object(
      {
        name: UserName,
        uid: Nullable(Type.Integer({ minimum: 0, maximum: 0xffffffff })),
        admin: Type.Optional(Type.Boolean({ default: false })),
      },
      { additionalProperties: false },
    ),
    status: 201,
    response: Type.Object({ user: ApiUser, token: Text }),
    errors: [400, ...AUTHED],
  }),
  revokeToken: route({
    method: 'DELETE',
    url: '/admin/users/:name/token',
    auth: 'admin',
    tag: 'admin',
    summary: "Revoke a user's login token; their sessions end at once",
    params: Type.Object({ name: UserName }),
    status: 204,
    response: Type.Null(),
    errors: [...AUTHED, 404],
  }),
} as const;

export type ApiRoutes = typeof API_ROUTES;
export type RouteName = keyof ApiRoutes;
/** The success body of a route. */
export type ApiResponse<N extends RouteName> = Static<ApiRoutes[N]['response']>;

// --- /ui events -------------------------------------------------------------------------------

/**
 * Events on socket.io namespace /ui, one JSON payload each. Job events go to the job's owner
 * and the admins; agent events to every logged-in browser. They only prompt reloads through
 * the REST API, so they carry ids, not data (job.attached excepted: the job as GET /jobs lists it).
 */
export const UI_EVENTS = {
  /** Ranks answered so far while a snapshot fans in (invariant: received <= expected). */
  'snapshot.progress': Type.Object({ jobId: JobIdText, received: Count, expected: Count }),
  /** A snapshot was stored; `partial` when some ranks had no agent to answer for them. */
  'snapshot.done': Type.Object({ jobId: JobIdText, snapshotId: SnapshotIdText, partial: Bool }),
  /**
   * A snapshot failed and nothing was stored (whoever asked, auto-snapshots included): every
   * viewer's progress ends. `code` is an MQD_E_* code, `message` its `CODE: what: what to do`;
   * `requestKey` the Idempotency-Key of the request that started it, if it had one.
   */
  'snapshot.failed': Type.Object({
    jobId: JobIdText,
    code: Text,
    message: Text,
    requestKey: Type.Optional(RequestKey),
  }),
  'job.attached': ApiJob,
  /** The fleet changed (a job discovered, ended, or its watch state moved): reload GET /fleet. */
  'fleet.changed': Type.Object({ at: IsoTime }),
  'agent.connected': Type.Object({ host: Text, agentId: Text }),
  'agent.disconnected': Type.Object({ host: Text, agentId: Text, reason: Text }),
} as const;

export type UiEventName = keyof typeof UI_EVENTS;
export type UiEventPayload<N extends UiEventName> = Static<(typeof UI_EVENTS)[N]>;
export const UI_EVENT_NAMES = Object.keys(UI_EVENTS) as readonly UiEventName[];
