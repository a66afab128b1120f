// The message matrix view: filters on the left, the canvas with D3 axes in the middle, the
// operations of the selected cell on the right. Pan and zoom run outside React: d3-zoom drives
// the renderer and the axes directly; only the settled zoom goes to the URL.
import {
  type CycleMarks,
  compressRanks,
  cycleMarks,
  type JobSnapshot,
  notReadNote,
  notReadReason,
  QUEUE_KINDS,
  type QueueKind,
  rankMarks,
  rankNotReadText,
  ranksPhrase,
  snapshotReadStatus,
} from '@mqd/model';
import {
  axisLeft,
  axisTop,
  format,
  type ScaleLinear,
  scaleLinear,
  select,
  type ZoomBehavior,
  zoom,
  zoomIdentity,
} from 'd3';
import {
  type MouseEvent,
  type PointerEvent,
  type RefObject,
  useEffect,
  useMemo,
  useRef,
  useState,
} from 'react';
import { edgesOf } from '../data.js';
import { useExplanation } from '../explanation.js';
import { formatCount, formatKindSize, plural, sizeUnitsLabel } from '../format.js';
import { useBusyWhile, useElementSize } from '../hooks.js';
import { beginBusy } from '../idle.js';
import { indexRanks, QUEUE_LABEL } from '../snapshot-index.js';
import { KindSwatch, Progress } from '../ui.js';
import type { ViewProps } from '../view-types.js';
import { CellOps } from './CellOps.js';
import {
  ANY_PEER,
  type CellRange,
  compileFilter,
  KIND_INDEX,
  KIND_OF_INDEX,
  type KindUnit,
  type MatrixFilter,
} from './edges.js';
import { KIND_COLOR } from './palette.js';
import { blockValues, type Pyramid } from './pyramid.js';
import { createPyramidClient, isAbort, type PyramidClient } from './pyramid-client.js';
import { type RankNotes, rankNotes } from './rank-notes.js';
import {
  CYCLE_CSS,
  geometryFor,
  type MatrixHit,
  MatrixRenderer,
  STRIP,
  STRIP_GAP,
  type ZoomState,
} from './renderer.js';

/** Room for the axes around the canvas, CSS px. */
const MARGIN_LEFT = 56;
const MARGIN_TOP = 40;
/** Most zoomed-in: this many CSS px per rank. */
const MAX_PX_PER_RANK = 48;
const URL_ZOOM_DELAY_MS = 400;
const ODD_CSS = '#111827';
const OUTLIER_CSS = '#0f766e';

