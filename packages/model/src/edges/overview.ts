// A snapshot's overview: what the dashboard draws first (the header, the diagnosis, the message
// matrix), computed once per stored snapshot on the server and sent in one compact body, so a
// 100,000-rank job's verdict and matrix are on screen before its 125 MB of ranks have arrived
//. The explanation is the model's own (explainSnapshot), the matrix's table the model's
// own (buildEdges), its first level the model's own pyramid (firstScreenLevel): the page that
// later holds the whole snapshot takes the explanation and the table from here instead of
// computing them again, so the two can never disagree.
//
// The body comes in two parts, so that the page can draw from the first while the second (the
// edge table: 11 MB at 100,000 ranks) is still arriving:
// - the first part: "MQDO", the format (u32), the first JSON part's length (u32), the first
//   part's whole length (u32, a multiple of 8), the first JSON part (UTF-8: the header, the
//   explanation, the read status, the matrix's size), zero padding to a multiple of 8, then the
//   first level's arrays when there is one (firstLevel: the matrix with no filter at about a
//   block per pixel): its u32 arrays (rowPtr, col, count, anyRowCount, anyRowUnknown,
//   unknownColCount), padding to 8, its f64 arrays (bytes, anyRowBytes, unknownColBytes);
// - the second part: the second JSON part's length (u32), four zero bytes, the JSON part (the
//   communicators, the width of `size`), padding to 8, then the edge table's columns, each
//   `length` long: `size` (32-bit when every length is an integer below 2^32, `sizeWidth` 4,
//   else 64-bit floats), then the columns of COLUMNS (so every column starts aligned).
// Little-endian, as typed arrays are on every machine the dashboard runs on. The position
// columns (owner, commPos, opPos) are not sent: they index the whole snapshot, and
// fillEdgePositions fills them from it when it arrives (`positions` false until then). 23 bytes
// an edge, where the table holds 39. A change of format comes with a migration that empties the
// stored overviews (apps/server/src/store/store-schema.ts).
import { explainSnapshot } from '../analysis/explain.js';
import type { Explanation } from '../analysis/explain-types.js';
import { type SnapshotReadStatus, snapshotReadStatus } from '../analysis/history.js';
import { compressRanks } from '../analysis/ranges.js';
import type { JobSnapshot } from '../snapshot-spec.js';
import { buildEdges } from './build-edges.js';
import { type CommSummary, type EdgeTable, KIND_COUNT, type KindUnit } from './edge-table.js';
import { FIRST_LEVEL_MAX_BLOCKS, firstScreenLevel, type Level, levelFromParts } from './pyramid.js';

export const OVERVIEW_FORMAT = 3;
/** The media type of an encoded overview. */
export const OVERVIEW_MEDIA_TYPE = 'application/vnd.mqd.overview';

/** The snapshot without its ranks: what the page's header and footer say about it. */
export interface OverviewHead {
  readonly takenAt: string;
  readonly durationMicros: number;
  readonly mpi: JobSnapshot['mpi'];
  readonly rankCount: number;
  /** programOf: the program's file name, null without stacks. */
  readonly program: string | null;
  readonly source?: JobSnapshot['source'];
}

/** The matrix's size, before its edge table is here. */
export interface OverviewMatrix {
  readonly worldSize: number;
  /** Edges (queued operations) in the table. */
  readonly length: number;
  readonly kindUnit: readonly KindUnit[];
}

/** The overview's first part: everything the first screen shows, without the edge table. */
export interface OverviewFirst {
  readonly format: typeof OVERVIEW_FORMAT;
  readonly head: OverviewHead;
  /** explainSnapshot(snapshot), with no earlier snapshots. */
  readonly explanation: Explanation;
  readonly readStatus: SnapshotReadStatus;
  /** Ranks not read, as ranges ("" when all were). */
  readonly notRead: string;
  /** Ranks whose DLL looked up fields the library lacks (RankSnapshot.dll.missingFields), as ranges. */
  readonly dllMissingFields: string;
  readonly matrix: OverviewMatrix;
  /**
   * The matrix with no filter at the level a whole matrix is drawn at first (firstScreenLevel:
   * exactly the page's own pyramid's level of its index, at most FIRST_LEVEL_MAX_BLOCKS blocks);
   * null in an overview made without one.
   */
  readonly firstLevel: Level | null;
}

