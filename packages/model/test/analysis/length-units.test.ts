// Lengths in two units in one snapshot (Operation.lengthUnit): MPICH's ch4 device counts an
// unexpected message's arrived data in bytes while its receives count elements. The matching
// order must not call such a message longer (or shorter) than the receive buffer: it cannot
// know, there is no datatype to convert with.
import {
  type Communicator,
  type JobSnapshot,
  type LengthUnit,
  type MatchingOrder,
  matchingOrder,
  type Operation,
  opLengthUnit,
  validateSnapshot,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';

function op(peer: number, tag: number, length: number, extra: Partial<Operation> = {}): Operation {
  return {
    status: 'pending',
    peer: { local: peer, global: peer },
    tag,
    length,
    actual: null,
    extraText: [],
    buffer: '0x1000',
    systemBuffer: false,
    ...extra,
  };
}

const world = (r: number, over: Partial<Communicator> = {}): Communicator => ({
  id: '0x44000000',
  name: 'MPI_COMM_WORLD',
  size: 2,
  localRank: r,
  world: true,
  group: null,
  sends: [],
  receives: [],
  unexpected: [],
  unavailable: {},
  ...over,
});

/**
 * Rank 1 posted a receive from 0, tag 5, of `recvLength` elements; a message from 0 with tag 5
 * (`msg`) already arrived at it. An MPICH job: lengths in elements unless an op says otherwise.
 */
function ch4Like(recvLength: number, msg: Operation): JobSnapshot {
  return {
    schemaVersion: 1,
    takenAt: '2026-01-01T00:00:00.000Z',
    durationMicros: 100,
    mpi: { library: 'mpich', dll: '/x/libtvmpich.so', lengthUnit: 'elements' },
    ranks: [
      { rank: 0, pid: 100, host: 'n1', state: { kind: 'ok' }, pausedMicros: 10, communicators: [world(0)] },
      {
        rank: 1,
        pid: 101,
        host: 'n1',
        state: { kind: 'ok' },
        pausedMicros: 10,
        communicators: [world(1, { receives: [op(0, 5, recvLength)], unexpected: [msg] })],
      },
    ],
  };
}

function onlyVerdict(snap: JobSnapshot) {
  const order: MatchingOrder | null = matchingOrder(snap, 1, '0x44000000');
  const v = order?.receives?.[0]?.verdicts[0];
  if (!order || !v) throw new Error('no verdict for rank 1 receive #0');
  expect(order.candidates[v.candidate]?.origin).toBe('unexpected');
  return v;
}

describe('lengths in different units', () => {
  it('an op says its own unit, else the snapshot’s applies', () => {
    expect(opLengthUnit(op(0, 5, 16, { lengthUnit: 'bytes' }), 'elements')).toBe('bytes');
    expect(opLengthUnit(op(0, 5, 16), 'elements')).toBe('elements');
    expect(opLengthUnit(op(0, 5, 16), 'bytes')).toBe('bytes');
  });

  it('does not claim truncation for a ch4 unexpected message in bytes against a receive in elements', () => {
    // 16 bytes arrived (4 ints) for a receive of 1 element: 16 > 1, yet no truncation can be told.
    const v = onlyVerdict(ch4Like(1, op(0, 5, 16, { lengthUnit: 'bytes' })));
    expect(v.matches).toBe(true);
    expect(v.lengths).toBe('units-differ');
    expect(v.truncates).toBe(false);
  });

  it('still finds truncation when both lengths are in the snapshot’s unit', () => {
    const v = onlyVerdict(ch4Like(1, op(0, 5, 16)));
    expect(v.lengths).toBe('longer');
    expect(v.truncates).toBe(true);
    const fits = onlyVerdict(ch4Like(16, op(0, 5, 16)));
    expect(fits.lengths).toBe('fits');
    expect(fits.truncates).toBe(false);
  });

  it('compares two lengths that are both in bytes, whatever the snapshot says', () => {
    const snap = ch4Like(1, op(0, 5, 16, { lengthUnit: 'bytes' }));
    const recv = snap.ranks[1]?.communicators[0]?.receives?.[0];
    if (!recv) throw new Error('fixture has no receive');
    recv.lengthUnit = 'bytes';
    expect(onlyVerdict(snap).lengths).toBe('longer');
  });

  it('does not compare a length the library could not say', () => {
    const v = onlyVerdict(ch4Like(1, op(0, 5, 0, { lengthUnknown: true })));
    expect(v.lengths).toBe('length-unknown');
    expect(v.truncates).toBe(false);
  });

  it('is part of the schema: the field validates, a unit that is not one does not', () => {
    const good = ch4Like(1, op(0, 5, 16, { lengthUnit: 'bytes' }));
    expect(validateSnapshot(good).ok).toBe(true);
    const bad = ch4Like(1, op(0, 5, 16, { lengthUnit: 'octets' as LengthUnit }));
    const r = validateSnapshot(bad);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.message).toMatch(/\/ranks\/1\/communicators\/0\/unexpected/);
  });
});
