// Stored snapshots go out compressed as they are stored, inside the API's envelope
// (`{"meta":...,"snapshot":<stored>}`), without inflating and deflating them again (a
// 100,000-rank snapshot is 125 MB of JSON and 9 MB of gzip; inflating it, building the envelope
// and sending it uncompressed was most of the dashboard's wait).
//
// How: a snapshot is stored as a gzip whose deflate data ends at a sync-flush point (an empty
// stored block, `00 00 ff ff`) followed by an empty final block (`03 00`) and the trailer. Its
// deflate data without those last two bytes is a byte-aligned run of non-final blocks, so a
// stream can be built around it: the envelope's head as a stored (uncompressed) block, the
// snapshot's blocks as they are, the envelope's tail as a final stored block, and a trailer whose
// CRC-32 is combined from the three parts' (RFC 1951 section 3.2.4, RFC 1952 section 2.3). The
// result is one ordinary gzip member, which every HTTP client inflates (browsers read only the
// first member of a multi-member gzip, so concatenating members would not do).
//
// A stored gzip that does not end that way (an older snapshot, or one written elsewhere) is not
// spliceable: spliceGzip returns null and the caller inflates it as before.
import { constants, crc32, deflateRaw, inflateRawSync, type ZlibOptions } from 'node:zlib';

const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]);
/** The empty stored block of a sync flush, then an empty final fixed-Huffman block. */
const SPLICE_END = Buffer.from([0x00, 0x00, 0xff, 0xff, 0x03, 0x00]);
/** An empty final block with fixed Huffman codes: BFINAL 1, BTYPE 01, end-of-block, padding. */
const FINAL_EMPTY = Buffer.from([0x03, 0x00]);
/** An empty non-final stored block (a sync-flush point): header byte, LEN 0, NLEN 0xffff. */
const EMPTY_STORED = Buffer.from([0x00, 0x00, 0x00, 0xff, 0xff]);
const TRAILER = 8;
const MAX_STORED = 0xffff;

/** Input bytes per piece compressed on its own (below twice this: one piece). */
const PIECE_BYTES = 8 * 1024 * 1024;
/** At most this many pieces at once (libuv's thread pool has four threads by default). */
const MAX_PIECES = 4;

/** Raw deflate of `data` in the thread pool (a part ends at a sync-flush point; folds end their stream). */
export const deflateRawAsync = (data: Buffer, options: ZlibOptions): Promise<Buffer> =>
  new Promise<Buffer>((resolve, reject) =>
    deflateRaw(data, options, (e, out) => (e ? reject(e) : resolve(out))),
  );

/** Deflate data ending at a sync-flush point, with the CRC-32 and length of what it inflates to. */
export interface DeflatedPart {
  readonly deflated: Buffer;
  readonly crc: number;
  readonly length: number;
}

/** A piece of a gzip being assembled (joinGzip): bytes stored as they are, or deflated ones. */
export type GzipPart = { readonly raw: Buffer } | DeflatedPart;

/** `data` deflated on its own in the thread pool, ending at a sync-flush point. */
export async function deflatePart(data: Buffer, level: number): Promise<DeflatedPart> {
  const deflated = await deflateRawAsync(data, { level, finishFlush: constants.Z_SYNC_FLUSH });
  return { deflated, crc: crc32(data) >>> 0, length: data.length };
}

/** What a part inflates to (it ends at a sync-flush point, not at a final block). */
export function inflatePart(part: DeflatedPart): Buffer {
  return inflateRawSync(part.deflated, { finishFlush: constants.Z_SYNC_FLUSH });
}

/**
 * One gzip member inflating to the parts in order, spliceable (it ends at a sync-flush point
 * and an empty final block). Raw parts go in as stored blocks; deflated ones as they are, since
 * each ends byte-aligned in a non-final block; the CRC-32 is combined from the parts'.
 */
export function joinGzip(parts: readonly GzipPart[]): Buffer {
  const out: Buffer[] = [GZIP_HEADER];
  let crc = 0;
  let length = 0;
  for (const p of parts) {
    if ('raw' in p) {
      if (p.raw.length === 0) continue;
      out.push(...storedBlocks(p.raw, false));
      crc = crc32(p.raw, crc) >>> 0;
      length += p.raw.length;
    } else {
      out.push(p.deflated);
      crc = crc32Combine(crc, p.crc, p.length);
      length += p.length;
    }
  }
  const trailer = Buffer.alloc(TRAILER);
  trailer.writeUInt32LE(crc >>> 0, 0);
  trailer.writeUInt32LE(length % 2 ** 32, 4);
  return Buffer.concat([...out, EMPTY_STORED, FINAL_EMPTY, trailer]);
}