export interface SnapshotOverview extends OverviewFirst {
  /**
   * The edge table; its position columns (owner, commPos, opPos) hold the snapshot's positions
   * only when `positions` is true (made from the snapshot), else zeros until fillEdgePositions.
   */
  readonly edges: EdgeTable;
  readonly positions: boolean;
}

/**
 * The program a snapshot's ranks run, for headings: the file name of the module holding `main`
 * (C/C++) or `MAIN__` (Fortran) on the first rank whose stacks were read; null without stacks.
 */
export function programOf(snapshot: Pick<JobSnapshot, 'ranks'>): string | null {
  for (const r of snapshot.ranks) {
    for (const t of r.threads ?? []) {
      const f = t.frames.find((x) => x.function === 'main' || x.function === 'MAIN__');
      if (f?.module) return f.module.slice(f.module.lastIndexOf('/') + 1);
    }
  }
  return null;
}

/** What the page's header and footer say about a snapshot (the snapshot without its ranks). */
export function overviewHead(snapshot: JobSnapshot): OverviewHead {
  return {
    takenAt: snapshot.takenAt,
    durationMicros: snapshot.durationMicros,
    mpi: snapshot.mpi,
    rankCount: snapshot.ranks.length,
    program: programOf(snapshot),
    ...(snapshot.source === undefined ? {} : { source: snapshot.source }),
  };
}

/** The overview of a snapshot: the explanation, the edge table and the header's facts. */
export function buildOverview(snapshot: JobSnapshot): SnapshotOverview {
  const notRead: number[] = [];
  const missing: number[] = [];
  for (const r of snapshot.ranks) {
    if (r.state.kind !== 'ok') notRead.push(r.rank);
    if (r.dll?.missingFields?.length) missing.push(r.rank);
  }
  const edges = buildEdges(snapshot);
  return {
    format: OVERVIEW_FORMAT,
    head: overviewHead(snapshot),
    explanation: explainSnapshot(snapshot),
    readStatus: snapshotReadStatus(snapshot),
    notRead: compressRanks(notRead),
    dllMissingFields: compressRanks(missing),
    matrix: { worldSize: edges.worldSize, length: edges.length, kindUnit: edges.kindUnit },
    firstLevel: firstScreenLevel(edges),
    edges,
    positions: true,
  };
}

type Column = 'src' | 'dst' | 'tag' | 'comm' | 'kind' | 'tagAny' | 'peerUnknown';
type ColumnArray = Int32Array | Uint32Array | Uint8Array;
/** The columns after `size`, in body order, each with its element size. */
const COLUMNS: readonly (readonly [Column, 1 | 4, (b: ArrayBuffer, at: number, n: number) => ColumnArray])[] =
  [
    ['src', 4, (b, at, n) => new Int32Array(b, at, n)],
    ['dst', 4, (b, at, n) => new Int32Array(b, at, n)],
    ['tag', 4, (b, at, n) => new Int32Array(b, at, n)],
    ['comm', 4, (b, at, n) => new Uint32Array(b, at, n)],
    ['kind', 1, (b, at, n) => new Uint8Array(b, at, n)],
    ['tagAny', 1, (b, at, n) => new Uint8Array(b, at, n)],
    ['peerUnknown', 1, (b, at, n) => new Uint8Array(b, at, n)],
  ];
