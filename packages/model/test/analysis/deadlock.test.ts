import {
  type DeadlockCycle,
  explainSnapshot,
  findDeadlocks,
  syntheticRingDeadlock,
  type WaitEdgeOp,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { comm, failedRank, ompiJob, op, rank, snapshot, world } from './fixtures.js';

const W = (n: number) => `MPI_COMM_WORLD#${n}#world`;
const ref = (
  r: number,
  n: number,
  queue: WaitEdgeOp['queue'],
  evidence: WaitEdgeOp['evidence'],
  tag: number | null,
  index = 0,
): WaitEdgeOp => ({ rank: r, commKey: W(n), commName: 'MPI_COMM_WORLD', queue, index, evidence, tag });

describe('deadlock: send cycles', () => {
  it('finds the 2-rank cycle of two blocked sends, with the sends as evidence', () => {
    const snap = ompiJob(2, (r) => ({ sends: [op({ peer: 1 - r, tag: 10 + r })] }));
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('deadlock');
    expect(e.partial).toBe(false);
    expect(e.deadlock).toEqual({
      count: 2,
      ranks: '0-1',
      cycleTotal: 1,
      blockedBehind: '',
      deadEnds: [],
      deadEndTotal: 0,
      cycles: [
        {
          ranks: [0, 1],
          componentSize: 2,
          certain: true,
          edges: [
            { from: 0, to: 1, inferred: false, ops: [ref(0, 2, 'sends', 'send', 10)] },
            { from: 1, to: 0, inferred: false, ops: [ref(1, 2, 'sends', 'send', 11)] },
          ],
        },
      ],
    });
  });

  it('finds one N-rank cycle in rank order', () => {
    const n = 5;
    const snap = ompiJob(n, (r) => ({ sends: [op({ peer: (r + 1) % n, tag: 3 })] }));
    const w = findDeadlocks(snap);
    expect(w.deadlocked).toEqual([0, 1, 2, 3, 4]);
    expect(w.cycles).toHaveLength(1);
    const c = w.cycles[0] as DeadlockCycle;
    expect(c.ranks).toEqual([0, 1, 2, 3, 4]);
    expect(c.edges.map((e) => [e.from, e.to])).toEqual([
      [0, 1],
      [1, 2],
      [2, 3],
      [3, 4],
      [4, 0],
    ]);
    expect(c.edges[4]?.ops).toEqual([ref(4, n, 'sends', 'send', 3)]);
  });

  it('reports a ring of 16,384 ranks as one cycle of 16,384 ranks', () => {
    const n = 16_384;
    const w = findDeadlocks(syntheticRingDeadlock({ ranks: n }));
    expect(w.deadlocked).toHaveLength(n);
    expect(w.cycleTotal).toBe(1);
    const c = w.cycles[0] as DeadlockCycle;
    expect(c.ranks).toHaveLength(n);
    expect(c.ranks.every((r, i) => r === i)).toBe(true);
    expect(c.componentSize).toBe(n);
    // Each edge: rank r's blocked send and its receive, both aimed at r+1.
    expect(c.edges[n - 1]).toEqual({
      from: n - 1,
      to: 0,
      inferred: false,
      ops: [ref(n - 1, n, 'sends', 'send', 7), ref(n - 1, n, 'receives', 'receive', 7, 1)],
    });
  });

  it('reports a rank that waits on a cycle as blocked behind it, not as part of it', () => {
    // 0 <-> 1 send to each other; 2 waits to receive from 0.
    const snap = ompiJob(3, (r) =>
      r === 2 ? { receives: [op({ peer: 0, tag: 1 })] } : { sends: [op({ peer: 1 - r, tag: 1 })] },
    );
    const w = findDeadlocks(snap);
    expect(w.deadlocked).toEqual([0, 1, 2]);
    expect(w.cycles.map((c) => c.ranks)).toEqual([[0, 1]]);
    expect(w.blockedBehind).toEqual([2]);
  });

  it('does not report a chain that ends at a rank with nothing pending', () => {
    const snap = ompiJob(3, (r) => (r === 0 ? {} : { receives: [op({ peer: r - 1, tag: 1 })] }));
    const e = explainSnapshot(snap);
    expect(e.deadlock).toBeNull();
    expect(e.verdict).toBe('unknown');
    expect(e.waits.waitingOnFree).toBe('0');
  });
});

describe('deadlock: wildcard receives', () => {
  it('a wildcard receive with a free member breaks the cycle', () => {
    // 0 waits for 1; 1 waits for ANY_SOURCE; 2 has nothing pending, so 1 can be released by 2.
    const snap = ompiJob(3, (r) => {
      if (r === 0) return { receives: [op({ peer: 1, tag: 1 })] };
      if (r === 1) return { receives: [op({ peer: null, global: null, tag: 2 })] };
      return {};
    });
    const w = findDeadlocks(snap);
    expect(w.deadlocked).toEqual([]);
    expect(w.cycles).toEqual([]);
    expect(explainSnapshot(snap).verdict).toBe('unknown');
  });

  it('a wildcard receive whose every other member is blocked does not break it', () => {
    // Same, but 2 waits for 0: nobody can send to 1.
    const snap = ompiJob(3, (r) => {
      if (r === 0) return { receives: [op({ peer: 1, tag: 1 })] };
      if (r === 1) return { receives: [op({ peer: null, global: null, tag: 2 })] };
      return { receives: [op({ peer: 0, tag: 3 })] };
    });
    const w = findDeadlocks(snap);
    expect(w.deadlocked).toEqual([0, 1, 2]);
    expect(w.cycles).toEqual([
      {
        ranks: [0, 1],
        componentSize: 3,
        certain: true,
        edges: [
          { from: 0, to: 1, inferred: false, ops: [ref(0, 3, 'receives', 'receive', 1)] },
          { from: 1, to: 0, inferred: false, ops: [ref(1, 3, 'receives', 'wildcard-receive', 2)] },
        ],
      },
    ]);
  });

  it('a lone wildcard waiter never forms a cycle with itself', () => {
    // 0 waits for ANY on a 2-rank communicator {0,1}; 1 and 2 wait for each other.
    const pair = (r: number, q: Parameters<typeof comm>[4]) => comm('pair', 2, r, [0, 1], q, '5');
    const snap = snapshot([
      rank(0, [world(3, 0, {}), pair(0, { receives: [op({ peer: null, global: null, tag: 4 })] })]),
      rank(1, [world(3, 1, { receives: [op({ peer: 2, tag: 1 })] }), pair(1, {})]),
      rank(2, [world(3, 2, { receives: [op({ peer: 1, tag: 1 })] })]),
    ]);
    const w = findDeadlocks(snap);
    expect(w.deadlocked).toEqual([0, 1, 2]);
    expect(w.cycles.map((c) => c.ranks)).toEqual([[1, 2]]);
    expect(w.blockedBehind).toEqual([0]);
  });

  it('every rank in ANY_SOURCE with nothing sent: one short cycle, the whole job as its component', () => {
    const n = 64;
    const snap = ompiJob(n, () => ({ receives: [op({ peer: null, global: null, tag: null })] }));
    const w = findDeadlocks(snap);
    expect(w.deadlocked).toHaveLength(n);
    expect(w.cycleTotal).toBe(1);
    expect(w.cycles[0]?.ranks).toEqual([0, 1]);
    expect(w.cycles[0]?.componentSize).toBe(n);
    expect(w.cycles[0]?.edges.map((e) => e.ops[0]?.evidence)).toEqual([
      'wildcard-receive',
      'wildcard-receive',
    ]);
  });
});

describe('deadlock: communicators without groups (MPICH)', () => {
  it('takes the members of a group-less sub-communicator from the ranks that list it', () => {
    // 3 ranks; "row" = {0,1} with no group. 0 waits for ANY on row, 1 waits for 0 on world,
    // 2 computes. Only 1 could release 0, so 0 and 1 are deadlocked although 2 is free.
    const mpich = (name: string, size: number, r: number, local: number, q: Parameters<typeof comm>[4]) =>
      comm(name, size, local, null, { sends: null, unexpected: [], ...q }, `0x${name.length}${r}0`);
    const any = op({ peer: null, global: null, tag: 1 });
    const snap = snapshot(
      [
        rank(0, [mpich('MPI_COMM_WORLD', 3, 0, 0, {}), mpich('row', 2, 0, 0, { receives: [any] })]),
        rank(1, [
          mpich('MPI_COMM_WORLD', 3, 1, 1, { receives: [op({ peer: 0, global: null, tag: 2 })] }),
          // A receive from row's local rank 0: without a group it cannot be mapped to a world rank.
          mpich('row', 2, 1, 1, { receives: [op({ peer: 0, global: null, tag: 3 })] }),
        ]),
        rank(2, [mpich('MPI_COMM_WORLD', 3, 2, 2, {})]),
      ],
      'mpich',
    );
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('deadlock');
    expect(e.deadlock?.ranks).toBe('0-1');
    expect(
      e.deadlock?.cycles[0]?.edges.map((x) => [x.from, x.to, x.ops.map((o) => `${o.commKey} ${o.evidence}`)]),
    ).toEqual([
      [0, 1, ['row#2#? wildcard-receive']],
      [1, 0, ['MPI_COMM_WORLD#3#world receive']],
    ]);
    expect(e.waits.unresolvedWaits).toBe(1);
    expect(e.limits).toContainEqual({
      code: 'peers-unmapped',
      text: '1 pending operations name a peer that cannot be mapped to a world rank (no group for their communicator); they are assumed satisfiable',
    });
  });
});

describe('deadlock: collectives', () => {
  it('does not report collective-internal traffic as a p2p deadlock', () => {
    // Two ranks waiting for each other, but only with negative (collective) tags, on MPICH's
    // unnamed internal copy of the world and on world itself.
    const internal = (r: number) =>
      comm(
        '',
        2,
        r,
        null,
        { sends: null, receives: [op({ peer: 1 - r, global: null, tag: -1000 })], unexpected: [] },
        `0x${r}a`,
      );
    const snap = snapshot(
      [0, 1].map((r) =>
        rank(r, [
          comm(
            'MPI_COMM_WORLD',
            2,
            r,
            null,
            { sends: null, receives: [op({ peer: 1 - r, global: null, tag: -7 })], unexpected: [] },
            `0x${r}b`,
          ),
          internal(r),
        ]),
      ),
      'mpich',
    );
    const e = explainSnapshot(snap);
    expect(e.deadlock).toBeNull();
    expect(e.verdict).toBe('collective-hang');
    expect(e.collectives).toEqual([
      {
        commKey: '#2#?',
        commName: '',
        commSize: 2,
        rankCount: 2,
        ranks: '0-1',
        waitingFor: '',
        lateWaitOn: '',
      },
      {
        commKey: 'MPI_COMM_WORLD#2#world',
        commName: 'MPI_COMM_WORLD',
        commSize: 2,
        rankCount: 2,
        ranks: '0-1',
        waitingFor: '',
        lateWaitOn: '',
      },
    ]);
    expect(e.waits.clauses).toBe(0);
  });
});

describe('deadlock: partial snapshots', () => {
  it('flags a snapshot with an unreadable rank as partial and does not claim a deadlock through it', () => {
    // A 3-rank send ring whose rank 2 could not be read.
    const snap = ompiJob(3, (r) => ({ sends: [op({ peer: (r + 1) % 3, tag: 1 })] }));
    snap.ranks[2] = failedRank(2);
    const e = explainSnapshot(snap);
    expect(e.partial).toBe(true);
    expect(e.partialReasons).toEqual([
      'rank 2 could not be read (reading it failed, MQD_E_PTRACE_DENIED: cannot read pid): assumed able to proceed, so a deadlock that needs it blocked is not reported',
    ]);
    expect(e.deadlock).toBeNull();
    expect(e.verdict).toBe('unknown');
    expect(e.dependsOnUnknown).toBe('0-1');
  });

  it('still reports a deadlock that does not involve the unreadable rank', () => {
    const snap = ompiJob(4, (r) => (r < 2 ? { sends: [op({ peer: 1 - r, tag: 1 })] } : {}));
    snap.ranks[3] = failedRank(3);
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('deadlock');
    expect(e.partial).toBe(true);
    expect(e.deadlock?.ranks).toBe('0-1');
    expect(e.dependsOnUnknown).toBe('');
  });
});

describe('deadlock: MPICH ring of synchronous sends (seen on real MPICH 4.0.2)', () => {
  it('infers the ring from unexpected messages the DLL reports as complete', () => {
    // MPICH omits blocking MPI_Ssend from its send queue; each rank holds its left
    // neighbour's eager-sync message as an unexpected entry whose status reads "complete"
    // (the data arrived; the sender still waits for the match).
    const n = 4;
    const snap = snapshot(
      Array.from({ length: n }, (_, r) =>
        rank(r, [
          comm('MPI_COMM_WORLD', n, r, null, {
            sends: [],
            receives: [],
            unexpected: [op({ peer: (r - 1 + n) % n, global: null, tag: 42, status: 'complete', length: 0 })],
          }),
        ]),
      ),
      'mpich',
    );
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('deadlock');
    const cycles = e.deadlock?.cycles ?? [];
    expect(cycles).toHaveLength(1);
    expect(cycles[0]?.ranks).toEqual([0, 1, 2, 3]); // r-1 sent to r and waits for it
    expect(cycles[0]?.certain).toBe(false);
  });
});
