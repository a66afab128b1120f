import {
  type ApiEvalRequest,
  clipText,
  type DiscoveredJob,
  err,
  type MqdError,
  mqdError,
  ok,
  type RankSnapshot,
  type Result,
} from '@mqd/model';
import type { Namespace, Socket } from 'socket.io';
import {
  AGENT_PROTOCOL_VERSION,
  type AgentHandshake,
  type CaptureParams,
  type CountersParams,
  DEFAULT_KEEPALIVE_MS,
  type DecodedAgentMessage,
  type DiscoveryScanReport,
  type DroppedEntry,
  encodeMessage,
  fromWire,
  type LocateTarget,
  MAX_DISCOVERED_JOBS,
  type Refusal,
  type ServerMessage,
  type SnapshotResult,
  WIRE_EVENT,
} from '../protocol/agent-protocol.js';
import { decodeAgentMessage, parseHandshake } from '../protocol/agent-protocol-decode.js';
import type { LocatedJob, RankTarget, SeenStarter } from '../shared/seams.js';
import {
  AgentConn,
  type AgentInfo,
  type HubCapture,
  type HubCounters,
  type OnRanks,
  type Pending,
} from './agent-conn.js';
import type { FoldRequest } from './rank-fold.js';

export type { AgentInfo, HubCapture, HubCounters, OnRanks } from './agent-conn.js';

import { hostAgentToken, tokenDigest, tokenMatches } from './agent-token.js';

export { hostAgentToken, tokenMatches } from './agent-token.js';

export type HubEvent =
  | { readonly kind: 'connect'; readonly agent: AgentInfo }
  | { readonly kind: 'disconnect'; readonly agent: AgentInfo; readonly reason: string }
  | { readonly kind: 'refused'; readonly host: string; readonly error: MqdError }
  /**
   * The jobs an agent discovered on its host changed (a status listed others than the last
   * one, or the agent disconnected: then `jobs` is empty). AgentHub.discovered() has them all.
   */
  | { readonly kind: 'discovered'; readonly host: string; readonly jobs: readonly DiscoveredJob[] };

export interface HubOptions {
  /** The agents' secret: per-host tokens are derived from it (hostAgentToken). */
  readonly agentToken: string;
  /** Accept the secret itself from any host (a single shared token); off unless configured. */
  readonly allowSharedToken?: boolean;
  readonly maxMessageBytes: number;
  readonly statusIntervalMs: number;
  /**
   * How long a request may go without a word from its agent (a chunk, or an `alive` naming it)
   * before it fails with MQD_E_AGENT_SILENT, ms (default DEFAULT_AGENT_SILENCE_MS). Agents say
   * `alive` every keepaliveMs while they work, so only a frozen or swamped agent stays silent.
   */
  readonly silenceMs?: number;
  /** What agents are told to use as their `alive` interval, ms (default DEFAULT_KEEPALIVE_MS). */
  readonly keepaliveMs?: number;
  readonly clock: () => number;
  readonly onEvent?: (e: HubEvent) => void;
}

/** Default HubOptions.silenceMs: four missed keepalives, far below a snapshot's overall deadline. */
export const DEFAULT_AGENT_SILENCE_MS = 8000;

/**
 * AgentHub.snapshot with a last argument only an instance that forwards the read to another can
 * honour (cluster/cluster-hub.ts): chunks read there come folded where they arrived. The local
 * hub's snapshot, which has no such argument, is one (its chunks are folded by the caller).
 */
export type SnapshotWithFold = (
  ...args: [...Parameters<AgentHub['snapshot']>, fold?: FoldRequest]
) => ReturnType<AgentHub['snapshot']>;

const MAX_GONE = 256;

