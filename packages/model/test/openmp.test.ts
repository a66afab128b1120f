// The OpenMP side of the hang analysis: per-rank classification of OpenMP threads
// joined with their stacks, the summary across ranks, and what the diagnosis says, on the four
// hybrid situations (shaped as LLVM's OMPD library reports them) and on mixed or missing data.
import { describe, expect, it } from 'vitest';
import {
  analyzeOpenMp,
  explainSnapshot,
  formatExplanation,
  type JobSnapshot,
  ompStateKind,
  ompStateLabel,
  ompStatesThrough,
  type RankSnapshot,
  rankOpenMp,
  syntheticOpenMpJob,
  syntheticRingDeadlock,
  validateSnapshot,
} from '../src/index.js';

const rankOf = (s: JobSnapshot, r: number): RankSnapshot => {
  const x = s.ranks.find((k) => k.rank === r);
  if (x === undefined) throw new Error(`no rank ${r}`);
  return x;
};

/** The rank without its stacks (the OpenMP threads alone). */
function noStacks({ threads: _t, ...r }: RankSnapshot): RankSnapshot {
  return r;
}

/** The snapshot as a reader without OMPD would have produced it. */
function withoutOpenMp(s: JobSnapshot): JobSnapshot {
  return {
    ...s,
    ranks: s.ranks.map(({ openmp: _o, threads, ...r }) => ({
      ...r,
      ...(threads === undefined ? {} : { threads: threads.map(({ ompState: _s, ...t }) => t) }),
    })),
  };
}

describe('OpenMP states', () => {
  it('classifies LLVM state names by family and strips the prefix', () => {
    expect(ompStateLabel('ompt_state_wait_barrier_implicit_parallel')).toBe('wait_barrier_implicit_parallel');
    expect(ompStateKind('ompt_state_work_parallel')).toBe('work');
    expect(ompStateKind('ompt_state_wait_barrier')).toBe('barrier');
    expect(ompStateKind('ompt_state_wait_barrier_explicit')).toBe('barrier');
    expect(ompStateKind('ompt_state_wait_lock')).toBe('mutex');
    expect(ompStateKind('ompt_state_wait_critical')).toBe('mutex');
    expect(ompStateKind('ompt_state_wait_taskwait')).toBe('taskwait');
    expect(ompStateKind('ompt_state_wait_taskgroup')).toBe('taskgroup');
    expect(ompStateKind('ompt_state_idle')).toBe('idle');
    expect(ompStateKind('ompt_state_overhead')).toBe('other');
    expect(ompStateKind('something_new')).toBe('other');
  });
});

