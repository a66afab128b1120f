// Transitional: what matrix/ still imports from here, each now the model's rule (world size,
// peers, communicator keys) or format.ts's text. The other views read the model's SnapshotIndex
// through snapshot-context.ts. Goes away when matrix/ imports these from @mqd/model directly.
import {
  type Communicator,
  commKey,
  type JobSnapshot,
  type MpiLibrary,
  type Operation,
  peerGlobalRank,
  type QueueKind,
  worldSizeOf,
} from '@mqd/model';

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

/**
 * The key that names "the same communicator" in every process (name, size, group), from the
 * analysis in @mqd/model, so filters and the analysis agree on what a communicator is.
 */
export { commKey };

export function sameCommunicator(a: Communicator, b: Communicator): boolean {
  return commKey(a) === commKey(b);
}

// Display texts now in format.ts, re-exported for matrix/ until it imports them from there.
export { commLabel, QUEUE_LABEL } from './format.js';

import { QUEUE_LABEL } from './format.js';

const LIBRARY_NAME: Record<MpiLibrary, string> = {
  openmpi: 'Open MPI',
  mpich: 'MPICH',
  unknown: 'the MPI library',
};

/**
 * A plain sentence for a queue the library cannot show, so nobody reads "unknown" as "empty".
 * The coded reason from the snapshot is shown next to it.
 */
export function explainUnavailable(library: MpiLibrary, kind: QueueKind): string {
  if (library === 'openmpi' && kind === 'unexpected') {
    return "Open MPI's DLL cannot show unexpected messages: this list is unknown, not empty.";
  }
  if (library === 'mpich' && kind === 'sends') {
    return "MPICH's DLL shows sends only when the library was built with --enable-debuginfo (MPIR_Sendq_head): this list is unknown, not empty.";
  }
  return `${LIBRARY_NAME[library]}'s message-queue DLL cannot show ${QUEUE_LABEL[kind]}: this list is unknown, not empty.`;
}

/** Library caveats that change how the numbers read; shown once per snapshot. */
export function libraryCaveats(snapshot: JobSnapshot): string[] {
  const out: string[] = [];
  switch (snapshot.mpi.library) {
    case 'openmpi':
      out.push("Open MPI's DLL cannot show unexpected messages; sends and receives are shown.");
      out.push('Under the ucx PML Open MPI keeps no request lists, so every queue reads empty.');
      break;
    case 'mpich':
      out.push('MPICH reports lengths as element counts, and only non-blocking sends.');
      out.push('MPICH marks every entry pending, even ones that already matched.');
      break;
    case 'unknown':
      break;
  }
  if (snapshot.mpi.dll === null) out.push('No message-queue DLL could be loaded for this job.');
  return out;
}