export class AgentHub {
  private readonly live = new Map<string, AgentConn>();
  /** Recently disconnected agents, for the admin page (bounded). */
  private readonly gone = new Map<string, AgentInfo>();
  private readonly tokenDigest: Buffer;
  /** Messages refused since start, all agents (and connections refused at the handshake). */
  refusedMessages = 0;
  refusedHandshakes = 0;
  /** Entries dropped from otherwise accepted messages (ranks of chunks, starters of statuses). */
  droppedEntries = 0;
  /**
   * The other aggregator instance holding a host's agent, or null (set by the cluster hub when
   * several instances share the agents; one instance alone has no other).
   */
  private elsewhere: ((host: string) => string | null) | null = null;

  constructor(
    private readonly nsp: Namespace,
    private readonly opts: HubOptions,
  ) {
    this.tokenDigest = tokenDigest(opts.agentToken);
    const sharedAllowed = opts.allowSharedToken ?? false;
    nsp.use((socket, next) => {
      const auth = socket.handshake.auth as Record<string, unknown> | undefined;
      const refuse = (e: MqdError) => {
        this.refusedHandshakes++;
        next(Object.assign(new Error(e.message), { data: { code: e.code } }));
      };
      const hs = parseHandshake(auth);
      if (!hs.ok) {
        const shared = sharedAllowed && tokenMatches(auth?.['token'], this.tokenDigest);
        return refuse(shared ? hs.error : mqdError('MQD_E_UNAUTHENTICATED', 'agent token missing or wrong'));
      }
      const perHost = tokenDigest(hostAgentToken(opts.agentToken, hs.value.host));
      const given = hs.value.token;
      if (!tokenMatches(given, perHost) && !(sharedAllowed && tokenMatches(given, this.tokenDigest))) {
        return refuse(
          mqdError(
            'MQD_E_UNAUTHENTICATED',
            `agent token missing or wrong for host ${hs.value.host.slice(0, 64)} (each node needs its own token: mqd agent-token --host NAME)`,
          ),
        );
      }
      if (hs.value.protocol !== AGENT_PROTOCOL_VERSION) {
        return refuse(
          mqdError(
            'MQD_E_BAD_INPUT',
            `agent speaks protocol ${hs.value.protocol}, this aggregator ${AGENT_PROTOCOL_VERSION}: run the same MQD version on both`,
          ),
        );
      }
      if (this.live.has(hs.value.host)) {
        // A live agent keeps its host: a second connection (an impostor, or a restart the
        // server has not seen the end of yet) is refused, and retries after the old one ends.
        return refuse(
          mqdError(
            'MQD_E_AGENT_CONFLICT',
            `an agent is already connected for host ${hs.value.host}; stop it first (a restarted agent is accepted once the old connection times out)`,
          ),
        );
      }
      const holder = this.elsewhere?.(hs.value.host) ?? null;
      if (holder !== null) {
        // The same rule across instances: the agent already connected to another one keeps it.
        return refuse(
          mqdError(
            'MQD_E_AGENT_CONFLICT',
            `an agent is already connected for host ${hs.value.host} to another aggregator instance (${holder.slice(0, 64)}); stop it first (a restarted agent is accepted once the old connection has ended)`,
          ),
        );
      }
      socket.data = { hs: hs.value };
      next();
    });
    nsp.on('connection', (socket) => this.onConnection(socket));
  }

  private send(conn: AgentConn, msg: ServerMessage): void {
    conn.socket.emit(WIRE_EVENT, encodeMessage(msg));
  }

  private onConnection(socket: Socket): void {
    const hs = (socket.data as { hs: AgentHandshake }).hs;
    if (this.live.has(hs.host)) {
      // Two handshakes for one host raced past the middleware: the first one keeps the host.
      this.refusedHandshakes++;
      socket.disconnect(true);
      return;
    }
    const conn = new AgentConn(socket, hs, this.opts.clock());
    this.live.set(hs.host, conn);
    this.gone.delete(hs.host);
    socket.on(WIRE_EVENT, (data: unknown) => this.onMessage(conn, data));
    socket.onAny((event: string) => {
      if (event !== WIRE_EVENT) {
        this.refuse(conn, {
          error: mqdError(
            'MQD_E_BAD_INPUT',
            `unknown event '${event.slice(0, 64)}'; agents send only '${WIRE_EVENT}'`,
          ),
          refId: null,
        });
      }
    });
    socket.on('disconnect', (reason) => this.onDisconnect(conn, reason));
    this.send(conn, {
      type: 'welcome',
      protocol: AGENT_PROTOCOL_VERSION,
      agentId: hs.agentId,
      maxMessageBytes: this.opts.maxMessageBytes,
      statusIntervalMs: this.opts.statusIntervalMs,
      keepaliveMs: this.opts.keepaliveMs ?? DEFAULT_KEEPALIVE_MS,
    });
    this.opts.onEvent?.({ kind: 'connect', agent: conn.info() });
  }

