// One pass over a snapshot that every analysis shares: rank positions, communicators
// flattened with their cross-process keys, and peer resolution to rank positions. Positions
// ("idx") index `snap.ranks`; ranks are sorted, so idx order is world-rank order.
//
// The one index of a snapshot: the analysis and the views (matrix, timeline, order, rank view)
// all take positions, the world size and peers from it, so they cannot disagree on a peer.
import {
  isWildcardPeer,
  isWorld,
  PEER_ANY,
  PEER_UNKNOWN,
  peerGlobalRank,
  worldSizeOf,
} from '../mpi/world.js';
import {
  type Communicator,
  type JobSnapshot,
  type Operation,
  type Peer,
  QUEUE_KINDS,
  type QueueKind,
} from '../snapshot-spec.js';
import { commKey, isInternalComm, type OpRef } from './comm.js';

export const QUEUE_CODE: Readonly<Record<QueueKind, number>> = { sends: 0, receives: 1, unexpected: 2 };
export const QUEUE_OF_CODE: readonly QueueKind[] = QUEUE_KINDS;

export interface CommEntry {
  readonly rankIdx: number;
  readonly rank: number;
  readonly comm: Communicator;
  readonly key: string;
  readonly keyId: number;
  /** The library's own communicator (collective copies): its traffic is never user p2p. */
  readonly internal: boolean;
}

export class SnapshotIndex {
  /** Processes in the snapshot (positions). */
  readonly n: number;
  /**
   * The job's world size (mpi/world.ts worldSizeOf): at least n, more when the snapshot holds
   * some of the ranks. World ranks 0 .. worldSize-1 are the matrix's rows and columns.
   */
  readonly worldSize: number;
  /** World rank of each position. */
  readonly rankOf: Int32Array;
  /** 1 when the rank's queues were read (state ok). */
  readonly ok: Uint8Array;
  /** comms[commStart[i] .. commStart[i+1]) are rank position i's communicators, in listed order. */
  readonly commStart: Int32Array;
  readonly comms: CommEntry[] = [];
  readonly keys: string[] = [];
  private readonly keyIds = new Map<string, number>();
  private readonly bySize = new Map<string, Map<number, number>>();
  private readonly byMember = new Map<string, Map<number, number>>();
  private readonly dense: Int32Array | null;
  private readonly sparse: Map<number, number> | null;

  constructor(readonly snap: JobSnapshot) {
    const n = snap.ranks.length;
    this.n = n;
    this.worldSize = worldSizeOf(snap);
    this.rankOf = new Int32Array(n);
    this.ok = new Uint8Array(n);
    this.commStart = new Int32Array(n + 1);
    let maxRank = -1;
    for (const r of snap.ranks) maxRank = Math.max(maxRank, r.rank);
    // A dense table when ranks are (nearly) contiguous, which is the normal case.
    const denseOk = maxRank < 4 * n + 1024;
    this.dense = denseOk ? new Int32Array(maxRank + 1).fill(-1) : null;
    this.sparse = denseOk ? null : new Map();
    for (let i = 0; i < n; i++) {
      const r = snap.ranks[i];
      if (r === undefined) continue;
      this.rankOf[i] = r.rank;
      if (this.dense) this.dense[r.rank] = i;
      else this.sparse?.set(r.rank, i);
      this.ok[i] = r.state.kind === 'ok' ? 1 : 0;
      this.commStart[i] = this.comms.length;
      for (const c of r.communicators) {
        const keyId = this.keyIdFor(c);
        const key = this.keys[keyId] ?? '';
        this.comms.push({ rankIdx: i, rank: r.rank, comm: c, key, keyId, internal: isInternalComm(c) });
      }
    }
    this.commStart[n] = this.comms.length;
  }

  /**
   * The same commKey for the same communicator on every rank, without building the key text
   * again for each of 16,384 ranks when it depends only on name and size (world, no group) or
   * on a one-member group (MPI_COMM_SELF): those are looked up by name, then by number.
   */
  private keyIdFor(c: Communicator): number {
    const world = isWorld(c);
    const simple = world || c.group === null;
    const single = !simple && c.group?.length === 1;
    if (!simple && !single) return this.intern(commKey(c));
    const cache = simple ? this.bySize : this.byMember;
    // The world's key ignores its name (a renamed world); NUL never starts an MPI name.
    const name = world ? '\u0000world' : c.name;
    let byName = cache.get(name);
    if (byName === undefined) {
      byName = new Map();
      cache.set(name, byName);
    }
    const num = simple ? c.size : (c.group?.[0] ?? -1);
    let id = byName.get(num);
    if (id === undefined) {
      id = this.intern(commKey(c));
      byName.set(num, id);
    }
    return id;
  }

  private intern(key: string): number {
    let keyId = this.keyIds.get(key);
    if (keyId === undefined) {
      keyId = this.keys.length;
      this.keys.push(key);
      this.keyIds.set(key, keyId);
    }
    return keyId;
  }

  /** Position of a world rank, or -1 when that rank is not in the snapshot. */
  idxOf(rank: number): number {
    if (this.dense) return rank >= 0 && rank < this.dense.length ? (this.dense[rank] ?? -1) : -1;
    return this.sparse?.get(rank) ?? -1;
  }

  /** Position of a world rank, or undefined when that rank is not in the snapshot. */
  positionOf(rank: number): number | undefined {
    const i = this.idxOf(rank);
    return i < 0 ? undefined : i;
  }

  keyIdOf(key: string): number {
    return this.keyIds.get(key) ?? -1;
  }

  /**
   * World rank of an operation's peer (0 .. worldSize-1, in the snapshot or not); PEER_ANY for
   * MPI_ANY_SOURCE, PEER_UNKNOWN when the library cannot say or names no rank of the world.
   */
  peerRank(peer: Peer, ce: CommEntry): number {
    if (isWildcardPeer(peer)) return PEER_ANY;
    const g = peerGlobalRank(peer, ce.comm, ce.rank, this.worldSize);
    return g === null || g >= this.worldSize ? PEER_UNKNOWN : g;
  }

  /**
   * Position of an operation's peer; PEER_ANY for a wildcard, PEER_UNKNOWN when unknowable or
   * not a process of this snapshot (peerRank still names it).
   */
  peerIdx(peer: Peer, ce: CommEntry): number {
    const g = this.peerRank(peer, ce);
    return g < 0 ? g : this.idxOf(g);
  }

  /** peerRank for an operation of `comm` as the process at `rankIdx` lists it (a caller without a CommEntry). */
  peerRankIn(peer: Peer, comm: Communicator, rankIdx: number): number {
    if (isWildcardPeer(peer)) return PEER_ANY;
    const g = peerGlobalRank(peer, comm, this.rankOf[rankIdx] ?? -1, this.worldSize);
    return g === null || g >= this.worldSize ? PEER_UNKNOWN : g;
  }

  /** The rank position's communicator with this key, if it lists one. */
  findComm(idx: number, keyId: number): CommEntry | undefined {
    const end = this.commStart[idx + 1] ?? 0;
    for (let k = this.commStart[idx] ?? 0; k < end; k++) {
      const ce = this.comms[k];
      if (ce && ce.keyId === keyId) return ce;
    }
    return undefined;
  }

  opRef(ce: CommEntry, queue: QueueKind, index: number): OpRef {
    return { rank: ce.rank, commKey: ce.key, commName: ce.comm.name, queue, index };
  }

  op(ce: CommEntry, queue: QueueKind, index: number): Operation | undefined {
    return ce.comm[queue]?.[index];
  }
}