export function MatrixView({ url, setUrl, data }: ViewProps) {
  const snapshot = data.snapshot;
  const edges = useMemo(() => edgesOf(snapshot), [snapshot]);
  // The deadlock cycles, outlined in red on their cells (the renderer belongs to MatrixCanvas,
  // whose effects run before these); the model says which cells and strip segments those are.
  const explanation = useExplanation(snapshot);
  const ok = explanation && !('failed' in explanation) ? explanation : null;
  const cycles = useMemo(
    () => (ok?.deadlock ? cycleMarks(ok.deadlock.cycles, ok.deadlock.cycleTotal) : null),
    [ok],
  );
  const readStatus = useMemo(() => snapshotReadStatus(snapshot), [snapshot]);
  const notes = useMemo(
    () => rankNotes(snapshot, edges.worldSize, ok ? rankMarks(ok) : null),
    [snapshot, edges.worldSize, ok],
  );
  const filter: MatrixFilter = useMemo(
    () => ({ comm: url.comm, tag: url.tag, kinds: url.kinds, ranks: url.ranks }),
    [url.comm, url.tag, url.kinds, url.ranks],
  );
  const compiled = useMemo(() => compileFilter(filter, edges.comms), [filter, edges]);

  const [pyramid, setPyramid] = useState<Pyramid | null>(null);
  const [buildError, setBuildError] = useState<string | null>(null);
  const [building, setBuilding] = useState(false);
  const rendererRef = useRef<MatrixRenderer | null>(null);

  // One aggregation worker per edge table; each filter change is one message to it. Created
  // in an effect (not a memo) so that whoever creates it also disposes of it.
  const [client, setClient] = useState<PyramidClient | null>(null);
  useEffect(() => {
    const c = createPyramidClient(edges);
    setClient(c);
    return () => c.dispose();
  }, [edges]);
  useEffect(() => {
    if (!client) return;
    let live = true;
    const end = beginBusy();
    setBuilding(true);
    client
      .build(filter)
      .then(({ pyramid: p }) => {
        if (!live) return;
        setPyramid(p);
        setBuildError(null);
        const r = rendererRef.current;
        if (r) {
          r.setPyramid(p);
          // Still busy until the frame that shows the new data is on screen.
          r.afterNextDraw(end);
        } else end();
      })
      .catch((e: unknown) => {
        if (!isAbort(e) && live) setBuildError(e instanceof Error ? e.message : String(e));
        end();
      })
      .finally(() => {
        if (live) setBuilding(false);
      });
    return () => {
      live = false;
      end();
    };
  }, [client, filter]);

  useBusyWhile(pyramid === null && buildError === null);
  const lengthUnit = snapshot.mpi.lengthUnit;
  const sizeLabel = sizeUnitsLabel(KIND_OF_INDEX, edges.kindUnit, lengthUnit);

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
          value={url.comm ?? ''}
          onChange={(e) =>
            setUrl({ comm: e.target.value === '' ? null : e.target.value, cell: null }, 'replace')
          }
          aria-label="Communicator"
        >
          <option value="">All communicators</option>
          {edges.comms.map((c) => (
            <option key={c.key} value={c.key}>
              {c.label} ({formatCount(c.ops)})
            </option>
          ))}
          {url.comm !== null && !edges.comms.some((c) => c.key === url.comm) && (
            <option value={url.comm}>{url.comm} (not in this snapshot)</option>
          )}
        </select>
        <h3>Tag</h3>
        <TagInput tag={url.tag} onChange={(tag) => setUrl({ tag, cell: null }, 'replace')} />
        <p className="hint">ANY_TAG receives stay visible under a tag filter: they would take that tag.</p>
        {url.ranks !== null && (
          <>
            <h3>Ranks</h3>
            <p className="stats" data-testid="matrix-rank-filter">
              to or from <code>{url.ranks.length > 60 ? `${url.ranks.slice(0, 59)}…` : url.ranks}</code>{' '}
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
          {pyramid ? plural(pyramid.ops, 'operation') : '…'} of {formatCount(edges.length)}
          <br />
          {plural(pyramid?.worldSize ?? edges.worldSize, 'rank')} ×{' '}
          {plural(pyramid?.worldSize ?? edges.worldSize, 'rank')}
        </p>
        <LevelInfo rendererRef={rendererRef} pyramid={pyramid} />
      </aside>
      <section className="matrix-main">
        <MatrixLegend cycles={cycles} notes={notes} />
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
          kindUnit={edges.kindUnit}
        />
        {building && !pyramid && <Progress what={`Aggregating ${formatCount(edges.length)} operations…`} />}
      </section>
      <aside className="panel cell-panel" aria-label="Selected cell">
        {url.cell ? (
          <CellOps data={data} edges={edges} filter={compiled} cell={url.cell} setUrl={setUrl} />
        ) : (
          <div className="empty">
            <p>Click a cell to list its operations.</p>
            <p className="hint">
              Rows are senders, columns receivers (world ranks). The strip under the matrix holds receives
              from MPI_ANY_SOURCE (or an unknown sender); the strip on the right, sends whose destination the
              library cannot map to a world rank. Scroll to zoom, drag to pan; big jobs are drawn in blocks of
              ranks until you zoom in.
            </p>
          </div>
        )}
      </aside>
    </div>
  );
}

const NO_CELLS: readonly { row: number; col: number }[] = [];
const NO_RANKS: readonly number[] = [];

/** One entry per mark the matrix draws, with the counts that say what is and is not drawn. */
function MatrixLegend({ cycles, notes }: { cycles: CycleMarks | null; notes: RankNotes }) {
  return (
    <p className="legend matrix-legend" data-testid="matrix-legend">
      {QUEUE_KINDS.map((k) => (
        <span key={k}>
          <KindSwatch color={KIND_COLOR[k]} /> {QUEUE_LABEL[k]}
        </span>
      ))}
      <span className="muted">(darker = more; colour = the kind with most)</span>
      <span>
        <strong className="strip-key">ANY</strong> row: receives from MPI_ANY_SOURCE or an unknown sender
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

function LevelInfo({
  rendererRef,
  pyramid,
}: {
  rendererRef: RefObject<MatrixRenderer | null>;
  pyramid: Pyramid | null;
}) {
  // Refreshed on zoom by MatrixCanvas through a DOM id, not React state (pan/zoom stay out of React).
  return (
    <p className="stats" id="matrix-level-info">
      {pyramid && rendererRef.current ? levelText(rendererRef.current) : ''}
    </p>
  );
}

function levelText(r: MatrixRenderer): string {
  const l = r.currentLevel();
  if (!l) return '';
  return l.blockSize === 1
    ? 'One cell per rank pair'
    : `One cell = ${l.blockSize} × ${l.blockSize} ranks (zoom in for detail)`;
}

interface CanvasProps {
  readonly pyramid: Pyramid | null;
  readonly url: ViewProps['url'];
  readonly setUrl: ViewProps['setUrl'];
  readonly rendererRef: RefObject<MatrixRenderer | null>;
  readonly lengthUnit: 'bytes' | 'elements';
  /** Per queue kind, the unit its sizes are in (EdgeTable.kindUnit). */
  readonly kindUnit: readonly KindUnit[];
  /** Rank-level cells outlined in red: the deadlock cycles' edges. */
  readonly highlights: readonly { row: number; col: number }[];
  /** Receivers whose cycle wait is a receive from MPI_ANY_SOURCE (dashed on the ANY row). */
  readonly anyHighlights: readonly number[];
  readonly notes: RankNotes;
  readonly snapshot: JobSnapshot;
}

function rangeText(start: number, size: number, n: number, anyText: string): string {
  if (start === ANY_PEER) return anyText;
  const end = Math.min(n, start + size) - 1;
  return end <= start ? String(start) : `${start}–${end}`;
}

function MatrixCanvas({
  pyramid,
  url,
  setUrl,
  rendererRef,
  lengthUnit,
  kindUnit,
  highlights,
  anyHighlights,
  notes,
  snapshot,
}: CanvasProps) {
  const [stageRef, size] = useElementSize<HTMLDivElement>();
  const canvasRef = useRef<HTMLCanvasElement | null>(null);
  const xAxisRef = useRef<SVGGElement | null>(null);
  const yAxisRef = useRef<SVGGElement | null>(null);
  const tooltipRef = useRef<HTMLDivElement | null>(null);
  const anyLabelRef = useRef<SVGTextElement | null>(null);
  const unknownLabelRef = useRef<SVGTextElement | null>(null);
  const oddMarksRef = useRef<SVGPathElement | null>(null);
  const outlierMarksRef = useRef<SVGPathElement | null>(null);
  const rankIndex = useMemo(() => indexRanks(snapshot), [snapshot]);
  const zoomRef = useRef<ZoomBehavior<HTMLCanvasElement, unknown> | null>(null);
  const urlRef = useRef(url);
  urlRef.current = url;
  const setUrlRef = useRef(setUrl);
  setUrlRef.current = setUrl;
  const n = pyramid?.worldSize ?? 0;
  const width = Math.max(0, Math.floor(size.width - MARGIN_LEFT));
  const height = Math.max(0, Math.floor(size.height - MARGIN_TOP));

  // The renderer lives as long as the canvas.
  useEffect(() => {
    const canvas = canvasRef.current;
    if (!canvas) return;
    const r = new MatrixRenderer(canvas);
    rendererRef.current = r;
    return () => {
      r.dispose();
      rendererRef.current = null;
    };
  }, [rendererRef]);

  useEffect(() => {
    const r = rendererRef.current;
    if (r && pyramid) r.setPyramid(pyramid);
  }, [pyramid, rendererRef]);

  useEffect(() => {
    rendererRef.current?.setMode(url.value);
  }, [url.value, rendererRef]);

  useEffect(() => {
    rendererRef.current?.setSelection(url.cell);
  }, [url.cell, rendererRef]);

  useEffect(() => {
    rendererRef.current?.setHighlights(highlights);
  }, [highlights, rendererRef]);

  useEffect(() => {
    rendererRef.current?.setAnyHighlights(anyHighlights);
  }, [anyHighlights, rendererRef]);

  useEffect(() => {
    rendererRef.current?.setNotRead(notes.notRead);
  }, [notes, rendererRef]);

  const drawAxes = useMemo(
    () => (z: ZoomState) => {
      const r = rendererRef.current;
      if (!r || n === 0) return;
      const g = r.geometry();
      // Base scales cover the whole viewport (wider than the matrix when the stage is not square).
      const baseX = scaleLinear()
        .domain([0, (n * g.areaWidth) / g.side])
        .range([0, g.areaWidth]);
      const baseY = scaleLinear()
        .domain([0, (n * g.areaHeight) / g.side])
        .range([0, g.areaHeight]);
      const t = zoomIdentity.translate(z.x, z.y).scale(z.k);
      const pxPerRank = g.unit * z.k;
      const draw = (el: SVGGElement | null, s: ScaleLinear<number, number>, horizontal: boolean) => {
        if (!el) return;
        // Label the middle of a rank's cell once cells are wide enough to hold a label.
        const centred = pxPerRank >= 14;
        const shown = centred ? s.copy().domain(s.domain().map((d) => d - 0.5)) : s;
        const count = Math.max(
          2,
          Math.floor((horizontal ? g.areaWidth : g.areaHeight) / (horizontal ? 70 : 40)),
        );
        const values = s.ticks(count).filter((v) => Number.isInteger(v) && v >= 0 && v < n);
        const axis = (horizontal ? axisTop(shown) : axisLeft(shown))
          .tickValues(values)
          .tickFormat(format('d'))
          .tickSizeOuter(0);
        select(el).call(axis);
      };
      const sx = t.rescaleX(baseX);
      const sy = t.rescaleY(baseY);
      draw(xAxisRef.current, sx, true);
      draw(yAxisRef.current, sy, false);
      // Marked ranks: one path per kind of mark (never one element per rank), a triangle on
      // each axis at the rank's centre, one per pixel at most.
      const marks = (ranks: readonly number[], shape: 'tri' | 'diamond') => {
        let d = '';
        const seen = new Set<number>();
        for (const r of ranks) {
          const x = Math.round(sx(r + 0.5));
          if (x >= 0 && x <= g.areaWidth && !seen.has(x)) {
            seen.add(x);
            const yy = MARGIN_TOP - 2;
            d +=
              shape === 'tri'
                ? `M${MARGIN_LEFT + x - 4},${yy - 7}h8l-4,7z`
                : `M${MARGIN_LEFT + x},${yy - 8}l4,4l-4,4l-4,-4z`;
          }
        }
        seen.clear();
        for (const r of ranks) {
          const y = Math.round(sy(r + 0.5));
          if (y >= 0 && y <= g.areaHeight && !seen.has(-1 - y)) {
            seen.add(-1 - y);
            const xx = MARGIN_LEFT - 2;
            d +=
              shape === 'tri'
                ? `M${xx - 7},${MARGIN_TOP + y - 4}v8l7,-4z`
                : `M${xx - 8},${MARGIN_TOP + y}l4,-4l4,4l-4,4z`;
          }
        }
        return d;
      };
      oddMarksRef.current?.setAttribute('d', marks(notes.oddOut, 'tri'));
      outlierMarksRef.current?.setAttribute('d', marks(notes.outliers, 'diamond'));
      // The strips follow the matrix edge (see MatrixRenderer.stripOrigin), and so do their labels.
      const strip = r.stripOrigin();
      anyLabelRef.current?.setAttribute('y', String(MARGIN_TOP + strip.y + STRIP - 3));
      unknownLabelRef.current?.setAttribute('x', String(MARGIN_LEFT + strip.x + STRIP / 2));
      const info = document.getElementById('matrix-level-info');
      if (info) info.textContent = levelText(r);
    },
    [n, rendererRef, notes],
  );

  // Size, zoom behaviour and the zoom from the URL.
  useEffect(() => {
    const canvas = canvasRef.current;
    const r = rendererRef.current;
    if (!canvas || !r || width === 0 || height === 0) return;
    r.resize(width, height, window.devicePixelRatio || 1);
    const g = r.geometry();
    const maxK = Math.max(1, MAX_PX_PER_RANK / Math.max(g.unit, 1e-9));
    let urlTimer = 0;
    let endUrlBusy: (() => void) | null = null;
    const z = zoom<HTMLCanvasElement, unknown>()
      .scaleExtent([1, maxK])
      .extent([
        [0, 0],
        [g.areaWidth, g.areaHeight],
      ])
      .translateExtent([
        [0, 0],
        [Math.max(g.side, g.areaWidth), Math.max(g.side, g.areaHeight)],
      ])
      .on('zoom', (e: { transform: { k: number; x: number; y: number } }) => {
        const zs = { k: e.transform.k, x: e.transform.x, y: e.transform.y };
        r.setZoom(zs);
        drawAxes(zs);
        window.clearTimeout(urlTimer);
        // Until the settled zoom is in the URL the app is not idle: a test that zooms and then
        // copies the link must get the zoomed one.
        if (!endUrlBusy) endUrlBusy = beginBusy();
        urlTimer = window.setTimeout(() => {
          const zoomState =
            zs.k === 1 && zs.x === 0 && zs.y === 0 ? null : { k: zs.k, x: zs.x / g.side, y: zs.y / g.side };
          setUrlRef.current({ zoom: zoomState }, 'replace');
          endUrlBusy?.();
          endUrlBusy = null;
        }, URL_ZOOM_DELAY_MS);
      });
    zoomRef.current = z;
    const sel = select(canvas);
    sel.call(z);
    const fromUrl = urlRef.current.zoom;
    const initial = fromUrl
      ? zoomIdentity.translate(fromUrl.x * g.side, fromUrl.y * g.side).scale(fromUrl.k)
      : zoomIdentity;
    sel.call(z.transform, initial);
    drawAxes({ k: initial.k, x: initial.x, y: initial.y });
    return () => {
      window.clearTimeout(urlTimer);
      endUrlBusy?.();
      sel.on('.zoom', null);
    };
  }, [width, height, drawAxes, rendererRef]);

  // Back/forward to a URL with another zoom: follow it.
  useEffect(() => {
    const canvas = canvasRef.current;
    const r = rendererRef.current;
    const z = zoomRef.current;
    if (!canvas || !r || !z) return;
    const g = r.geometry();
    const cur = r.getZoom();
    const want = url.zoom ?? { k: 1, x: 0, y: 0 };
    const wx = url.zoom ? want.x * g.side : 0;
    const wy = url.zoom ? want.y * g.side : 0;
    if (Math.abs(cur.k - want.k) > 1e-3 * want.k || Math.abs(cur.x - wx) > 1 || Math.abs(cur.y - wy) > 1) {
      select(canvas).call(z.transform, zoomIdentity.translate(wx, wy).scale(want.k));
    }
  }, [url.zoom, rendererRef]);

  // Tooltip: plain DOM writes, no React render per pointer move.
  const lastHit = useRef<string>('');
  const showTooltip = (hit: MatrixHit | null, clientX: number, clientY: number) => {
    const tip = tooltipRef.current;
    const stage = stageRef.current;
    if (!tip || !stage) return;
    if (!hit) {
      tip.hidden = true;
      lastHit.current = '';
      return;
    }
    const key = `${hit.row},${hit.col},${hit.size}`;
    if (key !== lastHit.current) {
      lastHit.current = key;
      const v = blockValues(hit.level, hit.blockRow, hit.blockCol);
      const senders = rangeText(hit.row, hit.size, n, 'MPI_ANY_SOURCE or unknown sender');
      const receivers = rangeText(hit.col, hit.size, n, 'unknown destination');
      const lines: string[] = [`sender ${senders} → receiver ${receivers}`];
      let total = 0;
      for (const k of QUEUE_KINDS as readonly QueueKind[]) {
        const i = KIND_INDEX[k];
        const c = v.count[i] ?? 0;
        total += c;
        if (c > 0)
          lines.push(
            `${QUEUE_LABEL[k]}: ${formatCount(c)} (${formatKindSize(v.bytes[i] ?? 0, kindUnit[i] ?? null, lengthUnit)})`,
          );
      }
      const about = [
        ...rankLines(hit.row, hit.size, 'sender', 'its sends are unknown'),
        ...(hit.col !== hit.row || hit.size > 1
          ? rankLines(hit.col, hit.size, 'receiver', 'its receives are unknown')
          : []),
      ];
      // Zero operations among ranks not read is what was seen, not what is there.
      if (total === 0)
        lines.push(about.some((l) => l.includes('not read')) ? 'no operations known' : 'no operations');
      lines.push(...about);
      if (total > 0) lines.push('click to list them');
      tip.textContent = lines.join('\n');
      tip.hidden = false;
    }
    const box = stage.getBoundingClientRect();
    const x = clientX - box.left + 14;
    const y = clientY - box.top + 14;
    // Keep it inside the stage.
    const w = tip.offsetWidth;
    const h = tip.offsetHeight;
    tip.style.transform = `translate(${Math.min(x, box.width - w - 4)}px, ${Math.min(y, box.height - h - 4)}px)`;
  };

  /** Not read / odd out / outlier lines for the ranks of a row or column range. */
  const rankLines = (start: number, size: number, role: string, unknown: string): string[] => {
    if (start < 0) return [];
    const end = Math.min(n, start + size);
    const out: string[] = [];
    const unread: string[] = [];
    for (let r = start; r < end; r++) {
      if (notes.notRead?.[r] === 1) {
        const pos = rankIndex.positionOf(r);
        const entry = pos === undefined ? undefined : snapshot.ranks[pos];
        if (entry && entry.state.kind !== 'ok')
          unread.push(size === 1 ? (rankNotReadText(entry) ?? '') : notReadReason(entry.state));
      }
      if (size === 1) for (const w of notes.why.get(r) ?? []) out.push(`${role} rank ${r}: ${w}`);
    }
    if (unread.length > 0) {
      out.unshift(
        size === 1
          ? `${unread[0]} (${unknown})`
          : `${formatCount(unread.length)} ${role} ranks not read: ${[...new Set(unread)].join('; ')}`,
      );
    }
    return out;
  };

  const hitAt = (e: PointerEvent | MouseEvent): MatrixHit | null => {
    const r = rendererRef.current;
    const canvas = canvasRef.current;
    if (!r || !canvas) return null;
    const box = canvas.getBoundingClientRect();
    return r.hitTest(e.clientX - box.left, e.clientY - box.top);
  };

  const g = n > 0 && width > 0 && height > 0 ? geometryFor(width, height, n) : null;
  return (
    <div className="matrix-stage" ref={stageRef}>
      <svg className="axes" width={size.width} height={size.height} aria-hidden="true">
        <g ref={xAxisRef} transform={`translate(${MARGIN_LEFT},${MARGIN_TOP - 2})`} />
        <g ref={yAxisRef} transform={`translate(${MARGIN_LEFT - 2},${MARGIN_TOP})`} />
        <text className="axis-title" x={2} y={12}>
          rows: sender → columns: receiver (world ranks)
        </text>
        {g && (
          <>
            <text
              ref={anyLabelRef}
              className="strip-label"
              x={MARGIN_LEFT - 6}
              y={MARGIN_TOP + g.areaHeight + STRIP_GAP + STRIP - 3}
              textAnchor="end"
            >
              ANY
            </text>
            <text
              ref={unknownLabelRef}
              className="strip-label"
              x={MARGIN_LEFT + g.areaWidth + STRIP_GAP + STRIP / 2}
              y={MARGIN_TOP - 6}
              textAnchor="middle"
            >
              ?
            </text>
          </>
        )}
        <path ref={oddMarksRef} fill={ODD_CSS} data-testid="matrix-odd-marks" />
        <path ref={outlierMarksRef} fill={OUTLIER_CSS} data-testid="matrix-outlier-marks" />
      </svg>
      <canvas
        ref={canvasRef}
        className="matrix-canvas"
        data-testid="matrix-canvas"
        style={{ left: MARGIN_LEFT, top: MARGIN_TOP }}
        onPointerMove={(e) => {
          const hit = hitAt(e);
          rendererRef.current?.setHover(hit);
          showTooltip(hit, e.clientX, e.clientY);
        }}
        onPointerLeave={() => {
          rendererRef.current?.setHover(null);
          showTooltip(null, 0, 0);
        }}
        onClick={(e) => {
          const hit = hitAt(e);
          const cell: CellRange | null = hit ? { row: hit.row, col: hit.col, size: hit.size } : null;
          setUrl({ cell });
        }}
      />
      <div className="tooltip" ref={tooltipRef} hidden role="tooltip" data-testid="matrix-tooltip" />
    </div>
  );
}
