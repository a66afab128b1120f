// Small hand-written snapshots for the unit tests: every number in them is checked by hand.
import type { Communicator, JobSnapshot, Operation, RankSnapshot } from '@mqd/model';

export function op(
  local: number | null,
  global: number | null,
  tag: number | null,
  length: number,
  buffer = '0x1000',
): Operation {
  return {
    status: 'pending',
    peer: { local, global },
    tag,
    length,
    actual: null,
    extraText: [],
    buffer,
    systemBuffer: false,
  };
}

export function comm(
  over: Partial<Communicator> & Pick<Communicator, 'id' | 'name' | 'size' | 'localRank'>,
): Communicator {
  return { group: null, sends: [], receives: [], unexpected: [], unavailable: {}, ...over };
}

export function rank(r: number, communicators: Communicator[]): RankSnapshot {
  return { rank: r, pid: 100 + r, host: 'n1', state: { kind: 'ok' }, pausedMicros: 10, communicators };
}

export function snapshot(ranks: RankSnapshot[], takenAt = '2026-01-01T00:00:00.000Z'): JobSnapshot {
  return {
    schemaVersion: 1,
    takenAt,
    durationMicros: 100,
    mpi: { library: 'mpich', dll: '/x/libtvmpich.so', lengthUnit: 'bytes' },
    ranks,
  };
}

/**
 * 4 ranks. World: rank 0 sends 10 B to 1 (tag 5) and 20 B to 1 (tag 6); rank 1 posted a
 * receive from 0 (tag 5, 100 B) and an ANY_SOURCE receive (tag 7); rank 2 has an unexpected
 * message from 3 (tag 9, 30 B). "pair" (group [2, 3]): rank 3 sends 40 B to local 0 (= world 2),
 * tag 9. An unnamed groupless communicator on rank 3 sends to an unknown destination.
 */
export function fourRanks(): JobSnapshot {
  const world = (r: number, over: Partial<Communicator> = {}) =>
    comm({ id: '0', name: 'MPI_COMM_WORLD', size: 4, localRank: r, ...over });
  return snapshot([
    rank(0, [world(0, { sends: [op(1, 1, 5, 10), op(1, 1, 6, 20)] })]),
    rank(1, [world(1, { receives: [op(0, 0, 5, 100), op(null, null, 7, 8)] })]),
    rank(2, [world(2, { unexpected: [op(3, 3, 9, 30)] })]),
    rank(3, [
      world(3),
      comm({ id: '3', name: 'pair', size: 2, localRank: 1, group: [2, 3], sends: [op(0, null, 9, 40)] }),
      comm({ id: '9', name: '', size: 2, localRank: 0, sends: [op(1, null, 1, 50)] }),
    ]),
  ]);
}
