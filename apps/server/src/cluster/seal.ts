// The seal on every message between instances (docs/deploy/cluster.md, SECURITY.md). Any role
// that can connect to the database can LISTEN on a channel and pg_notify into it, so what
// crosses PostgreSQL is sealed with a key only the instances hold: AES-256-GCM, a fresh random
// nonce per message, the channel's name as associated data (a message sealed for one namespace
// is refused on another). Inside the sealed part: the sending instance's id and the time it was
// sealed, then the message. A receiver refuses what it cannot open, what is older or newer than
// the window, and a nonce it has seen (a replay of a captured message).
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';

/** What a sealed message starts with: the format, so a later one is refused rather than misread. */
const VERSION = 1;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const HEAD_BYTES = 1 + NONCE_BYTES;

/**
 * How far a message's time may be from the receiver's clock, ms. Wide enough for clocks kept by
 * NTP and for an event loop stalled merging a 100,000-rank snapshot (notifications wait unread
 * meanwhile); a replay within it is caught by the nonces.
 */
export const SEAL_WINDOW_MS = 60_000;

/** Nonces remembered at most; past this the oldest go, and nothing sealed before them is accepted. */
const MAX_SEEN = 200_000;

/** The fewest characters a cluster secret file may hold (48 random bytes in base64 are 64). */
export const MIN_CLUSTER_SECRET_CHARS = 32;

/**
 * The cluster secret an instance uses when no file gives one: derived from the agent secret
 * under its own label. Agents hold only their per-host tokens (HMACs of `mqd-agent:HOST` under
 * the same secret), from which this cannot be computed; when the shared agent token is allowed,
 * agents hold the agent secret itself and config.ts asks for a file instead.
 */
export function derivedClusterSecret(agentSecret: string): string {
  return createHmac('sha256', agentSecret).update('mqd-cluster-secret:v1', 'utf8').digest('base64url');
}

/** The AES key of a cluster secret (the file's text, or derivedClusterSecret's). */
function keyOf(secret: string): Buffer {
  return createHmac('sha256', secret).update('mqd-cluster-key:v1', 'utf8').digest();
}

/** Why a message was not opened; each is a counter of its own. */
export type SealRefusal = 'unsealed' | 'forged' | 'stale' | 'replayed';

export interface OpenedMessage {
  readonly sender: string;
  readonly sealedAt: number;
  readonly body: unknown;
}

export class Sealer {
  private readonly key: Buffer;
  /** Nonces seen within the window, in the order they came (latin1 strings: 12 bytes, 12 chars). */
  private readonly seen = new Map<string, number>();
  /** Nothing sealed at or before this (epoch ms) is accepted: its nonce may have been forgotten. */
  private floor = Number.NEGATIVE_INFINITY;

  constructor(
    secret: string,
    /** This instance's id: sealed into every message it sends. */
    readonly instance: string,
    private readonly clock: () => number = Date.now,
    private readonly maxSeen = MAX_SEEN,
  ) {
    this.key = keyOf(secret);
  }

  /** `body` (JSON values and byte arrays) sealed for `channel`. */
  seal(channel: string, body: unknown): Buffer {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce);
    cipher.setAAD(aadOf(channel));
    const sender = Buffer.from(this.instance, 'utf8');
    if (sender.length > 255) throw new Error('an instance id is at most 255 bytes');
    const head = Buffer.alloc(1 + sender.length + 8);
    head[0] = sender.length;
    sender.copy(head, 1);
    head.writeDoubleBE(this.clock(), 1 + sender.length);
    const out: Buffer[] = [Buffer.from([VERSION]), nonce, cipher.update(head)];
    for (const part of pack(body)) out.push(cipher.update(part));
    out.push(cipher.final(), cipher.getAuthTag());
    return Buffer.concat(out);
  }

  /** The message in `sealed` when it was sealed with this key for `channel`, fresh and not seen. */
  open(
    channel: string,
    sealed: Buffer,
  ): { ok: true; value: OpenedMessage } | { ok: false; why: SealRefusal } {
    if (sealed.length < HEAD_BYTES + TAG_BYTES + 10 || sealed[0] !== VERSION)
      return { ok: false, why: 'unsealed' };
    const nonce = sealed.subarray(1, HEAD_BYTES);
    let plain: Buffer;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, nonce);
      decipher.setAAD(aadOf(channel));
      decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
      plain = Buffer.concat([
        decipher.update(sealed.subarray(HEAD_BYTES, sealed.length - TAG_BYTES)),
        decipher.final(),
      ]);
    } catch (e) {
      // GCM's tag did not match: not sealed with this key, or changed on the way.
      if (e instanceof Error) return { ok: false, why: 'forged' };
      throw e;
    }
    const senderLength = plain[0] ?? 0;
    if (plain.length < 1 + senderLength + 8) return { ok: false, why: 'forged' };
    const sender = plain.toString('utf8', 1, 1 + senderLength);
    const sealedAt = plain.readDoubleBE(1 + senderLength);
    const now = this.clock();
    if (!(Math.abs(now - sealedAt) <= SEAL_WINDOW_MS) || sealedAt <= this.floor)
      return { ok: false, why: 'stale' };
    const id = nonce.toString('latin1');
    if (this.seen.has(id)) return { ok: false, why: 'replayed' };
    this.remember(id, sealedAt, now);
    const body = unpack(plain.subarray(1 + senderLength + 8));
    // The tag matched, so a body that does not unpack was sealed by a broken or other version.
    return body === UNREADABLE
      ? { ok: false, why: 'forged' }
      : { ok: true, value: { sender, sealedAt, body } };
  }

  /** How many nonces are remembered (tests: the cache stays bounded). */
  get remembered(): number {
    return this.seen.size;
  }

  private remember(id: string, sealedAt: number, now: number): void {
    this.seen.set(id, sealedAt);
    // Map order is arrival order: the front holds the oldest arrivals, expired first.
    for (const [k, at] of this.seen) {
      if (this.seen.size <= this.maxSeen && at >= now - SEAL_WINDOW_MS) break;
      this.seen.delete(k);
      if (at >= now - SEAL_WINDOW_MS) this.floor = Math.max(this.floor, at);
    }
  }
}

