// Statuses a library's DLL reports that its own state contradicts (walk.ts findCorrections and
// the assembly, libraries/open-mpi.ts completedCheck, the snapshot's invariants): the decisions
// on synthetic records and request bytes. The real jobs are openmpi-status.mpi.test.ts.
import { type Operation, type RankSnapshot, rankInvariant } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { type CorrectedStatus, type RankMemory, rankMemory } from '../src/mqs/libraries/library.js';
import { openMpi } from '../src/mqs/libraries/open-mpi.js';
import { mqs_end_of_list, mqs_status, PENDING_OPERATION as P } from '../src/mqs/mqs-spec.js';
import { assembleWalk, findCorrections, type RawWalk } from '../src/mqs/walk.js';
import { record } from './records.js';

const WAITED: CorrectedStatus = { reason: 'waited-on', status: 'pending', peer: 1, tag: 5000, length: 4 };

/** Records as the walk leaves them in the shim, and a copy of a range as shim.ts copyRecords gives it. */
function stop(n: number, at: (i: number) => Parameters<typeof record>[0]) {
  const records = Buffer.concat(Array.from({ length: n }, (_, i) => record(at(i))));
  const copy = (first: number, count: number, into: Uint8Array) => {
    into.set(records.subarray(first * P.size, (first + count) * P.size));
  };
  return { records, copy };
}

describe('findCorrections', () => {
  it('asks only about records the DLL reported complete, by index in the walk, across copy chunks', () => {
    // 600 records: more than one chunk; every third reported complete, the check corrects the odd ones.
    const { copy } = stop(600, (i) => ({
      status: i % 3 === 0 ? mqs_status.complete : mqs_status.pending,
      extra: [`Receive: 0x${(0x1000 + i).toString(16)}`],
    }));
    const asked: string[] = [];
    const got = findCorrections(copy, 0, 600, (line) => {
      asked.push(line);
      return Number.parseInt(line.slice(11), 16) % 2 === 1 ? WAITED : null;
    });
    expect(asked).toHaveLength(200);
    expect(asked[1]).toBe('Receive: 0x1003');
    const want = Array.from({ length: 600 }, (_, i) => i).filter((i) => i % 3 === 0 && i % 2 === 1);
    expect([...(got?.keys() ?? [])]).toEqual(want);
  });

  it('reads a queue that starts after other walks of the stop (indices are the queue own)', () => {
    const { copy } = stop(10, (i) => ({ status: i >= 7 ? mqs_status.complete : mqs_status.pending }));
    const got = findCorrections(copy, 7, 3, () => WAITED);
    expect([...(got?.keys() ?? [])]).toEqual([0, 1, 2]);
    expect(findCorrections(copy, 0, 7, () => WAITED)).toBeUndefined();
  });
});

