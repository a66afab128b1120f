// The one typed client of the aggregator's REST API. Every response is checked here, at the
// edge, so the views only ever see validated values; a changed route or field is fixed here.
// Expected failures (HTTP errors, network, a malformed body) are Results, never exceptions.
// Pushed events (snapshot progress, list changes) come over socket.io on /ui through live.ts;
// they only prompt reloads through this client, which stays the one source of data.
import {
  API_ROUTES,
  type ApiAgent,
  type ApiAgentHealth,
  type ApiAuditEntry,
  type ApiFleetJob,
  type ApiHungJob,
  type ApiResponse,
  type ApiSnapshotMeta,
  type ApiUser,
  type ApiWatchPolicy,
  codedText,
  decodeErrorBody,
  decodeOverview,
  decodeOverviewFirst,
  decodeResponse,
  ERROR_HINTS,
  err,
  FLEET_PAGE_MAX,
  IDEMPOTENCY_KEY_HEADER,
  isErrorCode,
  JOBS_ENDED_PAGE_MAX,
  type JobId,
  type JobSnapshot,
  JOB_STATES as MODEL_JOB_STATES,
  type JobState as ModelJobState,
  OVERVIEW_HEADER_BYTES,
  OVERVIEW_MEDIA_TYPE,
  type OverviewFirst,
  ok,
  overviewFirstLength,
  Pid,
  type QueueKind,
  type Result,
  type RouteName,
  type SnapshotId,
  type SnapshotOverview,
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

/** Takes an overview's first part; the rest of the body is read once its promise (if any) settles. */
export type OnOverviewFirst = (first: OverviewFirst) => undefined | Promise<void>;

export type JobState = ModelJobState;
export const JOB_STATES: readonly JobState[] = MODEL_JOB_STATES;

export interface JobSummary {
  readonly id: JobId;
  readonly starterPid: Pid;
  readonly host: string;
  readonly uid: number;
  readonly command: string;
  readonly state: JobState;
  /** The owner's name, when the server knows it. */
  readonly user: string | null;
  /** The nodes of its ranks. */
  readonly nodes: readonly string[];
  /** ISO: the first snapshot of the current run of equal states (analysis/job-state.ts), and snapshots since. */
  readonly since: string | null;
  readonly sinceSnapshots: number;
  /** ISO: the first snapshot of the run of equal queues, and snapshots in it. */
  readonly unchangedSince: string | null;
  readonly unchangedSnapshots: number;
  /** One line: the hang watch's diagnosis, else why the state. */
  readonly diagnosis: string;
  /** ISO: the hang watch's stop budget pauses sampling until then. */
  readonly pausedUntil: string | null;
  /** ISO time, null before the first snapshot. */
  readonly lastSnapshotAt: string | null;
  readonly ranks: number;
  /** A job read from core files: their directory on `host`; null for a live job. */
  readonly coresDir: string | null;
}

/** A snapshot's summary as label/value pairs, in the order the jobs view shows them. */
export type SummaryFields = Readonly<Record<string, string | number | boolean | null>>;

export interface SnapshotListEntry {
  readonly id: SnapshotId;
  readonly takenAt: string;
  readonly summary: SummaryFields;
  /** Everything the server says about it (api-spec.ts ApiSnapshotMeta). */
  readonly meta: ApiSnapshotMeta;
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

/** A job by its starter's pid, a Slurm job by its id (JOBID or JOBID.STEP), or a directory of cores. */
export type AttachRequest =
  | { readonly host?: string; readonly starterPid: Pid }
  | { readonly host?: string; readonly slurmJob: string }
  | { readonly host?: string; readonly coresDir: string };

// The admin pages' records are the spec's own (packages/model api-spec.ts).
/** The logged-in user (GET /api/me). */
export type Me = ApiUser;
/** What an agent last reported about itself. */
export type AgentHealth = ApiAgentHealth;
/** One per-node agent, connected or recently disconnected (GET /api/admin/agents). */
export type FleetAgent = ApiAgent;
export type FleetAgents = ApiResponse<'agents'>;
/** One audit entry (GET /api/admin/activity), newest first; `action` is open text. */
export type ActivityEntry = ApiAuditEntry;
/** A job whose queues did not change across its last `snapshots` snapshots (GET /api/admin/hung). */
export type HungJob = ApiHungJob;
export type HungJobs = ApiResponse<'hung'>;
/** One MPI job the agents discovered, with its hang-watch state (GET /api/fleet). */
export type FleetJob = ApiFleetJob;
/** The hang watch's policy (GET /api/fleet, GET and POST /api/admin/watch). */
export type WatchPolicy = ApiWatchPolicy;
/** GET /api/fleet: the policy and the jobs this user may see (admins: all). */
export type Fleet = ApiResponse<'fleet'>;
/** Which jobs of the fleet one request asks for: `limit` (1..FLEET_PAGE_MAX) from `offset`. */
export interface FleetPageRequest {
  readonly limit: number;
  readonly offset: number;
  /** The search box: jobs whose program, command, user, id or node hold every word. */
  readonly q?: string;
}

/** Which ended jobs one GET /api/jobs asks for: `endedLimit` (1..JOBS_ENDED_PAGE_MAX) from `endedOffset`. */
export interface JobsPageRequest {
  readonly endedLimit: number;
  readonly endedOffset: number;
  /** The search box: jobs whose program, command, user, id or node hold every word. */
  readonly q?: string;
}
/** Live jobs and a page of ended ones; `endedTotal` counts every ended one that matches. */
export interface JobsPage {
  readonly jobs: JobSummary[];
  readonly endedTotal: number;
  readonly endedOffset: number;
}

export interface Api {
  health(signal?: AbortSignal): Promise<ApiResult<ApiResponse<'health'>>>;
  /**
   * Exchanges a login token for a session. The server keeps a live session of another user
   * (MQD_E_SESSION_CONFLICT) unless `switchUser`, which only a person's confirmation may send.
   */
  login(token: string, switchUser?: boolean): Promise<ApiResult<void>>;
  jobs(signal?: AbortSignal): Promise<ApiResult<JobSummary[]>>;
  /** Every live job (hung first) and one page of ended ones (newest ended first), searched on the server. */
  jobsPage(page: JobsPageRequest, signal?: AbortSignal): Promise<ApiResult<JobsPage>>;
  /** Resolves with the attached job's id. */
  attach(req: AttachRequest): Promise<ApiResult<JobId>>;
  /**
   * One snapshot request (one click): it carries a fresh Idempotency-Key, and an answer lost on
   * the way (no response) is asked again with the same key, so the retry returns the snapshot
   * the server may already have stored instead of storing a second one.
   */
  takeSnapshot(job: JobId): Promise<ApiResult<{ id: SnapshotId; snapshot: JobSnapshot }>>;
  snapshots(job: JobId, signal?: AbortSignal): Promise<ApiResult<SnapshotListEntry[]>>;
  snapshot(id: SnapshotId, signal?: AbortSignal): Promise<ApiResult<StoredSnapshot>>;
  share(id: SnapshotId, expiresInSeconds?: number): Promise<ApiResult<ShareLink>>;
  shared(shareId: string, signal?: AbortSignal): Promise<ApiResult<SharedSnapshot>>;
  /**
   * What the dashboard draws first of a stored snapshot (or a shared one, `share`: true): the
   * explanation, the matrix's edge table and the header, made once on the server
   * (@mqd/model's edges/overview.ts), long before the whole snapshot of a large job arrives.
   * The body is read as it arrives: its first part (everything but the edge table) goes to
   * `onFirst` as soon as it is here, checked; the rest is read once the promise `onFirst`
   * returns (if any) has settled, so that its work does not hold back what the first part draws.
   */
  overview(
    id: string,
    share: boolean,
    signal?: AbortSignal,
    onFirst?: OnOverviewFirst,
  ): Promise<ApiResult<SnapshotOverview>>;
  me(signal?: AbortSignal): Promise<ApiResult<Me>>;
  /** Admins only (403 MQD_E_FORBIDDEN otherwise), as are activity and hung. */
  agents(signal?: AbortSignal): Promise<ApiResult<FleetAgents>>;
  /** The newest `limit` audit entries (the server allows 1..1000). */
  activity(limit: number, signal?: AbortSignal): Promise<ApiResult<ActivityEntry[]>>;
  hung(signal?: AbortSignal): Promise<ApiResult<HungJobs>>;
  /**
   * A page of the discovered jobs this user may see (admins: every one; live hung jobs first),
   * their `total`, and the watch policy; default the server's first page.
   */
  fleet(signal?: AbortSignal, page?: FleetPageRequest): Promise<ApiResult<Fleet>>;
  /** Admins only, as is setWatchPolicy. */
  watchPolicy(signal?: AbortSignal): Promise<ApiResult<WatchPolicy>>;
  /** Replaces the policy; resolves with the policy the server now applies. */
  setWatchPolicy(policy: WatchPolicy): Promise<ApiResult<WatchPolicy>>;
}

export interface ApiOptions {
  /** Prefix of every route; '' when the dashboard is served by the API server itself. */
  readonly base?: string;
  readonly fetch?: typeof fetch;
  /** A fresh request key per snapshot request; default 128 random bits in hex. */
  readonly newRequestKey?: () => string;
  /** The pause before retry `n` (1, 2, ...) of a lost snapshot answer, ms; default retryPauseMs. */
  readonly retryPauseMs?: (n: number) => number;
}

/** Tries of one snapshot request whose answer is lost (network error): the same key each time. */
export const SNAPSHOT_TRIES = 3;
/** The first retry's pause, doubled for each next one. */
export const SNAPSHOT_RETRY_MS = 500;

/**
 * Backoff with jitter before retry `n`: drawn from [d/2, d] with d = SNAPSHOT_RETRY_MS * 2^(n-1),
 * so the pages of an instance that died do not all come back in the same instant, and the load
 * balancer has had time to see it gone (the aggregators behind one address).
 */
export function retryPauseMs(n: number, random: () => number = Math.random): number {
  const d = SNAPSHOT_RETRY_MS * 2 ** (n - 1);
  return Math.round(d * (1 - 0.5 * random()));
}

/** 128 random bits in hex (getRandomValues: crypto.randomUUID needs a secure context). */
function randomKey(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join(
    '',
  );
}

// --- decoding at the edge -------------------------------------------------------------------

/** What a count reads as when the MPI library cannot show its queue: unknown, never 0. */
export const NOT_READABLE = 'not readable';
/** The mark's title, and the legend line under a list that has one. */
export const NOT_READABLE_MEANS = "not readable by this MPI library's DLL, not 0";
export const NOT_READABLE_LEGEND = `${NOT_READABLE}: this MPI library's DLL cannot show the queue; its count is unknown, not 0`;

/** A queue's count, or NOT_READABLE when the snapshot says no rank's library could show `kind`. */
export function queueCount(
  count: number,
  kind: QueueKind,
  unreadable: readonly QueueKind[] | undefined,
): number | typeof NOT_READABLE {
  return unreadable?.includes(kind) ? NOT_READABLE : count;
}

/** The jobs view's summary of one snapshot: the counts that say whether anything is queued. */
export function snapshotSummary(m: ApiSnapshotMeta): SummaryFields {
  return {
    ranks: m.ranks,
    ok: m.ok,
    errors: m.errors,
    missing: m.missing,
    'pending sends': queueCount(m.pendingSends, 'sends', m.unreadable),
    'pending receives': queueCount(m.pendingReceives, 'receives', m.unreadable),
    unexpected: queueCount(m.unexpected, 'unexpected', m.unreadable),
  };
}

/** The legend line under a list of summaries when one of them has a count not readable; else null. */
export function notReadableLegend(summaries: readonly SummaryFields[]): string | null {
  return summaries.some((f) => Object.values(f).includes(NOT_READABLE)) ? NOT_READABLE_LEGEND : null;
}

export function snapshotListEntry(m: ApiSnapshotMeta): SnapshotListEntry {
  return { id: m.id, takenAt: m.takenAt, summary: snapshotSummary(m), meta: m };
}

function jobSummary(j: ApiResponse<'job'>['job']): JobSummary {
  return {
    id: j.id,
    starterPid: Pid(j.starterPid),
    host: j.host,
    uid: j.uid,
    command: j.command,
    state: j.state,
    user: j.user ?? null,
    nodes: j.hosts.map((h) => h.host),
    since: j.since ?? null,
    sinceSnapshots: j.sinceSnapshots ?? 0,
    unchangedSince: j.unchangedSince ?? null,
    unchangedSnapshots: j.unchangedSnapshots ?? 0,
    diagnosis: j.diagnosis ?? '',
    pausedUntil: j.pausedUntil ?? null,
    lastSnapshotAt: j.lastSnapshotAt,
    ranks: j.rankCount,
    coresDir: j.coresDir ?? null,
  };
}

/** A route's path under /api with its `:params` filled in (encoded). */
function pathOf(route: RouteName, params: Readonly<Record<string, string>> = {}, query = ''): string {
  const url = API_ROUTES[route].url.replace(/:([A-Za-z]+)/g, (_, k: string) =>
    encodeURIComponent(params[k] ?? ''),
  );
  return `/api${url}${query}`;
}

// --- transport ----------------------------------------------------------------------------------

function webError(code: WebErrorCode, status: number, detail: string): ApiError {
  return { status, code, message: `${code}: ${detail}: ${WEB_ERROR_HINTS[code]}` };
}

/** The server's ApiError body; a message that lacks the hint gets the model's hint for that code. */
function serverError(status: number, body: unknown): ApiError {
  const e = decodeErrorBody(body);
  if (e !== null && e.code !== '') {
    const { code, message } = e;
    const hint = isErrorCode(code) && !message.includes(ERROR_HINTS[code]) ? `: ${ERROR_HINTS[code]}` : '';
    return { status, code, message: `${codedText({ code, message })}${hint}` };
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

/**
 * The response public/early-overview.js started for `path`, once: the page's first overview
 * request leaves while the app's code loads. Undefined when there is none for this path.
 */
function takeEarlyOverview(path: string): Promise<Response> | undefined {
  const early = earlyOverview().__mqdEarlyOverview;
  if (early === undefined || early.path !== path) return undefined;
  dropEarlyOverview();
  return early.response;
}

const earlyOverview = () =>
  globalThis as { __mqdEarlyOverview?: { path: string; response: Promise<Response> } };

/**
 * Forgets the early overview: one that left before a login carries no session (a 401), so the
 * first overview after a login is asked again with the session's cookie.
 */
function dropEarlyOverview(): void {
  delete earlyOverview().__mqdEarlyOverview;
}

/**
 * A response's body, read as it arrives; with `onFirst`, an overview's first part goes to it
 * as soon as its bytes are in, and the rest is read once what it returns has settled (a first
 * part that does not decode is left to the whole body's check, which reports it).
 */
async function readBody(res: Response, onFirst: OnOverviewFirst | null): Promise<Uint8Array> {
  if (onFirst === null || res.body === null) return new Uint8Array(await res.arrayBuffer());
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  let firstEnd: number | null = null;
  let firstDone = false;
  const joined = () => {
    if (chunks.length === 1 && chunks[0]) return chunks[0];
    const all = new Uint8Array(total);
    let at = 0;
    for (const c of chunks) {
      all.set(c, at);
      at += c.length;
    }
    chunks.splice(0, chunks.length, all);
    return all;
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    total += value.length;
    if (firstDone) continue;
    firstEnd ??= overviewFirstLength(joined().subarray(0, OVERVIEW_HEADER_BYTES));
    if (firstEnd === null && total >= OVERVIEW_HEADER_BYTES) firstDone = true; // not an overview: the whole check says so
    if (firstEnd !== null && total >= firstEnd) {
      firstDone = true;
      const first = decodeOverviewFirst(joined().slice(0, firstEnd));
      if (first.ok) await onFirst(first.value);
    }
  }
  return joined();
}

export function createApi(opts: ApiOptions = {}): Api {
  const base = opts.base ?? '';
  const doFetch = opts.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));
  const newRequestKey = opts.newRequestKey ?? randomKey;
  const pauseBefore = opts.retryPauseMs ?? retryPauseMs;

  /**
   * Calls `route` (method and URL from API_ROUTES) and decodes its answer against the spec; a
   * body that does not match is MQD_E_BAD_RESPONSE naming the field, never a half-read value.
   */
  async function request<N extends RouteName, T>(
    route: N,
    path: string,
    use: (body: ApiResponse<N>) => T,
    body?: unknown,
    signal?: AbortSignal,
    extraHeaders: Readonly<Record<string, string>> = {},
  ): Promise<ApiResult<T>> {
    const method = API_ROUTES[route].method;
    const init: RequestInit = {
      method,
      credentials: 'same-origin',
      headers:
        body === undefined
          ? { accept: 'application/json', ...extraHeaders }
          : { accept: 'application/json', 'content-type': 'application/json', ...extraHeaders },
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
    let json: unknown;
    try {
      const text = await res.text();
      json = text === '' ? null : JSON.parse(text);
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
    const decoded = decodeResponse(route, json);
    if (!decoded.ok)
      return err(webError('MQD_E_BAD_RESPONSE', res.status, `${method} ${path}: ${decoded.error.message}`));
    return ok(use(decoded.value));
  }

  /**
   * An overview route: a binary body checked by decodeOverview; errors are JSON as elsewhere.
   * The page's first overview may already be on its way (public/early-overview.js).
   */
  async function overviewRequest(
    path: string,
    signal?: AbortSignal,
    onFirst?: OnOverviewFirst,
  ): Promise<ApiResult<SnapshotOverview>> {
    const init: RequestInit = {
      method: 'GET',
      credentials: 'same-origin',
      headers: { accept: OVERVIEW_MEDIA_TYPE },
    };
    if (signal) init.signal = signal;
    let res: Response;
    let bytes: Uint8Array;
    try {
      res = await (takeEarlyOverview(`${base}${path}`) ?? doFetch(`${base}${path}`, init));
      bytes = await readBody(res, res.ok && onFirst ? onFirst : null);
    } catch (e: unknown) {
      if (signal?.aborted) return err(webError('MQD_E_ABORTED', 0, `GET ${path}`));
      return err(
        webError('MQD_E_NETWORK', 0, `GET ${path} failed (${e instanceof Error ? e.message : String(e)})`),
      );
    }
    if (!res.ok) {
      let json: unknown = null;
      try {
        json = JSON.parse(new TextDecoder().decode(bytes));
      } catch {
        // Not ours (a proxy's page): serverError says so from the status.
      }
      return err(serverError(res.status, json));
    }
    const d = decodeOverview(bytes);
    if (!d.ok) return err(webError('MQD_E_BAD_RESPONSE', res.status, `GET ${path}: ${d.error}`));
    return ok(d.value);
  }

  const api: Api = {
    overview: (id, share, signal, onFirst) =>
      overviewRequest(pathOf(share ? 'sharedOverview' : 'snapshotOverview', { id }), signal, onFirst),
    health: (signal) => request('health', pathOf('health'), (b) => ({ ...b }), undefined, signal),
    login: (token, switchUser = false) => {
      dropEarlyOverview();
      return request(
        'login',
        pathOf('login'),
        () => undefined,
        switchUser ? { token, switchUser } : { token },
      );
    },
    jobs: (signal) => request('jobs', pathOf('jobs'), (b) => b.jobs.map(jobSummary), undefined, signal),
    jobsPage: (page, signal) => {
      const q =
        page.q === undefined || page.q.trim() === ''
          ? ''
          : `&q=${encodeURIComponent(page.q.trim().slice(0, 200))}`;
      const limit = Math.max(1, Math.min(JOBS_ENDED_PAGE_MAX, Math.trunc(page.endedLimit)));
      const offset = Math.max(0, Math.trunc(page.endedOffset));
      return request(
        'jobs',
        pathOf('jobs', {}, `?endedLimit=${limit}&endedOffset=${offset}${q}`),
        (b) => {
          const jobs = b.jobs.map(jobSummary);
          return {
            jobs,
            endedTotal: b.endedTotal ?? jobs.filter((j) => j.state === 'ended').length,
            endedOffset: b.endedOffset ?? 0,
          };
        },
        undefined,
        signal,
      );
    },
    attach: (req) =>
      request(
        'attach',
        pathOf('attach'),
        (b) => b.job.id,
        // Only the fields the spec allows (a caller's object may carry more).
        {
          ...(req.host === undefined ? {} : { host: req.host }),
          ...('slurmJob' in req
            ? { slurmJob: req.slurmJob }
            : 'coresDir' in req
              ? { coresDir: req.coresDir }
              : { starterPid: req.starterPid }),
        },
      ),
    // The aggregator answers with the new snapshot's summary; the snapshot itself is read back.
    takeSnapshot: async (jobId) => {
      const key = newRequestKey();
      let taken: ApiResult<SnapshotId>;
      let tries = 0;
      do {
        if (tries > 0) await new Promise((r) => setTimeout(r, pauseBefore(tries)));
        taken = await request(
          'takeSnapshot',
          pathOf('takeSnapshot', { id: jobId }),
          (b) => b.snapshot.id,
          undefined,
          undefined,
          { [IDEMPOTENCY_KEY_HEADER]: key },
        );
        tries++;
        // A lost answer (no response, or a proxy's 502/503/504 instead of ours): the server may
        // have stored the snapshot, and the same key makes asking again safe.
      } while (!taken.ok && taken.error.code === 'MQD_E_NETWORK' && tries < SNAPSHOT_TRIES);
      if (!taken.ok) return taken;
      const full = await api.snapshot(taken.value);
      return full.ok ? { ok: true, value: { id: full.value.id, snapshot: full.value.snapshot } } : full;
    },
    snapshots: (jobId, signal) =>
      request(
        'jobSnapshots',
        pathOf('jobSnapshots', { id: jobId }),
        (b) => b.snapshots.map(snapshotListEntry),
        undefined,
        signal,
      ),
    snapshot: (id, signal) =>
      request(
        'snapshot',
        pathOf('snapshot', { id }),
        (b) => ({ id: b.meta.id, jobId: b.meta.jobId, takenAt: b.meta.takenAt, snapshot: b.snapshot }),
        undefined,
        signal,
      ),
    share: (id, expiresInSeconds) =>
      request(
        'share',
        pathOf('share', { id }),
        (b) => ({ url: b.url, id: b.id }),
        expiresInSeconds === undefined ? {} : { expiresInSeconds },
      ),
    shared: (shareId, signal) =>
      request(
        'shared',
        pathOf('shared', { id: shareId }),
        (b) => ({
          snapshot: b.snapshot,
          takenAt: b.meta.takenAt,
          jobId: b.meta.jobId,
          readOnly: true as const,
        }),
        undefined,
        signal,
      ),
    me: (signal) => request('me', pathOf('me'), (b) => b.user, undefined, signal),
    agents: (signal) => request('agents', pathOf('agents'), (b) => b, undefined, signal),
    activity: (limit, signal) =>
      request(
        'activity',
        pathOf('activity', {}, `?limit=${Math.max(1, Math.min(1000, Math.trunc(limit)))}`),
        (b) => b.entries,
        undefined,
        signal,
      ),
    hung: (signal) => request('hung', pathOf('hung'), (b) => b, undefined, signal),
    fleet: (signal, page) =>
      request(
        'fleet',
        pathOf(
          'fleet',
          {},
          page === undefined
            ? ''
            : `?limit=${Math.max(1, Math.min(FLEET_PAGE_MAX, Math.trunc(page.limit)))}&offset=${Math.max(0, Math.trunc(page.offset))}${page.q === undefined || page.q.trim() === '' ? '' : `&q=${encodeURIComponent(page.q.trim().slice(0, 200))}`}`,
        ),
        (b) => b,
        undefined,
        signal,
      ),
    watchPolicy: (signal) => request('watchPolicy', pathOf('watchPolicy'), (b) => b, undefined, signal),
    setWatchPolicy: (policy) =>
      request('setWatchPolicy', pathOf('setWatchPolicy'), (b) => b, {
        enabled: policy.enabled,
        periodSeconds: policy.periodSeconds,
        users: policy.users,
        partitions: policy.partitions,
        accounts: policy.accounts,
        stopBudgetMsPerRankHour: policy.stopBudgetMsPerRankHour,
        hungAfterSamples: policy.hungAfterSamples,
      }),
  };
  return api;
}

export function isUnauthenticated(e: ApiError): boolean {
  return e.status === 401 || e.code === 'MQD_E_UNAUTHENTICATED';
}

export function isAborted(e: ApiError): boolean {
  return e.code === 'MQD_E_ABORTED';
}
