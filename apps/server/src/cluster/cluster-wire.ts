// The wire between the instances of one cluster (ClusterHub, cluster-hub.ts): its events, its
// messages and the checks a receiver makes of what it is given.
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
import { checkRank, type DiscoveredJob, type RankSnapshot, type Result } from '@mqd/model';
import type { AgentHub, AgentInfo } from '../hub/hub.js';
import { decodeFolds, type FoldedRanks, ranksOfText } from '../hub/rank-fold.js';
import type { DiscoveryScanReport } from '../protocol/agent-protocol.js';
import type { RankTarget, SeenStarter } from '../shared/seams.js';

/** Whose rights a snapshot reads with, and how (AgentHub.snapshot's last argument). */
export type SnapshotOwner = NonNullable<Parameters<AgentHub['snapshot']>[4]>;

/** The namespace of the instances' own traffic; a client that tries to join it is refused. */
export const CLUSTER_NAMESPACE = '/cluster';

export const EV_STATE = 'mqd:state';
export const EV_CALL = 'mqd:call';
export const EV_RANKS = 'mqd:ranks';
export const EV_REPLY = 'mqd:reply';
export const EV_FOLDED = 'mqd:folded';
/** Logins changed on one instance (logout, revocation, a user's rights): every /ui socket is rechecked. */
export const EV_LOGINS = 'mqd:logins';

/** What one instance tells the others about its agents. */
export interface InstanceState {
  readonly instance: string;
  readonly agents: readonly AgentInfo[];
  readonly starters: readonly { host: string; starter: SeenStarter }[];
  readonly discovered: readonly { host: string; job: DiscoveredJob; at: number }[];
  /** Whether each agent's report is complete (AgentHub.discoveryScans); absent: none is. */
  readonly discoveryScans?: readonly DiscoveryScanReport[];
}

export const CALL_METHODS = ['snapshot', 'locate', 'counters', 'capture'] as const;
export type CallMethod = (typeof CALL_METHODS)[number];

export interface CallMessage {
  readonly id: string;
  readonly from: string;
  readonly to: string;
  readonly host: string;
  readonly method: CallMethod;
  readonly timeoutMs: number;
  readonly params: unknown;
}

export interface RanksMessage {
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
export interface FoldedBatchMessage {
  readonly from: string;
  readonly to: string;
  readonly items: readonly (
    | { readonly chunk: FoldedWire; readonly id: string }
    | { readonly reply: ReplyMessage }
  )[];
}

/** A folded chunk on the wire (FoldedRanks, its part's fields flat). */
export interface FoldedWire {
  /** The chunk's folds, encoded (rank-fold.ts encodeFolds). */
  readonly folds: Uint8Array;
  readonly deflated: Uint8Array;
  readonly crc: number;
  readonly length: number;
}

/** A snapshot call's params between instances. */
export interface SnapshotCallParams {
  readonly ranks: RankTarget[];
  readonly owner: SnapshotOwner;
  /** Fold the chunks, deflating at this level (FoldRequest.level); absent: send them as they are. */
  readonly foldLevel?: number;
}

export interface ReplyMessage {
  readonly id: string;
  readonly from: string;
  readonly to: string;
  readonly result: Result<unknown>;
  /** A snapshot's rank chunks sent before this reply (see the header). */
  readonly chunks?: number;
}

/** A folded chunk from another instance, or null when it is not one. */
export function foldedOf(w: FoldedWire): FoldedRanks | null {
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
export function ranksOf(m: RanksMessage): { ranks: RankSnapshot[]; text?: Buffer } | null {
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

export function allRanks(v: unknown): v is RankSnapshot[] {
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
export function isInstanceState(v: unknown): v is InstanceState {
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
