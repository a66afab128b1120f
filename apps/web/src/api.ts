// The one typed client of the aggregator's REST API. Every response is checked here, at the
// edge, so the views only ever see validated values; a changed route or field is fixed here.
// Expected failures (HTTP errors, network, a malformed body) are Results, never exceptions.
// Pushed events (snapshot progress, list changes) come over socket.io on /ui through live.ts;
// they only prompt reloads through this client, which stays the one source of data.
import {
  ERROR_HINTS,
  err,
  isErrorCode,
  JobId,
  type JobSnapshot,
  ok,
  Pid,
  type Result,
  SnapshotId,
  validateSnapshot,
} from '@mqd/model';

/** Failures that only the browser sees (the server's own codes come from @mqd/model). */
export const WEB_ERROR_HINTS = {
  MQD_E_NETWORK:
    'cannot reach the MQD server: check that `mqd serve` is running and that this page was opened from it',
  MQD_E_BAD_RESPONSE:
    'the server answered with something this dashboard does not understand: use the dashboard served by the same MQD version',
  MQD_E_ABORTED: 'the request was cancelled because the view changed',
} as const;
export type WebErrorCode = keyof typeof WEB_ERROR_HINTS;

export interface ApiError {
  /** HTTP status; 0 when no response arrived. */
  readonly status: number;
  /** An MQD error code (server codes are ErrorCode; see also WEB_ERROR_HINTS). */
  readonly code: string;
  /** What happened and what to do. */
  readonly message: string;
}

export type ApiResult<T> = Result<T, ApiError>;

export type JobState = 'running' | 'looks-hung' | 'ended';
export const JOB_STATES: readonly JobState[] = ['running', 'looks-hung', 'ended'];

export interface JobSummary {
  readonly id: JobId;
  readonly starterPid: Pid;
  readonly host: string;
  readonly uid: number;
  readonly command: string;
  readonly state: JobState;
  /** ISO time, null before the first snapshot. */
  readonly lastSnapshotAt: string | null;
  readonly ranks: number;
}

/** The server's per-snapshot summary: shown as label/value pairs, whatever fields it has. */
export type SummaryFields = Readonly<Record<string, string | number | boolean | null>>;

export interface SnapshotListEntry {
  readonly id: SnapshotId;
  readonly takenAt: string;
  readonly summary: SummaryFields;
}

export interface StoredSnapshot {
  readonly id: SnapshotId;
  readonly jobId: JobId;
  readonly takenAt: string;
  readonly snapshot: JobSnapshot;
}

export interface SharedSnapshot {
  readonly snapshot: JobSnapshot;
  readonly takenAt: string;
  readonly jobId: JobId;
  readonly readOnly: true;
}

export interface ShareLink {
  /** As the server gave it (absolute or relative to the dashboard's origin). */
  readonly url: string;
  readonly id: string;
}

export interface AttachRequest {
  readonly host?: string;
  readonly starterPid: Pid;
}

/** The logged-in user (GET /api/me). */
export interface Me {
  readonly name: string;
  /** Unix uid whose jobs this user may see; null for a user not tied to one. */
  readonly uid: number | null;
  readonly admin: boolean;
}

/** What an agent last reported about itself; fields it did not send are null. */
export interface AgentHealth {
  readonly rssBytes: number | null;
  readonly heapUsedBytes: number | null;
  readonly uptimeSeconds: number | null;
  readonly loadAverage1m: number | null;
  readonly activeRequests: number | null;
  /** The last coded error the agent hit, as `CODE: message`. */
  readonly lastError: string | null;
}

/** An MPI starter (mpirun / mpiexec) an agent sees on its node. */
export interface SeenStarter {
  readonly starterPid: number;
  readonly uid: number;
  readonly command: string;
}

/** One per-node agent, connected or recently disconnected (GET /api/admin/agents). */
export interface FleetAgent {
  readonly agentId: string;
  readonly host: string;
  readonly version: string;
  readonly connected: boolean;
  readonly connectedAt: string;
  readonly lastSeenAt: string;
  readonly disconnectedAt: string | null;
  readonly health: AgentHealth | null;
  readonly mpi: { readonly library: string; readonly dll: string | null; readonly lengthUnit: string } | null;
  readonly jobs: readonly SeenStarter[];
  readonly messages: number;
  readonly refused: number;
  readonly pending: number;
}

