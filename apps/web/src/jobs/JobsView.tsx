// Jobs: the jobs the aggregator knows, attaching to a new one by its starter's pid, taking a
// snapshot, and the snapshots of the selected job. The list refreshes by polling when
// auto-refresh is on: the server's socket.io push on /ui is not used because the dashboard
// may not depend on socket.io-client.
import { type JobId, Pid, type SnapshotId } from '@mqd/model';
import { useEffect, useState } from 'react';
import type { SetUrl } from '../App.js';
import { type Api, type ApiError, isUnauthenticated, type JobState, type JobSummary } from '../api.js';
import { rememberSnapshot } from '../data.js';
import { formatAge, formatTime } from '../format.js';
import { shownValue, useInterval, useResource } from '../hooks.js';
import { trackBusy } from '../idle.js';
import { ErrorBox, Progress } from '../ui.js';
import type { UrlState } from '../url-state.js';

const POLL_MS = 5000;

const STATE_LABEL: Record<JobState, string> = {
  running: 'running',
  'looks-hung': 'looks hung',
  ended: 'ended',
};

export function JobsView({
  api,
  url,
  setUrl,
  onUnauthenticated,
}: {
  api: Api;
  url: UrlState;
  setUrl: SetUrl;
  onUnauthenticated: () => void;
}) {
  const [jobs, reloadJobs] = useResource('jobs', (signal) => api.jobs(signal));
  useInterval(url.auto, POLL_MS, reloadJobs);
  const jobList = shownValue(jobs);
  const selected = url.job;
  const [snapshots, reloadSnapshots] = useResource(
    selected === null ? null : `snapshots:${selected}`,
    (signal) => {
      if (selected === null) throw new Error('unreachable: the loader runs only with a job selected');
      return api.snapshots(selected, signal);
    },
  );
  useInterval(url.auto && selected !== null, POLL_MS, reloadSnapshots);

  useEffect(() => {
    for (const r of [jobs, snapshots])
      if (r.status === 'error' && isUnauthenticated(r.error)) onUnauthenticated();
  }, [jobs, snapshots, onUnauthenticated]);

  const [snapState, setSnapState] = useState<
    { kind: 'idle' } | { kind: 'busy'; job: JobId } | { kind: 'error'; job: JobId; error: ApiError }
  >({ kind: 'idle' });
  const takeSnapshot = async (job: JobId) => {
    setSnapState({ kind: 'busy', job });
    const r = await trackBusy(api.takeSnapshot(job));
    if (!r.ok) {
      setSnapState({ kind: 'error', job, error: r.error });
      return;
    }
    setSnapState({ kind: 'idle' });
    rememberSnapshot(r.value.id, {
      takenAt: r.value.snapshot.takenAt,
      jobId: job,
      snapshot: r.value.snapshot,
    });
    setUrl({ job, snap: r.value.id, view: 'matrix', cell: null, zoom: null });
  };

  const openSnapshot = (id: SnapshotId) => setUrl({ snap: id, view: 'matrix', cell: null, zoom: null });

  return (
    <div className="jobs-view">
      <section className="jobs-list">
        <div className="toolbar">
          <h2>Jobs</h2>
          <button type="button" onClick={reloadJobs} disabled={jobs.status === 'loading'}>
            Refresh
          </button>
          <label
            className="check"
            title="Poll the server every 5 s (live push needs socket.io, which the dashboard does not use yet)"
          >
            <input
              type="checkbox"
              checked={url.auto}
              onChange={(e) => setUrl({ auto: e.target.checked }, 'replace')}
            />{' '}
            Auto-refresh (every {POLL_MS / 1000} s)
          </label>
        </div>
        <AttachForm
          api={api}
          onAttached={(id) => {
            reloadJobs();
            if (id !== null) setUrl({ job: id, snap: null });
          }}
        />
        {jobs.status === 'loading' && !jobList && <Progress what="Loading jobs…" />}
        {jobs.status === 'error' && <ErrorBox error={jobs.error} />}
        {jobList && jobList.length === 0 && (
          <p className="empty">
            No jobs yet. Attach to an MPI job by the pid of its starter (mpirun / mpiexec) above, or{' '}
            <a href="/?demo=1024">open a synthetic 1,024-rank demo</a>.
          </p>
        )}
        {jobList && jobList.length > 0 && (
          <table className="ops jobs" data-testid="jobs-table">
            <thead>
              <tr>
                <th>State</th>
                <th>Job</th>
                <th>Command</th>
                <th>Host</th>
                <th>Starter pid</th>
                <th>Ranks</th>
                <th>Last snapshot</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {jobList.map((j) => (
                <JobRow
                  key={j.id}
                  job={j}
                  selected={j.id === selected}
                  onSelect={() => setUrl({ job: j.id, snap: null })}
                  onSnapshot={() => void takeSnapshot(j.id)}
                  busy={snapState.kind === 'busy' && snapState.job === j.id}
                />
              ))}
            </tbody>
          </table>
        )}
        {snapState.kind === 'busy' && (
          <Progress
            what={`Taking a snapshot of job ${snapState.job}: every rank is stopped briefly while its queues are read…`}
          />
        )}
        {snapState.kind === 'error' && <ErrorBox error={snapState.error} />}
      </section>
      <section className="job-snapshots" aria-label="Snapshots of the selected job">
        {selected === null ? (
          <p className="empty">Select a job to see its snapshots.</p>
        ) : (
          <>
            <div className="toolbar">
              <h2>Snapshots of job {selected}</h2>
              <button type="button" onClick={reloadSnapshots}>
                Refresh
              </button>
            </div>
            {snapshots.status === 'loading' && !shownValue(snapshots) && (
              <Progress what="Loading snapshots…" />
            )}
            {snapshots.status === 'error' && <ErrorBox error={snapshots.error} />}
            {shownValue(snapshots)?.length === 0 && <p className="empty">No snapshots yet: take one.</p>}
            <ul className="snapshot-list">
              {[...(shownValue(snapshots) ?? [])]
                .sort((a, b) => b.takenAt.localeCompare(a.takenAt))
                .map((s) => (
                  <li key={s.id} className={s.id === url.snap ? 'current' : ''}>
                    <button
                      type="button"
                      className="link"
                      onClick={() => openSnapshot(s.id)}
                      data-testid="snapshot-link"
                    >
                      {formatTime(s.takenAt)}
                    </button>
                    <span className="summary">
                      {Object.entries(s.summary).map(([k, v]) => (
                        <span key={k} className="kv">
                          {k}: {String(v)}
                        </span>
                      ))}
                    </span>
                  </li>
                ))}
            </ul>
          </>
        )}
      </section>
    </div>
  );
}

