// Which snapshot the page shows and its loading: the synthetic demo, a share (`/s/<id>`), or a
// live snapshot (`snap=`, or the latest of `job=` when the link names no snapshot, or names one
// no longer stored: then a one-line notice says so); and what a view of one snapshot shows while
// there is none yet.
//
// A stored or shared snapshot loads in steps: first the server's overview of it, read as it
// arrives: its first part (the explanation, the header, the matrix's first level: ~0.5 MB for
// 100,000 ranks), which the header, the diagnosis and the matrix draw at once, then its edge
// table (~11 MB there), which the matrix's filters, zoom and cells need; then, once the matrix
// drawn from the table is on screen (first-shown.ts), the whole snapshot, which takes the
// overview's explanation and edge table instead of computing them again. An overview that fails
// costs nothing but time: the whole snapshot is loaded as before.

import type { JobId, JobSnapshot, OverviewFirst, SnapshotId, SnapshotOverview } from '@mqd/model';
import { useEffect, useMemo, useState } from 'react';
import type { Api, ApiError, ApiResult, SnapshotListEntry, StoredSnapshot } from './api.js';
import { cachedSnapshot, type LoadedOverview, type LoadedSnapshot, rememberSnapshot } from './data.js';
import { demoSnapshot } from './demo.js';
import { arrived, markShown, whenFirstFrame, whenShown } from './first-shown.js';
import { type Resource, shownValue, useResource } from './hooks.js';
import { contextOf } from './snapshot-context.js';
import { ErrorBox, Progress } from './ui.js';
import { jobNeedingLatest, latestSnapshot, type UrlState, viewNeedsSnapshot } from './url-state.js';
import type { SetUrl } from './view-types.js';

export interface ViewedSnapshot {
  /** The snapshot to show, null while none is loaded. */
  readonly data: LoadedSnapshot | null;
  /** Its overview while the whole snapshot loads; null once it is here, or when there is none. */
  readonly early: LoadedOverview | null;
  readonly loading: boolean;
  readonly error: ApiError | null;
  /** The job's snapshots, looked up when the link names a job and no snapshot. */
  readonly latest: Resource<SnapshotListEntry[]>;
  /**
   * "Snapshot N was removed by retention; showing the newest snapshot of job J, taken HH:MM"
   * while the page shows the newest snapshot in place of one a link named; else null.
   */
  readonly notice: string | null;
}

/** A stored snapshot, and the one the link named when this one is shown in its place. */
type LiveSnapshot = StoredSnapshot & {
  readonly replaces?: { readonly id: SnapshotId; readonly removed: boolean };
};

/** The newest snapshot shown in place of `from` (pruned, or never stored). */
interface Replaced {
  readonly from: SnapshotId;
  readonly removed: boolean;
  readonly job: JobId;
  readonly to: SnapshotId;
  readonly takenAt: string;
}

const clockOf = (iso: string) =>
  new Date(iso).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });

/** The notice's sentence. */
export function replacedNotice(r: Replaced): string {
  const what = r.removed ? 'was removed by retention' : 'is not stored';
  return `Snapshot ${r.from} ${what}; showing the newest snapshot of job ${r.job}, taken ${clockOf(r.takenAt)}`;
}

/**
 * A snapshot the link names, by id; when it is not stored and the link names its job (`job=`),
 * the job's newest snapshot instead, marked with the one it replaces. Without `job=`, or when the
 * job has none, the coded error stays.
 */
async function loadLive(
  api: Api,
  id: SnapshotId,
  job: JobId | null,
  signal: AbortSignal,
): Promise<ApiResult<LiveSnapshot>> {
  const r = await api.snapshot(id, signal);
  if (r.ok || r.error.code !== 'MQD_E_NOT_FOUND' || job === null) return r;
  const list = await api.snapshots(job, signal);
  const newest = list.ok ? latestSnapshot(list.value) : null;
  if (newest === null || newest.id === id) return r;
  const n = await api.snapshot(newest.id, signal);
  if (!n.ok) return r;
  const removed = r.error.message.includes('was removed by retention');
  return { ok: true, value: { ...n.value, replaces: { id, removed } } };
}

