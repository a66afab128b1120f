// How a coded error becomes an HTTP reply, and the record -> JSON conversions of the API.
import {
  type ApiAgent,
  type ApiAuditEntry,
  type ApiErrorBody,
  type ApiHungJob,
  type ApiJob,
  type ApiShare,
  type ApiSnapshotMeta,
  type ApiUser,
  assertUnreachable,
  type ErrorCode,
  JobId,
  type JobStateWatch,
  type MqdError,
  MqdException,
  mqdError,
  SnapshotId,
} from '@mqd/model';
import { type HungJob, jobStateOf } from '../fanout/fanout.js';
import type { AgentInfo } from '../hub/hub.js';
import type { AuditEntry, JobRecord, ShareRecord, SnapshotMeta, User } from '../shared/types.js';

export function httpStatus(code: ErrorCode): number {
  switch (code) {
    case 'MQD_E_USAGE':
    case 'MQD_E_BAD_INPUT':
    // An expression read across ranks that does not fit a rank (each rank's own message).
    case 'MQD_E_EVAL_SYNTAX':
    case 'MQD_E_EVAL_UNKNOWN_NAME':
    case 'MQD_E_EVAL_OPTIMIZED_OUT':
    case 'MQD_E_EVAL_MEMORY':
    case 'MQD_E_EVAL_TYPE':
    case 'MQD_E_EVAL_FRAME':
    case 'MQD_E_CLUSTER_SECRET':
      return 400;
    case 'MQD_E_UNAUTHENTICATED':
      return 401;
    case 'MQD_E_FORBIDDEN':
    case 'MQD_E_CORE_DIR_FORBIDDEN':
    case 'MQD_E_PTRACE_DENIED':
    case 'MQD_E_BAD_ORIGIN':
    case 'MQD_E_INSECURE':
      return 403;
    case 'MQD_E_TOKEN_EXPIRED':
      return 401;
    case 'MQD_E_AGENT_CONFLICT':
    case 'MQD_E_RESERVED_NAME':
    case 'MQD_E_SESSION_CONFLICT':
    case 'MQD_E_IDEMPOTENCY_CONFLICT':
      return 409;
    case 'MQD_E_TOO_LARGE':
    case 'MQD_E_THREAD_LIMIT':
      return 413;
    case 'MQD_E_STORE_READONLY':
    case 'MQD_E_STORE_CORRUPT':
    case 'MQD_E_STORE_UNAVAILABLE':
      return 503;
    case 'MQD_E_NOT_FOUND':
    case 'MQD_E_NO_SUCH_PID':
      return 404;
    case 'MQD_E_JOB_ENDED':
    case 'MQD_E_PID_EXITED':
    case 'MQD_E_ZOMBIE':
      return 410;
    case 'MQD_E_NOT_STARTER':
    case 'MQD_E_NOT_MPI':
    case 'MQD_E_EMPTY_PROCTABLE':
    case 'MQD_E_NO_RANKS':
    case 'MQD_E_SLURM_JOB':
    case 'MQD_E_NO_QUEUES':
    case 'MQD_E_QUEUE_UNSUPPORTED':
    case 'MQD_E_CORE_INVALID':
    case 'MQD_E_CORE_TRUNCATED':
    case 'MQD_E_CORE_MISSING_PAGES':
    case 'MQD_E_CORE_BUILD_ID':
    case 'MQD_E_CORE_NO_RANK':
    case 'MQD_E_CORE_MANIFEST':
      return 422;
    case 'MQD_E_RATE_LIMITED':
      return 429;
    case 'MQD_E_INTERNAL':
      return 500;
    case 'MQD_E_STOP_FAILED':
    case 'MQD_E_NO_DLL_NAME':
    case 'MQD_E_DLL_NOT_FOUND':
    case 'MQD_E_DLL_NOT_ELF':
    case 'MQD_E_DLL_WRONG_ARCH':
    case 'MQD_E_DLL_LOAD':
    case 'MQD_E_DLL_INCOMPATIBLE':
    case 'MQD_E_DLL_CRASHED':
    case 'MQD_E_READER_KILLED':
    case 'MQD_E_DLL_ERROR':
    case 'MQD_E_READ_BUDGET':
    case 'MQD_E_NO_DEBUG_INFO':
    case 'MQD_E_FOREIGN_PROCESS':
    case 'MQD_E_ROOT_PROCESS':
    case 'MQD_E_PID_REUSED':
    case 'MQD_E_PRIVDROP':
    case 'MQD_E_DLL_POLICY':
    case 'MQD_E_NO_STACKS':
    case 'MQD_E_NO_SLURM':
    case 'MQD_E_PMIX':
    case 'MQD_E_PMIX_LAUNCH':
    case 'MQD_E_CAPTURE':
    case 'MQD_E_CAPTURE_DIR':
    case 'MQD_E_OMPD_DISABLED':
    case 'MQD_E_OMPD_LOAD':
    case 'MQD_E_OMPD_FAILED':
    case 'MQD_E_OMPD_CRASHED':
    case 'MQD_E_OMPD_NO_SYMBOLS':
    case 'MQD_E_PYTHON_UNSUPPORTED':
    case 'MQD_E_PYTHON_READ':
    case 'MQD_E_UCX_UNSUPPORTED':
    case 'MQD_E_UCX_READ':
    case 'MQD_E_UCX_TAG_OFFLOAD':
    case 'MQD_E_UCX_RANK_RANGE':
    case 'MQD_E_UCX_SENDS':
      // The agent answered, with a failure on its node.
      return 502;
    case 'MQD_E_AGENT_MISSING':
    case 'MQD_E_AGENT_SILENT':
      return 503;
    case 'MQD_E_DLL_TIMEOUT':
      return 504;
    default:
      return assertUnreachable(code);
  }
}