export interface FleetAgents {
  readonly agents: readonly FleetAgent[];
  /** Agent messages and handshakes the hub refused since it started. */
  readonly refusedMessages: number;
  readonly refusedHandshakes: number;
}

/**
 * One audit entry (GET /api/admin/activity), newest first. `action` stays open text
 * (`snapshot`, `share`, `attach`, `login`, `agent-connect`, …): a newer server's action is shown, not refused.
 */
export interface ActivityEntry {
  readonly id: number;
  readonly at: string;
  readonly who: string;
  readonly action: string;
  readonly jobId: JobId | null;
  readonly snapshotId: SnapshotId | null;
  readonly detail: string;
}

/** A job whose queues did not change across its last `snapshots` snapshots (GET /api/admin/hung). */
export interface HungJob {
  readonly jobId: JobId;
  /** takenAt of the oldest of the equal snapshots. */
  readonly since: string;
  readonly snapshots: number;
  readonly digest: string;
  readonly pendingSends: number;
  readonly pendingReceives: number;
  readonly unexpected: number;
  readonly lastSnapshotId: SnapshotId;
}

export interface HungJobs {
  /** How many equal snapshots in a row make a job look hung (the server's setting). */
  readonly snapshots: number;
  readonly jobs: readonly HungJob[];
}

export interface Api {
  health(signal?: AbortSignal): Promise<ApiResult<SummaryFields>>;
  login(token: string): Promise<ApiResult<void>>;
  jobs(signal?: AbortSignal): Promise<ApiResult<JobSummary[]>>;
  /** Resolves with the attached job's id when the server names it. */
  attach(req: AttachRequest): Promise<ApiResult<JobId | null>>;
  takeSnapshot(job: JobId): Promise<ApiResult<{ id: SnapshotId; snapshot: JobSnapshot }>>;
  snapshots(job: JobId, signal?: AbortSignal): Promise<ApiResult<SnapshotListEntry[]>>;
  snapshot(id: SnapshotId, signal?: AbortSignal): Promise<ApiResult<StoredSnapshot>>;
  share(id: SnapshotId, expiresInSeconds?: number): Promise<ApiResult<ShareLink>>;
  shared(shareId: string, signal?: AbortSignal): Promise<ApiResult<SharedSnapshot>>;
  me(signal?: AbortSignal): Promise<ApiResult<Me>>;
  /** Admins only (403 MQD_E_FORBIDDEN otherwise), as are activity and hung. */
  agents(signal?: AbortSignal): Promise<ApiResult<FleetAgents>>;
  /** The newest `limit` audit entries (the server allows 1..1000). */
  activity(limit: number, signal?: AbortSignal): Promise<ApiResult<ActivityEntry[]>>;
  hung(signal?: AbortSignal): Promise<ApiResult<HungJobs>>;
}

export interface ApiOptions {
  /** Prefix of every route; '' when the dashboard is served by the API server itself. */
  readonly base?: string;
  readonly fetch?: typeof fetch;
}

// --- decoding at the edge -------------------------------------------------------------------

class DecodeError extends Error {}

type Json = unknown;

function obj(v: Json, path: string): Record<string, Json> {
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new DecodeError(`${path}: expected an object`);
  return v as Record<string, Json>;
}

function str(v: Json, path: string): string {
  if (typeof v !== 'string') throw new DecodeError(`${path}: expected a string`);
  return v;
}

function num(v: Json, path: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new DecodeError(`${path}: expected a number`);
  return v;
}

/** Ids may arrive as numbers (SQLite rowids) or strings; the dashboard treats them as text. */
function idText(v: Json, path: string): string {
  if (typeof v === 'number' && Number.isInteger(v)) return String(v);
  const s = str(v, path);
  if (s === '') throw new DecodeError(`${path}: empty id`);
  return s;
}

