// Fleet: the hang watch's view of the cluster (docs/hang-watch.md). Everyone sees
// the MPI jobs the agents discovered that they may see (the server filters: admins every job,
// users their own) with each job's watch state, and the policy in one sentence; admins also
// edit the policy and see the per-node agents, the jobs whose stored snapshots stopped changing,
// and the audit trail. The jobs reload on the /ui event `fleet.changed`, the agents on agent
// events; everything is also reloaded on a timer, since "last seen", health and most audit
// entries come with no event, and the connection may be down.
import {
  type ApiWatchPolicy,
  codedText,
  FLEET_PAGE_DEFAULT,
  type JobId,
  type QueueKind,
  type SnapshotId,
} from '@mqd/model';
import { useEffect, useState } from 'react';
import {
  type ActivityEntry,
  type FleetAgent,
  type HungJob,
  isUnauthenticated,
  type Me,
  NOT_READABLE,
  NOT_READABLE_LEGEND,
  NOT_READABLE_MEANS,
  queueCount,
} from '../api.js';
import { formatAge, formatCount, formatTime, plural } from '../format.js';
import { type Resource, shownValue, useInterval, useResource } from '../hooks.js';
import { ErrorBox, Progress } from '../ui.js';
import { urlOf } from '../url-state.js';
import { useLiveAgents, useLiveFleet, useLiveJobs, useOnReconnect } from '../use-live.js';
import type { LivePageProps } from '../view-types.js';
import { FleetJobs, LEGEND_STATES } from './FleetJobs.js';
import { policyText, stateWord } from './fleet-text.js';
import { follow, type LinkProps } from './links.js';
import { WatchPolicyForm } from './WatchPolicyForm.js';

export const FLEET_REFRESH_MS = 10_000;
/** The watched jobs come with `fleet.changed` events; the timer is only the fallback. */
export const FLEET_JOBS_REFRESH_MS = 30_000;
/** Audit entries shown: enough for "what happened lately" without paging. */
export const ACTIVITY_LIMIT = 50;
/** Jobs per page of the fleet: the server's default page. */
export const FLEET_PAGE_SIZE = FLEET_PAGE_DEFAULT;

/** The fleet page for whoever is logged in: their jobs, and for an admin the cluster's. */
export function FleetPage(props: LivePageProps & { readonly me: Resource<Me> }) {
  const me = shownValue(props.me);
  if (me === null) {
    if (props.me.status === 'error') return <ErrorBox error={props.me.error} />;
    return <Progress what="Checking who you are…" />;
  }
  return (
    <div className="fleet-view">
      <WatchedJobs {...props} me={me} />
      {me.admin && <AdminSections {...props} />}
    </div>
  );
}

/** Where this page of the fleet is among all the user's jobs, and the way to the others. */
function FleetPager(props: {
  readonly offset: number;
  readonly shown: number;
  readonly total: number;
  readonly onPage: (offset: number) => void;
}) {
  const { offset, shown, total, onPage } = props;
  return (
    <p className="fleet-pager" data-testid="fleet-pager">
      <span>
        jobs {formatCount(offset + 1)}–{formatCount(offset + shown)} of {formatCount(total)}
      </span>{' '}
      <button type="button" disabled={offset === 0} onClick={() => onPage(offset - FLEET_PAGE_SIZE)}>
        Previous
      </button>{' '}
      <button
        type="button"
        disabled={offset + shown >= total}
        onClick={() => onPage(offset + FLEET_PAGE_SIZE)}
      >
        Next
      </button>
    </p>
  );
}

