// More hang classes over hand-built snapshots with stacks: standard sends that each wait for
// the other's receive because their messages are above the eager limit (said with the size and
// the limit), probes that can never match, and receives whose send was never started; with the
// jobs that look alike but must not be called hung.
import {
  EAGER_LIMITS,
  explainSnapshot,
  formatExplanation,
  type JobSnapshot,
  type MpiCall,
  type RankSnapshot,
  validateSnapshot,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { at, failedRank, op, rank, snapshot, world } from './fixtures.js';

const MIB = 1024 * 1024;

/** Call arguments on MPI_COMM_WORLD (id '0'); typeSize absent when not given. */
function args(peer: number, tag: number, count = 1, typeSize?: number): MpiCall['args'] {
  return {
    peer: { local: peer, global: peer },
    tag,
    communicator: '0',
    count,
    ...(typeSize === undefined ? {} : { typeSize }),
  };
}

function job(ranks: RankSnapshot[], library: 'openmpi' | 'mpich' = 'openmpi'): JobSnapshot {
  const s = snapshot(ranks, library);
  expect(validateSnapshot(s).ok).toBe(true);
  return s;
}

/** Ranks 0..n-1 each in MPI_Send of `bytes` to the next (Open MPI lists each as a pending send). */
function sendRing(n: number, bytes: number, fn = 'MPI_Send'): JobSnapshot {
  return job(
    Array.from({ length: n }, (_, r) =>
      at(
        rank(r, [world(n, r, { sends: [op({ peer: (r + 1) % n, tag: 3, length: bytes })] })]),
        fn,
        12,
        args((r + 1) % n, 3, bytes / 4),
      ),
    ),
  );
}

describe('send-send cycles of messages too large to buffer', () => {
  it('Open MPI: both ranks in MPI_Send of 1 MiB, said with the size from the send queue and the eager limits', () => {
    const e = explainSnapshot(sendRing(2, MIB));
    expect(e.verdict).toBe('deadlock');
    expect(e.sendCycle?.bytes).toBe(MIB);
    expect(e.lead).toBe(
      "Ranks 0 and 1 each wait in MPI_Send of 1 MiB to the other, at a.c:12; messages above the library's eager limit (Open MPI defaults: 4 KiB for ob1 over shared memory, 64 KiB for ob1 over TCP) need a matching receive, and every rank of the cycle sends before it receives: post the receives first (MPI_Irecv) or pair them (MPI_Sendrecv).",
    );
    const text = formatExplanation(e);
    expect(text).toContain(
      '2 of 2 ranks can never proceed. Cycle of 2 ranks: 0 -> 1 -> 0 (2 pending sends).',
    );
  });

  it('MPICH: no queue lists the blocking sends; the size is count x type size from the call', () => {
    const e = explainSnapshot(
      job(
        [
          at(rank(0, [world(2, 0, {})]), 'MPI_Send', 12, args(1, 3, 262144, 4)),
          at(rank(1, [world(2, 1, {})]), 'MPI_Send', 14, args(0, 3, 262144, 4)),
        ],
        'mpich',
      ),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.sendCycle?.bytes).toBe(MIB);
    expect(e.lead).toMatch(
      /^Ranks 0 and 1 each wait in MPI_Send of 1 MiB to the other, at a\.c:12 and a\.c:14; messages above the library's eager limit \(MPICH defaults: 128 KiB for ch3 over TCP; ch4: set by the transport, unknown\) need a matching receive/,
    );
  });

  it('a count whose type size is unreadable is said as elements, not guessed as bytes', () => {
    const e = explainSnapshot(
      job(
        [
          at(rank(0, [world(2, 0, {})]), 'MPI_Send', 12, args(1, 3, 262144)),
          at(rank(1, [world(2, 1, {})]), 'MPI_Send', 12, args(0, 3, 262144)),
        ],
        'mpich',
      ),
    );
    expect(e.sendCycle?.bytes).toBeNull();
    expect(e.sendCycle?.count).toBe(262144);
    expect(e.lead).toMatch(
      /^Ranks 0 and 1 each wait in MPI_Send of 262144 elements \(the type size could not be read\) to the other/,
    );
  });

  it('a ring of 3 ranks in MPI_Send: each to the next rank of the cycle', () => {
    const e = explainSnapshot(sendRing(3, 2 * MIB));
    expect(e.verdict).toBe('deadlock');
    expect(e.lead).toMatch(
      /^Ranks 0-2 each wait in MPI_Send of 2 MiB to the next rank of the cycle, at a\.c:12;/,
    );
  });

  it('sends within the eager limit that still wait: said so, not blamed on the size', () => {
    const e = explainSnapshot(sendRing(2, 1024));
    expect(e.verdict).toBe('deadlock');
    expect(e.lead).toContain("1 KiB is within the library's eager limit");
    expect(e.lead).not.toContain('messages above');
  });

  it('a cycle of synchronous sends is told by the cycle alone (MPI_Ssend waits at any size)', () => {
    const e = explainSnapshot(sendRing(2, MIB, 'MPI_Ssend'));
    expect(e.verdict).toBe('deadlock');
    expect(e.sendCycle).toBeUndefined();
    expect(e.lead).toBe('2 of 2 ranks can never proceed.');
  });

  it('no false hang: one rank in MPI_Send of 1 MiB while its peer computes', () => {
    const e = explainSnapshot(
      job([
        at(
          rank(0, [world(2, 0, { sends: [op({ peer: 1, tag: 3, length: MIB })] })]),
          'MPI_Send',
          12,
          args(1, 3, 262144),
        ),
        at(rank(1, [world(2, 1, {})]), null, 20),
      ]),
    );
    expect(e.verdict).not.toBe('deadlock');
    expect(e.headline).toBe('No deadlock');
    expect(e.sendCycle).toBeUndefined();
  });

  it('the eager limits are facts per library; a library we do not know has none', () => {
    expect(EAGER_LIMITS.openmpi.map((l) => l.bytes)).toEqual([4096, 65536]);
    expect(EAGER_LIMITS.mpich.map((l) => l.bytes)).toEqual([131072]);
    expect(EAGER_LIMITS.unknown).toEqual([]);
  });
});

describe('probes that can never match', () => {
  it('MPI_Probe from a rank in MPI_Finalize: a deadlock naming the probe, its line and the peer', () => {
    const e = explainSnapshot(
      job([
        at(rank(0, [world(2, 0, {})]), 'MPI_Finalize', 40),
        at(rank(1, [world(2, 1, {})]), 'MPI_Probe', 31, args(0, 9)),
      ]),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.lead).toMatch(
      /^Rank 1 waits in MPI_Probe for a message from rank 0, tag 9, at a\.c:31; rank 0 is in MPI_Finalize \(a\.c:40\) and will never send it\./,
    );
  });

  it('MPI_Mprobe from a rank that exited', () => {
    const gone: RankSnapshot = {
      ...failedRank(0),
      state: { kind: 'error', code: 'MQD_E_ZOMBIE', message: 'pid 1000 is a zombie' },
    };
    const e = explainSnapshot(
      job([gone, at(rank(1, [world(2, 1, {})]), 'MPI_Mprobe', 31, args(0, 9))], 'mpich'),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.lead).toMatch(
      /^Rank 1 waits in MPI_Mprobe for a message from rank 0, tag 9, at a\.c:31; rank 0 has exited \(MQD_E_ZOMBIE\) and will never send it\./,
    );
  });

  it('two ranks each probing for the other: a cycle though no queue holds anything', () => {
    const e = explainSnapshot(
      job([
        at(rank(0, [world(2, 0, {})]), 'MPI_Mprobe', 30, args(1, 9)),
        at(rank(1, [world(2, 1, {})]), 'MPI_Probe', 31, args(0, 9)),
      ]),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.deadlock?.cycles[0]?.ranks).toEqual([0, 1]);
    expect(e.diagnosis.cycle?.text).toBe(
      'Cycle: rank 0 waits for rank 1 (tag 9, a.c:30) / rank 1 waits for rank 0 (tag 9, :31)',
    );
  });

  it('no false hang: a probe whose sender still computes', () => {
    const e = explainSnapshot(
      job([
        at(rank(0, [world(2, 0, {})]), null, 12),
        at(rank(1, [world(2, 1, {})]), 'MPI_Probe', 31, args(0, 9)),
      ]),
    );
    expect(e.verdict).toBe('unknown');
    expect(e.headline).toBe('No deadlock');
    expect(e.lead).toContain('rank 0 can still act');
  });
});

describe('requests never started or never matched', () => {
  it('Open MPI lists a persistent send never started as complete: the receive it would match still waits', () => {
    const e = explainSnapshot(
      job([
        at(
          rank(0, [world(2, 0, { sends: [op({ peer: 1, tag: 6, length: 4, status: 'complete' })] })]),
          'MPI_Finalize',
          40,
        ),
        at(rank(1, [world(2, 1, { receives: [op({ peer: 0, tag: 6, length: 4 })] })]), 'MPI_Wait', 21),
      ]),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.lead).toBe(
      'Rank 1 waits in MPI_Wait for a message from rank 0, tag 6, at a.c:21; rank 0 is in MPI_Finalize (a.c:40) and will never send it. Rank 0 lists a send to rank 1 with tag 6 that this receive would match as complete, yet the receive still waits: a send that was never started (a persistent MPI_Send_init without MPI_Start) reads so, as does a message an earlier receive took.',
    );
  });

  it('a nonblocking receive never matched, its peer in MPI_Finalize with no send queued', () => {
    const e = explainSnapshot(
      job([
        at(rank(0, [world(2, 0, {})]), 'MPI_Finalize', 40),
        at(rank(1, [world(2, 1, { receives: [op({ peer: 0, tag: 6 })] })]), 'MPI_Wait', 21),
      ]),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.lead).toMatch(
      /^Rank 1 waits in MPI_Wait for a message from rank 0, tag 6, at a\.c:21; rank 0 is in MPI_Finalize/,
    );
    expect(e.lead).not.toContain('never started');
  });

  it('no false hang: a send with another tag that is complete proves nothing about this receive', () => {
    const e = explainSnapshot(
      job([
        at(
          rank(0, [world(2, 0, { sends: [op({ peer: 1, tag: 7, status: 'complete' })] })]),
          'MPI_Finalize',
          40,
        ),
        at(rank(1, [world(2, 1, { receives: [op({ peer: 0, tag: 6 })] })]), 'MPI_Wait', 21),
      ]),
    );
    expect(e.lead).not.toContain('never started');
  });

  it('no false hang: the receive waits for a rank that still computes', () => {
    const e = explainSnapshot(
      job([
        at(rank(0, [world(2, 0, {})]), null, 12),
        at(rank(1, [world(2, 1, { receives: [op({ peer: 0, tag: 6 })] })]), 'MPI_Wait', 21),
      ]),
    );
    expect(e.verdict).toBe('unknown');
    expect(e.headline).toBe('No deadlock');
  });
});
