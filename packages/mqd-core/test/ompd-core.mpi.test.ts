// OpenMP threads from core files, on REAL hybrid MPI+OpenMP jobs of both MPIs:
// a live snapshot (queues, stacks and OpenMP in one stop per rank), then cores of every rank
// written by the Snapshotter's capture (`mqd capture`), the job killed, and the cores read: each
// rank's `openmp` equals the live one (threads by tid: state, thread number, team, task, wait id)
// and EXPECTED_OPENMP, and the core's stacks carry the same states. A core of a job run without
// OMP_DEBUG says MQD_E_OMPD_DISABLED; a kernel core (SIGABRT) of one rank reads the same; the
// OMPD library is looked up under a sysroot, and the DLL policy and the supervisor's refusals
// apply to it as for a live rank.

import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { JobSnapshot, OpenMpRuntime, RankSnapshot } from '@mqd/model';
import {
  done,
  type FixtureJob,
  type HybridFixture,
  liveDescendants,
  MPI_LABELS,
  MPI_NAMES,
  openmpPrefix,
  pending,
  waitFor,
} from '@mqd/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { DebugFileRegistry, OneStopReader, OpenedCore } from '../src/index.js';
import { dllNamedByCore } from '../src/reader/dll-name.js';
import { fixtureRig } from './fixture-rig.js';
import {
  expectedOmpShape,
  fromOurs,
  ompShape,
  rankOf,
  requireHybridBuilt,
  tableOrder,
} from './openmp-checks.js';