function WatchedJobs({ api, live, url, setUrl, onUnauthenticated, me }: LivePageProps & { readonly me: Me }) {
  // One page of jobs at a time (the server's order: live hung jobs first); `offset` is the page's start.
  const [offset, setOffset] = useState(0);
  // The search box, kept in the URL (jq, shared with the Jobs view); the server filters and pages.
  const query = url.jq ?? '';
  const [fleet, reloadFleet] = useResource(`fleet:jobs:${offset}:${query}`, (signal) =>
    api.fleet(signal, { limit: FLEET_PAGE_SIZE, offset, ...(query.trim() === '' ? {} : { q: query }) }),
  );
  useInterval(true, FLEET_JOBS_REFRESH_MS, reloadFleet);
  useLiveFleet(live, reloadFleet);
  useOnReconnect(live, reloadFleet);
  useEffect(() => {
    if (fleet.status === 'error' && isUnauthenticated(fleet.error)) onUnauthenticated();
  }, [fleet, onUnauthenticated]);
  // Jobs ended and were dropped past this page's start: back to the first page.
  const page = shownValue(fleet);
  useEffect(() => {
    if (page !== null && page.jobs.length === 0 && page.offset > 0) setOffset(0);
  }, [page]);
  // The policy as the server answered the last save, said until the page is left.
  const [saved, setSaved] = useState<ApiWatchPolicy | null>(null);

  const value = shownValue(fleet);
  const policy = value?.policy ?? null;
  const snapshotLink = (job: JobId | null, snap: SnapshotId): LinkProps => {
    const to = { view: 'matrix' as const, job, snap, cell: null, zoom: null };
    return { href: urlOf({ ...url, ...to }), onClick: follow(() => setUrl(to)) };
  };
  return (
    <>
      <div className="toolbar">
        <h2>Fleet</h2>
        <button type="button" onClick={reloadFleet}>
          Refresh
        </button>
        <span className="muted">
          reloads when the hang watch reports a change, and every {FLEET_JOBS_REFRESH_MS / 1000} s
        </span>
      </div>
      <section data-testid="fleet-jobs" aria-labelledby="fleet-jobs-heading">
        <h3 className="fleet-heading" id="fleet-jobs-heading">
          {me.admin ? 'Every MPI job on the cluster' : 'Your MPI jobs'}
        </h3>
        <p className="muted" data-testid="fleet-scope">
          {me.admin ? (
            <>Every MPI job the agents found, whoever runs it (you are an admin).</>
          ) : (
            <>
              The MPI jobs of <bdi>{me.name}</bdi> that the agents found; admins see every job.
            </>
          )}
        </p>
        {policy !== null && (
          <p data-testid="fleet-policy-summary" className={policy.enabled ? undefined : 'fleet-watch-off'}>
            {policyText(policy)}
          </p>
        )}
        <p className="jobs-search">
          <label>
            Search{' '}
            <input
              type="search"
              value={query}
              onChange={(e) => {
                setOffset(0);
                setUrl({ jq: e.target.value.trim() === '' ? null : e.target.value }, 'replace');
              }}
              placeholder="program, user, job id or node"
              data-testid="fleet-search"
            />
          </label>
        </p>
        {fleet.status === 'error' && <ErrorBox error={fleet.error} />}
        {value === null && fleet.status === 'loading' && <Progress what="Loading the fleet…" />}
        {value !== null && value.jobs.length === 0 && query.trim() !== '' && (
          <p className="empty" data-testid="fleet-jobs-empty">
            No job matches “{query.trim()}”.
          </p>
        )}
        {value !== null && value.jobs.length === 0 && query.trim() === '' && (
          <p className="empty" data-testid="fleet-jobs-empty">
            {me.admin
              ? 'No MPI job is running on any node an agent watches.'
              : 'You have no MPI job running.'}
          </p>
        )}
        {value !== null && value.jobs.length > 0 && (
          <>
            {value.total > value.jobs.length && (
              <FleetPager
                offset={value.offset}
                shown={value.jobs.length}
                total={value.total}
                onPage={(o) => setOffset(Math.max(0, o))}
              />
            )}
            <FleetJobs
              jobs={value.jobs}
              sort={url.fsort}
              onSort={(by) => setUrl({ fsort: by }, 'replace')}
              snapshotLink={snapshotLink}
              now={Date.now()}
            />
            <p className="fleet-legend muted" aria-hidden="true">
              History, oldest first:{' '}
              {LEGEND_STATES.map((s) => (
                <span key={s} className="fleet-legend-item">
                  <span className={`fleet-legend-cell fleet-cell-${s}`} /> {stateWord(s)}
                </span>
              ))}
            </p>
          </>
        )}
      </section>
      {me.admin && policy !== null && (
        <section data-testid="fleet-policy" aria-labelledby="fleet-policy-heading">
          <h3 className="fleet-heading" id="fleet-policy-heading">
            Watch policy
          </h3>
          <WatchPolicyForm
            key={JSON.stringify(policy)}
            api={api}
            policy={policy}
            onSaved={(p) => {
              setSaved(p);
              reloadFleet();
            }}
          />
          {saved !== null && (
            <p role="status" data-testid="fleet-policy-saved">
              Saved. {policyText(saved)}
            </p>
          )}
        </section>
      )}
    </>
  );
}

