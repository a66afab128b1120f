// Aggregation of the message matrix into a pyramid of block levels, so that drawing never
// touches more cells than there are pixels. Level L groups 2^L x 2^L ranks into one block.
// Pending operations are sparse (a few per rank, even at 16,384 ranks), so each level is a
// compressed sparse row (CSR) matrix in typed arrays; the wildcard row ("sender ANY") and the
// unknown-destination column are dense strips beside it.
//
// The page's matrix worker builds it from the edge table; the server builds the overview's first
// level (firstScreenLevel) with the same code, so the first frame drawn from it is the frame the
// page's own pyramid would draw. A worker-light leaf (edge-table.ts, edge-filter.ts only).
//
// Invariant: for every level, the per-kind counts and sizes of all blocks plus both strips sum
// to the totals of the filtered edges, exactly (tests check this per block).
import { type CompiledFilter, compileFilter, edgePasses, NO_FILTER } from './edge-filter.js';
import { ANY_PEER, type EdgeColumns, type EdgeTable, KIND_COUNT } from './edge-table.js';

export interface Level {
  readonly level: number;
  /** Ranks per block side: 2^level. */
  readonly blockSize: number;
  /** Blocks per matrix side: ceil(worldSize / blockSize). */
  readonly dim: number;
  /** CSR row pointers (dim + 1). */
  readonly rowPtr: Uint32Array;
  /** Block column of each stored block, ascending within a row. */
  readonly col: Uint32Array;
  /** Operations per stored block and kind: [block * 3 + kind]. */
  readonly count: Uint32Array;
  /** Summed Operation.length per stored block and kind: [block * 3 + kind]. */
  readonly bytes: Float64Array;
  /** Sender ANY / unknown (both; anyRowUnknown counts the unknown part), per receiver block and kind: [blockCol * 3 + kind]. */
  readonly anyRowCount: Uint32Array;
  readonly anyRowBytes: Float64Array;
  /** The part of anyRowCount whose sender is unknown (not MPI_ANY_SOURCE), per receiver block and kind. */
  readonly anyRowUnknown: Uint32Array;
  /** Receiver unknown, per sender block and kind: [blockRow * 3 + kind]. */
  readonly unknownColCount: Uint32Array;
  readonly unknownColBytes: Float64Array;
  /** Largest block total (all kinds), strips included: the top of the colour scale. */
  readonly maxCount: number;
  readonly maxBytes: number;
}

export interface Pyramid {
  readonly worldSize: number;
  /** levels[0] is one rank per block; the last level has dim 1. */
  readonly levels: readonly Level[];
  /** Edges that passed the filter. */
  readonly ops: number;
  /**
   * The finest level built: 0 for a whole pyramid. A coarse pyramid (buildCoarsePyramid, drawn
   * first at large worlds) has levels[i] = levels[finest] for every i below it.
   */
  readonly finest: number;
}

const TWO32 = 2 ** 32;

export function buildPyramid(t: EdgeColumns, f: CompiledFilter): Pyramid {
  return pyramidFrom(t.worldSize, buildLevel(t, f, 0));
}

/**
 * The levels from `first` up to one block, below it `first` again; the ops it counts. The levels
 * above `first` are made when first read (each from the one below it, then kept): a page drawing
 * a whole matrix reads one of them, and making all of a 100,000-rank matrix's ten took its only
 * thread ~30-180 ms before the first frame. Reading them all (a worker transferring its pyramid)
 * makes them all.
 */
export function pyramidFrom(worldSize: number, first: Level): Pyramid {
  const levels: Level[] = Array.from({ length: first.level + 1 }, () => first);
  let above = 0;
  for (let dim = first.dim; dim > 1; dim = Math.ceil(dim / 2)) above++;
  for (let i = 1; i <= above; i++) {
    const at = first.level + i;
    Object.defineProperty(levels, at, {
      configurable: true,
      enumerable: true,
      get() {
        const made = coarsen(levels[at - 1] as Level);
        Object.defineProperty(levels, at, {
          value: made,
          enumerable: true,
          configurable: false,
          writable: false,
        });
        return made;
      },
    });
  }
  let ops = 0;
  for (const c of first.count) ops += c;
  for (const c of first.anyRowCount) ops += c;
  for (const c of first.unknownColCount) ops += c;
  return { worldSize, levels, ops, finest: first.level };
}

