// The compact wire of a rank's operations (src/reader/wire.ts): what the agent rebuilds is the
// very RankSnapshot the reader had (deep-equal, same JSON text), through V8's serializer as
// Node's IPC channel ('advanced') carries it; what the columns cannot carry is refused (the
// reader then sends objects); a malformed wire is a coded error, never a throw.
import { deserialize, serialize } from 'node:v8';
import { type Communicator, mqdError, type Operation, type RankSnapshot, rankNotRead } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { decodeOperations, deriveGlobalRanks } from '../src/mqs/decode.js';
import { mqs_status, PENDING_OPERATION as P } from '../src/mqs/mqs-spec.js';
import { type OpColumns, rankFromWire, rankToWire, type WireRank } from '../src/reader/wire.js';
import { type Rec, record } from './records.js';

/** Operations decoded by the reader's own decoder from records. */
function ops(recs: Rec[], commSize = 4): Operation[] {
  return decodeOperations(Buffer.concat(recs.map(record)), recs.length, commSize);
}

/** Every kind of operation the decoder makes: statuses, wildcards, unknowns, actual fields, extra text. */
const VARIED: Rec[] = [
  { local: 1, global: 1, tag: 99, length: 16n, extra: ['Receive: 0x55', 'Data: 4 instances', 'MPI_INT'] },
  { tagWild: true, local: -1, global: -1 }, // MPI_ANY_TAG, MPI_ANY_SOURCE
  { tag: -1, local: 0xfffe }, // MPICH: no tag_wild, ANY_SOURCE read as 2 bytes
  { length: -1n }, // lengthUnknown
  { length: 0xffffffffn }, // a widened -1: lengthUnknown
  { length: 1n << 40n, buffer: 0xffff_ffff_ffff_fff0n }, // beyond 32 bits
  { status: mqs_status.complete, actualLocal: 2, actualGlobal: 2, actualTag: 12, actualLength: 64n },
  { status: mqs_status.matched, actualLocal: -1, actualTag: -1, actualLength: -1n }, // unknown actuals
  { status: mqs_status.complete, systemBuffer: true, buffer: 0n, extra: ['', 'second', '', 'fourth'] },
  { tag: -2147483648 + 1, local: 3, extra: ['é unicode ✓', 'Receive: 0x55'] },
  { tag: 2147483647, buffer: 0xabcn, extra: ['x'.repeat(P.extraLineLen)] },
];

function comm(over: Partial<Communicator> & Pick<Communicator, 'id' | 'name'>): Communicator {
  return {
    size: 4,
    localRank: 0,
    group: [0, 1, 2, 3],
    sends: [],
    receives: [],
    unexpected: [],
    unavailable: {},
    ...over,
  };
}

function okRank(communicators: Communicator[], extra: Partial<RankSnapshot> = {}): RankSnapshot {
  return {
    rank: 0,
    pid: 4242,
    host: 'node1',
    state: { kind: 'ok' },
    pausedMicros: 1234,
    communicators,
    ...extra,
  };
}

/** What the agent gets: the wire through V8's serializer, as the IPC channel carries it. */
function overIpc(r: RankSnapshot): RankSnapshot {
  const wire = rankToWire(r);
  if (!wire) throw new Error('the rank was refused by the wire');
  const got = rankFromWire(deserialize(serialize(wire)) as WireRank);
  if (!got.ok) throw new Error(got.error.message);
  return got.value;
}