describe('assembleWalk with corrections', () => {
  const facts = {
    libraryName: 'Open MPI',
    unexpectedUnit: undefined,
    newestFirst: new Set<never>(),
    dllError: () => {
      throw new Error('no DLL error expected');
    },
    ...(openMpi.correctionNotes ? { correctionNotes: openMpi.correctionNotes } : {}),
  };
  const walkOf = (count: number, corrections?: ReadonlyMap<number, CorrectedStatus>): RawWalk => ({
    comms: [
      {
        header: { id: '3', name: 'split', size: 2, localRank: 0, isNull: false },
        group: [5, 7],
        remoteGroup: undefined,
        queues: [
          ['sends', { kind: 'records', first: 0, count: 0, rc: mqs_end_of_list, why: null }],
          ['unexpected', { kind: 'unavailable', rc: 1 }],
          [
            'receives',
            {
              kind: 'records',
              first: 0,
              count,
              rc: mqs_end_of_list,
              why: null,
              ...(corrections ? { corrections } : {}),
            },
          ],
        ],
      },
    ],
    error: null,
    worldId: '0',
    fortran: new Map(),
  });
  // What Open MPI's DLL gives a receive inside MPI_Waitall: complete, its actual fields empty.
  const { records } = stop(2, () => ({
    status: mqs_status.complete,
    local: 1,
    global: 7,
    tag: 5000,
    length: 4n,
    actualLocal: 0,
    actualTag: -1,
    extra: ['Receive: 0x55', 'Data: 4 instances of MPI datatype', 'MPI_'],
  }));

  it('makes the corrected operation pending with the request fields, and notes it on the rank', () => {
    const got = assembleWalk(
      walkOf(2, new Map([[1, { ...WAITED, peer: 0, tag: 9, length: 12 }]])),
      records,
      facts,
    );
    const [kept, fixed] = (got.communicators[0]?.receives ?? []) as Operation[];
    expect(kept?.status).toBe('complete');
    expect(kept?.corrected).toBeUndefined();
    expect(fixed).toMatchObject({
      status: 'pending',
      actual: null,
      peer: { local: 0, global: 5 }, // the group's world rank of local rank 0
      tag: 9,
      length: 12,
      corrected: 'waited-on',
      extraText: ['Receive: 0x55', 'Data: 4 instances of MPI datatype', 'MPI_'],
    });
    expect(got.statusCorrections).toEqual([
      { reason: 'waited-on', count: 1, message: openMpi.correctionNotes?.['waited-on'] },
    ]);
    expect(got.statusCorrections?.[0]?.message).toContain('a thread waits on them');
    const rank: RankSnapshot = {
      rank: 0,
      pid: 1,
      host: 'h',
      state: { kind: 'ok' },
      pausedMicros: 1,
      communicators: got.communicators,
      ...(got.statusCorrections ? { statusCorrections: got.statusCorrections } : {}),
    };
    expect(rankInvariant(rank)).toBeNull();
  });

  it('leaves a walk without corrections as the DLL reported it, with no note', () => {
    const got = assembleWalk(walkOf(2), records, facts);
    expect(got.communicators[0]?.receives?.map((o) => o.status)).toEqual(['complete', 'complete']);
    expect(got).not.toHaveProperty('statusCorrections');
  });
});

describe('the snapshot invariant of corrected statuses', () => {
  const op = (corrected?: 'waited-on'): Operation => ({
    status: 'pending',
    peer: { local: 1, global: 1 },
    tag: 5,
    length: 4,
    actual: null,
    extraText: [],
    buffer: '0x0',
    systemBuffer: false,
    ...(corrected ? { corrected } : {}),
  });
  const rank = (ops: Operation[], notes?: RankSnapshot['statusCorrections']): RankSnapshot => ({
    rank: 0,
    pid: 1,
    host: 'h',
    state: { kind: 'ok' },
    pausedMicros: 1,
    communicators: [
      {
        id: '0',
        name: 'MPI_COMM_WORLD',
        world: true,
        size: 2,
        localRank: 0,
        group: null,
        sends: [],
        receives: ops,
        unexpected: [],
        unavailable: {},
      },
    ],
    ...(notes ? { statusCorrections: notes } : {}),
  });
  const note = (count: number) => [{ reason: 'waited-on' as const, count, message: 'why' }];
  it('holds for a note that counts its operations, and for an old snapshot without either', () => {
    expect(rankInvariant(rank([op('waited-on'), op()], note(1)))).toBeNull();
    expect(rankInvariant(rank([op(), op()]))).toBeNull();
  });
  it.each<[string, RankSnapshot, RegExp]>([
    ['a correction without its note', rank([op('waited-on')]), /without a statusCorrections note/],
    ['a note that miscounts', rank([op('waited-on')], note(2)), /says 2 'waited-on'.*have 1/],
    ['a reason noted twice', rank([op('waited-on')], [...note(1), ...note(1)]), /twice/],
  ])('is broken by %s', (_name, r, why) => {
    expect(rankInvariant(r)).toMatch(why);
  });
});