const MAGIC = [0x4d, 0x51, 0x44, 0x4f]; // "MQDO"
/** The first part's fixed header: magic, format, first JSON length, first part length. */
export const OVERVIEW_HEADER_BYTES = 16;
/** The second part's fixed header: its JSON length and four zero bytes. */
const REST_HEADER = 8;
/** Bytes an edge takes after `size`. */
const COLUMN_BYTES = COLUMNS.reduce((s, [, w]) => s + w, 0);
/** More edges than this is not a snapshot this model can have made (2^28 operations). */
const MAX_EDGES = 1 << 28;

/** The first JSON part: the first part without the level's arrays. */
interface FirstJson extends Omit<OverviewFirst, 'firstLevel'> {
  /** The first level's shape; its arrays follow the JSON part. */
  readonly firstLevel: { readonly level: number; readonly dim: number; readonly blocks: number } | null;
}

/** The second JSON part. */
interface RestJson {
  /** Bytes of one `size` value: 4 (unsigned integers) or 8 (floats). */
  readonly sizeWidth: 4 | 8;
  readonly comms: readonly CommSummary[];
}

const pad8 = (n: number) => (n + 7) & ~7;

// TextEncoder/TextDecoder are globals in Node and every browser, but the model compiles without
// the DOM's or Node's types: their shapes, as used here.
const codecs = globalThis as unknown as {
  TextEncoder: new () => { encode(s: string): Uint8Array };
  TextDecoder: new (label: string, o: { fatal: boolean }) => { decode(b: Uint8Array): string };
};

/** A level's arrays in body order: the u32 ones, then (from an 8-aligned offset) the f64 ones. */
function levelArraysByWidth(l: Level): { u32: Uint32Array[]; f64: Float64Array[] } {
  return {
    u32: [l.rowPtr, l.col, l.count, l.anyRowCount, l.anyRowUnknown, l.unknownColCount],
    f64: [l.bytes, l.anyRowBytes, l.unknownColBytes],
  };
}

/** Bytes a level's arrays take: u32 (dim + 1) + m + 3m + 3 × 3 dim, padded; f64 3m + 2 × 3 dim. */
function levelBytes(dim: number, blocks: number): number {
  return (
    pad8(4 * (dim + 1 + blocks * (1 + KIND_COUNT) + 3 * KIND_COUNT * dim)) +
    8 * (KIND_COUNT * blocks + 2 * KIND_COUNT * dim)
  );
}

/** The overview as one body (see the top of this file). */
export function encodeOverview(o: SnapshotOverview): Uint8Array {
  const e = o.edges;
  let narrow = true;
  for (let i = 0; i < e.length && narrow; i++) {
    const v = e.size[i] ?? 0;
    narrow = Number.isInteger(v) && v >= 0 && v < 2 ** 32;
  }
  const sizeWidth = narrow ? 4 : 8;
  const l = o.firstLevel;
  const firstJson: FirstJson = {
    format: o.format,
    head: o.head,
    explanation: o.explanation,
    readStatus: o.readStatus,
    notRead: o.notRead,
    dllMissingFields: o.dllMissingFields,
    matrix: o.matrix,
    firstLevel: l === null ? null : { level: l.level, dim: l.dim, blocks: l.col.length },
  };
  const restJson: RestJson = { sizeWidth, comms: e.comms };
  const first = new codecs.TextEncoder().encode(JSON.stringify(firstJson));
  const rest = new codecs.TextEncoder().encode(JSON.stringify(restJson));
  const levelStart = pad8(OVERVIEW_HEADER_BYTES + first.length);
  const firstEnd = levelStart + (l === null ? 0 : levelBytes(l.dim, l.col.length));
  const columnsStart = pad8(firstEnd + REST_HEADER + rest.length);
  const out = new Uint8Array(columnsStart + e.length * (sizeWidth + COLUMN_BYTES));
  out.set(MAGIC, 0);
  const view = new DataView(out.buffer);
  view.setUint32(4, OVERVIEW_FORMAT, true);
  view.setUint32(8, first.length, true);
  view.setUint32(12, firstEnd, true);
  out.set(first, OVERVIEW_HEADER_BYTES);
  const put = (a: Uint32Array | Float64Array | Int32Array | Uint8Array, at: number, bytes: number) => {
    out.set(new Uint8Array(a.buffer, a.byteOffset, bytes), at);
    return at + bytes;
  };
  if (l !== null) {
    const { u32, f64 } = levelArraysByWidth(l);
    let at = levelStart;
    for (const a of u32) at = put(a, at, a.length * 4);
    at = pad8(at);
    for (const a of f64) at = put(a, at, a.length * 8);
  }
  view.setUint32(firstEnd, rest.length, true);
  out.set(rest, firstEnd + REST_HEADER);
  let at = columnsStart;
  const size = narrow ? Uint32Array.from(e.size) : e.size;
  at = put(size, at, e.length * sizeWidth);
  for (const [name, width] of COLUMNS) at = put(e[name], at, e.length * width);
  return out;
}

