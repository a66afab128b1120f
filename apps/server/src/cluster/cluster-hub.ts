// Several aggregators behind one address: an agent is connected to one instance, but
// a snapshot, a locate or a watch sample may be asked of any. ClusterHub is what the rest of an
// instance uses instead of its own AgentHub: the same methods, answered by the local hub when
// the host's agent is connected here, and otherwise forwarded to the instance that has it.
//
// The wire is in cluster-wire.ts; the folded batches a holder sends in folded-outbox.ts.
import { randomUUID } from 'node:crypto';
import { type DiscoveredJob, err, type MqdError, mqdError, type Result } from '@mqd/model';
import type { Namespace } from 'socket.io';
import type { AgentHub, AgentInfo, HubCapture, HubCounters, OnRanks, SnapshotWithFold } from '../hub/hub.js';
import type { FoldedRanks, FoldRequest } from '../hub/rank-fold.js';
import type {
  CaptureParams,
  CountersParams,
  DiscoveryScanReport,
  LocateTarget,
  SnapshotResult,
} from '../protocol/agent-protocol.js';
import type { LocatedJob, RankTarget, SeenStarter } from '../shared/seams.js';
import {
  CALL_METHODS,
  type CallMessage,
  type CallMethod,
  EV_CALL,
  EV_FOLDED,
  EV_LOGINS,
  EV_RANKS,
  EV_REPLY,
  EV_STATE,
  type FoldedBatchMessage,
  foldedOf,
  type InstanceState,
  isInstanceState,
  type RanksMessage,
  type ReplyMessage,
  ranksOf,
  type SnapshotCallParams,
  type SnapshotOwner,
} from './cluster-wire.js';
import { FoldedOutbox, type PassRanks, passFoldedOnce } from './folded-outbox.js';

/** What an instance uses of the agents: AgentHub's public surface. */
export type HubPort = Pick<
  AgentHub,
  | 'locate'
  | 'counters'
  | 'capture'
  | 'discovered'
  | 'discoveryScans'
  | 'isConnected'
  | 'hosts'
  | 'agents'
  | 'seenStarters'
  | 'close'
  | 'refusedMessages'
  | 'refusedHandshakes'
  | 'droppedEntries'
> & { snapshot: SnapshotWithFold };

/** Agents coming and going within this many ms go out in one state message. */
const PUBLISH_COALESCE_MS = 100;

interface Pending {
  readonly host: string;
  readonly holder: string;
  /** The caller's onRanks behind passOnce: a rank is passed on once over every attempt. */
  readonly onRanks: PassRanks | null;
  /** Folded chunks' way to the caller, behind passOnce too; null when none were asked for. */
  readonly onFolded: ((c: FoldedRanks) => void) | null;
  readonly settle: (r: Result<unknown> | typeof HOLDER_LOST) => void;
  /** Rank chunks received so far. */
  chunks: number;
  /** The reply, held until the chunks it counts have all arrived. */
  held: { readonly result: Result<unknown>; readonly chunks: number } | null;
}

/** How long a snapshot's reply waits for the chunks it counts that it overtook. */
const LATE_CHUNKS_MS = 10_000;

/** An attempt's end when its holder instance disappeared (forward() then waits and retries). */
const HOLDER_LOST = Symbol('holder lost');

export interface ClusterHubOptions {
  /** This instance's id: unique per process (a restarted instance is a new one). */
  readonly instance: string;
  readonly stateIntervalMs: number;
  /** Extra time a forwarded call gets over the local one's timeout (the hops between instances). */
  readonly forwardSlackMs?: number;
  readonly log?: { warn(obj: object, msg: string): void };
}

export class ClusterHub implements HubPort {
  /** Rank chunks of forwarded snapshots received here, by how they crossed (tests, the benchmark). */
  readonly chunksIn = { folded: 0, asSent: 0, ranks: 0 };
  private readonly remote = new Map<string, { state: InstanceState; heardAt: number }>();
  private readonly pending = new Map<string, Pending>();
  private readonly outboxes = new Map<string, FoldedOutbox>();
  private readonly timer: NodeJS.Timeout;
  private closed = false;
  private loginsChanged: (() => void) | null = null;
  private servingStarted: (() => void) | null = null;
  private soon: NodeJS.Timeout | null = null;
  /** When this instance's state timer last ran: a late one means its own event loop stalled. */
  private lastTick = performance.now();

