// A cycle of ranks that each wait in MPI_Send: standard-mode sends the library could not buffer.
// A send completes locally only while its message fits the eager protocol; above the limit it
// waits for the matching receive, and ranks that all send first never post one. The size is
// what turns correct-looking code into the deadlock, so the sentence says it and the limit.

import { callKind } from '../mpi/calls.js';
import { foldMpiName, userFrame } from '../mpi/frames.js';
import { bytesText, EAGER_LIMITS, eagerLimitText, LIBRARY_FACTS } from '../mpi/library.js';
import { jobText, ranksPhrase } from '../text.js';
import { compressRanks } from './ranges.js';
import type { SnapshotIndex } from './snapshot-index.js';
import type { DeadlockCycle } from './wait-types.js';

export interface SendCycle {
  /** The cycle's ranks, as ranges. */
  readonly ranks: string;
  /** The largest message of the cycle's sends in bytes; null when no size could be read. */
  readonly bytes: number | null;
  /** Element counts where only the count was readable (no type size, no byte length). */
  readonly count: number | null;
  /** "Ranks 0 and 1 each wait in MPI_Send of 1 MiB to the other, at x.c:12; ...". */
  readonly text: string;
}

/** The rank's send size: the queue entry's bytes, or count × type size from the call. */
function sendSize(
  ix: SnapshotIndex,
  rank: number,
  to: number,
): { bytes: number | null; count: number | null } {
  const r = ix.snap.ranks[ix.idxOf(rank)];
  if (r === undefined) return { bytes: null, count: null };
  const a = r.mpiCall?.args ?? null;
  const typeSize = a?.typeSize ?? null;
  const count = a?.count ?? null;
  if (count !== null && typeSize !== null) return { bytes: count * typeSize, count };
  // Open MPI lists a blocking send that waits for its receive, with its length in bytes.
  if (LIBRARY_FACTS[ix.snap.mpi.library].listsBlockedSendBytes) {
    for (const c of r.communicators) {
      for (const op of c.sends ?? []) {
        if (op.status === 'pending' && op.peer.global === to) return { bytes: op.length, count };
      }
    }
  }
  return { bytes: null, count };
}

function placeOf(ix: SnapshotIndex, rank: number): string | null {
  const r = ix.snap.ranks[ix.idxOf(rank)];
  const u = r === undefined ? null : userFrame(r);
  if (u === null || u.frame.file === null) return null;
  const file = u.frame.file.slice(u.frame.file.lastIndexOf('/') + 1);
  return `${jobText(file)}${u.frame.line === null ? '' : `:${u.frame.line}`}`;
}

/**
 * The send-send cycle sentence, when every rank of the cycle is inside MPI_Send (standard
 * mode, whose completion depends on the library's buffering); null otherwise. A synchronous
 * send (MPI_Ssend) waits for its receive at any size and is told by the cycle alone.
 */
export function sendCycle(ix: SnapshotIndex, c: DeadlockCycle): SendCycle | null {
  if (c.ranks.length < 2) return null;
  const sizes: number[] = [];
  const counts: number[] = [];
  const places = new Set<string>();
  for (const e of c.edges) {
    const call = ix.snap.ranks[ix.idxOf(e.from)]?.mpiCall ?? null;
    if (call === null || callKind(call.function) !== 'send' || foldMpiName(call.function) !== 'MPI_Send')
      return null;
    const s = sendSize(ix, e.from, e.to);
    if (s.bytes !== null) sizes.push(s.bytes);
    else if (s.count !== null) counts.push(s.count);
    const p = placeOf(ix, e.from);
    if (p !== null) places.add(p);
  }
  const limits = EAGER_LIMITS[ix.snap.mpi.library];
  const bytes = sizes.length > 0 ? Math.max(...sizes) : null;
  const count = bytes === null && counts.length > 0 ? Math.max(...counts) : null;
  const even = sizes.length === c.edges.length && sizes.every((s) => s === sizes[0]);
  const size =
    bytes !== null
      ? ` of ${even ? '' : 'up to '}${bytesText(bytes)}`
      : count !== null
        ? ` of ${count} elements (the type size could not be read)`
        : '';
  const two = c.ranks.length === 2;
  const sorted = [...c.ranks].sort((a, b) => a - b);
  const ranks = compressRanks(sorted);
  const who = two ? `Ranks ${sorted[0]} and ${sorted[1]}` : capitalized(ranksPhrase(ranks));
  const whom = two ? 'the other' : 'the next rank of the cycle';
  const at = places.size === 0 ? '' : `, at ${[...places].join(' and ')}`;
  const smallest = limits.length === 0 ? null : Math.min(...limits.map((l) => l.bytes));
  const why =
    bytes !== null && smallest !== null && bytes <= smallest
      ? `; ${bytesText(bytes)} is within the library's eager limit (${eagerLimitText(ix.snap.mpi.library)}), yet no send completed: its buffers may be exhausted, and each send now needs a matching receive`
      : `; messages above the library's eager limit (${eagerLimitText(ix.snap.mpi.library)}) need a matching receive, and every rank of the cycle sends before it receives`;
  return {
    ranks,
    bytes,
    count,
    text: `${who} each wait in MPI_Send${size} to ${whom}${at}${why}: post the receives first (MPI_Irecv) or pair them (MPI_Sendrecv).`,
  };
}

function capitalized(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
