// Draws the message matrix on one <canvas>: never one DOM element per cell. The zoom
// transform comes from d3-zoom (or the benchmark); each frame picks the pyramid level whose
// blocks are about one device pixel, culls to the visible block range, and either blits a
// cached one-pixel-per-block bitmap (coarse levels) or fills the visible stored blocks batched
// by colour (fine levels). Frames are coalesced: one requestAnimationFrame at most.
import { beginBusy } from '../idle.js';
import { ANY_PEER, type CellRange, KIND_COUNT } from './edges.js';
import {
  FOCUS_CSS,
  hatchPattern,
  PALETTE_CSS,
  PALETTE_RGBA,
  paletteIndex,
  STEPS,
  type ValueMode,
} from './palette.js';
import { type Level, levelForDensity, levelIndexForDensity, lowerBound, type Pyramid } from './pyramid.js';

/** The mark under an any-sender strip segment that holds operations whose sender is unknown. */
export const UNKNOWN_SENDER_CSS = '#111827';
/** CSS px height of that mark. */
const UNKNOWN_BASE = 4;

/** CSS px height of the "sender ANY" strip and width of the "receiver unknown" strip. */
export const STRIP = 14;
export const STRIP_GAP = 6;
/** Levels at most this many blocks wide are drawn from a cached bitmap. */
const BITMAP_MAX_DIM = 2048;

export type { ZoomState } from '../matrix-types.js';

import type { ZoomState } from '../matrix-types.js';

/** Outline of a deadlock cycle's cells. */
export const CYCLE_CSS = '#dc2626';

export const IDENTITY: ZoomState = { k: 1, x: 0, y: 0 };

export interface MatrixGeometry {
  /** Size of the zoomable matrix viewport, CSS px. */
  readonly areaWidth: number;
  readonly areaHeight: number;
  /** Side of the whole matrix at zoom 1, CSS px. */
  readonly side: number;
  /** CSS px per rank at zoom 1. */
  readonly unit: number;
}

/** A hit: the block under the pointer at the level drawn, with its rank range. */
export interface MatrixHit extends CellRange {
  readonly level: Level;
  /** Block coordinates in that level (ANY_PEER for a strip). */
  readonly blockRow: number;
  readonly blockCol: number;
}

type Surface = HTMLCanvasElement | OffscreenCanvas;

/** Layout of the matrix in a canvas of this CSS size, for a matrix of n ranks. */
export function geometryFor(cssWidth: number, cssHeight: number, n: number): MatrixGeometry {
  const areaWidth = Math.max(1, cssWidth - STRIP - STRIP_GAP);
  const areaHeight = Math.max(1, cssHeight - STRIP - STRIP_GAP);
  const side = Math.min(areaWidth, areaHeight);
  return { areaWidth, areaHeight, side, unit: side / Math.max(1, n) };
}

export class MatrixRenderer {
  private readonly ctx: CanvasRenderingContext2D;
  private pyramid: Pyramid | null = null;
  private mode: ValueMode = 'count';
  private zoom: ZoomState = IDENTITY;
  private cssWidth = 0;
  private cssHeight = 0;
  private dpr = 1;
  private selection: CellRange | null = null;
  private hover: CellRange | null = null;
  /** The keyboard-focused cell (any block size: drawn as the block holding it at this zoom). */
  private focus: CellRange | null = null;
  private highlights: readonly { row: number; col: number }[] = [];
  /** Receivers whose cycle edge is a receive from MPI_ANY_SOURCE: their any-sender strip segment. */
  private anyHighlights: readonly number[] = [];
  /** 1 for each world rank whose queues were not read; null when every rank was. */
  private notRead: Uint8Array | null = null;
  /** Per block size: 1 for each block holding a rank not read. */
  private readonly notReadBlocks = new Map<number, Uint8Array>();
  private hatch: CanvasPattern | null | undefined;
  private frame = 0;
  private readonly bitmaps = new Map<string, Surface>();
  private readonly afterDraw: (() => void)[] = [];
  /** Callbacks for the next frame drawn on a canvas the layout has given a size (afterNextSizedDraw). */
  private readonly afterSizedDraw: (() => void)[] = [];
  private endBusy: (() => void) | null = null;
  private readonly buckets: number[][] = Array.from({ length: KIND_COUNT * STEPS }, () => []);
  /** Called after each drawn frame with its draw time in ms. */
  onDrawn: ((millis: number) => void) | null = null;

