// Several aggregators behind one address: an agent is connected to one instance, but
// a snapshot, a locate or a watch sample may be asked of any. ClusterHub is what the rest of an
// instance uses instead of its own AgentHub: the same methods, answered by the local hub when
// the host's agent is connected here, and otherwise forwarded to the instance that has it.
//
// The wire between instances is socket.io's serverSideEmit on a namespace no client may join,
// carried by the cluster adapter (sealed-adapter.ts: PostgreSQL NOTIFY, big payloads in a
// table), so no extra service is needed. Every message is sealed with the cluster secret, and
// names its sender (`from`, a state its `instance`), which the adapter checks against the
// instance that sealed it (clusterMessageSender): so a call's allowRoot and owner uid, a state's
// agents, a reply, come from an instance of this cluster speaking for itself. A receiver still
// checks what it is given: ranks by the snapshot spec's validator, a state's shape, and a
// chunk or reply only from the instance its call went to. Every message is a broadcast that
// names its addressee; the others ignore it:
//   state  every instance, every stateIntervalMs and at once when an agent comes or goes:
//          its live agents, their starters and discovered jobs. An instance not heard from for
//          3 intervals is gone (its hosts are no longer connected anywhere).
//   call   a request for one host, to the instance holding its agent;
//   ranks  the rank chunks of a forwarded snapshot as they arrive (live progress crosses too).
//          An instance that does not ask for them folded (a read) gets the chunks' text;
//   folded a snapshot to be stored asks for its chunks folded (rank-fold.ts): the holder folds
//          each chunk its agent sent, deflates the chunk's bytes as sent and its folds, and
//          sends them with the replies of those calls, every call of one asker in one batch
//          (up to FOLDED_BATCH_BYTES or FOLDED_BATCH_MS): a fan-out asks for each host on its
//          own, so batches per call held one chunk each, and 500 hosts' messages queued in the
//          adapter's pool for seconds (seen at 100,000 ranks). A chunk is parsed once in the
//          cluster, and a seventh of its bytes cross PostgreSQL. Instances of one cluster run
//          the same MQD version: this wire changes between versions;
//   reply  its one answer (a Result), or a coded error when the holder fails or disappears. A
//          snapshot's reply says how many rank chunks were sent, not the ranks again: NOTIFYs
//          sent through different pool connections may overtake each other, so an asker that
//          has fewer chunks than that waits for the rest (up to LATE_CHUNKS_MS) before it
//          settles. Each rank is passed on once, whatever arrives twice. Sending every rank a
//          second time in the reply doubled what crossed PostgreSQL (at 100,000 ranks).
import { randomUUID } from 'node:crypto';
import {
  checkRank,
  type DiscoveredJob,
  err,
  type MqdError,
  mqdError,
  type RankSnapshot,
  type Result,
} from '@mqd/model';
import type { Namespace } from 'socket.io';
import { deflatePart } from '../hub/gzip-splice.js';
import type { AgentHub, AgentInfo, HubCapture, HubCounters, OnRanks, SnapshotWithFold } from '../hub/hub.js';
import {
  decodeFolds,
  encodeFolds,
  type FoldedRanks,
  type FoldRequest,
  rankFold,
  ranksOfPart,
  ranksOfText,
} from '../hub/rank-fold.js';
import type {
  CaptureParams,
  CountersParams,
  DiscoveryScanReport,
  LocateTarget,
  SnapshotResult,
} from '../protocol/agent-protocol.js';
import type { LocatedJob, RankTarget, SeenStarter } from '../shared/seams.js';

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

/** Whose rights a snapshot reads with, and how (AgentHub.snapshot's last argument). */
type SnapshotOwner = NonNullable<Parameters<AgentHub['snapshot']>[4]>;

/** The namespace of the instances' own traffic; a client that tries to join it is refused. */
export const CLUSTER_NAMESPACE = '/cluster';

const EV_STATE = 'mqd:state';
const EV_CALL = 'mqd:call';
const EV_RANKS = 'mqd:ranks';
const EV_REPLY = 'mqd:reply';
const EV_FOLDED = 'mqd:folded';
/** Agents coming and going within this many ms go out in one state message. */
const PUBLISH_COALESCE_MS = 100;
/** Logins changed on one instance (logout, revocation, a user's rights): every /ui socket is rechecked. */
const EV_LOGINS = 'mqd:logins';

/** What one instance tells the others about its agents. */
export interface InstanceState {
  readonly instance: string;
  readonly agents: readonly AgentInfo[];
  readonly starters: readonly { host: string; starter: SeenStarter }[];
  readonly discovered: readonly { host: string; job: DiscoveredJob; at: number }[];
  /** Whether each agent's report is complete (AgentHub.discoveryScans); absent: none is. */
  readonly discoveryScans?: readonly DiscoveryScanReport[];
}

