// The UCX queue reader on a synthetic worker (ucx/read.ts readUcxQueues, ucx/tag.ts, ucx/merge.ts):
// the decisions on bytes laid out as UCX lays them (with a layout of our own numbers, since the
// real one comes from libucp's DWARF), every limit and failure path. The real jobs under
// `--mca pml ucx` are ucx.mpi.test.ts.
import { type Communicator, type MpiCall, validateSnapshot } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import type { UcxLayout } from '../src/ucx/layout.js';
import { mergeUcx } from '../src/ucx/merge.js';
import { MAX_UCX_ENTRIES, readUcxQueues, UCX_HASH_BUCKETS, type UcxRead } from '../src/ucx/read.js';
import { decodeRecvTag, decodeSendTag, encodeRecvTag, encodeSendTag, UCX_MAX_RANKS } from '../src/ucx/tag.js';

describe("Open MPI's UCX tag", () => {
  it('decodes communicator, source and tag, negative tags and wildcards included', () => {
    expect(decodeSendTag(encodeSendTag(3, 17, 42))).toEqual({ comm: '3', source: 17, tag: 42 });
    expect(decodeSendTag(encodeSendTag(0, UCX_MAX_RANKS - 1, -16))).toEqual({
      comm: '0',
      source: UCX_MAX_RANKS - 1,
      tag: -16,
    });
    // The layout of pml_ucx_request.h: tag in bits 40-63, source 20-39, communicator 0-19.
    expect(encodeSendTag(5, 2, 7)).toBe((7n << 40n) | (2n << 20n) | 5n);
    const any = encodeRecvTag(4, null, null);
    expect(any.mask).toBe(0x80000000000fffffn);
    expect(decodeRecvTag(any.tag, any.mask)).toEqual({ comm: '4', source: null, tag: null });
    const r = encodeRecvTag(4, 1, 99);
    expect(decodeRecvTag(r.tag, r.mask)).toEqual({ comm: '4', source: 1, tag: 99 });
    const anyTag = encodeRecvTag(2, 3, null);
    expect(decodeRecvTag(anyTag.tag, anyTag.mask)).toEqual({ comm: '2', source: 3, tag: null });
  });
});

// ---- a synthetic worker ------------------------------------------------------------------

const L: UcxLayout = {
  wildcard: 0x100,
  hash: 0x120,
  swAllCount: 0x128,
  unexpectedAll: 0x130,
  offloadIface: 0x140,
  offloadHashSize: 0x148,
  queueHead: 0,
  queueTail: 8,
  queueSize: 24,
  reqQueue: 0x40,
  reqBuffer: 0x48,
  reqLength: 0x50,
  reqTag: 0x60,
  reqMask: 0x68,
  reqSn: 0x70,
  listNext: 8,
  listSize: 16,
  rdescTagList: 0,
  rdescLength: 32,
  rdescPayload: 36,
  rdescFlags: 40,
  rdescSize: 48,
  eagerFirstTotal: 8,
  rtsSize: 32,
};

/** A little-endian heap the walk reads, with an allocator. */
class Heap {
  readonly base = 0x10000n;
  private readonly buf = Buffer.alloc(1 << 20);
  private top = 0x1000;
  unreadable = new Set<bigint>();
  alloc(n: number): bigint {
    const at = this.base + BigInt(this.top);
    this.top += (n + 15) & ~15;
    return at;
  }
  u64w(a: bigint, v: bigint) {
    this.buf.writeBigUInt64LE(v, Number(a - this.base));
  }
  u32w(a: bigint, v: number) {
    this.buf.writeUInt32LE(v, Number(a - this.base));
  }
  u16w(a: bigint, v: number) {
    this.buf.writeUInt16LE(v, Number(a - this.base));
  }
  bytes = (a: bigint, n: number): Uint8Array | null => {
    if (this.unreadable.has(a)) return null;
    const o = Number(a - this.base);
    if (o < 0 || o + n > this.buf.length) return null;
    return new Uint8Array(this.buf.subarray(o, o + n));
  };
  readInto = (a: bigint, into: Uint8Array): boolean => {
    const b = this.bytes(a, into.length);
    if (b) into.set(b);
    return b !== null;
  };
  u64 = (a: bigint): bigint | null => {
    const b = this.bytes(a, 8);
    return b ? Buffer.from(b).readBigUInt64LE(0) : null;
  };
  i32 = (a: bigint): number | null => {
    const b = this.bytes(a, 4);
    return b ? Buffer.from(b).readInt32LE(0) : null;
  };
}

