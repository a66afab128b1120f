// OMPD in the reader, unit project: a real OpenMP program on LLVM's OMPD-enabled
// runtime (native/ompd/omp_target.c), read through readOpenMp and through the whole reader path
// (Snapshotter → reader child → OneStopReader.snapshotRank: queues, stacks and OpenMP in one stop),
// checked against LLVM's gdb OMPD plugin; a libompd that crashes or loops costs one read.
import { type JobSnapshot, type OpenMpRuntime, type RankSnapshot, validateSnapshot } from '@mqd/model';
import { ompdOracle } from '@mqd/testkit';
import { beforeAll, describe, expect, it } from 'vitest';
import { nativeAllocations, processState, tracerPid } from '../src/index.js';
import { readOpenMp } from '../src/ompd/read.js';
import { OmpdSession } from '../src/ompd/session.js';
import { snapshottersPerTest, startTarget, type Target, waitFor } from './conformance-kit.js';
import {
  buildOmpd,
  OMP_ENV,
  OMP_MODE,
  type OmpdBuilt,
  openmpRuntimeMissing,
  startOmpTarget,
} from './ompd-kit.js';

const missing = openmpRuntimeMissing();
let b: OmpdBuilt;
beforeAll(() => {
  if (!missing) b = buildOmpd();
}, 120_000);
const snapshotter = snapshottersPerTest();

async function expectRunningFree(t: Target): Promise<void> {
  await waitFor(() => tracerPid(t.pid) === 0, 10_000);
  expect(processState(t.pid)).toMatch(/^[RS]$/);
}

function runtimeOf(r: { openmp?: OpenMpRuntime | null; openmpError?: unknown }): OpenMpRuntime {
  if (!r.openmp) throw new Error(`no OpenMP read: ${JSON.stringify(r.openmpError ?? r.openmp)}`);
  return r.openmp;
}

/** Our threads equal the oracle's (LLVM's gdb plugin on the same parked process). */
async function expectOracle(pid: number, rt: OpenMpRuntime): Promise<void> {
  const oracle = await ompdOracle(pid as Parameters<typeof ompdOracle>[0]);
  if (!oracle.ok) throw new Error(oracle.error);
  const theirs = [...oracle.value.threads].sort((x, y) => x.tid - y.tid);
  expect(theirs.length).toBe(rt.threads.length);
  rt.threads.forEach((t, i) => {
    const o = theirs[i];
    expect({ tid: t.tid, threadNum: t.threadNum, state: t.state, level: t.parallel?.level ?? null }).toEqual({
      tid: o?.tid,
      threadNum: o?.threadNum,
      state: o?.state,
      level: o?.level === 0 ? null : (o?.level ?? null),
    });
    expect(t.parallel?.teamSize ?? null).toBe(o?.level === 0 ? null : (o?.teamSize ?? null));
    if (o?.function) expect(t.task?.function).toBe(o.function);
    if (o?.taskKind) expect(t.task?.kind === 'explicit' ? 'explicit' : 'implicit').toBe(o.taskKind);
  });
}

const states = (rt: OpenMpRuntime) => rt.threads.map((t) => t.state).sort();

describe.skipIf(missing !== null)('OMPD: a real OpenMP program', () => {
  it('omp single: one thread working, three at the barrier, team of 4, equal to the oracle', async () => {
    const t = await startOmpTarget(b, OMP_MODE.single, OMP_ENV, 4);
    const rt = runtimeOf(readOpenMp(t.pid));
    expect(rt.runtime).toMatch(/\/libomp\.so$/);
    expect(rt.ompd).toMatch(/\/libompd\.so$/);
    expect(rt.version).toMatch(/LLVM OpenMP/);
    expect(rt.threads.map((x) => x.tid)).toEqual([...rt.threads.map((x) => x.tid)].sort((x, y) => x - y));
    expect(states(rt)).toEqual([
      'ompt_state_wait_barrier',
      'ompt_state_wait_barrier',
      'ompt_state_wait_barrier',
      'ompt_state_work_parallel',
    ]);
    expect(rt.threads.map((x) => x.threadNum).sort()).toEqual([0, 1, 2, 3]);
    for (const x of rt.threads) {
      expect(x.parallel).toEqual({ teamSize: 4, level: 1, activeLevel: 1 });
      expect(x.task).toMatchObject({ function: '.omp_outlined.', kind: 'implicit' });
    }
    await expectRunningFree(t);
    await expectOracle(t.pid, rt);
    await expectRunningFree(t);
  }, 120_000);

  it('omp_lock_t deadlock: both threads in the region (LLVM keeps work_parallel), equal to the oracle', async () => {
    const t = await startOmpTarget(b, OMP_MODE.lock, OMP_ENV, 2);
    const rt = runtimeOf(readOpenMp(t.pid));
    expect(states(rt)).toEqual(['ompt_state_work_parallel', 'ompt_state_work_parallel']);
    for (const x of rt.threads) expect(x.parallel).toEqual({ teamSize: 2, level: 1, activeLevel: 1 });
    await expectOracle(t.pid, rt);
    await expectRunningFree(t);
  }, 120_000);

  it('explicit task: one thread in the task body (explicit), the other at the barrier', async () => {
    const t = await startOmpTarget(b, OMP_MODE.task, OMP_ENV, 2);
    const rt = runtimeOf(readOpenMp(t.pid));
    const inTask = rt.threads.find((x) => x.task?.kind === 'explicit');
    expect(inTask).toMatchObject({
      state: 'ompt_state_work_parallel',
      task: { function: '.omp_task_entry.' },
    });
    const other = rt.threads.find((x) => x !== inTask);
    expect(other).toMatchObject({ state: 'ompt_state_wait_barrier', task: { kind: 'implicit' } });
    await expectOracle(t.pid, rt);
  }, 120_000);

  it('OMP_DEBUG unset: MQD_E_OMPD_DISABLED saying to set OMP_DEBUG=enabled', async () => {
    const { OMP_DEBUG: _unset, ...env } = OMP_ENV;
    const t = await startOmpTarget(b, OMP_MODE.single, { ...env, OMP_DEBUG: '' }, 4);
    const r = readOpenMp(t.pid);
    expect(r.openmp).toBeUndefined();
    expect(r.openmpError?.code).toBe('MQD_E_OMPD_DISABLED');
    expect(r.openmpError?.message).toMatch(/OMP_DEBUG=enabled/);
    await expectRunningFree(t);
  }, 60_000);

  it('a process without an OpenMP runtime: openmp null', async () => {
    const t = await startTarget(b.conformance.target, b.conformance.dll, 0, 0);
    expect(readOpenMp(t.pid)).toMatchObject({ openmp: null });
  }, 60_000);

  it('50 reads: no outstanding OMPD block, no native block growth, never left stopped', async () => {
    const t = await startOmpTarget(b, OMP_MODE.single, OMP_ENV, 4);
    const host = new OmpdSession();
    try {
      const first = runtimeOf(readOpenMp(t.pid, { host }));
      expect(host.outstandingBlocks()).toBe(0);
      const before = nativeAllocations();
      for (let i = 0; i < 50; i++) {
        const rt = runtimeOf(readOpenMp(t.pid, { host }));
        expect(states(rt)).toEqual(states(first));
        expect(host.outstandingBlocks()).toBe(0);
      }
      expect(nativeAllocations()).toEqual(before);
      // Every callback family was used, none refused.
      expect(host.counts.alloc_memory).toBeGreaterThan(0);
      expect(host.counts.free_memory).toBeGreaterThan(0);
      expect(host.counts.get_thread_context_for_thread_id).toBeGreaterThan(0);
      expect(host.counts.symbol_addr_lookup).toBeGreaterThan(0);
    } finally {
      host.close();
    }
    await expectRunningFree(t);
  }, 120_000);
});

