// Ranks and peers: how big the job's world is, which world rank an operation's peer is, and the
// two ways a peer can be missing, kept apart: MPI_ANY_SOURCE (the receive takes any sender: a
// wildcard, drawn as its own strip) and unknown (the library could not say, or the rank it
// names cannot be mapped). The analysis's SnapshotIndex and every view resolve peers through
// these rules with the same world size, so a matrix cell and a deadlock edge name one rank.
import { type Communicator, type JobSnapshot, type Peer, QUEUE_KINDS } from '../snapshot-spec.js';

/** A resolved peer: MPI_ANY_SOURCE. */
export const PEER_ANY = -2;
/** A resolved peer: cannot be known, or is not a process of this snapshot (a position lookup). */
export const PEER_UNKNOWN = -1;

/**
 * MPI_COMM_WORLD, by its identity: the reader's `world` flag (the library's world id, the
 * identity group), never the name when the flag is there (a renamed world; a user communicator
 * named "MPI_COMM_WORLD"). Snapshots written before the flag existed: by name.
 */
export function isWorld(c: Communicator): boolean {
  return c.world ?? c.name === 'MPI_COMM_WORLD';
}

/**
 * MPI_COMM_WORLD, or a communicator that spans the job without a group (MPICH's internal world
 * copies). `worldSize` is the job's (worldSizeOf), not the number of ranks a snapshot holds:
 * with a subset of the ranks, a world copy still spans the whole job.
 */
export function isWorldLike(c: Communicator, worldSize: number): boolean {
  return isWorld(c) || (c.group === null && c.size === worldSize);
}

/** MPI_ANY_SOURCE: the library knows neither the local nor the global peer. */
export function isWildcardPeer(peer: Peer): boolean {
  return peer.local === null && peer.global === null;
}

/**
 * World rank of an operation's peer, or null when it cannot be known (or is a wildcard: ask
 * isWildcardPeer first to tell the two apart). Order: the library's global rank; the local rank
 * mapped through the group; the process's own local rank (a self message); local == global on
 * a world-like communicator.
 */
export function peerGlobalRank(
  peer: Peer,
  c: Communicator,
  selfRank: number,
  worldSize: number,
): number | null {
  if (peer.global !== null && peer.global >= 0) return peer.global;
  const l = peer.local;
  // An intercommunicator's peers are ranks of its remote group, never this process.
  if (c.remoteGroup !== undefined) return l === null || l < 0 ? null : (c.remoteGroup?.[l] ?? null);
  if (l === null || l < 0 || l >= c.size) return null;
  if (l === c.localRank) return selfRank;
  if (c.group !== null) return c.group[l] ?? null;
  if (isWorldLike(c, worldSize)) return l;
  return null;
}

const QUEUES = QUEUE_KINDS;

/**
 * The job's world size as one snapshot tells it: MPI_COMM_WORLD's size as its ranks report it
 * (the library's own count), and never less than one more than the largest world rank the
 * snapshot names (a process, a member of a group or remote group, a peer's global rank). So a
 * snapshot of some of the ranks still knows the whole world, and every rank it names has a place.
 */
export function worldSizeOf(snap: Pick<JobSnapshot, 'ranks'>): number {
  let size = 0;
  const seen = (r: number | null) => {
    if (r !== null && r >= size) size = r + 1;
  };
  for (const r of snap.ranks) {
    seen(r.rank);
    for (const c of r.communicators) {
      if (isWorld(c) && c.size > size) size = c.size;
      if (c.group !== null) for (const g of c.group) seen(g);
      if (c.remoteGroup) for (const g of c.remoteGroup) seen(g);
      for (const q of QUEUES) {
        const ops = c[q];
        if (ops === null) continue;
        for (let i = 0; i < ops.length; i++) seen(ops[i]?.peer.global ?? null);
      }
    }
  }
  return size;
}