const world = deriveGlobalRanks(
  comm({
    id: '0',
    name: 'MPI_COMM_WORLD',
    world: true,
    fortranHandle: 0,
    sends: ops(VARIED.slice(0, 4)),
    receives: ops(VARIED),
    unexpected: null,
    unavailable: { unexpected: mqdError('MQD_E_QUEUE_UNSUPPORTED', "Open MPI's DLL cannot show it") },
  }),
);
// MPICH ch4: unexpected messages counted in bytes (session.ts sets lengthUnit after decoding).
const unexpectedInBytes = ops(VARIED.slice(5, 9));
for (const op of unexpectedInBytes) op.lengthUnit = 'bytes';
const split = deriveGlobalRanks(
  comm({
    id: '0x7f00aa',
    name: 'split',
    size: 2,
    group: [3, 1],
    world: false,
    fortranHandle: null,
    sends: [],
    receives: ops([{ local: 1 }, { local: 0, tag: 3 }], 2),
    unexpected: unexpectedInBytes,
  }),
);
const inter = deriveGlobalRanks(
  comm({
    id: '17',
    name: '',
    size: 2,
    group: [0, 1],
    remoteGroup: [2, 3],
    sends: ops([{ local: 1 }], 2),
    receives: null,
    unexpected: null,
    unavailable: {
      receives: mqdError('MQD_E_DLL_ERROR', 'mqs_setup_operation_iterator returned 103'),
      unexpected: mqdError('MQD_E_QUEUE_UNSUPPORTED', 'no'),
    },
  }),
);
const elementsOp = ops([{ tag: 1 }]);
for (const op of elementsOp) op.lengthUnit = 'elements';
// Statuses the library's own state corrected (walk.ts): pending, with the request's fields.
const correctedOps = ops([{ status: mqs_status.complete, extra: ['Receive: 0x77'] }, { tag: 2 }]);
for (const op of correctedOps.slice(0, 1))
  Object.assign(op, { status: 'pending', actual: null, corrected: 'waited-on' });

const SAMPLES: [string, RankSnapshot][] = [
  [
    'a rank with every queue kind, stacks, OpenMP and its DLL',
    okRank([world, split, inter, comm({ id: '3', name: 'x', group: null, receives: elementsOp })], {
      threads: [
        {
          tid: 4242,
          name: 'a.out',
          main: true,
          frames: [
            {
              pc: '0x401000',
              function: 'MPI_Recv',
              module: '/lib/libmpi.so',
              file: null,
              line: null,
              inlined: false,
            },
          ],
          truncated: false,
          error: null,
        },
      ],
      mpiCall: {
        function: 'MPI_Recv',
        tid: 4242,
        args: { peer: null, tag: null, communicator: '0', count: 4 },
      },
      openmp: null,
      dll: {
        path: '/usr/lib/libompi_dbg_msgq.so',
        version: 'Open MPI 4.1.4',
        missingFields: ['mca_pml_base_request_t.req_foo'],
        renamedFields: ['MPIDIG_req_t.a -> MPIDIG_req_t.b.a'],
      },
      dllLog: ['setup', 'walk'],
    }),
  ],
  [
    'a rank the walk cut short',
    {
      ...okRank([comm({ id: '0', name: 'MPI_COMM_WORLD', receives: ops(VARIED.slice(0, 2)) })]),
      state: {
        kind: 'error',
        code: 'MQD_E_DLL_ERROR',
        message: 'MQD_E_DLL_ERROR: broke off after 2 entries',
      },
      stacksError: mqdError('MQD_E_NO_STACKS', 'libdw'),
      openmpError: mqdError('MQD_E_OMPD_DISABLED', 'OMP_DEBUG unset'),
    },
  ],
  [
    'a rank with statuses corrected from the library',
    okRank([comm({ id: '0', name: 'MPI_COMM_WORLD', receives: correctedOps })], {
      statusCorrections: [{ reason: 'waited-on', count: 1, message: 'a thread waits on them' }],
    }),
  ],
  ['a rank not read', rankNotRead({ rank: 3, pid: 99, host: 'n2' }, mqdError('MQD_E_PID_EXITED', 'gone'))],
  ['a rank with no operations', okRank([comm({ id: '0', name: 'w', sends: null, receives: null })])],
  ['a rank with empty queues only', okRank([comm({ id: '0', name: 'w' })])],
];

