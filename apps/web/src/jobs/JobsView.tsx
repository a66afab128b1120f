// Jobs: the jobs the aggregator knows, attaching to a new one by its starter's pid, its Slurm
// job id or a directory of its core files, taking a snapshot, and the snapshots of the
// selected job. While the live connection (live.ts) is up,
// the lists reload when the server says a job was attached or a snapshot stored, and a snapshot
// being taken shows how many ranks have answered; while it is down, the lists are polled every
// 5 s when auto-refresh is on. The REST answer alone decides how a snapshot ended.
import { type JobId, jobLabel, MAX_CORES_DIR_CHARS, Pid, SLURM_JOB_RE, type SnapshotId } from '@mqd/model';
import { useEffect, useMemo, useReducer, useState } from 'react';
import {
  type Api,
  type ApiError,
  type AttachRequest,
  isUnauthenticated,
  type JobSummary,
  NOT_READABLE,
  NOT_READABLE_MEANS,
  notReadableLegend,
} from '../api.js';
import { rememberSnapshot } from '../data.js';
import { formatAge, formatTime } from '../format.js';
import { shownValue, useInterval, useResource } from '../hooks.js';
import { trackBusy } from '../idle.js';
import type { LiveStatus } from '../live.js';
import { SNAPSHOT_IDLE, snapshotReducer } from '../live-events.js';
import { ErrorBox, Progress, SnapshotProgressBar } from '../ui.js';
import { useLiveJobs, useLiveStatus, useOnReconnect } from '../use-live.js';
import type { LivePageProps } from '../view-types.js';
import {
  ENDED_PAGE,
  type HistoryDot,
  loadJobs,
  loadTriage,
  readKind,
  stateText,
  triageOrder,
} from './job-triage.js';

const POLL_MS = 5000;

const LIVE_LABEL: Record<LiveStatus, { text: string; title: string }> = {
  connected: {
    text: 'live',
    title: 'The server pushes changes: the lists reload when a job or snapshot is added',
  },
  connecting: {
    text: 'connecting…',
    title: 'Live updates are (re)connecting; until then the lists are polled when auto-refresh is on',
  },
  refused: {
    text: 'not live',
    title: 'The server refused live updates (no session?): the lists are polled when auto-refresh is on',
  },
  closed: { text: 'not live', title: 'No live connection: the lists are polled when auto-refresh is on' },
};