const CALL_METHODS = ['snapshot', 'locate', 'counters', 'capture'] as const;
type CallMethod = (typeof CALL_METHODS)[number];

interface CallMessage {
  readonly id: string;
  readonly from: string;
  readonly to: string;
  readonly host: string;
  readonly method: CallMethod;
  readonly timeoutMs: number;
  readonly params: unknown;
}

interface RanksMessage {
  readonly id: string;
  /** The holder sending the chunk. */
  readonly from: string;
  readonly to: string;
  readonly ranks?: RankSnapshot[];
  /**
   * Instead of `ranks`: the chunk's ranks as JSON, as its agent sent them and the holder checked
   * them (hub.ts OnRanks). Bytes cross the adapter as they are (msgpack's bin), where objects were
   * encoded twice by the holder and decoded by the asker; the asker stores them as they are.
   */
  readonly text?: Uint8Array;
}

/**
 * Folded chunks and replies of the calls one asker made to this holder with `foldLevel`, in the
 * order the holder queued them (a call's chunks before its reply); a folded chunk counts as one of
 * the chunks its call's reply counts.
 */
interface FoldedBatchMessage {
  readonly from: string;
  readonly to: string;
  readonly items: readonly (
    | { readonly chunk: FoldedWire; readonly id: string }
    | { readonly reply: ReplyMessage }
  )[];
}

/** A folded chunk on the wire (FoldedRanks, its part's fields flat). */
interface FoldedWire {
  /** The chunk's folds, encoded (rank-fold.ts encodeFolds). */
  readonly folds: Uint8Array;
  readonly deflated: Uint8Array;
  readonly crc: number;
  readonly length: number;
}

/** A snapshot call's params between instances. */
interface SnapshotCallParams {
  readonly ranks: RankTarget[];
  readonly owner: SnapshotOwner;
  /** Fold the chunks, deflating at this level (FoldRequest.level); absent: send them as they are. */
  readonly foldLevel?: number;
}

interface ReplyMessage {
  readonly id: string;
  readonly from: string;
  readonly to: string;
  readonly result: Result<unknown>;
  /** A snapshot's rank chunks sent before this reply (see the header). */
  readonly chunks?: number;
}

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

/** Ranks passed on from another instance, with their text when it crossed as sent. */
type PassRanks = (ranks: readonly RankSnapshot[], text?: Buffer) => void;

/** A holder sends its folded chunks when this many of their bytes wait (text and folds, deflated)... */
const FOLDED_BATCH_BYTES = 256 * 1024;
/** ...or this long after the first one waits: live progress still moves several times a second. */
const FOLDED_BATCH_MS = 25;

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

/**
 * What a holder sends one asker for its snapshots to be stored: each chunk is folded at once (its
 * ranks can go) and deflated in the thread pool, then queued; a call's reply is queued once its
 * chunks are. What waits is sent in one message when FOLDED_BATCH_BYTES wait or FOLDED_BATCH_MS
 * after the first: the calls of one fan-out (one per host) share the batches.
 */
class FoldedOutbox {
  private items: FoldedBatchMessage['items'][number][] = [];
  private bytes = 0;
  private timer: NodeJS.Timeout | null = null;
  /** Calls whose reply is not queued yet (ClusterHub.servingSnapshot while any is). */
  private calls = 0;

  get active(): number {
    return this.calls;
  }

  constructor(
    private readonly send: (items: FoldedBatchMessage['items']) => void,
    private readonly idle: () => void,
  ) {}

  /** Call `id`'s chunks: `sent.chunks` counts those queued. */
  call(
    id: string,
    level: number,
    sent: { chunks: number },
  ): { add(ranks: readonly RankSnapshot[], text: Buffer): void; done(): Promise<void> } {
    this.calls++;
    const deflating = new Set<Promise<void>>();
    let failure: unknown = null;
    return {
      add: (ranks, text) => {
        const folds = encodeFolds(ranks.map(rankFold), level);
        const p = Promise.all([folds, deflatePart(text, level)]).then(
          ([f, part]) => {
            sent.chunks++;
            this.queue(
              { id, chunk: { folds: f, deflated: part.deflated, crc: part.crc, length: part.length } },
              f.length + part.deflated.length,
            );
          },
          (e: unknown) => {
            failure ??= e;
          },
        );
        deflating.add(p);
        void p.finally(() => deflating.delete(p));
      },
      /** Waits for every chunk added to be queued; throws when one could not be. */
      done: async () => {
        while (deflating.size > 0) await Promise.all(deflating);
        if (failure !== null) throw failure;
      },
    };
  }

