// The matrix canvas with its D3 axes, axis marks, tooltip and keyboard focus. Pan and zoom run
// outside React: d3-zoom drives the renderer and the axes directly; only the settled zoom goes to
// the URL. The keyboard moves a focused cell (cell-nav.ts), Enter selects it as a click does, and
// a status line announces it in the tooltip's words (cell-text.ts).
import type { JobSnapshot } from '@mqd/model';
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
  type KeyboardEvent,
  type MouseEvent,
  type PointerEvent,
  type RefObject,
  useEffect,
  useMemo,
  useRef,
  useState,
} from 'react';
import { useElementSize } from '../hooks.js';
import { beginBusy } from '../idle.js';
import { contextOf } from '../snapshot-context.js';
import type { ViewProps } from '../view-types.js';
import { moveCell } from './cell-nav.js';
import { type CellTextContext, cellLines } from './cell-text.js';
import { ANY_PEER, type CellRange, type KindUnit } from './edges.js';
import { ODD_CSS, OUTLIER_CSS } from './palette.js';
import type { Pyramid } from './pyramid.js';
import type { RankNotes } from './rank-notes.js';
import { geometryFor, type MatrixHit, MatrixRenderer, STRIP, STRIP_GAP, type ZoomState } from './renderer.js';

/** Room for the axes around the canvas, CSS px. */
const MARGIN_LEFT = 56;
const MARGIN_TOP = 40;
/** Most zoomed-in: this many CSS px per rank. */
const MAX_PX_PER_RANK = 48;
const URL_ZOOM_DELAY_MS = 400;

export function LevelInfo({
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

export function levelText(r: MatrixRenderer): string {
  // The block size only: the level itself is not made for this (a pyramid's coarser levels are
  // made when first drawn).
  const blockSize = r.currentBlockSize();
  if (blockSize === null) return '';
  return blockSize === 1
    ? 'One cell per rank pair'
    : `One cell = ${blockSize} × ${blockSize} ranks (zoom in for detail)`;
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
  /** Null while only the snapshot's overview is here. */
  readonly snapshot: JobSnapshot | null;
}

export function MatrixCanvas({
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
  const rankIndex = snapshot === null ? null : contextOf(snapshot).index;
  const zoomRef = useRef<ZoomBehavior<HTMLCanvasElement, unknown> | null>(null);
  const urlRef = useRef(url);
  urlRef.current = url;
  const setUrlRef = useRef(setUrl);
  setUrlRef.current = setUrl;
  const n = pyramid?.worldSize ?? 0;
  const textContext: CellTextContext = { n, kindUnit, lengthUnit, notes, rankIndex, snapshot };
  /** The keyboard's cell, kept across zooms in world ranks (drawn as the block holding it). */
  const focusRef = useRef<CellRange | null>(null);
  const [announced, setAnnounced] = useState('');
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
      const lines = cellLines(hit, textContext, 'click to list them');
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

  const hitAt = (e: PointerEvent | MouseEvent): MatrixHit | null => {
    const r = rendererRef.current;
    const canvas = canvasRef.current;
    if (!r || !canvas) return null;
    const box = canvas.getBoundingClientRect();
    return r.hitTest(e.clientX - box.left, e.clientY - box.top);
  };

  /** Focus a cell: outline it, bring it on screen, say what it holds. */
  const focusCell = (cell: CellRange) => {
    const r = rendererRef.current;
    const canvas = canvasRef.current;
    const hit = r?.cellAt(cell.row, cell.col);
    if (!r || !canvas || !hit) return;
    focusRef.current = cell;
    r.setFocus(cell);
    const g = r.geometry();
    const z = r.getZoom();
    const px = g.unit * z.k;
    const offX =
      hit.col !== ANY_PEER && (z.x + hit.col * px < 0 || z.x + (hit.col + hit.size) * px > g.areaWidth);
    const offY =
      hit.row !== ANY_PEER && (z.y + hit.row * px < 0 || z.y + (hit.row + hit.size) * px > g.areaHeight);
    const zb = zoomRef.current;
    if ((offX || offY) && zb) {
      // Centre the cell (in the zoom's untransformed coordinates); d3-zoom keeps it in extent.
      const cx = hit.col === ANY_PEER ? (g.areaWidth / 2 - z.x) / z.k : (hit.col + hit.size / 2) * g.unit;
      const cy = hit.row === ANY_PEER ? (g.areaHeight / 2 - z.y) / z.k : (hit.row + hit.size / 2) * g.unit;
      select(canvas).call(zb.translateTo, cx, cy);
    }
    setAnnounced(cellLines(hit, textContext, 'Enter lists them').join('; '));
  };

  const onKeyDown = (e: KeyboardEvent<HTMLCanvasElement>) => {
    const r = rendererRef.current;
    const level = r?.currentLevel();
    if (!r || !level || n === 0) return;
    const from = focusRef.current ?? { row: 0, col: 0, size: 1 };
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      const hit = r.cellAt(from.row, from.col);
      if (hit) setUrl({ cell: { row: hit.row, col: hit.col, size: hit.size } });
      return;
    }
    const g = r.geometry();
    const page = g.areaHeight / (g.unit * r.getZoom().k * level.blockSize);
    const next = moveCell(from, e.key, e.ctrlKey || e.metaKey, { n, blockSize: level.blockSize, page });
    if (!next) return;
    e.preventDefault();
    focusCell(next);
  };

  const g = n > 0 && width > 0 && height > 0 ? geometryFor(width, height, n) : null;
  return (
    <>
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
        {/* biome-ignore lint/a11y/noInteractiveElementToNoninteractiveRole: a canvas widget with its own arrow keys is an ARIA application; its cells are announced through the status line */}
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
            // The keyboard carries on from the clicked cell.
            if (cell) focusRef.current = cell;
            setUrl({ cell });
          }}
          tabIndex={0}
          role="application"
          aria-roledescription="message matrix"
          aria-label="Message matrix: rows are senders, columns receivers"
          aria-describedby="matrix-keys"
          onKeyDown={onKeyDown}
          onFocus={(e) => {
            // Only a keyboard focus draws the focus ring; a click shows its selection.
            if (!e.currentTarget.matches(':focus-visible')) return;
            const start = focusRef.current ?? urlRef.current.cell ?? { row: 0, col: 0 };
            focusCell({ row: start.row, col: start.col, size: 1 });
          }}
          onBlur={() => rendererRef.current?.setFocus(null)}
        />
        <div className="tooltip" ref={tooltipRef} hidden role="tooltip" data-testid="matrix-tooltip" />
      </div>
      <p className="matrix-focus">
        <span id="matrix-keys" className="muted">
          Keys: arrows move between cells, Page Up/Down by a screen, Home/End to the row's ends, Enter lists
          the cell's operations.
        </span>{' '}
        <span role="status" data-testid="matrix-focus">
          {announced}
        </span>
      </p>
    </>
  );
}
