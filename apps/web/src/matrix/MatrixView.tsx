// The message matrix view: filters on the left, the canvas (MatrixCanvas.tsx) with its legend in
// the middle, the operations of the selected cell on the right. The aggregation runs in a worker
// (pyramid-client.ts); before the edge table is here, the overview's first level (made by the
// server with the same pyramid code) is drawn when no filter is set. This file wires the
// filters, the model's marks and the panels.
import { cycleMarks, notReadNote, QUEUE_KINDS, QUEUE_LABEL, rankMarks, ranksPhrase } from '@mqd/model';
import { useEffect, useMemo, useRef, useState } from 'react';
import { factsOf, type Viewed } from '../data.js';
import { markFirstFrame, markShown } from '../first-shown.js';
import { formatCount, plural, sizeUnitsLabel } from '../format.js';
import { useBusyWhile } from '../hooks.js';
import { beginBusy } from '../idle.js';
import { useDerived } from '../snapshot-context.js';
import { KindSwatch, Progress } from '../ui.js';
import type { ViewProps } from '../view-types.js';
import { CellOps } from './CellOps.js';
import { commMenuEntries } from './comm-menu.js';
import { compileFilter, isNoFilter, KIND_OF_INDEX, type MatrixFilter, matrixCommKey } from './edges.js';
import { LevelInfo, MatrixCanvas } from './MatrixCanvas.js';
import { MatrixLegend } from './MatrixLegend.js';
import { KIND_COLOR } from './palette.js';
import { type Pyramid, pyramidFrom, stripTotals } from './pyramid.js';
import { createPyramidClient, isAbort, type PyramidClient } from './pyramid-client.js';
import { rankNotes } from './rank-notes.js';
import type { MatrixRenderer } from './renderer.js';