  constructor(
    private readonly local: AgentHub,
    private readonly nsp: Namespace,
    private readonly o: ClusterHubOptions,
  ) {
    nsp.use((_socket, next) => next(new Error('this namespace is for aggregator instances only')));
    local.setElsewhere((host) => this.liveHolderOf(host));
    nsp.on(EV_STATE, (s: unknown) => this.onState(s));
    nsp.on(EV_CALL, (c: CallMessage) => void this.onCall(c));
    nsp.on(EV_RANKS, (m: RanksMessage) => {
      if (m?.to !== this.o.instance) return;
      const p = this.pendingFrom(m.id, m.from);
      if (p === undefined) return;
      const got = ranksOf(m);
      if (got !== null) {
        if (got.text === undefined) this.chunksIn.ranks++;
        else this.chunksIn.asSent++;
        p.onRanks?.(got.ranks, got.text);
      } else
        this.o.log?.warn(
          { host: p.host, holder: p.holder },
          'a rank chunk from another instance was unreadable',
        );
      this.counted(p);
    });
    nsp.on(EV_FOLDED, (m: FoldedBatchMessage) => {
      if (m?.to !== this.o.instance || !Array.isArray(m.items)) return;
      for (const item of m.items) {
        if (typeof item !== 'object' || item === null) continue;
        if ('reply' in item) {
          // A reply speaks for the batch's sender, whatever it says inside.
          this.onReply({ ...item.reply, from: m.from });
          continue;
        }
        const p = this.pendingFrom(item.id, m.from);
        if (p === undefined) continue;
        const c = foldedOf(item.chunk);
        if (c !== null) {
          this.chunksIn.folded++;
          p.onFolded?.(c);
        } else
          this.o.log?.warn(
            { host: p.host, holder: p.holder },
            'a folded rank chunk from another instance was unreadable',
          );
        this.counted(p);
      }
    });
    nsp.on(EV_LOGINS, (m: { from?: unknown }) => {
      if (m?.from !== this.o.instance) this.loginsChanged?.();
    });
    nsp.on(EV_REPLY, (m: ReplyMessage) => {
      if (m?.to === this.o.instance) this.onReply(m);
    });
    this.timer = setInterval(() => {
      this.publishState();
      this.expire();
      this.lastTick = performance.now();
    }, o.stateIntervalMs);
    this.timer.unref();
    this.publishState();
  }

  get refusedMessages(): number {
    return this.local.refusedMessages;
  }

  get refusedHandshakes(): number {
    return this.local.refusedHandshakes;
  }

  get droppedEntries(): number {
    return this.local.droppedEntries;
  }

  /** Tells the other instances that logins changed here: they recheck their /ui sockets at once. */
  announceLoginsChanged(): void {
    if (!this.closed) this.nsp.serverSideEmit(EV_LOGINS, { from: this.o.instance });
  }

  /** What to do when another instance announces changed logins. */
  onLoginsChanged(fn: () => void): void {
    this.loginsChanged = fn;
  }

  /**
   * Told when this instance starts reading its agents for a snapshot another instance will store
   * (a forwarded call that asks for folded chunks): background work here yields to it as it does
   * to a snapshot gathered here (overviews.ts).
   */
  onServingSnapshot(fn: () => void): void {
    this.servingStarted = fn;
  }

  /** Whether this instance is reading its agents for a snapshot another instance will store. */
  get servingSnapshot(): boolean {
    for (const o of this.outboxes.values()) if (o.active > 0) return true;
    return false;
  }

  /**
   * Tells the other instances about this one's agents soon (call it when an agent comes or goes):
   * the changes of one moment go out as one state message. A thousand agents reconnecting at
   * once would otherwise send a thousand states of up to a thousand agents each through
   * PostgreSQL (at 100,000 ranks).
   */
  publishSoon(): void {
    if (this.closed || this.soon !== null) return;
    this.soon = setTimeout(
      () => {
        this.soon = null;
        this.publishState();
      },
      Math.min(PUBLISH_COALESCE_MS, this.o.stateIntervalMs / 4),
    );
    this.soon.unref();
  }

  /** Tells the other instances about this one's agents now. */
  publishState(): void {
    if (this.closed) return;
    const state: InstanceState = {
      instance: this.o.instance,
      agents: this.local.agents().filter((a) => a.connected),
      starters: this.local.seenStarters(),
      discovered: this.local.discovered(),
      discoveryScans: this.local.discoveryScans(),
    };
    this.nsp.serverSideEmit(EV_STATE, state);
  }

  // --- the AgentHub surface

