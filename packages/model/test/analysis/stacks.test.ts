// Stacks and the diagnosis that uses them: the merged call-prefix tree, and the wait-for
// analysis when the stacks say which MPI call each rank is in (hand-built snapshots).
import {
  buildStackTree,
  explainSnapshot,
  type Frame,
  formatExplanation,
  formatStackTree,
  type JobSnapshot,
  type MpiCall,
  type RankSnapshot,
  searchStackTree,
  syntheticStacksJob,
  type ThreadStack,
  validateSnapshot,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { ompiJob, op, rank, snapshot, world } from './fixtures.js';

const LIBC = '/usr/lib/x86_64-linux-gnu/libc.so.6';
const LIBMPI = '/opt/openmpi/lib/libmpi.so.40';
const APP = '/home/u/app';

function frame(fn: string | null, module = APP, pc = '0x401000'): Frame {
  return { pc, function: fn, module, file: null, line: null, inlined: false };
}

/** A thread whose stack is `outermost ... innermost` (given outermost first, stored innermost first). */
function thread(tid: number, path: string[], main = true): ThreadStack {
  const frames = path.map((fn) =>
    frame(
      fn,
      fn.startsWith('MPI_') || fn.startsWith('PMPI_') || fn.startsWith('ompi_')
        ? LIBMPI
        : fn.startsWith('__')
          ? LIBC
          : APP,
    ),
  );
  return { tid, name: 'app', main, frames: frames.reverse(), truncated: false, error: null };
}

const BASE = ['_start', '__libc_start_main', 'main'];

function call(
  fn: string,
  peer: number | null | 'none',
  commId: string | null = '0',
  tag: number | null = 7,
): MpiCall {
  return {
    function: fn,
    tid: 1,
    args: {
      peer: peer === 'none' ? null : { local: peer, global: peer },
      tag,
      communicator: commId,
      count: 512,
    },
  };
}

/** The rank with stacks: its main thread in `path` and mpiCall `c` (null = computing). */
function withStack(r: RankSnapshot, path: string[], c: MpiCall | null): RankSnapshot {
  return { ...r, threads: [thread(r.pid, path)], mpiCall: c };
}

function withStacks(
  snap: JobSnapshot,
  f: (r: number) => { path: string[]; call: MpiCall | null },
): JobSnapshot {
  return {
    ...snap,
    ranks: snap.ranks.map((r) => {
      const s = f(r.rank);
      return withStack(r, s.path, s.call);
    }),
  };
}

describe('merged call-prefix tree', () => {
  const barrierVsAllreduce = withStacks(
    ompiJob(4, () => ({})),
    (r) =>
      r < 3
        ? { path: [...BASE, 'MPI_Barrier', 'ompi_coll_base_barrier'], call: call('MPI_Barrier', 'none') }
        : {
            path: [...BASE, 'MPI_Allreduce', 'ompi_coll_base_allreduce'],
            call: call('MPI_Allreduce', 'none'),
          },
  );

  it('merges prefixes, with rank ranges and counts per node, and stays valid', () => {
    expect(validateSnapshot(barrierVsAllreduce).ok).toBe(true);
    const t = buildStackTree(barrierVsAllreduce);
    expect(t.roots).toHaveLength(1);
    expect(t.rankCount).toBe(4);
    expect(t.classTotal).toBe(2);
    expect(t.classes.map((c) => [c.ranks, c.frames.at(-1)])).toEqual([
      ['0-2', 'ompi_coll_base_barrier'],
      ['3', 'ompi_coll_base_allreduce'],
    ]);
    const main = t.nodes.find((n) => n.function === 'main');
    expect(main).toMatchObject({ ranks: '0-3', rankCount: 4, depth: 2 });
    const kids = (main?.children ?? []).map((id) => t.nodes[id]);
    expect(kids.map((k) => [k?.function, k?.ranks, k?.rankCount, k?.module])).toEqual([
      ['MPI_Barrier', '0-2', 3, 'libmpi.so.40'],
      ['MPI_Allreduce', '3', 1, 'libmpi.so.40'],
    ]);
    // One rank of four is a quarter of the job: no outlier.
    expect(t.outliers).toBe('');
    expect(formatStackTree(t)).toBe(
      [
        '[0-3] (4) _start',
        '  [0-3] (4) __libc_start_main',
        '    [0-3] (4) main',
        '      [0-2] (3) MPI_Barrier',
        '        [0-2] (3) ompi_coll_base_barrier',
        '      [3] MPI_Allreduce',
        '        [3] ompi_coll_base_allreduce',
      ].join('\n'),
    );
  });

  it('names the outliers, lists ranks without stacks, and searches by function', () => {
    const snap: JobSnapshot = {
      ...barrierVsAllreduce,
      ranks: barrierVsAllreduce.ranks.map((r) => {
        if (r.rank !== 1) return r;
        const { threads: _t, mpiCall: _c, ...rest } = r;
        return rest;
      }),
    };
    const t = buildStackTree(snap, { outlierMax: 1 });
    expect(t.missing).toBe('1');
    expect(t.nodes.find((n) => n.function === 'MPI_Barrier')?.ranks).toBe('0,2');
    // Rank 3 alone is a third of the readable ranks: not few enough to be an outlier.
    expect(t.outliers).toBe('');
    const found = searchStackTree(t, 'allred');
    expect([...found.matches].map((id) => t.nodes[id]?.function)).toEqual([
      'MPI_Allreduce',
      'ompi_coll_base_allreduce',
    ]);
    expect([...found.onPath].map((id) => t.nodes[id]?.function).sort()).toEqual([
      'MPI_Allreduce',
      '__libc_start_main',
      '_start',
      'main',
    ]);
    expect(formatStackTree(t)).toContain('no stacks: [1]');
  });

  it('takes every thread with threads "all", and counts threads apart from ranks', () => {
    const snap: JobSnapshot = {
      ...barrierVsAllreduce,
      ranks: barrierVsAllreduce.ranks.map((r) => ({
        ...r,
        threads: [
          ...(r.threads ?? []),
          thread(r.pid + 1, ['clone', 'start_thread', 'progress_loop', 'poll'], false),
        ],
      })),
    };
    const main = buildStackTree(snap);
    expect(main.roots).toHaveLength(1);
    const all = buildStackTree(snap, { threads: 'all' });
    expect(all.roots.map((id) => [all.nodes[id]?.function, all.nodes[id]?.ranks])).toEqual([
      ['_start', '0-3'],
      ['clone', '0-3'],
    ]);
    expect(all.threadCount).toBe(8);
    expect(all.classTotal).toBe(3);
  });

  it('keeps unknown functions as ?? and merges them per module', () => {
    const snap = withStacks(
      ompiJob(2, () => ({})),
      () => ({ path: [...BASE, 'work'], call: null }),
    );
    const withUnknown: JobSnapshot = {
      ...snap,
      ranks: snap.ranks.map((r) => ({
        ...r,
        threads: (r.threads ?? []).map((t) => ({
          ...t,
          frames: [frame(null, APP, r.rank === 0 ? '0x401a00' : '0x401b00'), ...t.frames],
        })),
      })),
    };
    const t = buildStackTree(withUnknown);
    expect(t.classTotal).toBe(1);
    expect(t.nodes.at(-1)).toMatchObject({ function: '??', ranks: '0-1', endCount: 2 });
  });

  it('builds 16,384 ranks with ~20 distinct stacks into a small tree', () => {
    const snap = syntheticStacksJob({ ranks: 16_384, seed: 3 });
    expect(validateSnapshot(snap).ok).toBe(true);
    const t = buildStackTree(snap);
    expect(t.rankCount).toBe(16_384);
    expect(t.classTotal).toBeGreaterThanOrEqual(15);
    expect(t.classTotal).toBeLessThanOrEqual(25);
    expect(t.nodes.length).toBeLessThan(400);
    expect(t.nodes[t.roots[0] ?? 0]?.ranks).toBe('0-16383');
  });
});

describe('diagnosis with stacks', () => {
  const ring = (n: number) => (r: number) => (r + 1) % n;
  const ssendPath = [...BASE, 'MPI_Ssend', 'ompi_pml_ob1_send', 'opal_progress'];

  it('Open MPI style: a ring of MPI_Ssend whose sends show complete is a deadlock naming the cycle', () => {
    const n = 4;
    const queuesOnly = ompiJob(n, (r) => ({ sends: [op({ peer: ring(n)(r), tag: 7, status: 'complete' })] }));
    // Without stacks the queues alone see nothing pending: today's answer stands.
    expect(explainSnapshot(queuesOnly).verdict).toBe('idle');
    const snap = withStacks(queuesOnly, (r) => ({ path: ssendPath, call: call('MPI_Ssend', ring(n)(r)) }));
    expect(validateSnapshot(snap).ok).toBe(true);
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('deadlock');
    expect(e.deadlock?.cycles[0]?.ranks).toEqual([0, 1, 2, 3]);
    expect(e.deadlock?.cycles[0]?.certain).toBe(true);
    expect(e.deadlock?.cycles[0]?.edges[0]?.ops[0]).toMatchObject({
      evidence: 'call',
      call: 'MPI_Ssend',
      tag: 7,
    });
    expect(e.summary).toContain('0 -> 1 -> 2 -> 3 -> 0');
    expect(e.summary).toContain('ranks 0-3 in MPI_Ssend');
    const text = formatExplanation(e);
    expect(text).toContain('0 -> 1: call MPI_Ssend@0 tag 7');
    expect(text).toContain('in MPI calls (stacks, 1 group):');
  });

  it('a pending queue entry for the same wait stays the evidence; entries for other waits drop out', () => {
    const n = 3;
    const snap = withStacks(
      ompiJob(n, (r) => ({
        sends: [op({ peer: ring(n)(r), tag: 7 })],
        // An older Irecv from the left neighbour: not what the rank is blocked in now.
        receives: [op({ peer: (r + n - 1) % n, tag: 9 })],
      })),
      (r) => ({ path: ssendPath, call: call('MPI_Ssend', ring(n)(r)) }),
    );
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('deadlock');
    expect(
      e.deadlock?.cycles[0]?.edges.map((x) => x.ops.map((o) => [o.rank, o.evidence, o.queue, o.tag])),
    ).toEqual([[[0, 'send', 'sends', 7]], [[1, 'send', 'sends', 7]], [[2, 'send', 'sends', 7]]]);
  });

  it('Open MPI style without call arguments: falls back to the completed send in the queue (likely, not certain)', () => {
    const n = 3;
    const snap = withStacks(
      ompiJob(n, (r) => ({ sends: [op({ peer: ring(n)(r), tag: 7, status: 'complete' })] })),
      () => ({ path: ssendPath, call: { function: 'PMPI_Ssend', tid: 1, args: null } }),
    );
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('deadlock');
    expect(e.deadlock?.cycles[0]?.ranks).toEqual([0, 1, 2]);
    expect(e.deadlock?.cycles[0]?.certain).toBe(false);
    expect(e.deadlock?.cycles[0]?.edges[0]?.ops[0]).toMatchObject({
      evidence: 'send-in-call',
      queue: 'sends',
      index: 0,
    });
    expect(e.summary).toContain('likely rather than certain');
  });

  it('MPICH style: no send entries at all, the call arguments draw the ring', () => {
    const n = 4;
    const ranks = Array.from({ length: n }, (_, r) =>
      withStack(
        rank(r, [{ ...world(n, r, { sends: null, unexpected: [] }), id: `0x55${r}0` }]),
        ssendPath,
        call('MPI_Ssend', ring(n)(r), `0x55${r}0`),
      ),
    );
    const snap = snapshot(ranks, 'mpich');
    expect(validateSnapshot(snap).ok).toBe(true);
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('deadlock');
    expect(e.deadlock?.cycles[0]?.ranks).toEqual([0, 1, 2, 3]);
    expect(e.deadlock?.cycles[0]?.certain).toBe(true);
  });

  it('barrier vs allreduce on MPI_COMM_WORLD is a collective hang naming both', () => {
    const snap = withStacks(
      ompiJob(4, () => ({})),
      (r) =>
        r < 3
          ? { path: [...BASE, 'MPI_Barrier'], call: call('MPI_Barrier', 'none', '0', null) }
          : { path: [...BASE, 'MPI_Allreduce'], call: call('MPI_Allreduce', 'none', '0', null) },
    );
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('collective-hang');
    expect(e.collectiveMismatches).toHaveLength(1);
    expect(e.collectiveMismatches[0]?.text).toBe(
      'ranks 0-2 in MPI_Barrier on MPI_COMM_WORLD, rank 3 in MPI_Allreduce on MPI_COMM_WORLD',
    );
    expect(e.summary).toContain('ranks 0-2 in MPI_Barrier on MPI_COMM_WORLD, rank 3 in MPI_Allreduce');
    expect(formatExplanation(e)).toContain(
      'collective mismatch on MPI_COMM_WORLD:\n  ranks 0-2 in MPI_Barrier',
    );
  });

  it('a barrier against a receive (the collective_mismatch fixture), without call arguments: an unknown communicator', () => {
    const snap = withStacks(
      ompiJob(4, (r) => (r === 3 ? { receives: [op({ peer: 0, tag: 5 })] } : {})),
      (r) =>
        r < 3
          ? { path: [...BASE, 'MPI_Barrier'], call: { function: 'MPI_Barrier', tid: 1, args: null } }
          : { path: [...BASE, 'MPI_Recv'], call: { function: 'MPI_Recv', tid: 1, args: null } },
    );
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('collective-hang');
    expect(e.collectiveMismatches[0]?.text).toBe(
      'ranks 0-2 in MPI_Barrier on an unknown communicator, rank 3 in MPI_Recv',
    );
  });

  it('a barrier on a known communicator against a receive closes a cycle through the collective', () => {
    const snap = withStacks(
      ompiJob(4, (r) => (r === 3 ? { receives: [op({ peer: 0, tag: 5 })] } : {})),
      (r) =>
        r < 3
          ? { path: [...BASE, 'MPI_Barrier'], call: call('MPI_Barrier', 'none', '0', null) }
          : { path: [...BASE, 'MPI_Recv'], call: call('MPI_Recv', 0, '0', 5) },
    );
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('collective-hang');
    expect(e.collectiveMismatches[0]?.text).toBe(
      'ranks 0-2 in MPI_Barrier on MPI_COMM_WORLD, rank 3 in MPI_Recv on MPI_COMM_WORLD',
    );
    expect(e.deadlock?.cycles[0]?.ranks).toEqual([0, 3]);
    expect(e.summary).toContain('cycle through the collective: 0 -> 3 -> 0');
  });

  it('probe waits are waits on (source, tag) that no queue shows', () => {
    // Rank 0 probes for a message from 1; rank 1 probes for one from 0: nothing in any queue.
    const queuesOnly = ompiJob(2, () => ({}));
    expect(explainSnapshot(queuesOnly).verdict).toBe('idle');
    const snap = withStacks(queuesOnly, (r) => ({
      path: [...BASE, 'MPI_Mprobe', 'opal_progress'],
      call: call('MPI_Mprobe', 1 - r, '0', 11),
    }));
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('deadlock');
    expect(e.deadlock?.cycles[0]?.ranks).toEqual([0, 1]);
    expect(e.deadlock?.cycles[0]?.edges[0]?.ops[0]).toMatchObject({
      call: 'MPI_Mprobe',
      tag: 11,
      queue: 'receives',
    });
  });

  it('a probe on ANY_SOURCE waits on every other member, and a computing member frees it', () => {
    const anySource: MpiCall = {
      function: 'MPI_Probe',
      tid: 1,
      args: { peer: { local: null, global: null }, tag: 3, communicator: '0', count: null },
    };
    const stuck = withStacks(
      ompiJob(3, () => ({})),
      () => ({ path: [...BASE, 'MPI_Probe'], call: anySource }),
    );
    expect(explainSnapshot(stuck).verdict).toBe('deadlock');
    const freed = withStacks(
      ompiJob(3, () => ({})),
      (r) =>
        r === 2
          ? { path: [...BASE, 'compute'], call: null }
          : { path: [...BASE, 'MPI_Probe'], call: anySource },
    );
    const e = explainSnapshot(freed);
    expect(e.verdict).not.toBe('deadlock');
    expect(e.computing).toBe('2');
  });

  it('a computing rank breaks a cycle its queues would close', () => {
    const n = 3;
    const queues = ompiJob(n, (r) => ({ receives: [op({ peer: ring(n)(r), tag: 1 })] }));
    expect(explainSnapshot(queues).verdict).toBe('deadlock');
    const snap = withStacks(queues, (r) =>
      r === 1
        ? { path: [...BASE, 'compute_step'], call: null }
        : { path: [...BASE, 'MPI_Recv'], call: call('MPI_Recv', ring(n)(r), '0', 1) },
    );
    const e = explainSnapshot(snap);
    expect(e.verdict).not.toBe('deadlock');
    expect(e.computing).toBe('1');
    expect(e.summary).toContain('rank 1 computing (in no MPI call)');
    expect(e.summary).toContain('ranks 0, 2 in MPI_Recv on MPI_COMM_WORLD');
  });

  it('MPI_Test loops are not blocking: the rank counts as able to proceed', () => {
    const n = 2;
    const queues = ompiJob(n, (r) => ({ receives: [op({ peer: 1 - r, tag: 1 })] }));
    const snap = withStacks(queues, (r) =>
      r === 0
        ? { path: [...BASE, 'MPI_Test'], call: { function: 'MPI_Test', tid: 1, args: null } }
        : { path: [...BASE, 'MPI_Wait'], call: { function: 'MPI_Wait', tid: 1, args: null } },
    );
    expect(explainSnapshot(snap).verdict).not.toBe('deadlock');
  });

  it('mixed: ranks without stacks keep the queue analysis, and say so', () => {
    const n = 4;
    const queues = ompiJob(n, (r) => ({ receives: [op({ peer: ring(n)(r), tag: 1 })] }));
    const before = explainSnapshot(queues);
    expect(before.calls).toEqual([]);
    expect(before.collectiveMismatches).toEqual([]);
    expect(before.computing).toBe('');
    const snap: JobSnapshot = {
      ...queues,
      ranks: queues.ranks.map((r) =>
        r.rank < 2 ? withStack(r, [...BASE, 'MPI_Recv'], call('MPI_Recv', ring(n)(r.rank), '0', 1)) : r,
      ),
    };
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('deadlock');
    expect(e.deadlock?.cycles[0]?.ranks).toEqual([0, 1, 2, 3]);
    const stacksLimit = e.limits.find((l) => l.code === 'stacks-missing');
    expect(stacksLimit?.text.startsWith('stacks were not read on ranks 2-3')).toBe(true);
    expect(e.calls.map((g) => [g.where, g.call, g.ranks])).toEqual([
      ['call', 'MPI_Recv', '0-1'],
      ['unread', null, '2-3'],
    ]);
  });

  it('synthetic stacks job: the call groups and verdict come out at scale', () => {
    const snap = syntheticStacksJob({ ranks: 1024, seed: 5, scenario: 'collective-mismatch' });
    expect(validateSnapshot(snap).ok).toBe(true);
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('collective-hang');
    expect(e.collectiveMismatches[0]?.text).toContain('in MPI_Barrier on MPI_COMM_WORLD');
    const ring = explainSnapshot(syntheticStacksJob({ ranks: 1024, seed: 5, scenario: 'ssend-ring' }));
    expect(ring.verdict).toBe('deadlock');
    expect(ring.deadlock?.cycles[0]?.ranks.length).toBe(1024);
  });
});
