// Taking a job snapshot: fan each host's ranks out to that host's agent, merge the answers
// into one JobSnapshot sorted by rank, and store it. A rank nobody answered for is still in the
// snapshot, in state agent-missing with the reason, so a partial answer reads as partial.
import { createHash, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import {
  type ApiEvalRequest,
  type CoreFileSource,
  err,
  type JobId,
  type JobSnapshot,
  type JobStateAnswer,
  type JobStateWatch,
  jobState,
  type MqdError,
  MqdException,
  mqdError,
  ok,
  QUEUE_KINDS,
  type QueueKind,
  type RankSnapshot,
  type Result,
  rankNotRead,
  SNAPSHOT_SCHEMA_VERSION,
  SnapshotId,
  type UiEventPayload,
} from '@mqd/model';
import type { FastifyBaseLogger } from 'fastify';
import { AUTO_SNAPSHOTTER } from '../auth/auth.js';
import {
  type DeflatedPart,
  deflatePart,
  type GzipPart,
  gzipSpliceable,
  joinGzip,
} from '../hub/gzip-splice.js';
import type { AgentHub, SnapshotWithFold } from '../hub/hub.js';
import { type FoldedRanks, type RankFold, rankFold, ranksOfPart } from '../hub/rank-fold.js';
import type { SnapshotMetrics } from '../shared/metrics.js';
import type { MpiInfo, RankTarget } from '../shared/seams.js';
import {
  type JobRecord,
  MAX_LISTED_MISSING,
  type SnapshotMeta,
  type SnapshotSummary,
} from '../shared/types.js';
import type { SnapshotRequestKey, StorePort } from '../store/store-port.js';

const gunzipAsync = promisify(gunzip);

/** What the /ui namespace is told; who hears it is the broadcaster's business. */
export type JobUiEvent =
  | 'job.attached'
  | 'snapshot.progress'
  | 'snapshot.done'
  | 'snapshot.failed'
  | 'fleet.changed';
export type AllUiEvent = 'agent.connected' | 'agent.disconnected' | 'fleet.changed';
/** Every payload is the spec's (packages/model/src/api-spec.ts UI_EVENTS), checked by the compiler. */
export interface UiEvents {
  /** To the job's owner and the admins. */
  toJob<N extends JobUiEvent>(uid: number, event: N, payload: UiEventPayload<N>): void;
  /** To every logged-in browser. */
  toAll<N extends AllUiEvent>(event: N, payload: UiEventPayload<N>): void;
}

export const newId = (bytes = 12): string => randomBytes(bytes).toString('base64url');

/** JobRecord.method of the jobs the hang watch registered from the agents' discovery. */
export const DISCOVERED_METHOD = 'discovered';

const UNKNOWN_MPI: MpiInfo = { library: 'unknown', dll: null, lengthUnit: 'bytes' };
/** Codes that mean the rank's process is gone: a job whose every rank says so has ended. */
// A rank whose pid now belongs to another process (MQD_E_PID_REUSED) is gone as well.
const GONE = new Set(['MQD_E_NO_SUCH_PID', 'MQD_E_PID_EXITED', 'MQD_E_JOB_ENDED', 'MQD_E_PID_REUSED']);

/**
 * Counts and a digest of the queues. Two snapshots have the same digest when nothing moved:
 * every rank has the same state and communicators, and the same operations in the same queues,
 * unchanged, by the model's rule (opStateFields: packages/model/src/mpi/operation.ts, the one
 * the progress verdict and the timeline use). It leaves out what changes between reads of a
 * stuck job anyway (pause times, pids, timestamps).
 */
export function summarize(ranks: readonly RankSnapshot[]): SnapshotSummary {
  return summaryOf(ranks.map(rankFold));
}

/** The summary of the ranks in slot order, from their folds (summarize's digest, line by line). */
export function summaryOf(folds: readonly RankFold[]): SnapshotSummary {
  const h = createHash('sha256');
  let okCount = 0;
  let errors = 0;
  let missing = 0;
  let pendingSends = 0;
  let pendingReceives = 0;
  let unexpected = 0;
  let shown = 0;
  let hidden = 0;
  const missingRanks: number[] = [];
  for (const f of folds) {
    if (f.kind === 'ok') okCount++;
    else if (f.kind === 'agent-missing') {
      missing++;
      if (missingRanks.length < MAX_LISTED_MISSING) missingRanks.push(f.rank);
    } else errors++;
    pendingSends += f.pendingSends;
    pendingReceives += f.pendingReceives;
    unexpected += f.unexpected;
    shown |= f.shownQueues;
    hidden |= f.nullQueues;
    h.update(f.line);
    h.update('\n');
  }
  // A kind some rank's library left null and none showed: its count is unknown, not 0.
  const unreadable = QUEUE_KINDS.filter((_, i) => (hidden & ~shown & (1 << i)) !== 0);
  return {
    ranks: folds.length,
    ok: okCount,
    errors,
    missing,
    pendingSends,
    pendingReceives,
    unexpected,
    digest: h.digest('hex'),
    missingRanks,
    ...(unreadable.length > 0 ? { unreadable } : {}),
  };
}

/** The rank nobody answered for, with why. */
function unanswered(
  t: { rank: number; pid: number; host: string },
  failure: MqdError | undefined,
): RankSnapshot {
  if (failure !== undefined && failure.code !== 'MQD_E_AGENT_MISSING') return rankNotRead(t, failure);
  return rankNotRead(
    t,
    failure ?? mqdError('MQD_E_AGENT_MISSING', `the agent on ${t.host} answered without rank ${t.rank}`),
    'agent-missing',
  );
}

export interface HungJob {
  readonly jobId: JobId;
  /** takenAt of the oldest of the equal snapshots (epoch ms). */
  readonly since: number;
  readonly snapshots: number;
  readonly digest: string;
  readonly pendingSends: number;
  readonly pendingReceives: number;
  readonly unexpected: number;
  /** Queue kinds the newest snapshot could not read (SnapshotSummary.unreadable). */
  readonly unreadable?: readonly QueueKind[];
  readonly lastSnapshotId: SnapshotId;
}

/** What the snapshot service needs of the agents (the hub; a fake in tests). */
export type SnapshotHub = Pick<AgentHub, 'seenStarters' | 'isConnected'> & {
  snapshot: SnapshotWithFold;
};

/**
 * A snapshot read but not stored yet (the hang watch stores one only when the queues or the
 * job's state changed): its summary to decide on, and store() to keep it as take() would.
 */
export interface ReadSnapshot {
  readonly snapshot: JobSnapshot;
  readonly summary: SnapshotSummary;
  /** Stores it (once: a second call gives the first one's result) and tells the job's viewers. */
  store(): Promise<Result<SnapshotMeta>>;
}

/** The merged snapshot before it is stored. */
interface Gathered {
  readonly head: SnapshotHead;
  /** The ranks in slot order, for a read only (gather's `compress` false); null otherwise. */
  readonly ranks: RankSnapshot[] | null;
  readonly summary: SnapshotSummary;
  /** Every rank says its process is gone (GONE): the job has ended. */
  readonly allGone: boolean;
  /** The snapshot's JSON as stored: its byte length, and its gzip (spliceable). */
  readonly body: { readonly bytes: number; gzip(): Promise<Buffer> };
  readonly takenAt: number;
}

export interface SnapshotServiceOptions {
  readonly store: StorePort;
  readonly hub: SnapshotHub;
  readonly ui: UiEvents;
  readonly clock: () => number;
  readonly snapshotTimeoutMs: number;
  readonly gzipLevel: number;
  /** Largest snapshot JSON stored, bytes; a bigger one is refused with MQD_E_TOO_LARGE. */
  readonly maxSnapshotBytes?: number;
  /** Where snapshot counts, durations and rank outcomes go (the /metrics families). */
  readonly metrics?: SnapshotMetrics;
  /** The server log: every failed snapshot is written there with its code and job. */
  readonly log?: Pick<FastifyBaseLogger, 'warn' | 'error'>;
  /** Told when a snapshot starts being gathered here (background work yields: overviews.ts). */
  readonly onGatherStart?: () => void;
  /** Told of every snapshot stored (the overview is started then: overviews.ts). */
  readonly onStored?: (id: SnapshotId, ranks: number, jobId: JobId) => void;
}

/** A snapshot being taken, and the request keys that wait for it (stored with it). */
interface Running {
  readonly promise: Promise<Result<SnapshotMeta>>;
  readonly requests: SnapshotRequestKey[];
}

const JSON_CACHE_ENTRIES = 16;
const JSON_CACHE_CHARS = 256 * 1024 * 1024;

/** A snapshot without its ranks: what is written before and after them. */
type SnapshotHead = Omit<JobSnapshot, 'ranks'>;

/** The text of a snapshot's JSON before and after its ranks' (keys in the order of gather()'s literal). */
function snapshotEnds(snapshot: SnapshotHead): { head: string; tail: string } {
  const { schemaVersion, takenAt, durationMicros, mpi, source } = snapshot;
  const head = JSON.stringify({ schemaVersion, takenAt, durationMicros, mpi });
  const src = source === undefined ? '' : `,"source":${JSON.stringify(source)}`;
  return { head: `${head.slice(0, -1)},"ranks":[`, tail: `]${src}}` };
}

/**
 * JSON.stringify(snapshot), its ranks given as their JSON texts (made as they arrived): the same
 * keys in the same order as the JobSnapshot literal in gather().
 */
export function snapshotJson(snapshot: SnapshotHead, rankTexts: readonly string[]): string {
  const { head, tail } = snapshotEnds(snapshot);
  return `${head}${rankTexts.join(',')}${tail}`;
}

const COMMA = Buffer.from(',');

export class SnapshotService {
  private readonly inFlight = new Map<JobId, Running>();
  /**
   * Keys of requests that joined a running snapshot, until their rememberRequest is stored (the
   * run has left inFlight by then): a key is always in the store, in inFlight or here.
   */
  private readonly joining = new Set<{ readonly key: SnapshotRequestKey; readonly jobId: JobId }>();
  /** Bumped whenever a key leaves inFlight or `joining` (stored with its snapshot, or failed). */
  private keysMoved = 0;

  constructor(private readonly o: SnapshotServiceOptions) {}

  /** Whether a snapshot is being taken here now (background work waits for none: overviews.ts). */
  get gathering(): boolean {
    return this.inFlight.size > 0;
  }

  /**
   * The answer already given to this request key (a retry after a lost answer), or null when the
   * key is new. The same key for another job is a client bug: MQD_E_IDEMPOTENCY_CONFLICT.
   *
   * The store is awaited, so a running snapshot may store the key and leave inFlight meanwhile:
   * then the key was in neither place when looked for, and the store is read again (keysMoved).
   * What follows the returned promise (take's inFlight check) runs before any other JavaScript.
   */
  async replay(job: JobRecord, request: SnapshotRequestKey): Promise<Result<SnapshotMeta> | null> {
    for (;;) {
      const moved = this.keysMoved;
      const prior = await this.o.store.requestedSnapshot(request);
      if (moved === this.keysMoved) return this.replayOf(job, request, prior);
    }
  }

  private replayOf(
    job: JobRecord,
    request: SnapshotRequestKey,
    prior: SnapshotMeta | null,
  ): Result<SnapshotMeta> | null {
    const same = (r: SnapshotRequestKey) => r.userId === request.userId && r.key === request.key;
    let jobOfKey: JobId | null = null;
    if (prior !== null) jobOfKey = prior.jobId;
    else {
      for (const [id, run] of this.inFlight) {
        if (run.requests.some(same)) jobOfKey = id;
      }
      for (const j of this.joining) if (same(j.key)) jobOfKey = j.jobId;
    }
    if (jobOfKey !== null && jobOfKey !== job.id) {
      return err(
        mqdError(
          'MQD_E_IDEMPOTENCY_CONFLICT',
          `the key '${request.key}' was used for a snapshot of job ${jobOfKey}, not ${job.id}`,
        ),
      );
    }
    return prior === null ? null : ok(prior);
  }

  /**
   * Snapshots the job; a request while one is running for the job gets that one's result. A
   * request with a key gets the snapshot that key already got (replay), joins the one running,
   * or starts one; its key is stored with the snapshot, so a retry never stores a second one.
   */
  async take(
    job: JobRecord,
    who: string,
    request?: SnapshotRequestKey,
    evals?: readonly ApiEvalRequest[],
  ): Promise<Result<SnapshotMeta>> {
    if (request !== undefined) {
      const replayed = await this.replay(job, request);
      if (replayed !== null) return replayed;
    }
    // From here to inFlight.set nothing is awaited: one snapshot per job, and every waiting key
    // in inFlight or `joining`.
    const running = this.inFlight.get(job.id);
    if (running) {
      if (request === undefined) return running.promise;
      running.requests.push(request);
      const joined = { key: request, jobId: job.id };
      this.joining.add(joined);
      // Joined after the snapshot's transaction: its key is stored now (the first stays).
      return running.promise
        .then(async (r) => {
          if (r.ok) await this.o.store.rememberRequest(request, r.value.id);
          return r;
        })
        .finally(() => {
          this.joining.delete(joined);
          this.keysMoved++;
        });
    }
    const requests = request === undefined ? [] : [request];
    this.o.onGatherStart?.();
    const promise = this.run(job, who, requests, evals).finally(() => {
      this.inFlight.delete(job.id);
      this.keysMoved++;
    });
    this.inFlight.set(job.id, { promise, requests });
    return promise;
  }

  isRunning(jobId: JobId): boolean {
    return this.inFlight.has(jobId);
  }

  private async run(
    job: JobRecord,
    who: string,
    requests: readonly SnapshotRequestKey[],
    evals?: readonly ApiEvalRequest[],
  ): Promise<Result<SnapshotMeta>> {
    const t0 = performance.now();
    let r: Result<SnapshotMeta>;
    try {
      r = await this.runOnce(job, who, requests, evals);
    } catch (e) {
      // A store that turned read-only (disk full) is a coded failure like the others; anything
      // else is a bug, still reported to the viewers and the log before it propagates.
      if (!(e instanceof MqdException)) {
        this.failed(
          job,
          who,
          requests,
          mqdError('MQD_E_INTERNAL', `snapshot of job ${job.id}: ${String(e)}`),
        );
        throw e;
      }
      r = err(e.error);
    }
    if (!r.ok) this.failed(job, who, requests, r.error);
    this.o.metrics?.snapshotTaken({
      seconds: (performance.now() - t0) / 1000,
      outcome: !r.ok ? 'failed' : r.value.missing + r.value.errors > 0 ? 'partial' : 'ok',
    });
    return r;
  }

  /** Every viewer's progress ends with the coded failure, and the server log has it. */
  private failed(job: JobRecord, who: string, requests: readonly SnapshotRequestKey[], e: MqdError): void {
    const requestKey = requests[0]?.key;
    this.o.ui.toJob(job.uid, 'snapshot.failed', {
      jobId: job.id,
      code: e.code,
      message: e.message,
      ...(requestKey === undefined ? {} : { requestKey }),
    });
    const fields = { event: 'snapshot.failed', code: e.code, jobId: job.id, host: job.host, who };
    if (e.code === 'MQD_E_INTERNAL' || e.code === 'MQD_E_STORE_READONLY')
      this.o.log?.error(fields, e.message);
    else this.o.log?.warn(fields, e.message);
  }

  private async runOnce(
    job: JobRecord,
    who: string,
    requests: readonly SnapshotRequestKey[],
    evals?: readonly ApiEvalRequest[],
  ): Promise<Result<SnapshotMeta>> {
    const g = await this.gather(job, true, false, true, evals);
    if (!g.ok) return g;
    return this.persist(job, who, requests, g.value);
  }

  /**
   * Reads the job's ranks once (one stop each), without storing anything: the hang watch's
   * sample. A read while another snapshot of the job runs gets that one's ranks instead of a
   * second stop (stored, as the other was asked for). Failures are values, as for take().
   * `light`: the hang watch's sample (the same stop and ranks, without the reader's forced
   * collection after it: ReadOptions.light).
   */
  async read(
    job: JobRecord,
    who: string,
    opts: { readonly light?: boolean } = {},
  ): Promise<Result<ReadSnapshot>> {
    const running = this.inFlight.get(job.id);
    if (running) {
      const r = await running.promise;
      return err(
        r.ok
          ? mqdError(
              'MQD_E_INTERNAL',
              `a snapshot of job ${job.id} was running (${r.value.id}): read skipped`,
            )
          : r.error,
      );
    }
    const t0 = performance.now();
    let g: Result<Gathered>;
    try {
      g = await this.gather(job, false, opts.light === true);
    } catch (e) {
      if (!(e instanceof MqdException)) throw e;
      g = err(e.error);
    }
    if (!g.ok) {
      this.o.metrics?.snapshotTaken({ seconds: (performance.now() - t0) / 1000, outcome: 'failed' });
      return g;
    }
    const gathered = g.value;
    this.o.metrics?.snapshotTaken({
      seconds: (performance.now() - t0) / 1000,
      outcome: gathered.summary.missing + gathered.summary.errors > 0 ? 'partial' : 'ok',
    });
    if (gathered.ranks === null) throw new Error('a read gathers its ranks');
    const { source, ...head } = gathered.head;
    let stored: Promise<Result<SnapshotMeta>> | null = null;
    return ok({
      // The keys in the order of the stored JSON (snapshotEnds).
      snapshot: { ...head, ranks: gathered.ranks, ...(source === undefined ? {} : { source }) },
      summary: gathered.summary,
      store: () => {
        stored ??= this.persist(job, who, [], gathered).catch((e: unknown) => {
          if (!(e instanceof MqdException)) throw e;
          return err(e.error);
        });
        return stored;
      },
    });
  }

  /**
   * Fans the read out to the agents and merges the answers (nothing stored). `compress`: the
   * snapshot will be stored, so chunks are deflated as they arrive (see segments below).
   */
  private async gather(
    job: JobRecord,
    progress: boolean,
    light = false,
    compress = false,
    evals?: readonly ApiEvalRequest[],
  ): Promise<Result<Gathered>> {
    const { hub, ui, clock } = this.o;
    if (job.ranks.length === 0) return err(mqdError('MQD_E_NO_RANKS', `job ${job.id} has no ranks`));
    const takenAt = clock();
    const t0 = performance.now();
    const n = job.ranks.length;
    const index = new Map<number, number>();
    const byHost = new Map<string, RankTarget[]>();
    job.ranks.forEach((r, i) => {
      index.set(r.rank, i);
      const list = byHost.get(r.host);
      // The rank's start time pins its identity: the agent refuses a pid reused since attach.
      const t: RankTarget = {
        rank: r.rank,
        pid: r.pid,
        ...(r.startTime === undefined ? {} : { startTime: r.startTime }),
        ...(r.core === undefined ? {} : { core: r.core }),
      };
      if (list) list.push(t);
      else byHost.set(r.host, [t]);
    });
    // A read (the hang watch's sample) keeps its ranks as objects. A snapshot to be stored keeps
    // only what its summary needs of each rank (folds) and each rank's JSON: the parsed ranks
    // die young instead of 100,000 of them living through the fan-in (at 100,000 ranks most of its
    // garbage collection).
    const keep = !compress;
    const slots: (RankSnapshot | undefined)[] = new Array(keep ? n : 0);
    const folds: (RankFold | undefined)[] = new Array(n);
    // Each rank's JSON, made as its chunk arrives: while the other agents are still reading, not
    // all at once after the last one (a 100,000-rank snapshot is 125 MB of it). When
    // set, texts[i] is the JSON of the rank last put in slot i. A chunk deflated as the agent
    // sent it (below) leaves its ranks' texts unset.
    const texts: (string | undefined)[] = new Array(n);
    // A snapshot to be stored: each chunk whose ranks fill a run of consecutive slots is deflated
    // as it arrives, in the thread pool while the other agents still read, so that after the last
    // chunk only the joining is left (gzip-splice.ts joinGzip). A chunk that is not such a run, or
    // fills a slot twice, turns this off: the whole JSON is then deflated at the end.
    const segments: { lo: number; bytes: number; asSent: boolean; part: Promise<DeflatedPart> }[] = [];
    const filled = new Uint8Array(compress ? n : 0);
    let segmented = compress;
    let received = 0;
    let lastProgress = 0;
    const onRanks = (ranks: RankSnapshot[], sent?: Buffer) => {
      // The ranks this job has a slot for, and their slots.
      const got: RankSnapshot[] = [];
      const idx: number[] = [];
      for (const r of ranks) {
        const i = index.get(r.rank);
        if (i !== undefined) {
          got.push(r);
          idx.push(i);
        }
      }
      const lo = idx[0];
      const run = segmented && lo !== undefined && idx.every((i, k) => i === lo + k && filled[i] === 0);
      if (lo !== undefined && !run) segmented = false;
      // The chunk's JSON as its agent sent it (hub.ts OnRanks), deflated as it is when the chunk
      // is a run and every rank of it has a slot.
      const sentRun = run && got.length === ranks.length ? sent : undefined;
      got.forEach((r, k) => {
        const i = idx[k] as number;
        if (keep) slots[i] = r;
        folds[i] = rankFold(r);
        texts[i] = sentRun === undefined ? JSON.stringify(r) : undefined;
      });
      if (run && lo !== undefined) {
        for (const i of idx) filled[i] = 1;
        const text = sentRun ?? Buffer.from(texts.slice(lo, lo + idx.length).join(','));
        const part = deflatePart(text, this.o.gzipLevel);
        // Awaited only if every chunk was a run; never an unhandled rejection meanwhile.
        part.catch(() => undefined);
        segments.push({ lo, bytes: text.length, asSent: sentRun !== undefined, part });
      }
      counted(ranks.length);
    };
    const counted = (ranks: number) => {
      received += ranks;
      const now = performance.now();
      if (progress && now - lastProgress > 100) {
        lastProgress = now;
        ui.toJob(job.uid, 'snapshot.progress', { jobId: job.id, received, expected: n });
      }
    };
    // A chunk read on another instance, folded and deflated there (rank-fold.ts): when it is a
    // run of empty slots, it is taken as it is (nothing to parse or deflate here); otherwise its
    // ranks come back from its bytes and go the way of any chunk.
    const onFolded = (c: FoldedRanks) => {
      const idx: number[] = [];
      for (const f of c.folds) {
        const i = index.get(f.rank);
        if (i === undefined) break;
        idx.push(i);
      }
      const lo = idx[0];
      const run =
        segmented &&
        lo !== undefined &&
        idx.length === c.folds.length &&
        idx.every((i, k) => i === lo + k && filled[i] === 0);
      if (!run) {
        if (c.folds.length > 0) onRanks(ranksOfPart(c.part));
        return;
      }
      c.folds.forEach((f, k) => {
        const i = lo + k;
        folds[i] = f;
        texts[i] = undefined;
        filled[i] = 1;
      });
      segments.push({ lo, bytes: c.part.length, asSent: true, part: Promise.resolve(c.part) });
      counted(c.folds.length);
    };
    const failures = new Map<string, MqdError>();
    let mpi: MpiInfo | null = null;
    const cores: CoreFileSource[] = [];
    await Promise.all(
      [...byHost].map(async ([host, targets]) => {
        // The owner's uid travels with the request: the agent reads only that uid's ranks. uid 0
        // is read only for a job of uid 0, which only admins may attach or snapshot (canSee).
        const owner = {
          ...(job.uid === 0 ? { ownerUid: 0, allowRoot: true } : { ownerUid: job.uid }),
          ...(light ? { light: true } : {}),
          // Expressions to read in the same stop (validated by the API's schema; the agent checks again).
          ...(evals !== undefined && evals.length > 0 ? { evals } : {}),
        };
        const fold = compress ? { level: this.o.gzipLevel, onFolded } : undefined;
        const r = await hub.snapshot(host, targets, this.o.snapshotTimeoutMs, onRanks, owner, fold);
        if (r.ok) {
          mpi ??= r.value.mpi;
          if (r.value.cores) cores.push(...r.value.cores);
        } else failures.set(host, r.error);
      }),
    );
    // The ranks nobody answered for, with why: their JSON and fold made here.
    for (let i = 0; i < n; i++) {
      if (folds[i] !== undefined) continue;
      const loc = job.ranks[i];
      if (loc === undefined) throw new Error(`job ${job.id} layout has a hole at ${i}`);
      const r = unanswered(loc, failures.get(loc.host));
      if (keep) slots[i] = r;
      folds[i] = rankFold(r);
      texts[i] = JSON.stringify(r);
    }
    const allFolds = folds as RankFold[];
    if (this.o.metrics) {
      const failedByCode = new Map<string, number>();
      let readOk = 0;
      for (const f of allFolds) {
        if (f.code === null) readOk++;
        else failedByCode.set(f.code, (failedByCode.get(f.code) ?? 0) + 1);
      }
      this.o.metrics.ranksRead({ ok: readOk, failedByCode });
    }
    const head: SnapshotHead = {
      schemaVersion: SNAPSHOT_SCHEMA_VERSION,
      takenAt: new Date(takenAt).toISOString(),
      durationMicros: Math.round((performance.now() - t0) * 1000),
      mpi: mpi ?? UNKNOWN_MPI,
      // A job of cores says so in every snapshot, with the cores each rank came from.
      ...(job.coresDir === undefined
        ? {}
        : { source: { kind: 'core' as const, cores: cores.sort((a, b) => a.rank - b.rank) } }),
    };
    const summary = summaryOf(allFolds);
    const allGone = allFolds.every((f) => f.kind === 'error' && f.code !== null && GONE.has(f.code));
    const level = this.o.gzipLevel;
    let body: Gathered['body'];
    if (segmented) {
      // Every chunk was a run. The slots no chunk filled (ranks not answered) become runs of
      // their own, deflated now; then the runs in slot order, commas between them.
      for (let i = 0; i < n; ) {
        if (filled[i] === 1) {
          i++;
          continue;
        }
        const lo = i;
        while (i < n && filled[i] === 0) i++;
        const text = Buffer.from(texts.slice(lo, i).join(','));
        const part = deflatePart(text, level);
        part.catch(() => undefined);
        segments.push({ lo, bytes: text.length, asSent: false, part });
      }
      const runs = segments.sort((a, b) => a.lo - b.lo);
      const ends = snapshotEnds(head);
      const headBuf = Buffer.from(ends.head);
      const tailBuf = Buffer.from(ends.tail);
      let bytes = headBuf.length + tailBuf.length + runs.length - 1;
      for (const r of runs) bytes += r.bytes;
      body = {
        bytes,
        gzip: async () => {
          const done = await Promise.all(runs.map((r) => r.part));
          const parts: GzipPart[] = [{ raw: headBuf }];
          done.forEach((d, k) => {
            if (k > 0) parts.push({ raw: COMMA });
            parts.push(d);
          });
          parts.push({ raw: tailBuf });
          return joinGzip(parts);
        },
      };
    } else {
      // The runs were given up. A run deflated as its agent sent it had no texts: they come back
      // from its deflated bytes, for the slots no later chunk filled again (those have theirs).
      for (const g of segments) {
        if (!g.asSent) continue;
        ranksOfPart(await g.part).forEach((r, k) => {
          texts[g.lo + k] ??= JSON.stringify(r);
        });
      }
      // Every slot's text is set now: as it arrived, from a run deflated as sent, or unanswered.
      const json = snapshotJson(head, texts as string[]);
      body = { bytes: Buffer.byteLength(json), gzip: () => gzipSpliceable(json, level) };
    }
    const budget = this.o.maxSnapshotBytes ?? Number.POSITIVE_INFINITY;
    if (body.bytes > budget) {
      return err(
        mqdError(
          'MQD_E_TOO_LARGE',
          `the snapshot of job ${job.id} is ${body.bytes} bytes, over the budget of ${budget} (--max-snapshot-bytes)`,
        ),
      );
    }
    return ok({ head, ranks: keep ? (slots as RankSnapshot[]) : null, summary, allGone, body, takenAt });
  }

  /** Stores a gathered snapshot with its request keys and audit row, and tells the viewers. */
  private async persist(
    job: JobRecord,
    who: string,
    requests: readonly SnapshotRequestKey[],
    g: Gathered,
  ): Promise<Result<SnapshotMeta>> {
    const { store, ui, clock } = this.o;
    const { head, summary, body, takenAt } = g;
    // Spliceable, so reads send it as stored inside their envelope (gzip-splice.ts).
    const gz = await body.gzip();
    const meta: SnapshotMeta = {
      ...summary,
      id: SnapshotId(newId()),
      jobId: job.id,
      takenAt,
      durationMicros: head.durationMicros,
      createdBy: who,
      bytes: body.bytes,
      storedBytes: gz.byteLength,
    };
    await store.insertSnapshot(
      { meta, gz },
      {
        who,
        action: 'snapshot',
        jobId: job.id,
        snapshotId: meta.id,
        detail: `${summary.ranks} ranks, ${summary.missing} agent-missing, ${summary.errors} errors`,
      },
      // The keys of the requests waiting so far (those joining later are stored by take()).
      [...requests],
    );
    // Cores do not go away the way processes do: a job of cores never ends by itself.
    if (job.coresDir === undefined && g.allGone) await store.markJobEnded(job.id, clock());
    ui.toJob(job.uid, 'snapshot.done', { jobId: job.id, snapshotId: meta.id, partial: meta.missing > 0 });
    this.o.onStored?.(meta.id, meta.ranks, job.id);
    return ok(meta);
  }

  /** Recently decoded snapshots (immutable once stored), newest last; bounded by JSON_CACHE_*. */
  private readonly decoded = new Map<string, string>();
  private decodedChars = 0;

  /**
   * The stored snapshot's JSON text, or null when it is gone. A popular share link is
   * decompressed once, not per request; callers check that the snapshot still exists first.
   */
  async json(id: string): Promise<string | null> {
    const hit = this.decoded.get(id);
    if (hit !== undefined) {
      this.decoded.delete(id);
      this.decoded.set(id, hit);
      return hit;
    }
    const gz = await this.o.store.snapshotData(id);
    if (gz === null) return null;
    const text = (await gunzipAsync(gz)).toString('utf8');
    if (text.length <= JSON_CACHE_CHARS / 4) {
      this.decoded.set(id, text);
      this.decodedChars += text.length;
      for (const [k, v] of this.decoded) {
        if (this.decoded.size <= JSON_CACHE_ENTRIES && this.decodedChars <= JSON_CACHE_CHARS) break;
        this.decoded.delete(k);
        this.decodedChars -= v.length;
      }
    }
    return text;
  }

  /**
   * Live jobs the model calls hung (jobStateOf over their stored snapshots, the hang watch's
   * verdict first where it watches the job), `hungAfter` equal snapshots needed without one.
   */
  async hung(
    hungAfter: number,
    uid: number | null,
    watchOf: (job: JobRecord) => JobStateWatch | null = () => null,
  ): Promise<HungJob[]> {
    const out: HungJob[] = [];
    for (const job of await this.o.store.jobs(uid)) {
      if (job.endedAt !== null) continue;
      const metas = await this.o.store.snapshots(job.id, STATE_HISTORY);
      const a = jobStateOf(job, metas, hungAfter, watchOf(job));
      const newest = metas[0];
      if (a.state !== 'hung' || newest === undefined) continue;
      out.push({
        jobId: job.id,
        since: a.since ?? newest.takenAt,
        snapshots: a.sinceSnapshots,
        digest: newest.digest,
        pendingSends: newest.pendingSends,
        pendingReceives: newest.pendingReceives,
        unexpected: newest.unexpected,
        ...(newest.unreadable?.length ? { unreadable: newest.unreadable } : {}),
        lastSnapshotId: newest.id,
      });
    }
    return out;
  }

  /** One round of auto-snapshots: every running job with at least one agent connected. */
  async autoTick(): Promise<number> {
    // A starter the agent of its node lists with another start time is another process: the
    // job's starter is gone, and it is ended instead of snapshotted (identity by start time).
    const seen = this.o.hub.seenStarters();
    const replaced = (j: JobRecord) =>
      seen.some(
        (x) =>
          x.host === j.host &&
          x.starter.starterPid === j.starterPid &&
          x.starter.startTime !== undefined &&
          j.starterStartTime !== '' &&
          x.starter.startTime !== j.starterStartTime,
      );
    const jobs: JobRecord[] = [];
    for (const j of await this.o.store.jobs(null)) {
      // A job of cores gives the same snapshot every time: snapshots of it are taken on request.
      // A job the hang watch discovered is sampled by the watch, within its policy and stop
      // budget (a job that opted out with MQD_WATCH=off is never stopped by either).
      if (j.endedAt !== null || j.coresDir !== undefined || j.method === DISCOVERED_METHOD) continue;
      // (markJobEnded ends only a job not ended yet: ending it twice is harmless.)
      if (replaced(j)) await this.o.store.markJobEnded(j.id, this.o.clock());
      else if (!this.isRunning(j.id) && j.ranks.some((r) => this.o.hub.isConnected(r.host))) jobs.push(j);
    }
    const results = await Promise.all(jobs.map((j) => this.take(j, AUTO_SNAPSHOTTER)));
    return results.filter((r) => r.ok).length;
  }
}

/**
 * Snapshots of a job read to decide its state: every one a job keeps as a rule, so "since"
 * is the first of the run of equal snapshots, not of a window.
 */
export const STATE_HISTORY = 1000;

/** The job's state by the model's one rule, from its stored snapshots (newest first, as the store lists them). */
export function jobStateOf(
  job: Pick<JobRecord, 'endedAt'>,
  metas: readonly SnapshotMeta[],
  hungAfter: number,
  watch: JobStateWatch | null = null,
): JobStateAnswer {
  return jobState({
    steps: metas.map((m) => ({
      at: m.takenAt,
      digest: m.digest,
      ranks: m.ranks,
      read: m.ok,
      pending: m.pendingSends + m.pendingReceives,
    })),
    ended: job.endedAt !== null,
    hungAfter,
    watch,
  });
}