/** Why a body is not an overview. */
function bad(why: string): { ok: false; error: string } {
  return { ok: false, error: `not a snapshot overview of format ${OVERVIEW_FORMAT}: ${why}` };
}

const isInt = (v: unknown, max: number): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= max;

/** Typed arrays need their element alignment: a body that does not start on 8 is copied. */
const aligned = (body: Uint8Array) => (body.byteOffset % 8 === 0 ? body : body.slice());

function parseJson<T>(bytes: Uint8Array, from: number, length: number): T | string {
  try {
    const v = JSON.parse(
      new codecs.TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(from, from + length)),
    );
    return v === null || typeof v !== 'object' ? 'not an object' : (v as T);
  } catch (e) {
    return `does not parse (${e instanceof Error ? e.message : String(e)})`;
  }
}

/**
 * How many bytes the overview's first part takes, from the body's first OVERVIEW_HEADER_BYTES
 * (null while fewer have arrived, or when they are not an overview's): a page reading the body
 * as it arrives decodes the first part (decodeOverviewFirst) once it has this many.
 */
export function overviewFirstLength(prefix: Uint8Array): number | null {
  if (prefix.length < OVERVIEW_HEADER_BYTES || MAGIC.some((b, i) => prefix[i] !== b)) return null;
  const view = new DataView(prefix.buffer, prefix.byteOffset, prefix.byteLength);
  if (view.getUint32(4, true) !== OVERVIEW_FORMAT) return null;
  return view.getUint32(12, true);
}

/** The first level's arrays at `at`, checked: a CSR matrix of `dim` rows whose columns are ascending and inside. */
function decodeLevel(
  bytes: Uint8Array,
  at: number,
  shape: NonNullable<FirstJson['firstLevel']>,
  worldSize: number,
): Level | string {
  // `dim` and `blocks` are checked integers (decodeOverviewFirst, before it sized the part).
  const { level, dim, blocks } = shape;
  if (!isInt(level, 24) || dim !== Math.ceil(Math.max(1, worldSize) / 2 ** level))
    return 'the first level is of the wrong shape';
  const buffer = bytes.buffer as ArrayBuffer;
  let p = bytes.byteOffset + at;
  const u32 = (n: number) => {
    const a = new Uint32Array(buffer, p, n);
    p += 4 * n;
    return a;
  };
  const f64 = (n: number) => {
    const a = new Float64Array(buffer, p, n);
    p += 8 * n;
    return a;
  };
  const rowPtr = u32(dim + 1);
  const col = u32(blocks);
  const count = u32(KIND_COUNT * blocks);
  const anyRowCount = u32(KIND_COUNT * dim);
  const anyRowUnknown = u32(KIND_COUNT * dim);
  const unknownColCount = u32(KIND_COUNT * dim);
  p = bytes.byteOffset + at + pad8(p - bytes.byteOffset - at);
  const sums = f64(KIND_COUNT * blocks);
  const anyRowBytes = f64(KIND_COUNT * dim);
  const unknownColBytes = f64(KIND_COUNT * dim);
  if (rowPtr[0] !== 0 || rowPtr[dim] !== blocks) return "the first level's rows do not cover its blocks";
  for (let r = 0; r < dim; r++) {
    const a = rowPtr[r] ?? 0;
    const b = rowPtr[r + 1] ?? 0;
    if (b < a) return `the first level's row ${r} ends before it starts`;
    for (let j = a; j < b; j++) {
      const c = col[j] ?? 0;
      if (c >= dim || (j > a && c <= (col[j - 1] ?? 0)))
        return `the first level's row ${r} has a column out of order`;
    }
  }
  for (const a of [sums, anyRowBytes, unknownColBytes])
    for (const v of a)
      if (!(v >= 0 && v < Number.POSITIVE_INFINITY)) return 'the first level has a size that is not a length';
  return levelFromParts(level, 2 ** level, dim, rowPtr, col, count, sums, {
    anyRowCount,
    anyRowBytes,
    anyRowUnknown,
    unknownColCount,
    unknownColBytes,
  });
}