describe('hybrid situations', () => {
  it('omp single + MPI_Recv: one thread in the call, its teammates at the barrier, the rank held by MPI', () => {
    const s = syntheticOpenMpJob({ ranks: 2, scenario: 'single-recv' });
    expect(validateSnapshot(s).ok).toBe(true);
    const r0 = rankOpenMp(rankOf(s, 0));
    expect(r0?.inMpi.map((t) => [t.tid, t.threadNum, t.mpiCall, t.main])).toEqual([
      [20000, 0, 'MPI_Recv', true],
    ]);
    expect(r0?.threads.filter((t) => t.kind === 'barrier').map((t) => t.threadNum)).toEqual([1, 2, 3]);
    expect(r0?.block).toBe('mpi');
    // The progress thread (tid 20009) is no OpenMP thread and is not listed.
    expect(r0?.threads.map((t) => t.tid)).toEqual([20000, 20001, 20002, 20003]);

    const e = explainSnapshot(s);
    expect(e.verdict).toBe('deadlock');
    expect(e.openmp.lines).toEqual([
      'ranks 0-1: thread 0 in MPI_Recv inside a parallel region (team of 4), 3 threads wait at a barrier',
    ]);
    expect(e.openmp.waitOnMpi).toBe('0-1');
    expect(e.summary).toContain(
      'OpenMP threads: ranks 0-1: thread 0 in MPI_Recv inside a parallel region (team of 4), 3 threads wait at a barrier.',
    );
    expect(e.summary).toContain('held by that call, not by OpenMP');
    expect(formatExplanation(e)).toContain(
      'openmp:\n  ranks 0-1: thread 0 in MPI_Recv inside a parallel region (team of 4), 3 threads wait at a barrier',
    );
  });

  it('omp_lock_t deadlock: an OpenMP deadlock where the queues alone see a rank computing', () => {
    const s = syntheticOpenMpJob({ ranks: 3, scenario: 'lock-deadlock' });
    expect(validateSnapshot(s).ok).toBe(true);
    const r0 = rankOpenMp(rankOf(s, 0));
    expect(r0?.block).toBe('openmp');
    expect(r0?.inMpi).toEqual([]);
    expect(r0?.locks.map((l) => [l.waitId, l.tids])).toEqual([
      ['0x55d0c0a04020', [20000]],
      ['0x55d0c0a04000', [20001]],
    ]);

    // Without OpenMP the analysis sees rank 0 computing: no deadlock.
    const before = explainSnapshot(withoutOpenMp(s));
    expect(before.verdict).toBe('unknown');
    expect(before.waits.waitingOnFree).toBe('0');

    const e = explainSnapshot(s);
    expect(e.verdict).toBe('openmp-hang');
    expect(e.headline).toBe('OpenMP deadlock');
    expect(e.lead).toMatch(/^1 of 3 ranks can never proceed: on rank 0 every OpenMP thread waits/);
    expect(e.openmp.deadlocked).toBe('0');
    expect(e.behindOpenMp).toBe('1-2');
    // Rank 0 is blocked (in OpenMP), so it is not "waited for while free".
    expect(e.waits.waitingOnFree).toBe('');
    expect(e.summary).toContain(
      'Rank 0: 2 threads deadlocked on OpenMP locks 0x55d0c0a04020 and 0x55d0c0a04000 (each waits for a lock another holds), no MPI call pending.',
    );
    expect(e.summary).toContain('Ranks 1-2 wait in MPI for it: blocked behind the OpenMP deadlock.');
    expect(e.openmp.lines).toContain(
      'ranks 1-2: thread 0 in MPI_Recv inside the initial task, outside any parallel region',
    );
  });

  it('groups ranks with the same picture whatever their lock addresses', () => {
    const s = syntheticOpenMpJob({ ranks: 5, scenario: 'lock-deadlock', deadlocked: [0, 1, 2] });
    const o = analyzeOpenMp(s);
    expect(o.deadlocked).toBe('0-2');
    expect(o.groups[0]?.text).toBe(
      'ranks 0-2: 2 threads deadlocked on OpenMP locks (each waits for a lock another holds), no MPI call pending',
    );
    expect(o.groupTotal).toBe(2);
    const e = explainSnapshot(s);
    expect(e.verdict).toBe('openmp-hang');
    expect(e.behindOpenMp).toBe('3-4');
  });

  it('nested regions: the inner thread in MPI, named by its level', () => {
    const s = syntheticOpenMpJob({ ranks: 2, scenario: 'nested' });
    expect(validateSnapshot(s).ok).toBe(true);
    const r1 = rankOpenMp(rankOf(s, 1));
    expect(r1?.inMpi.map((t) => [t.tid, t.parallel?.level, t.main])).toEqual([[20018, 2, false]]);
    expect(r1?.block).toBe('mpi');
    expect(r1?.text).toBe(
      'thread 1 in MPI_Recv inside a level 2 parallel region inside level 1 (team of 2), 2 threads wait at the barrier that ends a parallel region',
    );
    expect(explainSnapshot(s).verdict).toBe('deadlock');
  });

  it('taskwait: an explicit task in MPI_Recv, its parent thread in taskwait', () => {
    const s = syntheticOpenMpJob({ ranks: 2, scenario: 'taskwait' });
    expect(validateSnapshot(s).ok).toBe(true);
    const r0 = rankOpenMp(rankOf(s, 0));
    expect(r0?.inMpi.map((t) => [t.threadNum, t.task?.kind, t.task?.function])).toEqual([
      [2, 'explicit', '.omp_task_entry.'],
    ]);
    expect(r0?.block).toBe('mpi');
    expect(r0?.text).toBe(
      'thread 2 in MPI_Recv inside an explicit task (.omp_task_entry.) in a parallel region (team of 4), thread 0 waits in taskwait for its child tasks (the task in MPI among them), 2 threads wait at the barrier that ends a parallel region',
    );
  });
});

