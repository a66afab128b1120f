// Collectives whose members give arguments that cannot match beyond the root (type signature:
// count × type size; the reduction's operation), said with what each rank gave and "not
// readable" where an argument did not read; and the collective sentences that say where the
// members a collective waits for are (all of them, as ranges, at 16,384 ranks), and cycles
// through an MPI_ANY_SOURCE receive that name every rank that could answer it.
import {
  explainSnapshot,
  formatExplanation,
  type JobSnapshot,
  type MpiCall,
  type RankSnapshot,
  validateSnapshot,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { at, op, rank, snapshot, world } from './fixtures.js';

/** A collective's arguments on MPI_COMM_WORLD: count, type size and operation where given (absent: not readable). */
function coll(count: number | null, typeSize?: number, opName?: string, root?: number): MpiCall['args'] {
  return {
    peer: null,
    tag: null,
    communicator: '0',
    count,
    ...(typeSize === undefined ? {} : { typeSize }),
    ...(opName === undefined ? {} : { op: opName }),
    ...(root === undefined ? {} : { root }),
  };
}

function job(ranks: RankSnapshot[], library: 'openmpi' | 'mpich' = 'mpich'): JobSnapshot {
  const s = snapshot(ranks, library);
  const v = validateSnapshot(s);
  expect(v.ok ? 'valid' : v.error.message).toBe('valid');
  return s;
}

/** n ranks in `fn` on MPI_COMM_WORLD at a.c:17, rank r with args(r). */
function all(n: number, fn: string, args: (r: number) => MpiCall['args']): JobSnapshot {
  return job(Array.from({ length: n }, (_, r) => at(rank(r, [world(n, r, {})]), fn, 17, args(r))));
}

describe('collectives whose members give arguments that cannot match', () => {
  it('MPI_Allreduce with a count that differs on one rank: a collective hang naming each signature', () => {
    const e = explainSnapshot(all(4, 'MPI_Allreduce', (r) => coll(r === 3 ? 8 : 4, 4, 'MPI_SUM')));
    expect(e.verdict).toBe('collective-hang');
    expect(e.headline).toBe('Collective hang on MPI_COMM_WORLD');
    expect(e.collectiveMismatches[0]?.differs).toBe('signature');
    expect(e.lead).toBe(
      'ranks 0-2 in MPI_Allreduce with 4 × 4 B (a.c:17), rank 3 with 8 × 4 B (a.c:17): the type signatures (count × type size) differ, so it can never complete.',
    );
    expect(formatExplanation(e)).toContain(
      'Collective hang on MPI_COMM_WORLD: ranks 0-2 in MPI_Allreduce with 4 × 4 B',
    );
  });

  it('a rank whose count or datatype did not read is said "not readable", never guessed', () => {
    const e = explainSnapshot(
      all(4, 'MPI_Bcast', (r) =>
        r === 1 ? coll(null, 4, undefined, 0) : coll(r === 3 ? 2 : 1, 8, undefined, 0),
      ),
    );
    expect(e.verdict).toBe('collective-hang');
    expect(e.lead).toBe(
      'ranks 0, 2 in MPI_Bcast with 1 × 8 B (a.c:17), rank 3 with 2 × 8 B (a.c:17), rank 1 with count or datatype not readable (a.c:17): the type signatures (count × type size) differ, so it can never complete.',
    );
  });

  it('members of one MPI_Reduce that agree on root and size but not on the operation', () => {
    const e = explainSnapshot(all(3, 'MPI_Reduce', (r) => coll(4, 4, r === 2 ? 'MPI_MAX' : 'MPI_SUM', 0)));
    expect(e.verdict).toBe('collective-hang');
    expect(e.collectiveMismatches[0]?.differs).toBe('operation');
    expect(e.lead).toBe(
      'ranks 0-1 in MPI_Reduce with MPI_SUM (a.c:17), rank 2 with MPI_MAX (a.c:17): the operations differ, so it can never complete.',
    );
  });

  it('a root that differs is said before the signature', () => {
    const e = explainSnapshot(all(2, 'MPI_Reduce', (r) => coll(r + 1, 4, 'MPI_SUM', r)));
    expect(e.collectiveMismatches[0]?.differs).toBe('root');
    expect(e.lead).toContain('rank 0 in MPI_Reduce with root 0 (a.c:17), rank 1 with root 1 (a.c:17)');
  });

  it('is no mismatch when the members agree, give the same bytes in another shape, or nothing read', () => {
    for (const s of [
      all(4, 'MPI_Allreduce', () => coll(4, 4, 'MPI_SUM')),
      // 4 × 8 B and 8 × 4 B: the same bytes (a type signature the library cannot tell apart).
      all(2, 'MPI_Allreduce', (r) => (r === 0 ? coll(4, 8, 'MPI_SUM') : coll(8, 4, 'MPI_SUM'))),
      all(4, 'MPI_Allreduce', () => coll(null)),
      // One rank's size read, the others' not: nothing to compare it with.
      all(3, 'MPI_Allreduce', (r) => (r === 0 ? coll(4, 4) : coll(null))),
    ]) {
      const e = explainSnapshot(s);
      expect(e.collectiveMismatches).toEqual([]);
      expect(e.verdict).not.toBe('collective-hang');
    }
  });
});

describe('where the members a collective waits for are', () => {
  it('a rank that never entered the barrier: its call and line, not "not in it"', () => {
    const e = explainSnapshot(
      job([
        ...[0, 1, 2].map((r) => at(rank(r, [world(4, r, {})]), 'MPI_Barrier', 17, coll(null))),
        at(rank(3, [world(4, 3, { receives: [op({ peer: 0, tag: 7 })] })]), 'MPI_Recv', 12, {
          peer: { local: 0, global: 0 },
          tag: 7,
          communicator: '0',
          count: 1,
        }),
      ]),
    );
    const text = formatExplanation(e);
    expect(text).toContain(
      'Ranks 0-2 wait in MPI_Barrier on MPI_COMM_WORLD for rank 3, at a.c:17 in main; rank 3 never entered it: it is in MPI_Recv at a.c:12',
    );
    expect(text).not.toMatch(/not in it/);
  });

  it('at 16,384 ranks: every absent rank as ranges, never cut at the wait clauses', () => {
    const n = 16384;
    const e = explainSnapshot(
      job(
        Array.from({ length: n }, (_, r) =>
          r === n - 1
            ? at(rank(r, [world(n, r, {})]), 'MPI_Barrier', 17, coll(null))
            : at(rank(r, [world(n, r, {})]), null, 50),
        ),
        'openmpi',
      ),
      [],
      { maxClasses: 4 },
    );
    const line = e.diagnosis.groups.find((g) => g.text.includes('MPI_Barrier'))?.text;
    expect(line).toBe(
      'Rank 16383 waits in MPI_Barrier on MPI_COMM_WORLD for ranks 0-16382, at a.c:17 in main; ranks 0-16382 never entered it: they are computing (in no MPI call) at a.c:50',
    );
  });

  it('absent members in different places are each said where they are', () => {
    const e = explainSnapshot(
      job([
        ...[0, 1].map((r) => at(rank(r, [world(4, r, {})]), 'MPI_Barrier', 17, coll(null))),
        at(rank(2, [world(4, 2, {})]), null, 50),
        at(rank(3, [world(4, 3, {})]), 'MPI_Allreduce', 21, coll(1, 4, 'MPI_SUM')),
      ]),
    );
    expect(e.diagnosis.groups.map((g) => g.text)).toContain(
      'Ranks 0-1 wait in MPI_Barrier on MPI_COMM_WORLD for ranks 2 and 3, at a.c:17 in main; ranks 2-3 never entered it: rank 2 is computing (in no MPI call) at a.c:50, rank 3 is in MPI_Allreduce at a.c:21',
    );
  });
});

describe('where the members a collective waits for are, without their stacks', () => {
  it('says the rank is not seen in it, not that it never entered it', () => {
    const e = explainSnapshot(
      job([
        ...[0, 1, 2].map((r) => at(rank(r, [world(4, r, {})]), 'MPI_Barrier', 17, coll(null))),
        rank(3, [world(4, 3, {})]),
      ]),
    );
    const line = e.diagnosis.groups.find((g) => g.text.includes('MPI_Barrier'))?.text;
    expect(line).toBe(
      'Ranks 0-2 wait in MPI_Barrier on MPI_COMM_WORLD for rank 3, at a.c:17 in main; rank 3 not seen in it: it has no stacks read',
    );
  });
});

describe('a cycle through a receive from MPI_ANY_SOURCE', () => {
  it('names every rank that could answer it, not one of them as if it were the one', () => {
    const e = explainSnapshot(
      job(
        [
          ...[0, 1, 2].map((r) => at(rank(r, [world(4, r, {})]), 'MPI_Barrier', 17, coll(null))),
          at(rank(3, [world(4, 3, { receives: [op({ peer: null, tag: 1234 })] })]), 'MPI_Recv', 21, {
            peer: { local: null, global: null },
            tag: 1234,
            communicator: '0',
            count: 1,
          }),
        ],
        'openmpi',
      ),
    );
    expect(e.diagnosis.cycle?.text).toBe(
      'Cycle: rank 0 waits in MPI_Barrier for rank 3 (a.c:17) / rank 3 waits for any of ranks 0-2 (tag 1234, :21)',
    );
  });

  it('a receive from any source on a communicator of two names the one other rank', () => {
    const e = explainSnapshot(
      job(
        [0, 1].map((r) =>
          at(rank(r, [world(2, r, { receives: [op({ peer: null, tag: 5 })] })]), 'MPI_Recv', 21, {
            peer: { local: null, global: null },
            tag: 5,
            communicator: '0',
            count: 1,
          }),
        ),
        'openmpi',
      ),
    );
    expect(e.diagnosis.cycle?.text).toBe(
      'Cycle: rank 0 waits for rank 1 (tag 5, a.c:21) / rank 1 waits for rank 0 (tag 5, :21)',
    );
  });
});