function aadOf(channel: string): Buffer {
  return Buffer.from(`mqd-cluster:v${VERSION}:${channel}`, 'utf8');
}

// --- the body: JSON with its byte arrays beside it, not inside it
//
// Rank chunks cross as the bytes their agent sent and folded chunks as deflated bytes
// (cluster-hub.ts): base64 in JSON would add a third to them. A byte array is replaced by a
// string "\0b<index>" and its bytes follow the JSON; a string of the message that starts with
// "\0" gets one more "\0" in front, so nothing the message holds can pass for a byte array.
//   u32 JSON length | JSON (UTF-8) | u32 count | count x u32 length | the byte arrays

const UNREADABLE = Symbol('unreadable');

/** The parts of `value`'s packed form, in order (written one after another). */
export function pack(value: unknown): Buffer[] {
  const bins: Buffer[] = [];
  const text = Buffer.from(JSON.stringify(swapOut(value, bins)) ?? 'null', 'utf8');
  const head = Buffer.alloc(4 + text.length + 4 + 4 * bins.length);
  head.writeUInt32BE(text.length, 0);
  text.copy(head, 4);
  head.writeUInt32BE(bins.length, 4 + text.length);
  bins.forEach((b, i) => {
    head.writeUInt32BE(b.length, 8 + text.length + 4 * i);
  });
  return [head, ...bins];
}

/**
 * `v` with its byte arrays moved to `bins` (placeholders in their place) and its strings that
 * start with "\0" escaped. A walk of our own, not a JSON.stringify replacer: stringify calls a
 * Buffer's toJSON before the replacer sees it, building an array of every byte (50 ms for a
 * batch of folded chunks).
 */
function swapOut(v: unknown, bins: Buffer[]): unknown {
  if (typeof v === 'string') return v.charCodeAt(0) === 0 ? `\u0000${v}` : v;
  if (typeof v !== 'object' || v === null) return v;
  if (v instanceof ArrayBuffer || ArrayBuffer.isView(v)) {
    bins.push(v instanceof ArrayBuffer ? Buffer.from(v) : Buffer.from(v.buffer, v.byteOffset, v.byteLength));
    return `\u0000b${bins.length - 1}`;
  }
  if (Array.isArray(v)) return v.map((x) => swapOut(x, bins));
  const o = v as Record<string, unknown> & { toJSON?: unknown };
  if (typeof o.toJSON === 'function') return swapOut((o.toJSON as () => unknown)(), bins);
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(o)) out[k] = swapOut(o[k], bins);
  return out;
}

/** The value of a packed form; its byte arrays are Buffers over `bytes` (no copy). */
export function unpack(bytes: Buffer): unknown {
  if (bytes.length < 8) return UNREADABLE;
  const textLength = bytes.readUInt32BE(0);
  if (8 + textLength > bytes.length) return UNREADABLE;
  const count = bytes.readUInt32BE(4 + textLength);
  let at = 8 + textLength + 4 * count;
  if (at > bytes.length) return UNREADABLE;
  const bins: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const n = bytes.readUInt32BE(8 + textLength + 4 * i);
    if (at + n > bytes.length) return UNREADABLE;
    bins.push(bytes.subarray(at, at + n));
    at += n;
  }
  try {
    return JSON.parse(bytes.toString('utf8', 4, 4 + textLength), (_key, v: unknown) => {
      if (typeof v !== 'string' || v.charCodeAt(0) !== 0) return v;
      if (v.charCodeAt(1) === 0) return v.slice(1);
      const bin = v[1] === 'b' ? bins[Number(v.slice(2))] : undefined;
      if (bin === undefined) throw new SyntaxError('a byte array that the message does not hold');
      return bin;
    });
  } catch (e) {
    if (e instanceof SyntaxError) return UNREADABLE;
    throw e;
  }
}