export function JobsView({ api, live, url, setUrl, onUnauthenticated }: LivePageProps) {
  const liveStatus = useLiveStatus(live);
  // Polling is the fallback: pushed events replace it while the connection is up.
  const poll = url.auto && liveStatus !== 'connected';
  // Every live job and the newest ended ones, searched on the server (the URL's jq).
  const query = url.jq ?? '';
  const [endedWanted, setEndedWanted] = useState(ENDED_PAGE);
  const [jobs, reloadJobs] = useResource(`jobs:${endedWanted}:${query.trim()}`, (signal) =>
    loadJobs(api, query, endedWanted, signal),
  );
  useInterval(poll, POLL_MS, reloadJobs);
  const jobPage = shownValue(jobs);
  const jobList = jobPage?.jobs ?? null;
  const selected = url.job;
  const [snapshots, reloadSnapshots] = useResource(
    selected === null ? null : `snapshots:${selected}`,
    (signal) => {
      if (selected === null) throw new Error('unreachable: the loader runs only with a job selected');
      return api.snapshots(selected, signal);
    },
  );
  useInterval(poll && selected !== null, POLL_MS, reloadSnapshots);
  useLiveJobs(live, (e) => {
    reloadJobs();
    if (e.jobId === selected) reloadSnapshots();
  });
  useOnReconnect(live, () => {
    reloadJobs();
    if (selected !== null) reloadSnapshots();
  });

  useEffect(() => {
    for (const r of [jobs, snapshots])
      if (r.status === 'error' && isUnauthenticated(r.error)) onUnauthenticated();
  }, [jobs, snapshots, onUnauthenticated]);

  const [snapState, dispatchSnap] = useReducer(snapshotReducer, SNAPSHOT_IDLE);
  const takeSnapshot = async (job: JobId) => {
    dispatchSnap({ type: 'start', job });
    // Subscribed before the request leaves, so no progress event can slip past.
    const progress = live?.onProgress(job, (event) => dispatchSnap({ type: 'progress', event }));
    const r = await trackBusy(api.takeSnapshot(job)).finally(() => progress?.dispose());
    if (!r.ok) {
      dispatchSnap({ type: 'failed', job, error: r.error });
      return;
    }
    dispatchSnap({ type: 'succeeded', job });
    rememberSnapshot(r.value.id, {
      takenAt: r.value.snapshot.takenAt,
      jobId: job,
      snapshot: r.value.snapshot,
    });
    setUrl({ job, snap: r.value.id, view: 'matrix', cell: null, zoom: null });
  };

  const selectedJob = jobList?.find((j) => j.id === selected) ?? null;
  const openSnapshot = (id: SnapshotId) => setUrl({ snap: id, view: 'matrix', cell: null, zoom: null });
  const unreadableLegend = notReadableLegend((shownValue(snapshots) ?? []).map((s) => s.summary));

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
            title={`Poll the server every ${POLL_MS / 1000} s while live updates are not connected`}
          >
            <input
              type="checkbox"
              checked={url.auto}
              onChange={(e) => setUrl({ auto: e.target.checked }, 'replace')}
            />{' '}
            Auto-refresh (every {POLL_MS / 1000} s when not live)
          </label>
          <span
            className={`live-status live-${liveStatus}`}
            title={LIVE_LABEL[liveStatus].title}
            data-testid="live-status"
            data-status={liveStatus}
          >
            {LIVE_LABEL[liveStatus].text}
          </span>
        </div>
        <AttachForm
          api={api}
          onAttached={(id) => {
            reloadJobs();
            if (id === null) return;
            // The job's first snapshot, taken now and opened (also for a job the hang watch
            // found before: its samples may be hours old, or none stored).
            setUrl({ job: id, snap: null });
            void takeSnapshot(id);
          }}
        />
        {jobs.status === 'loading' && !jobList && <Progress what="Loading jobs…" />}
        {jobs.status === 'error' && <ErrorBox error={jobs.error} />}
        {jobList && jobList.length === 0 && query.trim() === '' && (
          <p className="empty">
            No jobs yet. Attach to an MPI job by the pid of its starter (mpirun / mpiexec) above, or{' '}
            <a href="/?demo=1024">open a synthetic 1,024-rank demo</a>.
          </p>
        )}
        {jobPage && (jobPage.jobs.length > 0 || query.trim() !== '') && (
          <JobsTable
            api={api}
            jobs={jobPage.jobs}
            endedTotal={jobPage.endedTotal}
            onMoreEnded={() => setEndedWanted(endedWanted + ENDED_PAGE)}
            query={query}
            onQuery={(q) => {
              setEndedWanted(ENDED_PAGE);
              setUrl({ jq: q.trim() === '' ? null : q }, 'replace');
            }}
            selected={selected}
            onSelect={(id) => setUrl({ job: id, snap: null })}
            onSnapshot={(id) => void takeSnapshot(id)}
            busyJob={snapState.kind === 'busy' ? snapState.job : null}
          />
        )}
        {snapState.kind === 'busy' && (
          <SnapshotProgressBar
            state={snapState}
            origin="page"
            what={
              jobList?.find((j) => j.id === snapState.job)?.coresDir
                ? `Taking a snapshot of job ${snapState.job}: reading its core files…`
                : `Taking a snapshot of job ${snapState.job}: every rank is stopped briefly while its queues are read…`
            }
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
              <h2>
                Snapshots of {selectedJob ? jobLabel(selectedJob.command).program : 'job'}{' '}
                <span className="job-id">job {selected}</span>
              </h2>
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
                  <li
                    key={s.id}
                    className={`read-${readKind(s.meta)}${s.id === url.snap ? ' current' : ''}`}
                    data-read={readKind(s.meta)}
                  >
                    {readKind(s.meta) !== 'ok' && (
                      <span className={`read-flag read-flag-${readKind(s.meta)}`}>
                        {readKind(s.meta) === 'failed' ? 'not read' : 'partly read'}
                      </span>
                    )}{' '}
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
                        <span
                          key={k}
                          className="kv"
                          title={v === NOT_READABLE ? NOT_READABLE_MEANS : undefined}
                        >
                          {k}: {String(v)}
                        </span>
                      ))}
                    </span>
                  </li>
                ))}
            </ul>
            {unreadableLegend !== null && (
              <p className="empty" data-testid="not-readable-legend">
                {unreadableLegend}
              </p>
            )}
          </>
        )}
      </section>
    </div>
  );
}

