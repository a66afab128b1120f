// JSON schemas of the REST API: request validation (fastify's ajv), response serialisation
// and the OpenAPI document. The snapshot itself is the TypeBox schema of packages/model, used
// as plain JSON Schema. Times on the wire are ISO 8601 UTC strings.
import { JobSnapshot } from '@mqd/model';

const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;
const bool = { type: 'boolean' } as const;
const iso = { type: 'string', format: 'date-time' } as const;
const nullable = <T extends object>(s: T) => ({ anyOf: [s, { type: 'null' }] }) as const;

export const ApiError = {
  $id: 'ApiError',
  type: 'object',
  description: 'A coded error: `message` is `CODE: what happened: what to do`.',
  required: ['statusCode', 'code', 'message'],
  properties: { statusCode: int, code: str, message: str },
} as const;

const errorRef = { $ref: 'ApiError#' } as const;
/** The error replies every authenticated route can give. */
export const errors = {
  400: errorRef,
  401: errorRef,
  403: errorRef,
  404: errorRef,
  429: errorRef,
  503: errorRef,
};

export const UserJson = {
  type: 'object',
  required: ['name', 'uid', 'admin'],
  properties: { name: str, uid: nullable(int), admin: bool },
} as const;

export const SnapshotMetaJson = {
  type: 'object',
  required: [
    'id',
    'jobId',
    'takenAt',
    'durationMicros',
    'createdBy',
    'partial',
    'ranks',
    'ok',
    'errors',
    'missing',
    'missingRanks',
    'pendingSends',
    'pendingReceives',
    'unexpected',
    'digest',
    'bytes',
    'storedBytes',
  ],
  properties: {
    id: str,
    jobId: str,
    takenAt: iso,
    durationMicros: int,
    createdBy: str,
    partial: { type: 'boolean', description: 'some ranks are agent-missing' },
    ranks: int,
    ok: int,
    errors: int,
    missing: int,
    missingRanks: { type: 'array', items: int, description: 'agent-missing ranks (first 4096)' },
    pendingSends: int,
    pendingReceives: int,
    unexpected: int,
    digest: { type: 'string', description: 'sha256 of the queues: equal = nothing moved' },
    bytes: int,
    storedBytes: int,
  },
} as const;

export const JobJson = {
  type: 'object',
  required: [
    'id',
    'host',
    'starterPid',
    'uid',
    'command',
    'method',
    'rankCount',
    'hosts',
    'createdAt',
    'createdBy',
    'endedAt',
    'state',
    'lastSnapshotAt',
    'lastSnapshot',
  ],
  properties: {
    id: str,
    host: str,
    starterPid: int,
    uid: int,
    command: str,
    method: str,
    rankCount: int,
    hosts: {
      type: 'array',
      items: {
        type: 'object',
        required: ['host', 'ranks', 'agentConnected'],
        properties: { host: str, ranks: int, agentConnected: bool },
      },
    },
    createdAt: iso,
    createdBy: str,
    endedAt: nullable(iso),
    state: { type: 'string', enum: ['running', 'looks-hung', 'ended'] },
    lastSnapshotAt: nullable(iso),
    lastSnapshot: nullable(SnapshotMetaJson),
  },
} as const;

export const StarterJson = {
  type: 'object',
  required: ['host', 'starterPid', 'uid', 'command'],
  properties: { host: str, starterPid: int, uid: int, command: str },
} as const;

const WireErrorJson = {
  type: 'object',
  required: ['code', 'message'],
  properties: { code: str, message: str },
};

export const AgentJson = {
  type: 'object',
  required: [
    'agentId',
    'host',
    'version',
    'connected',
    'connectedAt',
    'lastSeenAt',
    'disconnectedAt',
    'health',
    'mpi',
    'jobs',
    'messages',
    'refused',
    'pending',
  ],
  properties: {
    agentId: str,
    host: str,
    version: str,
    connected: bool,
    connectedAt: iso,
    lastSeenAt: iso,
    disconnectedAt: nullable(iso),
    health: nullable({
      type: 'object',
      properties: {
        rssBytes: { type: 'number' },
        heapUsedBytes: { type: 'number' },
        uptimeSeconds: { type: 'number' },
        loadAverage1m: { type: 'number' },
        activeRequests: int,
        lastError: nullable(WireErrorJson),
      },
    }),
    mpi: nullable({
      type: 'object',
      properties: { library: str, dll: nullable(str), lengthUnit: str },
    }),
    jobs: {
      type: 'array',
      items: { type: 'object', properties: { starterPid: int, uid: int, command: str } },
    },
    messages: int,
    refused: int,
    pending: int,
  },
} as const;

export const AuditJson = {
  type: 'object',
  required: ['id', 'at', 'who', 'action', 'jobId', 'snapshotId', 'detail'],
  properties: {
    id: int,
    at: iso,
    who: str,
    action: str,
    jobId: nullable(str),
    snapshotId: nullable(str),
    detail: str,
  },
} as const;

export const HungJson = {
  type: 'object',
  required: [
    'jobId',
    'since',
    'snapshots',
    'digest',
    'pendingSends',
    'pendingReceives',
    'unexpected',
    'lastSnapshotId',
  ],
  properties: {
    jobId: str,
    since: iso,
    snapshots: int,
    digest: str,
    pendingSends: int,
    pendingReceives: int,
    unexpected: int,
    lastSnapshotId: str,
  },
} as const;

/** The TypeBox schema of packages/model, as JSON Schema (TypeBox schemas are JSON Schema). */
export const JobSnapshotJson = JobSnapshot as unknown as Record<string, unknown>;

export const SnapshotWithDataJson = {
  type: 'object',
  required: ['meta', 'snapshot'],
  properties: { meta: SnapshotMetaJson, snapshot: JobSnapshotJson },
} as const;

export const idParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' } },
} as const;
