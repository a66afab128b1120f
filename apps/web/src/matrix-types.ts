// The matrix's vocabulary that the rest of the dashboard speaks too: the URL's cell, zoom and
// value mode (url-state.ts), the queue-kind codes and their units (format.ts, the timeline).
// A leaf: it imports only the model, so shared modules never import the matrix view's files
// (matrix/ re-exports these names for its own code).
// The queue-kind codes, ANY_PEER and KindUnit are the model's edge table's (the server builds the
// same table for a snapshot's overview): re-exported from its worker-light leaf.
export {
  ANY_PEER,
  KIND_COUNT,
  KIND_INDEX,
  KIND_OF_INDEX,
  KIND_RECEIVES,
  KIND_SENDS,
  KIND_UNEXPECTED,
  type KindUnit,
} from '@mqd/model/edge-table';

/** What a matrix cell's shade shows: the number of operations or their total size. */
export type ValueMode = 'count' | 'bytes';

/** Matrix zoom: scale k, and the translation as a fraction of the matrix side (viewport-independent). */
export interface ZoomState {
  readonly k: number;
  readonly x: number;
  readonly y: number;
}

/** A rectangle of the matrix: rows [row, row+size) x cols [col, col+size); ANY_PEER = the wildcard strip. */
export interface CellRange {
  readonly row: number;
  readonly col: number;
  readonly size: number;
}
