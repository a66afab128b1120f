// The pure parts of the interface corners: extra_text lines in place, unknown
// lengths, the world by identity, intercommunicator peers through the remote group, and the
// model's one world helper.
import { type Communicator, commKey, isWorld, type Operation, peerGlobalRank } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import {
  type CommunicatorHeader,
  decodeOperation,
  deriveGlobalRanks,
  isWorldHeader,
} from '../src/mqs/decode.js';
import { PENDING_OPERATION as P } from '../src/mqs/mqs-spec.js';

function record(lines: string[], length: bigint): Buffer {
  const b = Buffer.alloc(P.size);
  const v = new DataView(b.buffer, b.byteOffset, P.size);
  v.setBigInt64(P.desired_length, length, true);
  lines.forEach((s, i) => {
    b.write(s, P.extra_text + i * P.extraLineLen, 'utf8');
  });
  return b;
}

const op = (local: number | null, global: number | null): Operation => ({
  status: 'pending',
  peer: { local, global },
  tag: 1,
  length: 4,
  actual: null,
  extraText: [],
  buffer: '0x0',
  systemBuffer: false,
});

function comm(over: Partial<Communicator>): Communicator {
  return {
    id: '7',
    name: 'c',
    size: 2,
    localRank: 0,
    group: null,
    sends: [],
    receives: [],
    unexpected: [],
    unavailable: {},
    ...over,
  };
}

describe('decode: interface corners', () => {
  it('keeps extra_text lines in their places, drops only trailing empty ones', () => {
    expect(decodeOperation(record(['a', '', 'c'], 4n), 0, 4).extraText).toEqual(['a', '', 'c']);
    expect(decodeOperation(record(['', 'b'], 4n), 0, 4).extraText).toEqual(['', 'b']);
    expect(decodeOperation(record(['a'], 4n), 0, 4).extraText).toEqual(['a']);
    expect(decodeOperation(record([], 4n), 0, 4).extraText).toEqual([]);
  });

  it('flags an unknown desired length instead of reporting 0 as a length', () => {
    const unknown = decodeOperation(record([], -1n), 0, 4);
    expect([unknown.length, unknown.lengthUnknown]).toEqual([0, true]);
    const widenedMinusOne = decodeOperation(record([], 0xffffffffn), 0, 4);
    expect(widenedMinusOne.lengthUnknown).toBe(true);
    const zero = decodeOperation(record([], 0n), 0, 4);
    expect([zero.length, zero.lengthUnknown]).toEqual([0, undefined]);
  });

  it('knows the world by its id and identity group, not its name', () => {
    const h = (id: string, name: string, size = 4): CommunicatorHeader => ({
      id,
      name,
      size,
      localRank: 0,
      isNull: false,
    });
    expect(isWorldHeader(h('0', 'renamed'), null, '0')).toBe(true);
    expect(isWorldHeader(h('0', 'renamed'), [0, 1, 2, 3], '0')).toBe(true);
    expect(isWorldHeader(h('5', 'MPI_COMM_WORLD', 2), [3, 1], '0')).toBe(false);
    expect(isWorldHeader(h('0', 'MPI_COMM_WORLD'), [1, 0, 2, 3], '0')).toBe(false);
    expect(isWorldHeader(h('0', 'MPI_COMM_WORLD'), null, null)).toBe(false);
  });

  it('maps a user communicator named MPI_COMM_WORLD through its group; a renamed world as the identity', () => {
    const impostor = deriveGlobalRanks(
      comm({ name: 'MPI_COMM_WORLD', world: false, group: [3, 1], receives: [op(0, null)] }),
    );
    expect([impostor.group, impostor.receives?.[0]?.peer]).toEqual([[3, 1], { local: 0, global: 3 }]);
    const renamed = deriveGlobalRanks(
      comm({ name: 'renamed', world: true, size: 4, group: [0, 1, 2, 3], sends: [op(2, null)] }),
    );
    expect([renamed.group, renamed.sends?.[0]?.peer]).toEqual([null, { local: 2, global: 2 }]);
  });

  it("maps an intercommunicator's peers through the remote group, never the local one", () => {
    // Open MPI's DLL gave world 0 (through the local group [0, 1]); the peer is remote rank 0 = world 2.
    const inter = deriveGlobalRanks(comm({ group: [0, 1], remoteGroup: [2, 3], receives: [op(0, 0)] }));
    expect(inter.receives?.[0]?.peer).toEqual({ local: 0, global: 2 });
    // Remote group unknown: the DLL's (local-group) global rank is dropped, not kept.
    const unknown = deriveGlobalRanks(comm({ group: [0, 1], remoteGroup: null, receives: [op(1, 1)] }));
    expect(unknown.receives?.[0]?.peer).toEqual({ local: 1, global: null });
    // The analysis follows the remote group too, and never takes the peer for this process.
    const c = comm({ group: [0, 1], remoteGroup: [2, 3], localRank: 0 });
    expect(peerGlobalRank({ local: 0, global: null }, c, 0, 4)).toBe(2);
    expect(peerGlobalRank({ local: 0, global: null }, comm({ remoteGroup: null }), 0, 4)).toBeNull();
  });

  it('the model has one world helper; the world key ignores the name', () => {
    expect(isWorld(comm({ name: 'renamed', world: true }))).toBe(true);
    expect(isWorld(comm({ name: 'MPI_COMM_WORLD', world: false }))).toBe(false);
    // Snapshots written before the flag: by name.
    expect(isWorld(comm({ name: 'MPI_COMM_WORLD' }))).toBe(true);
    expect(commKey(comm({ name: 'renamed', world: true, size: 4 }))).toBe(
      commKey(comm({ name: 'MPI_COMM_WORLD', world: true, size: 4 })),
    );
    expect(commKey(comm({ name: 'MPI_COMM_WORLD', world: false, size: 4 }))).not.toBe(
      commKey(comm({ name: 'MPI_COMM_WORLD', world: true, size: 4 })),
    );
  });
});