  snapshot(
    host: string,
    ranks: readonly RankTarget[],
    timeoutMs: number,
    onRanks: OnRanks,
    owner: SnapshotOwner = {},
    fold?: FoldRequest,
  ): Promise<Result<SnapshotResult>> {
    // A chunk kept as its agent sent it reaches onRanks with those bytes from a local agent, and
    // from another instance too unless it came folded (runLocal sends them, ranksOf and
    // foldedOf read them).
    if (this.local.isConnected(host)) return this.local.snapshot(host, ranks, timeoutMs, onRanks, owner);
    const params: SnapshotCallParams = {
      ranks: [...ranks],
      owner,
      ...(fold ? { foldLevel: fold.level } : {}),
    };
    return this.forward<SnapshotResult>(host, 'snapshot', timeoutMs + 2000, params, onRanks, fold?.onFolded);
  }

  locate(host: string, target: number | LocateTarget, timeoutMs: number): Promise<Result<LocatedJob>> {
    if (this.local.isConnected(host)) return this.local.locate(host, target, timeoutMs);
    return this.forward<LocatedJob>(host, 'locate', timeoutMs, target);
  }

  counters(host: string, params: CountersParams, timeoutMs: number): Promise<Result<HubCounters>> {
    if (this.local.isConnected(host)) return this.local.counters(host, params, timeoutMs);
    return this.forward<HubCounters>(host, 'counters', timeoutMs, params);
  }

  capture(host: string, params: CaptureParams, timeoutMs: number): Promise<Result<HubCapture>> {
    if (this.local.isConnected(host)) return this.local.capture(host, params, timeoutMs);
    return this.forward<HubCapture>(host, 'capture', timeoutMs, params);
  }

  discovered(): { host: string; job: DiscoveredJob; at: number }[] {
    const mine = this.local.discovered();
    const here = new Set(this.local.hosts());
    return [...mine, ...this.remoteStates().flatMap((s) => s.discovered.filter((d) => !here.has(d.host)))];
  }

  discoveryScans(): DiscoveryScanReport[] {
    const mine = this.local.discoveryScans();
    const here = new Set(this.local.hosts());
    return [
      ...mine,
      ...this.remoteStates().flatMap((s) => (s.discoveryScans ?? []).filter((d) => !here.has(d.host))),
    ];
  }

  isConnected(host: string): boolean {
    return this.local.isConnected(host) || this.holderOf(host) !== null;
  }

  hosts(): string[] {
    return [
      ...new Set([...this.local.hosts(), ...this.remoteStates().flatMap((s) => s.agents.map((a) => a.host))]),
    ];
  }

  agents(): AgentInfo[] {
    const here = new Set(this.local.hosts());
    return [
      ...this.local.agents().map((a) => (a.connected ? { ...a, instance: this.o.instance } : a)),
      ...this.remoteStates().flatMap((s) =>
        s.agents.filter((a) => !here.has(a.host)).map((a) => ({ ...a, instance: s.instance })),
      ),
    ];
  }

  seenStarters(): { host: string; starter: SeenStarter }[] {
    const here = new Set(this.local.hosts());
    return [
      ...this.local.seenStarters(),
      ...this.remoteStates().flatMap((s) => s.starters.filter((x) => !here.has(x.host))),
    ];
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    for (const o of this.outboxes.values()) o.close();
    if (this.soon !== null) clearTimeout(this.soon);
    for (const p of this.pending.values()) {
      p.settle(err(mqdError('MQD_E_AGENT_MISSING', `this aggregator instance is shutting down`)));
    }
    this.local.close();
  }

  // --- between instances

  /**
   * The pending call `id` when `from` is the instance it went to, its holder heard from (an
   * instance sending chunks is alive). Another instance's chunks or reply for it are ignored.
   */
  private pendingFrom(id: unknown, from: unknown): Pending | undefined {
    if (typeof id !== 'string') return undefined;
    const p = this.pending.get(id);
    if (p === undefined || p.holder !== from) return undefined;
    this.heardFrom(p.holder);
    return p;
  }

  /** One more of a call's chunks arrived: a reply that waited for it settles once all are in. */
  private counted(p: Pending): void {
    p.chunks++;
    if (p.held !== null && p.chunks >= p.held.chunks) p.settle(p.held.result);
  }

