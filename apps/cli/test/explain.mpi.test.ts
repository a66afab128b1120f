// The hang analysis on real hung jobs: the ring of synchronous sends is one cycle
// through every rank, and the receive waiting for a tag that never comes is a tag near miss
// where the library shows both sides.

import { fixtureRig } from '@mqd/core/testing';
import { explainSnapshot } from '@mqd/model';
import { describe, expect, it } from 'vitest';

const rig = fixtureRig();
const { snapshotter } = rig;

async function explain(mpi: 'openmpi' | 'mpich', fixture: string) {
  const job = await rig.launch({ mpi, fixture, np: 4 });
  const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid })));
  return explainSnapshot(snapshot);
}

describe('ring of synchronous sends', () => {
  it('Open MPI (sends visible): one certain cycle through every rank', async () => {
    const e = await explain('openmpi', 'ring_ssend');
    expect(e.verdict).toBe('deadlock');
    expect(e.deadlock?.cycles.map((c) => [c.ranks, c.certain])).toEqual([[[0, 1, 2, 3], true]]);
    expect(e.deadlock?.cycles[0]?.edges.map((x) => x.ops.map((o) => [o.rank, o.queue, o.tag]))).toEqual([
      [[0, 'sends', 42]],
      [[1, 'sends', 42]],
      [[2, 'sends', 42]],
      [[3, 'sends', 42]],
    ]);
  });

  it("MPICH (blocking sends hidden from the queue): the same cycle, certain from each MPI_Ssend's destination in its frame", async () => {
    const e = await explain('mpich', 'ring_ssend');
    expect(e.verdict).toBe('deadlock');
    // The send queue still lacks blocking sends (the limit says so), but the stacks read each
    // rank's MPI_Ssend destination: every edge is a call, none inferred from unexpected messages.
    expect(e.deadlock?.cycles.map((c) => [c.ranks, c.certain])).toEqual([[[0, 1, 2, 3], true]]);
    expect(e.deadlock?.cycles[0]?.edges.flatMap((x) => x.ops.map((o) => o.evidence))).toEqual([
      'call',
      'call',
      'call',
      'call',
    ]);
    expect(e.limits.map((l) => l.text).join('\n')).toMatch(/only nonblocking sends/);
  });
});

describe('a receive waiting for a tag that never comes', () => {
  it('MPICH (both sides visible): a tag near miss against the unexpected messages from rank 1', async () => {
    const e = await explain('mpich', 'wrong_tag');
    const mine = e.nearMisses.find((n) => n.kind === 'receive' && n.op.rank === 0);
    expect(mine?.peer).toBe(1);
    expect(mine?.tag).toBe(99);
    expect(mine?.candidates.map((c) => [c.op.queue, c.peer, c.tag, c.differs, c.wouldMatch])).toEqual([
      ['unexpected', 1, 7, ['tag'], false],
      ['unexpected', 1, 8, ['tag'], false],
    ]);
  });

  it('Open MPI (unexpected queue hidden): says the other side cannot be seen', async () => {
    const e = await explain('openmpi', 'wrong_tag');
    expect(e.limits.map((l) => l.text).join('\n')).toMatch(/unexpected messages are not visible/);
    // Rank 1's tag-7/8 sends completed eagerly, so no queue shows them: nothing to call a near miss.
    expect(e.nearMisses.filter((n) => n.op.rank === 0).flatMap((n) => n.candidates)).toEqual([]);
    // Still explained from the receives: 0 waits for 1 (tag 99), 1 waits for 0 (tag 1).
    expect(
      e.deadlock?.cycles.map((c) => c.edges.map((x) => x.ops.map((o) => [o.rank, o.queue, o.tag]))),
    ).toEqual([[[[0, 'receives', 99]], [[1, 'receives', 1]]]]);
  });
});

// The diagnosis over stacks and queues, on real jobs (the stacks come from the same
// stop as the queues).
describe.each(['openmpi', 'mpich'] as const)('%s: diagnosis from stacks and queues', (mpi) => {
  it('ranks in different collectives: collective-hang naming each call and its ranks', async () => {
    const e = await explain(mpi, 'collective_two');
    expect(e.verdict).toBe('collective-hang');
    expect(e.summary).toMatch(/ranks 0-2 in MPI_Barrier on MPI_COMM_WORLD/);
    expect(e.summary).toMatch(/rank 3 in MPI_Allreduce/);
  });

  it('a ring of blocking MPI_Ssend: a deadlock through every rank', async () => {
    const e = await explain(mpi, 'ssend_complete_ring');
    expect(e.verdict).toBe('deadlock');
    expect(e.deadlock?.cycles.map((c) => c.ranks)).toEqual([[0, 1, 2, 3]]);
  });

  it('every rank probing for a message from the next: a deadlock though no queue holds anything', async () => {
    const e = await explain(mpi, 'probe_wait');
    expect(e.verdict).toBe('deadlock');
    expect(e.deadlock?.cycles.map((c) => c.ranks)).toEqual([[0, 1, 2, 3]]);
  });
});