  private onDisconnect(conn: AgentConn, reason: string): void {
    conn.disconnectedAt = this.opts.clock();
    const lost = mqdError(
      'MQD_E_AGENT_MISSING',
      `the agent on ${conn.hs.host} disconnected (${reason}) before it answered`,
    );
    for (const p of conn.pending.values()) {
      clearTimeout(p.timer);
      p.settle(err(lost));
    }
    conn.pending.clear();
    this.watchSilence(conn);
    const hadJobs = conn.discovered.length > 0;
    conn.discovered = [];
    conn.discoveredJson = '[]';
    if (this.live.get(conn.hs.host) === conn) {
      this.live.delete(conn.hs.host);
      this.gone.set(conn.hs.host, conn.info());
      if (this.gone.size > MAX_GONE) {
        const first = this.gone.keys().next();
        if (!first.done) this.gone.delete(first.value);
      }
    }
    this.opts.onEvent?.({ kind: 'disconnect', agent: conn.info(), reason });
    if (hadJobs) this.opts.onEvent?.({ kind: 'discovered', host: conn.hs.host, jobs: [] });
  }

  private refuse(conn: AgentConn, r: Refusal): void {
    conn.refused++;
    this.refusedMessages++;
    this.send(conn, { type: 'refused', refId: r.refId, error: r.error });
    this.opts.onEvent?.({ kind: 'refused', host: conn.hs.host, error: r.error });
  }

  private onMessage(conn: AgentConn, data: unknown): void {
    const decoded = decodeAgentMessage(data, this.opts.maxMessageBytes);
    if (!decoded.ok) {
      this.refuse(conn, decoded.error);
      return;
    }
    const msg = decoded.value;
    conn.messages++;
    conn.lastSeenAt = this.opts.clock();
    const refId = 'id' in msg ? msg.id : null;
    const refusal = this.dispatch(conn, msg);
    if (typeof refusal === 'string')
      this.refuse(conn, { error: mqdError('MQD_E_BAD_INPUT', refusal), refId });
    else if (refusal.length > 0) this.refuseEntries(conn, msg.type, refusal, refId);
  }

  /**
   * Entries dropped from a message whose other entries were kept: counted, logged (onEvent
   * 'refused') and told to the agent, one `refused` per message naming the first.
   */
  private refuseEntries(
    conn: AgentConn,
    type: string,
    dropped: readonly DroppedEntry[],
    refId: number | null,
  ): void {
    this.droppedEntries += dropped.length;
    const first = dropped[0]?.why ?? '';
    const what =
      type !== 'status' ? 'ranks' : first.startsWith('discovered') ? 'discovered jobs' : 'starters';
    const error = mqdError(
      'MQD_E_BAD_INPUT',
      clipText(
        `dropped ${dropped.length} ${what} of a ${type} message, the rest kept; first: ${first}`,
        3000,
      ),
    );
    this.refuse(conn, { error, refId });
  }