function JobRow({
  job,
  selected,
  onSelect,
  onSnapshot,
  busy,
}: {
  job: JobSummary;
  selected: boolean;
  onSelect: () => void;
  onSnapshot: () => void;
  busy: boolean;
}) {
  return (
    <tr className={selected ? 'selected clickable' : 'clickable'} onClick={onSelect} data-testid="job-row">
      <td>
        <span className={`state state-${job.state}`}>{STATE_LABEL[job.state]}</span>
      </td>
      <td>{job.id}</td>
      <td className="command" title={job.command}>
        {job.command}
      </td>
      <td>{job.host}</td>
      <td>{job.starterPid}</td>
      <td>{job.ranks.toLocaleString()}</td>
      <td title={formatTime(job.lastSnapshotAt)}>{formatAge(job.lastSnapshotAt)}</td>
      <td>
        <button
          type="button"
          disabled={busy || job.state === 'ended'}
          onClick={(e) => {
            e.stopPropagation();
            onSnapshot();
          }}
          data-testid="take-snapshot"
        >
          {busy ? 'Taking…' : 'Take snapshot'}
        </button>
      </td>
    </tr>
  );
}

function AttachForm({ api, onAttached }: { api: Api; onAttached: (id: JobId | null) => void }) {
  const [host, setHost] = useState('');
  const [pid, setPid] = useState('');
  const [state, setState] = useState<
    { kind: 'idle' } | { kind: 'busy' } | { kind: 'error'; error: ApiError }
  >({
    kind: 'idle',
  });
  const pidNumber = Number(pid);
  const valid = /^\d+$/.test(pid.trim()) && pidNumber >= 1 && pidNumber <= 0x3fffffff;
  return (
    <form
      className="attach"
      onSubmit={async (e) => {
        e.preventDefault();
        if (!valid) return;
        setState({ kind: 'busy' });
        const req =
          host.trim() === ''
            ? { starterPid: Pid(pidNumber) }
            : { host: host.trim(), starterPid: Pid(pidNumber) };
        const r = await trackBusy(api.attach(req));
        if (!r.ok) {
          setState({ kind: 'error', error: r.error });
          return;
        }
        setState({ kind: 'idle' });
        setPid('');
        onAttached(r.value);
      }}
    >
      <label>
        Starter pid{' '}
        <input
          value={pid}
          onChange={(e) => setPid(e.target.value)}
          inputMode="numeric"
          placeholder="pid of mpirun / mpiexec"
          aria-invalid={pid !== '' && !valid}
          data-testid="attach-pid"
        />
      </label>
      <label>
        Host{' '}
        <input
          value={host}
          onChange={(e) => setHost(e.target.value)}
          placeholder="this host"
          data-testid="attach-host"
        />
      </label>
      <button type="submit" disabled={!valid || state.kind === 'busy'} data-testid="attach-button">
        {state.kind === 'busy' ? 'Attaching…' : 'Attach'}
      </button>
      {state.kind === 'error' && <ErrorBox error={state.error} />}
    </form>
  );
}