export const errorBody = (e: MqdError): ApiErrorBody => ({
  statusCode: httpStatus(e.code),
  code: e.code,
  message: e.message,
});

/** Ends a request with a coded error (the root error handler turns it into the reply). */
export function fail(code: ErrorCode, detail: string): never {
  throw new MqdException(mqdError(code, detail));
}

// Records (epoch ms, as the store keeps them) -> the API spec's shapes (ISO times, branded ids).
// Their return types are the spec's: a field the spec gains or loses fails to compile here.

const iso = (ms: number) => new Date(ms).toISOString();

export const userJson = (u: User): ApiUser => ({ name: u.name, uid: u.uid, admin: u.admin });

export const metaJson = (m: SnapshotMeta): ApiSnapshotMeta => ({
  id: m.id,
  jobId: m.jobId,
  takenAt: iso(m.takenAt),
  durationMicros: m.durationMicros,
  createdBy: m.createdBy,
  partial: m.missing > 0,
  ranks: m.ranks,
  ok: m.ok,
  errors: m.errors,
  missing: m.missing,
  missingRanks: [...m.missingRanks],
  pendingSends: m.pendingSends,
  pendingReceives: m.pendingReceives,
  unexpected: m.unexpected,
  ...(m.unreadable?.length ? { unreadable: [...m.unreadable] } : {}),
  digest: m.digest,
  bytes: m.bytes,
  storedBytes: m.storedBytes,
});

/**
 * A job as the API shows it. `recent` is its snapshots, newest first (STATE_HISTORY of them):
 * with the hang watch's verdict where it watches the job, they decide its state (jobStateOf,
 * the model's one rule).
 */
export function jobJson(
  job: JobRecord,
  connected: (host: string) => boolean,
  recent: readonly SnapshotMeta[],
  hungAfter: number,
  watch: JobStateWatch | null = null,
): ApiJob {
  const last = recent[0] ?? null;
  const a = jobStateOf(job, recent, hungAfter, watch);
  const state = a.state;
  const hosts = new Map<string, number>();
  for (const r of job.ranks) hosts.set(r.host, (hosts.get(r.host) ?? 0) + 1);
  return {
    id: job.id,
    host: job.host,
    starterPid: job.starterPid,
    uid: job.uid,
    command: job.command,
    method: job.method,
    rankCount: job.ranks.length,
    hosts: [...hosts].map(([host, ranks]) => ({ host, ranks, agentConnected: connected(host) })),
    createdAt: iso(job.createdAt),
    createdBy: job.createdBy,
    endedAt: job.endedAt === null ? null : iso(job.endedAt),
    state,
    since: a.since === null ? null : iso(a.since),
    sinceSnapshots: a.sinceSnapshots,
    unchangedSince: a.unchangedSince === null ? null : iso(a.unchangedSince),
    unchangedSnapshots: a.unchangedSnapshots,
    diagnosis: a.diagnosis,
    pausedUntil: a.pausedUntil === null ? null : iso(a.pausedUntil),
    lastSnapshotAt: last === null ? null : iso(last.takenAt),
    lastSnapshot: last === null ? null : metaJson(last),
    ...(job.coresDir === undefined ? {} : { coresDir: job.coresDir }),
  };
}

export const agentJson = (a: AgentInfo): ApiAgent => ({
  agentId: a.agentId,
  host: a.host,
  version: a.version,
  connected: a.connected,
  connectedAt: iso(a.connectedAt),
  lastSeenAt: iso(a.lastSeenAt),
  disconnectedAt: a.disconnectedAt === null ? null : iso(a.disconnectedAt),
  health: a.health,
  mpi: a.mpi,
  jobs: a.jobs.map((j) => ({ starterPid: j.starterPid, uid: j.uid, command: j.command })),
  messages: a.messages,
  refused: a.refused,
  pending: a.pending,
  ...(a.instance === undefined ? {} : { instance: a.instance }),
});

export const auditJson = (a: AuditEntry): ApiAuditEntry => ({
  id: a.id,
  at: iso(a.at),
  who: a.who,
  action: a.action,
  jobId: a.jobId === null ? null : JobId(a.jobId),
  snapshotId: a.snapshotId === null ? null : SnapshotId(a.snapshotId),
  detail: a.detail,
});

export const hungJson = (h: HungJob): ApiHungJob => ({
  jobId: h.jobId,
  since: iso(h.since),
  snapshots: h.snapshots,
  digest: h.digest,
  pendingSends: h.pendingSends,
  pendingReceives: h.pendingReceives,
  unexpected: h.unexpected,
  ...(h.unreadable?.length ? { unreadable: [...h.unreadable] } : {}),
  lastSnapshotId: h.lastSnapshotId,
});

export const shareJson = (x: ShareRecord): ApiShare => ({
  id: x.id,
  snapshotId: x.snapshotId,
  createdBy: x.createdBy,
  createdAt: iso(x.createdAt),
  expiresAt: iso(x.expiresAt),
  ...(x.madeBy === undefined ? {} : { madeBy: x.madeBy }),
});