const rankOf = (s: JobSnapshot, r: number): RankSnapshot => {
  const x = s.ranks.find((y) => y.rank === r);
  if (!x) throw new Error(`rank ${r} missing`);
  return x;
};

describe.skipIf(missing !== null)('OMPD in the reader (Snapshotter, one stop per rank)', () => {
  it('queues, stacks and OpenMP threads in the same snapshot; threads carry ompState', async () => {
    const t = await startOmpTarget(b, OMP_MODE.single, OMP_ENV, 4);
    const { snapshot } = await snapshotter().snapshot([{ pid: t.pid, rank: 0 }]);
    expect(validateSnapshot(snapshot).ok).toBe(true);
    const r = rankOf(snapshot, 0);
    expect(r.state.kind).toBe('ok');
    expect(r.communicators?.length).toBeGreaterThan(0);
    const rt = runtimeOf(r);
    expect(states(rt)).toEqual([
      'ompt_state_wait_barrier',
      'ompt_state_wait_barrier',
      'ompt_state_wait_barrier',
      'ompt_state_work_parallel',
    ]);
    const working = rt.threads.find((x) => x.state === 'ompt_state_work_parallel');
    const stack = r.threads?.find((x) => x.tid === working?.tid);
    expect(stack?.ompState).toBe('ompt_state_work_parallel');
    expect(stack?.frames.some((f) => f.function === 'omptest_blocked')).toBe(true);
    expect(r.threads?.filter((x) => x.ompState === 'ompt_state_wait_barrier').length).toBe(3);
    // Without stacks, no OpenMP either (same flag).
    const bare = await snapshotter().snapshot([{ pid: t.pid, rank: 0 }], { stacks: false });
    expect(rankOf(bare.snapshot, 0).openmp).toBeUndefined();
    await expectRunningFree(t);
  }, 120_000);

  it('a libompd that crashes costs one read: the next snapshot reads the queues and says why', async () => {
    const t = await startTarget(b.fakeTarget, b.conformance.dll, 0, 0, { FAKE_OMPD: b.crashLib });
    const s = snapshotter();
    const first = rankOf((await s.snapshot([{ pid: t.pid, rank: 0 }])).snapshot, 0);
    expect(first.state).toMatchObject({ kind: 'error', code: 'MQD_E_OMPD_CRASHED' });
    expect(first.state.kind === 'error' ? first.state.message : '').toMatch(/libompd_crash\.so.*SIGSEGV/);
    await expectRunningFree(t);
    const next = rankOf((await s.snapshot([{ pid: t.pid, rank: 0 }])).snapshot, 0);
    expect(next.state.kind).toBe('ok');
    expect(next.communicators?.length).toBeGreaterThan(0);
    expect(next.openmpError?.code).toBe('MQD_E_OMPD_CRASHED');
    await expectRunningFree(t);
  }, 120_000);

  it('a libompd that loops costs one read (rank timeout), then the same', async () => {
    const t = await startTarget(b.fakeTarget, b.conformance.dll, 0, 0, { FAKE_OMPD: b.loopLib });
    const s = snapshotter({ rankTimeoutMs: 3000 });
    const first = rankOf((await s.snapshot([{ pid: t.pid, rank: 0 }])).snapshot, 0);
    expect(first.state).toMatchObject({ kind: 'error', code: 'MQD_E_OMPD_CRASHED' });
    await expectRunningFree(t);
    const next = rankOf((await s.snapshot([{ pid: t.pid, rank: 0 }])).snapshot, 0);
    expect(next.state.kind).toBe('ok');
    expect(next.openmpError?.message).toMatch(/libompd_loop\.so .*hung/);
    await expectRunningFree(t);
  }, 120_000);
});
