// The overview worker's thread (overviews.ts starts it): a stored snapshot's gzip in, its
// overview's gzip out (@mqd/model's buildOverview and encodeOverview). The explanation of a
// 100,000-rank snapshot takes seconds of CPU; here it never stalls the aggregator's event loop.
import { parentPort } from 'node:worker_threads';
import { gunzipSync, gzipSync } from 'node:zlib';
import { buildOverview, encodeOverview, type JobSnapshot } from '@mqd/model';

/** A request: one stored snapshot's gzip. */
export interface OverviewRequest {
  readonly id: number;
  readonly data: Uint8Array;
  readonly gzipLevel: number;
}
/** Its answer: the overview's gzip, or why there is none. */
export type OverviewReply =
  | { readonly id: number; readonly ok: true; readonly body: Uint8Array; readonly ms: number }
  | { readonly id: number; readonly ok: false; readonly error: string };

parentPort?.on('message', (m: OverviewRequest) => {
  const t0 = performance.now();
  try {
    // What the store holds was validated when it was stored (validateSnapshot, fanout.ts).
    const snapshot = JSON.parse(gunzipSync(m.data).toString('utf8')) as JobSnapshot;
    const body = gzipSync(encodeOverview(buildOverview(snapshot)), { level: m.gzipLevel });
    const reply: OverviewReply = { id: m.id, ok: true, body, ms: performance.now() - t0 };
    parentPort?.postMessage(reply, [body.buffer as ArrayBuffer]);
  } catch (e) {
    const reply: OverviewReply = { id: m.id, ok: false, error: e instanceof Error ? e.message : String(e) };
    parentPort?.postMessage(reply);
  }
});
