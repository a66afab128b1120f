// The pure decoding of the DLL's records (src/mqs/decode.ts), on records written here byte by
// byte in the layouts of mqs-spec.ts: the widening quirks the real DLLs have (ffi-lessons.md).
import type { Communicator, Operation } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import {
  decodeCommunicator,
  decodeGroup,
  decodeLength,
  decodeOperation,
  decodeOperations,
  decodeRank,
  decodeStatus,
  deriveGlobalRanks,
} from '../src/mqs/decode.js';
import { COMMUNICATOR, mqs_status, PENDING_OPERATION as P } from '../src/mqs/mqs-spec.js';
import { record, widened } from './records.js';

describe('decodeRank and decodeLength', () => {
  const v = new DataView(new ArrayBuffer(8));
  it('reads widened ints as int32, negatives and MPICH 2-byte ANY_SOURCE as unknown', () => {
    widened(v, 0, 3);
    expect(decodeRank(v, 0, 4)).toBe(3);
    widened(v, 0, -1); // 0x00000000ffffffff
    expect(decodeRank(v, 0, 4)).toBeNull();
    widened(v, 0, 0xfffe); // MPICH's ANY_SOURCE read as 16 bits
    expect(decodeRank(v, 0, 4)).toBeNull();
    expect(decodeRank(v, 0, 1 << 20)).toBe(0xfffe); // a real rank in a huge communicator
    v.setInt32(0, 5, true);
    v.setInt32(4, 7, true); // garbage in the high word
    expect(decodeRank(v, 0, 4)).toBeNull();
  });
  it('treats negative lengths and a widened -1 as unknown', () => {
    v.setBigInt64(0, 16n, true);
    expect(decodeLength(v, 0)).toBe(16);
    v.setBigInt64(0, -1n, true);
    expect(decodeLength(v, 0)).toBeNull();
    v.setBigInt64(0, 0xffffffffn, true);
    expect(decodeLength(v, 0)).toBeNull();
  });
  it('maps mqs_status to the model, anything else to pending', () => {
    expect(decodeStatus(mqs_status.pending)).toBe('pending');
    expect(decodeStatus(mqs_status.matched)).toBe('matched');
    expect(decodeStatus(mqs_status.complete)).toBe('complete');
    expect(decodeStatus(42)).toBe('pending');
  });
});

describe('decodeOperation', () => {
  it('decodes an Open MPI style pending receive with extra text lines', () => {
    const op = decodeOperation(
      record({
        local: 1,
        global: 1,
        tag: 99,
        length: 16n,
        extra: ['Receive: 0x55', 'Data: 4 instances of MPI datatype', 'MPI_'],
      }),
      0,
      4,
    );
    expect(op).toEqual<Operation>({
      status: 'pending',
      peer: { local: 1, global: 1 },
      tag: 99,
      length: 16,
      actual: null,
      extraText: ['Receive: 0x55', 'Data: 4 instances of MPI datatype', 'MPI_'],
      buffer: '0x1000',
      systemBuffer: false,
    });
  });
  it('decodes wildcards: tag_wild, tag -1 (MPICH sets no tag_wild) and ANY_SOURCE', () => {
    expect(decodeOperation(record({ tagWild: true, tag: 5 }), 0, 4).tag).toBeNull();
    expect(decodeOperation(record({ tag: -1 }), 0, 4).tag).toBeNull();
    const any = decodeOperation(record({ local: -1, global: -1 }), 0, 4);
    expect(any.peer).toEqual({ local: null, global: null });
  });
  it('fills actual for a complete message, unknown actual length as null', () => {
    const op = decodeOperation(
      record({
        status: mqs_status.complete,
        local: 2,
        actualLocal: 2,
        actualTag: 12,
        length: 0n,
        actualLength: -1n,
      }),
      0,
      4,
    );
    expect(op.status).toBe('complete');
    expect(op.actual).toEqual({ peer: { local: 2, global: null }, tag: 12, length: null });
  });
  it('decodes a run of records at their offsets', () => {
    const recs = Buffer.concat([record({ tag: 1 }), record({ tag: 2 }), record({ tag: 3 })]);
    expect(decodeOperations(recs, 3, 4).map((o) => o.tag)).toEqual([1, 2, 3]);
    expect(decodeOperations(recs, 2, 4)).toHaveLength(2);
  });
  it('cuts an extra text line that fills its 64 bytes without a NUL', () => {
    const full = 'x'.repeat(P.extraLineLen);
    const b = record({});
    b.write(full, P.extra_text, 'utf8');
    b.write('next', P.extra_text + P.extraLineLen, 'utf8');
    expect(decodeOperation(b, 0, 4).extraText).toEqual([full, 'next']);
  });
});

describe('communicators', () => {
  function comm(uid: bigint, localRank: number, size: bigint, name: string): Buffer {
    const b = Buffer.alloc(COMMUNICATOR.size);
    const v = new DataView(b.buffer, b.byteOffset, COMMUNICATOR.size);
    v.setBigUint64(COMMUNICATOR.unique_id, uid, true);
    widened(v, COMMUNICATOR.local_rank, localRank);
    v.setBigInt64(COMMUNICATOR.size_, size, true);
    b.write(name, COMMUNICATOR.name, 'utf8');
    return b;
  }
  it('gives small ids in decimal, addresses in hex, and spots MPI_COMM_NULL', () => {
    expect(decodeCommunicator(comm(0n, 2, 4n, 'MPI_COMM_WORLD'))).toEqual({
      id: '0',
      name: 'MPI_COMM_WORLD',
      size: 4,
      localRank: 2,
      isNull: false,
    });
    expect(decodeCommunicator(comm(0x7f00aa00n, 0, 2n, 'evens')).id).toBe('0x7f00aa00');
    expect(decodeCommunicator(comm(2n, -2, 0n, 'MPI_COMM_NULL')).isNull).toBe(true);
  });
  it('keeps a group only when every entry is a world rank', () => {
    expect(decodeGroup(Int32Array.from([0, 2]))).toEqual([0, 2]);
    expect(decodeGroup(Int32Array.from([0, -1]))).toBeNull();
  });
  it('derives global ranks from the group, and drops the identity group of MPI_COMM_WORLD', () => {
    const op = (local: number | null): Operation => ({
      status: 'pending',
      peer: { local, global: null },
      tag: 1,
      length: 1,
      actual: null,
      extraText: [],
      buffer: '0x0',
      systemBuffer: false,
    });
    const base = { size: 2, localRank: 0, unexpected: null, unavailable: {} } as const;
    const odds: Communicator = {
      ...base,
      id: '3',
      name: 'odds',
      group: [1, 3],
      sends: [op(1)],
      receives: [op(null)],
    };
    deriveGlobalRanks(odds);
    expect(odds.sends?.[0]?.peer).toEqual({ local: 1, global: 3 });
    expect(odds.receives?.[0]?.peer).toEqual({ local: null, global: null });
    const world: Communicator = {
      ...base,
      id: '0',
      name: 'MPI_COMM_WORLD',
      group: [0, 1],
      sends: [op(1)],
      receives: [],
    };
    deriveGlobalRanks(world);
    expect(world.group).toBeNull();
    expect(world.sends?.[0]?.peer.global).toBe(1);
  });
});
