// The dashboard shell: URL state (the single source of truth for what is shown), the snapshot
// being viewed, login, the header with view tabs and sharing, and keyboard shortcuts.
import { assertUnreachable, type JobId, type SnapshotId } from '@mqd/model';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { type Api, type ApiError, isUnauthenticated, type SnapshotListEntry } from './api.js';
import { Diagnosis } from './Diagnosis.js';
import { cachedSnapshot, type LoadedSnapshot, rememberSnapshot } from './data.js';
import { demoSnapshot } from './demo.js';
import { FleetPage } from './fleet/FleetView.js';
import { formatCoreSource, formatTime } from './format.js';
import { type Resource, shownValue, useJobSnapshotProgress, useResource } from './hooks.js';
import { trackBusy } from './idle.js';
import { JobsView } from './jobs/JobsView.js';
import { OrderView } from './matching/OrderView.js';
import { MatrixView } from './matrix/MatrixView.js';
import { RankView } from './rank/RankView.js';
import { StacksView } from './stacks/StacksView.js';
import { TimelineView } from './timeline/TimelineView.js';
import { ErrorBox, Progress, SnapshotProgressBar } from './ui.js';
import {
  jobNeedingLatest,
  latestSnapshot,
  parseUrl,
  type UrlState,
  urlOf,
  VIEW_KEYS,
  type View,
  viewNeedsSnapshot,
} from './url-state.js';
import { useLiveConnection } from './use-live.js';
import type { SetUrl, ViewProps } from './view-types.js';

// Still re-exported for the pages not yet moved to ./view-types.js (jobs, fleet, matrix/CellOps).

const TABS: readonly { view: View; label: string; title: string; key: string }[] = [
  { view: 'jobs', label: 'Jobs', title: 'Jobs and snapshots', key: 'j' },
  { view: 'matrix', label: 'Matrix', title: 'Message matrix: senders x receivers', key: 'm' },
  { view: 'timeline', label: 'Timeline', title: 'Queue depth across snapshots', key: 't' },
  { view: 'order', label: 'Matching order', title: 'Matching order of one rank and communicator', key: 'o' },
  { view: 'rank', label: 'Rank', title: 'Everything about one rank', key: 'r' },
  { view: 'stacks', label: 'Stacks', title: 'Every rank’s stack, merged into one call tree', key: 's' },
  { view: 'fleet', label: 'Fleet', title: 'Agents, hung jobs and activity (admins)', key: 'f' },
];