/** Largest level side a coarse pyramid starts at: about the pixels of a matrix on screen. */
export const COARSE_DIM = 1024;

/**
 * The pyramid's levels from the first whose side is at most COARSE_DIM blocks, built straight
 * from the edges: what a whole large matrix shows at first (a block per pixel or more), made in
 * a tenth of the whole pyramid's time at 100,000 ranks. Null when the world is small enough that
 * the whole pyramid is as quick. Its levels are exactly the whole pyramid's from `finest` up.
 */
export function buildCoarsePyramid(t: EdgeColumns, f: CompiledFilter): Pyramid | null {
  const shift = coarseShift(t.worldSize);
  if (shift <= 0) return null;
  return pyramidFrom(t.worldSize, buildLevel(t, f, shift));
}

/** The level a coarse pyramid starts at for a world of this many ranks (0: the whole pyramid's first). */
export function coarseShift(worldSize: number): number {
  return Math.max(0, Math.ceil(Math.log2(Math.max(1, worldSize) / COARSE_DIM)));
}

/**
 * Most stored blocks the overview's first level may hold (~10 MB before compression): a matrix
 * denser than this at the coarse pyramid's first level is sent a level (or more) coarser.
 */
export const FIRST_LEVEL_MAX_BLOCKS = 1 << 18;

/**
 * The level the page draws a whole matrix from first, with no filter, made by the server into the
 * snapshot's overview so the page's first frame needs no aggregation of its own: the coarse
 * pyramid's first level (level 0 below COARSE_DIM ranks), or the first level above it that holds
 * at most `maxBlocks` blocks. Exactly the page's own pyramid's level of that index.
 */
export function firstScreenLevel(t: EdgeTable, maxBlocks = FIRST_LEVEL_MAX_BLOCKS): Level {
  let level = buildLevel(t, compileFilter(NO_FILTER, t.comms), coarseShift(t.worldSize));
  while (level.col.length > maxBlocks && level.dim > 1) level = coarsen(level);
  return level;
}

