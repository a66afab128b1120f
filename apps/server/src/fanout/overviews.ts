// Snapshot overviews: what the dashboard draws first of a stored snapshot (the
// explanation, the matrix's edge table, the header; @mqd/model's edges/overview.ts), computed
// once per snapshot and kept in the store beside it. A request for one not made yet (an older
// snapshot, another instance's still under way, a restart) makes it then. Every
// instance computes the same bytes from the same snapshot: the first stored stays.
//
// A small snapshot's overview (below `inlineBelowRanks`, 2,000 ranks: tens of milliseconds) is
// made on this thread when first asked for. A larger one goes to the worker, and is also made
// ahead of any request once the snapshot is stored: the newest snapshot of each job only, and
// only once no snapshot has been gathered here for 2 s (`busy`; one that starts meanwhile stops
// it, `yieldToSnapshot`, and it is made again afterwards). Made alongside a fan-in on the same
// cores, it cost the next 100,000-rank snapshot 4 s and 800 MB (measured with apps/server/bench/scale-out.bench.ts).
// A request someone waits for is never held back or stopped. The worker is one thread,
// started on first use and kept; requests queue for it one at a
// time (the explanation is CPU-bound: two at once would only share the same cores). A worker
// that dies (its heap limit, a crash) fails the overview it was making with a coded error and
// is started again for the next: the dashboard then loads the whole snapshot instead.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { gunzip, gzip } from 'node:zlib';
import { buildOverview, encodeOverview, type JobSnapshot, MqdException, mqdError } from '@mqd/model';
import type { StorePort } from '../store/store-port.js';
import type { OverviewReply, OverviewRequest } from './overview-worker.js';

export interface OverviewServiceOptions {
  readonly store: StorePort;
  readonly gzipLevel: number;
  /** The worker's heap limit; a snapshot whose overview needs more fails alone. */
  readonly maxHeapMb?: number;
  /** Snapshots of fewer ranks are made on this thread, on demand (default 2,000). */
  readonly inlineBelowRanks?: number;
  /** Whether a large snapshot's overview is made ahead of requests when it is stored (default true). */
  readonly eager?: boolean;
  /**
   * Whether a snapshot is being gathered here now (or read here for another instance to store):
   * overviews made ahead wait until none has been for `aheadQuietMs`. The server gives its own.
   */
  readonly busy?: () => boolean;
  /** How long nothing is gathered before one is made ahead (default 2,000 ms; tests shorten it). */
  readonly aheadQuietMs?: number;
  /** How often a waiting one looks again (default 500 ms). */
  readonly aheadRetryMs?: number;
  readonly log?: { warn(o: object, msg: string): void; info(o: object, msg: string): void };
}

/** An overview made ahead was stopped for a snapshot being gathered (made again later). */
class YieldedError extends Error {
  constructor() {
    super('stopped for a snapshot being gathered');
  }
}

const gunzipAsync = promisify(gunzip);
const gzipAsync = promisify(gzip);

interface Pending {
  readonly id: number;
  /** The snapshot's id. */
  readonly snapshot: string;
  readonly data: Uint8Array;
  readonly resolve: (b: Buffer) => void;
  readonly reject: (e: Error) => void;
}

/**
 * Overviews made ahead start after this long with no snapshot gathered here (looked at this
 * often): back-to-back snapshots are not slowed by overviews started and stopped between them.
 */
const AHEAD_QUIET_MS = 2000;
const AHEAD_RETRY_MS = 500;

