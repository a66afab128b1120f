// The "looks hung" digest and the model's progress verdict decide "did anything move" by one
// rule (packages/model/src/mpi/operation.ts): equal digests exactly when the model finds every
// operation unchanged. Before, the digest left out Open MPI's request address and the system
// buffer flag, so a re-posted receive looked hung to the server and moving to the model.
import { compareSnapshots, type JobSnapshot, type Operation, type RankSnapshot } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { summarize } from '../src/fanout/fanout.js';

function op(over: Partial<Operation> = {}): Operation {
  return {
    status: 'pending',
    peer: { local: 1, global: 1 },
    tag: 7,
    length: 8,
    actual: null,
    extraText: ['Receive: 0xaaa0'],
    buffer: '0x1000',
    systemBuffer: false,
    ...over,
  };
}

function rank(r: number, receives: Operation[], pid = 1000 + r): RankSnapshot {
  return {
    rank: r,
    pid,
    host: 'n1',
    state: { kind: 'ok' },
    pausedMicros: 50,
    communicators: [
      {
        id: '0',
        name: 'MPI_COMM_WORLD',
        size: 2,
        localRank: r,
        group: null,
        sends: [],
        receives,
        unexpected: null,
        unavailable: { unexpected: { code: 'MQD_E_NO_QUEUES', message: 'not shown' } },
      },
    ],
  };
}

function job(ranks: RankSnapshot[], takenAt: string): JobSnapshot {
  return {
    schemaVersion: 1,
    takenAt,
    durationMicros: 1000,
    mpi: { library: 'openmpi', dll: null, lengthUnit: 'bytes' },
    ranks,
  };
}

const T0 = '2026-03-01T10:00:00.000Z';
const T1 = '2026-03-01T10:01:00.000Z';

/** Server and model on one pair of snapshots: [same digest, model found nothing moved]. */
function verdicts(a: RankSnapshot[], b: RankSnapshot[]): [boolean, boolean] {
  const sameDigest = summarize(a).digest === summarize(b).digest;
  const k = compareSnapshots(job(a, T0), job(b, T1)).counts;
  return [sameDigest, k.changed + k.appeared + k.disappeared === 0];
}

describe('the hung digest and the model agree on what moved', () => {
  it('nothing moved: pids and pause times differ, the digests are equal', () => {
    expect(verdicts([rank(0, [op()])], [{ ...rank(0, [op()], 4242), pausedMicros: 900 }])).toEqual([
      true,
      true,
    ]);
  });

  it('a receive re-posted with a new request (Open MPI) moved for both', () => {
    const again = op({ extraText: ['Receive: 0xbbb0'] });
    expect(verdicts([rank(0, [op()])], [rank(0, [again])])).toEqual([false, false]);
  });

  it('a send that went through a system buffer is another operation for both', () => {
    expect(verdicts([rank(0, [op()])], [rank(0, [op({ systemBuffer: true })])])).toEqual([false, false]);
  });

  it('a status change moved for both', () => {
    expect(verdicts([rank(0, [op()])], [rank(0, [op({ status: 'matched' })])])).toEqual([false, false]);
  });
});
