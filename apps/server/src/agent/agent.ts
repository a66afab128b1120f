// The per-node agent: connects to the aggregator over socket.io (agent-protocol.ts), reports
// its node's health and MPI starters, and answers snapshot and locate requests with the
// injected RankReader and JobLocator. It reconnects on its own with exponential backoff and
// never lets a reader failure cost more than the ranks involved: every requested rank is
// answered, in state error when it could not be read.
import { hostname, loadavg } from 'node:os';
import { join } from 'node:path';
import {
  clipText,
  type DiscoveredJob,
  type Disposable,
  type ErrorCode,
  err,
  isErrorCode,
  MAX_MESSAGE_CHARS,
  type MqdError,
  MqdException,
  mqdError,
  ok,
  type RankSnapshot,
  type Result,
} from '@mqd/model';
import { io, type Socket } from 'socket.io-client';
import {
  AGENT_NAMESPACE,
  AGENT_PROTOCOL_VERSION,
  type AgentHandshake,
  type AgentHealth,
  type AgentMessage,
  CAPTURE_NAME_RE,
  type CaptureParams,
  type CountersResult,
  DEFAULT_KEEPALIVE_MS,
  DEFAULT_MAX_MESSAGE_BYTES,
  type DiscoveryScanInfo,
  encodeMessage,
  fromWire,
  type LocateTarget,
  MAX_DISCOVERED_JOBS,
  MAX_SEEN_JOBS,
  type SnapshotParams,
  WIRE_EVENT,
  type WireError,
} from '../protocol/agent-protocol.js';
import { decodeServerMessage } from '../protocol/agent-protocol-decode.js';
import type {
  CoreRead,
  CounterError,
  CountersParams,
  JobDiscovery,
  JobLocator,
  LocatedJob,
  RankReader,
  SeenStarter,
} from '../shared/seams.js';
import {
  chunkMessages,
  clipCore,
  clipLocated,
  clipMpi,
  completeAnswer,
  rankBudget,
  statusMessage,
} from './agent-messages.js';
import { coreFileAllowed, coreFilesOwner, resolveCoreDir } from './core-dirs.js';

export const AGENT_VERSION = '0.1.0';

export interface BackoffOptions {
  /** First retry delay, ms (default 500). */
  readonly initialMs?: number;
  /** Longest delay, ms (default 30 000). */
  readonly maxMs?: number;
  /** Growth per failed attempt (default 2). */
  readonly factor?: number;
  /** 0..1: the delay is drawn from [d * (1 - jitter), d] so agents of a restarted server do not all come back at once (default 0.5). */
  readonly jitter?: number;
}

/** Delay before reconnect attempt `attempt` (0-based). */
export function backoffDelay(
  attempt: number,
  o: BackoffOptions = {},
  random: () => number = Math.random,
): number {
  const initial = o.initialMs ?? 500;
  const max = o.maxMs ?? 30_000;
  const d = Math.min(max, initial * (o.factor ?? 2) ** Math.min(attempt, 64));
  return Math.round(d * (1 - (o.jitter ?? 0.5) * random()));
}

export type AgentEvent =
  | { readonly kind: 'welcome'; readonly agentId: string }
  | { readonly kind: 'disconnect'; readonly reason: string }
  | { readonly kind: 'connect-error'; readonly error: MqdError; readonly retryInMs: number }
  | { readonly kind: 'refused'; readonly error: MqdError; readonly refId: number | null }
  | {
      readonly kind: 'request';
      readonly method: 'snapshot' | 'locate' | 'counters' | 'capture';
      readonly id: number;
    };

