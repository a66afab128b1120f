// Small shared pieces of chrome: progress and coded errors, shown where they happen.
import { codedText, type RankSnapshot, textAfterCode } from '@mqd/model';
import type { ApiError } from './api.js';
import { correctionNotes } from './format.js';
import { progressLabel, type SnapshotTaking } from './live-events.js';

export function Progress({ what }: { what: string }) {
  return (
    <div className="progress" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      {what}
    </div>
  );
}

/** A coded error as the server or the client wrote it: `CODE: what happened: what to do`. */
export function ErrorBox({ error, compact = false }: { error: ApiError; compact?: boolean }) {
  return (
    <div className={compact ? 'error compact' : 'error'} role="alert" data-testid="error">
      <strong>{error.code}</strong>
      {!compact && <span> {textAfterCode(error)}</span>}
      {compact && <span title={codedText(error)}> {textAfterCode(error).slice(0, 80)}…</span>}
    </div>
  );
}

/** A coded error inline: the code in bold, then the message without the code again. */
export function CodedText({ error }: { error: { readonly code: string; readonly message: string } }) {
  return (
    <>
      <strong>{error.code}</strong> {textAfterCode(error)}
    </>
  );
}

export function KindSwatch({ color }: { color: string }) {
  return <span className="swatch" style={{ background: color }} aria-hidden="true" />;
}

/** A queue the library cannot show: the plain sentence first, the coded reason under it. */
export function Unavailable({ text, reason }: { text: string; reason: string | undefined }) {
  return (
    <div className="unavailable" role="note" data-testid="queue-unavailable">
      <p>{text}</p>
      {reason && <p className="muted">Reason reported: {reason}</p>}
    </div>
  );
}

/**
 * A snapshot in flight: ranks answered so far once the server reports them, else a spinner.
 * `what` says whose snapshot it is.
 */
export function SnapshotProgressBar({
  state,
  what,
  origin,
}: {
  state: SnapshotTaking & { kind: 'busy' };
  what: string;
  /** `page`: this page started it; `elsewhere`: someone else did (another user, tab or the CLI). */
  origin: 'page' | 'elsewhere';
}) {
  const label = progressLabel(state);
  if (state.progress === null || label === null) return <Progress what={what} />;
  return (
    <div
      className="progress snapshot-progress"
      role="status"
      aria-live="polite"
      data-testid="snapshot-progress"
      data-origin={origin}
      data-job={state.job}
      data-received={state.progress.received}
      data-expected={state.progress.expected}
    >
      <span>{what}</span>
      <span className="bar-line">
        <progress max={Math.max(1, state.progress.expected)} value={state.progress.received} />
        <span>{label}</span>
      </span>
    </div>
  );
}

/**
 * Where the rank's queues came from when not from the MPI library's DLL (Open MPI's ucx PML:
 * UCX's worker), and each thing that could not be known there, by its code.
 */
export function QueueSourceNote({ rank }: { rank: Pick<RankSnapshot, 'queueSource'> }) {
  const q = rank.queueSource;
  if (!q) return null;
  return (
    <div className="hint" data-testid="rank-queue-source">
      <p>
        Queues read from UCX ({q.library || 'no libucp.so mapped'}): this rank runs Open MPI's ucx PML, whose
        requests Open MPI's DLL cannot see.
      </p>
      {q.limits.map((l) => (
        <p key={l.code}>
          <CodedText error={l} />
        </p>
      ))}
    </div>
  );
}

/** Why some statuses read "(corrected)": said once for the rank, not on every row. */
export function StatusCorrections({ rank }: { rank: Pick<RankSnapshot, 'statusCorrections'> }) {
  const notes = correctionNotes(rank);
  if (notes.length === 0) return null;
  return (
    <div className="hint" data-testid="rank-status-corrections">
      {notes.map((n) => (
        <p key={n}>{n}</p>
      ))}
    </div>
  );
}