/** A worker with empty queues (each queue's tail at its head, the list pointing at itself). */
function worker(h: Heap) {
  const w = h.alloc(0x200);
  const hash = h.alloc(UCX_HASH_BUCKETS * L.queueSize);
  const emptyQueue = (q: bigint) => {
    h.u64w(q + BigInt(L.queueHead), 0n);
    h.u64w(q + BigInt(L.queueTail), q + BigInt(L.queueHead));
  };
  emptyQueue(w + BigInt(L.wildcard));
  for (let i = 0; i < UCX_HASH_BUCKETS; i++) emptyQueue(hash + BigInt(i * L.queueSize));
  h.u64w(w + BigInt(L.hash), hash);
  const all = w + BigInt(L.unexpectedAll);
  h.u64w(all, all);
  h.u64w(all + BigInt(L.listNext), all);
  let count = 0;
  const queueOf = (bucket: number | 'wild') =>
    bucket === 'wild' ? w + BigInt(L.wildcard) : hash + BigInt(bucket * L.queueSize);
  return {
    w,
    /** Appends a posted receive to a bucket (or the wildcard queue) with sequence number sn. */
    post(
      bucket: number | 'wild',
      sn: number,
      comm: number,
      src: number | null,
      tag: number | null,
      length: number,
    ) {
      const q = queueOf(bucket);
      const req = h.alloc(0x100);
      const elem = req + BigInt(L.reqQueue);
      const t = encodeRecvTag(comm, src, tag);
      h.u64w(req + BigInt(L.reqTag), t.tag);
      h.u64w(req + BigInt(L.reqMask), t.mask);
      h.u64w(req + BigInt(L.reqSn), BigInt(sn));
      h.u64w(req + BigInt(L.reqLength), BigInt(length));
      h.u64w(req + BigInt(L.reqBuffer), 0xb000n + BigInt(sn));
      const tail = h.u64(q + BigInt(L.queueTail)) ?? 0n;
      h.u64w(tail, elem); // the old last element's next (or the head field) points at it
      h.u64w(elem, 0xdeadn); // a stale next, as UCX leaves it
      h.u64w(q + BigInt(L.queueTail), elem);
      h.u32w(w + BigInt(L.swAllCount), ++count);
      return req;
    },
    /** Appends an unexpected message to the `all` list. */
    arrive(
      flags: number,
      tag: bigint,
      sizes: { length?: number; payload?: number; total?: bigint; rts?: bigint },
    ) {
      const d = h.alloc(L.rdescSize + 64);
      const link = d + BigInt(L.rdescTagList + L.listSize);
      const prev = h.u64(all) ?? all;
      h.u64w(link, prev);
      h.u64w(link + BigInt(L.listNext), all);
      h.u64w(prev + BigInt(L.listNext), link);
      h.u64w(all, link);
      h.u16w(d + BigInt(L.rdescFlags), flags);
      h.u32w(d + BigInt(L.rdescLength), sizes.length ?? 0);
      h.u32w(d + BigInt(L.rdescPayload), sizes.payload ?? 0);
      const hdr = d + BigInt(L.rdescSize);
      h.u64w(hdr, tag);
      if (sizes.total !== undefined) h.u64w(hdr + BigInt(L.eagerFirstTotal), sizes.total);
      if (sizes.rts !== undefined) h.u64w(hdr + BigInt(L.rtsSize), sizes.rts);
      return d;
    },
  };
}

const EAGER = 2;
const EAGER_ONLY = 4;
const EAGER_SYNC = 8;
const RNDV = 64;

