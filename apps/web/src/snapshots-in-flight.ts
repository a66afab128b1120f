// Snapshots in flight, in one store fed from both sides: this page's REST calls (`takeSnapshot`
// started and answered) and the live events of the watched job (progress, done, failed), whoever
// started that snapshot. The App's bar is for snapshots started elsewhere (another user, tab,
// the CLI, auto-snapshots): while this page's own call for a job is in flight, the job's events
// are that call's and the jobs view shows them with the REST answer, so the App shows nothing.
import type { Disposable, JobId } from '@mqd/model';
import { useEffect, useMemo, useSyncExternalStore } from 'react';
import type { Api, ApiError } from './api.js';
import type { Live } from './live.js';
import { SNAPSHOT_IDLE, type SnapshotProgress, type SnapshotTaking, snapshotReducer } from './live-events.js';

export interface InFlightState {
  /** This page's REST snapshot calls still waiting for their answer, by job. */
  readonly own: ReadonlyMap<JobId, number>;
  /** The watched job's snapshot as the live events tell it (progress only moves forward). */
  readonly taking: SnapshotTaking;
}

const EMPTY: InFlightState = { own: new Map(), taking: SNAPSHOT_IDLE };

export class SnapshotsInFlight {
  private state: InFlightState = EMPTY;
  private readonly listeners = new Set<() => void>();

  current = (): InFlightState => this.state;

  subscribe = (fn: () => void): Disposable => {
    this.listeners.add(fn);
    return { dispose: () => this.listeners.delete(fn) };
  };

  // --- REST ---
  /** This page asked for a snapshot of `job`. */
  started(job: JobId): void {
    this.countOwn(job, 1);
  }

  /** This page's call for `job` answered (either way): its events were that snapshot's. */
  answered(job: JobId): void {
    this.countOwn(job, -1);
    this.dismiss(job);
  }

  // --- live events ---
  progress(event: SnapshotProgress): void {
    const s = this.state.taking;
    const busy =
      s.kind === 'busy' && s.job === event.jobId
        ? s
        : snapshotReducer(s, { type: 'start', job: event.jobId });
    this.setTaking(snapshotReducer(busy, { type: 'progress', event }));
  }

  done(job: JobId): void {
    this.setTaking(snapshotReducer(this.state.taking, { type: 'succeeded', job }));
  }

  /** A failure ends the bar even when no progress event came first (it failed at once). */
  failed(job: JobId, error: ApiError): void {
    const s = this.state.taking;
    const busy = s.kind === 'busy' && s.job === job ? s : snapshotReducer(s, { type: 'start', job });
    this.setTaking(snapshotReducer(busy, { type: 'failed', job, error }));
  }

  /** Forget what is known of `job`'s snapshot (its failure was read, or its answer came by REST). */
  dismiss(job: JobId): void {
    const s = this.state.taking;
    this.setTaking(
      s.kind === 'error' && s.job === job ? SNAPSHOT_IDLE : snapshotReducer(s, { type: 'succeeded', job }),
    );
  }

  /** Stop watching: a newly watched job starts from nothing. */
  unwatch(): void {
    this.setTaking(SNAPSHOT_IDLE);
  }

  /** The snapshot of `job` started elsewhere: idle while this page's own call for it is in flight. */
  elsewhere(job: JobId | null): SnapshotTaking {
    const t = this.state.taking;
    if (t.kind === 'idle' || job === null || t.job !== job || this.state.own.has(job)) return SNAPSHOT_IDLE;
    return t;
  }

  private countOwn(job: JobId, by: number): void {
    const own = new Map(this.state.own);
    const n = (own.get(job) ?? 0) + by;
    if (n > 0) own.set(job, n);
    else own.delete(job);
    this.set({ ...this.state, own });
  }

  private setTaking(taking: SnapshotTaking): void {
    if (taking !== this.state.taking) this.set({ ...this.state, taking });
  }

  private set(next: InFlightState): void {
    this.state = next;
    for (const fn of [...this.listeners]) fn();
  }
}

/** Feeds `store` with the live events of `job` while watched; returns the disposable. */
export function watchJob(store: SnapshotsInFlight, live: Live, job: JobId): Disposable {
  const subs = [
    live.onProgress(job, (e) => store.progress(e)),
    live.onDone((e) => {
      if (e.jobId === job) store.done(job);
    }),
    live.onFailed((e) => {
      if (e.jobId === job) store.failed(job, e.error);
    }),
  ];
  return {
    dispose: () => {
      for (const s of subs) s.dispose();
      store.unwatch();
    },
  };
}

/** `api` whose `takeSnapshot` tells `store` when it starts and when it answers. */
export function reportingApi(api: Api, store: SnapshotsInFlight): Api {
  return {
    ...api,
    takeSnapshot: async (job) => {
      store.started(job);
      try {
        return await api.takeSnapshot(job);
      } finally {
        store.answered(job);
      }
    },
  };
}

/**
 * The page's store: watches `job` on `live`, and gives the api the jobs view takes snapshots
 * with, and what the App shows of snapshots of `job` started elsewhere.
 */
export function useSnapshotsInFlight(
  api: Api,
  live: Live | null,
  job: JobId | null,
): { readonly store: SnapshotsInFlight; readonly api: Api; readonly elsewhere: SnapshotTaking } {
  const store = useMemo(() => new SnapshotsInFlight(), []);
  const reporting = useMemo(() => reportingApi(api, store), [api, store]);
  useEffect(() => {
    if (live === null || job === null) return;
    const d = watchJob(store, live, job);
    return () => d.dispose();
  }, [store, live, job]);
  useSyncExternalStore((fn) => {
    const d = store.subscribe(fn);
    return () => d.dispose();
  }, store.current);
  return { store, api: reporting, elsewhere: store.elsewhere(job) };
}