export function MatrixView({ url, setUrl, data }: Omit<ViewProps, 'data'> & { readonly data: Viewed }) {
  // The whole snapshot, or the server's overview of it while the rest loads (the cell panel
  // waits for the whole one; everything else draws from either). Before the overview's edge
  // table is here, `edges` is null: `shape` has the matrix's size.
  const facts = factsOf(data);
  const full = 'snapshot' in data ? data : null;
  const snapshot = facts.snapshot;
  const edges = facts.edges;
  const shape = facts.matrix;
  const firstLevel = facts.firstLevel;
  // The deadlock cycles, outlined in red on their cells (the renderer belongs to MatrixCanvas,
  // whose effects run before these); the model says which cells and strip segments those are.
  const explanation = useDerived(facts.explanation);
  const ok = explanation && !('failed' in explanation) ? explanation : null;
  const cycles = useMemo(
    () => (ok?.deadlock ? cycleMarks(ok.deadlock.cycles, ok.deadlock.cycleTotal) : null),
    [ok],
  );
  const readStatus = facts.readStatus;
  const notes = useMemo(
    () => rankNotes(facts.notRead, shape.worldSize, ok ? rankMarks(ok) : null),
    [facts, shape.worldSize, ok],
  );
  const filter: MatrixFilter = useMemo(
    () => ({ comm: url.comm, tag: url.tag, kinds: url.kinds, ranks: url.ranks }),
    [url.comm, url.tag, url.kinds, url.ranks],
  );
  const compiled = useMemo(() => compileFilter(filter, shape.comms), [filter, shape]);
  // A link may name one rank's MPI_COMM_SELF: the menu shows the family it belongs to.
  const commValue = url.comm === null ? '' : matrixCommKey(url.comm);
  const { entries: commEntries, more: moreComms } = useMemo(
    () => commMenuEntries(shape.comms, commValue === '' ? null : commValue),
    [shape, commValue],
  );

  const dataKey = data.key;
  const [pyramid, setPyramid] = useState<Pyramid | null>(null);
  // `data-drawn` on the section: set in the same task as the frame that showed this snapshot's
  // data (for benchmarks and tests: a React state would commit it a frame later), cleared when
  // the snapshot changes.
  const mainRef = useRef<HTMLElement | null>(null);
  // biome-ignore lint/correctness/useExhaustiveDependencies: `dataKey` is the trigger (a new snapshot clears the mark).
  useEffect(() => {
    const el = mainRef.current;
    return () => el?.removeAttribute('data-drawn');
  }, [dataKey]);
  const [buildError, setBuildError] = useState<string | null>(null);
  const [building, setBuilding] = useState(false);
  const rendererRef = useRef<MatrixRenderer | null>(null);

  // One aggregation worker per edge table; each filter change is one message to it. Created
  // in an effect (not a memo) so that whoever creates it also disposes of it.
  const [client, setClient] = useState<PyramidClient | null>(null);
  useEffect(() => {
    if (edges === null) return;
    const c = createPyramidClient(edges);
    setClient(c);
    return () => {
      c.dispose();
      setClient(null);
    };
  }, [edges]);
  // Before the edge table: the overview's first level, when it is what this filter shows. A
  // frame from it that is exactly what the whole pyramid would draw marks the matrix drawn; the
  // whole snapshot still waits for the matrix drawn from the edge table (markShown below).
  useEffect(() => {
    if (edges !== null) return;
    const r = rendererRef.current;
    if (firstLevel === null || !isNoFilter(filter)) {
      // A filter the first level does not show (a link to a filtered matrix, or one set before
      // the edge table came): nothing is drawn until the table is here, which may come now.
      setPyramid(null);
      r?.setPyramid(null);
      markFirstFrame(dataKey);
      return;
    }
    const p = pyramidFrom(shape.worldSize, firstLevel);
    setPyramid(p);
    setBuildError(null);
    if (!r) {
      markFirstFrame(dataKey);
      return;
    }
    let live = true;
    r.setPyramid(p);
    r.afterNextSizedDraw(() => {
      if (live && r.drawsExactly()) mainRef.current?.setAttribute('data-drawn', 'true');
      markFirstFrame(dataKey);
    });
    return () => {
      live = false;
    };
  }, [edges, firstLevel, filter, shape.worldSize, dataKey]);
  useEffect(() => {
    if (!client) return;
    let live = true;
    const end = beginBusy();
    setBuilding(true);
    // A frame on screen from a pyramid: the first from data the whole pyramid would draw the
    // same way marks the matrix drawn (and lets the whole snapshot load: markShown).
    const onScreen = (r: MatrixRenderer) => {
      if (!live || !r.drawsExactly()) return;
      mainRef.current?.setAttribute('data-drawn', 'true');
      markShown(dataKey);
    };
    const show = (p: Pyramid, whole: boolean) => {
      setPyramid(p);
      setBuildError(null);
      const r = rendererRef.current;
      if (r) {
        r.setPyramid(p);
        r.afterNextSizedDraw(() => onScreen(r));
        // Still busy until the frame that shows the whole pyramid is on screen.
        r.afterNextDraw(() => {
          if (whole) {
            markShown(dataKey);
            end();
          }
        });
      } else if (whole) {
        markShown(dataKey);
        end();
      }
    };
    client
      .build(filter, ({ pyramid: p }) => {
        if (live) show(p, false);
      })
      .then(({ pyramid: p }) => {
        if (!live) return;
        show(p, true);
      })
      .catch((e: unknown) => {
        if (!isAbort(e) && live) setBuildError(e instanceof Error ? e.message : String(e));
        markShown(dataKey);
        end();
      })
      .finally(() => {
        if (live) setBuilding(false);
      });
    return () => {
      live = false;
      end();
    };
  }, [client, filter, dataKey]);

  useBusyWhile(pyramid === null && buildError === null);
  const strip = useMemo(() => (pyramid ? stripTotals(pyramid) : null), [pyramid]);
  const lengthUnit = facts.lengthUnit;
  const sizeLabel = sizeUnitsLabel(KIND_OF_INDEX, shape.kindUnit, lengthUnit);

  return (
    <div className="matrix-layout">
      <aside className="panel filters" aria-label="Matrix filters">
        <h3>Value</h3>
        <fieldset className="segmented" aria-label="Cell value">
          {(['count', 'bytes'] as const).map((v) => (
            <button
              key={v}
              type="button"
              aria-pressed={url.value === v}
              onClick={() => setUrl({ value: v }, 'replace')}
            >
              {v === 'count' ? 'Operations' : `Size (${sizeLabel})`}
            </button>
          ))}
        </fieldset>
        <h3>Queues</h3>
        {QUEUE_KINDS.map((k) => (
          <label key={k} className="check">
            <input
              type="checkbox"
              checked={url.kinds.includes(k)}
              onChange={(e) => {
                const next = e.target.checked ? [...url.kinds, k] : url.kinds.filter((x) => x !== k);
                const ordered = QUEUE_KINDS.filter((x) => next.includes(x));
                if (ordered.length > 0) setUrl({ kinds: ordered, cell: null }, 'replace');
              }}
            />
            <KindSwatch color={KIND_COLOR[k]} /> {QUEUE_LABEL[k]}
          </label>
        ))}
        <p className="hint">
          Colour is the queue with the most {url.value === 'count' ? 'operations' : `size (${sizeLabel})`} in
          a cell; darker = more.
        </p>
        <h3>Communicator</h3>
        <select
          value={commValue}
          onChange={(e) =>
            setUrl({ comm: e.target.value === '' ? null : e.target.value, cell: null }, 'replace')
          }
          aria-label="Communicator"
        >
          <option value="">All communicators</option>
          {commEntries.map((c) => (
            <option key={c.value} value={c.value}>
              {c.text}
            </option>
          ))}
          {url.comm !== null && !commEntries.some((c) => c.value === commValue) && (
            <option value={commValue}>{url.comm} (not in this snapshot)</option>
          )}
          {moreComms > 0 && (
            <option value="" disabled>
              {`…and ${plural(moreComms, 'communicator')} with fewer operations (open a cell to filter by one)`}
            </option>
          )}
        </select>
        <h3>Tag</h3>
        <TagInput tag={url.tag} onChange={(tag) => setUrl({ tag, cell: null }, 'replace')} />
        <p className="hint">ANY_TAG receives stay visible under a tag filter: they would take that tag.</p>
        {url.ranks !== null && (
          <>
            <h3>Ranks</h3>
            <p className="stats" data-testid="matrix-rank-filter">
              to or from {ranksPhrase(url.ranks)}{' '}
              <button type="button" onClick={() => setUrl({ ranks: null, cell: null }, 'replace')}>
                All ranks
              </button>
            </p>
          </>
        )}
        {(url.comm !== null ||
          url.tag !== null ||
          url.ranks !== null ||
          url.kinds.length !== QUEUE_KINDS.length) && (
          <button
            type="button"
            onClick={() =>
              setUrl({ comm: null, tag: null, ranks: null, kinds: QUEUE_KINDS, cell: null }, 'replace')
            }
          >
            Clear filters
          </button>
        )}
        <h3>Shown</h3>
        <p className="stats">
          {pyramid ? plural(pyramid.ops, 'operation') : '…'} of {formatCount(shape.length)}
          <br />
          {plural(pyramid?.worldSize ?? shape.worldSize, 'rank')} ×{' '}
          {plural(pyramid?.worldSize ?? shape.worldSize, 'rank')}
        </p>
        <LevelInfo rendererRef={rendererRef} pyramid={pyramid} />
      </aside>
      <section className="matrix-main" ref={mainRef}>
        <MatrixLegend cycles={cycles} notes={notes} strip={strip} />
        {readStatus.notRead > 0 && (
          <p className="not-read-note" role="note" data-testid="matrix-not-read">
            <span className="swatch hatch" aria-hidden="true" /> {notReadNote(readStatus)}: their rows and
            columns are hatched (unknown, not empty).
          </p>
        )}
        {buildError && (
          <div className="error" role="alert">
            MQD_E_INTERNAL: the matrix could not be aggregated ({buildError}): reload the page; report it if
            it repeats
          </div>
        )}
        <MatrixCanvas
          pyramid={pyramid}
          url={url}
          setUrl={setUrl}
          rendererRef={rendererRef}
          highlights={cycles?.cells ?? NO_CELLS}
          anyHighlights={cycles?.anySource ?? NO_RANKS}
          notes={notes}
          snapshot={snapshot}
          lengthUnit={lengthUnit}
          kindUnit={shape.kindUnit}
        />
        {!pyramid && (building || edges === null) && (
          <Progress
            what={
              edges === null
                ? `Loading ${formatCount(shape.length)} operations…`
                : `Aggregating ${formatCount(shape.length)} operations…`
            }
          />
        )}
      </section>
      <aside className="panel cell-panel" aria-label="Selected cell">
        {url.cell && (full === null || edges === null) ? (
          <Progress what="Loading the snapshot's operations…" />
        ) : url.cell && full !== null && edges !== null ? (
          <CellOps data={full} edges={edges} filter={compiled} cell={url.cell} setUrl={setUrl} />
        ) : (
          <div className="empty">
            <p>Click a cell to list its operations.</p>
            <p className="hint">
              Rows are senders, columns receivers (world ranks). The strip under the matrix holds receives
              from MPI_ANY_SOURCE and, with a dark base, operations whose sender is unknown; the strip on the
              right, sends whose destination the library cannot map to a world rank. Scroll to zoom, drag to
              pan; big jobs are drawn in blocks of ranks until you zoom in.
            </p>
          </div>
        )}
      </aside>
    </div>
  );
}

const NO_CELLS: readonly { row: number; col: number }[] = [];
const NO_RANKS: readonly number[] = [];

function TagInput({ tag, onChange }: { tag: number | null; onChange: (t: number | null) => void }) {
  const [text, setText] = useState(tag === null ? '' : String(tag));
  useEffect(() => setText(tag === null ? '' : String(tag)), [tag]);
  const valid = text.trim() === '' || /^-?\d{1,10}$/.test(text.trim());
  return (
    <form
      className="inline"
      onSubmit={(e) => {
        e.preventDefault();
        if (valid) onChange(text.trim() === '' ? null : Number(text.trim()));
      }}
    >
      <input
        value={text}
        onChange={(e) => setText(e.target.value)}
        onBlur={() => valid && onChange(text.trim() === '' ? null : Number(text.trim()))}
        placeholder="any tag"
        aria-label="Tag"
        aria-invalid={!valid}
        inputMode="numeric"
      />
    </form>
  );
}