/** ISO text; epoch milliseconds are accepted and converted. */
function time(v: Json, path: string): string {
  if (typeof v === 'number' && Number.isFinite(v)) return new Date(v).toISOString();
  const s = str(v, path);
  if (Number.isNaN(Date.parse(s))) throw new DecodeError(`${path}: not a date: ${s.slice(0, 40)}`);
  return s;
}

function arrayOf<T>(v: Json, path: string, item: (v: Json, path: string) => T, wrapper: string): T[] {
  // Accept both a bare array and { <wrapper>: [...] }: the route docs allow either reading.
  const list = Array.isArray(v) ? v : obj(v, path)[wrapper];
  if (!Array.isArray(list)) throw new DecodeError(`${path}: expected an array (or {${wrapper}: [...]})`);
  return list.map((x, i) => item(x, `${path}[${i}]`));
}

function summaryFields(v: Json, path: string): SummaryFields {
  if (v === undefined || v === null) return {};
  const o = obj(v, path);
  const out: Record<string, string | number | boolean | null> = {};
  for (const [k, x] of Object.entries(o)) {
    if (x === null || typeof x === 'string' || typeof x === 'number' || typeof x === 'boolean') out[k] = x;
  }
  return out;
}

function job(v: Json, path: string): JobSummary {
  const o = obj(v, path);
  const state = str(o['state'], `${path}.state`);
  if (!(JOB_STATES as readonly string[]).includes(state))
    throw new DecodeError(`${path}.state: unknown state ${state}`);
  const pid = num(o['starterPid'], `${path}.starterPid`);
  if (!Number.isInteger(pid) || pid < 1) throw new DecodeError(`${path}.starterPid: not a pid`);
  return {
    id: JobId(idText(o['id'], `${path}.id`)),
    starterPid: Pid(pid),
    host: str(o['host'], `${path}.host`),
    uid: num(o['uid'], `${path}.uid`),
    command: str(o['command'] ?? '', `${path}.command`),
    state: state as JobState,
    lastSnapshotAt: o['lastSnapshotAt'] == null ? null : time(o['lastSnapshotAt'], `${path}.lastSnapshotAt`),
    ranks: num(o['rankCount'] ?? o['ranks'] ?? 0, `${path}.rankCount`),
  };
}

function snapshotBody(v: Json, path: string): JobSnapshot {
  const r = validateSnapshot(v);
  if (!r.ok) throw new DecodeError(`${path}: ${r.error.message}`);
  return r.value;
}

function bool(v: Json, path: string): boolean {
  if (typeof v !== 'boolean') throw new DecodeError(`${path}: expected true or false`);
  return v;
}

/** A count or id: an integer >= 0. */
function count(v: Json, path: string): number {
  const n = num(v, path);
  if (!Number.isInteger(n) || n < 0) throw new DecodeError(`${path}: expected a whole number >= 0`);
  return n;
}

function nullable<T>(v: Json, path: string, item: (v: Json, path: string) => T): T | null {
  return v === null ? null : item(v, path);
}

/** An optional number the server leaves out when unknown. */
function maybeNum(v: Json, path: string): number | null {
  return v === undefined || v === null ? null : num(v, path);
}

/** The list under `key`, which must be there (unlike arrayOf, these routes have one shape). */
function listAt<T>(
  o: Record<string, Json>,
  key: string,
  path: string,
  item: (v: Json, path: string) => T,
): T[] {
  const list = o[key];
  if (!Array.isArray(list)) throw new DecodeError(`${path}.${key}: expected an array`);
  return list.map((x, i) => item(x, `${path}.${key}[${i}]`));
}

export function decodeMe(v: Json): Me {
  const u = obj(obj(v, 'me')['user'], 'me.user');
  return {
    name: str(u['name'], 'me.user.name'),
    uid: nullable(u['uid'], 'me.user.uid', count),
    admin: bool(u['admin'], 'me.user.admin'),
  };
}