// A request laid out as the check reads it (offsets as the library's debug info would give them).
const OFF: Record<string, number> = {
  'ompi_request_t.req_type': 24,
  'ompi_request_t.req_complete': 64,
  'ompi_request_t.req_state': 72,
  'mca_pml_base_request_t.req_pml_complete': 96,
  'mca_pml_base_request_t.req_datatype': 120,
  'mca_pml_base_request_t.req_count': 192,
  'mca_pml_base_request_t.req_peer': 200,
  'mca_pml_base_request_t.req_tag': 204,
  'ompi_datatype_t.super.size': 8,
};
const REQ = 0x10000n;
const SYNC = 0x20000n;
const DATATYPE = 0x30000n;

/** A target of three objects (a request, a wait sync, a datatype) as a RankMemory. */
function target(
  over: { complete?: bigint; state?: number; pml?: number; syncCount?: number } = {},
): RankMemory {
  const mem = new Map<bigint, Uint8Array>();
  const req = new DataView(new ArrayBuffer(256));
  req.setInt32(OFF['ompi_request_t.req_type'] as number, 0, true); // OMPI_REQUEST_PML
  req.setBigUint64(OFF['ompi_request_t.req_complete'] as number, over.complete ?? SYNC, true);
  req.setInt32(OFF['ompi_request_t.req_state'] as number, over.state ?? 2, true); // ACTIVE
  req.setInt32(OFF['mca_pml_base_request_t.req_pml_complete'] as number, over.pml ?? 0, true);
  req.setBigUint64(OFF['mca_pml_base_request_t.req_datatype'] as number, DATATYPE, true);
  req.setBigUint64(OFF['mca_pml_base_request_t.req_count'] as number, 3n, true);
  req.setInt32(OFF['mca_pml_base_request_t.req_peer'] as number, 1, true);
  req.setInt32(OFF['mca_pml_base_request_t.req_tag'] as number, 5000, true);
  mem.set(REQ, new Uint8Array(req.buffer));
  const sync = new DataView(new ArrayBuffer(64));
  sync.setInt32(0, over.syncCount ?? 200, true);
  mem.set(SYNC, new Uint8Array(sync.buffer));
  const dt = new DataView(new ArrayBuffer(64));
  dt.setBigUint64(8, 4n, true);
  mem.set(DATATYPE, new Uint8Array(dt.buffer));
  const read = (addr: bigint, len: number): Uint8Array | null => {
    for (const [base, bytes] of mem) {
      const off = Number(addr - base);
      if (addr >= base && off + len <= bytes.length) return bytes.slice(off, off + len);
    }
    return null;
  };
  const m = rankMemory({ findSymbol: () => null, findType: () => null }, read);
  return { ...m, offsetOf: (type, field) => OFF[`${type}.${field}`] ?? -1 };
}

describe("Open MPI's check of a request its DLL called complete", () => {
  const line = `Receive: 0x${REQ.toString(16)}`;
  const check = (mem: RankMemory) => {
    const c = openMpi.completedCheck?.(mem);
    if (!c) throw new Error('no check');
    return c(line);
  };

  it('says pending, with peer, tag and count x datatype size, when a wait sync holds the completion field', () => {
    expect(check(target())).toEqual({
      reason: 'waited-on',
      status: 'pending',
      peer: 1,
      tag: 5000,
      length: 12,
    });
  });

  it.each<[string, Parameters<typeof target>[0]]>([
    ['REQUEST_COMPLETED (1)', { complete: 1n }],
    ['REQUEST_PENDING (0)', { complete: 0n }],
    ['an inactive request', { state: 1 }],
    ['a request the PML is done with', { pml: 1 }],
    ['a pointer to no readable sync', { complete: 0x90000n }],
    ['a misaligned pointer', { complete: SYNC + 4n }],
    ['a sync that counts no request', { syncCount: 0 }],
  ])('leaves the DLL word for %s', (_name, over) => {
    expect(check(target(over))).toBeNull();
  });

  it('leaves lines that name no request, and cannot check without the types', () => {
    const c = openMpi.completedCheck?.(target());
    expect(c?.('Unknown type of request 0x10000')).toBeNull();
    expect(c?.('')).toBeNull();
    const bare = { ...target(), offsetOf: () => -1 };
    expect(openMpi.completedCheck?.(bare)).toBeNull();
  });
});