/** Level `shift` (2^shift ranks per block side) straight from the edges. */
function buildLevel(t: EdgeColumns, f: CompiledFilter, shift: number): Level {
  const n = Math.ceil(Math.max(1, t.worldSize) / 2 ** shift);
  const anyRowCount = new Uint32Array(n * KIND_COUNT);
  const anyRowBytes = new Float64Array(n * KIND_COUNT);
  const anyRowUnknown = new Uint32Array(n * KIND_COUNT);
  const unknownColCount = new Uint32Array(n * KIND_COUNT);
  const unknownColBytes = new Float64Array(n * KIND_COUNT);
  // Counting sort of the passing edges by row, then each row's keys (dst * 2^32 + edge) sorted
  // numerically: no comparator closures, and equal cells end up adjacent.
  const rowCount = new Uint32Array(n + 1);
  let m = 0;
  for (let i = 0; i < t.length; i++) {
    if (!edgePasses(t, f, i)) continue;
    // ANY_PEER (-1) stays -1 under an arithmetic shift.
    const s = (t.src[i] ?? 0) >> shift;
    const d = (t.dst[i] ?? 0) >> shift;
    const k = t.kind[i] ?? 0;
    const sz = t.size[i] ?? 0;
    if (s === ANY_PEER) {
      if (d !== ANY_PEER) {
        anyRowCount[d * KIND_COUNT + k] = (anyRowCount[d * KIND_COUNT + k] ?? 0) + 1;
        anyRowBytes[d * KIND_COUNT + k] = (anyRowBytes[d * KIND_COUNT + k] ?? 0) + sz;
        if (t.peerUnknown[i] === 1)
          anyRowUnknown[d * KIND_COUNT + k] = (anyRowUnknown[d * KIND_COUNT + k] ?? 0) + 1;
      }
      continue;
    }
    if (d === ANY_PEER) {
      unknownColCount[s * KIND_COUNT + k] = (unknownColCount[s * KIND_COUNT + k] ?? 0) + 1;
      unknownColBytes[s * KIND_COUNT + k] = (unknownColBytes[s * KIND_COUNT + k] ?? 0) + sz;
      continue;
    }
    rowCount[s + 1] = (rowCount[s + 1] ?? 0) + 1;
    m++;
  }
  for (let r = 0; r < n; r++) rowCount[r + 1] = (rowCount[r + 1] ?? 0) + (rowCount[r] ?? 0);
  const keys = new Float64Array(m);
  const fill = rowCount.slice(0, n);
  for (let i = 0; i < t.length; i++) {
    const s = t.src[i] ?? 0;
    const d = t.dst[i] ?? 0;
    if (s === ANY_PEER || d === ANY_PEER || !edgePasses(t, f, i)) continue;
    const row = s >> shift;
    const at = fill[row] ?? 0;
    keys[at] = (d >> shift) * TWO32 + i;
    fill[row] = at + 1;
  }
  const rowPtr = new Uint32Array(n + 1);
  const col = new Uint32Array(m);
  const count = new Uint32Array(m * KIND_COUNT);
  const bytes = new Float64Array(m * KIND_COUNT);
  let out = 0;
  for (let r = 0; r < n; r++) {
    const a = rowCount[r] ?? 0;
    const b = rowCount[r + 1] ?? 0;
    if (b - a > 1) keys.subarray(a, b).sort();
    let prev = -1;
    for (let j = a; j < b; j++) {
      const key = keys[j] ?? 0;
      const d = Math.floor(key / TWO32);
      const i = key - d * TWO32;
      if (d !== prev) {
        col[out] = d;
        out++;
        prev = d;
      }
      const slot = (out - 1) * KIND_COUNT + (t.kind[i] ?? 0);
      count[slot] = (count[slot] ?? 0) + 1;
      bytes[slot] = (bytes[slot] ?? 0) + (t.size[i] ?? 0);
    }
    rowPtr[r + 1] = out;
  }
  return levelFromParts(
    shift,
    2 ** shift,
    n,
    rowPtr,
    col.slice(0, out),
    count.slice(0, out * KIND_COUNT),
    bytes.slice(0, out * KIND_COUNT),
    {
      anyRowCount,
      anyRowBytes,
      anyRowUnknown,
      unknownColCount,
      unknownColBytes,
    },
  );
}

export interface LevelStrips {
  anyRowCount: Uint32Array;
  anyRowBytes: Float64Array;
  anyRowUnknown: Uint32Array;
  unknownColCount: Uint32Array;
  unknownColBytes: Float64Array;
}

/** A level from its parts, with its largest block totals (the colour scale's top) computed. */
export function levelFromParts(
  level: number,
  blockSize: number,
  dim: number,
  rowPtr: Uint32Array,
  col: Uint32Array,
  count: Uint32Array,
  bytes: Float64Array,
  strips: LevelStrips,
): Level {
  let maxCount = 0;
  let maxBytes = 0;
  const scan = (c: Uint32Array, by: Float64Array, blocks: number) => {
    for (let b = 0; b < blocks; b++) {
      const o = b * KIND_COUNT;
      const tc = (c[o] ?? 0) + (c[o + 1] ?? 0) + (c[o + 2] ?? 0);
      const tb = (by[o] ?? 0) + (by[o + 1] ?? 0) + (by[o + 2] ?? 0);
      if (tc > maxCount) maxCount = tc;
      if (tb > maxBytes) maxBytes = tb;
    }
  };
  scan(count, bytes, col.length);
  scan(strips.anyRowCount, strips.anyRowBytes, dim);
  scan(strips.unknownColCount, strips.unknownColBytes, dim);
  return { level, blockSize, dim, rowPtr, col, count, bytes, ...strips, maxCount, maxBytes };
}