  private onReply(m: ReplyMessage): void {
    const p = this.pendingFrom(m?.id, m?.from);
    if (p === undefined) return;
    const expected = typeof m.chunks === 'number' ? m.chunks : 0;
    if (p.chunks >= expected) {
      p.settle(m.result);
      return;
    }
    // Chunks this reply counts are still on their way: settle when they are in, or after
    // LATE_CHUNKS_MS with what came (the ranks still missing are then unanswered).
    p.held = { result: m.result, chunks: expected };
    setTimeout(() => p.settle(m.result), LATE_CHUNKS_MS).unref();
  }

  /** The batch of folded chunks and replies to instance `to` (one per asker). */
  private outboxTo(to: string): FoldedOutbox {
    let o = this.outboxes.get(to);
    if (o === undefined) {
      const mine: FoldedOutbox = new FoldedOutbox(
        (items) => {
          if (!this.closed)
            this.nsp.serverSideEmit(EV_FOLDED, {
              from: this.o.instance,
              to,
              items,
            } satisfies FoldedBatchMessage);
        },
        // Gone once it has sent everything of every call (an asker that restarts is a new one).
        () => {
          if (this.outboxes.get(to) === mine) this.outboxes.delete(to);
        },
      );
      o = mine;
      this.outboxes.set(to, o);
    }
    return o;
  }

  private remoteStates(): InstanceState[] {
    this.expire();
    return [...this.remote.values()].map((r) => r.state);
  }

  /** The instance whose state lists a live agent for host (the freshest one), or null. */
  private holderOf(host: string): string | null {
    let best: { instance: string; heardAt: number } | null = null;
    this.expire();
    for (const [instance, r] of this.remote) {
      if (!r.state.agents.some((a) => a.host === host)) continue;
      if (best === null || r.heardAt > best.heardAt) best = { instance, heardAt: r.heardAt };
    }
    return best?.instance ?? null;
  }

  /**
   * The instance holding host's agent by a state heard within 1.5 intervals, or null. A second
   * agent of a host is refused here while another instance holds it (AgentHub's rule, across
   * instances); an instance that missed its last state is taken as dying, so its agents
   * reconnecting here after a kill -9 get in within ~3 s rather than after its expiry.
   */
  private liveHolderOf(host: string): string | null {
    const limit = this.heardLimit(1.5);
    for (const [instance, r] of this.remote) {
      if (r.heardAt >= limit && r.state.agents.some((a) => a.host === host)) return instance;
    }
    return null;
  }

  private onState(s: unknown): void {
    if (!isInstanceState(s)) {
      this.o.log?.warn(
        {},
        'a state message from another instance is mis-shaped (another MQD version?): ignored',
      );
      return;
    }
    if (s.instance === this.o.instance) return;
    this.remote.set(s.instance, { state: s, heardAt: performance.now() });
    this.settleConflicts(s);
  }

  /**
   * Hosts whose agent is connected both here and on the instance of state `s` (two handshakes
   * that raced past each other's refusal): the connection made first keeps the host, the
   * instance id breaks a tie. Both instances apply the same rule to the same two states, so
   * exactly one of them drops its connection; that agent retries and is refused while the other
   * holds the host.
   */
  private settleConflicts(s: InstanceState): void {
    if (!Array.isArray(s.agents)) return;
    let mine: Map<string, AgentInfo> | null = null;
    for (const theirs of s.agents) {
      if (!this.local.isConnected(theirs.host)) continue;
      mine ??= new Map(this.local.agents().map((a) => [a.host, a]));
      const here = mine.get(theirs.host);
      if (here === undefined || !here.connected) continue;
      const theyKeep =
        theirs.connectedAt < here.connectedAt ||
        (theirs.connectedAt === here.connectedAt && s.instance < this.o.instance);
      if (!theyKeep) continue;
      this.local.dropAgent(
        theirs.host,
        mqdError(
          'MQD_E_AGENT_CONFLICT',
          `another agent for host ${theirs.host} has been connected to aggregator instance ${s.instance.slice(0, 64)} since before this one: this connection ends (stop the second agent; a restarted agent is accepted once the old connection has ended)`,
        ),
      );
      this.o.log?.warn(
        { host: theirs.host, instance: s.instance },
        'a second agent of one host: the connection on another instance is older and keeps the host',
      );
    }
  }

  private heardFrom(instance: string): void {
    const r = this.remote.get(instance);
    if (r !== undefined) r.heardAt = performance.now();
  }

