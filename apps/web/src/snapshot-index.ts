// Lookups over one JobSnapshot that several views share: where a rank sits in `ranks`, which
// world rank an operation's peer is, and how communicators are recognised across processes.
// Pure (no DOM), so the unit tests and the Web Worker can use it.
import {
  type Communicator,
  commKey,
  type JobSnapshot,
  type MpiLibrary,
  type Operation,
  peerGlobalRank,
  type QueueKind,
} from '@mqd/model';

/** Position of each world rank in `snapshot.ranks` (ranks are sorted but may have gaps). */
export interface RankIndex {
  /** 1 + the largest world rank seen as a process or as a peer: the matrix side. */
  readonly worldSize: number;
  positionOf(rank: number): number | undefined;
}

export function indexRanks(snapshot: JobSnapshot): RankIndex {
  const pos = new Map<number, number>();
  let maxRank = -1;
  snapshot.ranks.forEach((r, i) => {
    pos.set(r.rank, i);
    if (r.rank > maxRank) maxRank = r.rank;
    for (const c of r.communicators) {
      // A peer outside the listed processes (an agent that never reported) still gets a column.
      if (c.group) for (const g of c.group) if (g > maxRank) maxRank = g;
      for (const q of QUEUES) {
        for (const op of c[q] ?? []) {
          const g = op.peer.global;
          if (g !== null && g > maxRank) maxRank = g;
        }
      }
    }
  });
  return { worldSize: maxRank + 1, positionOf: (rank) => pos.get(rank) };
}

const QUEUES = ['sends', 'receives', 'unexpected'] as const satisfies readonly QueueKind[];

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