function agentHealth(v: Json, path: string): AgentHealth {
  const o = obj(v, path);
  const e = o['lastError'];
  let lastError: string | null = null;
  if (e !== undefined && e !== null) {
    const eo = obj(e, `${path}.lastError`);
    lastError = `${str(eo['code'], `${path}.lastError.code`)}: ${str(eo['message'], `${path}.lastError.message`)}`;
  }
  return {
    rssBytes: maybeNum(o['rssBytes'], `${path}.rssBytes`),
    heapUsedBytes: maybeNum(o['heapUsedBytes'], `${path}.heapUsedBytes`),
    uptimeSeconds: maybeNum(o['uptimeSeconds'], `${path}.uptimeSeconds`),
    loadAverage1m: maybeNum(o['loadAverage1m'], `${path}.loadAverage1m`),
    activeRequests: maybeNum(o['activeRequests'], `${path}.activeRequests`),
    lastError,
  };
}

function seenStarter(v: Json, path: string): SeenStarter {
  const o = obj(v, path);
  return {
    starterPid: count(o['starterPid'], `${path}.starterPid`),
    uid: count(o['uid'], `${path}.uid`),
    command: str(o['command'], `${path}.command`),
  };
}

function fleetAgent(v: Json, path: string): FleetAgent {
  const o = obj(v, path);
  return {
    agentId: str(o['agentId'], `${path}.agentId`),
    host: str(o['host'], `${path}.host`),
    version: str(o['version'], `${path}.version`),
    connected: bool(o['connected'], `${path}.connected`),
    connectedAt: time(o['connectedAt'], `${path}.connectedAt`),
    lastSeenAt: time(o['lastSeenAt'], `${path}.lastSeenAt`),
    disconnectedAt: nullable(o['disconnectedAt'], `${path}.disconnectedAt`, time),
    health: nullable(o['health'], `${path}.health`, agentHealth),
    mpi: nullable(o['mpi'], `${path}.mpi`, (m, p) => {
      const mo = obj(m, p);
      return {
        library: str(mo['library'], `${p}.library`),
        dll: nullable(mo['dll'], `${p}.dll`, str),
        lengthUnit: str(mo['lengthUnit'], `${p}.lengthUnit`),
      };
    }),
    jobs: listAt(o, 'jobs', path, seenStarter),
    messages: count(o['messages'], `${path}.messages`),
    refused: count(o['refused'], `${path}.refused`),
    pending: count(o['pending'], `${path}.pending`),
  };
}

export function decodeAgents(v: Json): FleetAgents {
  const o = obj(v, 'agents');
  return {
    agents: listAt(o, 'agents', 'body', fleetAgent),
    refusedMessages: count(o['refusedMessages'], 'body.refusedMessages'),
    refusedHandshakes: count(o['refusedHandshakes'], 'body.refusedHandshakes'),
  };
}

function activityEntry(v: Json, path: string): ActivityEntry {
  const o = obj(v, path);
  const jobId = nullable(o['jobId'], `${path}.jobId`, idText);
  const snapshotId = nullable(o['snapshotId'], `${path}.snapshotId`, idText);
  return {
    id: count(o['id'], `${path}.id`),
    at: time(o['at'], `${path}.at`),
    who: str(o['who'], `${path}.who`),
    action: str(o['action'], `${path}.action`),
    jobId: jobId === null ? null : JobId(jobId),
    snapshotId: snapshotId === null ? null : SnapshotId(snapshotId),
    detail: str(o['detail'], `${path}.detail`),
  };
}

export function decodeActivity(v: Json): ActivityEntry[] {
  return listAt(obj(v, 'activity'), 'entries', 'body', activityEntry);
}

function hungJob(v: Json, path: string): HungJob {
  const o = obj(v, path);
  return {
    jobId: JobId(idText(o['jobId'], `${path}.jobId`)),
    since: time(o['since'], `${path}.since`),
    snapshots: count(o['snapshots'], `${path}.snapshots`),
    digest: str(o['digest'], `${path}.digest`),
    pendingSends: count(o['pendingSends'], `${path}.pendingSends`),
    pendingReceives: count(o['pendingReceives'], `${path}.pendingReceives`),
    unexpected: count(o['unexpected'], `${path}.unexpected`),
    lastSnapshotId: SnapshotId(idText(o['lastSnapshotId'], `${path}.lastSnapshotId`)),
  };
}

