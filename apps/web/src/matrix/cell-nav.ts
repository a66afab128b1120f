// Keyboard moves of the matrix's focused cell, in blocks of the level on screen. The ANY-sender
// strip is one more row below the matrix and the unknown-destination strip one more column at
// its right, as they are drawn; the corner where they would meet holds nothing and is skipped.
import { ANY_PEER, type CellRange } from './edges.js';

export interface NavContext {
  /** Ranks per matrix side. */
  readonly n: number;
  /** Ranks per block side at the current zoom. */
  readonly blockSize: number;
  /** Blocks per screen height (PageUp / PageDown move this many rows). */
  readonly page: number;
}

/** The cell a key moves `from` to; null when the key is not a move. Ctrl/Cmd + Home/End go to a corner. */
export function moveCell(from: CellRange, key: string, corner: boolean, ctx: NavContext): CellRange | null {
  const bs = Math.max(1, ctx.blockSize);
  const dim = Math.ceil(ctx.n / bs);
  if (dim === 0) return null;
  const at = (r: number) => (r === ANY_PEER ? dim : Math.min(dim - 1, Math.floor(Math.max(0, r) / bs)));
  let r = at(from.row);
  let c = at(from.col);
  const page = Math.max(1, Math.floor(ctx.page));
  let horizontal = false;
  switch (key) {
    case 'ArrowUp':
      r -= 1;
      break;
    case 'ArrowDown':
      r += 1;
      break;
    case 'ArrowLeft':
      c -= 1;
      horizontal = true;
      break;
    case 'ArrowRight':
      c += 1;
      horizontal = true;
      break;
    case 'PageUp':
      r -= page;
      break;
    case 'PageDown':
      r += page;
      break;
    case 'Home':
      c = 0;
      if (corner) r = 0;
      horizontal = !corner;
      break;
    case 'End':
      c = dim - 1;
      if (corner) r = dim - 1;
      horizontal = !corner;
      break;
    default:
      return null;
  }
  // PageUp/PageDown stop at the matrix's edge rows before stepping into the strip.
  const last = key === 'PageDown' && r >= dim && at(from.row) < dim - 1 ? dim - 1 : dim;
  r = Math.min(last, Math.max(0, r));
  c = Math.min(dim, Math.max(0, c));
  if (r === dim && c === dim) {
    if (horizontal) c = dim - 1;
    else r = dim - 1;
  }
  return { row: r === dim ? ANY_PEER : r * bs, col: c === dim ? ANY_PEER : c * bs, size: bs };
}
