// The matrix's vocabulary that the rest of the dashboard speaks too: the URL's cell, zoom and
// value mode (url-state.ts), the queue-kind codes and their units (format.ts, the timeline).
// A leaf: it imports only the model, so shared modules never import the matrix view's files
// (matrix/ re-exports these names for its own code).
import type { LengthUnit, QueueKind } from '@mqd/model';

/** What a matrix cell's shade shows: the number of operations or their total size. */
export type ValueMode = 'count' | 'bytes';

/** Matrix zoom: scale k, and the translation as a fraction of the matrix side (viewport-independent). */
export interface ZoomState {
  readonly k: number;
  readonly x: number;
  readonly y: number;
}

/** Sender or receiver index of an operation whose peer is MPI_ANY_SOURCE or unknown (EdgeColumns.peerUnknown tells which). */
export const ANY_PEER = -1;

/** A rectangle of the matrix: rows [row, row+size) x cols [col, col+size); ANY_PEER = the wildcard strip. */
export interface CellRange {
  readonly row: number;
  readonly col: number;
  readonly size: number;
}

/** Queue kinds as small integers, for typed arrays. */
export const KIND_SENDS = 0;
export const KIND_RECEIVES = 1;
export const KIND_UNEXPECTED = 2;
export const KIND_COUNT = 3;
export const KIND_INDEX: Record<QueueKind, number> = {
  sends: KIND_SENDS,
  receives: KIND_RECEIVES,
  unexpected: KIND_UNEXPECTED,
};
export const KIND_OF_INDEX: readonly QueueKind[] = ['sends', 'receives', 'unexpected'];

/** The unit a queue kind's sizes are in: one length unit, `mixed` across ranks, null when none is known. */
export type KindUnit = LengthUnit | 'mixed' | null;
