// Message queues and stacks from core files, on REAL hung jobs of both MPIs, with the
// built CLI as a user runs it: for every hang fixture, `mqd capture` writes one core per rank
// and `mqd snapshot --cores DIR` gives the snapshot `mqd snapshot` gave live just before
// (queues, groups, names, the MPI call and the main thread's stack). Cores made by the kernel
// (SIGABRT, core_pattern into a directory of the test) read the same way. Bad cores each get
// their code: truncated, not a core, a changed executable, memory the core lacks.
import { execFile } from 'node:child_process';
import {
  copyFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { JobSnapshot } from '@mqd/model';
import {
  disposeAll,
  type FixtureJob,
  HANG_FIXTURES,
  launchFixture,
  liveDescendants,
  MPI_NAMES,
  normaliseSnapshot,
  openmpPrefix,
} from '@mqd/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { mqd } from './run-mqd.js';

const run = promisify(execFile);

const work = mkdtempSync(join(tmpdir(), 'mqd-cores-'));
let job: FixtureJob | null = null;
afterEach(async () => {
  await job?.dispose();
  job = null;
});
afterAll(async () => {
  await disposeAll();
  rmSync(work, { recursive: true, force: true });
});

async function snapshotJson(args: string[]): Promise<JobSnapshot> {
  const r = await mqd(['snapshot', ...args, '--json']);
  expect(r.code, r.err || r.out.slice(0, 4000)).toBe(0);
  return JSON.parse(r.out) as JobSnapshot;
}

/** What a core must reproduce of a live snapshot: per rank, the queues and the call it is in. */
function essence(s: JobSnapshot) {
  const n = normaliseSnapshot(s);
  return n.ranks.map((r) => ({
    rank: r.rank,
    pid: r.pid,
    host: r.host,
    state: r.state,
    communicators: r.communicators,
    mpiCall: r.mpiCall?.function ?? null,
    mainStack: r.threads?.find((t) => t.main)?.frames.map((f) => f.function) ?? null,
  }));
}

const pidArgs = (j: FixtureJob) => j.ranks.flatMap((r) => ['--pid', `${r.pid}:${r.rank}`]);

describe.each(MPI_NAMES)('%s: cores written by mqd capture', (mpi) => {
  it.each(HANG_FIXTURES)('%s: the snapshot from the cores equals the live one', async (fixture) => {
    job = await launchFixture({ mpi, fixture });
    const live = await snapshotJson(pidArgs(job));
    const dir = join(work, `${mpi}-${fixture}`);
    const cap = await mqd(['capture', ...pidArgs(job), '--out', dir, '--json']);
    expect(cap.code, cap.err).toBe(0);
    const manifest = JSON.parse(cap.out) as { ranks: { rank: number; core: string; pid: number }[] };
    expect(manifest.ranks.map((r) => [r.rank, r.pid, r.core])).toEqual(
      job.ranks.map((r) => [r.rank, r.pid, `rank-${r.rank}.core`]),
    );
    // The job is gone before the cores are read: nothing can come from the live processes.
    await job.dispose();
    const fromCores = await snapshotJson(['--cores', dir]);
    expect(fromCores.source?.kind).toBe('core');
    expect(fromCores.source?.cores.map((c) => [c.rank, c.signal])).toEqual(
      manifest.ranks.map((r) => [r.rank, 0]),
    );
    expect(fromCores.ranks.every((r) => r.pausedMicros === 0)).toBe(true);
    expect(fromCores.mpi).toEqual(live.mpi);
    expect(essence(fromCores)).toEqual(essence(live));
  });
});

describe('mqd capture --bundle', () => {
  it("carries the job's files and DLL; --cores DIR reads with them", async () => {
    job = await launchFixture({ mpi: 'mpich', fixture: 'wrong_tag' });
    const live = await snapshotJson(pidArgs(job));
    const dir = join(work, 'bundle');
    const cap = await mqd(['capture', ...pidArgs(job), '--out', dir, '--bundle']);
    expect(cap.code, cap.err).toBe(0);
    await job.dispose();
    const sysroot = join(dir, 'sysroot');
    // The executable, the MPI library and the DLL, each under its own path.
    for (const f of [job.binary, live.mpi.dll ?? 'no DLL'])
      expect(statSync(join(sysroot, f)).size).toBe(statSync(f).size);
    const fromCores = await snapshotJson(['--cores', dir]);
    expect(fromCores.mpi.dll).toBe(join(sysroot, live.mpi.dll ?? ''));
    expect(essence(fromCores).map(({ mainStack: _s, ...r }) => r)).toEqual(
      essence(live).map(({ mainStack: _s, ...r }) => r),
    );
  });
});

describe('mqd capture --bundle of a hybrid MPI+OpenMP job', () => {
  it("carries the OpenMP runtime's libompd.so; --cores DIR reads the OpenMP threads with it", async () => {
    job = await launchFixture({ mpi: 'mpich', fixture: 'omp_single_recv', hybrid: true });
    const live = await snapshotJson(pidArgs(job));
    const dir = join(work, 'bundle-openmp');
    const cap = await mqd(['capture', ...pidArgs(job), '--out', dir, '--bundle']);
    expect(cap.code, cap.err).toBe(0);
    await job.dispose();
    const libompd = join(openmpPrefix(), 'lib', 'libompd.so');
    const sysroot = join(dir, 'sysroot');
    expect(statSync(join(sysroot, libompd)).size).toBe(statSync(libompd).size);
    const fromCores = await snapshotJson(['--cores', dir]);
    for (const [i, r] of fromCores.ranks.entries()) {
      const was = live.ranks[i]?.openmp;
      expect(was?.threads.length, `rank ${r.rank} live`).toBe(4);
      expect(r.openmp?.ompd, `rank ${r.rank}`).toBe(join(sysroot, libompd));
      expect(r.openmp?.threads).toEqual(was?.threads);
    }
  });
});

// Kernel cores per family (the rank comes from each starter's own variable in the core's
// environment: OMPI_COMM_WORLD_RANK, PMI_RANK), on one fixture: the kernel dumps what `mqd capture`
// dumps (the same coredump_filter 0x33, core-writer.ts), and the captured cores above already show
// every fixture's queue memory is in such a core. wrong_tag has both a posted receive and
// unexpected messages (the other four fixtures would add only that memory again).
const KERNEL_CORE_FIXTURES = ['wrong_tag'] as const;

describe.each(MPI_NAMES)('%s: cores the kernel wrote', (mpi) => {
  it.each(KERNEL_CORE_FIXTURES)(
    '%s: SIGABRT cores read like the live job, rank from the environment in each core',
    async (fixture) => {
      job = await launchFixture({ mpi, fixture });
      const live = await snapshotJson(pidArgs(job));
      const dir = join(work, `${mpi}-${fixture}-kernel`);
      rmSync(dir, { recursive: true, force: true });
      await run('mkdir', ['-p', '-m', '1777', dir]);
      const pattern = '/proc/sys/kernel/core_pattern';
      const saved = readFileSync(pattern, 'utf8').trimEnd();
      try {
        writeFileSync(pattern, `${dir}/core.%p`);
        for (const r of job.ranks) {
          await run('prlimit', [`--pid=${r.pid}`, '--core=unlimited']);
          writeFileSync(`/proc/${r.pid}/coredump_filter`, '0x33');
        }
        // The starter and its proxies stand still: when one rank dies they kill the others, and a
        // SIGKILL in the middle of a core dump cuts the core short.
        const rankPids = new Set(job.ranks.map((r) => r.pid));
        const helpers = [job.starterPid, ...liveDescendants(job.starterPid).filter((p) => !rankPids.has(p))];
        for (const p of helpers) process.kill(p, 'SIGSTOP');
        for (const r of job.ranks) process.kill(r.pid, 'SIGABRT');
        // The kernel has written a core completely once its process is gone.
        await expect
          .poll(() => job?.ranks.every((r) => !pidAlive(r.pid)) ?? false, { timeout: 60_000, interval: 100 })
          .toBe(true);
      } finally {
        writeFileSync(pattern, saved);
      }
      const cores = readdirSync(dir).filter((f) => f.startsWith('core.'));
      expect(cores.sort()).toEqual(job.ranks.map((r) => `core.${r.pid}`).sort());
      const fromCores = await snapshotJson(['--cores', dir]);
      expect(fromCores.source?.cores.map((c) => c.signal)).toEqual([6, 6, 6, 6]);
      // The kernel's cores name the rank nowhere but in the process's environment.
      expect(essence(fromCores).map(({ mainStack: _s, ...rest }) => rest)).toEqual(
        essence(live).map(({ mainStack: _s, ...rest }) => rest),
      );
      // Killed by a signal in its MPI call: the main thread's frames from the MPI call outwards.
      for (const r of fromCores.ranks)
        expect(r.mpiCall?.function).toBe(live.ranks[r.rank]?.mpiCall?.function);
    },
  );
});

describe('bad cores get their codes', () => {
  it('truncated, not a core, a changed executable, and memory the core lacks', async () => {
    const mpi = 'openmpi';
    job = await launchFixture({ mpi, fixture: 'wrong_tag' });
    const dir = join(work, 'bad');
    const cap = await mqd(['capture', '--pid', `${job.ranks[0]?.pid}:0`, '--out', dir]);
    expect(cap.code, cap.err).toBe(0);
    const core = join(dir, 'rank-0.core');
    const binary = job.binary;
    await job.dispose();

    const cut = join(work, 'cut.core');
    copyFileSync(core, cut);
    truncateSync(cut, Math.floor(statSync(cut).size / 2));
    const t = await mqd(['snapshot', '--core', cut, '--rank', '0', '--json']);
    expect(t.code).toBe(1);
    expect((JSON.parse(t.out) as JobSnapshot).ranks[0]?.state).toMatchObject({
      code: 'MQD_E_CORE_TRUNCATED',
    });

    const notCore = await mqd(['snapshot', '--core', binary, '--rank', '0', '--json']);
    expect(notCore.code).toBe(1);
    expect((JSON.parse(notCore.out) as JobSnapshot).ranks[0]?.state).toMatchObject({
      code: 'MQD_E_CORE_INVALID',
    });

    // Another program where the executable was: its build-id differs from the core's record.
    const other = fileURLToPath(new URL(`../../../fixtures/mpi/build/${mpi}/ring_ssend`, import.meta.url));
    const changed = await mqd(['snapshot', '--core', core, '--rank', '0', '--exe', other, '--json']);
    expect(changed.code).toBe(1);
    const c = (JSON.parse(changed.out) as JobSnapshot).ranks[0]?.state;
    expect(c).toMatchObject({ code: 'MQD_E_CORE_BUILD_ID' });
    expect(c && 'message' in c ? c.message : '').toContain(other);

    // A core made with a coredump_filter that left out written memory (heap, .data, .bss): its
    // writable segments keep their size but no bytes. The queues live there: the rank says so
    // instead of showing fewer messages.
    const thin = join(work, 'thin.core');
    copyFileSync(core, thin);
    dropWritableSegments(thin);
    const missing = await mqd(['snapshot', '--core', thin, '--rank', '0', '--json']);
    expect(missing.code).toBe(1);
    expect((JSON.parse(missing.out) as JobSnapshot).ranks[0]?.state).toMatchObject({
      code: 'MQD_E_CORE_MISSING_PAGES',
    });
  });
});

function pidAlive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Sets p_filesz of every writable PT_LOAD to 0, as a core written with coredump_filter 0 would have. */
function dropWritableSegments(path: string): void {
  const b = readFileSync(path);
  const phoff = Number(b.readBigUInt64LE(32));
  const phnum = b.readUInt16LE(56);
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * 56;
    const PT_LOAD = 1;
    const PF_W = 2;
    if (b.readUInt32LE(at) === PT_LOAD && (b.readUInt32LE(at + 4) & PF_W) !== 0)
      b.writeBigUInt64LE(0n, at + 32);
  }
  writeFileSync(path, b);
}