function useUrlState(): [UrlState, SetUrl] {
  const [url, setState] = useState(() => parseUrl(location.pathname, location.search));
  // The latest state, so that setUrl stays stable and history is written outside React updaters.
  const current = useRef(url);
  useEffect(() => {
    const onPop = () => {
      current.current = parseUrl(location.pathname, location.search);
      setState(current.current);
    };
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, []);
  const setUrl = useCallback<SetUrl>((patch, how = 'push') => {
    const next = { ...current.current, ...patch };
    current.current = next;
    const target = urlOf(next);
    if (target !== `${location.pathname}${location.search}`) {
      if (how === 'push') history.pushState(null, '', target);
      else history.replaceState(null, '', target);
    }
    setState(next);
  }, []);
  return [url, setUrl];
}

function isTyping(e: KeyboardEvent): boolean {
  const t = e.target;
  return (
    t instanceof HTMLElement && (t.isContentEditable || ['INPUT', 'SELECT', 'TEXTAREA'].includes(t.tagName))
  );
}

/**
 * A `?token=` link of another user than the one this browser is signed in as: the server kept
 * the session (MQD_E_SESSION_CONFLICT, whose message names both users) and only a click here
 * replaces it. A link someone else sent must not sign an admin in as them unasked.
 */
export interface PendingSwitch {
  readonly token: string;
  readonly error: ApiError;
}

export function App({ api, pendingSwitch = null }: { api: Api; pendingSwitch?: PendingSwitch | null }) {
  const [url, setUrl] = useUrlState();
  const [switchAsk, setSwitchAsk] = useState(pendingSwitch);
  const [needLogin, setNeedLogin] = useState(false);
  // Live events need a session: shared and demo pages never connect, and a page sent to the
  // login form stops (logging in reloads the page, which connects again).
  const livePage = url.share === null && url.demo === null;
  const liveEvents = useLiveConnection(livePage && !needLogin);
  // Who is logged in decides whether the fleet tab is offered; shared and demo pages have no session.
  const [me] = useResource(livePage && !needLogin ? 'me' : null, (signal) => api.me(signal));
  const isAdmin = shownValue(me)?.admin === true;

  // Snapshots of the selected job in flight, whoever started them. The jobs view shows its own
  // (with the REST call's result); this bar is for the others, so the jobs view's snapshots
  // are counted here to keep one bar per snapshot.
  const [ownSnapshots, setOwnSnapshots] = useState<ReadonlyMap<JobId, number>>(new Map());
  const { state: elsewhere, settled } = useJobSnapshotProgress(liveEvents, url.job);
  const jobsApi = useMemo<Api>(() => {
    const bump = (job: JobId, by: number) =>
      setOwnSnapshots((m) => {
        const next = new Map(m);
        const n = (next.get(job) ?? 0) + by;
        if (n > 0) next.set(job, n);
        else next.delete(job);
        return next;
      });
    return {
      ...api,
      takeSnapshot: async (job) => {
        bump(job, 1);
        try {
          return await api.takeSnapshot(job);
        } finally {
          // Its progress events were this page's snapshot: no bar for it once it answered.
          settled(job);
          bump(job, -1);
        }
      },
    };
  }, [api, settled]);

  // --- the snapshot being viewed ---------------------------------------------------------
  const shareKey = url.share;
  const [shared] = useResource(
    shareKey === null || url.demo !== null ? null : `share:${shareKey}`,
    (signal) => api.shared(shareKey ?? '', signal),
  );
  // A link to a job without a snapshot (`?view=matrix&job=7`) opens the job's latest snapshot.
  const latestFor = needLogin ? null : jobNeedingLatest(url);
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

  const loadError: ApiError | null =
    url.share !== null
      ? shared.status === 'error'
        ? shared.error
        : null
      : live.status === 'error'
        ? live.error
        : latest.status === 'error'
          ? latest.error
          : null;
  const loading =
    url.share !== null
      ? shared.status === 'loading'
      : live.status === 'loading' || latest.status === 'loading';

  useEffect(() => {
    if (loadError && isUnauthenticated(loadError)) setNeedLogin(true);
  }, [loadError]);
  // Only the fleet view waits on /api/me; elsewhere the view's own requests send to the login form.
  useEffect(() => {
    if (url.view === 'fleet' && me.status === 'error' && isUnauthenticated(me.error)) setNeedLogin(true);
  }, [url.view, me]);

  // --- keyboard ------------------------------------------------------------------------------
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.ctrlKey || e.metaKey || e.altKey || isTyping(e)) return;
      if (e.key === 'Escape') {
        setUrl({ cell: null }, 'replace');
        return;
      }
      if (e.key === 'v') {
        setUrl({ value: url.value === 'count' ? 'bytes' : 'count' }, 'replace');
        return;
      }
      const view = VIEW_KEYS[e.key];
      if (view && !(view === 'jobs' && url.share !== null) && !(view === 'fleet' && !isAdmin))
        setUrl({ view });
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, [setUrl, url.value, url.share, isAdmin]);

  const title = data
    ? `MQD · ${data.snapshot.ranks.length.toLocaleString()} ranks · ${formatTime(data.takenAt)}`
    : 'MQD Dashboard';
  useEffect(() => {
    document.title = title;
  }, [title]);

  // The server keeps the session in a cookie; reloading re-runs every loader with it.
  const onLoggedIn = () => location.reload();

  const needsSnapshot = viewNeedsSnapshot(url.view);
  const tabs = TABS.filter(
    (t) => !(t.view === 'jobs' && url.share !== null) && !(t.view === 'fleet' && !isAdmin),
  );
  return (
    <div className="app">
      <header className="topbar">
        <a className="brand" href="/" title="MQD Dashboard: MPI message queues">
          MQD
        </a>
        <nav className="tabs" aria-label="Views">
          {tabs.map((t) => (
            <button
              key={t.view}
              type="button"
              className="tab"
              aria-current={url.view === t.view ? 'page' : undefined}
              onClick={() => setUrl({ view: t.view })}
              title={`${t.title} (key ${t.key})`}
            >
              {t.label} <kbd>{t.key}</kbd>
            </button>
          ))}
        </nav>
        <SnapshotBadge data={data} />
        {data && !data.readOnly && data.source === 'live' && data.snapshotId !== null && (
          <ShareButton api={api} snapshotId={data.snapshotId} />
        )}
      </header>
      {data?.readOnly && (
        <div className="banner readonly" data-testid="read-only-banner" role="status">
          Frozen snapshot taken {formatTime(data.takenAt)} — read-only
          {data.jobId !== null && <span className="muted"> (job {data.jobId})</span>}
        </div>
      )}
      {switchAsk !== null && (
        <SwitchUserBanner
          api={api}
          ask={switchAsk}
          onStay={() => setSwitchAsk(null)}
          onSwitched={onLoggedIn}
        />
      )}
      {elsewhere.kind === 'error' && !ownSnapshots.has(elsewhere.job) && (
        <div className="banner progress-banner" data-testid="snapshot-failed-elsewhere">
          <span>A snapshot of job {elsewhere.job} (started elsewhere) failed; nothing was stored:</span>
          <ErrorBox error={elsewhere.error} />
          <button type="button" onClick={() => settled(elsewhere.job)}>
            Dismiss
          </button>
        </div>
      )}
      {elsewhere.kind === 'busy' && !ownSnapshots.has(elsewhere.job) && (
        <div className="banner progress-banner">
          <SnapshotProgressBar
            state={elsewhere}
            origin="elsewhere"
            what={`A snapshot of job ${elsewhere.job} is being taken (started elsewhere): every rank is stopped briefly while its queues are read…`}
          />
        </div>
      )}
      {url.demo !== null && (
        <div className="banner demo" role="status">
          Demo: a synthetic {url.scenario} job of {url.demo.toLocaleString()} ranks generated in this page,
          not a real job. <a href="/">Leave the demo</a>
        </div>
      )}
      <main className="view">
        {needLogin ? (
          <LoginForm api={api} onDone={onLoggedIn} />
        ) : url.view === 'jobs' && url.share === null ? (
          <JobsView
            api={jobsApi}
            live={liveEvents}
            url={url}
            setUrl={setUrl}
            onUnauthenticated={() => setNeedLogin(true)}
          />
        ) : url.view === 'fleet' ? (
          livePage ? (
            <FleetPage
              api={api}
              live={liveEvents}
              me={me}
              url={url}
              setUrl={setUrl}
              onUnauthenticated={() => setNeedLogin(true)}
            />
          ) : (
            <p className="empty">
              The fleet view is part of the live dashboard, not of shared or demo pages.
            </p>
          )
        ) : needsSnapshot && !data ? (
          <NoSnapshot url={url} setUrl={setUrl} loading={loading} error={loadError} latest={latest} />
        ) : data ? (
          <>
            {(url.view === 'matrix' || url.view === 'order' || url.view === 'stacks') && (
              <Diagnosis data={data} url={url} setUrl={setUrl} />
            )}
            <ViewSwitch view={url.view} api={api} url={url} setUrl={setUrl} data={data} />
          </>
        ) : null}
      </main>
      <footer className="statusbar">
        <span>
          Keys: <kbd>j</kbd> jobs <kbd>m</kbd> matrix <kbd>t</kbd> timeline <kbd>o</kbd> order <kbd>r</kbd>{' '}
          rank <kbd>s</kbd> stacks
          {isAdmin && (
            <>
              {' '}
              <kbd>f</kbd> fleet
            </>
          )}{' '}
          <kbd>v</kbd> count/size <kbd>Esc</kbd> clear selection
        </span>
        {data && <span className="muted">{data.snapshot.mpi.dll ?? 'no message-queue DLL'}</span>}
      </footer>
    </div>
  );
}