export interface AgentOptions {
  /** Aggregator base URL, e.g. http://head:8080. */
  readonly serverUrl: string;
  /** The shared agent token. */
  readonly token: string;
  readonly reader: RankReader;
  /** Only needed on nodes where starters (mpirun) run. */
  readonly locator?: JobLocator | null;
  /**
   * Finds the node's MPI jobs by itself (status.discovered, rescanned for every status) and
   * reads their ranks' /proc counters (the `counters` request): the hang watch. Absent: the
   * status lists none and counters are refused with MQD_E_AGENT_MISSING.
   */
  readonly discovery?: JobDiscovery | null;
  /**
   * Directories whose core files this agent opens as jobs (`mqd serve --core-dir`); a request
   * for cores anywhere else is refused here with MQD_E_CORE_DIR_FORBIDDEN, whatever the aggregator
   * checked. Empty or absent: no cores are read.
   */
  readonly coreDirs?: readonly string[];
  /** Node name reported for every rank; default os.hostname(). */
  readonly host?: string;
  readonly agentId?: string;
  readonly backoff?: BackoffOptions;
  /** Status reports more often than the aggregator asks (ms); default: as asked. */
  readonly statusIntervalMs?: number;
  readonly log?: (line: string) => void;
  readonly random?: () => number;
  /**
   * TLS towards an https:// aggregator: `ca` (PEM) is the certificate authority the agent
   * trusts; the server's certificate is always verified, except for the in-process agent of
   * `mqd serve` on loopback (rejectUnauthorized false).
   */
  readonly tls?: { readonly ca?: string; readonly rejectUnauthorized?: boolean };
}

export interface AgentHandle extends AsyncDisposable {
  readonly agentId: string;
  readonly host: string;
  /** True between the aggregator's welcome and the next disconnect. */
  readonly connected: boolean;
  /** Resolves at the next welcome (at once if connected now). */
  whenConnected(): Promise<void>;
  onEvent(listener: (e: AgentEvent) => void): Disposable;
  /** Drops the connection as if the network failed; the agent reconnects by itself. */
  simulateDrop(): void;
  dispose(): Promise<void>;
}

/** A failure as the wire carries it: coded, its message within the spec's limit. */
function toMqdError(e: unknown, fallback: ErrorCode): MqdError {
  const m =
    e instanceof MqdException ? e.error : mqdError(fallback, e instanceof Error ? e.message : String(e));
  return { code: m.code, message: clipText(m.message, MAX_MESSAGE_CHARS) };
}

/** An error as a reply carries it: a code of ours (else MQD_E_INTERNAL), the message within its limit. */
function wireErrorOf(e: { readonly code: string; readonly message: string }): WireError {
  return isErrorCode(e.code)
    ? { code: e.code, message: clipText(e.message, MAX_MESSAGE_CHARS) }
    : toMqdError(new Error(e.message), 'MQD_E_INTERNAL');
}

function sanitizeId(s: string): string {
  return s.replace(/[^A-Za-z0-9._:-]/g, '_').slice(0, 64) || 'agent';
}

