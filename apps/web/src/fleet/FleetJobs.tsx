// The hang watch's jobs table: every MPI job the agents discovered that this
// user may see, with its watch mode, state chip, least-progressed ranks, diagnosis and a small
// history of its samples; the program is a link to the snapshot behind the verdict (for an
// ended job, its last one: "last seen"). The words come from fleet-text.ts; this file lays them
// out. Stateless: the page passes the jobs, the sort and the links (test/fleet-view.test.ts).
import type { ApiFleetJob, JobId, SnapshotId, WatchState } from '@mqd/model';
import type { FleetSort } from '../url-state.js';
import {
  coresText,
  endedText,
  formatSince,
  historyCells,
  historyText,
  jobIdText,
  leastProgressedText,
  placeText,
  programText,
  ranksOnNodesText,
  sortFleetJobs,
  stateChipText,
  watchModeText,
} from './fleet-text.js';
import type { LinkProps } from './links.js';

export interface FleetJobsProps {
  readonly jobs: readonly ApiFleetJob[];
  readonly sort: FleetSort;
  readonly onSort: (by: FleetSort) => void;
  /** The link that opens a snapshot in the snapshot views. */
  readonly snapshotLink: (job: JobId | null, snap: SnapshotId) => LinkProps;
  readonly now: number;
  /** For tests; the viewer's own zone otherwise. */
  readonly timeZone?: string;
}

const CELL = 8;
const CELL_GAP = 2;

export function FleetJobs({ jobs, sort, onSort, snapshotLink, now, timeZone }: FleetJobsProps) {
  const sorted = sortFleetJobs(jobs, sort);
  // Live jobs in the table; the ended ones folded below it (the server pages them last).
  const rows = sorted.filter((j) => j.endedAt === null);
  const ended = sorted.filter((j) => j.endedAt !== null);
  const row = (j: ApiFleetJob) => (
    <FleetJobRow
      key={j.key}
      job={j}
      snapshotLink={snapshotLink}
      now={now}
      {...(timeZone === undefined ? {} : { timeZone })}
    />
  );
  const sortHeader = (by: FleetSort, label: string, title: string) => (
    <th aria-sort={sort === by ? (by === 'state' ? 'other' : 'ascending') : undefined}>
      <button
        type="button"
        className="link fleet-sort"
        data-testid={`fleet-sort-${by}`}
        aria-pressed={sort === by}
        title={title}
        onClick={() => onSort(by)}
      >
        {label}
        {sort === by ? ' ▾' : ''}
      </button>
    </th>
  );
  return (
    <table className="ops fleet-jobs" data-testid="fleet-jobs-table">
      <caption className="sr-only">
        Discovered MPI jobs, {sort === 'state' ? 'hung jobs first' : 'longest in their state first'}
      </caption>
      <thead>
        <tr>
          <th>Job</th>
          <th>User</th>
          <th>Partition / account</th>
          <th>Ranks</th>
          <th>Watch</th>
          {sortHeader('state', 'State', 'Sort by state: hung jobs first, jobs that ended last')}
          {sortHeader('since', 'Since', 'Sort by how long each job has been in its state')}
          <th>Diagnosis</th>
          <th>History</th>
          <th>Snapshot</th>
        </tr>
      </thead>
      <tbody>{rows.map(row)}</tbody>
      {ended.length > 0 && (
        <tbody>
          <tr>
            <td colSpan={10}>
              <details data-testid="fleet-ended">
                <summary>Ended ({ended.length.toLocaleString('en-US')} on this page)</summary>
                <table className="ops fleet-jobs">
                  <tbody>{ended.map(row)}</tbody>
                </table>
              </details>
            </td>
          </tr>
        </tbody>
      )}
    </table>
  );
}

