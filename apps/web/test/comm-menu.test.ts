import { buildEdges, syntheticRingDeadlock, syntheticWrongTagHang } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { commMenuEntries, MENU_LIMIT } from '../src/matrix/comm-menu.js';
import { compileFilter, matrixCommKey, NO_FILTER } from '../src/matrix/edges.js';
import { buildPyramid } from '../src/matrix/pyramid.js';
import { comm, op, rank, snapshot } from './fixtures.js';

describe('the matrix communicator menu', () => {
  it('has one MPI_COMM_SELF entry at 16,384 ranks, not one per rank', () => {
    // Open MPI style: every rank's MPI_COMM_SELF has its own group [rank].
    const t = buildEdges(syntheticRingDeadlock({ ranks: 16384, style: 'openmpi' }));
    const { entries } = commMenuEntries(t.comms);
    expect(entries.map((e) => e.text)).toEqual([
      'MPI_COMM_WORLD: ranks 0-16383 (49,152 operations)',
      'MPI_COMM_SELF: one per rank, ranks 0-16383 (0 operations)',
    ]);
    expect(entries[1]?.value).toBe('MPI_COMM_SELF#1#each');
    // MPICH style (no groups): the same single entry.
    const mpich = commMenuEntries(
      buildEdges(syntheticWrongTagHang({ ranks: 16384, style: 'mpich' })).comms,
    ).entries;
    expect(mpich.filter((e) => e.text.startsWith('MPI_COMM_SELF'))).toHaveLength(1);
    expect(mpich).toHaveLength(3);
    expect(mpich.map((e) => e.text)).toContain('unnamed communicator: ranks 0-16383 (0 operations)');
  });

  it('names rank sets compressed, never cut with "..."', () => {
    const even = Array.from({ length: 256 }, (_, i) => 2 * i);
    const ranks = Array.from({ length: 512 }, (_, r) =>
      rank(r, [
        comm({ id: 'w', name: 'MPI_COMM_WORLD', size: 512, localRank: r, world: true }),
        ...(r % 2 === 0 ? [comm({ id: 'e', name: 'evens', size: 256, localRank: r / 2, group: even })] : []),
        ...([0, 1, 2, 5].includes(r)
          ? [
              comm({
                id: 'f',
                name: 'few',
                size: 4,
                localRank: [0, 1, 2, 5].indexOf(r),
                group: [0, 1, 2, 5],
                sends: r === 0 ? [op(1, 1, 3, 8)] : [],
              }),
            ]
          : []),
      ]),
    );
    const { entries } = commMenuEntries(buildEdges(snapshot(ranks)).comms);
    expect(entries.map((e) => e.text)).toEqual([
      'few: ranks 0-2, 5 (1 operation)',
      'evens: even ranks 0-510 (0 operations)',
      'MPI_COMM_WORLD: ranks 0-511 (0 operations)',
    ]);
    expect(entries.some((e) => e.text.includes('...') || e.text.includes('…'))).toBe(false);
  });

  it('lists the busiest communicators and the selected one, and says how many more there are', () => {
    // One communicator per rank pair of a 2,000-rank job: far past the menu's limit.
    const pair = (r: number, peer: number, ops: number) =>
      comm({
        id: `p${Math.min(r, peer)}`,
        name: `pair${Math.min(r, peer)}`,
        size: 2,
        localRank: r < peer ? 0 : 1,
        group: [Math.min(r, peer), Math.max(r, peer)],
        sends: Array.from({ length: ops }, () => op(r < peer ? 1 : 0, peer, 1, 4)),
      });
    const t = buildEdges(
      snapshot(
        Array.from({ length: 2000 }, (_, r) =>
          rank(r, [
            comm({ id: 'w', name: 'MPI_COMM_WORLD', size: 2000, localRank: r, world: true }),
            pair(r, r ^ 1, r < 10 ? 3 : 1),
          ]),
        ),
      ),
    );
    expect(t.comms).toHaveLength(1001);
    const { entries, more } = commMenuEntries(t.comms);
    expect(entries).toHaveLength(MENU_LIMIT);
    expect(more).toBe(1001 - MENU_LIMIT);
    // The busiest first: the pairs of ranks 0-9 send 3 each.
    expect(entries[0]?.text).toBe('pair0: ranks 0-1 (6 operations)');
    const last = t.comms[1000]?.key ?? '';
    const picked = commMenuEntries(t.comms, last);
    expect(picked.entries.map((e) => e.value)).toContain(last);
    expect(picked.more).toBe(1001 - MENU_LIMIT - 1);
  });

  it("filters on the whole MPI_COMM_SELF family, also from one rank's own key", () => {
    const self = (r: number) =>
      comm({ id: 's', name: 'MPI_COMM_SELF', size: 1, localRank: 0, group: [r], sends: [op(0, r, 1, 4)] });
    const t = buildEdges(
      snapshot(
        [0, 1, 2].map((r) =>
          rank(r, [comm({ id: 'w', name: 'MPI_COMM_WORLD', size: 3, localRank: r }), self(r)]),
        ),
      ),
    );
    expect(t.comms.map((c) => [c.key, c.ops, c.members])).toEqual([
      ['MPI_COMM_SELF#1#each', 3, '0-2'],
      ['MPI_COMM_WORLD#3#world', 0, '0-2'],
    ]);
    expect(matrixCommKey('MPI_COMM_SELF#1#2')).toBe('MPI_COMM_SELF#1#each');
    expect(matrixCommKey('pair#2#2,3')).toBe('pair#2#2,3');
    for (const key of ['MPI_COMM_SELF#1#each', 'MPI_COMM_SELF#1#1']) {
      const p = buildPyramid(t, compileFilter({ ...NO_FILTER, comm: key }, t.comms));
      expect(p.ops).toBe(3);
    }
    expect(buildPyramid(t, compileFilter({ ...NO_FILTER, comm: 'other#1#0' }, t.comms)).ops).toBe(0);
  });
});
