// The hangs that are not wait-for cycles (hand-built snapshots with stacks): waits on ranks
// that will never act again (MPI_Finalize, MPI_Abort, exited), why the message never came,
// collectives whose members disagree on a root or are elsewhere, a point-to-point deadlock
// that holds a collective, the honest last resort ("stuck"), and the jobs that must not be
// called hung.
import {
  explainSnapshot,
  findMpiCall,
  formatExplanation,
  type JobSnapshot,
  type MpiCall,
  type Operation,
  type RankSnapshot,
  userFrame,
  validateSnapshot,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { APP, at, failedRank, frame, LIBMPI, op, rank, snapshot, world } from './fixtures.js';

/** Call arguments on MPI_COMM_WORLD (id '0'); peer null = MPI_ANY_SOURCE. */
function args(peer: number | null, tag: number | null, root?: number): MpiCall['args'] {
  return {
    peer: peer === null ? { local: null, global: null } : { local: peer, global: peer },
    tag,
    communicator: '0',
    count: 1,
    ...(root === undefined ? {} : { root }),
  };
}

const NONE: MpiCall['args'] = { peer: null, tag: null, communicator: '0', count: 1 };

function received(from: number, tag: number): Operation {
  return {
    ...op({ peer: null, tag, status: 'complete' }),
    actual: { peer: { local: from, global: from }, tag, length: 4 },
  };
}

function job(ranks: RankSnapshot[], library: 'openmpi' | 'mpich' = 'openmpi'): JobSnapshot {
  const s = snapshot(ranks, library);
  expect(validateSnapshot(s).ok).toBe(true);
  return s;
}

describe('waits on a rank that will never act again', () => {
  it('a receive from a rank in MPI_Finalize is a deadlock naming both calls and lines', () => {
    const e = explainSnapshot(
      job([
        at(rank(0, [world(2, 0, {})]), 'MPI_Finalize', 40),
        at(rank(1, [world(2, 1, { receives: [op({ peer: 0, tag: 5 })] })]), 'MPI_Recv', 31, args(0, 5)),
      ]),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.headline).toBe('Deadlock');
    expect(e.lead).toMatch(
      /^Rank 1 waits in MPI_Recv for a message from rank 0, tag 5, at a\.c:31; rank 0 is in MPI_Finalize \(a\.c:40\) and will never send it\./,
    );
    // Open MPI shows no unexpected messages: say what could not be seen, not "never sent".
    expect(e.lead).toContain('this library shows no unexpected messages');
    expect(e.deadlock?.deadEnds.map((d) => [d.from, d.to, d.reason])).toEqual([[1, 0, 'final']]);
    expect(e.deadlock?.ranks).toBe('1');
    expect(e.finished).toBe('0');
    const text = formatExplanation(e);
    expect(text).toContain('Rank 0 is in MPI_Finalize and will never send or receive again, at a.c:40');
    expect(text).not.toContain('computing');
    expect(text).toContain(
      'dead end: 1 -> 0 (in MPI_Finalize or MPI_Abort): receive MPI_COMM_WORLD receives[0]@1 tag 5',
    );
    expect(text).toContain('blocked behind the dead ends: 1');
    expect(e.collectiveMismatches).toEqual([]);
  });

  it('a send to a rank in MPI_Abort: will never receive it', () => {
    const e = explainSnapshot(
      job([
        at(rank(0, [world(2, 0, {})]), 'MPI_Abort', 12, NONE),
        at(rank(1, [world(2, 1, { sends: [op({ peer: 0, tag: 3 })] })]), 'MPI_Ssend', 20, args(0, 3)),
      ]),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.lead).toMatch(
      /^Rank 1 waits in MPI_Ssend to send to rank 0, tag 3, at a\.c:20; rank 0 is in MPI_Abort \(a\.c:12\) and will never receive it\./,
    );
  });

  it('a rank that exited (its pid is gone) is a dead end, not a rank assumed able to go on', () => {
    const gone: RankSnapshot = {
      ...failedRank(0),
      state: { kind: 'error', code: 'MQD_E_NO_SUCH_PID', message: 'no running process 1000' },
    };
    const e = explainSnapshot(
      job([
        gone,
        at(rank(1, [world(2, 1, { receives: [op({ peer: 0, tag: 5 })] })]), 'MPI_Recv', 31, args(0, 5)),
      ]),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.lead).toMatch(/rank 0 has exited \(MQD_E_NO_SUCH_PID\) and will never send it\./);
    expect(e.partialReasons.join(' ')).toContain('will never send or receive again');
    expect(e.partialReasons.join(' ')).not.toContain('assumed able to proceed');
    // A rank that could not be read for another reason is still assumed able to go on.
    const unread = explainSnapshot(
      job([
        failedRank(0),
        at(rank(1, [world(2, 1, { receives: [op({ peer: 0, tag: 5 })] })]), 'MPI_Recv', 31, args(0, 5)),
      ]),
    );
    expect(unread.verdict).not.toBe('deadlock');
  });

  it('a rank blocked behind a dead end is a dead end for those that wait on it', () => {
    // 2 waits for 1, 1 waits for 0, 0 is in MPI_Finalize: both 1 and 2 can never proceed.
    const e = explainSnapshot(
      job([
        at(rank(0, [world(3, 0, {})]), 'MPI_Finalize', 40),
        at(rank(1, [world(3, 1, { receives: [op({ peer: 0, tag: 5 })] })]), 'MPI_Recv', 31, args(0, 5)),
        at(rank(2, [world(3, 2, { receives: [op({ peer: 1, tag: 6 })] })]), 'MPI_Recv', 33, args(1, 6)),
      ]),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.deadlock?.ranks).toBe('1-2');
    expect(e.deadlock?.deadEnds.map((d) => [d.from, d.to])).toEqual([[1, 0]]);
  });

  it('every rank in MPI_Finalize is no hang', () => {
    const e = explainSnapshot(
      job([
        at(rank(0, [world(2, 0, {})]), 'MPI_Finalize', 40),
        at(rank(1, [world(2, 1, {})]), 'MPI_Finalize', 40),
      ]),
    );
    expect(e.verdict).toBe('idle');
    expect(e.deadlock).toBeNull();
  });
});

describe('why the message never came', () => {
  const finalize0 = (q: Parameters<typeof world>[2] = {}) =>
    at(rank(0, [world(2, 0, q)]), 'MPI_Finalize', 40);

  it('the near miss: the peer\u2019s message with another tag sits unexpected at the receiver', () => {
    const e = explainSnapshot(
      job(
        [
          finalize0({ unexpected: [] }),
          at(
            rank(1, [
              world(2, 1, {
                receives: [op({ peer: 0, tag: 5, global: null })],
                unexpected: [op({ peer: 0, tag: 4, status: 'complete', global: null })],
              }),
            ]),
            'MPI_Recv',
            31,
            args(0, 5),
          ),
        ],
        'mpich',
      ),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.lead).toContain("Rank 0's message with tag 4 is unexpected at rank 1: it differs in tag.");
  });

  it('a message race: the receive from MPI_ANY_SOURCE took the only message', () => {
    const e = explainSnapshot(
      job([
        finalize0(),
        at(
          rank(1, [world(2, 1, { receives: [received(0, 7), op({ peer: 0, tag: 7 })] })]),
          'MPI_Waitall',
          31,
        ),
      ]),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.lead).toMatch(/^Rank 1 waits in MPI_Waitall for a message from rank 0, tag 7, at a\.c:31;/);
    expect(e.lead).toContain(
      "A message race: rank 1's receive from any source (tag 7) took rank 0's message (tag 7) first",
    );
  });

  it('a send to the wrong rank: the message waits unexpected at another rank', () => {
    const e = explainSnapshot(
      job(
        [
          at(rank(0, [world(3, 0, { unexpected: [] })]), 'MPI_Finalize', 40),
          at(
            rank(1, [world(3, 1, { receives: [op({ peer: 0, tag: 5 })], unexpected: [] })]),
            'MPI_Recv',
            31,
            args(0, 5),
          ),
          at(rank(2, [world(3, 2, { unexpected: [op({ peer: 0, tag: 5, status: 'complete' })] })]), null, 50),
        ],
        'mpich',
      ),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.lead).toContain("Rank 0's message with tag 5 is unexpected at rank 2: sent to the wrong rank.");
  });

  it('no queue holds the message where the library would show it: the peer passed its line without it', () => {
    const e = explainSnapshot(
      job(
        [
          finalize0({ unexpected: [] }),
          at(
            rank(1, [world(2, 1, { receives: [op({ peer: 0, tag: 5 })], unexpected: [] })]),
            'MPI_Recv',
            31,
            args(0, 5),
          ),
        ],
        'mpich',
      ),
    );
    expect(e.lead).toContain(
      'No queue holds a message from rank 0 to rank 1 with any tag: rank 0 reached a.c:40 without sending it',
    );
  });
});

describe('collectives that cannot complete', () => {
  it('members of one MPI_Reduce with different roots: a collective hang naming each root and line', () => {
    const e = explainSnapshot(
      job(
        [0, 1, 2, 3].map((r) =>
          at(rank(r, [world(4, r, {})]), 'MPI_Reduce', r === 3 ? 19 : 17, args(null, null, r === 3 ? 1 : 0)),
        ),
      ),
    );
    expect(e.verdict).toBe('collective-hang');
    expect(e.headline).toBe('Collective hang on MPI_COMM_WORLD');
    expect(e.lead).toBe(
      'ranks 0-2 in MPI_Reduce with root 0 (a.c:17), rank 3 with root 1 (a.c:19): the roots differ, so it can never complete.',
    );
  });

  it('members of one MPI_Reduce that agree on the root are no hang on one snapshot', () => {
    const e = explainSnapshot(
      job([0, 1].map((r) => at(rank(r, [world(2, r, {})]), 'MPI_Reduce', 17, args(null, null, 0)))),
    );
    expect(e.verdict).not.toBe('collective-hang');
    expect(e.verdict).not.toBe('stuck');
    expect(e.lead).toBe('Ranks 0-1 are in a collective every member has entered: it can complete.');
  });

  it('a member that skipped the barrier is in MPI_Finalize: the hang says where it is', () => {
    const e = explainSnapshot(
      job([
        ...[0, 1, 2].map((r) => at(rank(r, [world(4, r, {})]), 'MPI_Barrier', 17, NONE)),
        at(rank(3, [world(4, 3, {})]), 'MPI_Finalize', 25),
      ]),
    );
    expect(e.verdict).toBe('collective-hang');
    expect(e.lead).toBe(
      'ranks 0-2 in MPI_Barrier on MPI_COMM_WORLD, rank 3 in MPI_Finalize (a.c:25); they can never meet.',
    );
    const text = formatExplanation(e);
    expect(text).toContain(
      'Ranks 0-2 wait in MPI_Barrier on MPI_COMM_WORLD for rank 3, which is in MPI_Finalize and will never enter it',
    );
    expect(text).not.toContain('which is not in it');
    expect(text).not.toContain('computing');
  });

  it('causes before consequences: a wrong-tag pair holds two ranks in a barrier; the verdict is the deadlock', () => {
    const e = explainSnapshot(
      job([
        at(rank(0, [world(4, 0, { receives: [op({ peer: 1, tag: 2 })] })]), 'MPI_Recv', 30, args(1, 2)),
        at(rank(1, [world(4, 1, { receives: [op({ peer: 0, tag: 2 })] })]), 'MPI_Recv', 30, args(0, 2)),
        ...[2, 3].map((r) => at(rank(r, [world(4, r, {})]), 'MPI_Barrier', 40, NONE)),
      ]),
    );
    expect(e.verdict).toBe('deadlock');
    expect(e.headline).toBe('Deadlock');
    expect(e.deadlock?.cycles[0]?.ranks).toEqual([0, 1]);
    expect(e.summary).toContain(
      'Ranks 2-3 in MPI_Barrier on MPI_COMM_WORLD wait for ranks held by the cycle: a consequence of the deadlock, not its cause.',
    );
    expect(e.diagnosis.cycle?.text).toBe(
      'Cycle: rank 0 waits for rank 1 (tag 2, a.c:30) / rank 1 waits for rank 0 (tag 2, :30)',
    );
  });
});

describe('the last resort, and no false hang', () => {
  it('every rank blocked and no rule proves why: stuck, never "no deadlock"', () => {
    const e = explainSnapshot(
      job([
        at(rank(0, [world(2, 0, {})]), 'MPI_Waitall', 40),
        at(rank(1, [world(2, 1, {})]), 'MPI_Waitall', 31),
      ]),
    );
    expect(e.verdict).toBe('stuck');
    expect(e.headline).toBe('Stuck');
    expect(e.summary).not.toContain('No deadlock');
    expect(e.summary).toContain('Stacks: ranks 0-1 in MPI_Waitall');
    const text = formatExplanation(e);
    expect(text).toContain(
      'Rank 0 is blocked in MPI_Waitall, with nothing in the queues to say on whom, at a.c:40',
    );
    expect(text).toContain(
      'Rank 1 is blocked in MPI_Waitall, with nothing in the queues to say on whom, at a.c:31',
    );
  });

  it('stuck across snapshots says for how long nothing moved', () => {
    const ranks = [
      at(rank(0, [world(2, 0, { receives: [op({ peer: 1, tag: 1 })] })]), 'MPI_Waitall', 40),
      at(rank(1, [world(2, 1, {})]), 'MPI_Waitall', 31),
    ];
    const before = snapshot(ranks, 'openmpi', '2026-03-01T10:00:00.000Z');
    const now = snapshot(ranks, 'openmpi', '2026-03-01T10:00:30.000Z');
    const e = explainSnapshot(now, [before]);
    expect(e.verdict).toBe('stuck');
    expect(e.lead).toMatch(/nothing moved between .* \(30 s\)\./);
  });

  it('a late sender that computes: no deadlock, naming the rank that can still act', () => {
    const e = explainSnapshot(
      job([
        at(rank(0, [world(2, 0, {})]), null, 12),
        at(rank(1, [world(2, 1, { receives: [op({ peer: 0, tag: 5 })] })]), 'MPI_Recv', 31, args(0, 5)),
      ]),
    );
    expect(e.verdict).toBe('unknown');
    expect(e.headline).toBe('No deadlock');
    expect(e.lead).toBe('1 rank waits, but rank 0 can still act (it is not blocked in MPI) and satisfy it.');
  });

  it('a slow ring (each rank waits for the previous one, one rank still computing) is no hang', () => {
    const n = 4;
    const e = explainSnapshot(
      job(
        Array.from({ length: n }, (_, r) =>
          r === 2
            ? at(rank(r, [world(n, r, {})]), null, 12)
            : at(
                rank(r, [world(n, r, { receives: [op({ peer: (r + n - 1) % n, tag: 1 })] })]),
                'MPI_Recv',
                31,
                args((r + n - 1) % n, 1),
              ),
        ),
      ),
    );
    expect(e.verdict).toBe('unknown');
    expect(e.lead).toBe(
      '3 ranks wait, but rank 2 can still act (it is not blocked in MPI) and satisfy them.',
    );
  });

  it('a long collective that moves between snapshots is progressing', () => {
    const inColl = (tag: number) =>
      [0, 1].map((r) =>
        at(rank(r, [world(2, r, { receives: [op({ peer: 1 - r, tag })] })]), 'MPI_Allreduce', 17, NONE),
      );
    const before = snapshot(inColl(-12), 'openmpi', '2026-03-01T10:00:00.000Z');
    const now = snapshot(inColl(-14), 'openmpi', '2026-03-01T10:00:05.000Z');
    const e = explainSnapshot(now, [before]);
    expect(e.verdict).toBe('progressing');
  });
});

describe("Open MPI's MPI_Finalize, a tail call", () => {
  it('a stack with only ompi_mpi_finalize under main is in MPI_Finalize, never computing', () => {
    const frames = [
      frame('usleep', null, null, '/lib/x86_64-linux-gnu/libc.so.6'),
      frame('ompi_mpi_finalize', null, null, LIBMPI),
      frame('main', '/home/u/a.c', 40, APP),
    ];
    const t = { tid: 7, name: 'a.out', main: true, frames, truncated: false, error: null };
    expect(findMpiCall([t])?.function).toBe('MPI_Finalize');
    // The same name in the user's own program is not MPI's.
    const own = { ...t, frames: [frame('ompi_mpi_finalize', '/home/u/a.c', 3, APP), ...frames.slice(2)] };
    expect(findMpiCall([own])).toBeNull();
  });
});

describe('MPICH: the rank that went into MPI_Finalize has exited', () => {
  const gone = (r: number): RankSnapshot => ({
    ...failedRank(r),
    state: { kind: 'error', code: 'MQD_E_ZOMBIE', message: 'pid has exited and is a zombie' },
  });

  it('a barrier whose last member exited: a collective hang that says so', () => {
    const e = explainSnapshot(
      job(
        [...[0, 1, 2].map((r) => at(rank(r, [world(4, r, {})]), 'MPI_Barrier', 17, NONE)), gone(3)],
        'mpich',
      ),
    );
    expect(e.verdict).toBe('collective-hang');
    expect(e.lead).toBe('ranks 0-2 in MPI_Barrier on MPI_COMM_WORLD, rank 3 exited; they can never meet.');
    expect(formatExplanation(e)).toContain('for rank 3, which has exited');
  });

  it("the progress loop's clock read in the vDSO is not the user's line", () => {
    const r = at(rank(1, [world(2, 1, {})]), 'MPI_Recv', 31, args(0, 5));
    const threads = r.threads ?? [];
    const t = threads[0];
    if (t === undefined) throw new Error('no thread');
    const withVdso = {
      ...r,
      threads: [
        { ...t, frames: [frame('__vdso_clock_gettime', null, null, 'linux-vdso.so.1'), ...t.frames] },
      ],
    };
    expect(userFrame(withVdso)?.frame.function).toBe('main');
  });
});