  /**
   * Drops instances not heard from for 3 intervals, failing the calls they held. Time this
   * instance's own event loop spent stalled (merging a 100,000-rank snapshot) does not count:
   * the other instances' messages were waiting unread meanwhile, not missing.
   */
  /**
   * The oldest `heardAt` of an instance heard from within `intervals` state intervals, not
   * counting the time this instance's own event loop stalled (then nobody's states were read).
   */
  private heardLimit(intervals: number): number {
    const now = performance.now();
    const stalled = Math.max(0, now - this.lastTick - this.o.stateIntervalMs);
    return now - intervals * this.o.stateIntervalMs - stalled;
  }

  private expire(): void {
    const limit = this.heardLimit(3);
    for (const [instance, r] of this.remote) {
      if (r.heardAt >= limit) continue;
      this.remote.delete(instance);
      for (const p of this.pending.values()) if (p.holder === instance) p.settle(HOLDER_LOST);
    }
  }

  /**
   * A call for a host whose agent is on another instance. When that instance dies meanwhile
   * (kill -9: it stops speaking), its agents reconnect through the load balancer to a living
   * instance within seconds: the call waits for the host to show up again (here or elsewhere)
   * and runs again there, within the caller's time. A read is safe to repeat (it only stops the
   * ranks briefly); ranks already passed on are not passed twice.
   */
  private async forward<T>(
    host: string,
    method: CallMethod,
    timeoutMs: number,
    params: unknown,
    onRanks: OnRanks | null = null,
    onFolded?: (c: FoldedRanks) => void,
  ): Promise<Result<T>> {
    const slack = this.o.forwardSlackMs ?? 3000;
    const deadline = performance.now() + timeoutMs + slack;
    // Ranks already passed on, over every attempt.
    const seen = new Set<number>();
    const pass = onRanks === null ? null : this.passOnce(seen, onRanks);
    const passFolded = pass === null || onFolded === undefined ? null : passFoldedOnce(seen, pass, onFolded);
    const lost = (): Result<T> =>
      err(
        mqdError(
          'MQD_E_AGENT_MISSING',
          `the aggregator instance holding ${host}'s agent stopped answering, and the agent did not reconnect to another instance in time: check the agent there, then take the snapshot again`,
        ),
      );
    let attempts = 0;
    for (;;) {
      if (this.closed) {
        return err(mqdError('MQD_E_AGENT_MISSING', 'this aggregator instance is shutting down'));
      }
      // Whole ms: the agent protocol's timeouts are integers (a fraction is refused).
      const remaining = Math.max(1000, Math.floor(deadline - performance.now() - slack));
      if (attempts > 0 && this.local.isConnected(host)) {
        // The agent came back to this very instance.
        return (await this.runHere(method, host, params, remaining, pass ?? (() => undefined))) as Result<T>;
      }
      const holder = this.holderOf(host);
      if (holder === null) {
        if (attempts === 0) {
          return err(
            mqdError('MQD_E_AGENT_MISSING', `no agent is connected for ${host} on any aggregator instance`),
          );
        }
        if (!(await this.waitForHost(host, deadline))) return lost();
        continue;
      }
      attempts++;
      const r = await this.forwardOnce(holder, host, method, remaining, params, pass, passFolded);
      if (r !== HOLDER_LOST) return r as Result<T>;
      this.o.log?.warn(
        { host, holder, method },
        'the instance holding the agent is gone; waiting for the agent elsewhere',
      );
      if (performance.now() >= deadline) return lost();
    }
  }

  /** Waits (polling the states other instances send) until host's agent is connected somewhere. */
  private async waitForHost(host: string, deadline: number): Promise<boolean> {
    while (performance.now() < deadline && !this.closed) {
      if (this.local.isConnected(host) || this.holderOf(host) !== null) return true;
      await new Promise((r) => setTimeout(r, 100));
    }
    return false;
  }

  private passOnce(seen: Set<number>, onRanks: OnRanks): PassRanks {
    return (ranks, text) => {
      const fresh = ranks.filter((r) => !seen.has(r.rank));
      for (const r of fresh) seen.add(r.rank);
      // The text is the whole chunk's: it goes on only with all of its ranks.
      if (fresh.length > 0) onRanks(fresh, fresh.length === ranks.length ? text : undefined);
    };
  }