export function startAgent(opts: AgentOptions): AgentHandle {
  const host = opts.host ?? hostname();
  const agentId = sanitizeId(opts.agentId ?? `${host}-${process.pid}`);
  const log = opts.log ?? (() => {});
  const listeners = new Set<(e: AgentEvent) => void>();
  const emit = (e: AgentEvent) => {
    for (const l of listeners) l(e);
  };
  const active = new Map<number, AbortController>();
  let maxBytes = DEFAULT_MAX_MESSAGE_BYTES;
  let lastError: WireError | null = null;
  let welcomed = false;
  let disposed = false;
  let attempt = 0;
  let retryTimer: NodeJS.Timeout | null = null;
  let statusTimer: NodeJS.Timeout | null = null;
  let keepaliveTimer: NodeJS.Timeout | null = null;
  let omittedBefore = 0;
  let omittedFoundBefore = 0;
  let leftOutBefore = '';
  let waiters: (() => void)[] = [];
  const startedAt = Date.now();

  const auth: AgentHandshake = {
    token: opts.token,
    protocol: AGENT_PROTOCOL_VERSION,
    agentId,
    host,
    version: AGENT_VERSION,
  };
  const url = new URL(AGENT_NAMESPACE, opts.serverUrl).toString();
  // Reconnection is ours (scheduleRetry), not socket.io's: its manager does not retry after a
  // refused handshake or a server-side disconnect, and one policy for every case is simpler.
  const socket: Socket = io(url, {
    auth: { ...auth },
    reconnection: false,
    transports: ['websocket'],
    autoConnect: false,
    ...(opts.tls?.ca !== undefined ? { ca: opts.tls.ca } : {}),
    rejectUnauthorized: opts.tls?.rejectUnauthorized ?? true,
  });

  const send = (msg: AgentMessage | Buffer): boolean => {
    // Never let socket.io buffer while disconnected: a stale answer after reconnect would only
    // be refused, and the aggregator has already marked those ranks agent-missing.
    if (!socket.connected) return false;
    const bytes = Buffer.isBuffer(msg) ? msg : encodeMessage(msg);
    if (bytes.byteLength > maxBytes) {
      // Never over the cap: the aggregator's transport cuts a connection that sends more, and
      // with it every other request on it. A reply says why instead (a located job of a
      // starter whose table lists a million ranks with long host names).
      const e = mqdError(
        'MQD_E_TOO_LARGE',
        `the agent on ${host} would have sent a message of ${bytes.byteLength} bytes, over the aggregator's ${maxBytes}-byte limit (--max-message-bytes)`,
      );
      lastError = e;
      log(`agent ${agentId}: ${e.message}`);
      if (!Buffer.isBuffer(msg) && msg.type === 'reply') {
        socket.emit(
          WIRE_EVENT,
          encodeMessage({ type: 'reply', id: msg.id, method: msg.method, ok: false, error: e }),
        );
      }
      return false;
    }
    socket.emit(WIRE_EVENT, bytes);
    return true;
  };

  const sendStatus = async () => {
    let jobs: readonly SeenStarter[] = [];
    try {
      jobs = (await opts.locator?.list?.()) ?? [];
    } catch (e) {
      lastError = toMqdError(e, 'MQD_E_INTERNAL');
      log(`agent ${agentId}: listing starters failed: ${lastError.message}`);
    }
    let discovered: readonly DiscoveredJob[] = [];
    // No discovery, or a failed one, knows nothing of the node's jobs: an incomplete report.
    let scan: DiscoveryScanInfo = { complete: false, omitted: [] };
    try {
      const d = opts.discovery;
      if (d?.scan) {
        const s = await d.scan();
        discovered = s.jobs;
        scan = { complete: s.complete, omitted: s.omitted };
      } else if (d) {
        discovered = await d.discover();
        scan = { complete: discovered.length <= MAX_DISCOVERED_JOBS, omitted: [] };
      }
    } catch (e) {
      lastError = toMqdError(e, 'MQD_E_INTERNAL');
      log(`agent ${agentId}: discovering jobs failed: ${lastError.message}`);
    }
    const mem = process.memoryUsage();
    const health: AgentHealth = {
      rssBytes: mem.rss,
      heapUsedBytes: mem.heapUsed,
      uptimeSeconds: Math.round((Date.now() - startedAt) / 1000),
      loadAverage1m: loadavg()[0] ?? 0,
      activeRequests: active.size,
      lastError,
    };
    const status = statusMessage(health, clipMpi(opts.reader.mpi), jobs, maxBytes, discovered, scan);
    if (status.omitted > 0 && status.omitted !== omittedBefore) {
      log(
        `agent ${agentId}: ${status.omitted} of ${jobs.length} MPI starters left out of the status (over ${MAX_SEEN_JOBS} or the ${maxBytes}-byte message limit)`,
      );
    }
    omittedBefore = status.omitted;
    if (status.omittedDiscovered > 0 && status.omittedDiscovered !== omittedFoundBefore) {
      log(
        `agent ${agentId}: ${status.omittedDiscovered} of ${discovered.length} discovered jobs left out of the status (over ${MAX_DISCOVERED_JOBS} or the ${maxBytes}-byte message limit)`,
      );
    }
    omittedFoundBefore = status.omittedDiscovered;
    const leftOut = status.discoveryScan.omitted.map((o) => `${o.jobs} of uid ${o.uid}`).join(', ');
    if (leftOut !== leftOutBefore && leftOut !== '') {
      log(
        `agent ${agentId}: discovery left jobs out of its report (over the per-uid or per-node caps): ${leftOut}; their absence ends none of them`,
      );
    }
    leftOutBefore = leftOut;
    send(status.bytes);
  };

  /** Tells the aggregator which requests this agent is still at work on (its silence deadline). */
  const sendAlive = () => {
    if (active.size > 0) send({ type: 'alive', ids: [...active.keys()] });
  };

  const scheduleRetry = (): number => {
    if (disposed || retryTimer !== null) return 0;
    const delay = backoffDelay(attempt++, opts.backoff, opts.random);
    retryTimer = setTimeout(() => {
      retryTimer = null;
      if (!disposed && !socket.connected) socket.connect();
    }, delay);
    return delay;
  };

  const coreDirs = opts.coreDirs ?? [];

  /**
   * The cores of a core snapshot request, re-checked here: every rank names a core, each one
   * inside an allowed directory, all owned by the job's owner (uid 0 only when allowRoot).
   */
  const checkCoreRequest = (p: SnapshotParams): MqdError | null => {
    const paths: string[] = [];
    for (const t of p.ranks) {
      if (t.core === undefined) {
        return mqdError('MQD_E_BAD_INPUT', 'a snapshot request mixes core files and live processes');
      }
      const a = coreFileAllowed(t.core, coreDirs);
      if (!a.ok) return a.error;
      paths.push(a.value);
    }
    const owner = coreFilesOwner(paths);
    if (!owner.ok) return owner.error;
    if (p.ownerUid === undefined || owner.value !== p.ownerUid) {
      return mqdError(
        'MQD_E_FORBIDDEN',
        `the cores belong to uid ${owner.value}, not to the job's owner ${p.ownerUid ?? '(none given)'}`,
      );
    }
    if (owner.value === 0 && p.allowRoot !== true) {
      return mqdError('MQD_E_ROOT_PROCESS', 'the cores belong to root; only an admin may open them');
    }
    return null;
  };

  const handleSnapshot = async (id: number, p: SnapshotParams) => {
    const started = performance.now();
    const ac = new AbortController();
    active.set(id, ac);
    let got: RankSnapshot[] = [];
    let failure: MqdError | null = null;
    const isCore = p.ranks.some((t) => t.core !== undefined);
    let coreRead: CoreRead | null = null;
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          ac.abort();
          reject(
            new MqdException(
              mqdError('MQD_E_DLL_TIMEOUT', `reading ${p.ranks.length} ranks took over ${p.timeoutMs} ms`),
            ),
          );
        }, p.timeoutMs);
      });
      const ro = {
        host,
        timeoutMs: p.timeoutMs,
        signal: ac.signal,
        ...(p.ownerUid === undefined ? {} : { ownerUid: p.ownerUid }),
        ...(p.allowRoot === true ? { allowRoot: true } : {}),
        ...(p.light === true ? { light: true } : {}),
        maxRankBytes: rankBudget(maxBytes),
      };
      if (isCore) {
        const refused = checkCoreRequest(p);
        if (refused !== null) throw new MqdException(refused);
        const readCores = opts.reader.readCores?.bind(opts.reader);
        if (readCores === undefined) {
          throw new MqdException(
            mqdError('MQD_E_CORE_DIR_FORBIDDEN', `the agent on ${host} has no core reader`),
          );
        }
        coreRead = await Promise.race([readCores(p.ranks, ro), timeout]);
        // Checked again after the read: a core swapped meanwhile (a symlink to another user's
        // core) must not end up in this job. The reader itself reads as the file's owner.
        const after = checkCoreRequest(p);
        if (after !== null) {
          coreRead = null;
          throw new MqdException(after);
        }
        got = coreRead.ranks;
      } else {
        got = await Promise.race([opts.reader.read(p.ranks, ro), timeout]);
      }
    } catch (e) {
      // A failed read is data for the snapshot (error ranks), not a reason to stop the agent.
      failure = toMqdError(e, 'MQD_E_INTERNAL');
      lastError = failure;
      log(`agent ${agentId}: read failed: ${failure.message}`);
    } finally {
      clearTimeout(timer);
      active.delete(id);
    }
    if (ac.signal.aborted && failure === null) return; // disconnected meanwhile: nobody waits
    const answer = completeAnswer(p.ranks, Array.isArray(got) ? got : [], host, failure);
    for (const chunk of chunkMessages(id, answer, host, maxBytes)) {
      if (!send(chunk)) return;
    }
    // Only the cores of ranks asked for, once each.
    const asked = new Set(p.ranks.map((t) => t.rank));
    const cores = isCore
      ? (coreRead?.cores ?? [])
          .filter((c) => asked.delete(c.rank))
          .sort((a, b) => a.rank - b.rank)
          .map(clipCore)
      : undefined;
    send({
      type: 'reply',
      id,
      method: 'snapshot',
      ok: true,
      result: {
        count: answer.length,
        mpi: clipMpi(opts.reader.mpi),
        durationMicros: Math.round((performance.now() - started) * 1000),
        ...(cores === undefined ? {} : { cores }),
      },
    });
  };

  /**
   * The cores of `dir`, after this agent's own checks: the directory lies inside its allowed
   * roots, every core the locator names lies there too, and the owner is the files' one uid
   * (read here, not taken from the locator).
   */
  const locateCores = async (
    locator: JobLocator | null | undefined,
    dir: string,
  ): Promise<Result<LocatedJob>> => {
    const real = resolveCoreDir(dir, coreDirs);
    if (!real.ok) return real;
    if (!locator?.locateCores) {
      return err(mqdError('MQD_E_CORE_DIR_FORBIDDEN', `agent ${agentId} on ${host} cannot read core files`));
    }
    const r = await locator.locateCores(real.value);
    if (!r.ok) return r;
    const paths: string[] = [];
    for (const x of r.value.ranks) {
      if (x.core === undefined)
        return err(mqdError('MQD_E_INTERNAL', `the locator named no core for rank ${x.rank}`));
      const a = coreFileAllowed(x.core, coreDirs);
      if (!a.ok) return a;
      paths.push(a.value);
    }
    const owner = coreFilesOwner(paths);
    if (!owner.ok) return owner;
    // The locator read the cores' headers (their command line, pid) from files of uid
    // r.value.uid; the job goes to the uid the paths name now. A core swapped in and back
    // between the two (another user's, root's) must not hand its command line to this one.
    if (r.value.uid >= 0 && r.value.uid !== owner.value) {
      return err(
        mqdError(
          'MQD_E_CORE_INVALID',
          `the cores of ${real.value} changed owner while they were located (uid ${r.value.uid}, now uid ${owner.value}): attach the directory again`,
        ),
      );
    }
    return ok({
      ...r.value,
      uid: owner.value,
      coresDir: real.value,
      ranks: r.value.ranks.map((x) => ({ ...x, host })),
    });
  };

  const handleLocate = async (id: number, target: LocateTarget) => {
    // Listed as active for the keepalives; a locate has nothing to abort.
    active.set(id, new AbortController());
    try {
      await locate(id, target);
    } finally {
      active.delete(id);
    }
  };

  /**
   * The /proc counters of ranks (the hang watch): read by the discovery seam without stopping
   * anything; every asked rank answered once, in ranks or in errors.
   */
  const handleCounters = async (id: number, p: CountersParams) => {
    active.set(id, new AbortController());
    const refuse = (error: WireError) =>
      send({
        type: 'reply',
        id,
        method: 'counters',
        ok: false,
        error: { code: error.code, message: clipText(error.message, MAX_MESSAGE_CHARS) },
      });
    try {
      const d = opts.discovery;
      if (!d) {
        refuse(
          mqdError(
            'MQD_E_AGENT_MISSING',
            `the agent on ${host} runs without job discovery (the hang watch), so it reads no counters`,
          ),
        );
        return;
      }
      const got = await d.counters(p);
      const asked = new Set(p.ranks.map((r) => r.rank));
      const ranks = got.ranks.filter((r) => asked.delete(r.rank));
      const errors: CounterError[] = got.errors
        .filter((e) => asked.delete(e.rank))
        .map((e) => ({ rank: e.rank, error: wireErrorOf(e.error) }));
      for (const rank of asked) {
        errors.push({
          rank,
          error: mqdError('MQD_E_INTERNAL', `the counter reader gave nothing for rank ${rank}`),
        });
      }
      const result: CountersResult = {
        ranks,
        errors,
        clockTicksPerSecond: got.clockTicksPerSecond,
        at: Date.now(),
      };
      send({ type: 'reply', id, method: 'counters', ok: true, result });
    } catch (e) {
      lastError = toMqdError(e, 'MQD_E_INTERNAL');
      refuse(lastError);
    } finally {
      active.delete(id);
    }
  };

  /**
   * Cores of a hung job's ranks (the hang watch, policy captureCores): written by the reader's
   * capture into `<first core dir>/<name>`, as the ranks' owner; the directory is this agent's
   * choice (the request names only one path component), so no request points it elsewhere.
   */
  const handleCapture = async (id: number, p: CaptureParams) => {
    const ac = new AbortController();
    active.set(id, ac);
    const refuse = (error: WireError) =>
      send({
        type: 'reply',
        id,
        method: 'capture',
        ok: false,
        error: { code: error.code, message: clipText(error.message, MAX_MESSAGE_CHARS) },
      });
    try {
      const first = coreDirs[0];
      if (first === undefined) {
        refuse(
          mqdError(
            'MQD_E_CORE_DIR_FORBIDDEN',
            `the agent on ${host} has no core directory (--core-dir), so it keeps no cores`,
          ),
        );
        return;
      }
      const root = resolveCoreDir(first, coreDirs);
      if (!root.ok) {
        refuse(root.error);
        return;
      }
      if (!CAPTURE_NAME_RE.test(p.name)) {
        refuse(mqdError('MQD_E_BAD_INPUT', 'a capture directory name is one plain path component'));
        return;
      }
      const capture = opts.reader.capture?.bind(opts.reader);
      if (capture === undefined) {
        refuse(mqdError('MQD_E_CORE_DIR_FORBIDDEN', `the agent on ${host} has no core writer`));
        return;
      }
      const r = await capture(p.ranks, join(root.value, p.name), {
        host,
        ownerUid: p.ownerUid,
        signal: ac.signal,
      });
      if (!r.ok) {
        lastError = toMqdError(new MqdException(r.error), 'MQD_E_INTERNAL');
        refuse(r.error);
        return;
      }
      // Every asked rank once: unanswered ones are errors, others dropped.
      const asked = new Map(p.ranks.map((x) => [x.rank, x.pid]));
      const ranks = r.value.ranks
        .filter((x) => asked.delete(x.rank))
        .map((x) => ({ ...x, error: x.error === null ? null : wireErrorOf(x.error) }));
      for (const [rank, pid] of asked) {
        ranks.push({
          rank,
          pid,
          core: null,
          bytes: 0,
          pausedMicros: 0,
          error: mqdError('MQD_E_INTERNAL', `the capture gave nothing for rank ${rank}`),
        });
      }
      ranks.sort((a, b) => a.rank - b.rank);
      send({ type: 'reply', id, method: 'capture', ok: true, result: { dir: r.value.dir, ranks } });
    } catch (e) {
      lastError = toMqdError(e, 'MQD_E_INTERNAL');
      refuse(lastError);
    } finally {
      active.delete(id);
    }
  };

  const locate = async (id: number, target: LocateTarget) => {
    const refuse = (error: WireError) =>
      send({
        type: 'reply',
        id,
        method: 'locate',
        ok: false,
        error: { code: error.code, message: clipText(error.message, MAX_MESSAGE_CHARS) },
      });
    const reply = (job: LocatedJob) =>
      send({ type: 'reply', id, method: 'locate', ok: true, result: clipLocated(job) });
    const locator = opts.locator;
    if ('coresDir' in target) {
      try {
        const r = await locateCores(locator, target.coresDir);
        if (r.ok) reply(r.value);
        else refuse(r.error);
      } catch (e) {
        lastError = toMqdError(e, 'MQD_E_INTERNAL');
        refuse(lastError);
      }
      return;
    }
    if (!locator) {
      refuse(mqdError('MQD_E_NOT_STARTER', `agent ${agentId} on ${host} has no job locator`));
      return;
    }
    const slurm = 'slurmJob' in target ? locator.locateSlurm?.bind(locator) : undefined;
    if ('slurmJob' in target && slurm === undefined) {
      refuse(mqdError('MQD_E_NO_SLURM', `agent ${agentId} on ${host} cannot locate Slurm jobs`));
      return;
    }
    try {
      const r =
        'slurmJob' in target && slurm !== undefined
          ? await slurm(target.slurmJob)
          : await locator.locate('starterPid' in target ? target.starterPid : 0);
      if (r.ok) reply(r.value);
      else refuse(r.error);
    } catch (e) {
      lastError = toMqdError(e, 'MQD_E_INTERNAL');
      refuse(lastError);
    }
  };

  socket.on(WIRE_EVENT, (data: unknown) => {
    const m = decodeServerMessage(data, Number.MAX_SAFE_INTEGER);
    if (!m.ok) {
      log(`agent ${agentId}: ignored a malformed message from the aggregator: ${m.error.error.message}`);
      return;
    }
    const msg = m.value;
    switch (msg.type) {
      case 'welcome': {
        maxBytes = msg.maxMessageBytes;
        welcomed = true;
        attempt = 0;
        if (statusTimer) clearInterval(statusTimer);
        statusTimer = setInterval(() => void sendStatus(), opts.statusIntervalMs ?? msg.statusIntervalMs);
        statusTimer.unref();
        if (keepaliveTimer) clearInterval(keepaliveTimer);
        keepaliveTimer = setInterval(sendAlive, msg.keepaliveMs || DEFAULT_KEEPALIVE_MS);
        keepaliveTimer.unref();
        void sendStatus();
        log(`agent ${agentId}: connected to ${opts.serverUrl} as ${host}`);
        emit({ kind: 'welcome', agentId: msg.agentId });
        const w = waiters;
        waiters = [];
        for (const f of w) f();
        return;
      }
      case 'request':
        emit({ kind: 'request', method: msg.method, id: msg.id });
        if (msg.method === 'snapshot') void handleSnapshot(msg.id, msg.params);
        else if (msg.method === 'counters') void handleCounters(msg.id, msg.params);
        else if (msg.method === 'capture') void handleCapture(msg.id, msg.params);
        else void handleLocate(msg.id, msg.params);
        return;
      case 'refused':
        log(`agent ${agentId}: the aggregator refused a message: ${msg.error.message}`);
        emit({ kind: 'refused', error: fromWire(msg.error, 'MQD_E_BAD_INPUT'), refId: msg.refId });
        return;
    }
  });

  socket.on('connect_error', (e: Error & { data?: { code?: unknown } }) => {
    // A refused handshake carries the aggregator's coded error; anything else is the network.
    const code = e.data?.code;
    const error: MqdError =
      typeof code === 'string' && isErrorCode(code)
        ? { code, message: e.message }
        : mqdError(
            'MQD_E_AGENT_MISSING',
            `the aggregator at ${opts.serverUrl} is unreachable (${e.message})`,
          );
    const retryInMs = scheduleRetry();
    log(
      `agent ${agentId}: cannot connect to ${opts.serverUrl}: ${error.message}; retrying in ${retryInMs} ms`,
    );
    emit({ kind: 'connect-error', error, retryInMs });
  });

  socket.on('disconnect', (reason) => {
    welcomed = false;
    if (statusTimer) clearInterval(statusTimer);
    statusTimer = null;
    if (keepaliveTimer) clearInterval(keepaliveTimer);
    keepaliveTimer = null;
    for (const ac of active.values()) ac.abort();
    emit({ kind: 'disconnect', reason });
    if (!disposed) {
      const delay = scheduleRetry();
      log(`agent ${agentId}: disconnected (${reason}); reconnecting in ${delay} ms`);
    }
  });

  socket.connect();

  const dispose = async () => {
    if (disposed) return;
    disposed = true;
    if (retryTimer) clearTimeout(retryTimer);
    if (statusTimer) clearInterval(statusTimer);
    if (keepaliveTimer) clearInterval(keepaliveTimer);
    for (const ac of active.values()) ac.abort();
    socket.disconnect();
    listeners.clear();
  };

  return {
    agentId,
    host,
    get connected() {
      return welcomed && socket.connected;
    },
    whenConnected() {
      if (welcomed && socket.connected) return Promise.resolve();
      return new Promise<void>((resolve) => waiters.push(resolve));
    },
    onEvent(listener) {
      listeners.add(listener);
      return { dispose: () => listeners.delete(listener) };
    },
    simulateDrop() {
      // Closing the engine (not the socket) is what a network failure looks like to both ends.
      socket.io.engine?.close();
    },
    dispose,
    [Symbol.asyncDispose]: dispose,
  };
}