/** Rows drawn at first, and added per "show more": a thousand jobs draw as fast as a hundred. */
export const JOBS_SHOWN = 100;

function JobsTable({
  api,
  jobs,
  endedTotal,
  onMoreEnded,
  query,
  onQuery,
  selected,
  onSelect,
  onSnapshot,
  busyJob,
}: {
  api: Api;
  jobs: readonly JobSummary[];
  /** Ended jobs matching the search on the server; `jobs` holds the newest of them. */
  endedTotal: number;
  onMoreEnded: () => void;
  query: string;
  onQuery: (q: string) => void;
  selected: JobId | null;
  onSelect: (id: JobId) => void;
  onSnapshot: (id: JobId) => void;
  busyJob: JobId | null;
}) {
  const { live, ended } = useMemo(() => triageOrder(jobs, query), [jobs, query]);
  const [shown, setShown] = useState(JOBS_SHOWN);
  const [endedOpen, setEndedOpen] = useState(false);
  const hung = live.filter((j) => j.state === 'hung').length;
  const row = (j: JobSummary) => (
    <JobRow
      key={j.id}
      api={api}
      job={j}
      selected={j.id === selected}
      onSelect={() => onSelect(j.id)}
      onSnapshot={() => onSnapshot(j.id)}
      busy={busyJob === j.id}
    />
  );
  const head = (
    <thead>
      <tr>
        <th>State</th>
        <th>Program</th>
        <th>Ranks</th>
        <th>Last snapshots</th>
        <th>
          <span className="sr-only">Actions</span>
        </th>
      </tr>
    </thead>
  );
  return (
    <>
      <p className="jobs-search">
        <label>
          Search{' '}
          <input
            type="search"
            value={query}
            onChange={(e) => onQuery(e.target.value)}
            placeholder="program, user, job id or node"
            data-testid="jobs-search"
          />
        </label>{' '}
        <span className="muted" data-testid="jobs-count">
          {live.length.toLocaleString('en-US')} live ({hung.toLocaleString('en-US')} hung),{' '}
          {endedTotal.toLocaleString('en-US')} ended
          {query.trim() === '' ? '' : ` matching “${query.trim()}”`}
        </span>
      </p>
      {live.length === 0 && (
        <p className="empty">No live job{query.trim() === '' ? '' : ' matches the search'}.</p>
      )}
      {live.length > 0 && (
        <table className="ops jobs" data-testid="jobs-table">
          <caption className="sr-only">Live jobs, hung first</caption>
          {head}
          <tbody>{live.slice(0, shown).map(row)}</tbody>
        </table>
      )}
      {live.length > shown && (
        <button type="button" onClick={() => setShown(shown + JOBS_SHOWN)} data-testid="jobs-more">
          Show {Math.min(JOBS_SHOWN, live.length - shown).toLocaleString('en-US')} more of{' '}
          {(live.length - shown).toLocaleString('en-US')} live jobs
        </button>
      )}
      {endedTotal > 0 && (
        <details
          className="jobs-ended"
          data-testid="jobs-ended"
          open={endedOpen}
          onToggle={(e) => setEndedOpen(e.currentTarget.open)}
        >
          <summary>Ended ({endedTotal.toLocaleString('en-US')})</summary>
          {endedOpen && (
            <table className="ops jobs" data-testid="jobs-ended-table">
              <caption className="sr-only">Ended jobs, newest first</caption>
              {head}
              <tbody>{ended.map(row)}</tbody>
            </table>
          )}
          {endedOpen && endedTotal > ended.length && (
            <button type="button" onClick={onMoreEnded} data-testid="jobs-more-ended">
              Show more ended jobs ({(endedTotal - ended.length).toLocaleString('en-US')})
            </button>
          )}
        </details>
      )}
    </>
  );
}