  private forwardOnce(
    holder: string,
    host: string,
    method: CallMethod,
    timeoutMs: number,
    params: unknown,
    onRanks: PassRanks | null,
    onFolded: ((c: FoldedRanks) => void) | null,
  ): Promise<Result<unknown> | typeof HOLDER_LOST> {
    const id = randomUUID();
    const wait = timeoutMs + (this.o.forwardSlackMs ?? 3000);
    return new Promise((resolve) => {
      const timer = setTimeout(
        () =>
          settle(
            err(
              mqdError(
                'MQD_E_AGENT_SILENT',
                `the aggregator instance holding ${host}'s agent did not answer within ${wait} ms`,
              ),
            ),
          ),
        wait,
      );
      const settle = (r: Result<unknown> | typeof HOLDER_LOST) => {
        if (!this.pending.delete(id)) return;
        clearTimeout(timer);
        resolve(r);
      };
      this.pending.set(id, { host, holder, onRanks, onFolded, settle, chunks: 0, held: null });
      const call: CallMessage = { id, from: this.o.instance, to: holder, host, method, timeoutMs, params };
      this.nsp.serverSideEmit(EV_CALL, call);
    });
  }

  private async onCall(c: CallMessage): Promise<void> {
    if (c?.to !== this.o.instance || typeof c.id !== 'string' || typeof c.from !== 'string') return;
    if (
      typeof c.host !== 'string' ||
      !CALL_METHODS.includes(c.method) ||
      !Number.isSafeInteger(c.timeoutMs)
    ) {
      this.o.log?.warn(
        { from: c.from },
        'a call from another instance is mis-shaped (another MQD version?): ignored',
      );
      return;
    }
    const sent = { chunks: 0 };
    const level = c.method === 'snapshot' ? (c.params as Partial<SnapshotCallParams>).foldLevel : undefined;
    // A snapshot to be stored: its chunks folded, sent with its reply in its asker's batch.
    const folded = Number.isInteger(level) ? { level: level as number, outbox: this.outboxTo(c.from) } : null;
    const reply = (result: Result<unknown>) => {
      const m: ReplyMessage = {
        id: c.id,
        from: this.o.instance,
        to: c.from,
        result,
        ...(c.method === 'snapshot' ? { chunks: sent.chunks } : {}),
      };
      if (folded !== null) folded.outbox.reply(m);
      else this.nsp.serverSideEmit(EV_REPLY, m);
    };
    try {
      reply(await this.runLocal(c, sent, folded));
    } catch (e) {
      this.o.log?.warn({ method: c.method, host: c.host }, `forwarded ${c.method} failed: ${String(e)}`);
      reply(err(mqdError('MQD_E_INTERNAL', `the instance holding ${c.host}'s agent failed: ${String(e)}`)));
    }
  }

  private async runLocal(
    c: CallMessage,
    sent: { chunks: number },
    folded: { readonly level: number; readonly outbox: FoldedOutbox } | null,
  ): Promise<Result<unknown>> {
    const emit = (m: RanksMessage) => {
      sent.chunks++;
      this.nsp.serverSideEmit(EV_RANKS, m);
    };
    const call = folded === null ? null : folded.outbox.call(c.id, folded.level, sent);
    if (call !== null) this.servingStarted?.();
    const onRanks: OnRanks = (ranks, text) => {
      if (text === undefined) emit({ id: c.id, from: this.o.instance, to: c.from, ranks });
      else if (call !== null) call.add(ranks, text);
      else emit({ id: c.id, from: this.o.instance, to: c.from, text });
    };
    // The local hub adds its own transfer slack to a snapshot: take off what the caller added.
    const timeout = c.method === 'snapshot' ? Math.max(1000, c.timeoutMs - 2000) : c.timeoutMs;
    const r = await this.runHere(c.method, c.host, c.params, timeout, onRanks);
    // Every folded chunk is queued before the reply that counts them.
    await call?.done();
    return r;
  }

  /** A call on this instance's own hub. */
  private runHere(
    method: CallMethod,
    host: string,
    params: unknown,
    timeoutMs: number,
    onRanks: OnRanks,
  ): Promise<Result<unknown>> {
    if (!this.local.isConnected(host)) {
      const e: MqdError = mqdError(
        'MQD_E_AGENT_MISSING',
        `the agent for ${host} left this aggregator instance`,
      );
      return Promise.resolve(err(e));
    }
    switch (method) {
      case 'snapshot': {
        const p = params as SnapshotCallParams;
        return this.local.snapshot(host, p.ranks, timeoutMs, onRanks, p.owner);
      }
      case 'locate':
        return this.local.locate(host, params as number | LocateTarget, timeoutMs);
      case 'counters':
        return this.local.counters(host, params as CountersParams, timeoutMs);
      case 'capture':
        return this.local.capture(host, params as CaptureParams, timeoutMs);
    }
  }
}
