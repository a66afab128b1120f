// A snapshot's overview: what the dashboard draws first (the header, the diagnosis, the message
// matrix), computed once per stored snapshot on the server and sent in one compact body, so a
// 100,000-rank job's verdict and matrix are on screen before its 125 MB of ranks have arrived
// (issue 32). The explanation is the model's own (explainSnapshot), the matrix's table the model's
// own (buildEdges): the page that later holds the whole snapshot takes both from here instead of
// computing them again, so the two can never disagree.
//
// The body: "MQDO", the format (u32), the JSON part's length (u32), the JSON part (UTF-8), zero
// padding to a multiple of 8, then the edge table's columns, each `length` long: `size` (32-bit
// when every length is an integer below 2^32, `sizeWidth` 4, else 64-bit floats), then the
// columns of COLUMNS (so every column starts aligned). Little-endian, as typed arrays are on
// every machine the dashboard runs on. The position columns (owner, commPos, opPos) are not sent:
// they index the whole snapshot, and fillEdgePositions fills them from it when it arrives
// (`positions` false until then). 23 bytes an edge, where the table holds 39. A change of
// format comes with a migration that empties the stored overviews (apps/server/src/store-schema.ts).
import { explainSnapshot } from '../analysis/explain.js';
import type { Explanation } from '../analysis/explain-types.js';
import { type SnapshotReadStatus, snapshotReadStatus } from '../analysis/history.js';
import { compressRanks } from '../analysis/ranges.js';
import type { JobSnapshot } from '../snapshot-spec.js';
import { buildEdges } from './build-edges.js';
import type { CommSummary, EdgeTable, KindUnit } from './edge-table.js';

export const OVERVIEW_FORMAT = 2;
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

