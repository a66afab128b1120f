// The hang watch's loop (docs/hang-watch.md): every policy period, merge the agents'
// discovery reports into cluster jobs, register each as a store job, and sample the watched
// ones: /proc counters (no stop), then, while the job's most-stopped rank has stop budget left
// this hour, one ordinary short-stop read. The model's verdict judges the last samples; the
// full snapshot is stored only when the queues or the state changed; a job that becomes hung
// is told once per episode (webhooks, /ui) with a share link to the snapshot that shows it.
// A job that is not watched (`on` or `budget`) is never stopped.
import { randomBytes } from 'node:crypto';
import {
  type ApiFleetCores,
  type ApiFleetJob,
  type ApiFleetSample,
  type ApiWatchPolicy,
  type JobStateWatch,
  MqdException,
  type RankCounters,
  type SnapshotId,
  type WatchMode,
  type WatchSample,
  type WatchState,
} from '@mqd/model';
import { WATCH_PRINCIPAL } from '../auth/auth.js';
import type { ReadSnapshot, SnapshotService, UiEvents } from '../fanout/fanout.js';
import { KeyedLock } from '../shared/lock.js';
import type { JobStateSeries, WatchMetrics } from '../shared/metrics.js';
import type { JobRecord, User, WatchJobRecord } from '../shared/types.js';
import type { FleetPageEntry, StorePort } from '../store/store-port.js';
import { canCapture, captureName, fleetCores } from './capture.js';
import { type ClusterJob, infoOf, jobRecordOf, mergeDiscovered, programInScope } from './cluster.js';
import { type SlurmQuery, slurmEndReason } from './end-reason.js';
import { type HangNotice, sendWebhooks, webhookBody } from './notify.js';
import type { CounterTarget, WatchAgents, WatchVerdictFn } from './source.js';
import { passwdName, userNames } from './user-names.js';

/** Who the watcher acts as in the audit trail and on the snapshots it stores (a reserved name). */
export const WATCHER = WATCH_PRINCIPAL;
const HOUR_MS = 3_600_000;
/** Samples the fleet view draws per job. */
export const FLEET_HISTORY = 24;
/** The oldest discovery a fleet request answers from before it starts a refresh, ms. */
export const FLEET_REFRESH_MS = 5_000;

/** A fleet page: the jobs of [offset, offset + limit) and how many the user may see in all. */
export interface FleetAnswer {
  readonly total: number;
  readonly jobs: ApiFleetJob[];
}
/** Jobs whose latest kept cores the fleet remembers (in memory; the directories stay on disk). */
export const MAX_KEPT_CORES = 10_000;
/**
 * Discovered jobs of one uid registered at once (live store jobs): beyond, a uid's jobs are
 * counted, not stored, so one user's thousand look-alike processes leave no thousand jobs.
 */
