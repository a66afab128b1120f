// Call stacks from ELF core files: the conformance target (extra threads, a deep
// recursion) is stopped and unwound live, resumed, dumped with Debian's gdb (`gcore`) and killed;
// the core must give the same threads and frames as the live unwind, the same main-thread
// functions as eu-stack reading the core, the same frame registers and arguments, coded errors
// for what is not a core or misses its executable, and leave no native block or fd behind.
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ThreadStack } from '@mqd/model';
import { parseEuStack } from '@mqd/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readCoreBytes, readCoreInfo } from '../src/inferior/core-file.js';
import { stopProcess } from '../src/inferior/stopper.js';
import { type FrameRegs, Unwinder, type UnwoundRank } from '../src/inferior/unwind.js';
import { nativeAllocations } from '../src/native/alloc.js';
import { buildConformance, killAllTargets, startParked, type Target } from './conformance-kit.js';

const b = buildConformance();
const dir = mkdtempSync(join(tmpdir(), 'mqd-stacks-core-'));
const unwinder = new Unwinder();
afterEach(() => killAllTargets());
afterAll(() => {
  unwinder.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/** Debian's gdb writes the core of a running process (and detaches); the target is then killed. */
function gcore(t: Target, path: string): string {
  execFileSync('gdb', ['-batch', '-nx', '-p', String(t.pid), '-ex', `gcore ${path}`], {
    stdio: 'pipe',
    timeout: 60_000,
  });
  t.kill();
  return path;
}

/** 8 bytes of a stopped process, through /proc/PID/mem (we are its tracer). */
function liveReader(pid: number): { read: (addr: bigint) => bigint | null; close: () => void } {
  const fd = openSync(`/proc/${pid}/mem`, 'r');
  const buf = Buffer.alloc(8);
  return {
    read: (addr) => (readSync(fd, buf, 0, 8, addr) === 8 ? buf.readBigUInt64LE(0) : null),
    close: () => closeSync(fd),
  };
}

/** 8 bytes of a core's memory (core-file.ts, the reader's own core access). */
function coreReader(path: string): { read: (addr: bigint) => bigint | null; close: () => void } {
  const info = readCoreInfo(path);
  if (!info.ok) throw new Error(info.error.message);
  const fd = openSync(path, 'r');
  return {
    read: (addr) => {
      const bytes = readCoreBytes(info.value, fd, addr, 8);
      return bytes ? Buffer.from(bytes).readBigUInt64LE(0) : null;
    },
    close: () => closeSync(fd),
  };
}

function stacks(r: UnwoundRank | { code: string; message: string }): ThreadStack[] {
  if ('code' in r) throw new Error(r.message);
  return r.threads;
}

const fdCount = () => readdirSync('/proc/self/fd').length;
/** Function names as eu-stack prints them: symbol versions dropped, unknown = '??'. */
const norm = (f: string | null) => (f ?? '??').replace(/@.*$/, '');
/** Physical frame index (inlined frames excluded) of the innermost mqdtest_deep frame + 2: n = 2. */
const DEEP_INDEX = 3;

describe('stacks from a core file (conformance target, gcore)', () => {
  let pid = 0;
  let core = '';
  let live: ThreadStack[] = [];
  let liveRegs: FrameRegs | null = null;
  let liveArgs = new Map<string, bigint>();

  beforeAll(async () => {
    const t = await startParked(b, { MQDTEST_THREADS: '3', MQDTEST_DEPTH: '10' });
    pid = t.pid;
    const stop = stopProcess(pid);
    if (!stop.ok) throw new Error(stop.error.message);
    const mem = liveReader(pid);
    try {
      live = stacks(unwinder.unwind(pid, stop.value.tids));
      liveRegs = unwinder.frameRegisters(pid, pid, DEEP_INDEX);
      liveArgs = unwinder.frameArgs(pid, pid, DEEP_INDEX, 'mqdtest_deep', mem.read);
    } finally {
      mem.close();
      stop.value.resume();
    }
    unwinder.drop(pid);
    core = gcore(t, join(dir, 'target.core'));
  });

  it('gives the threads and frames of the live unwind taken just before', () => {
    const r = stacks(unwinder.unwindCore(-1, core));
    expect(r.map((t) => [t.tid, t.main])).toEqual(live.map((t) => [t.tid, t.main]));
    expect(r.map((t) => t.tid)).toEqual([pid, ...live.slice(1).map((t) => t.tid)]);
    expect(r.length).toBe(4);
    for (const [i, th] of r.entries()) {
      const l = live[i];
      expect(th.name).toBeNull(); // a core has no per-thread names
      expect(l?.name).toBe('mqdtest_target');
      // Same pcs, functions, file:line and inlining; the module is the same file.
      const strip = (t: ThreadStack | undefined) =>
        t?.frames.map((f) => ({ ...f, module: f.module?.replace(/^.*\//, '') ?? null }));
      expect(strip(th)).toEqual(strip(l));
      expect([th.truncated, th.error]).toEqual([l?.truncated, l?.error]);
    }
    const names = r[0]?.frames.map((f) => f.function) ?? [];
    expect(names.filter((n) => n === 'mqdtest_deep')).toHaveLength(11);
    expect(names).toContain('main');
    for (const th of r.slice(1)) expect(th.frames.map((f) => f.function)).toContain('mqdtest_thread');
    // The core's own notes (core-file.ts) list the same threads.
    const info = readCoreInfo(core);
    expect(info.ok && info.value.threads.map((t) => t.tid).sort()).toEqual(r.map((t) => t.tid).sort());
  });

  it('names the same main-thread functions as eu-stack reading the core', () => {
    const ours = stacks(unwinder.unwindCore(-1, core))[0]?.frames.filter((f) => !f.inlined) ?? [];
    for (const args of [
      ['--core', core, '-e', b.target],
      ['--core', core],
    ]) {
      const out = execFileSync('eu-stack', args, { encoding: 'utf8', timeout: 30_000 });
      const theirs = parseEuStack(out, pid);
      expect(theirs.length).toBeGreaterThan(12);
      expect(ours.map((f) => norm(f.function))).toEqual(theirs.map(norm));
    }
  });

  it('re-uses the Dwfl of a key while the core is the same, and a new key is a new Dwfl', () => {
    const a = stacks(unwinder.unwindCore(-1, core));
    const cached = unwinder.cachedSymbols;
    const again = stacks(unwinder.unwindCore(-1, core));
    expect(unwinder.cachedSymbols).toBe(cached);
    expect(again).toEqual(a);
    expect(stacks(unwinder.unwindCore(-2, core))).toEqual(a);
    unwinder.retain(new Set([-1])); // drops -2
    expect(stacks(unwinder.unwindCore(-1, core))).toEqual(a);
  });

  it('frameRegisters and frameArgs read a core key like a pid', () => {
    stacks(unwinder.unwindCore(-1, core));
    expect(liveRegs).not.toBeNull();
    // Raw 64-bit words: `int n` is the low half (callers narrow ints).
    const int = (v: bigint | undefined) => (v === undefined ? undefined : BigInt.asIntN(32, v));
    expect(int(liveArgs.get('n'))).toBe(2n);
    const regs = unwinder.frameRegisters(-1, pid, DEEP_INDEX);
    expect(regs).toEqual(liveRegs);
    const mem = coreReader(core);
    try {
      expect(unwinder.frameArgs(-1, pid, DEEP_INDEX, 'mqdtest_deep', mem.read)).toEqual(liveArgs);
      expect(int(unwinder.frameArgs(-1, pid, DEEP_INDEX + 2, 'mqdtest_deep', mem.read).get('n'))).toBe(4n);
      // An unknown key is like a pid we do not hold: nothing.
      expect(unwinder.frameRegisters(-99, pid, DEEP_INDEX)).toBeNull();
      expect(unwinder.frameArgs(-99, pid, DEEP_INDEX, 'mqdtest_deep', mem.read).size).toBe(0);
    } finally {
      mem.close();
    }
  });

  it('cuts a thread at maxFrames as the live unwind does', () => {
    unwinder.drop(-1);
    const r = stacks(unwinder.unwindCore(-1, core, { maxFrames: 5 }));
    expect(r[0]?.frames).toHaveLength(5);
    expect(r[0]?.truncated).toBe(true);
  });

  it('a file that is not a core is MQD_E_CORE_INVALID; an executable that cannot be read is MQD_E_NO_STACKS', () => {
    const text = join(dir, 'not-a-core.txt');
    writeFileSync(text, 'MQD '.repeat(100));
    const code = (r: UnwoundRank | { code: string; message: string }) => ('code' in r ? r.code : 'ok');
    expect(code(unwinder.unwindCore(-5, text))).toBe('MQD_E_CORE_INVALID');
    const elf = unwinder.unwindCore(-5, b.target); // an ELF file, but an executable
    expect(code(elf)).toBe('MQD_E_CORE_INVALID');
    expect('message' in elf && elf.message).toMatch(/not an x86_64 core/);
    expect(code(unwinder.unwindCore(-5, join(dir, 'absent.core')))).toBe('MQD_E_CORE_INVALID');
    const noExe = unwinder.unwindCore(-5, core, { exe: join(dir, 'absent-exe') });
    expect(code(noExe)).toBe('MQD_E_NO_STACKS');
    expect('message' in noExe && noExe.message).toMatch(/absent-exe cannot be read/);
    expect(() => unwinder.unwindCore(5, core)).toThrow(/negative/);
  });

  it('200 unwindCore + drop cycles leave no native block and no file descriptor behind', () => {
    const text = join(dir, 'not-a-core-2.txt');
    writeFileSync(text, 'x');
    const cycle = () => {
      expect(stacks(unwinder.unwindCore(-7, core)).length).toBe(4);
      const regs = unwinder.frameRegisters(-7, pid, DEEP_INDEX);
      expect(regs?.pc).toBe(liveRegs?.pc);
      unwinder.drop(-7);
    };
    cycle(); // first use of the core callbacks (permanent, once per Unwinder)
    const before = { ...nativeAllocations(), fds: fdCount() };
    for (let i = 0; i < 200; i++) cycle();
    for (let i = 0; i < 20; i++) {
      // Failures release what they opened too.
      expect('code' in unwinder.unwindCore(-7, b.target)).toBe(true);
      expect('code' in unwinder.unwindCore(-7, text)).toBe(true);
    }
    expect({ ...nativeAllocations(), fds: fdCount() }).toEqual(before);
    // dispose() closes the cores an Unwinder still holds.
    const other = new Unwinder();
    stacks(other.unwindCore(-1, core));
    stacks(other.unwindCore(-2, core));
    expect(fdCount()).toBeGreaterThan(before.fds);
    other.dispose();
    expect(fdCount()).toBe(before.fds);
  });
});

describe('a core whose executable is gone', () => {
  it('is MQD_E_NO_STACKS naming the file, and unwinds with exe given', async () => {
    const copyDir = join(dir, 'moved');
    mkdirSync(copyDir, { recursive: true });
    const exe = join(copyDir, 'mqdtest_target');
    copyFileSync(b.target, exe);
    copyFileSync(b.lib, join(copyDir, 'libmpi_mqdtest.so')); // found through $ORIGIN
    const t = await startParked(b, { MQDTEST_DEPTH: '2' }, exe);
    const tid = t.pid;
    const core = gcore(t, join(dir, 'moved.core'));
    rmSync(exe);
    // A fresh Unwinder: the shared one already has these pcs' names cached from b.target.
    const fresh = new Unwinder();
    try {
      await expectGone(fresh, core, exe, tid);
    } finally {
      fresh.dispose();
    }
  });
});

async function expectGone(unwinder: Unwinder, core: string, exe: string, tid: number) {
  const gone = unwinder.unwindCore(-11, core);
  expect('code' in gone && gone.code).toBe('MQD_E_NO_STACKS');
  expect('message' in gone && gone.message).toContain(exe);
  // The same build-id at another path: the frames have names again (nothing was cached from
  // the nameless attempt).
  const found = stacks(unwinder.unwindCore(-12, core, { exe: b.target }));
  expect(found[0]?.tid).toBe(tid);
  expect(found[0]?.frames.filter((f) => f.function === 'mqdtest_deep')).toHaveLength(3);
}
