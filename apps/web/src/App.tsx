// The dashboard shell: the header with view tabs and sharing, the banners, the view the URL
// names, the footer and the keyboard shortcuts. What it shows lives in the URL (use-url-state.ts);
// the snapshot is loaded by snapshot-loading.tsx, snapshots in flight are snapshots-in-flight.ts,
// login is Login.tsx, sharing Share.tsx.
import { assertUnreachable } from '@mqd/model';
import { lazy, Suspense, useEffect, useState } from 'react';
import { type Api, isUnauthenticated } from './api.js';
import { DemoRunBanner } from './DemoRunBanner.js';
import { Diagnosis } from './Diagnosis.js';
import { factsOf, type LoadedOverview, type LoadedSnapshot, type Viewed } from './data.js';
import { dllVersionOf, Footer } from './Footer.js';
import { markShown } from './first-shown.js';
import { formatCoreSource, formatTime } from './format.js';
import { useResource } from './hooks.js';
import { JobsView } from './jobs/JobsView.js';
import { LoginForm, type PendingSwitch, SwitchUserBanner } from './Login.js';
import { MatrixView } from './matrix/MatrixView.js';
import { ReadOnlyBanner, ShareButton } from './Share.js';
import { NoSnapshot, SnapshotNotice, useViewedSnapshot } from './snapshot-loading.js';
import { useSnapshotsInFlight } from './snapshots-in-flight.js';
import { ErrorBox, Progress, SnapshotProgressBar } from './ui.js';
import { VIEW_KEYS, type View, viewNeedsSnapshot } from './url-state.js';
import { useLiveConnection } from './use-live.js';
import { useUrlState } from './use-url-state.js';
import type { ViewProps } from './view-types.js';

export type { PendingSwitch } from './Login.js';

// The views a snapshot's first screen does not show load when first opened (the
// first render of a large snapshot waits on the page's own code, ~600 KB before the matrix).
// The jobs list (the landing view), the diagnosis and the matrix stay in the first bundle.
const FleetPage = lazy(() => import('./fleet/FleetView.js').then((m) => ({ default: m.FleetPage })));
const OrderView = lazy(() => import('./matching/OrderView.js').then((m) => ({ default: m.OrderView })));
const RankView = lazy(() => import('./rank/RankView.js').then((m) => ({ default: m.RankView })));
const StacksView = lazy(() => import('./stacks/StacksView.js').then((m) => ({ default: m.StacksView })));
const TimelineView = lazy(() =>
  import('./timeline/TimelineView.js').then((m) => ({ default: m.TimelineView })),
);
const ValuesView = lazy(() => import('./values/ValuesView.js').then((m) => ({ default: m.ValuesView })));
const viewLoading = <Progress what="Loading the view…" />;

const TABS: readonly { view: View; label: string; title: string; key: string }[] = [
  { view: 'jobs', label: 'Jobs', title: 'Jobs and snapshots', key: 'j' },
  { view: 'matrix', label: 'Matrix', title: 'Message matrix: senders x receivers', key: 'm' },
  { view: 'timeline', label: 'Timeline', title: 'Queue depth across snapshots', key: 't' },
  { view: 'order', label: 'Matching order', title: 'Matching order of one rank and communicator', key: 'o' },
  { view: 'rank', label: 'Rank', title: 'Everything about one rank', key: 'r' },
  { view: 'stacks', label: 'Stacks', title: 'Every rank’s stack, merged into one call tree', key: 's' },
  { view: 'fleet', label: 'Fleet', title: 'Every MPI job the agents found and its hang watch', key: 'f' },
  { view: 'values', label: 'Values', title: 'Expressions read on every rank, across ranks', key: 'e' },
];

/** The heading of a view of one snapshot (the jobs and fleet views have their own). */
function viewHeading(view: View): string {
  return TABS.find((t) => t.view === view)?.label ?? view;
}

function isTyping(e: KeyboardEvent): boolean {
  const t = e.target;
  return (
    t instanceof HTMLElement && (t.isContentEditable || ['INPUT', 'SELECT', 'TEXTAREA'].includes(t.tagName))
  );
}