  /**
   * Applies a well-formed message: returns why it is refused as a whole, or the entries dropped
   * from it (empty: all kept).
   */
  private dispatch(conn: AgentConn, msg: DecodedAgentMessage): string | DroppedEntry[] {
    const dropped = [...(msg.dropped ?? [])];
    switch (msg.type) {
      case 'status':
        conn.health = msg.health;
        conn.mpi = msg.mpi;
        conn.jobs = msg.jobs;
        conn.discoveredAt = this.opts.clock();
        {
          const json = JSON.stringify(msg.discovered);
          conn.discovered = msg.discovered;
          conn.discoveryScan = msg.discoveryScan ?? {
            complete: msg.discovered.length < MAX_DISCOVERED_JOBS,
            omitted: [],
          };
          if (json !== conn.discoveredJson) {
            conn.discoveredJson = json;
            this.opts.onEvent?.({ kind: 'discovered', host: conn.hs.host, jobs: msg.discovered });
          }
        }
        return dropped;
      case 'alive': {
        const now = performance.now();
        for (const id of msg.ids) {
          const p = conn.pending.get(id);
          if (p !== undefined) p.heardAt = now;
        }
        return dropped;
      }
      case 'chunk': {
        const p = conn.pending.get(msg.id);
        if (p?.method !== 'snapshot')
          return `chunk for request ${msg.id}, which is not an open snapshot request`;
        p.heardAt = performance.now();
        const kept: RankSnapshot[] = [];
        for (const r of msg.ranks) {
          if (p.expected.get(r.rank) !== r.pid || p.seen.has(r.rank)) {
            dropped.push({
              why: `rank ${r.rank} (pid ${r.pid}) was not asked for by request ${msg.id} or came twice`,
            });
            continue;
          }
          p.seen.add(r.rank);
          kept.push(r);
        }
        // A rank the spec refused stays unanswered (agent-missing in the snapshot, unless a
        // valid copy follows): nothing refused is kept. The agent sends its own error rank for a
        // rank it could not read, so only a broken or hostile agent gets here.
        if (kept.length > 0) p.onRanks(kept, kept.length === msg.ranks.length ? msg.ranksText : undefined);
        return dropped;
      }
      case 'reply': {
        const p = conn.pending.get(msg.id);
        if (p === undefined || p.method !== msg.method) {
          return `reply to request ${msg.id}, which is not an open ${msg.method} request`;
        }
        conn.pending.delete(msg.id);
        clearTimeout(p.timer);
        this.watchSilence(conn);
        if (!msg.ok) p.settle(err(fromWire(msg.error, 'MQD_E_INTERNAL')));
        else if (p.method === 'snapshot' && msg.method === 'snapshot') p.settle(ok(msg.result));
        else if (p.method === 'locate' && msg.method === 'locate') p.settle(ok(msg.result));
        else if (p.method === 'counters' && msg.method === 'counters') {
          // Only ranks asked for, each once (the decoder refused a rank named twice).
          const r = msg.result;
          const ranks = r.ranks.filter((x) => p.asked.has(x.rank));
          const errors = r.errors.filter((x) => p.asked.has(x.rank));
          const extra = r.ranks.length + r.errors.length - ranks.length - errors.length;
          if (extra > 0)
            dropped.push({ why: `${extra} counters of ranks request ${msg.id} did not ask for` });
          p.settle(
            ok({
              ranks,
              errors: errors.map((e) => ({ rank: e.rank, error: fromWire(e.error, 'MQD_E_INTERNAL') })),
              clockTicksPerSecond: r.clockTicksPerSecond,
              at: r.at,
            }),
          );
        } else if (p.method === 'capture' && msg.method === 'capture') {
          const r = msg.result;
          const ranks = r.ranks.filter((x) => p.asked.has(x.rank));
          if (ranks.length < r.ranks.length)
            dropped.push({
              why: `${r.ranks.length - ranks.length} cores of ranks request ${msg.id} did not ask for`,
            });
          p.settle(
            ok({
              dir: r.dir,
              ranks: ranks.map((x) => ({
                ...x,
                error: x.error === null ? null : fromWire(x.error, 'MQD_E_INTERNAL'),
              })),
            }),
          );
        }
        return dropped;
      }
    }
  }

