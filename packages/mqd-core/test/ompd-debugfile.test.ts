// OMPD with a stripped OpenMP runtime, unit project: LLVM's libomp (built by the provisioning)
// split the way distributions ship it (`objcopy --only-keep-debug`, `strip --strip-all`, the
// debug file found through .gnu_debuglink or a build-id tree under MQD_DEBUGINFO_PATH), a real
// OpenMP program run against the stripped copy (LD_LIBRARY_PATH; libompd.so beside it, where
// the runtime names it): the same thread table as with the unstripped runtime. Without the
// debug file: MQD_E_OMPD_NO_SYMBOLS naming the runtime and where its debug file belongs.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { OpenMpRuntime } from '@mqd/model';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processState, tracerPid } from '../src/index.js';
import { DebugFile } from '../src/inferior/debug-file.js';
import { DebugFileRegistry } from '../src/inferior/debug-file-registry.js';
import { readElfInfo } from '../src/inferior/elf.js';
import { readOpenMp } from '../src/ompd/read.js';
import { buildIdPath, snapshottersPerTest, type Target, waitFor } from './conformance-kit.js';
import {
  buildOmpd,
  OMP_ENV,
  OMP_MODE,
  type OmpdBuilt,
  OPENMP_PREFIX,
  openmpRuntimeMissing,
  startOmpTarget,
} from './ompd-kit.js';

const missing = openmpRuntimeMissing();
const RUNTIME = join(OPENMP_PREFIX, 'lib', 'libomp.so');
const LIBOMPD = join(OPENMP_PREFIX, 'lib', 'libompd.so');
const work = mkdtempSync(join(tmpdir(), 'mqd-ompd-debugfile-'));
/** A debug root that holds nothing (so /usr/lib/debug never answers for these copies). */
const emptyRoot = join(work, 'empty-root');
let b: OmpdBuilt;
let buildId: string;

/** Cleanup of the file's targets after each test and at the end. */
snapshottersPerTest();
afterAll(() => rmSync(work, { recursive: true, force: true }));

const run = (cmd: string, args: string[], cwd?: string) =>
  execFileSync(cmd, args, { stdio: 'pipe', ...(cwd ? { cwd } : {}) });

/**
 * `dir/libomp.so`: a stripped copy of the runtime (no .symtab, no DWARF) with libompd.so beside
 * it; its debug file written to `debug` when given (the caller decides where libdw finds it).
 */
function strippedRuntime(dir: string, debug: string | null, debuglink: string | null): string {
  mkdirSync(dir, { recursive: true });
  const lib = join(dir, 'libomp.so');
  copyFileSync(RUNTIME, lib);
  copyFileSync(LIBOMPD, join(dir, 'libompd.so'));
  if (debug) run('objcopy', ['--only-keep-debug', lib, debug]);
  run('strip', ['--strip-all', lib]);
  // objcopy reads the named file for its CRC, from the working directory.
  if (debuglink) run('objcopy', [`--add-gnu-debuglink=${debuglink}`, 'libomp.so'], dir);
  return lib;
}

async function withDebugPath<T>(path: string, f: () => Promise<T>): Promise<T> {
  const before = process.env['MQD_DEBUGINFO_PATH'];
  process.env['MQD_DEBUGINFO_PATH'] = path;
  try {
    return await f();
  } finally {
    if (before === undefined) delete process.env['MQD_DEBUGINFO_PATH'];
    else process.env['MQD_DEBUGINFO_PATH'] = before;
  }
}

function runtimeOf(r: { openmp?: OpenMpRuntime | null; openmpError?: unknown }): OpenMpRuntime {
  if (!r.openmp) throw new Error(`no OpenMP read: ${JSON.stringify(r.openmpError ?? r.openmp)}`);
  return r.openmp;
}

/**
 * The thread table without what differs from run to run (tids, addresses, which thread number
 * got the `single` or the task): a sorted multiset, and the thread numbers apart.
 */
const table = (rt: OpenMpRuntime) => ({
  threadNums: rt.threads.map((t) => t.threadNum).sort(),
  threads: rt.threads
    .map((t) =>
      JSON.stringify({
        state: t.state,
        parallel: t.parallel,
        function: t.task?.function ?? null,
        kind: t.task?.kind ?? null,
        waits: t.waitId !== null,
      }),
    )
    .sort(),
});

async function expectRunningFree(t: Target): Promise<void> {
  await waitFor(() => tracerPid(t.pid) === 0, 10_000);
  expect(processState(t.pid)).toMatch(/^[RS]$/);
}

/** Reads `mode` on the unstripped runtime, then on `dir`'s copy, each with its own file registry. */
async function expectSameAsUnstripped(dir: string, mode: number, threads: number): Promise<OpenMpRuntime> {
  const plain = await startOmpTarget(b, mode, OMP_ENV, threads);
  const want = runtimeOf(readOpenMp(plain.pid, { registry: new DebugFileRegistry() }));
  expect(want.runtime).toBe(RUNTIME);
  plain.kill();
  const t = await startOmpTarget(b, mode, { ...OMP_ENV, LD_LIBRARY_PATH: dir }, threads);
  // A registry of its own: one shared with the unstripped file (same build-id) would answer for it.
  const got = runtimeOf(readOpenMp(t.pid, { registry: new DebugFileRegistry() }));
  expect(got.runtime).toBe(join(dir, 'libomp.so'));
  expect(got.ompd).toBe(join(dir, 'libompd.so'));
  expect(got.version).toBe(want.version);
  expect(got.threads).toHaveLength(threads);
  expect(table(got)).toEqual(table(want));
  await expectRunningFree(t);
  return got;
}