export interface SnapshotOverview {
  readonly format: typeof OVERVIEW_FORMAT;
  readonly head: OverviewHead;
  /** explainSnapshot(snapshot), with no earlier snapshots. */
  readonly explanation: Explanation;
  readonly readStatus: SnapshotReadStatus;
  /** Ranks not read, as ranges ("" when all were). */
  readonly notRead: string;
  /** Ranks whose DLL looked up fields the library lacks (RankSnapshot.dll.missingFields), as ranges. */
  readonly dllMissingFields: string;
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
  return {
    format: OVERVIEW_FORMAT,
    head: overviewHead(snapshot),
    explanation: explainSnapshot(snapshot),
    readStatus: snapshotReadStatus(snapshot),
    notRead: compressRanks(notRead),
    dllMissingFields: compressRanks(missing),
    edges: buildEdges(snapshot),
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
const HEADER = 12;
/** Bytes an edge takes after `size`. */
const COLUMN_BYTES = COLUMNS.reduce((s, [, w]) => s + w, 0);
/** More edges than this is not a snapshot this model can have made (2^28 operations). */
const MAX_EDGES = 1 << 28;

/** The JSON part: everything but the columns. */
interface OverviewJson extends Omit<SnapshotOverview, 'edges' | 'positions'> {
  readonly edges: {
    readonly worldSize: number;
    readonly length: number;
    /** Bytes of one `size` value: 4 (unsigned integers) or 8 (floats). */
    readonly sizeWidth: 4 | 8;
    readonly kindUnit: readonly KindUnit[];
    readonly comms: readonly CommSummary[];
  };
}

const pad8 = (n: number) => (n + 7) & ~7;

// TextEncoder/TextDecoder are globals in Node and every browser, but the model compiles without
// the DOM's or Node's types: their shapes, as used here.
const codecs = globalThis as unknown as {
  TextEncoder: new () => { encode(s: string): Uint8Array };
  TextDecoder: new (label: string, o: { fatal: boolean }) => { decode(b: Uint8Array): string };
};

/** The overview as one body (see the top of this file). */
export function encodeOverview(o: SnapshotOverview): Uint8Array {
  const e = o.edges;
  let narrow = true;
  for (let i = 0; i < e.length && narrow; i++) {
    const v = e.size[i] ?? 0;
    narrow = Number.isInteger(v) && v >= 0 && v < 2 ** 32;
  }
  const sizeWidth = narrow ? 4 : 8;
  const { positions: _, ...rest } = o;
  const json: OverviewJson = {
    ...rest,
    edges: { worldSize: e.worldSize, length: e.length, sizeWidth, kindUnit: e.kindUnit, comms: e.comms },
  };
  const text = new codecs.TextEncoder().encode(JSON.stringify(json));
  const start = pad8(HEADER + text.length);
  const out = new Uint8Array(start + e.length * (sizeWidth + COLUMN_BYTES));
  out.set(MAGIC, 0);
  const view = new DataView(out.buffer);
  view.setUint32(4, OVERVIEW_FORMAT, true);
  view.setUint32(8, text.length, true);
  out.set(text, HEADER);
  let at = start;
  const size = narrow ? Uint32Array.from(e.size) : e.size;
  out.set(new Uint8Array(size.buffer, size.byteOffset, e.length * sizeWidth), at);
  at += e.length * sizeWidth;
  for (const [name, width] of COLUMNS) {
    const col = e[name];
    out.set(new Uint8Array(col.buffer, col.byteOffset, e.length * width), at);
    at += e.length * width;
  }
  return out;
}

/** Why a body is not an overview. */
function bad(why: string): { ok: false; error: string } {
  return { ok: false, error: `not a snapshot overview of format ${OVERVIEW_FORMAT}: ${why}` };
}

const isInt = (v: unknown, max: number): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= max;

/**
 * The overview in `body`, checked: its framing, the JSON part's shape as far as the views rely on
 * it, and every column value the matrix uses as an index (ranks within the world or ANY_PEER,
 * communicators within the list, kinds within the three). The columns view `body`'s buffer.
 */
export function decodeOverview(
  body: Uint8Array,
): { ok: true; value: SnapshotOverview } | { ok: false; error: string } {
  if (body.length < HEADER || MAGIC.some((b, i) => body[i] !== b)) return bad('no MQDO header');
  // Typed arrays need their element alignment: a body that does not start on 8 is copied.
  const bytes = body.byteOffset % 8 === 0 ? body : body.slice();
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const format = view.getUint32(4, true);
  if (format !== OVERVIEW_FORMAT) return bad(`format ${format}`);
  const jsonLength = view.getUint32(8, true);
  if (HEADER + jsonLength > bytes.length) return bad('the JSON part runs past the end');
  let json: OverviewJson;
  try {
    json = JSON.parse(
      new codecs.TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(HEADER, HEADER + jsonLength)),
    );
  } catch (e) {
    return bad(`the JSON part does not parse (${e instanceof Error ? e.message : String(e)})`);
  }
  if (json === null || typeof json !== 'object') return bad('the JSON part is not an object');
  const ex = json.explanation as Partial<Explanation> | undefined;
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
  const e = json.edges;
  if (
    !isInt(e?.length, MAX_EDGES) ||
    !isInt(e.worldSize, 1 << 24) ||
    (e.sizeWidth !== 4 && e.sizeWidth !== 8) ||
    !Array.isArray(e.comms) ||
    !Array.isArray(e.kindUnit) ||
    !e.comms.every((c) => typeof c?.key === 'string' && typeof c.label === 'string')
  )
    return bad('the edge table is missing or of the wrong type');
  const n = e.length;
  const start = pad8(HEADER + jsonLength);
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
    if (s < -1 || s >= e.worldSize || d < -1 || d >= e.worldSize)
      return bad(`edge ${i} names a rank outside the world`);
    if ((comm[i] ?? 0) >= nComms) return bad(`edge ${i} names communicator ${comm[i]} of ${nComms}`);
    if ((kind[i] ?? 0) > 2) return bad(`edge ${i} has queue kind ${kind[i]}`);
  }
  const edges: EdgeTable = {
    worldSize: e.worldSize,
    length: n,
    kindUnit: e.kindUnit,
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
  const { edges: _, ...rest } = json;
  return { ok: true, value: { ...rest, edges, positions: false } };
}