describe('readUcxQueues', () => {
  it("gives posted receives in UCX's matching order across the hash buckets and the wildcard queue", () => {
    const h = new Heap();
    const k = worker(h);
    k.post(17, 3, 0, 1, 99, 16);
    k.post('wild', 1, 2, null, 5, 4);
    k.post(17, 0, 0, 2, 7, 8);
    k.post(900, 2, 1, 0, null, 12);
    const q = readUcxQueues(h, L, k.w, 42);
    if ('error' in q) throw new Error(q.error);
    expect(q.receives.map((e) => [e.comm, e.source, e.tag, e.length])).toEqual([
      ['0', 2, 7, 8],
      ['2', null, 5, 4],
      ['1', 0, null, 12],
      ['0', 1, 99, 16],
    ]);
    expect(q.receives[0]?.detail).toMatch(/^UCX request 0x[0-9a-f]+$/);
    expect(q.limits).toEqual([]);
  });

  it('gives unexpected messages in arrival order with the length each protocol holds', () => {
    const h = new Heap();
    const k = worker(h);
    k.arrive(EAGER | EAGER_ONLY, encodeSendTag(0, 1, 7), { length: 24, payload: 8 });
    k.arrive(EAGER | EAGER_ONLY | EAGER_SYNC, encodeSendTag(0, 3, 42), { length: 28, payload: 24 });
    k.arrive(RNDV, encodeSendTag(0, 2, 3), { rts: 1048576n });
    k.arrive(EAGER, encodeSendTag(1, 0, 9), { total: 70000n });
    const q = readUcxQueues(h, L, k.w, 42);
    if ('error' in q) throw new Error(q.error);
    expect(q.unexpected.map((e) => [e.comm, e.source, e.tag, e.length, e.detail])).toEqual([
      ['0', 1, 7, 16, 'UCX eager'],
      ['0', 3, 42, 4, 'UCX eager, synchronous'],
      ['0', 2, 3, 1048576, 'UCX rendezvous'],
      ['1', 0, 9, 70000, 'UCX eager'],
    ]);
  });

  it('says when tag-matching offload is on, and when the count disagrees with what was found', () => {
    const h = new Heap();
    const k = worker(h);
    k.post(3, 0, 0, 1, 1, 4);
    h.u32w(k.w + BigInt(L.swAllCount), 2);
    let q = readUcxQueues(h, L, k.w, 42);
    if ('error' in q) throw new Error(q.error);
    expect(q.limits.map((l) => l.code)).toEqual(['MQD_E_UCX_READ']);
    expect(q.limits[0]?.message).toContain('1 posted receives were found, UCX counts 2');
    h.u64w(k.w + BigInt(L.offloadIface), 0x7000n);
    q = readUcxQueues(h, L, k.w, 42);
    if ('error' in q) throw new Error(q.error);
    expect(q.limits.map((l) => l.code)).toEqual(['MQD_E_UCX_TAG_OFFLOAD']);
    expect(q.receives).toHaveLength(1);
  });

  it('never follows a broken or cyclic list past its cap, and says where it broke', () => {
    const h = new Heap();
    const k = worker(h);
    const req = k.post(5, 0, 0, 1, 1, 4);
    k.post(5, 1, 0, 1, 2, 4);
    // The first element's next now points at itself: a cycle that never reaches the tail.
    const elem = req + BigInt(L.reqQueue);
    h.u64w(elem, elem);
    const q = readUcxQueues(h, L, k.w, 42, 100);
    expect('error' in q && q.error).toMatch(/^pid 42: more than 100 posted receives/);
    h.u64w(elem, 0n);
    const n = readUcxQueues(h, L, k.w, 42);
    expect('error' in n && n.error).toMatch(/ends in NULL before its tail/);
    h.unreadable.add(req);
    const u = readUcxQueues(h, L, k.w, 42);
    expect('error' in u && u.error).toMatch(/the UCX request at 0x[0-9a-f]+ is unreadable/);
    expect(MAX_UCX_ENTRIES).toBeGreaterThan(100_000);
  });
});

// ---- merging into the DLL's communicators -------------------------------------------------

const comm = (id: string, name: string, size: number, group: number[] | null): Communicator => ({
  id,
  name,
  size,
  localRank: 0,
  ...(name === 'MPI_COMM_WORLD' ? { world: true } : {}),
  group,
  sends: [],
  receives: [],
  unexpected: null,
  unavailable: { unexpected: { code: 'MQD_E_QUEUE_UNSUPPORTED', message: 'MQD_E_QUEUE_UNSUPPORTED: x' } },
});

const read = (over: Partial<Extract<UcxRead, { kind: 'ucx' }>>): UcxRead => ({
  kind: 'ucx',
  library: '/opt/ucx/lib/libucp.so.0.0.0',
  receives: [],
  unexpected: [],
  limits: [],
  ...over,
});

const entry = (c: string, source: number | null, tag: number | null, length: number | null) => ({
  comm: c,
  source,
  tag,
  length,
  buffer: 0x1000n,
  detail: 'UCX eager',
});

