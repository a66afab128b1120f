// The matrix's legend: one entry per mark the canvas and its axes draw, with the counts that
// say what is and is not drawn ("3 of 8 deadlock cycles outlined").
import { type CycleMarks, compressRanks, QUEUE_KINDS, QUEUE_LABEL, ranksPhrase } from '@mqd/model';
import { formatCount, plural } from '../format.js';
import { KindSwatch } from '../ui.js';
import { anySenderText } from './cell-text.js';
import { KIND_COLOR, ODD_CSS, OUTLIER_CSS } from './palette.js';
import type { RankNotes } from './rank-notes.js';
import { CYCLE_CSS, UNKNOWN_SENDER_CSS } from './renderer.js';

export function MatrixLegend({
  cycles,
  notes,
  strip,
}: {
  cycles: CycleMarks | null;
  notes: RankNotes;
  /** The any-sender strip's operations per kind (shown ones): MPI_ANY_SOURCE apart from sender unknown. */
  strip: { wildcard: readonly number[]; unknown: readonly number[] } | null;
}) {
  return (
    <p className="legend matrix-legend" data-testid="matrix-legend">
      {QUEUE_KINDS.map((k) => (
        <span key={k}>
          <KindSwatch color={KIND_COLOR[k]} /> {QUEUE_LABEL[k]}
        </span>
      ))}
      <span className="muted">(darker = more; colour = the kind with most)</span>
      <span data-testid="matrix-any-row">
        <strong className="strip-key">ANY</strong> row: receives from MPI_ANY_SOURCE;{' '}
        <span className="swatch" style={{ background: UNKNOWN_SENDER_CSS, height: 4 }} aria-hidden="true" />{' '}
        dark base: operations whose sender is unknown
        {strip && ` (${anySenderText(strip.wildcard, strip.unknown)})`}
      </span>
      <span>
        <strong className="strip-key">?</strong> column: sends to an unknown destination
      </span>
      {cycles && (
        <span data-testid="matrix-cycles">
          {cycles.cells.length + cycles.anySource.length === 0 ? (
            `deadlock ${cycles.cycleTotal === 1 ? 'cycle' : 'cycles'}: no message cell to outline (${plural(cycles.collectiveEdges, 'wait')} inside a collective)`
          ) : (
            <>
              <span className="swatch outline" style={{ borderColor: CYCLE_CSS }} aria-hidden="true" />{' '}
              {cycles.cycleTotal > cycles.cyclesMarked
                ? `${formatCount(cycles.cyclesMarked)} of ${formatCount(cycles.cycleTotal)} deadlock cycles outlined`
                : `deadlock ${cycles.cycleTotal === 1 ? 'cycle' : `cycles (${formatCount(cycles.cycleTotal)})`} outlined`}
              {cycles.cellsCut && `, first ${formatCount(cycles.cells.length)} cells`}
              {cycles.collectiveEdges > 0 &&
                `; ${plural(cycles.collectiveEdges, 'wait')} inside a collective ha${cycles.collectiveEdges === 1 ? 's' : 've'} no cell`}
            </>
          )}
        </span>
      )}
      {cycles && cycles.anySource.length > 0 && (
        <span data-testid="matrix-any-source">
          <span className="swatch outline dashed" style={{ borderColor: CYCLE_CSS }} aria-hidden="true" /> on
          the ANY row: {ranksPhrase(compressRanks(cycles.anySource))} wait
          {cycles.anySource.length === 1 ? 's' : ''} in the cycle on a receive from MPI_ANY_SOURCE
        </span>
      )}
      {notes.notRead && (
        <span>
          <span className="swatch hatch" aria-hidden="true" /> not read (reason in the tooltip)
        </span>
      )}
      {notes.oddOut.length > 0 && (
        <span data-testid="matrix-odd-out">
          <span style={{ color: ODD_CSS }} aria-hidden="true">
            ▼
          </span>{' '}
          odd rank{notes.oddOut.length === 1 ? '' : 's'} out: {ranksPhrase(compressRanks(notes.oddOut))}
        </span>
      )}
      {notes.outliers.length > 0 && (
        <span data-testid="matrix-outliers">
          <span style={{ color: OUTLIER_CSS }} aria-hidden="true">
            ◆
          </span>{' '}
          outlier{notes.outliers.length === 1 ? '' : 's'}: {ranksPhrase(compressRanks(notes.outliers))}
        </span>
      )}
    </p>
  );
}
