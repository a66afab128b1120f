// Colours of the matrix: hue = the kind that dominates a cell, lightness = log-scaled value.
// Okabe-Ito hues stay distinct for the common colour-vision deficiencies.
import type { QueueKind } from '@mqd/model';
import { KIND_COUNT } from './edges.js';

export type { ValueMode } from '../matrix-types.js';

import type { ValueMode } from '../matrix-types.js';

export const KIND_HEX = ['#d98c00', '#0072b2', '#c4458f'] as const;
/** Colour of a queue kind, for legends and charts. */
export const KIND_COLOR: Record<QueueKind, string> = {
  sends: KIND_HEX[0],
  receives: KIND_HEX[1],
  unexpected: KIND_HEX[2],
};
export const STEPS = 24;

const rgb = (hex: string): [number, number, number] => [
  Number.parseInt(hex.slice(1, 3), 16),
  Number.parseInt(hex.slice(3, 5), 16),
  Number.parseInt(hex.slice(5, 7), 16),
];

/** [kind * STEPS + step] -> packed RGBA bytes and CSS colour. Step 0 is the faintest non-empty cell. */
export const PALETTE_RGBA = new Uint8ClampedArray(KIND_COUNT * STEPS * 4);
export const PALETTE_CSS: string[] = [];
for (let k = 0; k < KIND_COUNT; k++) {
  const [r, g, b] = rgb(KIND_HEX[k] ?? '#000000');
  for (let s = 0; s < STEPS; s++) {
    // From a 30% tint (still visible on white) to the full colour, then slightly darker.
    const t = 0.3 + (0.85 * s) / (STEPS - 1);
    const mix = (c: number) => (t <= 1 ? 255 + (c - 255) * t : c * (1 - (t - 1) * 0.9));
    const px = [mix(r), mix(g), mix(b)].map((v) => Math.round(Math.max(0, Math.min(255, v))));
    const o = (k * STEPS + s) * 4;
    PALETTE_RGBA[o] = px[0] ?? 0;
    PALETTE_RGBA[o + 1] = px[1] ?? 0;
    PALETTE_RGBA[o + 2] = px[2] ?? 0;
    PALETTE_RGBA[o + 3] = 255;
    PALETTE_CSS.push(`rgb(${px[0]},${px[1]},${px[2]})`);
  }
}

/**
 * Palette index of a block from its per-kind counts and sizes, or -1 when it is empty.
 * A block with operations is never invisible: in bytes mode a zero-length message (MPICH's
 * unexpected entries have count 0) still gets the faintest step of its kind.
 */
export function paletteIndex(
  count: ArrayLike<number>,
  bytes: ArrayLike<number>,
  offset: number,
  mode: ValueMode,
  logMax: number,
): number {
  const c0 = count[offset] ?? 0;
  const c1 = count[offset + 1] ?? 0;
  const c2 = count[offset + 2] ?? 0;
  if (c0 + c1 + c2 === 0) return -1;
  let v0 = c0;
  let v1 = c1;
  let v2 = c2;
  if (mode === 'bytes') {
    const b0 = bytes[offset] ?? 0;
    const b1 = bytes[offset + 1] ?? 0;
    const b2 = bytes[offset + 2] ?? 0;
    if (b0 + b1 + b2 > 0) {
      v0 = b0;
      v1 = b1;
      v2 = b2;
    }
  }
  const kind = v0 >= v1 && v0 >= v2 ? 0 : v1 >= v2 ? 1 : 2;
  const total = v0 + v1 + v2;
  const step = logMax > 0 ? Math.round((Math.log1p(total) / logMax) * (STEPS - 1)) : STEPS - 1;
  return kind * STEPS + Math.max(0, Math.min(STEPS - 1, step));
}

/** "Not read" (a rank whose queues are unknown): diagonal grey hatching, in every view. */
export const HATCH_BG = '#e5e7eb';
export const HATCH_LINE = '#6b7280';

/** The hatching as a canvas pattern (null without a 2D context). */
export function hatchPattern(ctx: CanvasRenderingContext2D): CanvasPattern | null {
  const tile = document.createElement('canvas');
  tile.width = 6;
  tile.height = 6;
  const t = tile.getContext('2d');
  if (!t) return null;
  t.fillStyle = HATCH_BG;
  t.fillRect(0, 0, 6, 6);
  t.strokeStyle = HATCH_LINE;
  t.lineWidth = 1.5;
  // One diagonal across the tile and its two corner pieces, so tiles join into unbroken lines.
  t.beginPath();
  t.moveTo(-1, 7);
  t.lineTo(7, -1);
  t.moveTo(-1, 1);
  t.lineTo(1, -1);
  t.moveTo(5, 7);
  t.lineTo(7, 5);
  t.stroke();
  return ctx.createPattern(tile, 'repeat');
}

/** Axis marks: odd ranks out (▼) and queue-shape outliers (◆), in the legend and on both axes. */
export const ODD_CSS = '#111827';
export const OUTLIER_CSS = '#0f766e';
/** The keyboard-focused cell's outline (distinct from hover grey, selection black, cycle red). */
export const FOCUS_CSS = '#2563eb';