/** Level L+1 from level L: merge each pair of block rows, halving the column indices. */
function coarsen(p: Level): Level {
  const dim = Math.ceil(p.dim / 2);
  const rowPtr = new Uint32Array(dim + 1);
  // Upper bound: every parent block survives.
  const col = new Uint32Array(p.col.length);
  const count = new Uint32Array(p.col.length * KIND_COUNT);
  const bytes = new Float64Array(p.col.length * KIND_COUNT);
  let out = 0;
  for (let r = 0; r < dim; r++) {
    let i = p.rowPtr[2 * r] ?? 0;
    const iEnd = p.rowPtr[2 * r + 1] ?? 0;
    let j = iEnd;
    const jEnd = 2 * r + 1 < p.dim ? (p.rowPtr[2 * r + 2] ?? 0) : iEnd;
    let prev = -1;
    // Two sorted runs (rows 2r and 2r+1); take the smaller column each step.
    while (i < iEnd || j < jEnd) {
      let from: number;
      if (j >= jEnd || (i < iEnd && (p.col[i] ?? 0) <= (p.col[j] ?? 0))) from = i++;
      else from = j++;
      const c = (p.col[from] ?? 0) >>> 1;
      if (c !== prev) {
        col[out] = c;
        out++;
        prev = c;
      }
      const o = (out - 1) * KIND_COUNT;
      const fo = from * KIND_COUNT;
      for (let k = 0; k < KIND_COUNT; k++) {
        count[o + k] = (count[o + k] ?? 0) + (p.count[fo + k] ?? 0);
        bytes[o + k] = (bytes[o + k] ?? 0) + (p.bytes[fo + k] ?? 0);
      }
    }
    rowPtr[r + 1] = out;
  }
  const halve = <A extends Uint32Array | Float64Array>(src: A, make: (n: number) => A): A => {
    const dst = make(dim * KIND_COUNT);
    for (let b = 0; b < p.dim; b++) {
      const o = (b >>> 1) * KIND_COUNT;
      for (let k = 0; k < KIND_COUNT; k++) dst[o + k] = (dst[o + k] ?? 0) + (src[b * KIND_COUNT + k] ?? 0);
    }
    return dst;
  };
  const u32 = (n: number) => new Uint32Array(n);
  const f64 = (n: number) => new Float64Array(n);
  return levelFromParts(
    p.level + 1,
    p.blockSize * 2,
    dim,
    rowPtr,
    col.slice(0, out),
    count.slice(0, out * KIND_COUNT),
    bytes.slice(0, out * KIND_COUNT),
    {
      anyRowCount: halve(p.anyRowCount, u32),
      anyRowBytes: halve(p.anyRowBytes, f64),
      anyRowUnknown: halve(p.anyRowUnknown, u32),
      unknownColCount: halve(p.unknownColCount, u32),
      unknownColBytes: halve(p.unknownColBytes, f64),
    },
  );
}

