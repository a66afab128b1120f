import { explainSnapshot, type NearMiss, nearMisses, type OpRef } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { comm, ompiJob, op, rank, snapshot, world } from './fixtures.js';

const ref = (r: number, commKey: string, commName: string, queue: OpRef['queue'], index = 0): OpRef => ({
  rank: r,
  commKey,
  commName,
  queue,
  index,
});
const W2 = 'MPI_COMM_WORLD#2#world';
const HIDDEN_UNEXPECTED = (r: number) =>
  `rank ${r}'s unexpected queue is not visible: messages already delivered cannot be checked; reasoning from the senders' send queues`;

describe('near misses', () => {
  it('names a tag mismatch from both sides', () => {
    // Rank 0 waits for tag 1 from rank 1; rank 1 is blocked sending tag 2 to rank 0.
    const snap = ompiJob(2, (r) =>
      r === 0 ? { receives: [op({ peer: 1, tag: 1 })] } : { sends: [op({ peer: 0, tag: 2 })] },
    );
    const expected: NearMiss[] = [
      {
        kind: 'receive',
        op: ref(0, W2, 'MPI_COMM_WORLD', 'receives'),
        peer: 1,
        tag: 1,
        candidates: [
          { op: ref(1, W2, 'MPI_COMM_WORLD', 'sends'), peer: 1, tag: 2, differs: ['tag'], wouldMatch: false },
        ],
        notes: [HIDDEN_UNEXPECTED(0)],
      },
      {
        kind: 'send',
        op: ref(1, W2, 'MPI_COMM_WORLD', 'sends'),
        peer: 0,
        tag: 2,
        candidates: [
          {
            op: ref(0, W2, 'MPI_COMM_WORLD', 'receives'),
            peer: 1,
            tag: 1,
            differs: ['tag'],
            wouldMatch: false,
          },
        ],
        notes: [],
      },
    ];
    expect(nearMisses(snap)).toEqual({ items: expected, total: 2 });
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('deadlock');
    expect(e.summary).toContain(
      "Near miss (1 of 2): rank 0's receive from rank 1 (tag 1, MPI_COMM_WORLD) vs rank 1's send (tag 2, MPI_COMM_WORLD): differs in tag.",
    );
  });

  it('names a communicator mismatch (sent on world, received on a duplicate)', () => {
    const dupName = 'MPI COMMUNICATOR 3 DUP FROM 0';
    const dupKey = `${dupName}#2#0,1`;
    const dup = (r: number, receives: ReturnType<typeof op>[]) =>
      comm(dupName, 2, r, [0, 1], { receives }, '3');
    const snap = snapshot([
      rank(0, [world(2, 0, {}), dup(0, [op({ peer: 1, tag: 5 })])]),
      rank(1, [world(2, 1, { sends: [op({ peer: 0, tag: 5 })] }), dup(1, [])]),
    ]);
    const r = nearMisses(snap);
    expect(r.total).toBe(2);
    expect(r.items[0]).toEqual({
      kind: 'receive',
      op: ref(0, dupKey, dupName, 'receives'),
      peer: 1,
      tag: 5,
      candidates: [
        {
          op: ref(1, W2, 'MPI_COMM_WORLD', 'sends'),
          peer: 1,
          tag: 5,
          differs: ['communicator'],
          wouldMatch: false,
        },
      ],
      notes: [HIDDEN_UNEXPECTED(0)],
    });
    expect(r.items[1]?.candidates).toEqual([
      {
        op: ref(0, dupKey, dupName, 'receives'),
        peer: 1,
        tag: 5,
        differs: ['communicator'],
        wouldMatch: false,
      },
    ]);
  });

  it('reasons from unexpected messages when the sender cannot show its send queue (MPICH)', () => {
    const mpichWorld = (r: number, receives: ReturnType<typeof op>[], unexpected: ReturnType<typeof op>[]) =>
      comm('MPI_COMM_WORLD', 2, r, null, { sends: null, receives, unexpected }, `0x7${r}0`);
    const snap = snapshot(
      [
        rank(0, [
          mpichWorld(0, [op({ peer: 1, global: null, tag: 1 })], [op({ peer: 1, global: null, tag: 2 })]),
        ]),
        rank(1, [mpichWorld(1, [], [])]),
      ],
      'mpich',
    );
    expect(nearMisses(snap).items).toEqual([
      {
        kind: 'receive',
        op: ref(0, W2, 'MPI_COMM_WORLD', 'receives'),
        peer: 1,
        tag: 1,
        candidates: [
          {
            op: ref(0, W2, 'MPI_COMM_WORLD', 'unexpected'),
            peer: 1,
            tag: 2,
            differs: ['tag'],
            wouldMatch: false,
          },
        ],
        notes: ["rank 1's send queue is not visible: reasoning from the unexpected messages at rank 0"],
      },
    ]);
  });

  it('shows a pending send that fully matches a posted receive as would-match', () => {
    const snap = ompiJob(2, (r) =>
      r === 0 ? { receives: [op({ peer: 1, tag: null })] } : { sends: [op({ peer: 0, tag: 9 })] },
    );
    const r = nearMisses(snap);
    expect(r.total).toBe(1);
    expect(r.items[0]?.candidates).toEqual([
      { op: ref(1, W2, 'MPI_COMM_WORLD', 'sends'), peer: 1, tag: 9, differs: [], wouldMatch: true },
    ]);
  });

  it('ignores messages that differ in two fields, and counts past the limit', () => {
    const many = ompiJob(8, (r) => ({
      sends: [op({ peer: (r + 1) % 8, tag: 1 })],
      receives: [op({ peer: (r + 1) % 8, tag: 1 })],
    }));
    expect(nearMisses(many, { limit: 3 }).items).toHaveLength(3);
    expect(nearMisses(many, { limit: 3 }).total).toBe(16);
    expect(nearMisses(many).total).toBe(16);
    // Rank 2 sends tag 2 where rank 0 waits for tag 1 from rank 1: source and tag differ.
    const two = ompiJob(3, (r) => {
      if (r === 0) return { receives: [op({ peer: 1, tag: 1 })] };
      if (r === 2) return { sends: [op({ peer: 0, tag: 2 })] };
      return {};
    });
    expect(nearMisses(two)).toEqual({ items: [], total: 0 });
  });
});
