// The stored gzip spliced into the API's envelope (gzip-splice.ts): what comes out inflates to
// exactly head + stored JSON + tail, with a trailer every inflater checks (CRC-32 and length),
// and a gzip that was not written spliceable is refused rather than spliced wrong.
import { randomBytes } from 'node:crypto';
import { crc32, gunzipSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { crc32Combine, gzipSpliceable, isSpliceable, spliceGzip } from '../src/hub/gzip-splice.js';

const json = JSON.stringify({
  ranks: Array.from({ length: 5000 }, (_, i) => ({ rank: i, note: 'é'.repeat(i % 5) })),
});

describe('crc32Combine', () => {
  it('gives the CRC-32 of a concatenation from the parts', () => {
    for (const [a, b] of [
      [Buffer.from('hello '), Buffer.from('world')],
      [Buffer.alloc(0), Buffer.from('x')],
      [Buffer.from('x'), Buffer.alloc(0)],
      [randomBytes(1000), randomBytes(300_001)],
    ] as const)
      expect(crc32Combine(crc32(a), crc32(b), b.length)).toBe(crc32(Buffer.concat([a, b])));
  });
});

describe('spliceGzip', () => {
  it('wraps a spliceable gzip in a head and a tail without inflating it', async () => {
    const gz = await gzipSpliceable(json, 3);
    expect(isSpliceable(gz)).toBe(true);
    // Still an ordinary gzip of the JSON for every other reader.
    expect(gunzipSync(gz).toString('utf8')).toBe(json);
    const head = Buffer.from('{"meta":{"id":"s1"},"snapshot":');
    const tail = Buffer.from(',"expiresAt":"2026-11-27T00:00:00.000Z"}');
    const out = spliceGzip(head, gz, Buffer.byteLength(json), tail);
    expect(out).not.toBeNull();
    // gunzipSync checks the trailer's CRC-32 and length: a wrong one throws.
    const text = gunzipSync(out as Buffer).toString('utf8');
    expect(text).toBe(`${head}${json}${tail}`);
    expect(JSON.parse(text).meta.id).toBe('s1');
    // The stored blocks go out as they are: the result is the stored size plus a few bytes.
    expect((out as Buffer).length).toBeLessThan(gz.length + head.length + tail.length + 32);
  });

  it('deflates a large input in pieces side by side, still one gzip of it, still spliceable', async () => {
    // Over 2 x 8 MiB: two pieces, each ending at a sync-flush point.
    const big = Buffer.from(
      `[${Array.from({ length: 250_000 }, (_, i) => `{"rank":${i},"ok":true,"pad":"${'x'.repeat(i % 97)}"}`).join(',')}]`,
    );
    expect(big.length).toBeGreaterThan(2 * 8 * 1024 * 1024);
    const gz = await gzipSpliceable(big, 1);
    expect(gunzipSync(gz).equals(big)).toBe(true);
    const out = spliceGzip(Buffer.from('{"a":'), gz, big.length, Buffer.from('}'));
    expect(gunzipSync(out as Buffer).toString('utf8')).toBe(`{"a":${big}}`);
  });

  it('splits a head longer than one stored block (64 KiB) and takes an empty tail', async () => {
    const gz = await gzipSpliceable(json, 1);
    const head = Buffer.alloc(150_000, 'a');
    const out = spliceGzip(head, gz, Buffer.byteLength(json), Buffer.alloc(0));
    expect(gunzipSync(out as Buffer).toString('utf8')).toBe(`${head}${json}`);
  });

  it('refuses a gzip not written spliceable, or a length its trailer disagrees with', async () => {
    const head = Buffer.from('[');
    const tail = Buffer.from(']');
    expect(isSpliceable(gzipSync(json))).toBe(false);
    expect(spliceGzip(head, gzipSync(json), Buffer.byteLength(json), tail)).toBeNull();
    expect(spliceGzip(head, Buffer.from('not gzip at all, not gzip at all'), 5, tail)).toBeNull();
    const gz = await gzipSpliceable(json, 3);
    expect(spliceGzip(head, gz, Buffer.byteLength(json) + 1, tail)).toBeNull();
  });
});