/** Index of a stored block in its level, or -1 when the block is empty. */
export function findBlock(l: Level, row: number, col: number): number {
  if (row < 0 || row >= l.dim) return -1;
  let lo = l.rowPtr[row] ?? 0;
  let hi = (l.rowPtr[row + 1] ?? 0) - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const c = l.col[mid] ?? 0;
    if (c === col) return mid;
    if (c < col) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/** First stored block of a row whose column is >= col (for culling a visible column range). */
export function lowerBound(l: Level, row: number, col: number): number {
  let lo = l.rowPtr[row] ?? 0;
  let hi = l.rowPtr[row + 1] ?? 0;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((l.col[mid] ?? 0) < col) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export interface BlockValues {
  readonly count: readonly [number, number, number];
  readonly bytes: readonly [number, number, number];
}

const ZERO: BlockValues = { count: [0, 0, 0], bytes: [0, 0, 0] };

function triple(a: Uint32Array | Float64Array, o: number): [number, number, number] {
  return [a[o] ?? 0, a[o + 1] ?? 0, a[o + 2] ?? 0];
}

/** The whole any-sender strip at level 0, per kind: MPI_ANY_SOURCE apart from sender unknown. */
export function stripTotals(p: Pyramid): { wildcard: number[]; unknown: number[] } {
  const wildcard = [0, 0, 0];
  const unknown = [0, 0, 0];
  const l = p.levels[0];
  if (l)
    for (let i = 0; i < l.anyRowCount.length; i++) {
      const k = i % KIND_COUNT;
      const u = l.anyRowUnknown[i] ?? 0;
      unknown[k] = (unknown[k] ?? 0) + u;
      wildcard[k] = (wildcard[k] ?? 0) + (l.anyRowCount[i] ?? 0) - u;
    }
  return { wildcard, unknown };
}

/**
 * Per-kind counts of an any-sender strip segment (block column `col`) whose sender is unknown;
 * the rest of blockValues(l, ANY_PEER, col) are receives from MPI_ANY_SOURCE.
 */
export function stripUnknown(l: Level, col: number): readonly [number, number, number] {
  if (col < 0 || col >= l.dim) return [0, 0, 0];
  return triple(l.anyRowUnknown, col * KIND_COUNT);
}

/**
 * Per-kind values of one block of a level. Row or column ANY_PEER reads the strips
 * (row ANY_PEER = sender ANY/unknown, col ANY_PEER = receiver unknown).
 */
export function blockValues(l: Level, row: number, col: number): BlockValues {
  if (row === ANY_PEER && col === ANY_PEER) return ZERO;
  if (row === ANY_PEER) {
    if (col < 0 || col >= l.dim) return ZERO;
    return { count: triple(l.anyRowCount, col * KIND_COUNT), bytes: triple(l.anyRowBytes, col * KIND_COUNT) };
  }
  if (col === ANY_PEER) {
    if (row < 0 || row >= l.dim) return ZERO;
    return {
      count: triple(l.unknownColCount, row * KIND_COUNT),
      bytes: triple(l.unknownColBytes, row * KIND_COUNT),
    };
  }
  const b = findBlock(l, row, col);
  if (b < 0) return ZERO;
  return { count: triple(l.count, b * KIND_COUNT), bytes: triple(l.bytes, b * KIND_COUNT) };
}

/**
 * The finest level whose blocks are at least one device pixel wide at this many ranks per
 * pixel. Never finer: a block narrower than a pixel can vanish when drawn (nearest-neighbour
 * sampling skips it), and a single stuck row must never vanish.
 */
export function levelForDensity(p: Pyramid, ranksPerPixel: number): Level {
  const l = p.levels[levelIndexForDensity(p, ranksPerPixel)];
  if (!l) throw new Error('pyramid has no levels');
  return l;
}

/** The index in p.levels levelForDensity takes (a coarse pyramid holds a coarser level there below `finest`). */
export function levelIndexForDensity(p: Pyramid, ranksPerPixel: number): number {
  // The epsilon keeps an exact power of two (8 ranks per pixel) on its own level despite rounding.
  const want = ranksPerPixel <= 1 ? 0 : Math.ceil(Math.log2(ranksPerPixel) - 1e-9);
  return Math.max(0, Math.min(p.levels.length - 1, want));
}

/** A level's nine arrays, in one fixed order. */
export function levelArrays(l: Level): readonly (Uint32Array | Float64Array)[] {
  return [
    l.rowPtr,
    l.col,
    l.count,
    l.bytes,
    l.anyRowCount,
    l.anyRowBytes,
    l.anyRowUnknown,
    l.unknownColCount,
    l.unknownColBytes,
  ];
}

/** Every buffer of a pyramid, for a zero-copy transfer out of the worker. */
export function pyramidBuffers(p: Pyramid): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  // A coarse pyramid repeats its finest level below it: each buffer once.
  for (const l of new Set(p.levels)) for (const a of levelArrays(l)) out.push(a.buffer as ArrayBuffer);
  return out;
}
