// Messages between the main thread and the pyramid worker; replies carry the request id.
import type { CommSummary, EdgeColumns, MatrixFilter } from './edges.js';
import type { Pyramid } from './pyramid.js';

export type WorkerRequest =
  | { readonly type: 'edges'; readonly columns: EdgeColumns; readonly comms: readonly CommSummary[] }
  | { readonly type: 'build'; readonly id: number; readonly filter: MatrixFilter };

export type WorkerReply =
  | {
      readonly type: 'pyramid';
      readonly id: number;
      readonly pyramid: Pyramid;
      readonly millis: number;
      /** A coarse pyramid drawn first; the whole one follows with the same id. */
      readonly partial: boolean;
    }
  | { readonly type: 'error'; readonly id: number; readonly message: string };