  constructor(private readonly canvas: HTMLCanvasElement) {
    const ctx = canvas.getContext('2d', { alpha: false });
    if (!ctx) throw new Error('MQD: this browser has no 2D canvas context');
    this.ctx = ctx;
  }

  setPyramid(p: Pyramid | null): void {
    if (p === this.pyramid) return;
    this.pyramid = p;
    this.bitmaps.clear();
    this.requestDraw();
  }

  setMode(mode: ValueMode): void {
    if (mode === this.mode) return;
    this.mode = mode;
    this.requestDraw();
  }

  setSelection(sel: CellRange | null): void {
    this.selection = sel;
    this.requestDraw();
  }

  /** Rank-level cells outlined on top (the deadlock cycles' edges). */
  setHighlights(cells: readonly { row: number; col: number }[]): void {
    this.highlights = cells;
    this.requestDraw();
  }

  /** Strip segments outlined on top: the cycles' receives from MPI_ANY_SOURCE, by receiver. */
  setAnyHighlights(receivers: readonly number[]): void {
    this.anyHighlights = receivers;
    this.requestDraw();
  }

  /** Ranks whose queues were not read: their row and column are hatched under the data. */
  setNotRead(mask: Uint8Array | null): void {
    this.notRead = mask;
    this.notReadBlocks.clear();
    this.requestDraw();
  }

  private notReadOf(bs: number): Uint8Array | null {
    const mask = this.notRead;
    if (!mask) return null;
    let blocks = this.notReadBlocks.get(bs);
    if (!blocks) {
      blocks = new Uint8Array(Math.ceil(mask.length / bs));
      for (let r = 0; r < mask.length; r++) if (mask[r] === 1) blocks[Math.floor(r / bs)] = 1;
      this.notReadBlocks.set(bs, blocks);
    }
    return blocks;
  }

  setHover(h: CellRange | null): void {
    if (sameRange(h, this.hover)) return;
    this.hover = h;
    this.requestDraw();
  }

  setFocus(f: CellRange | null): void {
    if (sameRange(f, this.focus)) return;
    this.focus = f;
    this.requestDraw();
  }

  /** The cell of the current level holding (row, col), in world ranks or ANY_PEER; the hit a pointer there gives. */
  cellAt(row: number, col: number): MatrixHit | null {
    const level = this.currentLevel();
    const n = this.pyramid?.worldSize ?? 0;
    if (!level || n === 0 || (row === ANY_PEER && col === ANY_PEER)) return null;
    const bs = level.blockSize;
    const block = (r: number) =>
      r === ANY_PEER ? ANY_PEER : Math.floor(Math.min(Math.max(r, 0), n - 1) / bs);
    const br = block(row);
    const bc = block(col);
    return {
      level,
      blockRow: br,
      blockCol: bc,
      row: br === ANY_PEER ? ANY_PEER : br * bs,
      col: bc === ANY_PEER ? ANY_PEER : bc * bs,
      size: bs,
    };
  }

  resize(cssWidth: number, cssHeight: number, dpr: number): void {
    this.cssWidth = Math.max(1, Math.floor(cssWidth));
    this.cssHeight = Math.max(1, Math.floor(cssHeight));
    this.dpr = dpr;
    this.canvas.width = Math.round(this.cssWidth * dpr);
    this.canvas.height = Math.round(this.cssHeight * dpr);
    this.canvas.style.width = `${this.cssWidth}px`;
    this.canvas.style.height = `${this.cssHeight}px`;
    this.requestDraw();
  }

  /** `draw: false` lets a caller that draws synchronously (the benchmark) skip the frame request. */
  setZoom(z: ZoomState, draw = true): void {
    this.zoom = z;
    if (draw) this.requestDraw();
  }

  getZoom(): ZoomState {
    return this.zoom;
  }

  geometry(): MatrixGeometry {
    return geometryFor(this.cssWidth, this.cssHeight, this.pyramid?.worldSize ?? 1);
  }

  /**
   * Where the strips start, CSS px: right under / right of the matrix while its edge is on
   * screen, else at the viewport's edge (they always stay visible).
   */
  stripOrigin(): { x: number; y: number } {
    const g = this.geometry();
    const span = (this.pyramid?.worldSize ?? 0) * g.unit * this.zoom.k;
    return {
      x: Math.min(g.areaWidth, this.zoom.x + span) + STRIP_GAP,
      y: Math.min(g.areaHeight, this.zoom.y + span) + STRIP_GAP,
    };
  }