  /**
   * Runs the silence check while `conn` has open requests: each one the agent has said nothing
   * about for silenceMs fails with MQD_E_AGENT_SILENT (its late chunks are then refused as for
   * any finished request). Checked every quarter deadline, so a request fails between 1 and
   * 1.25 deadlines after the agent's last word.
   */
  private watchSilence(conn: AgentConn): void {
    if (conn.pending.size === 0) {
      if (conn.silenceTimer !== null) clearInterval(conn.silenceTimer);
      conn.silenceTimer = null;
      return;
    }
    if (conn.silenceTimer !== null) return;
    const silenceMs = this.opts.silenceMs ?? DEFAULT_AGENT_SILENCE_MS;
    const period = Math.max(10, Math.floor(silenceMs / 4));
    let lastTick = performance.now();
    conn.silenceTimer = setInterval(() => {
      const now = performance.now();
      const stalled = now - lastTick > 2 * period;
      lastTick = now;
      if (stalled) {
        // This process's own event loop was blocked (the agent of `mqd serve` shares it): what
        // the agent sent meanwhile is still unread, so its silence is not measured from before.
        for (const p of conn.pending.values()) p.heardAt = Math.max(p.heardAt, now - period);
        return;
      }
      for (const [id, p] of conn.pending) {
        const quiet = now - p.heardAt;
        if (quiet < silenceMs) continue;
        conn.pending.delete(id);
        clearTimeout(p.timer);
        p.settle(
          err(
            mqdError(
              'MQD_E_AGENT_SILENT',
              `the agent on ${conn.hs.host} stopped answering for ${(quiet / 1000).toFixed(1)} s during request ${id} (frozen or overloaded); its ranks were not read`,
            ),
          ),
        );
      }
      this.watchSilence(conn);
    }, period);
    conn.silenceTimer.unref();
  }

  private request<T>(
    host: string,
    timeoutMs: number,
    make: (id: number, settle: (r: Result<T>) => void, timer: NodeJS.Timeout) => Pending,
    message: (id: number) => ServerMessage,
  ): Promise<Result<T>> {
    const conn = this.live.get(host);
    if (!conn) {
      return Promise.resolve(err(mqdError('MQD_E_AGENT_MISSING', `no agent is connected for host ${host}`)));
    }
    return new Promise<Result<T>>((resolve) => {
      const id = conn.nextId++;
      const timer = setTimeout(() => {
        conn.pending.delete(id);
        this.watchSilence(conn);
        resolve(
          err(
            mqdError(
              'MQD_E_AGENT_MISSING',
              `the agent on ${host} did not answer request ${id} within ${timeoutMs} ms`,
            ),
          ),
        );
      }, timeoutMs);
      conn.pending.set(id, make(id, resolve, timer));
      this.watchSilence(conn);
      this.send(conn, message(id));
    });
  }

  /**
   * Asks the agent on `host` to read `ranks`. Accepted ranks are handed to onRanks as their
   * chunks arrive, so a request that ends in a timeout or disconnect keeps what it got.
   */
  snapshot(
    host: string,
    ranks: readonly RankTarget[],
    timeoutMs: number,
    onRanks: OnRanks,
    owner: {
      readonly ownerUid?: number;
      readonly allowRoot?: boolean;
      readonly light?: boolean;
      readonly evals?: readonly ApiEvalRequest[];
    } = {},
  ): Promise<Result<SnapshotResult>> {
    return this.request<SnapshotResult>(
      host,
      // The agent gets timeoutMs for the read; the hub also waits for the transfer.
      timeoutMs + 2000,
      (_id, settle, timer) => ({
        method: 'snapshot',
        expected: new Map(ranks.map((r) => [r.rank, r.pid])),
        seen: new Set(),
        onRanks,
        settle,
        timer,
        heardAt: performance.now(),
      }),
      (id) => ({ type: 'request', id, method: 'snapshot', params: { ranks, timeoutMs, ...owner } }),
    );
  }

  locate(host: string, target: number | LocateTarget, timeoutMs: number): Promise<Result<LocatedJob>> {
    const params: LocateTarget = typeof target === 'number' ? { starterPid: target } : target;
    return this.request<LocatedJob>(
      host,
      timeoutMs,
      (_id, settle, timer) => ({ method: 'locate', settle, timer, heardAt: performance.now() }),
      (id) => ({ type: 'request', id, method: 'locate', params }),
    );
  }