  /** A call's reply, after its chunks (call().done() was awaited, or the call failed). */
  reply(m: ReplyMessage): void {
    this.calls--;
    this.queue({ reply: m }, 256);
  }

  close(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.items = [];
  }

  private queue(item: FoldedBatchMessage['items'][number], bytes: number): void {
    this.items.push(item);
    this.bytes += bytes;
    if (this.bytes >= FOLDED_BATCH_BYTES) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), FOLDED_BATCH_MS);
  }

  private flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.items.length === 0) return;
    const items = this.items;
    this.items = [];
    this.bytes = 0;
    this.send(items);
    if (this.calls === 0) this.idle();
  }
}

/**
 * onFolded behind the ranks passed on so far (`seen`, shared with passOnce): a folded chunk
 * goes on as it is when none of its ranks was passed yet; otherwise its ranks come back from its
 * bytes and the new ones go the way of unfolded ranks (a retry on another instance after its
 * holder died).
 */
function passFoldedOnce(
  seen: Set<number>,
  pass: PassRanks,
  onFolded: (c: FoldedRanks) => void,
): (c: FoldedRanks) => void {
  return (c) => {
    if (c.folds.some((f) => seen.has(f.rank))) {
      pass(ranksOfPart(c.part));
      return;
    }
    for (const f of c.folds) seen.add(f.rank);
    onFolded(c);
  };
}

/** A folded chunk from another instance, or null when it is not one. */
function foldedOf(w: FoldedWire): FoldedRanks | null {
  if (typeof w !== 'object' || w === null) return null;
  if (!(w.folds instanceof Uint8Array) || !(w.deflated instanceof Uint8Array)) return null;
  if (!Number.isSafeInteger(w.length) || !Number.isSafeInteger(w.crc)) return null;
  const folds = decodeFolds(w.folds);
  if (folds === null) return null;
  const deflated = Buffer.from(w.deflated.buffer, w.deflated.byteOffset, w.deflated.byteLength);
  return { folds, part: { deflated, crc: w.crc, length: w.length } };
}

/**
 * A rank chunk from another instance: its ranks, and their text when it crossed as sent; null
 * when it is not one, or a rank in it is not one by the snapshot spec's validator (the holder
 * checked them as its agent sent them: one that fails here is a bug, and is not stored).
 */
function ranksOf(m: RanksMessage): { ranks: RankSnapshot[]; text?: Buffer } | null {
  if (m.text instanceof Uint8Array) {
    const text = Buffer.from(m.text.buffer, m.text.byteOffset, m.text.byteLength);
    let ranks: unknown;
    try {
      ranks = ranksOfText(text);
    } catch (e) {
      if (e instanceof SyntaxError) return null;
      throw e;
    }
    return allRanks(ranks) ? { ranks, text } : null;
  }
  return allRanks(m.ranks) ? { ranks: m.ranks } : null;
}

function allRanks(v: unknown): v is RankSnapshot[] {
  return Array.isArray(v) && v.every((r) => checkRank(r) === null);
}

/**
 * Which instance a message of the cluster namespace says it is from: a state's `instance`,
 * every other message's `from`; null when it names none (sealed-adapter.ts drops a message
 * whose sender is not the instance that sealed it).
 */
export function clusterMessageSender(packet: unknown): string | null {
  if (!Array.isArray(packet)) return null;
  const [event, m] = packet as [unknown, unknown];
  if (typeof m !== 'object' || m === null) return null;
  const says = event === EV_STATE ? (m as { instance?: unknown }).instance : (m as { from?: unknown }).from;
  return typeof says === 'string' ? says : null;
}

/** A state's shape, checked before its agents are believed (settleConflicts reads them). */
function isInstanceState(v: unknown): v is InstanceState {
  if (typeof v !== 'object' || v === null) return false;
  const s = v as Partial<Record<keyof InstanceState, unknown>>;
  const hosted = (xs: unknown) =>
    Array.isArray(xs) && xs.every((x) => typeof x === 'object' && x !== null && typeof x.host === 'string');
  return (
    typeof s.instance === 'string' &&
    hosted(s.agents) &&
    (s.agents as unknown[]).every((a) => Number.isFinite((a as { connectedAt?: unknown }).connectedAt)) &&
    hosted(s.starters) &&
    hosted(s.discovered) &&
    (s.discoveryScans === undefined || hosted(s.discoveryScans))
  );
}