export function App({ api, pendingSwitch = null }: { api: Api; pendingSwitch?: PendingSwitch | null }) {
  const [url, setUrl] = useUrlState();
  const [switchAsk, setSwitchAsk] = useState(pendingSwitch);
  const [needLogin, setNeedLogin] = useState(false);
  // Live events need a session: shared and demo pages never connect, and a page sent to the
  // login form stops (logging in reloads the page, which connects again).
  const livePage = url.share === null && url.demo === null;
  const liveEvents = useLiveConnection(livePage && !needLogin);
  // Who is logged in decides what the fleet view shows (admins: every job, users: their own);
  // shared and demo pages have no session and no fleet.
  const [me] = useResource(livePage && !needLogin ? 'me' : null, (signal) => api.me(signal));

  // Snapshots of the selected job in flight, whoever started them; the jobs view takes its own
  // through `jobsApi`, so the bar below is only for the others.
  const inFlight = useSnapshotsInFlight(api, liveEvents, url.job);
  const elsewhere = inFlight.elsewhere;

  const viewed = useViewedSnapshot(api, url, setUrl, needLogin);
  const data = viewed.data;
  // The whole snapshot, else its overview while the rest loads (the header and first views).
  const shown: Viewed | null = data ?? viewed.early;
  const head = shown === null ? null : factsOf(shown).head;
  useEffect(() => {
    if (viewed.error && isUnauthenticated(viewed.error)) setNeedLogin(true);
  }, [viewed.error]);
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
      if (view && !(view === 'jobs' && url.share !== null) && !(view === 'fleet' && !livePage))
        setUrl({ view });
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, [setUrl, url.value, url.share, livePage]);

  const title =
    shown && head
      ? `MQD · ${head.rankCount.toLocaleString()} ranks · ${formatTime(shown.takenAt)}`
      : 'MQD Dashboard';
  useEffect(() => {
    document.title = title;
  }, [title]);

  // The server keeps the session in a cookie; reloading re-runs every loader with it.
  const onLoggedIn = () => location.reload();

  const needsSnapshot = viewNeedsSnapshot(url.view);
  const tabs = TABS.filter(
    (t) => !(t.view === 'jobs' && url.share !== null) && !(t.view === 'fleet' && !livePage),
  );
  return (
    <div className="app">
      <header className="topbar">
        <h1 className="brand-heading">
          <a className="brand" href="/" title="MQD Dashboard: MPI message queues">
            MQD<span className="sr-only"> Dashboard</span>
          </a>
        </h1>
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
        <SnapshotBadge data={shown} />
        {data && !data.readOnly && data.source === 'live' && data.snapshotId !== null && (
          <ShareButton api={api} snapshotId={data.snapshotId} url={url} />
        )}
      </header>
      {shown?.readOnly && <ReadOnlyBanner data={shown} />}
      {switchAsk !== null && (
        <SwitchUserBanner
          api={api}
          ask={switchAsk}
          onStay={() => setSwitchAsk(null)}
          onSwitched={onLoggedIn}
        />
      )}
      {elsewhere.kind === 'error' && (
        <div className="banner progress-banner" data-testid="snapshot-failed-elsewhere">
          <span>A snapshot of job {elsewhere.job} (started elsewhere) failed; nothing was stored:</span>
          <ErrorBox error={elsewhere.error} />
          <button type="button" onClick={() => inFlight.store.dismiss(elsewhere.job)}>
            Dismiss
          </button>
        </div>
      )}
      {elsewhere.kind === 'busy' && (
        <div className="banner progress-banner">
          <SnapshotProgressBar
            state={elsewhere}
            origin="elsewhere"
            what={`A snapshot of job ${elsewhere.job} is being taken (started elsewhere): every rank is stopped briefly while its queues are read…`}
          />
        </div>
      )}
      {livePage && <DemoRunBanner job={url.job} setUrl={setUrl} />}
      <SnapshotNotice viewed={viewed} />
      {url.demo !== null && (
        <div className="banner demo" role="status">
          Demo: a synthetic {url.scenario} job of {url.demo.toLocaleString()} ranks generated in this page,
          not a real job. <a href="/">Leave the demo</a>
        </div>
      )}
      <main className="view">
        {!needLogin && needsSnapshot && (
          <h2 className="sr-only" data-testid="view-heading">
            {viewHeading(url.view)}
          </h2>
        )}
        {needLogin ? (
          <LoginForm api={api} onDone={onLoggedIn} />
        ) : url.view === 'jobs' && url.share === null ? (
          <JobsView
            api={inFlight.api}
            live={liveEvents}
            url={url}
            setUrl={setUrl}
            onUnauthenticated={() => setNeedLogin(true)}
          />
        ) : url.view === 'fleet' ? (
          livePage ? (
            <Suspense fallback={viewLoading}>
              <FleetPage
                api={api}
                live={liveEvents}
                me={me}
                url={url}
                setUrl={setUrl}
                onUnauthenticated={() => setNeedLogin(true)}
              />
            </Suspense>
          ) : (
            <p className="empty">
              The fleet view is part of the live dashboard, not of shared or demo pages.
            </p>
          )
        ) : needsSnapshot && !shown ? (
          <NoSnapshot url={url} setUrl={setUrl} viewed={viewed} />
        ) : shown ? (
          // The same tree for the overview and the whole snapshot (same key): the matrix drawn
          // from the overview stays mounted when the rest arrives.
          <>
            {(url.view === 'matrix' || url.view === 'order' || url.view === 'stacks') && (
              <Diagnosis data={shown} url={url} setUrl={setUrl} />
            )}
            <Suspense fallback={viewLoading}>
              <ViewSwitch view={url.view} api={api} url={url} setUrl={setUrl} data={shown} />
            </Suspense>
          </>
        ) : null}
      </main>
      <Footer
        livePage={livePage}
        mpi={head?.mpi ?? null}
        dllVersion={data ? dllVersionOf(data.snapshot) : null}
      />
    </div>
  );
}