describe('rankToWire then rankFromWire', () => {
  it.each(SAMPLES)('gives back %s, deep-equal and with the same JSON text', (_name, r) => {
    const got = overIpc(r);
    expect(got).toStrictEqual(r);
    expect(JSON.stringify(got)).toBe(JSON.stringify(r));
  });

  it('carries every field the decoder sets (the samples exercise them all)', () => {
    const all = SAMPLES.flatMap(([, r]) =>
      r.communicators.flatMap((c) => [...(c.sends ?? []), ...(c.receives ?? []), ...(c.unexpected ?? [])]),
    );
    expect(new Set(all.map((o) => o.status))).toEqual(new Set(['pending', 'matched', 'complete']));
    expect(all.some((o) => o.lengthUnknown === true)).toBe(true);
    expect(new Set(all.map((o) => o.lengthUnit))).toEqual(new Set([undefined, 'bytes', 'elements']));
    expect(all.some((o) => o.actual?.length === null && o.actual.peer.local === null)).toBe(true);
    expect(all.some((o) => o.actual?.length === 64)).toBe(true);
    expect(all.some((o) => o.peer.local === null && o.tag === null)).toBe(true);
    expect(all.some((o) => o.systemBuffer)).toBe(true);
    expect(all.some((o) => o.extraText.includes(''))).toBe(true);
    expect(all.some((o) => o.buffer === '0xfffffffffffffff0')).toBe(true);
    expect(new Set(all.map((o) => o.corrected))).toEqual(new Set([undefined, 'waited-on']));
  });

  it('gives each queue its own array, in order, for a deep rank (40,000 operations)', () => {
    const recv = ops(
      Array.from({ length: 20_000 }, (_, i) => ({ tag: 5000, buffer: BigInt(0x10000 + i * 8) })),
    );
    const unexp = ops(
      Array.from({ length: 20_000 }, (_, i) => ({
        tag: 7 + (i % 1000),
        extra: ['Unexpected', `n ${i % 7}`],
      })),
    );
    const r = okRank([
      deriveGlobalRanks(comm({ id: '0', name: 'MPI_COMM_WORLD', receives: recv, unexpected: unexp })),
    ]);
    const got = overIpc(r);
    expect(got).toStrictEqual(r);
    const w = got.communicators[0];
    expect(w?.receives).not.toBe(w?.unexpected);
    // The point of the wire: far fewer bytes than the object graph through the same serializer.
    const wire = rankToWire(r);
    expect(serialize(wire).length * 3).toBeLessThan(serialize(r).length);
  });
});

describe('what the columns cannot carry goes as objects', () => {
  const one = (over: Partial<Operation>): RankSnapshot => {
    const op = { ...(ops([{}])[0] as Operation), ...over };
    return okRank([comm({ id: '0', name: 'w', receives: [op] })]);
  };
  it.each<[string, Partial<Operation>]>([
    ['a tag beyond int32', { tag: 2 ** 31 }],
    ['a fractional rank', { peer: { local: 1.5, global: null } }],
    ['-0', { peer: { local: -0, global: null } }],
    ['a buffer with the separator', { buffer: '0x1,0x2' }],
    ['an unknown status', { status: 'lost' as Operation['status'] }],
  ])('%s', (_name, over) => {
    expect(rankToWire(one(over))).toBeNull();
    // The same rank without the odd value is carried.
    expect(rankToWire(one({}))).not.toBeNull();
  });
});

describe('a malformed wire is a coded error for its rank', () => {
  const good = (): WireRank => {
    const w = rankToWire(SAMPLES[0]?.[1] as RankSnapshot);
    if (!w) throw new Error('refused');
    return deserialize(serialize(w)) as WireRank;
  };
  const withOps = (over: Partial<OpColumns>): WireRank => {
    const w = good();
    return { ...w, ops: { ...w.ops, ...over } };
  };
  it.each<[string, () => WireRank]>([
    ['a short column', () => withOps({ tag: good().ops.tag.slice(1) })],
    [
      'a column of the wrong type',
      () => withOps({ local: new Float64Array(good().ops.local.length) as never }),
    ],
    ['a string index out of range', () => withOps({ strings: [] })],
    ['a buffer missing', () => withOps({ buffers: good().ops.buffers.replace(/,[^,]*$/, '') })],
    ['queue bounds past the rows', () => withOps({ queueStarts: new Uint32Array([0, 1e6]) })],
    ['an invalid status', () => withOps({ flags: good().ops.flags.map(() => 3) })],
    ['an unknown correction', () => withOps({ flags: good().ops.flags.map((f) => f | (3 << 14)) })],
    [
      'a queue reference out of range',
      () => {
        const w = good();
        const [c0, ...rest] = w.head.communicators;
        if (!c0) throw new Error('no communicator');
        return { ...w, head: { ...w.head, communicators: [{ ...c0, sends: 99 }, ...rest] } };
      },
    ],
    ['no columns', () => ({ head: good().head }) as WireRank],
  ])('%s', (_name, make) => {
    const got = rankFromWire(make());
    expect(got.ok).toBe(false);
    if (!got.ok) expect(got.error.code).toBe('MQD_E_INTERNAL');
  });
});