/** Loads the snapshot the URL names; `paused` (the page is at the login form) looks nothing up. */
export function useViewedSnapshot(api: Api, url: UrlState, setUrl: SetUrl, paused: boolean): ViewedSnapshot {
  const shareKey = url.share;
  const sharedKey = shareKey === null || url.demo !== null ? null : `share:${shareKey}`;
  // Only the matrix waits for its first frame from the overview before the whole snapshot loads;
  // the other views need the whole snapshot anyway.
  const wantsOverview = viewNeedsSnapshot(url.view);
  const gated = url.view === 'matrix';
  // The newest overview's first part, until its whole overview is here.
  const [first, setFirst] = useState<{ readonly key: string; readonly value: OverviewFirst } | null>(null);
  // The matrix draws from an overview's first part: the rest of the overview waits for that frame.
  const onFirst = (key: string, value: OverviewFirst) => {
    setFirst({ key, value });
    return gated ? whenFirstFrame(key) : undefined;
  };
  const [sharedOverview] = useOverview(api, wantsOverview ? sharedKey : null, shareKey, true, onFirst);
  const [shared] = useResource(sharedKey, async (signal) => {
    const key = sharedKey ?? '';
    if (gated) await whenShown(key);
    const r = await api.shared(shareKey ?? '', signal);
    if (r.ok) seedFromOverview(key, r.value.snapshot);
    return r;
  });
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
  const [replaced, setReplaced] = useState<Replaced | null>(null);
  const liveKey = url.demo !== null || url.share !== null || snapId === null ? null : `snap:${snapId}`;
  const [liveOverview] = useOverview(
    api,
    wantsOverview && liveKey !== null && snapId !== null && cachedSnapshot(snapId) === undefined
      ? liveKey
      : null,
    snapId,
    false,
    onFirst,
  );
  const jobOfLink = url.job;
  const [live] = useResource<LiveSnapshot>(liveKey, async (signal) => {
    if (snapId === null || liveKey === null)
      throw new Error('unreachable: the loader runs only with a snapshot id');
    const hit = cachedSnapshot(snapId);
    if (hit) return { ok: true, value: { id: snapId, ...hit } } as const;
    if (gated) await whenShown(liveKey);
    const r = await loadLive(api, snapId, jobOfLink, signal);
    if (r.ok) {
      const { id, jobId, takenAt, snapshot } = r.value;
      if (id === snapId) seedFromOverview(liveKey, snapshot);
      rememberSnapshot(id, { jobId, takenAt, snapshot });
    }
    return r;
  });
  // The newest snapshot came in place of the one named: the URL names it, the notice says why.
  useEffect(() => {
    if (live.status !== 'ready') return;
    const v = live.value;
    if (v.replaces === undefined) return;
    setReplaced({
      from: v.replaces.id,
      removed: v.replaces.removed,
      job: v.jobId,
      to: v.id,
      takenAt: v.takenAt,
    });
    setUrl({ snap: v.id }, 'replace');
  }, [live, setUrl]);
  const notice =
    replaced !== null && url.share === null && url.snap === replaced.to && url.job === replaced.job
      ? replacedNotice(replaced)
      : null;

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

  // The overview (or its first part), until the whole snapshot is here.
  const early: LoadedOverview | null = useMemo(() => {
    if (data !== null) return null;
    // The whole overview when it is here, else its first part when that is this key's.
    const overviewOf = (r: Resource<SnapshotOverview>, key: string): OverviewFirst | null =>
      r.status === 'ready' ? r.value : first?.key === key ? first.value : null;
    const shared = url.share === null ? null : overviewOf(sharedOverview, `share:${url.share}`);
    if (shared !== null) {
      return {
        key: `share:${url.share}`,
        source: 'shared',
        snapshotId: null,
        jobId: null,
        takenAt: shared.head.takenAt,
        overview: shared,
        readOnly: true,
      };
    }
    const live = url.snap === null ? null : overviewOf(liveOverview, `snap:${url.snap}`);
    if (url.share === null && live !== null) {
      return {
        key: `snap:${url.snap}`,
        source: 'live',
        snapshotId: url.snap,
        jobId: url.job,
        takenAt: live.head.takenAt,
        overview: live,
        readOnly: false,
      };
    }
    return null;
  }, [data, url.share, url.snap, url.job, sharedOverview, liveOverview, first]);

  if (url.share !== null) {
    return {
      data,
      early,
      loading: shared.status === 'loading',
      error: shared.status === 'error' ? shared.error : null,
      latest,
      notice: null,
    };
  }
  return {
    data,
    early,
    loading:
      live.status === 'loading' ||
      latest.status === 'loading' ||
      // The newest snapshot in place of the one named, until the URL names it.
      (live.status === 'ready' && live.value.id !== url.snap),
    error: live.status === 'error' ? live.error : latest.status === 'error' ? latest.error : null,
    latest,
    notice,
  };
}

/** The notice of a snapshot shown in place of the one a link named (ViewedSnapshot.notice). */
export function SnapshotNotice({ viewed }: { viewed: ViewedSnapshot }) {
  if (viewed.notice === null) return null;
  return (
    <div className="banner" role="status" data-testid="snapshot-notice">
      {viewed.notice}
    </div>
  );
}

/**
 * Overviews fetched, by the key of their snapshot (`snap:ID`, `share:ID`), for the whole snapshot
 * to take over. Each is held only until its snapshot arrives; a page that opens overviews without
 * their snapshots (picking through large snapshots quickly) keeps the last few, 14 MB each at
 * 100,000 ranks.
 */
const MAX_OVERVIEWS = 4;
const overviews = new Map<string, SnapshotOverview>();

function keepOverview(key: string, o: SnapshotOverview): void {
  overviews.delete(key);
  overviews.set(key, o);
  for (const oldest of overviews.keys()) {
    if (overviews.size <= MAX_OVERVIEWS) break;
    overviews.delete(oldest);
  }
}

/** The whole snapshot of `key` arrived: its context takes what the overview already holds. */
function seedFromOverview(key: string, snapshot: JobSnapshot): void {
  const o = overviews.get(key);
  if (o === undefined) return;
  overviews.delete(key);
  contextOf(snapshot).seed(o);
}

/**
 * The overview of a stored (`share` false) or shared snapshot, for `key` (null: none wanted);
 * its first part goes to `onFirst` as soon as it is here, and the rest is read once what
 * `onFirst` returns has settled. Its failure only lets the whole
 * snapshot load at once: it is not the page's error.
 */
function useOverview(
  api: Api,
  key: string | null,
  id: string | null,
  share: boolean,
  onFirst: (key: string, first: OverviewFirst) => undefined | Promise<void>,
) {
  return useResource<SnapshotOverview>(key, async (signal) => {
    const r = await api.overview(id ?? '', share, signal, (value) =>
      key !== null && !signal.aborted ? onFirst(key, value) : undefined,
    );
    if (key !== null) {
      if (r.ok) {
        keepOverview(key, r.value);
        arrived(key);
      } else {
        console.warn(`MQD: no overview of ${key}, loading the whole snapshot (${r.error.message})`);
        markShown(key);
      }
    }
    return r;
  });
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