function JobRow({
  api,
  job,
  selected,
  onSelect,
  onSnapshot,
  busy,
}: {
  api: Api;
  job: JobSummary;
  selected: boolean;
  onSelect: () => void;
  onSnapshot: () => void;
  busy: boolean;
}) {
  // Reloaded when the job gets a new snapshot or changes state.
  const [triage] = useResource(`triage:${job.id}:${job.lastSnapshotAt ?? ''}:${job.state}`, (signal) =>
    loadTriage(api, job, signal),
  );
  const t = shownValue(triage);
  const label = jobLabel(job.command);
  const detail =
    job.coresDir === null
      ? `${job.command} · job ${job.id}, starter pid ${job.starterPid} on ${job.host}${job.user === null ? '' : ` · ${job.user}`}`
      : `core files in ${job.coresDir} · job ${job.id} on ${job.host}`;
  // The model's line on the newest snapshot when computed here, else the server's (the watch's or the reason).
  const line = t?.line ?? job.diagnosis;
  return (
    <tr
      className={selected ? 'selected clickable' : 'clickable'}
      onClick={onSelect}
      data-testid="job-row"
      data-state={job.state}
      data-job={job.id}
    >
      <td>
        <span
          className={`state verdict-${job.state}`}
          title={job.diagnosis}
          data-testid="job-verdict"
          data-verdict={job.state}
        >
          {stateText(job)}
        </span>
        {line !== '' && job.state !== 'ended' && (
          <span className="program-detail job-diagnosis" data-testid="job-diagnosis">
            <bdi>{line}</bdi>
          </span>
        )}
      </td>
      <td className="program" title={job.coresDir === null ? job.command : `${job.command}\n${job.coresDir}`}>
        {job.coresDir !== null && (
          <span className="badge badge-cores" data-testid="job-cores" title={`core files in ${job.coresDir}`}>
            cores
          </span>
        )}{' '}
        <strong className="program-name" data-testid="job-program">
          <bdi>{label.program}</bdi>
        </strong>{' '}
        {label.args !== '' && (
          <span className="program-args">
            <bdi>{label.args}</bdi>
          </span>
        )}
        <span className="program-detail">
          {job.coresDir === null ? (
            <bdi>{detail}</bdi>
          ) : (
            <span className="cores-dir">
              <bdi>{detail}</bdi>
            </span>
          )}
        </span>
      </td>
      <td>{job.ranks.toLocaleString()}</td>
      <td>
        <SnapshotHistory dots={t?.history ?? []} />{' '}
        <span className="age" title={formatTime(job.lastSnapshotAt)}>
          {formatAge(job.lastSnapshotAt)}
        </span>
      </td>
      <td>
        {job.state !== 'ended' && (
          <button
            type="button"
            disabled={busy}
            onClick={(e) => {
              e.stopPropagation();
              onSnapshot();
            }}
            data-testid="take-snapshot"
          >
            {busy ? 'Taking…' : 'Take snapshot'}
          </button>
        )}
      </td>
    </tr>
  );
}

const DOT_TEXT = { ok: 'read', partial: 'partly read', failed: 'not read' } as const;