describe('OpenMP states through a stack frame', () => {
  it('counts the states of the threads whose stack passes through the path, by thread mode', () => {
    const s = syntheticOpenMpJob({ ranks: 2, scenario: 'taskwait' });
    const outer = [
      'clone3',
      'start_thread',
      '__kmp_launch_worker',
      '__kmp_launch_thread',
      '__kmp_invoke_microtask',
      '.omp_outlined.',
      '__kmpc_barrier',
    ];
    expect(ompStatesThrough(s, outer, 'all')).toEqual([
      { label: 'wait_barrier_implicit_parallel', count: 4 },
      { label: 'work_parallel', count: 2 },
    ]);
    // The progress thread passes through clone3 but is no OpenMP thread.
    expect(ompStatesThrough(s, ['clone3'], 'all')).toEqual([
      { label: 'wait_barrier_implicit_parallel', count: 4 },
      { label: '', count: 2 },
      { label: 'work_parallel', count: 2 },
    ]);
    expect(ompStatesThrough(s, ['_start'], 'main')).toEqual([{ label: 'work_parallel', count: 2 }]);
    expect(ompStatesThrough(syntheticRingDeadlock({ ranks: 2, style: 'openmpi' }), ['main'], 'all')).toEqual(
      [],
    );
  });
});

describe('mixed and missing OpenMP data', () => {
  it('no openmp field anywhere: no OpenMP words, the explanation as before', () => {
    const s = syntheticRingDeadlock({ ranks: 4, style: 'openmpi' });
    const e = explainSnapshot(s);
    expect(e.openmp.readRanks).toBe(0);
    expect(e.openmp.lines).toEqual([]);
    expect(e.summary).not.toMatch(/OpenMP/);
    expect(formatExplanation(e)).not.toMatch(/^openmp:|OpenMP/m);
    expect(e.limits.map((l) => l.code)).not.toContain('openmp-unavailable');
  });

  it('openmp null on every rank (no runtime): nothing to say; on some ranks: those are named', () => {
    const ring = syntheticRingDeadlock({ ranks: 3, style: 'openmpi' });
    const none = { ...ring, ranks: ring.ranks.map((r) => ({ ...r, openmp: null })) };
    expect(validateSnapshot(none).ok).toBe(true);
    expect(analyzeOpenMp(none).lines).toEqual([]);

    const hybrid = syntheticOpenMpJob({ ranks: 3, scenario: 'single-recv' });
    const mixed = {
      ...hybrid,
      ranks: hybrid.ranks.map((r) =>
        r.rank === 2
          ? ({ ...withoutOpenMp({ ...hybrid, ranks: [r] }).ranks[0], openmp: null } as RankSnapshot)
          : r,
      ),
    };
    expect(validateSnapshot(mixed).ok).toBe(true);
    const o = analyzeOpenMp(mixed);
    expect(o.noRuntime).toBe('2');
    expect(o.lines).toEqual([
      'ranks 0-1: thread 0 in MPI_Recv inside a parallel region (team of 4), 3 threads wait at a barrier',
      'rank 2: no OpenMP runtime',
    ]);
  });

  it('openmpError: a limit that says which ranks and what to do, the code said once', () => {
    const ring = syntheticRingDeadlock({ ranks: 4, style: 'openmpi' });
    const error = {
      code: 'MQD_E_OMPD_DISABLED',
      message:
        'MQD_E_OMPD_DISABLED: the OpenMP runtime keeps no OMPD state: run the job with OMP_DEBUG=enabled',
    };
    const s = { ...ring, ranks: ring.ranks.map((r) => ({ ...r, openmpError: error })) };
    expect(validateSnapshot(s).ok).toBe(true);
    const e = explainSnapshot(s);
    expect(e.verdict).toBe('deadlock');
    expect(e.openmp.unavailable.map((u) => [u.code, u.ranks])).toEqual([['MQD_E_OMPD_DISABLED', '0-3']]);
    const limit = e.limits.find((l) => l.code === 'openmp-unavailable');
    expect(limit?.text).toBe(
      'OpenMP state unavailable on ranks 0-3: MQD_E_OMPD_DISABLED: the OpenMP runtime keeps no OMPD state: run the job with OMP_DEBUG=enabled',
    );
    expect(e.openmp.lines).toEqual([limit?.text]);
    // A message without its code gets it in front.
    const bare = {
      ...ring,
      ranks: ring.ranks.map((r) => ({ ...r, openmpError: { code: 'MQD_E_X', message: 'why' } })),
    };
    expect(analyzeOpenMp(bare).unavailable[0]?.text).toBe(
      'OpenMP state unavailable on ranks 0-3: MQD_E_X: why',
    );
  });

  it('a lock waited for while a teammate works is contention, not a deadlock', () => {
    const s = syntheticOpenMpJob({ ranks: 2, scenario: 'lock-deadlock' });
    const r0 = rankOf(s, 0);
    const omp = r0.openmp;
    if (!omp) throw new Error('fixture');
    const working = {
      ...noStacks(r0),
      openmp: {
        ...omp,
        threads: omp.threads.map((t, i) =>
          i === 1 ? { ...t, state: 'ompt_state_work_parallel', waitId: null } : t,
        ),
      },
    };
    const o = rankOpenMp(working);
    expect(o?.block).toBe('none');
    expect(o?.text).toBe('1 thread wait for OpenMP lock 0x55d0c0a04020, 1 thread work in a parallel region');
    // An unknown state is never taken for a wait either.
    const odd = {
      ...working,
      openmp: { ...omp, threads: omp.threads.map((t) => ({ ...t, state: 'vendor_state_x' })) },
    };
    expect(rankOpenMp(odd)?.block).toBe('none');
  });

  it('an MPI call made by a thread the OpenMP runtime does not list is said so', () => {
    const s = syntheticOpenMpJob({ ranks: 2, scenario: 'single-recv' });
    const r0 = rankOf(s, 0);
    const call = r0.mpiCall;
    if (!call) throw new Error('fixture');
    const r = { ...noStacks(r0), mpiCall: { ...call, tid: 20009 } };
    const o = rankOpenMp(r);
    expect(o?.mpiOutsideOpenMp).toEqual({ tid: 20009, call: 'MPI_Recv' });
    expect(o?.inMpi).toEqual([]);
    expect(o?.text).toBe(
      'a thread the OpenMP runtime does not list (tid 20009) in MPI_Recv, 3 threads wait at a barrier, 1 thread work in a parallel region',
    );
  });
});