const run = promisify(execFile);
const rig = fixtureRig();
const { snapshotter } = rig;
const registry = new DebugFileRegistry();
const work = mkdtempSync(join(tmpdir(), 'mqd-ompd-core-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const FIXTURES: readonly HybridFixture[] = ['omp_single_recv', 'omp_lock_deadlock'];
const LIBOMPD = () => join(openmpPrefix(), 'lib', 'libompd.so');

const targetsOf = (job: FixtureJob) => job.ranks.map((r) => ({ pid: r.pid, rank: r.rank }));

/** A live snapshot once every rank's OpenMP threads have EXPECTED_OPENMP's shape (threads settle after READY). */
async function settledLive(job: FixtureJob, fixture: HybridFixture): Promise<JobSnapshot> {
  const want = JSON.stringify(job.ranks.map((r) => expectedOmpShape(fixture, r.rank)));
  return waitFor(
    async () => {
      const { snapshot } = await snapshotter.snapshot(targetsOf(job));
      const seen = JSON.stringify(job.ranks.map((r) => ompShape(rankOf(snapshot, r.rank))));
      return seen === want ? done(snapshot) : pending(seen);
    },
    {
      timeoutMs: 60_000,
      what: `${fixture}: every rank's OpenMP threads as EXPECTED_OPENMP`,
      initialIntervalMs: 200,
    },
  );
}

/** Cores of every rank into `dir` (rank-N.core), through the Snapshotter's capture. */
async function capture(job: FixtureJob, dir: string): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const { captured } = await snapshotter.capture(targetsOf(job), dir);
  expect(captured.map((c) => ('core' in c ? [c.rank, c.core] : [c.rank, c.error.message]))).toEqual(
    job.ranks.map((r) => [r.rank, `rank-${r.rank}.core`]),
  );
  return job.ranks.map((r) => join(dir, `rank-${r.rank}.core`));
}

/** What a core must give of a live rank's OpenMP: every field, thread by thread (by tid). */
function expectSameOpenMp(
  where: string,
  core: RankSnapshot,
  live: RankSnapshot,
  fixture: HybridFixture,
): void {
  expect([where, core.state.kind, core.openmpError, core.stacksError]).toEqual([
    where,
    'ok',
    undefined,
    undefined,
  ]);
  const rt = core.openmp;
  if (!rt) throw new Error(`${where}: no OpenMP read from the core (${JSON.stringify(core.openmp)})`);
  expect(rt.runtime, where).toBe(join(openmpPrefix(), 'lib', 'libomp.so'));
  const byTid = (x: OpenMpRuntime) => [...x.threads].sort((a, b) => a.tid - b.tid);
  const liveRt = live.openmp;
  if (!liveRt) throw new Error(`${where}: no live OpenMP`);
  expect(byTid(rt), `${where}: threads by tid, core vs live`).toEqual(byTid(liveRt));
  // The same runtime and library version (where the library was loaded from is the caller's check).
  expect([rt.runtime, rt.version], where).toEqual([liveRt.runtime, liveRt.version]);
  expect(tableOrder(rt).map(fromOurs), `${where}: EXPECTED_OPENMP`).toEqual(
    expectedOmpShape(fixture, core.rank),
  );
  // The core's stacks carry the same states, on the same threads; the MPI call is the live one's.
  const states = (r: RankSnapshot) =>
    (r.threads ?? []).filter((t) => t.ompState !== undefined).map((t) => [t.tid, t.ompState]);
  expect(states(core), `${where}: ompState on the core's stacks`).toEqual(states(live));
  expect(states(core).length, where).toBe(rt.threads.length);
  expect([where, core.mpiCall?.function, core.mpiCall?.tid]).toEqual([
    where,
    live.mpiCall?.function,
    live.mpiCall?.tid,
  ]);
}

describe.each(MPI_NAMES)('%s', (mpi) => {
  const label = MPI_LABELS[mpi];

  it.each(FIXTURES)(
    `${label} (${mpi}): %s: OpenMP threads from captured cores equal the live read and EXPECTED_OPENMP`,
    async (fixture) => {
      requireHybridBuilt(mpi);
      const job = await rig.launch({ mpi, fixture, hybrid: true });
      const live = await settledLive(job, fixture);
      const paths = await capture(job, join(work, `${mpi}-${fixture}`));
      // The job is gone before the cores are read: nothing can come from the live processes.
      await job.dispose();
      const fromCores = (await snapshotter.snapshotCores(paths.map((path) => ({ path })))).snapshot;
      expect(fromCores.source?.kind).toBe('core');
      expect(fromCores.ranks.map((r) => r.rank)).toEqual(job.ranks.map((r) => r.rank));
      for (const jr of job.ranks) {
        const where = `${mpi} ${fixture} rank ${jr.rank} (core)`;
        const r = rankOf(fromCores, jr.rank);
        expect(r.pid, where).toBe(jr.pid);
        expectSameOpenMp(where, r, rankOf(live, jr.rank), fixture);
        expect(r.openmp?.ompd, where).toBe(LIBOMPD());
      }
      // Without stacks nothing but the queues, as live.
      const bare = (
        await snapshotter.snapshotCores(
          paths.map((path) => ({ path })),
          { stacks: false },
        )
      ).snapshot;
      for (const r of bare.ranks)
        expect([r.rank, r.state.kind, r.openmp, r.openmpError]).toEqual([r.rank, 'ok', undefined, undefined]);
    },
  );

  it(`${label} (${mpi}): a core of omp_single_recv run without OMP_DEBUG: MQD_E_OMPD_DISABLED naming OMP_DEBUG=enabled, queues and stacks read`, async () => {
    requireHybridBuilt(mpi);
    const job = await rig.launch({ mpi, fixture: 'omp_single_recv', hybrid: true, unsetEnv: ['OMP_DEBUG'] });
    expect(job.output()).not.toContain('OMP_OMPD active');
    const paths = await capture(job, join(work, `${mpi}-no-omp-debug`));
    await job.dispose();
    const fromCores = (await snapshotter.snapshotCores(paths.map((path) => ({ path })))).snapshot;
    for (const jr of job.ranks) {
      const where = `${mpi} rank ${jr.rank} (core)`;
      const r = rankOf(fromCores, jr.rank);
      expect([where, r.state.kind, r.openmp, r.openmpError?.code]).toEqual([
        where,
        'ok',
        undefined,
        'MQD_E_OMPD_DISABLED',
      ]);
      expect(r.openmpError?.message, where).toMatch(/OMP_DEBUG=enabled/);
      expect(r.openmpError?.message, where).toContain(`rank-${jr.rank}.core`);
      expect(r.mpiCall?.function, where).toBe('MPI_Recv');
      expect(
        r.threads?.some((t) => t.ompState !== undefined),
        where,
      ).toBe(false);
    }
  });
});

describe('the OMPD library of a core', () => {
  it("Open MPI: found under the sysroot; the DLL policy and the supervisor's refusals apply to it; nothing leaks", async () => {
    const mpi = 'openmpi';
    requireHybridBuilt(mpi);
    const fixture = 'omp_lock_deadlock';
    const job = await rig.launch({ mpi, fixture, hybrid: true });
    const live = await settledLive(job, fixture);
    const [core0] = await capture(job, join(work, 'sysroot-case'));
    if (!core0) throw new Error('no core of rank 0');
    await job.dispose();
    // A sysroot (as `--sysroot` / a bundle) holding the runtime's libompd (and the libomp it needs).
    const sysroot = join(work, 'sysroot');
    const here = join(sysroot, LIBOMPD());
    mkdirSync(dirname(here), { recursive: true });
    copyFileSync(LIBOMPD(), here);
    copyFileSync(join(openmpPrefix(), 'lib', 'libomp.so'), join(dirname(here), 'libomp.so'));

    const opened = OpenedCore.open(core0, registry, { sysroot });
    if (!opened.ok) throw new Error(opened.error.message);
    const core = opened.value;
    const dll = dllNamedByCore(core);
    if (!dll.ok) throw new Error(dll.error.message);
    const s = OneStopReader.open(dll.value, { registry, readBudgetBytes: 64 << 20, stopTimeoutMs: 2000 });
    if (!s.ok) throw new Error(s.error.message);
    const session = s.value;
    try {
      const read = (ompd: Parameters<OneStopReader['snapshotCore']>[1]) =>
        session.snapshotCore({ pid: -1, rank: 0, host: 'localhost', core }, ompd);
      const r = read({ ompd: { policy: 'any' } });
      expectSameOpenMp(`${mpi} ${fixture} rank 0 (core, sysroot)`, r, rankOf(live, 0), fixture);
      // Apart from where it was loaded from: the sysroot's copy.
      expect(r.openmp?.ompd).toBe(here);
      expect(session.ompd.outstandingBlocks()).toBe(0);

      // The site's policy: a library under /tmp (world-writable) is refused, the queues still read.
      const refused = read({ ompd: { policy: 'root-owned' } });
      expect([refused.state.kind, refused.openmp, refused.openmpError?.code]).toEqual([
        'ok',
        undefined,
        'MQD_E_DLL_POLICY',
      ]);
      expect(refused.openmpError?.message).toContain(here);
      // No OMPD options at all: the strictest policy, the same refusal.
      expect(read({}).openmpError?.code).toBe('MQD_E_DLL_POLICY');
      // A library that crashed a reader before is not loaded again.
      const crashed = read({ ompd: { refused: { [here]: 'crashed reading pid 1 (SIGSEGV)' } } });
      expect([crashed.state.kind, crashed.openmpError?.code]).toEqual(['ok', 'MQD_E_OMPD_CRASHED']);
      expect(crashed.openmpError?.message).toContain(here);
      // Supervision: the reader says which library it enters, for the core's key.
      const entered: string[] = [];
      const watched = read({ ompd: { onEnter: (lib) => entered.push(lib) } });
      expect([entered, watched.openmpError]).toEqual([[here], undefined]);
      expect(session.ompd.outstandingBlocks()).toBe(0);
    } finally {
      session.close();
      core.close();
    }
  });

  it('MPICH: a kernel core (SIGABRT) of one hybrid rank gives the live OpenMP threads', async () => {
    const mpi = 'mpich';
    requireHybridBuilt(mpi);
    const fixture = 'omp_single_recv';
    const job = await rig.launch({ mpi, fixture, hybrid: true });
    const live = await settledLive(job, fixture);
    const rank0 = job.ranks[0];
    if (!rank0) throw new Error('no rank 0');
    const dir = join(work, 'kernel');
    rmSync(dir, { recursive: true, force: true });
    await run('mkdir', ['-p', '-m', '1777', dir]);
    const pattern = '/proc/sys/kernel/core_pattern';
    const saved = readFileSync(pattern, 'utf8').trimEnd();
    try {
      writeFileSync(pattern, `${dir}/core.%p`);
      await run('prlimit', [`--pid=${rank0.pid}`, '--core=unlimited']);
      writeFileSync(`/proc/${rank0.pid}/coredump_filter`, '0x33');
      // The starter and its proxies stand still: when a rank dies they kill the others, and a
      // SIGKILL in the middle of a core dump cuts the core short.
      const rankPids = new Set(job.ranks.map((r) => r.pid));
      for (const p of [job.starterPid, ...liveDescendants(job.starterPid).filter((x) => !rankPids.has(x))])
        process.kill(p, 'SIGSTOP');
      process.kill(rank0.pid, 'SIGABRT');
      // The kernel has written a core completely once its process is gone.
      await expect.poll(() => !pidAlive(rank0.pid), { timeout: 60_000, interval: 100 }).toBe(true);
    } finally {
      writeFileSync(pattern, saved);
    }
    const fromCore = (await snapshotter.snapshotCores([{ path: join(dir, `core.${rank0.pid}`) }])).snapshot;
    expect(fromCore.source?.cores.map((c) => [c.rank, c.signal])).toEqual([[0, 6]]);
    expectSameOpenMp(`${mpi} ${fixture} rank 0 (kernel core)`, rankOf(fromCore, 0), rankOf(live, 0), fixture);
  });
});

function pidAlive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
