// Web Worker: builds the aggregation pyramid off the main thread, so filtering a 16,384-rank
// matrix never blocks pan, zoom or typing. The edge columns arrive once per snapshot; each
// request then names only a filter. Results go back as transferred buffers (no copy).
import { type CommSummary, compileFilter, type EdgeColumns } from './edges.js';
import { buildCoarsePyramid, buildPyramid, pyramidBuffers } from './pyramid.js';
import type { WorkerReply, WorkerRequest } from './pyramid-protocol.js';

// The DOM lib types `self` as a Window; this file runs as a dedicated worker, whose scope has
// the two members used here.
interface WorkerScope {
  onmessage: ((e: MessageEvent<WorkerRequest>) => void) | null;
  postMessage(message: WorkerReply, transfer: Transferable[]): void;
}
const scope = globalThis as unknown as WorkerScope;

let table: EdgeColumns | null = null;
let comms: readonly CommSummary[] = [];

scope.onmessage = (e) => {
  const msg = e.data;
  switch (msg.type) {
    case 'edges':
      table = msg.columns;
      comms = msg.comms;
      return;
    case 'build': {
      if (!table) {
        scope.postMessage({ type: 'error', id: msg.id, message: 'no edge table was sent before build' }, []);
        return;
      }
      const started = performance.now();
      const filter = compileFilter(msg.filter, comms);
      // A large world: its coarse levels first (what the whole matrix shows), then the rest.
      const coarse = buildCoarsePyramid(table, filter);
      if (coarse !== null)
        scope.postMessage(
          {
            type: 'pyramid',
            id: msg.id,
            pyramid: coarse,
            millis: performance.now() - started,
            partial: true,
          },
          pyramidBuffers(coarse),
        );
      const pyramid = buildPyramid(table, filter);
      scope.postMessage(
        { type: 'pyramid', id: msg.id, pyramid, millis: performance.now() - started, partial: false },
        pyramidBuffers(pyramid),
      );
      return;
    }
    default: {
      // A message from another thread is data at an edge: answer it rather than throw in here.
      const unknown: never = msg;
      scope.postMessage({ type: 'error', id: -1, message: `unknown request ${JSON.stringify(unknown)}` }, []);
    }
  }
};