  /**
   * Whether the layout has given the canvas room for the matrix. Before that no level is drawn:
   * a zero-sized canvas would ask for the coarsest level (one block), which is nothing on screen
   * and, on a pyramid whose levels are made when first read, makes every level at once.
   */
  private get sized(): boolean {
    return this.cssWidth > STRIP + STRIP_GAP && this.cssHeight > STRIP + STRIP_GAP;
  }

  /** The pyramid and the ranks per device pixel at this zoom; null with no pyramid or no size. */
  private density(): { p: Pyramid; ranksPerPixel: number } | null {
    const p = this.pyramid;
    if (!p || !this.sized) return null;
    const g = this.geometry();
    return { p, ranksPerPixel: 1 / (g.unit * this.zoom.k * this.dpr) };
  }

  /** The ranks per block side of the level drawn at this zoom, without making that level. */
  currentBlockSize(): number | null {
    const d = this.density();
    // levels[i] is level i from the finest built up, and the finest below it.
    return d && 2 ** Math.max(d.p.finest, levelIndexForDensity(d.p, d.ranksPerPixel));
  }

  /** The level drawn at the current zoom. */
  currentLevel(): Level | null {
    const d = this.density();
    return d && levelForDensity(d.p, d.ranksPerPixel);
  }

  /**
   * Whether the level drawn at the current zoom is the one the whole pyramid would draw (a
   * coarse pyramid holds only its coarse levels: finer zooms are drawn coarser until it is whole).
   */
  drawsExactly(): boolean {
    const d = this.density();
    return d !== null && levelIndexForDensity(d.p, d.ranksPerPixel) >= d.p.finest;
  }

  hitTest(cssX: number, cssY: number): MatrixHit | null {
    const p = this.pyramid;
    const level = this.currentLevel();
    if (!p || !level) return null;
    const g = this.geometry();
    const px = g.unit * this.zoom.k;
    const n = p.worldSize;
    const bs = level.blockSize;
    const rankAtX = Math.floor((cssX - this.zoom.x) / px);
    const rankAtY = Math.floor((cssY - this.zoom.y) / px);
    const inX = cssX >= 0 && cssX < g.areaWidth && rankAtX >= 0 && rankAtX < n;
    const inY = cssY >= 0 && cssY < g.areaHeight && rankAtY >= 0 && rankAtY < n;
    const strip = this.stripOrigin();
    const inAnyRow = cssY >= strip.y && cssY < strip.y + STRIP;
    const inUnknownCol = cssX >= strip.x && cssX < strip.x + STRIP;
    const block = (r: number) => Math.floor(r / bs);
    if (inX && inY) {
      const br = block(rankAtY);
      const bc = block(rankAtX);
      return { level, blockRow: br, blockCol: bc, row: br * bs, col: bc * bs, size: bs };
    }
    if (inX && inAnyRow) {
      const bc = block(rankAtX);
      return { level, blockRow: ANY_PEER, blockCol: bc, row: ANY_PEER, col: bc * bs, size: bs };
    }
    if (inY && inUnknownCol) {
      const br = block(rankAtY);
      return { level, blockRow: br, blockCol: ANY_PEER, row: br * bs, col: ANY_PEER, size: bs };
    }
    return null;
  }