/**
 * gzip of `data` that spliceGzip can wrap (see the file comment); to every other reader an
 * ordinary gzip. A large input is cut into pieces deflated side by side in the thread pool, each
 * ending at a sync-flush point, so the pieces' deflate data concatenate into one stream (as pigz
 * does, without carrying the dictionary across a cut: a few hundred bytes per piece).
 */
export async function gzipSpliceable(data: string | Buffer, level: number): Promise<Buffer> {
  const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  const pieces = Math.max(1, Math.min(MAX_PIECES, Math.floor(buf.length / PIECE_BYTES)));
  const size = Math.ceil(buf.length / pieces);
  const cuts: Buffer[] = [];
  for (let at = 0; at < buf.length || cuts.length === 0; at += size) cuts.push(buf.subarray(at, at + size));
  return joinGzip(await Promise.all(cuts.map((c) => deflatePart(c, level))));
}

/** Whether `gz` is a gzip as gzipSpliceable writes it: plain header, splice point before the end. */
export function isSpliceable(gz: Buffer): boolean {
  if (gz.length < GZIP_HEADER.length + SPLICE_END.length + TRAILER) return false;
  // ID1 ID2, deflate, no optional header fields: the deflate data starts at byte 10.
  if (gz[0] !== 0x1f || gz[1] !== 0x8b || gz[2] !== 8 || gz[3] !== 0) return false;
  const end = gz.length - TRAILER;
  return gz.subarray(end - SPLICE_END.length, end).equals(SPLICE_END);
}

/** Deflate stored blocks holding `data`, the last one final when `final`. */
function storedBlocks(data: Buffer, final: boolean): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  do {
    const len = Math.min(MAX_STORED, data.length - at);
    const last = at + len >= data.length;
    const head = Buffer.alloc(5);
    // BFINAL in bit 0, BTYPE 00 (stored) in bits 1-2; the rest of the byte is padding.
    head[0] = final && last ? 1 : 0;
    head.writeUInt16LE(len, 1);
    head.writeUInt16LE(~len & 0xffff, 3);
    out.push(head, data.subarray(at, at + len));
    at += len;
  } while (at < data.length);
  return out;
}

// CRC-32 of a concatenation from the CRCs of its parts. Appending a zero bit to a message is a
// linear map on its CRC register over GF(2); appending n zero bytes is that map to the power 8n,
// computed by squaring. crc(A || B) = zeros(|B|)(crc(A)) xor crc(B): the pre- and post-inversion
// of CRC-32 cancel in that sum.

/** A 32x32 matrix over GF(2) as 32 columns: column i is the image of bit i. */
type Gf2Matrix = Uint32Array;

function apply(m: Gf2Matrix, v: number): number {
  let out = 0;
  for (let i = 0; v !== 0; i++, v >>>= 1) if (v & 1) out ^= m[i] as number;
  return out >>> 0;
}

function square(m: Gf2Matrix): Gf2Matrix {
  const out = new Uint32Array(32);
  for (let i = 0; i < 32; i++) out[i] = apply(m, m[i] as number);
  return out;
}

/** The map of appending one zero bit to the (reflected) CRC-32 register. */
function oneZeroBit(): Gf2Matrix {
  const m = new Uint32Array(32);
  // Bit 0 shifts out and, when set, brings in the polynomial; every other bit moves down one.
  m[0] = 0xedb88320;
  for (let i = 1; i < 32; i++) m[i] = (1 << (i - 1)) >>> 0;
  return m;
}

/** crc32(A || B) from crc32(A), crc32(B) and the byte length of B. */
export function crc32Combine(crcA: number, crcB: number, lengthB: number): number {
  let op = square(square(square(oneZeroBit()))); // one zero byte
  let v = crcA >>> 0;
  for (let n = lengthB; n > 0; n = Math.floor(n / 2)) {
    if (n % 2 === 1) v = apply(op, v);
    op = square(op);
  }
  return (v ^ crcB) >>> 0;
}

/**
 * One gzip member inflating to `head` + the data of `stored` + `tail`, or null when `stored` is
 * not spliceable or its trailer does not agree with `storedLength` (its inflated byte length).
 */
export function spliceGzip(head: Buffer, stored: Buffer, storedLength: number, tail: Buffer): Buffer | null {
  if (!isSpliceable(stored)) return null;
  const end = stored.length - TRAILER;
  if (stored.readUInt32LE(end + 4) !== storedLength % 2 ** 32) return null;
  return joinGzip([
    { raw: head },
    // The snapshot's blocks up to and including its sync flush's empty stored block.
    {
      deflated: stored.subarray(GZIP_HEADER.length, end - 2),
      crc: stored.readUInt32LE(end),
      length: storedLength,
    },
    { raw: tail },
  ]);
}