export function decodeHung(v: Json): HungJobs {
  const o = obj(v, 'hung');
  return {
    snapshots: count(o['snapshots'], 'body.snapshots'),
    jobs: listAt(o, 'jobs', 'body', hungJob),
  };
}

function listEntry(v: Json, path: string): SnapshotListEntry {
  const o = obj(v, path);
  return {
    id: SnapshotId(idText(o['id'], `${path}.id`)),
    takenAt: time(o['takenAt'], `${path}.takenAt`),
    summary: summaryFields(o['summary'], `${path}.summary`),
  };
}

// --- transport ----------------------------------------------------------------------------------

function webError(code: WebErrorCode, status: number, detail: string): ApiError {
  return { status, code, message: `${code}: ${detail}: ${WEB_ERROR_HINTS[code]}` };
}

/** The server's {code, message}; a message that lacks the hint gets the model's hint for that code. */
function serverError(status: number, body: Json): ApiError {
  if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
    const o = body as Record<string, Json>;
    const code = typeof o['code'] === 'string' ? o['code'] : '';
    const message = typeof o['message'] === 'string' ? o['message'] : '';
    if (code !== '') {
      const hint = isErrorCode(code) && !message.includes(ERROR_HINTS[code]) ? `: ${ERROR_HINTS[code]}` : '';
      return {
        status,
        code,
        message: `${message.startsWith(code) ? message : `${code}: ${message}`}${hint}`,
      };
    }
  }
  if (status === 401)
    return {
      status,
      code: 'MQD_E_UNAUTHENTICATED',
      message: `MQD_E_UNAUTHENTICATED: ${ERROR_HINTS.MQD_E_UNAUTHENTICATED}`,
    };
  // A proxy in front of the server answers these when the server itself is down.
  if (status === 502 || status === 503 || status === 504)
    return webError('MQD_E_NETWORK', status, `HTTP ${status} from a proxy`);
  return webError('MQD_E_BAD_RESPONSE', status, `HTTP ${status} without an MQD error body`);
}