  requestDraw(): void {
    if (this.frame !== 0) return;
    // A pending frame counts as "rendering" for the app-idle signal.
    this.endBusy = beginBusy();
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.drawNow();
    });
  }

  /** Calls `fn` once the next frame has been drawn (or at once if nothing is pending). */
  afterNextDraw(fn: () => void): void {
    if (this.frame === 0) this.requestDraw();
    this.afterDraw.push(fn);
  }

  /**
   * Calls `fn` once a frame has been drawn on a canvas with a size: the next frame, or the one
   * the layout's resize brings when the canvas has none yet (dropped if the renderer goes first).
   */
  afterNextSizedDraw(fn: () => void): void {
    if (this.frame === 0) this.requestDraw();
    this.afterSizedDraw.push(fn);
  }

  dispose(): void {
    if (this.frame !== 0) cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.endBusy?.();
    this.endBusy = null;
    for (const fn of this.afterDraw.splice(0)) fn();
    this.afterSizedDraw.length = 0;
    this.bitmaps.clear();
    this.onDrawn = null;
  }

  /** Draws synchronously; returns the time taken in ms. */
  drawNow(): number {
    const started = performance.now();
    const ctx = this.ctx;
    const dpr = this.dpr;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, this.cssWidth, this.cssHeight);
    const p = this.pyramid;
    const level = this.currentLevel();
    if (p && level && p.worldSize > 0) this.drawMatrix(p, level);
    const millis = performance.now() - started;
    this.onDrawn?.(millis);
    for (const fn of this.afterDraw.splice(0)) fn();
    if (this.sized) for (const fn of this.afterSizedDraw.splice(0)) fn();
    const end = this.endBusy;
    this.endBusy = null;
    end?.();
    return millis;
  }

  private drawMatrix(p: Pyramid, level: Level): void {
    const ctx = this.ctx;
    const g = this.geometry();
    const { k, x, y } = this.zoom;
    const px = g.unit * k;
    const n = p.worldSize;
    const bs = level.blockSize;
    const blockPx = bs * px;
    const logMax = Math.log1p(this.mode === 'count' ? level.maxCount : level.maxBytes);

    // Visible rank and block ranges (culling).
    const r0 = Math.max(0, Math.floor(-y / px));
    const r1 = Math.min(n, Math.ceil((g.areaHeight - y) / px));
    const c0 = Math.max(0, Math.floor(-x / px));
    const c1 = Math.min(n, Math.ceil((g.areaWidth - x) / px));
    const br0 = Math.floor(r0 / bs);
    const br1 = Math.ceil(r1 / bs);
    const bc0 = Math.floor(c0 / bs);
    const bc1 = Math.ceil(c1 / bs);

    // The matrix extent, so that empty space reads as "no operations", not "outside".
    const left = x + c0 * px;
    const top = y + r0 * px;
    const right = x + c1 * px;
    const bottom = y + r1 * px;
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, 0, g.areaWidth, g.areaHeight);
    ctx.clip();
    ctx.fillStyle = '#f3f4f6';
    ctx.fillRect(left, top, right - left, bottom - top);
    if (r1 > r0 && c1 > c0) {
      ctx.beginPath();
      ctx.rect(left, top, right - left, bottom - top);
      ctx.clip();
      this.drawNotRead(bs, br0, br1, bc0, bc1, blockPx, left, top, right, bottom);
      if (level.dim <= BITMAP_MAX_DIM) {
        const bmp = this.bitmap(level, logMax);
        ctx.imageSmoothingEnabled = false;
        ctx.drawImage(
          bmp,
          bc0,
          br0,
          bc1 - bc0,
          br1 - br0,
          x + bc0 * blockPx,
          y + br0 * blockPx,
          (bc1 - bc0) * blockPx,
          (br1 - br0) * blockPx,
        );
      } else {
        this.fillBlocks(level, br0, br1, bc0, bc1, blockPx, logMax);
      }
      if (blockPx >= 8) this.drawGrid(br0, br1, bc0, bc1, blockPx, left, top, right, bottom);
    }
    ctx.restore();
    this.drawStrips(level, g, bc0, bc1, br0, br1, blockPx, logMax);
    for (const h of this.highlights) this.outline({ row: h.row, col: h.col, size: 1 }, px, CYCLE_CSS, 2);
    if (this.anyHighlights.length > 0) {
      // Dashed: the receive has no sender cell; the strip segment under its receiver is the wait.
      this.ctx.setLineDash([3, 2]);
      for (const c of this.anyHighlights) this.outline({ row: ANY_PEER, col: c, size: 1 }, px, CYCLE_CSS, 2);
      this.ctx.setLineDash([]);
    }
    this.outline(this.hover, px, 'rgba(17,24,39,0.55)', 1);
    this.outline(this.selection, px, '#111827', 2);
    const f = this.focus && this.cellAt(this.focus.row, this.focus.col);
    if (f) {
      this.ctx.setLineDash([4, 2]);
      this.outline(f, px, FOCUS_CSS, 2);
      this.ctx.setLineDash([]);
    }
  }

  /**
   * The rows and columns of ranks not read, hatched: their queues are unknown, not empty. Drawn
   * under the data, so what the other ranks' queues say about them still shows.
   */
  private drawNotRead(
    bs: number,
    br0: number,
    br1: number,
    bc0: number,
    bc1: number,
    blockPx: number,
    left: number,
    top: number,
    right: number,
    bottom: number,
  ): void {
    const blocks = this.notReadOf(bs);
    if (!blocks) return;
    if (this.hatch === undefined) this.hatch = hatchPattern(this.ctx);
    if (!this.hatch) return;
    const ctx = this.ctx;
    const { x, y } = this.zoom;
    ctx.fillStyle = this.hatch;
    const thin = Math.max(blockPx, 1 / this.dpr);
    for (let b = br0; b < br1; b++)
      if (blocks[b] === 1) ctx.fillRect(left, y + b * blockPx, right - left, thin);
    for (let b = bc0; b < bc1; b++)
      if (blocks[b] === 1) ctx.fillRect(x + b * blockPx, top, thin, bottom - top);
  }

  private fillBlocks(
    level: Level,
    br0: number,
    br1: number,
    bc0: number,
    bc1: number,
    blockPx: number,
    logMax: number,
  ): void {
    const { x, y } = this.zoom;
    const buckets = this.buckets;
    for (const b of buckets) b.length = 0;
    for (let r = br0; r < br1; r++) {
      const end = level.rowPtr[r + 1] ?? 0;
      for (let i = lowerBound(level, r, bc0); i < end; i++) {
        const c = level.col[i] ?? 0;
        if (c >= bc1) break;
        const pi = paletteIndex(level.count, level.bytes, i * KIND_COUNT, this.mode, logMax);
        if (pi >= 0) buckets[pi]?.push(r, c);
      }
    }
    this.flushBuckets((r, c) => [x + c * blockPx, y + r * blockPx, blockPx, blockPx]);
  }

  /** One fillStyle per colour, then every rectangle of that colour (canvas batching). */
  private flushBuckets(rect: (a: number, b: number) => [number, number, number, number]): void {
    const ctx = this.ctx;
    this.buckets.forEach((b, pi) => {
      if (b.length === 0) return;
      ctx.fillStyle = PALETTE_CSS[pi] ?? '#000';
      for (let i = 0; i < b.length; i += 2) {
        const [rx, ry, rw, rh] = rect(b[i] ?? 0, b[i + 1] ?? 0);
        // At least one device pixel, so that a lone operation is never lost to rounding.
        ctx.fillRect(rx, ry, Math.max(rw, 1 / this.dpr), Math.max(rh, 1 / this.dpr));
      }
      b.length = 0;
    });
  }

  private drawGrid(
    br0: number,
    br1: number,
    bc0: number,
    bc1: number,
    blockPx: number,
    left: number,
    top: number,
    right: number,
    bottom: number,
  ): void {
    const ctx = this.ctx;
    const { x, y } = this.zoom;
    ctx.strokeStyle = 'rgba(0,0,0,0.07)';
    ctx.lineWidth = 1 / this.dpr;
    ctx.beginPath();
    for (let r = br0; r <= br1; r++) {
      const yy = y + r * blockPx;
      ctx.moveTo(left, yy);
      ctx.lineTo(right, yy);
    }
    for (let c = bc0; c <= bc1; c++) {
      const xx = x + c * blockPx;
      ctx.moveTo(xx, top);
      ctx.lineTo(xx, bottom);
    }
    ctx.stroke();
  }

  private drawStrips(
    level: Level,
    g: MatrixGeometry,
    bc0: number,
    bc1: number,
    br0: number,
    br1: number,
    blockPx: number,
    logMax: number,
  ): void {
    const ctx = this.ctx;
    const { x, y } = this.zoom;
    const { x: sx, y: sy } = this.stripOrigin();
    // The strips span the visible part of the matrix only.
    const spanW = Math.min(g.areaWidth, sx - STRIP_GAP) - Math.max(0, x);
    const spanH = Math.min(g.areaHeight, sy - STRIP_GAP) - Math.max(0, y);
    ctx.fillStyle = '#f3f4f6';
    ctx.fillRect(Math.max(0, x), sy, spanW, STRIP);
    ctx.fillRect(sx, Math.max(0, y), STRIP, spanH);
    const blocks = this.notReadOf(level.blockSize);
    if (blocks && this.hatch) {
      ctx.fillStyle = this.hatch;
      for (let b = bc0; b < bc1; b++) if (blocks[b] === 1) ctx.fillRect(x + b * blockPx, sy, blockPx, STRIP);
      for (let b = br0; b < br1; b++) if (blocks[b] === 1) ctx.fillRect(sx, y + b * blockPx, STRIP, blockPx);
    }
    ctx.save();
    ctx.beginPath();
    ctx.rect(Math.max(0, x), sy, spanW, STRIP);
    ctx.clip();
    for (let c = bc0; c < bc1; c++) {
      const pi = paletteIndex(level.anyRowCount, level.anyRowBytes, c * KIND_COUNT, this.mode, logMax);
      if (pi >= 0) this.buckets[pi]?.push(c, 0);
    }
    // Strip segments are at least 3 px wide: one wildcard receive must be findable by eye.
    const segment = Math.max(blockPx, 3);
    this.flushBuckets((c) => [x + c * blockPx + (blockPx - segment) / 2, sy, segment, STRIP]);
    // Segments holding operations whose sender is unknown (not MPI_ANY_SOURCE): a dark base under
    // the colour, so the two stay apart on the one strip.
    ctx.fillStyle = UNKNOWN_SENDER_CSS;
    const u = level.anyRowUnknown;
    for (let c = bc0; c < bc1; c++) {
      const o = c * KIND_COUNT;
      if ((u[o] ?? 0) + (u[o + 1] ?? 0) + (u[o + 2] ?? 0) > 0)
        ctx.fillRect(
          x + c * blockPx + (blockPx - segment) / 2,
          sy + STRIP - UNKNOWN_BASE,
          segment,
          UNKNOWN_BASE,
        );
    }
    ctx.restore();
    ctx.save();
    ctx.beginPath();
    ctx.rect(sx, Math.max(0, y), STRIP, spanH);
    ctx.clip();
    for (let r = br0; r < br1; r++) {
      const pi = paletteIndex(
        level.unknownColCount,
        level.unknownColBytes,
        r * KIND_COUNT,
        this.mode,
        logMax,
      );
      if (pi >= 0) this.buckets[pi]?.push(r, 0);
    }
    this.flushBuckets((r) => [sx, y + r * blockPx + (blockPx - segment) / 2, STRIP, segment]);
    ctx.restore();
  }

  private outline(cell: CellRange | null, px: number, color: string, width: number): void {
    if (!cell) return;
    const { x, y } = this.zoom;
    const ctx = this.ctx;
    const size = cell.size * px;
    const strip = this.stripOrigin();
    const rx = cell.col === ANY_PEER ? strip.x : x + cell.col * px;
    const ry = cell.row === ANY_PEER ? strip.y : y + cell.row * px;
    const rw = cell.col === ANY_PEER ? STRIP : size;
    const rh = cell.row === ANY_PEER ? STRIP : size;
    // Tiny blocks get a visible ring around them rather than a sub-pixel stroke.
    const pad = Math.max(0, (4 - Math.min(rw, rh)) / 2);
    ctx.strokeStyle = color;
    ctx.lineWidth = width;
    ctx.strokeRect(rx - pad - width / 2, ry - pad - width / 2, rw + 2 * pad + width, rh + 2 * pad + width);
  }

  /** One pixel per block of a coarse level, built once per (level, mode, pyramid). */
  private bitmap(level: Level, logMax: number): Surface {
    const key = `${level.level}:${this.mode}`;
    const cached = this.bitmaps.get(key);
    if (cached) return cached;
    const dim = level.dim;
    const surface: Surface =
      typeof OffscreenCanvas !== 'undefined'
        ? new OffscreenCanvas(dim, dim)
        : document.createElement('canvas');
    surface.width = dim;
    surface.height = dim;
    const ctx = surface.getContext('2d') as
      | CanvasRenderingContext2D
      | OffscreenCanvasRenderingContext2D
      | null;
    if (!ctx) throw new Error('MQD: cannot create an offscreen 2D context');
    const img = ctx.createImageData(dim, dim);
    const data = img.data;
    for (let r = 0; r < dim; r++) {
      const end = level.rowPtr[r + 1] ?? 0;
      for (let i = level.rowPtr[r] ?? 0; i < end; i++) {
        const pi = paletteIndex(level.count, level.bytes, i * KIND_COUNT, this.mode, logMax);
        if (pi < 0) continue;
        const o = (r * dim + (level.col[i] ?? 0)) * 4;
        const po = pi * 4;
        data[o] = PALETTE_RGBA[po] ?? 0;
        data[o + 1] = PALETTE_RGBA[po + 1] ?? 0;
        data[o + 2] = PALETTE_RGBA[po + 2] ?? 0;
        data[o + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    this.bitmaps.set(key, surface);
    return surface;
  }
}

function sameRange(a: CellRange | null, b: CellRange | null): boolean {
  if (a === null || b === null) return a === b;
  return a.row === b.row && a.col === b.col && a.size === b.size;
}