/**
 * The overview's first part in `body` (the whole body, or at least its first
 * overviewFirstLength bytes), checked: its framing, the JSON part's shape as far as the views
 * rely on it, and the first level's arrays. The level's arrays view `body`'s buffer.
 */
export function decodeOverviewFirst(
  body: Uint8Array,
): { ok: true; value: OverviewFirst } | { ok: false; error: string } {
  if (body.length < OVERVIEW_HEADER_BYTES || MAGIC.some((b, i) => body[i] !== b))
    return bad('no MQDO header');
  const bytes = aligned(body);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const format = view.getUint32(4, true);
  if (format !== OVERVIEW_FORMAT) return bad(`format ${format}`);
  const jsonLength = view.getUint32(8, true);
  const firstEnd = view.getUint32(12, true);
  const levelStart = pad8(OVERVIEW_HEADER_BYTES + jsonLength);
  if (firstEnd % 8 !== 0 || levelStart > firstEnd || firstEnd > bytes.length)
    return bad('the first part runs past the end');
  const json = parseJson<FirstJson>(bytes, OVERVIEW_HEADER_BYTES, jsonLength);
  if (typeof json === 'string') return bad(`the first JSON part ${json}`);
  const ex = json.explanation as Partial<Explanation> | undefined;
  const m = json.matrix as Partial<OverviewMatrix> | undefined;
  if (
    json.format !== OVERVIEW_FORMAT ||
    typeof json.head?.takenAt !== 'string' ||
    !isInt(json.head.rankCount, 1 << 24) ||
    typeof json.head.mpi?.library !== 'string' ||
    typeof ex?.verdict !== 'string' ||
    typeof ex.summary !== 'string' ||
    typeof ex.diagnosis !== 'object' ||
    !Array.isArray(ex.diagnosis?.groups) ||
    typeof json.readStatus?.kind !== 'string' ||
    typeof json.notRead !== 'string' ||
    typeof json.dllMissingFields !== 'string'
  )
    return bad('the header, explanation or read status is missing or of the wrong type');
  if (!isInt(m?.worldSize, 1 << 24) || !isInt(m.length, MAX_EDGES) || !Array.isArray(m.kindUnit))
    return bad("the matrix's size is missing or of the wrong type");
  const shape = json.firstLevel;
  let firstLevel: Level | null = null;
  if (shape !== null) {
    if (
      typeof shape !== 'object' ||
      !isInt(shape.dim, 1 << 24) ||
      !isInt(shape.blocks, FIRST_LEVEL_MAX_BLOCKS)
    )
      return bad('the first level is of the wrong type');
    if (levelStart + levelBytes(shape.dim, shape.blocks) !== firstEnd)
      return bad(
        `the first part is ${firstEnd} bytes, where its level takes ${levelBytes(shape.dim, shape.blocks)}`,
      );
    const l = decodeLevel(bytes, levelStart, shape, m.worldSize);
    if (typeof l === 'string') return bad(l);
    firstLevel = l;
  } else if (levelStart !== firstEnd) return bad('the first part has bytes after its JSON part but no level');
  return { ok: true, value: { ...json, matrix: m as OverviewMatrix, firstLevel } };
}