/** Starts the worker thread: from the sources (tsx registered in the thread) or the build. */
function startWorker(maxHeapMb: number): Worker {
  const here = fileURLToPath(import.meta.url);
  const resourceLimits = { maxOldGenerationSizeMb: maxHeapMb };
  if (here.endsWith('.js')) return new Worker(join(dirname(here), 'overview-worker.js'), { resourceLimits });
  // From the TypeScript sources (tsx, vitest): the thread registers tsx itself, then imports the
  // entry; `--import` does not reach a worker's entry module on Node 20.
  const tsxDir = dirname(createRequire(import.meta.url).resolve('tsx/package.json'));
  const api = pathToFileURL(join(tsxDir, 'dist', 'esm', 'api', 'index.mjs')).href;
  const entry = pathToFileURL(join(dirname(here), 'overview-worker.ts')).href;
  const code = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(entry)}); })`;
  return new Worker(code, { eval: true, execArgv: ['--conditions=source'], resourceLimits });
}

export class OverviewService {
  private worker: Worker | null = null;
  private readonly queue: Pending[] = [];
  private current: Pending | null = null;
  private nextId = 1;
  private closed = false;
  /** Overviews being made, by snapshot id: a second request waits for the first. */
  private readonly making = new Map<string, Promise<Buffer | null>>();
  /** Overviews to make ahead of requests: the newest stored snapshot of each job. */
  private readonly ahead = new Map<string, { readonly id: string; readonly ranks: number }>();
  private aheadTimer: NodeJS.Timeout | null = null;
  /** Snapshots whose overview someone asked for: never stopped for a snapshot being gathered. */
  private readonly demanded = new Set<string>();
  /** The worker is being stopped because a snapshot started (yieldToSnapshot). */
  private yielding = false;
  private looks = 0;
  /** When a snapshot was last seen being gathered here (performance.now()). */
  private lastBusy = Number.NEGATIVE_INFINITY;

  constructor(private readonly o: OverviewServiceOptions) {}

  private get inlineBelow(): number {
    return this.o.inlineBelowRanks ?? 2000;
  }

  /**
   * The overview of stored snapshot `id` of `ranks` ranks (gzipped), made now if it was not;
   * null when the snapshot is gone.
   */
  async get(id: string, ranks: number): Promise<Buffer | null> {
    const stored = await this.o.store.snapshotOverview(id);
    if (stored !== null) return stored;
    this.demanded.add(id);
    try {
      return await this.make(id, ranks);
    } catch (e) {
      // Joined one made ahead just as a snapshot stopped it: made again, for this request.
      if (e instanceof YieldedError) return await this.make(id, ranks);
      throw e;
    } finally {
      this.demanded.delete(id);
    }
  }

  /**
   * A snapshot starts being gathered here: an overview being made ahead of requests stops (the
   * worker ends; it is made again once nothing is gathered). One someone waits for goes on.
   */
  yieldToSnapshot(): void {
    this.lastBusy = performance.now();
    const c = this.current;
    if (c === null || this.demanded.has(c.snapshot) || this.worker === null) return;
    this.yielding = true;
    void this.worker.terminate();
  }

  /**
   * Snapshot `id` of job `jobId`, of `ranks` ranks, was just stored: a large one's overview is
   * made ahead of requests once no snapshot is being gathered (replacing the job's older one
   * still waiting; its failure is logged, not thrown); a small one's waits until someone asks.
   */
  prepare(id: string, ranks: number, jobId: string): void {
    if (this.closed || ranks < this.inlineBelow || this.o.eager === false) return;
    this.ahead.set(jobId, { id, ranks });
    this.startAhead();
  }

  private startAhead(): void {
    if (this.closed || this.aheadTimer !== null) return;
    const now = performance.now();
    this.looks++;
    if (this.o.busy?.() === true) this.lastBusy = now;
    if (now - this.lastBusy < (this.o.aheadQuietMs ?? AHEAD_QUIET_MS) || this.current !== null) {
      this.aheadTimer = setTimeout(() => {
        this.aheadTimer = null;
        this.startAhead();
      }, this.o.aheadRetryMs ?? AHEAD_RETRY_MS);
      this.aheadTimer.unref();
      return;
    }
    const [jobId, next] = this.ahead.entries().next().value ?? [];
    if (jobId === undefined || next === undefined) return;
    this.ahead.delete(jobId);
    this.make(next.id, next.ranks)
      .catch((e: unknown) => {
        if (e instanceof YieldedError) {
          // Stopped for a snapshot: made again later, unless the job has a newer one waiting.
          if (!this.ahead.has(jobId)) this.ahead.set(jobId, next);
          return;
        }
        this.o.log?.warn({ err: e, snapshotId: next.id }, 'the snapshot overview could not be made');
      })
      .finally(() => this.startAhead());
  }

  private make(id: string, ranks: number): Promise<Buffer | null> {
    const running = this.making.get(id);
    if (running !== undefined) return running;
    const p = (async () => {
      // Made meanwhile (a request, another instance): nothing to do.
      const stored = await this.o.store.snapshotOverview(id);
      if (stored !== null) return stored;
      const data = await this.o.store.snapshotData(id);
      if (data === null) return null;
      const body = ranks < this.inlineBelow ? await this.inline(data) : await this.run(id, data);
      // Retention may have removed the snapshot meanwhile: the overview is then not kept.
      await this.o.store.putSnapshotOverview(id, body);
      return body;
    })().finally(() => this.making.delete(id));
    this.making.set(id, p);
    return p;
  }

  /** A small snapshot's overview, on this thread. */
  private async inline(data: Buffer): Promise<Buffer> {
    const snapshot = JSON.parse((await gunzipAsync(data)).toString('utf8')) as JobSnapshot;
    return gzipAsync(encodeOverview(buildOverview(snapshot)), { level: this.o.gzipLevel });
  }

  private run(snapshot: string, data: Buffer): Promise<Buffer> {
    if (this.closed) return Promise.reject(this.closedError());
    return new Promise((resolve, reject) => {
      this.queue.push({ id: this.nextId++, snapshot, data, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    if (this.current !== null || this.closed) return;
    const next = this.queue.shift();
    if (next === undefined) {
      // Nothing to do: the thread does not keep the process alive.
      this.worker?.unref();
      return;
    }
    this.current = next;
    const w = this.ensureWorker();
    w.ref();
    const req: OverviewRequest = { id: next.id, data: next.data, gzipLevel: this.o.gzipLevel };
    w.postMessage(req);
  }

  private ensureWorker(): Worker {
    if (this.worker !== null) return this.worker;
    const w = startWorker(this.o.maxHeapMb ?? 4096);
    w.on('message', (m: OverviewReply) => {
      const c = this.current;
      if (c === null || c.id !== m.id) return;
      this.current = null;
      if (m.ok) {
        this.o.log?.info({ ms: Math.round(m.ms), bytes: m.body.byteLength }, 'snapshot overview made');
        c.resolve(Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength));
      } else
        c.reject(new MqdException(mqdError('MQD_E_INTERNAL', `the snapshot overview failed: ${m.error}`)));
      this.pump();
    });
    // 'error' (an uncaught exception, the heap limit) is followed by 'exit': the thread is gone.
    let why = '';
    w.on('error', (e: Error) => {
      why = e.message;
    });
    w.on('exit', (code) => {
      if (this.worker === w) this.worker = null;
      const c = this.current;
      this.current = null;
      const yielded = this.yielding;
      this.yielding = false;
      if (c !== null) {
        c.reject(
          this.closed
            ? this.closedError()
            : yielded
              ? new YieldedError()
              : new MqdException(
                  mqdError(
                    'MQD_E_INTERNAL',
                    `the snapshot overview's worker ended (${why || `exit code ${code}`}): open the snapshot itself`,
                  ),
                ),
        );
      }
      this.pump();
    });
    this.worker = w;
    return w;
  }

  private closedError(): Error {
    return new MqdException(mqdError('MQD_E_STORE_UNAVAILABLE', 'the server is shutting down: try again'));
  }

  /** Ends the worker; what was queued fails. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.aheadTimer !== null) clearTimeout(this.aheadTimer);
    this.ahead.clear();
    for (const p of this.queue.splice(0)) p.reject(this.closedError());
    const w = this.worker;
    this.worker = null;
    if (w !== null) await w.terminate();
    // The exit handler rejects the current one.
  }

  /** For tests: how many times the overviews made ahead looked whether they may start. */
  get aheadLooks(): number {
    return this.looks;
  }

  /** For tests: how many overviews wait to be made ahead of requests. */
  get waitingAhead(): number {
    return this.ahead.size;
  }

  /** For tests: whether a worker thread is running. */
  get running(): boolean {
    return this.worker !== null;
  }
}
