// Main-thread side of the pyramid worker. One client per edge table: the columns are copied
// to the worker once, then each filter change costs one message. When workers are not
// available the pyramid is built in place (same function, same result).
import { columnBuffers, compileFilter, copyColumns, type EdgeTable, type MatrixFilter } from './edges.js';
import { buildPyramid, type Pyramid } from './pyramid.js';
import type { WorkerReply, WorkerRequest } from './pyramid-protocol.js';

export interface PyramidBuild {
  readonly pyramid: Pyramid;
  /** Time spent aggregating (in the worker when there is one). */
  readonly millis: number;
}

export interface PyramidClient {
  /**
   * Resolves with the newest build; a build superseded by a later call rejects with AbortError.
   * A large world's coarse levels come first, to `onCoarse` (buildCoarsePyramid).
   */
  build(filter: MatrixFilter, onCoarse?: (b: PyramidBuild) => void): Promise<PyramidBuild>;
  dispose(): void;
}

function newWorker(): Worker {
  return new Worker(new URL('./pyramid-worker.ts', import.meta.url), { type: 'module' });
}

/**
 * One worker started when this module loads, so its script is fetched and compiled while the
 * page waits for its data: the first matrix takes it (later ones start their own).
 */
let spare: Worker | null = null;
try {
  spare = typeof Worker === 'undefined' ? null : newWorker();
} catch {
  spare = null; // A CSP that forbids workers: createPyramidClient says so when asked.
}

export function createPyramidClient(table: EdgeTable): PyramidClient {
  if (typeof Worker === 'undefined') return inlineClient(table);
  let worker: Worker;
  try {
    worker = spare ?? newWorker();
    spare = null;
  } catch (e: unknown) {
    // A CSP that forbids workers: still correct, only slower.
    console.warn('MQD: matrix worker unavailable, aggregating on the main thread', e);
    return inlineClient(table);
  }
  const columns = copyColumns(table);
  const hello: WorkerRequest = { type: 'edges', columns, comms: table.comms };
  worker.postMessage(hello, columnBuffers(columns));
  let nextId = 1;
  const pending = new Map<
    number,
    { resolve: (b: PyramidBuild) => void; reject: (e: Error) => void; coarse?: (b: PyramidBuild) => void }
  >();
  worker.onmessage = (e: MessageEvent<WorkerReply>) => {
    const reply = e.data;
    const waiter = pending.get(reply.id);
    if (!waiter) return;
    if (reply.type === 'pyramid' && reply.partial) {
      waiter.coarse?.({ pyramid: reply.pyramid, millis: reply.millis });
      return;
    }
    pending.delete(reply.id);
    if (reply.type === 'pyramid') waiter.resolve({ pyramid: reply.pyramid, millis: reply.millis });
    else waiter.reject(new Error(`MQD matrix worker: ${reply.message}`));
  };
  worker.onerror = (e) => {
    const error = new Error(`MQD matrix worker failed: ${e.message}`);
    for (const w of pending.values()) w.reject(error);
    pending.clear();
  };
  return {
    build(filter, onCoarse) {
      // Only the newest filter matters: older requests are abandoned (their replies ignored).
      for (const w of pending.values()) w.reject(new DOMException('superseded', 'AbortError'));
      pending.clear();
      const id = nextId++;
      const request: WorkerRequest = { type: 'build', id, filter };
      return new Promise<PyramidBuild>((resolve, reject) => {
        pending.set(id, { resolve, reject, ...(onCoarse ? { coarse: onCoarse } : {}) });
        worker.postMessage(request);
      });
    },
    dispose() {
      for (const w of pending.values()) w.reject(new DOMException('disposed', 'AbortError'));
      pending.clear();
      worker.terminate();
    },
  };
}

function inlineClient(table: EdgeTable): PyramidClient {
  return {
    build(filter) {
      const started = performance.now();
      const pyramid = buildPyramid(table, compileFilter(filter, table.comms));
      return Promise.resolve({ pyramid, millis: performance.now() - started });
    },
    dispose() {},
  };
}

export function isAbort(e: unknown): boolean {
  return e instanceof DOMException && e.name === 'AbortError';
}