function AdminSections({ api, live, url, setUrl, onUnauthenticated }: LivePageProps) {
  const [agents, reloadAgents] = useResource('fleet:agents', (signal) => api.agents(signal));
  const [hung, reloadHung] = useResource('fleet:hung', (signal) => api.hung(signal));
  const [activity, reloadActivity] = useResource('fleet:activity', (signal) =>
    api.activity(ACTIVITY_LIMIT, signal),
  );
  const reloadAll = () => {
    reloadAgents();
    reloadHung();
    reloadActivity();
  };
  useInterval(true, FLEET_REFRESH_MS, reloadAll);
  // Agents coming and going are audited too; a stored snapshot can make a job look hung.
  useLiveAgents(live, () => {
    reloadAgents();
    reloadActivity();
  });
  useLiveJobs(live, () => {
    reloadHung();
    reloadActivity();
  });
  useOnReconnect(live, reloadAll);

  useEffect(() => {
    for (const r of [agents, hung, activity])
      if (r.status === 'error' && isUnauthenticated(r.error)) onUnauthenticated();
  }, [agents, hung, activity, onUnauthenticated]);

  const jobLink = (job: JobId) => ({
    href: urlOf({ ...url, view: 'jobs', job, snap: null }),
    onClick: follow(() => setUrl({ view: 'jobs', job, snap: null })),
  });
  const snapLink = (job: JobId, snap: SnapshotId) => ({
    href: urlOf({ ...url, view: 'matrix', job, snap, cell: null, zoom: null }),
    onClick: follow(() => setUrl({ view: 'matrix', job, snap, cell: null, zoom: null })),
  });

  const agentList = shownValue(agents);
  const hungList = shownValue(hung);
  const entries = shownValue(activity);
  return (
    <>
      <p className="muted fleet-admin-note">
        For admins: the agents, the jobs whose stored snapshots stopped changing and the audit trail (reloaded
        when agents come or go, and every {FLEET_REFRESH_MS / 1000} s).{' '}
        <button type="button" className="link" onClick={reloadAll}>
          Reload them
        </button>
      </p>

      <section data-testid="fleet-agents" aria-label="Agents">
        <h3 className="fleet-heading">Agents</h3>
        {agents.status === 'error' && <ErrorBox error={agents.error} />}
        {agentList === null && agents.status === 'loading' && <Progress what="Loading agents…" />}
        {agentList && agentList.agents.length === 0 && (
          <p className="empty">No agent has connected since the server started.</p>
        )}
        {agentList && agentList.agents.length > 0 && (
          <table className="ops">
            <thead>
              <tr>
                <th>Host</th>
                <th>State</th>
                <th>Last seen</th>
                <th>Jobs seen</th>
                <th>MPI</th>
                <th>Health</th>
                <th title="Messages received from the agent / refused / requests waiting for an answer">
                  Messages
                </th>
                <th>Version</th>
              </tr>
            </thead>
            <tbody>
              {[...agentList.agents]
                .sort((a, b) => Number(b.connected) - Number(a.connected) || a.host.localeCompare(b.host))
                .map((a) => (
                  <AgentRow key={a.agentId} agent={a} />
                ))}
            </tbody>
          </table>
        )}
        {agentList && agentList.refusedHandshakes + agentList.refusedMessages > 0 && (
          <p className="muted">
            Refused since start: {plural(agentList.refusedHandshakes, 'handshake')},{' '}
            {plural(agentList.refusedMessages, 'message')} (bad token or malformed).
          </p>
        )}
      </section>

      <section data-testid="fleet-hung" aria-label="Jobs that look hung">
        <h3 className="fleet-heading">Jobs that look hung</h3>
        {hung.status === 'error' && <ErrorBox error={hung.error} />}
        {hungList === null && hung.status === 'loading' && <Progress what="Loading hung jobs…" />}
        {hungList && hungList.jobs.length === 0 && (
          <p className="empty">No job has the same queues in its last {hungList.snapshots} snapshots.</p>
        )}
        {hungList && hungList.jobs.length > 0 && (
          <table className="ops">
            <thead>
              <tr>
                <th>Job</th>
                <th>Unchanged since</th>
                <th>Snapshots</th>
                <th>Pending sends</th>
                <th>Posted receives</th>
                <th>Unexpected</th>
                <th>Last snapshot</th>
              </tr>
            </thead>
            <tbody>
              {hungList.jobs.map((h) => (
                <HungRow key={h.jobId} job={h} jobLink={jobLink} snapLink={snapLink} />
              ))}
            </tbody>
          </table>
        )}
        {hungList?.jobs.some((h) => (h.unreadable?.length ?? 0) > 0) && (
          <p className="empty" data-testid="fleet-hung-legend">
            {NOT_READABLE_LEGEND}
          </p>
        )}
      </section>

      <section data-testid="fleet-activity" aria-label="Recent activity">
        <h3 className="fleet-heading">Recent activity</h3>
        {activity.status === 'error' && <ErrorBox error={activity.error} />}
        {entries === null && activity.status === 'loading' && <Progress what="Loading activity…" />}
        {entries && entries.length === 0 && <p className="empty">Nothing recorded yet.</p>}
        {entries && entries.length > 0 && (
          <table className="ops compact">
            <thead>
              <tr>
                <th>When</th>
                <th>Who</th>
                <th>What</th>
                <th>Job</th>
                <th>Detail</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((e) => (
                <ActivityRow key={e.id} entry={e} jobLink={jobLink} />
              ))}
            </tbody>
          </table>
        )}
      </section>
    </>
  );
}