describe('mergeUcx', () => {
  it("puts UCX's entries on their communicators with world ranks, leaves out Open MPI's internal tags", () => {
    const comms = [comm('0', 'MPI_COMM_WORLD', 4, null), comm('3', 'odds', 2, [1, 3])];
    const m = mergeUcx(
      comms,
      read({
        receives: [entry('3', 1, 5, 4), entry('0', null, null, 8), entry('0', 2, -16, 0)],
        unexpected: [entry('0', 3, 42, 4), entry('0', 1, -12, 0)],
      }),
      null,
    );
    const [world, odds] = m.communicators;
    expect(world?.receives?.map((o) => [o.peer, o.tag, o.length])).toEqual([
      [{ local: null, global: null }, null, 8],
    ]);
    expect(world?.unexpected?.map((o) => [o.peer, o.tag, o.status])).toEqual([
      [{ local: 3, global: 3 }, 42, 'pending'],
    ]);
    expect(odds?.receives?.map((o) => o.peer)).toEqual([{ local: 1, global: 3 }]);
    // No blocking send: every send queue is unknown, with the reason, never an empty list.
    expect(world?.sends).toBeNull();
    expect(world?.unavailable.sends?.code).toBe('MQD_E_UCX_SENDS');
    expect(world?.unavailable.unexpected).toBeUndefined();
    expect(m.queueSource).toMatchObject({ source: 'ucx', library: '/opt/ucx/lib/libucp.so.0.0.0' });
    expect(m.queueSource.limits.map((l) => l.code)).toEqual(['MQD_E_UCX_SENDS']);
  });

  it("shows the blocking send from the MPI call's arguments on its communicator", () => {
    const call: MpiCall = {
      function: 'MPI_Ssend',
      tid: 10,
      args: { peer: { local: 1, global: 1 }, tag: 42, communicator: '0', count: 1, typeSize: 4 },
    };
    const m = mergeUcx(
      [comm('0', 'MPI_COMM_WORLD', 4, null), comm('1', 'MPI_COMM_SELF', 1, [0])],
      read({}),
      call,
    );
    expect(m.communicators[0]?.sends).toEqual([
      {
        status: 'pending',
        peer: { local: 1, global: 1 },
        tag: 42,
        length: 4,
        actual: null,
        extraText: ["the MPI_Ssend call's arguments"],
        buffer: '0x0',
        systemBuffer: false,
      },
    ]);
    expect(m.communicators[0]?.unavailable.sends).toBeUndefined();
    expect(m.communicators[1]?.sends).toBeNull();
  });

  it('never shows a rank that does not fit the tag, nor entries of a communicator the DLL does not list', () => {
    const big = comm('0', 'MPI_COMM_WORLD', UCX_MAX_RANKS, null);
    const m = mergeUcx([big], read({ receives: [entry('0', 5, 1, 4), entry('9', 1, 1, 4)] }), null);
    expect(m.communicators[0]?.receives).toBeNull();
    expect(m.communicators[0]?.unavailable.receives?.code).toBe('MQD_E_UCX_RANK_RANGE');
    expect(m.queueSource.limits.map((l) => l.code)).toEqual([
      'MQD_E_UCX_RANK_RANGE',
      'MQD_E_UCX_READ',
      'MQD_E_UCX_SENDS',
    ]);
    expect(m.queueSource.limits[1]?.message).toContain(
      '1 UCX queue entries name communicators the MPI library does not list (ids 9)',
    );
  });

  it('leaves no queue claiming to be empty when UCX could not be read, and the snapshot stays valid', () => {
    const m = mergeUcx(
      [comm('0', 'MPI_COMM_WORLD', 2, null)],
      {
        kind: 'error',
        library: null,
        error: { code: 'MQD_E_UCX_UNSUPPORTED', message: 'MQD_E_UCX_UNSUPPORTED: no DWARF' },
      },
      null,
    );
    const c = m.communicators[0];
    expect([c?.sends, c?.receives, c?.unexpected]).toEqual([null, null, null]);
    expect(c?.unavailable.receives?.code).toBe('MQD_E_UCX_UNSUPPORTED');
    expect(m.queueSource).toEqual({
      source: 'ucx',
      library: '',
      limits: [{ code: 'MQD_E_UCX_UNSUPPORTED', message: 'MQD_E_UCX_UNSUPPORTED: no DWARF' }],
    });
    const snap = {
      schemaVersion: 1,
      takenAt: '2026-01-01T00:00:00.000Z',
      durationMicros: 10,
      mpi: { library: 'openmpi', lengthUnit: 'bytes', dll: null },
      ranks: [
        {
          rank: 0,
          pid: 10,
          host: 'n1',
          state: { kind: 'ok' },
          pausedMicros: 5,
          communicators: m.communicators,
          queueSource: m.queueSource,
        },
      ],
    };
    const v = validateSnapshot(snap);
    expect(v.ok ? 'valid' : v.error.message).toBe('valid');
  });
});
