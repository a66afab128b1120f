// Fleet: the admins' watch over the cluster. The per-node agents (connected or recently gone,
// when last heard from, the MPI starters they see), the jobs whose queues stopped changing, and
// the audit trail. Agent events on the live connection reload the agents at once; everything is
// also reloaded every 10 s, since "last seen", health and most audit entries (logins, shares)
// come with no event, and the connection may be down. The server answers 403 to non-admins;
// the App does not show the tab to them and this page says so instead of asking.
import type { JobId, SnapshotId } from '@mqd/model';
import { type MouseEvent, useEffect } from 'react';
import { type ActivityEntry, type FleetAgent, type HungJob, isUnauthenticated, type Me } from '../api.js';
import { formatAge, formatCount, formatTime, plural } from '../format.js';
import { type Resource, shownValue, useInterval, useResource } from '../hooks.js';
import { ErrorBox, Progress } from '../ui.js';
import { urlOf } from '../url-state.js';
import { useLiveAgents, useLiveJobs, useOnReconnect } from '../use-live.js';
import type { LivePageProps } from '../view-types.js';

export const FLEET_REFRESH_MS = 10_000;
/** Audit entries shown: enough for "what happened lately" without paging. */
export const ACTIVITY_LIMIT = 50;

/**
 * The fleet page for whoever is logged in: the view for an admin, a plain refusal for anyone
 * else (never a request the server would refuse anyway).
 */
export function FleetPage(props: LivePageProps & { readonly me: Resource<Me> }) {
  const me = shownValue(props.me);
  if (me === null) {
    if (props.me.status === 'error') return <ErrorBox error={props.me.error} />;
    return <Progress what="Checking who you are…" />;
  }
  if (!me.admin)
    return (
      <div className="empty" data-testid="fleet-admins-only">
        <p>Admins only: the fleet view shows every agent and everyone's activity.</p>
        <p className="muted">You are logged in as {me.name}, who is not an admin.</p>
      </div>
    );
  return <FleetView {...props} />;
}

function FleetView({ api, live, url, setUrl, onUnauthenticated }: LivePageProps) {
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
    <div className="fleet-view">
      <div className="toolbar">
        <h2>Fleet</h2>
        <button type="button" onClick={reloadAll}>
          Refresh
        </button>
        <span className="muted">reloads when agents come or go, and every {FLEET_REFRESH_MS / 1000} s</span>
      </div>

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
    </div>
  );
}

type LinkProps = { href: string; onClick: (e: MouseEvent<HTMLAnchorElement>) => void };

/** A real link (it opens in a new tab too) that a plain click follows inside the page. */
function follow(go: () => void): (e: MouseEvent<HTMLAnchorElement>) => void {
  return (e) => {
    if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    go();
  };
}

const MIB = 1024 * 1024;

function AgentRow({ agent: a }: { agent: FleetAgent }) {
  const h = a.health;
  const lastError = h?.lastError ? `${h.lastError.code}: ${h.lastError.message}` : null;
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

function HungRow({
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
      <td>{formatCount(h.pendingSends)}</td>
      <td>{formatCount(h.pendingReceives)}</td>
      <td>{formatCount(h.unexpected)}</td>
      <td>
        <a {...snapLink(h.jobId, h.lastSnapshotId)}>open in the matrix</a>
      </td>
    </tr>
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