describe.skipIf(missing !== null)('OMPD: a stripped OpenMP runtime and its separate debug file', () => {
  beforeAll(() => {
    b = buildOmpd();
    const info = readElfInfo(RUNTIME);
    if (!info.ok || !info.value.buildId) throw new Error(`${RUNTIME} has no build-id`);
    buildId = info.value.buildId;
    mkdirSync(emptyRoot, { recursive: true });
  }, 120_000);

  it('DebugFile of the stripped copy: symbols, TLS symbols and functions from the debug file only', async () => {
    const dir = join(work, 'file');
    const lib = strippedRuntime(dir, join(dir, 'runtime.dbg'), 'runtime.dbg');
    const original = DebugFile.open(RUNTIME);
    if (typeof original === 'string') throw new Error(original);
    await withDebugPath(`:.debug:${emptyRoot}`, async () => {
      const split = DebugFile.open(lib);
      if (typeof split === 'string') throw new Error(split);
      const lonely = join(work, 'file-nodebug');
      const bare = DebugFile.open(strippedRuntime(lonely, null, null));
      if (typeof bare === 'string') throw new Error(bare);
      try {
        expect(split.buildId).toBe(buildId);
        for (const name of ['ompd_dll_locations', 'ompd_state', 'ompd_sizeof__kmp_task_t']) {
          expect(split.symbol(name)).toEqual(original.symbol(name));
          expect(split.symbol(name)?.global).toBe(false); // LOCAL: only in a full .symtab
        }
        // __kmp_gtid: STT_TLS, LOCAL, offset in the runtime's TLS block; never an address.
        const gtid = original.tlsSymbol('__kmp_gtid');
        expect(gtid).toMatchObject({ global: false, size: 4 });
        expect(split.tlsSymbol('__kmp_gtid')).toEqual(gtid);
        expect(split.symbol('__kmp_gtid')).toBeUndefined();
        const fork = original.symbol('__kmpc_fork_call');
        if (!fork) throw new Error('no __kmpc_fork_call');
        expect(split.functionAt(fork.value)).toBe('__kmpc_fork_call');
        expect(split.functionAt(fork.value + 1n)).toBe('__kmpc_fork_call');
        expect(split.separateDebugFile()).toBe(join(dir, 'runtime.dbg'));
        // Without the debug file the copy has only .dynsym: the LOCAL and TLS symbols are gone.
        expect(bare.symbol('__kmpc_fork_call')?.value).toBe(fork.value);
        expect(bare.symbol('ompd_dll_locations')).toBeUndefined();
        expect(bare.tlsSymbol('__kmp_gtid')).toBeUndefined();
        expect(bare.separateDebugFile()).toBeNull();
      } finally {
        split.close();
        bare.close();
        original.close();
      }
    });
  }, 120_000);

  it('debug file by .gnu_debuglink: omp single reads as with the unstripped runtime', async () => {
    const dir = join(work, 'debuglink');
    // Not <file>.debug, which libdw tries without any link: only the link names this file.
    strippedRuntime(dir, join(dir, 'omp-runtime.dbg'), 'omp-runtime.dbg');
    const rt = await withDebugPath(`:.debug:${emptyRoot}`, () =>
      expectSameAsUnstripped(dir, OMP_MODE.single, 4),
    );
    expect(rt.threads.map((x) => x.state).sort()).toEqual([
      'ompt_state_wait_barrier',
      'ompt_state_wait_barrier',
      'ompt_state_wait_barrier',
      'ompt_state_work_parallel',
    ]);
  }, 180_000);

  it('debug file by build-id under a debug root: an explicit task reads as with the unstripped runtime', async () => {
    const dir = join(work, 'buildid');
    const root = join(work, 'buildid-root');
    const at = buildIdPath(root, buildId);
    mkdirSync(join(at, '..'), { recursive: true });
    strippedRuntime(dir, at, null);
    const rt = await withDebugPath(`:.debug:${root}`, () => expectSameAsUnstripped(dir, OMP_MODE.task, 2));
    expect(rt.threads.find((x) => x.task?.kind === 'explicit')?.task?.function).toBe('.omp_task_entry.');
  }, 180_000);

  it('debug file absent: MQD_E_OMPD_NO_SYMBOLS naming the runtime and where to install its debug file', async () => {
    const dir = join(work, 'absent');
    const lib = strippedRuntime(dir, null, null);
    const root = join(work, 'absent-root');
    const r = await withDebugPath(`:.debug:${root}`, async () => {
      const t = await startOmpTarget(b, OMP_MODE.single, { ...OMP_ENV, LD_LIBRARY_PATH: dir }, 4);
      const read = readOpenMp(t.pid, { registry: new DebugFileRegistry() });
      await expectRunningFree(t);
      return read;
    });
    expect(r.openmp).toBeUndefined();
    expect(r.openmpError?.code).toBe('MQD_E_OMPD_NO_SYMBOLS');
    const message = r.openmpError?.message ?? '';
    expect(message).toContain(`OpenMP runtime ${lib} is stripped`);
    expect(message).toContain(`build-id ${buildId}`);
    expect(message).toContain(buildIdPath(root, buildId));
    expect(message).toContain(join(dir, 'libomp.so.debug'));
    expect(message).toMatch(/libomp5-NN-dbgsym/);
  }, 120_000);
});
