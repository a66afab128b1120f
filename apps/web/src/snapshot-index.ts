// Transitional: what matrix/ still imports from here, each now the model's rule (world size,
// peers, communicator keys) or format.ts's text. The other views read the model's SnapshotIndex
// through snapshot-context.ts. Goes away when matrix/ imports these from @mqd/model directly.
import { type Communicator, type JobSnapshot, type Operation, peerGlobalRank, worldSizeOf } from '@mqd/model';

/** Position of each world rank in `snapshot.ranks` (ranks are sorted but may have gaps). */
export interface RankIndex {
  /** The job's world size, the model's (worldSizeOf): the matrix side. */
  readonly worldSize: number;
  positionOf(rank: number): number | undefined;
}

/**
 * The world size and rank positions, by the model's rules (mpi/world.ts worldSizeOf), so the
 * matrix and the analysis agree on the world. Views with a snapshot's context read its
 * SnapshotIndex (snapshot-context.ts) instead; this stays for the matrix's edge builder.
 */
export function indexRanks(snapshot: JobSnapshot): RankIndex {
  const pos = new Map<number, number>();
  snapshot.ranks.forEach((r, i) => {
    pos.set(r.rank, i);
  });
  return { worldSize: worldSizeOf(snapshot), positionOf: (rank) => pos.get(rank) };
}

/**
 * The world rank of an operation's peer, or null for MPI_ANY_SOURCE / unknown. The analysis
 * in @mqd/model owns the rules (library's global rank, then the group, then self, then
 * world-like communicators); this only adapts the arguments.
 */
export function resolveGlobalPeer(
  op: Operation,
  comm: Communicator,
  selfRank: number,
  worldSize: number,
): number | null {
  return peerGlobalRank(op.peer, comm, selfRank, worldSize);
}

// Re-exported for matrix/ until it imports them from their homes: the model (communicator keys,
// queue names) and format.ts (a communicator's label).
export { commKey, QUEUE_LABEL } from '@mqd/model';
export { commLabel } from './format.js';