function ViewSwitch(props: ViewProps & { view: View }) {
  switch (props.view) {
    case 'jobs':
    case 'fleet':
      return null;
    case 'matrix':
      return <MatrixView {...props} />;
    case 'timeline':
      return <TimelineView {...props} />;
    case 'order':
      return <OrderView {...props} />;
    case 'rank':
      return <RankView {...props} />;
    case 'stacks':
      return <StacksView {...props} />;
    default:
      return assertUnreachable(props.view);
  }
}

function SnapshotBadge({ data }: { data: LoadedSnapshot | null }) {
  if (!data) return <span className="snapshot-badge muted">No snapshot selected</span>;
  const s = data.snapshot;
  return (
    <>
      <span className="snapshot-badge" title={data.snapshot.mpi.dll ?? ''}>
        {data.jobId !== null && <span>Job {data.jobId} · </span>}
        <span>taken {formatTime(data.takenAt)}</span>
        <span className="muted">
          {' '}
          · {s.mpi.library} · {s.ranks.length.toLocaleString()} ranks · lengths in {s.mpi.lengthUnit}
        </span>
      </span>
      {/* Beside the badge, not in it: the badge may be cut short, this must stay readable. */}
      {s.source?.kind === 'core' && (
        <span
          className="source-core"
          title={s.source.cores
            .map((c) => `rank ${c.rank}: ${c.path} (pid ${c.pid}, ${c.executable})`)
            .join('\n')}
          data-testid="snapshot-source"
        >
          {formatCoreSource(s.source.cores)}
        </span>
      )}
    </>
  );
}

