// A rank's OpenMP threads, as the runtime's OMPD library read them in the same stop
// as the queues: state, wait id, parallel region and task of each, the thread inside the MPI
// call marked with that call, and the model's one-line picture of the rank (rankOpenMp). The
// model classifies; this only draws.
import { type OmpBlock, type OmpThreadFacts, type RankSnapshot, rankOpenMp } from '@mqd/model';
import { useMemo } from 'react';
import { CodedText } from '../ui.js';

const BLOCK_LABEL: Record<OmpBlock, string | null> = {
  mpi: 'the team waits on the thread in MPI',
  openmp: 'OpenMP deadlock: no thread can proceed',
  none: null,
};

export function OpenMpPanel({ rank }: { rank: RankSnapshot }) {
  const omp = useMemo(() => rankOpenMp(rank), [rank]);
  if (rank.openmpError !== undefined) {
    return (
      <section className="openmp" data-testid="openmp-panel" data-status="error" aria-label="OpenMP threads">
        <h3>OpenMP threads</h3>
        <div className="error" role="alert" data-testid="openmp-error">
          <CodedText error={rank.openmpError} />
        </div>
      </section>
    );
  }
  if (rank.openmp === null) {
    return (
      <section className="openmp" data-testid="openmp-panel" data-status="none" aria-label="OpenMP threads">
        <h3>OpenMP threads</h3>
        <p className="muted">No OpenMP runtime in this rank.</p>
      </section>
    );
  }
  // Not read (older agent, or stacks not asked for): nothing to say about OpenMP.
  if (omp === null) return null;
  const block = BLOCK_LABEL[omp.block];
  return (
    <section
      className="openmp"
      data-testid="openmp-panel"
      data-status="read"
      data-block={omp.block}
      aria-label="OpenMP threads"
    >
      <h3>
        OpenMP threads <span className="muted">{omp.threads.length}</span>
        {block !== null && <span className={`badge openmp-badge openmp-block-${omp.block}`}>{block}</span>}
      </h3>
      <p className="openmp-summary" data-testid="openmp-summary">
        {omp.text}
      </p>
      <p className="muted openmp-runtime">
        {omp.runtime} · {omp.version}
      </p>
      {omp.mpiOutsideOpenMp !== null && (
        <p className="muted">
          The MPI call ({omp.mpiOutsideOpenMp.call}) is made by thread {omp.mpiOutsideOpenMp.tid}, which the
          OpenMP runtime does not list.
        </p>
      )}
      <table className="ops compact openmp-threads">
        <thead>
          <tr>
            <th>Thread</th>
            <th>#</th>
            <th>State</th>
            <th>Wait id</th>
            <th>Region</th>
            <th>Task</th>
            <th>MPI call</th>
          </tr>
        </thead>
        <tbody>
          {omp.threads.map((t) => (
            <ThreadRow key={t.tid} t={t} />
          ))}
        </tbody>
      </table>
    </section>
  );
}

function region(t: OmpThreadFacts): string {
  const p = t.parallel;
  if (p === null) return '—';
  if (p.level === 0) return 'none (initial)';
  return `team of ${p.teamSize}, level ${p.level}${p.activeLevel === null || p.activeLevel === p.level ? '' : ` (active ${p.activeLevel})`}`;
}

function ThreadRow({ t }: { t: OmpThreadFacts }) {
  const cls = [t.mpiCall !== null ? 'in-mpi' : '', `omp-${t.kind}`].filter(Boolean).join(' ');
  return (
    <tr
      className={cls}
      data-testid="openmp-thread"
      data-tid={t.tid}
      data-thread-num={t.threadNum ?? ''}
      data-state={t.state}
      data-mpi-call={t.mpiCall ?? ''}
    >
      <td>
        {t.tid}
        {t.main === true && <span className="badge">main</span>}
      </td>
      <td>{t.threadNum ?? '—'}</td>
      <td title={t.state}>{t.label}</td>
      <td>{t.waitId === null ? '—' : <code>{t.waitId}</code>}</td>
      <td>{region(t)}</td>
      <td>
        {t.task === null ? (
          '—'
        ) : (
          <>
            <span className="fn">{t.task.function ?? t.task.entry ?? '?'}</span>{' '}
            <span className="muted">{t.task.kind}</span>
          </>
        )}
      </td>
      <td>
        {t.mpiCall === null ? (
          '—'
        ) : (
          <span className="badge mpi-call" data-testid="openmp-thread-mpi-call">
            {t.mpiCall}
          </span>
        )}
      </td>
    </tr>
  );
}
