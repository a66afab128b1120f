// Which snapshot the page shows and its loading: the synthetic demo, a share (`/s/<id>`), or a
// live snapshot (`snap=`, or the latest of `job=` when the link names no snapshot); and what a
// view of one snapshot shows while there is none yet.
import { useEffect, useMemo } from 'react';
import type { Api, ApiError, SnapshotListEntry } from './api.js';
import { cachedSnapshot, type LoadedSnapshot, rememberSnapshot } from './data.js';
import { demoSnapshot } from './demo.js';
import { type Resource, shownValue, useResource } from './hooks.js';
import { ErrorBox, Progress } from './ui.js';
import { jobNeedingLatest, latestSnapshot, type UrlState } from './url-state.js';
import type { SetUrl } from './view-types.js';

export interface ViewedSnapshot {
  /** The snapshot to show, null while none is loaded. */
  readonly data: LoadedSnapshot | null;
  readonly loading: boolean;
  readonly error: ApiError | null;
  /** The job's snapshots, looked up when the link names a job and no snapshot. */
  readonly latest: Resource<SnapshotListEntry[]>;
}

/** Loads the snapshot the URL names; `paused` (the page is at the login form) looks nothing up. */
export function useViewedSnapshot(api: Api, url: UrlState, setUrl: SetUrl, paused: boolean): ViewedSnapshot {
  const shareKey = url.share;
  const [shared] = useResource(
    shareKey === null || url.demo !== null ? null : `share:${shareKey}`,
    (signal) => api.shared(shareKey ?? '', signal),
  );
  // A link to a job without a snapshot (`?view=matrix&job=7`) opens the job's latest snapshot.
  const latestFor = paused ? null : jobNeedingLatest(url);
  const [latest] = useResource(latestFor === null ? null : `latest:${latestFor}`, (signal) => {
    if (latestFor === null) throw new Error('unreachable: the loader runs only with a job to look up');
    return api.snapshots(latestFor, signal);
  });
  useEffect(() => {
    if (latestFor === null || latest.status !== 'ready') return;
    const newest = latestSnapshot(latest.value);
    if (newest !== null) setUrl({ snap: newest.id }, 'replace');
  }, [latestFor, latest, setUrl]);

  const snapId = url.snap;
  const [live] = useResource(
    url.demo !== null || url.share !== null || snapId === null ? null : `snap:${snapId}`,
    async (signal) => {
      if (snapId === null) throw new Error('unreachable: the loader runs only with a snapshot id');
      const hit = cachedSnapshot(snapId);
      if (hit) return { ok: true, value: { id: snapId, ...hit } } as const;
      const r = await api.snapshot(snapId, signal);
      if (r.ok) rememberSnapshot(r.value.id, r.value);
      return r;
    },
  );

  const data: LoadedSnapshot | null = useMemo(() => {
    if (url.demo !== null) return demoSnapshot(url.demo, url.scenario);
    if (url.share !== null) {
      const s = shownValue(shared);
      return s
        ? {
            key: `share:${url.share}`,
            source: 'shared',
            snapshotId: null,
            jobId: s.jobId,
            takenAt: s.takenAt,
            snapshot: s.snapshot,
            readOnly: true,
          }
        : null;
    }
    const s = shownValue(live);
    return s && s.id === url.snap
      ? {
          key: `snap:${s.id}`,
          source: 'live',
          snapshotId: s.id,
          jobId: s.jobId,
          takenAt: s.takenAt,
          snapshot: s.snapshot,
          readOnly: false,
        }
      : null;
  }, [url.demo, url.scenario, url.share, url.snap, shared, live]);

  if (url.share !== null) {
    return {
      data,
      loading: shared.status === 'loading',
      error: shared.status === 'error' ? shared.error : null,
      latest,
    };
  }
  return {
    data,
    loading: live.status === 'loading' || latest.status === 'loading',
    error: live.status === 'error' ? live.error : latest.status === 'error' ? latest.error : null,
    latest,
  };
}

/** A view of one snapshot before there is one: loading, the error, or where to get one. */
export function NoSnapshot({
  url,
  setUrl,
  viewed,
}: {
  url: UrlState;
  setUrl: SetUrl;
  viewed: ViewedSnapshot;
}) {
  const { loading, error, latest } = viewed;
  if (loading)
    return (
      <Progress
        what={
          url.share !== null
            ? 'Loading the shared snapshot…'
            : url.snap === null && url.job !== null
              ? `Opening the latest snapshot of job ${url.job}…`
              : 'Loading the snapshot…'
        }
      />
    );
  if (error) return <ErrorBox error={error} />;
  if (url.job !== null && url.snap === null && latest.status === 'ready' && latest.value.length === 0) {
    return (
      <div className="empty" data-testid="no-snapshot">
        <p>Job {url.job} has no snapshots yet.</p>
        <p>
          <button type="button" onClick={() => setUrl({ view: 'jobs' })}>
            Take one in the jobs view
          </button>
        </p>
      </div>
    );
  }
  return (
    <div className="empty" data-testid="no-snapshot">
      <p>Pick a job and a snapshot first.</p>
      <p>
        <button type="button" onClick={() => setUrl({ view: 'jobs' })}>
          Go to jobs
        </button>{' '}
        or <a href="/?demo=1024">open a synthetic 1,024-rank demo</a>.
      </p>
    </div>
  );
}