export const MAX_LIVE_JOBS_PER_UID = 64;
/** Registrations (new, reopened or re-laid-out jobs, each an audit row) of one uid per hour. */
export const MAX_REGISTRATIONS_PER_UID_HOUR = 256;
/** Jobs missing from an incomplete report whose ranks one round checks are gone (counters). */
export const MAX_END_CHECKS_PER_ROUND = 32;
/** Ended jobs whose stop history is kept for when they reappear (within the hour it covers). */
export const MAX_KEPT_STOP_HISTORIES = 10_000;
/** Codes of a counters error that say the rank's process is gone (exited, or its pid reused). */
const GONE_CODES: ReadonlySet<string> = new Set([
  'MQD_E_PID_EXITED',
  'MQD_E_PID_REUSED',
  'MQD_E_NO_SUCH_PID',
]);

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const REAL_TIMERS: Timers = {
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

export interface WatcherOptions {
  readonly store: StorePort;
  readonly agents: WatchAgents;
  readonly snapshots: Pick<SnapshotService, 'read'>;
  readonly ui: UiEvents;
  readonly verdict: WatchVerdictFn;
  readonly policy: ApiWatchPolicy;
  readonly clock: () => number;
  readonly timers?: Timers;
  /**
   * Whether this instance runs the rounds now (the cluster's 'watch' lease, cluster/leases.ts);
   * absent: always. The others still answer fleet requests from the shared store.
   */
  readonly runsHere?: () => boolean;
  readonly webhooks: readonly string[];
  /** Base of share links (https://mqd.example.org); null: no link in notifications. */
  readonly linkBase: () => string | null;
  readonly shareTtlSeconds: number;
  readonly countersTimeoutMs?: number;
  /** Jobs sampled at once. */
  readonly concurrency?: number;
  readonly metrics?: WatchMetrics;
  readonly log?: {
    warn(fields: Record<string, unknown>, msg: string): void;
    info(fields: Record<string, unknown>, msg: string): void;
  };
  /** Runs `scontrol` for the end reason of ended Slurm jobs; null: no Slurm here. */
  readonly slurm?: SlurmQuery | null;
  readonly fetch?: typeof fetch;
  readonly webhookBackoffMs?: number;
  readonly webhookTimeoutMs?: number;
  /** How long a node's agent may take to write a hung job's cores (policy captureCores), ms. */
  readonly captureTimeoutMs?: number;
  /** Default MAX_LIVE_JOBS_PER_UID. */
  readonly maxLiveJobsPerUid?: number;
  /** Default MAX_REGISTRATIONS_PER_UID_HOUR. */
  readonly maxRegistrationsPerUidHour?: number;
}

/** Per rank: its stops (epoch ms, micros), the last hour's. */
type StopHistory = Map<number, { at: number; micros: number }[]>;

/** A sample in the job's window, with the stored snapshot that has its queues (if any). */
interface WindowEntry {
  readonly sample: WatchSample;
  readonly snapshotRef: SnapshotId | null;
}

interface Live {
  cluster: ClusterJob;
  job: JobRecord;
  mode: WatchMode;
  window: WindowEntry[];
  /** Per rank: the stops of the last hour (epoch ms, micros). */
  stops: StopHistory;
}

export class Watcher {
  private policy: ApiWatchPolicy;
  private readonly live = new Map<string, Live>();
  private timer: unknown = null;
  private running: Promise<void> | null = null;
  private closed = false;
  private readonly pending = new Set<Promise<void>>();
  private readonly timers: Timers;
  private discoveryFailed = false;
  /** Per watched job: the cores kept at its latest hang (policy captureCores), in memory. */
  private readonly cores = new Map<string, ApiFleetCores>();
  /**
   * The stop history of ended jobs, by watch id (uid, host, starter pid and start time, or the
   * Slurm job): a job that reappears (an incomplete report, a node that came back) goes on with
   * it, so ending a job never hands it a fresh stop budget.
   */
  private readonly endedStops = new Map<string, StopHistory>();
  /** Per uid, this hour's registrations (hour = floor(clock / HOUR_MS)). */
  private readonly registrations = new Map<number, { hour: number; used: number }>();
  /** Per uid, the discovered jobs the last refresh did not register (logged when it changes). */
  private unregistered = new Map<number, number>();
  /** Per uid, the hour (floor(clock / HOUR_MS)) its unregistered jobs were last audited. */
  private readonly limitAudited = new Map<number, number>();
  /** The left-out jobs of incomplete reports, as last logged (`host uid:n,...`). */
  private leftOutLogged = '';
  /**
   * refresh() one at a time: it reads the store, decides from `live` (this process's own) and
   * writes (saveJob, upsertWatchJob, endWatchJob); a round's refresh and a fleet request's at
   * once would otherwise both register a new job. In-process is enough: the live jobs are this
   * process's, and one instance runs the watch (its lease: docs/architecture.md).
   */
  private readonly refreshLock = new KeyedLock();
  /** When the last refresh started (clock ms), and the background one under way (refreshSoon). */
  private refreshedAt = Number.NEGATIVE_INFINITY;
  private refreshing: Promise<void> | null = null;

  constructor(private readonly o: WatcherOptions) {
    this.policy = o.policy;
    this.timers = o.timers ?? REAL_TIMERS;
  }

  currentPolicy(): ApiWatchPolicy {
    return this.policy;
  }

  /** A new policy takes effect at once: modes are recomputed, the loop (re)started or stopped. */
  async setPolicy(p: ApiWatchPolicy): Promise<void> {
    this.policy = p;
    for (const l of [...this.live.values()]) {
      l.mode = await this.modeOf(l.cluster, this.o.clock());
      if (l.window.length > p.hungAfterSamples + 1)
        l.window.splice(0, l.window.length - p.hungAfterSamples - 1);
    }
    this.o.ui.toAll('fleet.changed', { at: new Date(this.o.clock()).toISOString() });
    if (this.timer !== null) {
      this.timers.clearTimeout(this.timer);
      this.timer = null;
    }
    this.schedule();
  }

  /** Starts the periodic loop when the policy enables the watch. */
  start(): void {
    this.schedule();
  }

  private schedule(): void {
    if (this.closed || !this.policy.enabled || this.timer !== null) return;
    this.timer = this.timers.setTimeout(() => {
      this.timer = null;
      this.tick()
        .catch((e: unknown) =>
          this.o.log?.warn({ event: 'watch.round', err: String(e) }, 'a watch round failed'),
        )
        .finally(() => this.schedule());
    }, this.policy.periodSeconds * 1000);
  }

  /** Stops the loop and waits for the round and the notifications under way. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    await this.running;
    await Promise.all([...this.pending]);
  }

  /** Waits for the notifications under way (tests; close() does it too). */
  async settled(): Promise<void> {
    await Promise.all([...this.pending]);
  }

  /** One round: discovery, then a sample of every watched job. Rounds never overlap. */
  tick(): Promise<void> {
    if (this.running !== null) return this.running;
    this.running = this.round().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async round(): Promise<void> {
    // Several instances on one PostgreSQL store: only the holder of the watch's lease samples.
    if (this.o.runsHere !== undefined && !this.o.runsHere()) return;
    const watched = await this.refresh(true);
    if (!this.policy.enabled) return;
    const queue = watched.filter((l) => l.mode === 'on' || l.mode === 'budget');
    const cap = Math.max(1, this.o.concurrency ?? 4);
    await Promise.all(
      Array.from({ length: Math.min(cap, queue.length) }, async () => {
        for (let l = queue.shift(); l !== undefined; l = queue.shift()) {
          if (this.closed) return;
          try {
            await this.sample(l);
          } catch (e) {
            // A read-only store skips the sample; anything else is a bug and propagates.
            if (!(e instanceof MqdException)) throw e;
            this.o.log?.warn(
              { event: 'watch.sample', code: e.error.code, job: l.cluster.id },
              e.error.message,
            );
          }
        }
      }),
    );
  }

  /**
   * Discovery only (no agent is asked anything): merges the reports, registers new jobs and
   * layout changes, ends the jobs no agent reports any more. Returns the jobs reported now.
   * `touch`: a round moves every job's last-seen time (a fleet request writes only changes).
   */
  refresh(touch = false): Promise<Live[]> {
    return this.refreshLock.run('refresh', () => {
      this.refreshedAt = this.o.clock();
      return this.refreshNow(touch);
    });
  }

  private async refreshNow(touch: boolean): Promise<Live[]> {
    const { store, clock } = this.o;
    const now = clock();
    let reports: ReturnType<WatchAgents['discovered']>;
    try {
      reports = this.o.agents.discovered();
    } catch (e) {
      if (!(e instanceof MqdException)) throw e;
      if (!this.discoveryFailed)
        this.o.log?.warn({ event: 'watch.discovery', code: e.error.code }, e.error.message);
      this.discoveryFailed = true;
      // Nobody knows which jobs run: none is ended on that account.
      return [];
    }
    this.discoveryFailed = false;
    // The oldest first: under the per-uid bounds, a uid's long-running jobs keep their places.
    const clusters = mergeDiscovered(reports).sort(
      (a, b) => a.first.startedAt - b.first.startedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    );
    const complete = this.completeHosts();
    const known = await store.watchJobs(null);
    const knownById = new Map(known.map((w) => [w.id, w]));
    const liveOfUid = new Map<number, number>();
    for (const w of known) if (w.endedAt === null) liveOfUid.set(w.uid, (liveOfUid.get(w.uid) ?? 0) + 1);
    const unregistered = new Map<number, number>();
    let changed = false;
    const seen = new Set<string>();
    for (const c of clusters) {
      if (c.ranks.length === 0) continue;
      const prior = this.live.get(c.id);
      const stored = prior === undefined ? (knownById.get(c.id) ?? null) : null;
      const layoutChanged =
        prior === undefined ||
        prior.job.ranks.length !== c.ranks.length ||
        prior.job.ranks.some((r, i) => {
          const n = c.ranks[i];
          return n === undefined || n.pid !== r.pid || n.host !== r.host || n.startTime !== r.startTime;
        });
      const registers = layoutChanged || stored?.endedAt != null;
      // A new (or reopened) job takes one of its uid's live places; any registration one of
      // its uid's hourly ones. Beyond either: counted, not stored (the job stays unwatched).
      const opens = prior === undefined && (stored === null || stored.endedAt !== null);
      if (
        registers &&
        ((opens && (liveOfUid.get(c.uid) ?? 0) >= (this.o.maxLiveJobsPerUid ?? MAX_LIVE_JOBS_PER_UID)) ||
          !this.registrationAllowed(c.uid, now))
      ) {
        unregistered.set(c.uid, (unregistered.get(c.uid) ?? 0) + 1);
        // A known job whose new layout is refused keeps its place (and its old layout).
        if (prior !== undefined || stored?.endedAt === null) seen.add(c.id);
        continue;
      }
      if (opens) liveOfUid.set(c.uid, (liveOfUid.get(c.uid) ?? 0) + 1);
      seen.add(c.id);
      let job = prior?.job ?? null;
      if (layoutChanged || stored?.endedAt != null) {
        const existingId = prior?.job.id ?? stored?.jobId ?? null;
        const existing = existingId === null ? null : await store.job(existingId);
        // A job someone attached already (same starter, same start time, same owner and ranks)
        // is that job: the watcher samples it instead of listing it twice.
        const attached = existingId === null ? await attachedJobOf(store, c) : null;
        if (attached !== null) job = attached;
        else {
          job = jobRecordOf(c, now, existing !== null && existing.uid === c.uid ? existing : null);
          await store.saveJob(job, {
            who: WATCHER,
            action: 'watch-register',
            jobId: job.id,
            detail: `${c.key}: ${c.ranks.length} ranks on ${c.nodes.join(',')}`,
          });
        }
        if (prior === undefined) changed = true;
      }
      if (job === null) continue;
      if (touch || prior === undefined || layoutChanged || stored?.endedAt != null)
        await store.upsertWatchJob({
          id: c.id,
          key: c.key,
          uid: c.uid,
          jobId: job.id,
          info: infoOf(c),
          at: now,
        });
      const l: Live = prior ?? {
        cluster: c,
        job,
        mode: 'on',
        window: [],
        stops: this.endedStops.get(c.id) ?? new Map(),
      };
      this.endedStops.delete(c.id);
      l.cluster = c;
      l.job = job;
      const mode = await this.modeOf(c, now, l);
      if (prior !== undefined && mode !== prior.mode) changed = true;
      l.mode = mode;
      this.live.set(c.id, l);
    }
    await this.registrationLimits(unregistered, now);
    let checks = MAX_END_CHECKS_PER_ROUND;
    for (const w of known) {
      if (w.endedAt !== null || seen.has(w.id)) continue;
      // Not reported: ended, unless no agent of its nodes is connected (then nobody knows).
      const connected = w.info.nodes.filter((h) => this.o.agents.isConnected(h));
      if (connected.length === 0) continue;
      // A node whose report was cut at a cap may have left it out: its ranks must be seen gone.
      const unsure = connected.filter((h) => !complete(h));
      if (unsure.length > 0) {
        if (checks <= 0) continue;
        checks--;
        if (!(await this.ranksGone(w, unsure))) continue;
      }
      await this.end(w, now);
      changed = true;
    }
    if (changed) this.o.ui.toAll('fleet.changed', { at: new Date(now).toISOString() });
    return [...this.live.values()].filter((l) => seen.has(l.cluster.id));
  }

  /** Ends the job now; Slurm's end state (if it knows one) follows when scontrol answers. */
  private async end(w: WatchJobRecord, now: number): Promise<void> {
    const { store } = this.o;
    await store.endWatchJob(w.id, now, null);
    if (w.jobId !== null) await store.markJobEnded(w.jobId, now);
    const l = this.live.get(w.id);
    if (l !== undefined && l.stops.size > 0) this.keepStops(w.id, l.stops, now);
    this.live.delete(w.id);
    this.o.log?.info({ event: 'watch.ended', job: w.key, uid: w.uid }, 'a watched job ended');
    const slurm = this.o.slurm;
    if (w.info.slurmJob === null || !slurm) return;
    const p = slurmEndReason(slurm, w.info.slurmJob)
      // Under refresh's lock: the job cannot be seen again (reopened) between the check and the write.
      .then((reason) =>
        this.refreshLock.run('refresh', async () => {
          if (reason === null || !store.isOpen || (await store.watchJob(w.id))?.endedAt !== now) return;
          await store.setWatchEndReason(w.id, reason);
          this.o.ui.toJob(w.uid, 'fleet.changed', { at: new Date(this.o.clock()).toISOString() });
        }),
      )
      // Outside any request: a store failure is logged, never an unhandled rejection.
      .catch((e: unknown) =>
        this.o.log?.warn({ event: 'watch.end-reason', err: String(e) }, 'no end reason kept'),
      );
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }

  /**
   * Whether a host's latest report lists every job it runs. Hubs that predate the scans (a
   * test's fake) have every connected host's report complete.
   */
  private completeHosts(): (host: string) => boolean {
    const scans = this.o.agents.discoveryScans?.();
    if (scans === undefined) return () => true;
    const done = new Set<string>();
    const left: string[] = [];
    for (const s of scans) {
      if (s.complete) done.add(s.host);
      else if (s.omitted.length > 0)
        left.push(`${s.host} ${s.omitted.map((o) => `uid ${o.uid}: ${o.jobs}`).join(', ')}`);
    }
    const text = left.sort().join('; ');
    if (text !== this.leftOutLogged && text !== '') {
      this.o.log?.warn(
        { event: 'watch.discovery-incomplete', leftOut: text.slice(0, 2000) },
        `discovery reports cut at their caps (jobs left out per node and uid: ${text.slice(0, 500)}); a job missing from them ends only once its ranks are gone`,
      );
    }
    this.leftOutLogged = text;
    return (h) => done.has(h);
  }

  /** One more registration of `uid` this hour, if its hourly bound allows. */
  private registrationAllowed(uid: number, now: number): boolean {
    const hour = Math.floor(now / HOUR_MS);
    let r = this.registrations.get(uid);
    if (r === undefined || r.hour !== hour) {
      r = { hour, used: 0 };
      this.registrations.set(uid, r);
    }
    if (r.used >= (this.o.maxRegistrationsPerUidHour ?? MAX_REGISTRATIONS_PER_UID_HOUR)) return false;
    r.used++;
    return true;
  }

  /**
   * Logs (when the counts change) and audits (once per uid and hour: the rows stay bounded)
   * the discovered jobs the per-uid bounds kept out of the store.
   */
  private async registrationLimits(unregistered: Map<number, number>, now: number): Promise<void> {
    const hour = Math.floor(now / HOUR_MS);
    for (const [uid, r] of this.registrations) if (r.hour !== hour) this.registrations.delete(uid);
    for (const [uid, h] of this.limitAudited) if (h !== hour) this.limitAudited.delete(uid);
    for (const [uid, n] of unregistered) {
      if (this.unregistered.get(uid) === n) continue;
      this.o.log?.warn(
        { event: 'watch.register-limit', uid, jobs: n },
        `uid ${uid}: ${n} discovered jobs not registered (at most ${this.o.maxLiveJobsPerUid ?? MAX_LIVE_JOBS_PER_UID} live jobs and ${this.o.maxRegistrationsPerUidHour ?? MAX_REGISTRATIONS_PER_UID_HOUR} registrations per uid and hour); they are not watched`,
      );
      if (this.limitAudited.get(uid) !== hour) {
        this.limitAudited.set(uid, hour);
        await this.o.store.audit({
          who: WATCHER,
          action: 'watch-register',
          detail: `uid ${uid}: ${n} discovered jobs over the per-uid bounds, not registered`,
        });
      }
    }
    this.unregistered = unregistered;
  }

  /**
   * Whether every rank of `w` on `hosts` is verifiably gone: the agent's counters say each one's
   * process exited or its pid has another start time. Anything less (no answer, a live rank,
   * no ranks known) is not proof.
   */
  private async ranksGone(w: WatchJobRecord, hosts: readonly string[]): Promise<boolean> {
    if (w.jobId === null) return false;
    const job = await this.o.store.job(w.jobId);
    if (job === null) return false;
    for (const host of hosts) {
      const ranks: CounterTarget[] = job.ranks.flatMap((r) =>
        r.host === host && r.startTime !== undefined
          ? [{ rank: r.rank, pid: r.pid, startTime: r.startTime }]
          : [],
      );
      if (ranks.length === 0) return false;
      const reply = await this.o.agents.counters(
        host,
        { ranks, ownerUid: w.uid },
        this.o.countersTimeoutMs ?? 10_000,
      );
      if (!reply.ok || reply.value.ranks.length > 0) return false;
      const gone = new Set(reply.value.errors.filter((e) => GONE_CODES.has(e.error.code)).map((e) => e.rank));
      if (!ranks.every((r) => gone.has(r.rank))) return false;
    }
    return true;
  }

  /** Keeps an ended job's stop history (its last hour's), the oldest forgotten past the cap. */
  private keepStops(id: string, stops: StopHistory, now: number): void {
    for (const [rank, list] of stops) {
      const recent = list.filter((x) => x.at > now - HOUR_MS);
      if (recent.length > 0) stops.set(rank, recent);
      else stops.delete(rank);
    }
    this.endedStops.delete(id);
    if (stops.size > 0) this.endedStops.set(id, stops);
    for (const k of this.endedStops.keys()) {
      if (this.endedStops.size <= MAX_KEPT_STOP_HISTORIES) break;
      this.endedStops.delete(k);
    }
  }

  private async inPolicy(c: ClusterJob): Promise<boolean> {
    const p = this.policy;
    if (p.users.length > 0) {
      const name = await this.o.store.userNameOfUid(c.uid);
      if (!p.users.includes(String(c.uid)) && (name === null || !p.users.includes(name))) return false;
    }
    if (p.partitions.length > 0 && !p.partitions.includes(c.first.partition ?? '')) return false;
    if (p.accounts.length > 0 && !p.accounts.includes(c.first.account ?? '')) return false;
    if (p.programs !== undefined && p.programs.length > 0 && !programInScope(c.first.command, p.programs))
      return false;
    return true;
  }

  private async modeOf(c: ClusterJob, now: number, l?: Live): Promise<WatchMode> {
    if (!this.policy.enabled) return 'disabled';
    if (c.watch === 'off') return 'off-by-job';
    if (!(await this.inPolicy(c))) return 'off-by-policy';
    const live = l ?? this.live.get(c.id);
    if (live !== undefined && !this.budgetLeft(live, now)) return 'budget';
    return 'on';
  }

  /** Stop time of the rank stopped most in the last hour, ms. */
  private stopMsThisHour(l: Live, now: number): number {
    let most = 0;
    for (const list of l.stops.values()) {
      while (list.length > 0 && (list[0]?.at ?? now) <= now - HOUR_MS) list.shift();
      let sum = 0;
      for (const s of list) sum += s.micros;
      most = Math.max(most, sum);
    }
    return most / 1000;
  }

  /** Every rank can afford one more stop (its last stop's cost) within the hour's budget. */
  private budgetLeft(l: Live, now: number): boolean {
    const budgetMicros = this.policy.stopBudgetMsPerRankHour * 1000;
    if (budgetMicros <= 0) return false;
    for (const list of l.stops.values()) {
      while (list.length > 0 && (list[0]?.at ?? now) <= now - HOUR_MS) list.shift();
      let used = 0;
      for (const s of list) used += s.micros;
      const expected = list[list.length - 1]?.micros ?? 0;
      if (used + expected > budgetMicros) return false;
    }
    return true;
  }

  /**
   * When every rank can afford its next stop again (epoch ms): its oldest stops of the hour
   * leave the budget one by one. Null when the budget is not used up (or is 0: never).
   */
  private pausedUntil(l: Live, now: number): number | null {
    const budgetMicros = this.policy.stopBudgetMsPerRankHour * 1000;
    if (budgetMicros <= 0 || this.budgetLeft(l, now)) return null;
    let until = now;
    for (const list of l.stops.values()) {
      const expected = list[list.length - 1]?.micros ?? 0;
      let used = list.reduce((n, x) => n + x.micros, 0);
      for (const x of list) {
        if (used + expected <= budgetMicros) break;
        used -= x.micros;
        until = Math.max(until, x.at + HOUR_MS);
      }
    }
    return until;
  }

  /** The watch's verdict as the model's job state takes it. */
  private watchOf(w: WatchJobRecord, now: number): JobStateWatch {
    const l = this.live.get(w.id);
    return {
      state: w.state,
      since: w.since,
      diagnosis: w.diagnosis,
      confidence: w.confidence,
      pausedUntil:
        l !== undefined && l.mode === 'budget' && w.endedAt === null ? this.pausedUntil(l, now) : null,
    };
  }

  /** The watch's verdicts of live jobs, by the store job they are registered as. */
  async verdictsByJob(uid: number | null): Promise<Map<string, JobStateWatch>> {
    const now = this.o.clock();
    const out = new Map<string, JobStateWatch>();
    for (const w of await this.o.store.watchJobs(uid)) {
      if (w.jobId !== null && w.endedAt === null) out.set(w.jobId, this.watchOf(w, now));
    }
    return out;
  }

  private async counters(l: Live): Promise<{ counters: RankCounters[]; ticksPerSecond: number }> {
    const byHost = new Map<string, CounterTarget[]>();
    for (const r of l.cluster.ranks) {
      const list = byHost.get(r.host) ?? [];
      list.push({ rank: r.rank, pid: r.pid, startTime: r.startTime });
      byHost.set(r.host, list);
    }
    const counters: RankCounters[] = [];
    let ticksPerSecond = 100;
    await Promise.all(
      [...byHost].map(async ([host, ranks]) => {
        if (!this.o.agents.isConnected(host)) return;
        const r = await this.o.agents.counters(
          host,
          { ranks, ownerUid: l.cluster.uid },
          this.o.countersTimeoutMs ?? 10_000,
        );
        if (!r.ok) return;
        counters.push(...r.value.ranks);
        ticksPerSecond = r.value.clockTicksPerSecond;
      }),
    );
    counters.sort((a, b) => a.rank - b.rank);
    return { counters, ticksPerSecond };
  }

  private async sample(l: Live): Promise<void> {
    const { store, clock } = this.o;
    const hungAfterSamples = this.policy.hungAfterSamples;
    const { counters, ticksPerSecond } = await this.counters(l);
    const at = clock();
    // Stop only a job that is watched, with budget left, right now (the policy may have moved).
    l.mode = await this.modeOf(l.cluster, at, l);
    if (l.mode !== 'on' && l.mode !== 'budget') return;
    let read: ReadSnapshot | null = null;
    if (l.mode === 'on') {
      // Light: no forced collection in the reader after it (fanout.ts read).
      const r = await this.o.snapshots.read(l.job, WATCHER, { light: true });
      if (r.ok) {
        // Every stop is charged, an error rank's too (stopped, then its read failed): else a
        // rank that always fails would be stopped again every sample, budget or not.
        let total = 0;
        for (const rank of r.value.snapshot.ranks) {
          if (rank.pausedMicros === null) continue;
          total += rank.pausedMicros;
          const list = l.stops.get(rank.rank) ?? [];
          list.push({ at, micros: rank.pausedMicros });
          l.stops.set(rank.rank, list);
        }
        this.o.metrics?.stopped(total / 1e6);
      }
      // A read where no rank answered (agents gone or silent) is no snapshot: not stored.
      if (r.ok && r.value.summary.ok > 0) read = r.value;
    } else if (l.mode === 'budget') {
      this.o.metrics?.budgetSkipped();
    }
    this.o.metrics?.sampled();
    const sample: WatchSample = {
      at,
      counters,
      clockTicksPerSecond: ticksPerSecond,
      snapshot: read?.snapshot ?? null,
    };
    const prev = await store.watchJob(l.cluster.id);
    if (prev === null) return;
    if (l.mode === 'budget' && counters.length > 0 && prev.state !== 'unknown') {
      // No stop this time: nothing new about the queues. The last verdict holds, with its
      // since and diagnosis (the fleet says sampling is paused until the budget frees), and
      // the window keeps its samples with snapshots for when sampling resumes.
      await store.insertWatchSample(
        {
          watchId: l.cluster.id,
          at,
          state: prev.state,
          digest: null,
          ranksRead: counters.length,
          cpu: {
            ticks: counters.reduce((n, c) => n + c.cpuTicks, 0),
            running: counters.filter((c) => c.state === 'R').length,
            switches: counters.reduce((n, c) => n + c.switches, 0),
          },
          stopMicros: 0,
          snapshotId: null,
        },
        {
          state: prev.state,
          since: prev.since,
          confidence: prev.confidence,
          leastProgressed: prev.leastProgressed,
          diagnosis: prev.diagnosis,
          evidenceSnapshotId: prev.evidenceSnapshotId,
        },
      );
      return;
    }
    const digest = read?.summary.digest ?? null;
    const window = [...l.window, { sample, snapshotRef: null as SnapshotId | null }];
    if (window.length > hungAfterSamples + 1) window.splice(0, window.length - hungAfterSamples - 1);
    const v = this.o.verdict(
      window.map((w) => w.sample),
      { hungAfterSamples },
    );
    // A sample that read nothing (agents gone, every read failed) is unknown, never hung.
    const failed = counters.length === 0 && read === null;
    const state: WatchState = failed ? 'unknown' : v.state;
    const sinceAt = v.sinceIndex === null ? at : (window[v.sinceIndex]?.sample.at ?? at);
    const open = await store.openEpisode(l.cluster.id);
    // A hang that outlived a restart (its episode still open) keeps the episode's start.
    const since =
      state === 'hung' && open !== null
        ? open.startedAt
        : prev.state === state && prev.since !== null
          ? prev.since
          : failed
            ? at
            : sinceAt;
    let storedId: SnapshotId | null = null;
    if (
      read !== null &&
      digest !== null &&
      (prev.lastSnapshotId === null || digest !== prev.lastDigest || state !== prev.lastStateStored)
    ) {
      const m = await read.store();
      if (m.ok) storedId = m.value.id;
      else this.o.log?.warn({ event: 'watch.store', code: m.error.code, job: l.cluster.id }, m.error.message);
    }
    const ref = storedId ?? (digest !== null && digest === prev.lastDigest ? prev.lastSnapshotId : null);
    const last = window[window.length - 1];
    if (last !== undefined) window[window.length - 1] = { sample, snapshotRef: ref };
    l.window = window;
    const evidence =
      (v.evidenceIndex === null ? null : (window[v.evidenceIndex]?.snapshotRef ?? null)) ??
      ref ??
      prev.evidenceSnapshotId;
    await store.insertWatchSample(
      {
        watchId: l.cluster.id,
        at,
        state,
        digest,
        ranksRead: Math.max(counters.length, read?.summary.ok ?? 0),
        cpu: {
          ticks: counters.reduce((n, c) => n + c.cpuTicks, 0),
          running: counters.filter((c) => c.state === 'R').length,
          switches: counters.reduce((n, c) => n + c.switches, 0),
        },
        stopMicros: read?.snapshot.ranks.reduce((n, r) => n + (r.pausedMicros ?? 0), 0) ?? 0,
        snapshotId: storedId,
      },
      {
        state,
        since,
        confidence: failed ? null : v.confidence,
        leastProgressed: failed ? '' : v.leastProgressedText,
        diagnosis: failed ? 'no rank could be read in this sample' : v.diagnosis,
        evidenceSnapshotId: evidence,
        ...(storedId !== null && digest !== null ? { stored: { snapshotId: storedId, digest, state } } : {}),
      },
    );
    if (state !== prev.state)
      this.o.ui.toJob(l.cluster.uid, 'fleet.changed', { at: new Date(at).toISOString() });
    if (state === 'hung' && open === null) await this.openEpisode(l, since, evidence);
    else if (open !== null && (state === 'progressing' || state === 'computing')) {
      await store.closeWatchEpisode(l.cluster.id, at);
    }
  }

  /**
   * Keeps the cores of a job that just became hung (policy captureCores): each node's agent
   * writes its ranks' cores as the job's owner into `<its first core dir>/watch-<job>-<start>`.
   * Awaited by the job's sample, so the job is not stopped for a sample meanwhile.
   */
  private async captureCores(l: Live, since: number): Promise<ApiFleetCores | null> {
    const agents = this.o.agents;
    if (this.policy.captureCores !== true || !canCapture(agents)) return null;
    const byHost = new Map<string, CounterTarget[]>();
    for (const r of l.cluster.ranks) {
      const list = byHost.get(r.host) ?? [];
      list.push({ rank: r.rank, pid: r.pid, startTime: r.startTime });
      byHost.set(r.host, list);
    }
    const name = captureName(l.cluster.key, since);
    const nodes = await Promise.all(
      [...byHost].map(async ([host, ranks]) => ({
        host,
        ranks,
        reply: await agents.capture(
          host,
          { ranks, ownerUid: l.cluster.uid, name },
          this.o.captureTimeoutMs ?? 600_000,
        ),
      })),
    );
    const at = this.o.clock();
    // The cores' stops count against the ranks' stop budget like a sample's (and are reported).
    for (const n of nodes) {
      if (!n.reply.ok) continue;
      for (const r of n.reply.value.ranks) {
        if (r.pausedMicros <= 0) continue;
        const list = l.stops.get(r.rank) ?? [];
        list.push({ at, micros: r.pausedMicros });
        l.stops.set(r.rank, list);
      }
    }
    this.o.metrics?.stopped(
      nodes.reduce(
        (n, x) => n + (x.reply.ok ? x.reply.value.ranks.reduce((m, r) => m + r.pausedMicros, 0) : 0),
        0,
      ) / 1e6,
    );
    const cores = fleetCores(at, since, nodes);
    // The latest capture per job, the oldest forgotten first past MAX_KEPT_CORES jobs.
    this.cores.delete(l.cluster.id);
    this.cores.set(l.cluster.id, cores);
    for (const id of this.cores.keys()) {
      if (this.cores.size <= MAX_KEPT_CORES) break;
      this.cores.delete(id);
    }
    const kept = cores.ranks.filter((r) => r.core !== null).length;
    await this.o.store.audit({
      who: WATCHER,
      action: 'watch-cores',
      jobId: l.job.id,
      detail: `cores of ${kept} of ${cores.ranks.length} ranks kept in ${cores.dirs
        .map((d) => (d.dir === null ? `${d.host}: ${d.error ?? ''}` : `${d.host}:${d.dir}`))
        .join(', ')}`.slice(0, 500),
    });
    this.o.log?.info(
      { event: 'watch.cores', job: l.cluster.key, kept, ranks: cores.ranks.length },
      `cores of job ${l.cluster.key} kept`,
    );
    return cores;
  }

  /**
   * A new hang episode: a share link to its snapshot, its cores when the policy keeps them,
   * one notification (webhooks, /ui).
   */
  private async openEpisode(l: Live, since: number, snapshotId: SnapshotId | null): Promise<void> {
    const { store, clock } = this.o;
    const now = clock();
    let shareId: string | null = null;
    if (snapshotId !== null && (await store.snapshotMeta(snapshotId)) !== null) {
      shareId = randomBytes(18).toString('base64url');
      await store.insertShare(
        {
          id: shareId,
          snapshotId,
          createdBy: WATCHER,
          createdAt: now,
          expiresAt: now + this.o.shareTtlSeconds * 1000,
          madeBy: 'watch',
        },
        { who: WATCHER, action: 'share', jobId: l.job.id, snapshotId, detail: `hang of ${l.cluster.key}` },
      );
    }
    const episode = await store.openWatchEpisode({
      watchId: l.cluster.id,
      startedAt: since,
      snapshotId,
      shareId,
    });
    const cores = await this.captureCores(l, since);
    const multiNode = (cores?.dirs.length ?? 0) > 1;
    const kept = (cores?.dirs ?? []).flatMap((d) =>
      d.dir === null ? [] : [multiNode ? `${d.host}:${d.dir}` : d.dir],
    );
    const w = await store.watchJob(l.cluster.id);
    const base = this.o.linkBase()?.replace(/\/$/, '') ?? null;
    const notice: HangNotice = {
      jobKey: l.cluster.key,
      jobId: l.job.id,
      slurmJob: l.cluster.first.slurmJob ?? null,
      user: await store.userNameOfUid(l.cluster.uid),
      uid: l.cluster.uid,
      state: 'hung',
      since: new Date(since).toISOString(),
      leastProgressed: w?.leastProgressed ?? '',
      diagnosis: w?.diagnosis ?? '',
      link: shareId === null || base === null ? null : `${base}/s/${shareId}`,
      ...(kept.length > 0 ? { cores: kept } : {}),
    };
    this.o.ui.toJob(l.cluster.uid, 'fleet.changed', { at: new Date(now).toISOString() });
    await store.audit({
      who: WATCHER,
      action: 'watch-notify',
      jobId: l.job.id,
      snapshotId,
      detail: `hung since ${notice.since}: ${notice.diagnosis}`.slice(0, 500),
    });
    this.o.log?.info(
      { event: 'watch.hung', job: l.cluster.key, uid: l.cluster.uid, snapshotId },
      `job ${l.cluster.key} is hung`,
    );
    if (this.o.webhooks.length === 0) return;
    const p = sendWebhooks(webhookBody(notice, infoOf(l.cluster).program), {
      urls: this.o.webhooks,
      ...(this.o.fetch ? { fetch: this.o.fetch } : {}),
      ...(this.o.webhookBackoffMs === undefined ? {} : { backoffMs: this.o.webhookBackoffMs }),
      ...(this.o.webhookTimeoutMs === undefined ? {} : { timeoutMs: this.o.webhookTimeoutMs }),
      log: (f, m) => this.o.log?.warn(f, m),
      outcome: (x) => this.o.metrics?.notified(x),
    })
      .then(async () => {
        if (store.isOpen) await store.episodeNotified(episode, clock());
      })
      // Outside any request: a store failure is logged, never an unhandled rejection.
      .catch((e: unknown) =>
        this.o.log?.warn({ event: 'watch.notified', err: String(e) }, 'notification not recorded'),
      );
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }

  /**
   * A page of the fleet as `user` may see it (admins every job, users their uid's, never uid
   * 0's): a few store queries whatever the page's size (StorePort.fleetPage), and discovery as
   * the last round or refresh left it; one refresh starts in the background when that is older
   * than FLEET_REFRESH_MS (with the watch off, nothing else refreshes it).
   */
  async fleet(user: User, page: { limit: number; offset: number; q?: string }): Promise<FleetAnswer> {
    this.refreshSoon();
    if (!user.admin && user.uid === null) return { total: 0, jobs: [] };
    const now = this.o.clock();
    const uid = user.admin ? null : user.uid;
    const q = page.q?.trim() ?? '';
    const read =
      q === ''
        ? await this.o.store.fleetPage({
            uid,
            limit: page.limit,
            offset: page.offset,
            history: FLEET_HISTORY,
          })
        : await this.searchPage(uid, q, page);
    const iso = (t: number) => new Date(t).toISOString();
    const jobs = read.jobs.map(({ job: w, user: userName, samples, history }): ApiFleetJob => {
      const l = this.live.get(w.id);
      return {
        key: w.key,
        jobId: w.jobId,
        kind: w.info.kind,
        slurmJob: w.info.slurmJob,
        program: w.info.program,
        command: w.info.command,
        uid: w.uid,
        user: userName ?? passwdName(w.uid),
        partition: w.info.partition,
        account: w.info.account,
        nodes: [...w.info.nodes],
        rankCount: w.info.rankCount,
        startedAt: iso(w.info.startedAt),
        endedAt: w.endedAt === null ? null : iso(w.endedAt),
        endReason: w.endReason,
        // A job no agent reports now keeps the mode its last report gave.
        watch: l?.mode ?? (!this.policy.enabled ? 'disabled' : w.info.watch === 'off' ? 'off-by-job' : 'on'),
        state: w.state,
        since: w.since === null ? null : iso(w.since),
        pausedUntil: (() => {
          const until = w.endedAt === null ? this.watchOf(w, now).pausedUntil : null;
          return until === null || until === undefined ? null : iso(until);
        })(),
        confidence: w.confidence,
        leastProgressed: w.leastProgressed,
        diagnosis: w.diagnosis,
        snapshotId: w.evidenceSnapshotId ?? w.lastSnapshotId,
        history: history.map(
          (h): ApiFleetSample => ({ at: iso(h.at), state: h.state, snapshotId: h.snapshotId }),
        ),
        samples,
        stopMsThisHour: l === undefined ? 0 : Math.round(this.stopMsThisHour(l, now)),
        stopBudgetMs: this.policy.stopBudgetMsPerRankHour,
        cores: this.cores.get(w.id) ?? null,
      };
    });
    return { total: read.total, jobs };
  }

  /**
   * A fleet page of the jobs matching a search (every word in the program, command, user, key,
   * Slurm id or a node), in the fleet's order: live hung first, then live, then ended; newest
   * first in each. The matching is done here over the user's watch jobs (one query), the page's
   * samples and names after.
   */
  private async searchPage(
    uid: number | null,
    q: string,
    page: { limit: number; offset: number },
  ): Promise<{ total: number; jobs: FleetPageEntry[] }> {
    const store = this.o.store;
    const all = await store.watchJobs(uid);
    const names = await userNames(
      store,
      all.map((w) => w.uid),
    );
    const words = q
      .toLowerCase()
      .split(/\s+/)
      .filter((w) => w !== '');
    const hit = all.filter((w) => {
      const hay = [
        w.info.program,
        w.info.command,
        names.get(w.uid) ?? '',
        `uid ${w.uid}`,
        w.key,
        w.jobId ?? '',
        w.info.slurmJob ?? '',
        ...w.info.nodes,
      ]
        .join('\n')
        .toLowerCase();
      return words.every((x) => hay.includes(x));
    });
    const group = (w: WatchJobRecord) => (w.endedAt === null ? (w.state === 'hung' ? 0 : 1) : 2);
    hit.sort((a, b) => group(a) - group(b) || b.firstSeen - a.firstSeen || a.id.localeCompare(b.id));
    const shown = hit.slice(page.offset, page.offset + page.limit);
    const jobs = await Promise.all(
      shown.map(async (w): Promise<FleetPageEntry> => {
        const [samples, history] = await Promise.all([
          store.countWatchSamples(w.id),
          store.watchSamples(w.id, FLEET_HISTORY),
        ]);
        return {
          job: w,
          user: names.get(w.uid) ?? null,
          samples,
          history: [...history]
            .reverse()
            .map((h) => ({ at: h.at, state: h.state, snapshotId: h.snapshotId })),
        };
      }),
    );
    return { total: hit.length, jobs };
  }

  /** Starts one discovery refresh unless one runs or the last is younger than FLEET_REFRESH_MS. */
  private refreshSoon(): void {
    if (this.closed || this.refreshing !== null) return;
    if (this.o.clock() - this.refreshedAt < FLEET_REFRESH_MS) return;
    const p = this.refresh()
      .then(() => undefined)
      // Outside any request: a store failure is logged, never an unhandled rejection.
      .catch((e: unknown) =>
        this.o.log?.warn({ event: 'watch.refresh', err: String(e) }, 'a fleet refresh failed'),
      )
      .finally(() => {
        this.refreshing = null;
        this.pending.delete(p);
      });
    this.refreshing = p;
    this.pending.add(p);
  }

  /** mqd_job_state: each live discovered job's state. */
  async jobStates(): Promise<JobStateSeries[]> {
    const live = (await this.o.store.watchJobs(null)).filter((w) => w.endedAt === null);
    const names = await Promise.all(live.map((w) => this.o.store.userNameOfUid(w.uid)));
    return live.map((w, i) => ({
      job: w.info.slurmJob ?? w.key,
      user: names[i] ?? String(w.uid),
      partition: w.info.partition ?? '',
      state: w.state,
    }));
  }
}

/** The live job someone attached that is this cluster job (its starter's identity, owner and ranks), or null. */
async function attachedJobOf(store: StorePort, c: ClusterJob): Promise<JobRecord | null> {
  const pid = c.first.starterPid;
  const start = c.first.starterStartTime;
  if (pid === undefined || start === undefined) return null;
  const j = await store.findJob(c.host, pid, start);
  if (j === null || j.endedAt !== null || j.uid !== c.uid || j.coresDir !== undefined) return null;
  const pids = new Set(j.ranks.map((r) => `${r.host}/${r.pid}`));
  return j.ranks.length === c.ranks.length && c.ranks.every((r) => pids.has(`${r.host}/${r.pid}`)) ? j : null;
}