export function createApi(opts: ApiOptions = {}): Api {
  const base = opts.base ?? '';
  const doFetch = opts.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));

  async function request<T>(
    method: 'GET' | 'POST',
    path: string,
    decode: (body: Json) => T,
    body?: unknown,
    signal?: AbortSignal,
  ): Promise<ApiResult<T>> {
    const init: RequestInit = {
      method,
      credentials: 'same-origin',
      headers:
        body === undefined
          ? { accept: 'application/json' }
          : { accept: 'application/json', 'content-type': 'application/json' },
    };
    if (body !== undefined) init.body = JSON.stringify(body);
    if (signal) init.signal = signal;
    let res: Response;
    try {
      res = await doFetch(`${base}${path}`, init);
    } catch (e: unknown) {
      if (signal?.aborted) return err(webError('MQD_E_ABORTED', 0, `${method} ${path}`));
      return err(
        webError(
          'MQD_E_NETWORK',
          0,
          `${method} ${path} failed (${e instanceof Error ? e.message : String(e)})`,
        ),
      );
    }
    let json: Json;
    try {
      const text = await res.text();
      json = text === '' ? undefined : JSON.parse(text);
    } catch (e: unknown) {
      if (signal?.aborted) return err(webError('MQD_E_ABORTED', res.status, `${method} ${path}`));
      return err(
        webError(
          'MQD_E_BAD_RESPONSE',
          res.status,
          `${method} ${path} did not return JSON (${e instanceof Error ? e.message : String(e)})`,
        ),
      );
    }
    if (!res.ok) return err(serverError(res.status, json));
    try {
      return ok(decode(json));
    } catch (e: unknown) {
      // Only decoding failures are expected here; anything else is a bug and propagates.
      if (e instanceof DecodeError || e instanceof RangeError) {
        return err(webError('MQD_E_BAD_RESPONSE', res.status, `${method} ${path}: ${e.message}`));
      }
      throw e;
    }
  }

  const enc = encodeURIComponent;
  const api: Api = {
    health: (signal) => request('GET', '/api/health', (b) => summaryFields(b, 'health'), undefined, signal),
    login: (token) => request('POST', '/api/login', () => undefined, { token }),
    jobs: (signal) => request('GET', '/api/jobs', (b) => arrayOf(b, 'jobs', job, 'jobs'), undefined, signal),
    attach: (req) =>
      request(
        'POST',
        '/api/jobs/attach',
        (b) => {
          if (typeof b !== 'object' || b === null) return null;
          const o = b as Record<string, Json>;
          const id =
            o['id'] ??
            (typeof o['job'] === 'object' && o['job'] !== null
              ? (o['job'] as Record<string, Json>)['id']
              : undefined);
          return id === undefined ? null : JobId(idText(id, 'attach.id'));
        },
        req.host === undefined
          ? { starterPid: req.starterPid }
          : { host: req.host, starterPid: req.starterPid },
      ),
    // The aggregator answers with the new snapshot's summary; the snapshot itself is read back.
    takeSnapshot: async (jobId) => {
      const taken = await request('POST', `/api/jobs/${enc(jobId)}/snapshots`, (b) =>
        SnapshotId(idText(obj(obj(b, 'body')['snapshot'], 'snapshot')['id'], 'snapshot.id')),
      );
      if (!taken.ok) return taken;
      const full = await api.snapshot(taken.value);
      return full.ok ? { ok: true, value: { id: full.value.id, snapshot: full.value.snapshot } } : full;
    },
    snapshots: (jobId, signal) =>
      request(
        'GET',
        `/api/jobs/${enc(jobId)}/snapshots`,
        (b) => arrayOf(b, 'snapshots', listEntry, 'snapshots'),
        undefined,
        signal,
      ),
    snapshot: (id, signal) =>
      request(
        'GET',
        `/api/snapshots/${enc(id)}`,
        (b) => {
          const o = obj(b, 'body');
          const meta = obj(o['meta'], 'meta');
          return {
            id: SnapshotId(idText(meta['id'], 'meta.id')),
            jobId: JobId(idText(meta['jobId'], 'meta.jobId')),
            takenAt: time(meta['takenAt'], 'meta.takenAt'),
            snapshot: snapshotBody(o['snapshot'], 'snapshot'),
          };
        },
        undefined,
        signal,
      ),
    share: (id, expiresInSeconds) =>
      request(
        'POST',
        `/api/snapshots/${enc(id)}/share`,
        (b) => {
          const o = obj(b, 'share');
          return { url: str(o['url'], 'share.url'), id: idText(o['id'], 'share.id') };
        },
        expiresInSeconds === undefined ? {} : { expiresInSeconds },
      ),
    shared: (shareId, signal) =>
      request(
        'GET',
        `/api/shared/${enc(shareId)}`,
        (b) => {
          const o = obj(b, 'shared');
          const meta = obj(o['meta'], 'shared.meta');
          return {
            snapshot: snapshotBody(o['snapshot'], 'shared.snapshot'),
            takenAt: time(meta['takenAt'], 'shared.meta.takenAt'),
            jobId: JobId(idText(meta['jobId'], 'shared.meta.jobId')),
            readOnly: true,
          };
        },
        undefined,
        signal,
      ),
    me: (signal) => request('GET', '/api/me', decodeMe, undefined, signal),
    agents: (signal) => request('GET', '/api/admin/agents', decodeAgents, undefined, signal),
    activity: (limit, signal) =>
      request(
        'GET',
        `/api/admin/activity?limit=${Math.max(1, Math.min(1000, Math.trunc(limit)))}`,
        decodeActivity,
        undefined,
        signal,
      ),
    hung: (signal) => request('GET', '/api/admin/hung', decodeHung, undefined, signal),
  };
  return api;
}

export function isUnauthenticated(e: ApiError): boolean {
  return e.status === 401 || e.code === 'MQD_E_UNAUTHENTICATED';
}

export function isAborted(e: ApiError): boolean {
  return e.code === 'MQD_E_ABORTED';
}