const MIB = 1024 * 1024;

function AgentRow({ agent: a }: { agent: FleetAgent }) {
  const h = a.health;
  const lastError = h?.lastError ? codedText(h.lastError) : null;
  const health = [
    h?.rssBytes != null ? `${Math.round(h.rssBytes / MIB)} MiB` : null,
    h?.loadAverage1m != null ? `load ${h.loadAverage1m.toFixed(2)}` : null,
    h?.uptimeSeconds != null ? `up ${formatUptime(h.uptimeSeconds)}` : null,
  ].filter((x) => x !== null);
  return (
    <tr data-testid="fleet-agent-row" data-host={a.host} data-connected={String(a.connected)}>
      <td title={a.agentId}>{a.host}</td>
      <td>
        <span
          className={`state ${a.connected ? 'state-running' : 'state-ended'}`}
          title={
            a.connected
              ? `connected ${formatTime(a.connectedAt)}`
              : `disconnected ${formatTime(a.disconnectedAt)}`
          }
        >
          {a.connected ? 'connected' : 'disconnected'}
        </span>
      </td>
      <td title={formatTime(a.lastSeenAt)}>{formatAge(a.lastSeenAt)}</td>
      <td title={a.jobs.map((j) => `${j.starterPid} (uid ${j.uid}): ${j.command}`).join('\n')}>
        {a.jobs.length === 0 ? <span className="muted">none</span> : formatCount(a.jobs.length)}
        {a.jobs.length > 0 && (
          <span className="muted">
            {' '}
            (
            {a.jobs
              .slice(0, 3)
              .map((j) => j.starterPid)
              .join(', ')}
            {a.jobs.length > 3 ? ', …' : ''})
          </span>
        )}
      </td>
      <td title={a.mpi?.dll ?? 'no message-queue DLL'}>
        {a.mpi?.library ?? <span className="muted">—</span>}
      </td>
      <td>
        {health.length > 0 ? health.join(' · ') : <span className="muted">not reported</span>}
        {lastError !== null && (
          <div className="fleet-agent-error" title={lastError}>
            {lastError}
          </div>
        )}
      </td>
      <td>
        {formatCount(a.messages)}
        {(a.refused > 0 || a.pending > 0) && (
          <span className="muted">
            {' '}
            / {formatCount(a.refused)} / {formatCount(a.pending)}
          </span>
        )}
      </td>
      <td>{a.version}</td>
    </tr>
  );
}

function formatUptime(s: number): string {
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

/** One row of the hung jobs table: its counts, "not readable" where the MPI library cannot show a queue. */
export function HungRow({
  job: h,
  jobLink,
  snapLink,
}: {
  job: HungJob;
  jobLink: (job: JobId) => LinkProps;
  snapLink: (job: JobId, snap: SnapshotId) => LinkProps;
}) {
  return (
    <tr data-testid="fleet-hung-row">
      <td>
        <a {...jobLink(h.jobId)}>{h.jobId}</a>
      </td>
      <td title={formatTime(h.since)}>{formatAge(h.since)}</td>
      <td>{formatCount(h.snapshots)}</td>
      <QueueCountCell count={h.pendingSends} kind="sends" unreadable={h.unreadable} />
      <QueueCountCell count={h.pendingReceives} kind="receives" unreadable={h.unreadable} />
      <QueueCountCell count={h.unexpected} kind="unexpected" unreadable={h.unreadable} />
      <td>
        <a {...snapLink(h.jobId, h.lastSnapshotId)}>open in the matrix</a>
      </td>
    </tr>
  );
}

/** A queue's count, or "not readable" (with what it means) when the MPI library cannot show the queue. */
function QueueCountCell({
  count,
  kind,
  unreadable,
}: {
  count: number;
  kind: QueueKind;
  unreadable: readonly QueueKind[] | undefined;
}) {
  const shown = queueCount(count, kind, unreadable);
  return shown === NOT_READABLE ? (
    <td title={NOT_READABLE_MEANS}>{NOT_READABLE}</td>
  ) : (
    <td>{formatCount(shown)}</td>
  );
}

function ActivityRow({ entry: e, jobLink }: { entry: ActivityEntry; jobLink: (job: JobId) => LinkProps }) {
  return (
    <tr data-testid="fleet-activity-row">
      <td title={formatTime(e.at)}>{formatAge(e.at)}</td>
      <td>{e.who}</td>
      <td>{e.action}</td>
      <td>{e.jobId === null ? <span className="muted">—</span> : <a {...jobLink(e.jobId)}>{e.jobId}</a>}</td>
      <td className="command" title={e.detail}>
        {e.detail}
      </td>
    </tr>
  );
}