describe('snapshot invariants of the OpenMP fields', () => {
  const base = syntheticOpenMpJob({ ranks: 2, scenario: 'single-recv' });
  const edit = (f: (r: RankSnapshot) => RankSnapshot): JobSnapshot => ({
    ...base,
    ranks: base.ranks.map((r) => (r.rank === 1 ? f(JSON.parse(JSON.stringify(r)) as RankSnapshot) : r)),
  });
  const message = (s: JobSnapshot) => {
    const v = validateSnapshot(s);
    return v.ok ? 'valid' : v.error.message;
  };

  it('accepts every synthetic hybrid job', () => {
    for (const scenario of ['single-recv', 'lock-deadlock', 'nested', 'taskwait'] as const) {
      expect(message(syntheticOpenMpJob({ ranks: 4, scenario }))).toBe('valid');
    }
  });

  it('refuses openmp with openmpError, a tid listed twice, an ompState that disagrees or has no OpenMP thread', () => {
    const err = { code: 'MQD_E_OMPD_DISABLED', message: 'x' };
    expect(message(edit((r) => ({ ...r, openmpError: err })))).toMatch(
      /^MQD_E_BAD_INPUT: rank 1: openmp and openmpError are exclusive/,
    );
    expect(message(edit((r) => ({ ...r, openmp: null, openmpError: err })))).toMatch(/exclusive/);
    expect(message(edit(({ openmp: _o, ...r }) => ({ ...r, openmpError: err })))).toMatch(
      /ompState but is no OpenMP thread/,
    );
    expect(
      message(
        edit((r) => {
          const t = r.openmp?.threads;
          if (t?.[0]) t.push({ ...t[0] });
          return r;
        }),
      ),
    ).toMatch(/OpenMP thread 20016 is listed twice/);
    expect(
      message(
        edit((r) => {
          const t = r.threads?.[1];
          if (t) t.ompState = 'ompt_state_work_parallel';
          return r;
        }),
      ),
    ).toMatch(
      /thread 20017's ompState ompt_state_work_parallel differs from its OpenMP state ompt_state_wait_barrier/,
    );
  });
});
