// Web Worker: builds the aggregation pyramid off the main thread, so filtering a 16,384-rank
// matrix never blocks pan, zoom or typing. The edge columns arrive once per snapshot; each
// request then names only a filter. Results go back as transferred buffers (no copy).
import { type CommSummary, compileFilter, type EdgeColumns } from './edges.js';
import { buildPyramid, pyramidBuffers } from './pyramid.js';
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
      const pyramid = buildPyramid(table, compileFilter(msg.filter, comms));
      scope.postMessage(
        { type: 'pyramid', id: msg.id, pyramid, millis: performance.now() - started },
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