function ShareButton({ api, snapshotId }: { api: Api; snapshotId: SnapshotId }) {
  const [state, setState] = useState<
    { kind: 'idle' } | { kind: 'busy' } | { kind: 'done'; url: string } | { kind: 'error'; error: ApiError }
  >({ kind: 'idle' });
  // A new snapshot needs a new link.
  // biome-ignore lint/correctness/useExhaustiveDependencies: reset when the snapshot changes.
  useEffect(() => setState({ kind: 'idle' }), [snapshotId]);
  const share = async () => {
    setState({ kind: 'busy' });
    const r = await trackBusy(api.share(snapshotId));
    if (!r.ok) setState({ kind: 'error', error: r.error });
    else setState({ kind: 'done', url: new URL(r.value.url, location.origin).href });
  };
  return (
    <span className="share">
      <button type="button" data-testid="share-button" onClick={share} disabled={state.kind === 'busy'}>
        {state.kind === 'busy' ? 'Freezing…' : 'Share snapshot'}
      </button>
      {state.kind === 'done' && (
        <span className="share-link" data-testid="share-link">
          <input
            readOnly
            value={state.url}
            onFocus={(e) => e.currentTarget.select()}
            aria-label="Share link"
          />
          <button type="button" onClick={() => void navigator.clipboard?.writeText(state.url)}>
            Copy
          </button>
        </span>
      )}
      {state.kind === 'error' && <ErrorBox error={state.error} compact />}
    </span>
  );
}

function NoSnapshot({
  url,
  setUrl,
  loading,
  error,
  latest,
}: {
  url: UrlState;
  setUrl: SetUrl;
  loading: boolean;
  error: ApiError | null;
  /** The job's snapshots, looked up when the link names a job and no snapshot. */
  latest: Resource<SnapshotListEntry[]>;
}) {
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

function SwitchUserBanner({
  api,
  ask,
  onStay,
  onSwitched,
}: {
  api: Api;
  ask: PendingSwitch;
  onStay: () => void;
  onSwitched: () => void;
}) {
  const [state, setState] = useState<
    { kind: 'idle' } | { kind: 'busy' } | { kind: 'error'; error: ApiError }
  >({
    kind: 'idle',
  });
  const confirm = async () => {
    setState({ kind: 'busy' });
    const r = await trackBusy(api.login(ask.token, true));
    if (r.ok) onSwitched();
    else setState({ kind: 'error', error: r.error });
  };
  return (
    <div className="banner switch-user" role="alertdialog" data-testid="switch-user">
      <p>
        The link you opened signs in as another user than the one this browser is signed in as. You stay
        signed in unless you switch.
      </p>
      <ErrorBox error={ask.error} />
      <button
        type="button"
        onClick={confirm}
        disabled={state.kind === 'busy'}
        data-testid="switch-user-confirm"
      >
        Switch to the link's user
      </button>{' '}
      <button type="button" onClick={onStay}>
        Stay signed in
      </button>
      {state.kind === 'error' && <ErrorBox error={state.error} />}
    </div>
  );
}

function LoginForm({ api, onDone }: { api: Api; onDone: () => void }) {
  const [token, setToken] = useState('');
  const [state, setState] = useState<
    { kind: 'idle' } | { kind: 'busy' } | { kind: 'error'; error: ApiError }
  >({
    kind: 'idle',
  });
  return (
    <form
      className="login"
      onSubmit={async (e) => {
        e.preventDefault();
        setState({ kind: 'busy' });
        const r = await trackBusy(api.login(token.trim()));
        if (r.ok) onDone();
        else setState({ kind: 'error', error: r.error });
      }}
    >
      <h2>Log in</h2>
      <p>
        Paste the token printed by <code>mqd serve</code>.
      </p>
      <input type="password" value={token} onChange={(e) => setToken(e.target.value)} aria-label="Token" />
      <button type="submit" disabled={state.kind === 'busy' || token.trim() === ''}>
        {state.kind === 'busy' ? 'Checking…' : 'Log in'}
      </button>
      {state.kind === 'error' && <ErrorBox error={state.error} />}
    </form>
  );
}