function FleetJobRow({
  job: j,
  snapshotLink,
  now,
  timeZone,
}: {
  job: ApiFleetJob;
  snapshotLink: FleetJobsProps['snapshotLink'];
  now: number;
  timeZone?: string;
}) {
  const ended = endedText(j, now, timeZone);
  const least = leastProgressedText(j.leastProgressed);
  const link = j.snapshotId === null ? null : snapshotLink(j.jobId, j.snapshotId);
  const program = (
    <bdi className="program-name" data-testid="fleet-job-program">
      {programText(j)}
    </bdi>
  );
  return (
    <tr
      data-testid="fleet-job-row"
      data-key={j.key}
      data-state={j.state}
      data-watch={j.watch}
      data-ended={String(ended !== null)}
    >
      <td className="program" title={j.command}>
        {link === null ? program : <a {...link}>{program}</a>}
        <span className="program-detail">{jobIdText(j)}</span>
      </td>
      <td data-testid="fleet-job-user">
        {j.user === null ? <span className="muted">uid {j.uid}</span> : <bdi>{j.user}</bdi>}
      </td>
      <td>
        <bdi>{placeText(j)}</bdi>
      </td>
      <td>{ranksOnNodesText(j)}</td>
      <td data-testid="fleet-job-watch" className={j.watch === 'on' ? undefined : 'muted-strong'}>
        {watchModeText(j.watch)}
        {j.watch === 'budget' && (
          <span className="program-detail">
            {j.stopMsThisHour.toLocaleString('en-US')} of {j.stopBudgetMs.toLocaleString('en-US')} ms this
            hour
          </span>
        )}
      </td>
      <td>
        {ended === null ? (
          <span className={`state fleet-state-${j.state}`} data-testid="fleet-job-state">
            {stateChipText(j, now, timeZone)}
          </span>
        ) : (
          <span className="state fleet-state-ended" data-testid="fleet-job-state">
            {ended}
          </span>
        )}
      </td>
      <td>{j.since === null ? <span className="muted">—</span> : formatSince(j.since, now, timeZone)}</td>
      <td className="fleet-diagnosis">
        {least !== null && (
          <span className="fleet-least" data-testid="fleet-job-least">
            {least}
          </span>
        )}
        {j.diagnosis !== '' && (
          <span className="fleet-diagnosis-line" data-testid="fleet-job-diagnosis">
            {j.diagnosis}
          </span>
        )}
        {coresText(j) !== null && (
          <span className="fleet-diagnosis-line" data-testid="fleet-job-cores">
            <bdi>{coresText(j)}</bdi>
          </span>
        )}
        {least === null && j.diagnosis === '' && <span className="muted">—</span>}
      </td>
      <td>
        <History job={j} now={now} {...(timeZone === undefined ? {} : { timeZone })} />
      </td>
      <td>
        {link === null ? (
          <span className="muted">no snapshot yet</span>
        ) : (
          <a {...link} data-testid="fleet-job-snapshot">
            {ended === null ? 'open the snapshot' : 'last seen'}
          </a>
        )}
      </td>
    </tr>
  );
}

/** The last ≤24 samples as coloured cells; the words are in the cells' titles and a hidden line. */
function History({ job, now, timeZone }: { job: ApiFleetJob; now: number; timeZone?: string }) {
  const cells = historyCells(job.history, now, timeZone);
  const width = Math.max(1, cells.length * (CELL + CELL_GAP) - CELL_GAP);
  return (
    <span
      className="fleet-history"
      data-testid="fleet-history"
      data-states={cells.map((c) => c.state).join(',')}
    >
      {cells.length > 0 && (
        <svg
          width={width}
          height={CELL}
          viewBox={`0 0 ${width} ${CELL}`}
          aria-hidden="true"
          focusable="false"
        >
          {cells.map((c, i) => (
            <rect
              // biome-ignore lint/suspicious/noArrayIndexKey: the cells are positions in time, not items.
              key={i}
              x={i * (CELL + CELL_GAP)}
              y={0}
              width={CELL}
              height={CELL}
              rx={1.5}
              className={`fleet-cell fleet-cell-${c.state}${c.snapshot ? ' fleet-cell-snapshot' : ''}`}
            >
              <title>{c.label}</title>
            </rect>
          ))}
        </svg>
      )}
      <span className={cells.length > 0 ? 'sr-only' : 'muted'} data-testid="fleet-history-text">
        {historyText(job.history, now, timeZone)}
      </span>
    </span>
  );
}

/** The colour legend's states, in the table's order. */
export const LEGEND_STATES: readonly WatchState[] = [
  'hung',
  'waiting',
  'unknown',
  'computing',
  'progressing',
];