/**
 * The overview in `body`, checked: the first part (decodeOverviewFirst), the second part's
 * framing, and every column value the matrix uses as an index (ranks within the world or
 * ANY_PEER, communicators within the list, kinds within the three). The columns view `body`'s
 * buffer.
 */
export function decodeOverview(
  body: Uint8Array,
): { ok: true; value: SnapshotOverview } | { ok: false; error: string } {
  const bytes = aligned(body);
  const head = decodeOverviewFirst(bytes);
  if (!head.ok) return head;
  const first = head.value;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const firstEnd = view.getUint32(12, true);
  if (firstEnd + REST_HEADER > bytes.length) return bad('the second part is missing');
  const restLength = view.getUint32(firstEnd, true);
  if (firstEnd + REST_HEADER + restLength > bytes.length)
    return bad('the second JSON part runs past the end');
  const e = parseJson<RestJson>(bytes, firstEnd + REST_HEADER, restLength);
  if (typeof e === 'string') return bad(`the second JSON part ${e}`);
  if (
    (e.sizeWidth !== 4 && e.sizeWidth !== 8) ||
    !Array.isArray(e.comms) ||
    !e.comms.every((c) => typeof c?.key === 'string' && typeof c.label === 'string')
  )
    return bad('the edge table is missing or of the wrong type');
  const { worldSize, length: n, kindUnit } = first.matrix;
  const start = pad8(firstEnd + REST_HEADER + restLength);
  const need = start + n * (e.sizeWidth + COLUMN_BYTES);
  if (bytes.length !== need) return bad(`${bytes.length} bytes, where ${n} edges take ${need}`);
  let at = bytes.byteOffset + start;
  const buffer = bytes.buffer as ArrayBuffer;
  const size =
    e.sizeWidth === 8 ? new Float64Array(buffer, at, n) : Float64Array.from(new Uint32Array(buffer, at, n));
  at += n * e.sizeWidth;
  const cols = {} as Record<Column, ColumnArray>;
  for (const [name, width, make] of COLUMNS) {
    cols[name] = make(buffer, at, n);
    at += n * width;
  }
  const { src, dst, comm, kind } = cols as {
    src: Int32Array;
    dst: Int32Array;
    comm: Uint32Array;
    kind: Uint8Array;
  };
  const nComms = e.comms.length;
  for (let i = 0; i < n; i++) {
    const s = src[i] ?? 0;
    const d = dst[i] ?? 0;
    if (s < -1 || s >= worldSize || d < -1 || d >= worldSize)
      return bad(`edge ${i} names a rank outside the world`);
    if ((comm[i] ?? 0) >= nComms) return bad(`edge ${i} names communicator ${comm[i]} of ${nComms}`);
    if ((kind[i] ?? 0) > 2) return bad(`edge ${i} has queue kind ${kind[i]}`);
  }
  const edges: EdgeTable = {
    worldSize,
    length: n,
    kindUnit,
    comms: e.comms,
    src,
    dst,
    kind,
    size,
    tag: cols.tag as Int32Array,
    tagAny: cols.tagAny as Uint8Array,
    comm,
    peerUnknown: cols.peerUnknown as Uint8Array,
    // Filled from the whole snapshot when it arrives (fillEdgePositions).
    owner: new Int32Array(n),
    commPos: new Uint32Array(n),
    opPos: new Uint32Array(n),
  };
  return { ok: true, value: { ...first, edges, positions: false } };
}