/** The last snapshots, oldest first: filled = read, half = partly read, a cross = not read. */
function SnapshotHistory({ dots }: { dots: readonly HistoryDot[] }) {
  if (dots.length === 0) return null;
  const failed = dots.filter((d) => d.read === 'failed').length;
  return (
    <span
      className="history"
      role="img"
      data-testid="job-history"
      aria-label={`last ${dots.length} snapshots: ${dots.map((d) => DOT_TEXT[d.read]).join(', ')}`}
      data-failed={failed}
    >
      {dots.map((d) => (
        <span
          key={d.id}
          className={`dot dot-${d.read}${d.changed === true ? ' dot-changed' : ''}`}
          title={d.title}
          data-read={d.read}
        />
      ))}
    </span>
  );
}

function AttachForm({ api, onAttached }: { api: Api; onAttached: (id: JobId | null) => void }) {
  const [host, setHost] = useState('');
  const [pid, setPid] = useState('');
  const [slurm, setSlurm] = useState('');
  const [cores, setCores] = useState('');
  const [state, setState] = useState<
    { kind: 'idle' } | { kind: 'busy' } | { kind: 'error'; error: ApiError }
  >({
    kind: 'idle',
  });
  // An error answers the form as it was sent: editing any field makes it stale.
  const edit = (set: (v: string) => void) => (e: { target: { value: string } }) => {
    set(e.target.value);
    if (state.kind === 'error') setState({ kind: 'idle' });
  };
  const pidNumber = Number(pid);
  const pidValid = /^\d+$/.test(pid.trim()) && pidNumber >= 1 && pidNumber <= 0x3fffffff;
  const slurmValid = SLURM_JOB_RE.test(slurm.trim());
  // The server decides which directories are allowed; here only the shape (an absolute path).
  const coresValid = cores.trim().startsWith('/') && cores.trim().length <= MAX_CORES_DIR_CHARS;
  // Exactly one of the three: a starter pid on a node, a Slurm job id, or a core directory.
  const given = [pid, slurm, cores].filter((x) => x.trim() !== '').length;
  const valid = given === 1 && (pidValid || slurmValid || coresValid);
  return (
    <form
      className="attach"
      onSubmit={async (e) => {
        e.preventDefault();
        if (!valid) return;
        setState({ kind: 'busy' });
        const where = host.trim() === '' ? {} : { host: host.trim() };
        const req: AttachRequest = slurmValid
          ? { ...where, slurmJob: slurm.trim() }
          : coresValid
            ? { ...where, coresDir: cores.trim() }
            : { ...where, starterPid: Pid(pidNumber) };
        const r = await trackBusy(api.attach(req));
        if (!r.ok) {
          setState({ kind: 'error', error: r.error });
          return;
        }
        setState({ kind: 'idle' });
        setPid('');
        setSlurm('');
        setCores('');
        onAttached(r.value);
      }}
    >
      <label>
        Starter pid{' '}
        <input
          value={pid}
          onChange={edit(setPid)}
          inputMode="numeric"
          placeholder="pid of mpirun / mpiexec"
          aria-invalid={pid !== '' && !pidValid}
          data-testid="attach-pid"
        />
      </label>
      <label>
        or Slurm job{' '}
        <input
          value={slurm}
          onChange={edit(setSlurm)}
          placeholder="JOBID[.STEP] as squeue shows it"
          aria-invalid={slurm !== '' && !slurmValid}
          data-testid="attach-slurm"
        />
      </label>
      <label title="A directory of one core file per rank (a `mqd capture`, or files named rank-N.core) inside a directory the admin allows">
        or core directory{' '}
        <input
          value={cores}
          onChange={edit(setCores)}
          placeholder="/path/to/cores on that host"
          aria-invalid={cores !== '' && !coresValid}
          data-testid="attach-cores"
        />
      </label>
      <label>
        Host{' '}
        <input
          value={host}
          onChange={edit(setHost)}
          placeholder="this host (Slurm: the batch host)"
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