  /**
   * The /proc counters of ranks on `host` (the hang watch), read by its agent without stopping
   * anything; the agent checks each pid's start time and that it belongs to params.ownerUid.
   * Every asked rank comes back in `ranks` or in `errors`.
   */
  counters(host: string, params: CountersParams, timeoutMs: number): Promise<Result<HubCounters>> {
    return this.request<HubCounters>(
      host,
      timeoutMs,
      (_id, settle, timer) => ({
        method: 'counters',
        asked: new Set(params.ranks.map((r) => r.rank)),
        settle,
        timer,
        heardAt: performance.now(),
      }),
      (id) => ({ type: 'request', id, method: 'counters', params }),
    );
  }

  /**
   * Cores of ranks on `host` (the hang watch, policy captureCores): its agent writes them as
   * params.ownerUid into `<its first core dir>/<params.name>`, after the checks of a snapshot.
   */
  capture(host: string, params: CaptureParams, timeoutMs: number): Promise<Result<HubCapture>> {
    return this.request<HubCapture>(
      host,
      timeoutMs,
      (_id, settle, timer) => ({
        method: 'capture',
        asked: new Set(params.ranks.map((r) => r.rank)),
        settle,
        timer,
        heardAt: performance.now(),
      }),
      (id) => ({ type: 'request', id, method: 'capture', params }),
    );
  }

  /**
   * The jobs every connected agent discovered on its host, from its latest status (`at`: when
   * it came, clock ms). A disconnected agent's jobs are gone. Entries of one key may come from
   * several hosts (a Slurm job) and, on one host, with different uids: never merge those.
   */
  discovered(): { host: string; job: DiscoveredJob; at: number }[] {
    return [...this.live.values()].flatMap((c) =>
      c.discovered.map((job) => ({ host: c.hs.host, job, at: c.discoveredAt })),
    );
  }

  /**
   * Per connected agent, whether its latest report lists every job of its host (a report cut at
   * a cap does not: a job missing from it may still run) and how many jobs of each uid it left
   * out. An agent that has sent no status yet reports nothing complete.
   */
  discoveryScans(): DiscoveryScanReport[] {
    return [...this.live.values()].map((c) => ({
      host: c.hs.host,
      complete: c.discoveryScan.complete,
      omitted: c.discoveryScan.omitted,
      at: c.discoveredAt,
    }));
  }

  /** Where else (another aggregator instance) a host's agent is connected: see `elsewhere`. */
  setElsewhere(fn: (host: string) => string | null): void {
    this.elsewhere = fn;
  }

  /**
   * Ends host's agent connection here with `error` (told to the agent first), as when another
   * instance holds the host since before this connection: the agent retries and is refused
   * until that one ends. False when no agent of host is connected here.
   */
  dropAgent(host: string, error: MqdError): boolean {
    const conn = this.live.get(host);
    if (conn === undefined) return false;
    this.refuse(conn, { error, refId: null });
    conn.socket.disconnect(true);
    return true;
  }

  isConnected(host: string): boolean {
    return this.live.has(host);
  }

  hosts(): string[] {
    return [...this.live.keys()];
  }

  /** Live agents first, then recently disconnected ones. */
  agents(): AgentInfo[] {
    return [...[...this.live.values()].map((c) => c.info()), ...this.gone.values()];
  }

  /** Starters the live agents report, for listing attachable jobs. */
  seenStarters(): { host: string; starter: SeenStarter }[] {
    return [...this.live.values()].flatMap((c) => c.jobs.map((starter) => ({ host: c.hs.host, starter })));
  }

  /**
   * Drops every agent connection of this process (they will reconnect to the next server).
   * `local`: under a cluster adapter a plain disconnectSockets would reach every instance.
   */
  close(): void {
    this.nsp.local.disconnectSockets(true);
  }
}