function ViewSwitch({ data, ...rest }: Omit<ViewProps, 'data'> & { view: View; data: Viewed }) {
  // The matrix draws from the overview too; the other views wait for the whole snapshot.
  if (rest.view !== 'matrix' && !('snapshot' in data)) return <WholeSnapshotLoading data={data} />;
  const props = { ...rest, data: data as LoadedSnapshot };
  switch (props.view) {
    case 'jobs':
    case 'fleet':
      return null;
    case 'matrix':
      return <MatrixView {...rest} data={data} />;
    case 'timeline':
      return <TimelineView {...props} />;
    case 'order':
      return <OrderView {...props} />;
    case 'rank':
      return <RankView {...props} />;
    case 'stacks':
      return <StacksView {...props} />;
    case 'values':
      return <ValuesView {...props} />;
    default:
      return assertUnreachable(props.view);
  }
}

/**
 * A view that needs the whole snapshot while only its overview is here: says so, and lets the
 * whole snapshot load at once (markShown: nothing is drawn from the overview here).
 */
function WholeSnapshotLoading({ data }: { data: LoadedOverview }) {
  useEffect(() => markShown(data.key), [data.key]);
  return <Progress what={`Loading the snapshot's ${data.overview.head.rankCount.toLocaleString()} ranks…`} />;
}

function SnapshotBadge({ data }: { data: Viewed | null }) {
  if (!data) return <span className="snapshot-badge muted">No snapshot selected</span>;
  const s = factsOf(data).head;
  const program = s.program;
  return (
    <>
      <span className="snapshot-badge" title={s.mpi.dll ?? ''}>
        {program !== null && (
          <>
            <bdi className="snapshot-program" data-testid="snapshot-program">
              {program}
            </bdi>{' '}
            ·{' '}
          </>
        )}
        {data.jobId !== null && <span className="muted">job {data.jobId} · </span>}
        <span>taken {formatTime(data.takenAt)}</span>
        <span className="muted">
          {' '}
          · {s.mpi.library} · {s.rankCount.toLocaleString()} ranks · lengths in {s.mpi.lengthUnit}
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
