// ELF cores: writeCore of the conformance target stopped the way a snapshot stops a
// rank, read back by readCoreInfo/readCoreBytes and checked against the live process; Debian's
// gdb and eu-readelf as independent readers of our core, gdb's gcore as an independent writer
// for our reader; bad cores each with their code; the writer's failure paths.
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { type CoreInfo, coreBuildIdAt, readCoreBytes, readCoreInfo } from '../src/inferior/core-file.js';
import { type CoreWriteOptions, writeCore } from '../src/inferior/core-writer.js';
import { DebugFileRegistry } from '../src/inferior/debug-file-registry.js';
import { readElfInfo } from '../src/inferior/elf.js';
import { InferiorMemory } from '../src/inferior/memory.js';
import { tracerPid } from '../src/inferior/proc.js';
import { ProcessImage } from '../src/inferior/process-image.js';
import { stopProcess } from '../src/inferior/stopper.js';
import { nativeAllocations } from '../src/native/alloc.js';
import { NT_PRSTATUS, NT_PRSTATUS_BYTES, readRegSet } from '../src/native/ptrace-ext.js';
import { buildConformance, killAllTargets, startParked, waitFor } from './conformance-kit.js';

const b = buildConformance();
const dir = mkdtempSync(join(tmpdir(), 'mqd-core-file-'));
afterEach(() => killAllTargets());
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const RIP = 16;
const RSP = 19;

/** Stops `pid`, takes the registers of each thread and writes the core in the same stop. */
function capture(pid: number, out: string, opts?: CoreWriteOptions) {
  const stop = stopProcess(pid);
  if (!stop.ok) throw new Error(stop.error.message);
  try {
    const regs = new Map<number, BigUint64Array>();
    for (const tid of stop.value.tids) {
      const r = readRegSet(tid, NT_PRSTATUS, NT_PRSTATUS_BYTES);
      if (typeof r === 'number') throw new Error(`GETREGSET ${tid}: ${r}`);
      regs.set(tid, new BigUint64Array(r.buffer, r.byteOffset, 27));
    }
    const before = nativeAllocations();
    const written = writeCore(pid, stop.value.tids, out, opts);
    return { written, regs, tids: stop.value.tids, allocations: { before, after: nativeAllocations() } };
  } finally {
    stop.value.resume();
  }
}

function mustRead(path: string): CoreInfo {
  const r = readCoreInfo(path);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

/** File-backed mappings of /proc/PID/maps as NT_FILE lists them. */
function fileMappings(pid: number) {
  return readFileSync(`/proc/${pid}/maps`, 'utf8')
    .split('\n')
    .flatMap((line) => {
      const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ (\d+)\s+(\S.*)$/.exec(line);
      if (!m || m[4] === '0') return [];
      return [
        {
          start: BigInt(`0x${m[1]}`),
          end: BigInt(`0x${m[2]}`),
          fileOffset: BigInt(`0x${m[3]}`),
          path: m[5] ?? '',
        },
      ];
    });
}

function withFd<T>(path: string, fn: (fd: number) => T): T {
  const fd = openSync(path, 'r');
  try {
    return fn(fd);
  } finally {
    closeSync(fd);
  }
}

describe('writeCore + readCoreInfo on a live target', () => {
  it('holds every thread with its registers, the mapped files, memory and build-ids', async () => {
    const t = await startParked(b, { MQDTEST_THREADS: '2', MQDTEST_DEPTH: '3' });
    const out = join(dir, 'live.core');
    const c = capture(t.pid, out);
    if (!c.written.ok) throw new Error(c.written.error.message);
    expect(c.written.value).toMatchObject({ path: out, threads: 3 });
    expect(c.allocations.after).toEqual(c.allocations.before);
    expect(tracerPid(t.pid)).toBe(0);

    const info = mustRead(out);
    expect(info.pid).toBe(t.pid);
    expect(info.fname).toBe('mqdtest_target');
    // ELF_PRARGSZ: the arguments joined by spaces, cut at 79 bytes.
    expect(info.psargs).toBe(`${b.target} ${b.dll} 0 0`.slice(0, 79).trimEnd());
    expect(info.uid).toBe(process.getuid?.());
    expect(info.ppid).toBe(process.pid);
    expect(info.signal).toBe(0);
    expect(info.size).toBe(BigInt(c.written.value.bytes));
    expect(info.segments).toHaveLength(c.written.value.segments);

    const tasks = readdirSync(`/proc/${t.pid}/task`).map(Number).sort();
    expect(info.threads.map((x) => x.tid).sort()).toEqual(tasks);
    expect(info.threads[0]?.tid).toBe(t.pid);
    for (const th of info.threads) {
      const live = c.regs.get(th.tid);
      expect([...th.regs]).toEqual([...(live ?? [])]);
      expect(th.fpregs?.length).toBe(512);
    }
    const main = info.threads[0];
    expect(main?.regs[RIP]).toBe(c.regs.get(t.pid)?.[RIP]);
    expect(main?.regs[RSP]).toBe(c.regs.get(t.pid)?.[RSP]);

    expect(info.files).toEqual(fileMappings(t.pid));
    expect(info.auxv.get(6)).toBe(4096n); // AT_PAGESZ
    const auxv = readFileSync(`/proc/${t.pid}/auxv`);
    expect(info.auxv.get(9)).toBe(
      auxv.readBigUInt64LE(auxv.indexOf(Buffer.from([9, 0, 0, 0, 0, 0, 0, 0])) + 8),
    ); // AT_ENTRY

    // A global of the library (.bss) and the communicator it points to (its .data), core vs live.
    const image = ProcessImage.load(t.pid, new DebugFileRegistry());
    if (!image.ok) throw new Error(image.error.message);
    const sym = image.value.findSymbol('mqdtest_comms');
    if (!sym) throw new Error('no mqdtest_comms');
    const live = new InferiorMemory(t.pid, 1 << 20);
    withFd(out, (fd) => {
      const ptr = readCoreBytes(info, fd, sym.address, 8);
      expect(ptr).toEqual(live.readBytes(sym.address, 8));
      const comm = new DataView((ptr ?? new Uint8Array(8)).buffer).getBigUint64(0, true);
      const fromCore = readCoreBytes(info, fd, comm, 200);
      expect(fromCore).toEqual(live.readBytes(comm, 200));
      expect(Buffer.from(fromCore ?? []).toString('latin1', 8, 22)).toBe('MPI_COMM_WORLD');
      // The main thread's stack, from its stack pointer.
      const sp = main?.regs[RSP] ?? 0n;
      expect(readCoreBytes(info, fd, sp, 256)).toEqual(live.readBytes(sp, 256));
      // Text of a read-only mapping is not in the core (only its ELF header page).
      const deep = image.value.findSymbol('mqdtest_deep');
      expect(deep && readCoreBytes(info, fd, deep.address, 16)).toBeNull();

      const exeMap = info.files.find((f) => f.path === b.target && f.fileOffset === 0n);
      const libMap = info.files.find((f) => /\/libc\.so\.6$/.test(f.path) && f.fileOffset === 0n);
      if (!exeMap || !libMap) throw new Error('no exe or libc mapping in NT_FILE');
      const exeId = readElfInfo(b.target);
      const libId = readElfInfo(libMap.path);
      expect(exeId.ok && exeId.value.buildId).toMatch(/^[0-9a-f]{40}$/);
      expect(coreBuildIdAt(info, fd, exeMap.start)).toBe(exeId.ok ? exeId.value.buildId : 'x');
      expect(coreBuildIdAt(info, fd, libMap.start)).toBe(libId.ok ? libId.value.buildId : 'x');
      expect(coreBuildIdAt(info, fd, 0x1000n)).toBeNull();
    });

    // fileBackedReadOnly 'all': the text is in the core too, byte for byte.
    const all = join(dir, 'all.core');
    const c2 = capture(t.pid, all, { fileBackedReadOnly: 'all' });
    if (!c2.written.ok) throw new Error(c2.written.error.message);
    const infoAll = mustRead(all);
    const deep = image.value.findSymbol('mqdtest_deep');
    if (!deep) throw new Error('no mqdtest_deep');
    withFd(all, (fd) =>
      expect(readCoreBytes(infoAll, fd, deep.address, 64)).toEqual(live.readBytes(deep.address, 64)),
    );
    expect(c2.written.value.bytes).toBeGreaterThan(c.written.value.bytes);
  });

  it('is read by gdb and eu-readelf; gdb gcore of the same process reads the same', async () => {
    const t = await startParked(b, { MQDTEST_THREADS: '2', MQDTEST_DEPTH: '2' });
    const ours = join(dir, 'ours.core');
    const c = capture(t.pid, ours);
    if (!c.written.ok) throw new Error(c.written.error.message);

    const gdb = execFileSync(
      'gdb',
      ['-batch', '-nx', '-ex', 'info threads', '-ex', 'bt', '-ex', 'info sharedlibrary', b.target, ours],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 60_000,
      },
    );
    const lwps = new Set([...gdb.matchAll(/LWP (\d+)/g)].map((m) => Number(m[1])));
    expect([...lwps].sort()).toEqual([...c.tids].sort());
    expect(gdb).toMatch(/#\d+ +(0x[0-9a-f]+ in )?mqdtest_deep \(/);
    expect(gdb).toMatch(/#\d+ +(0x[0-9a-f]+ in )?main \(/);
    // The libraries are found through r_debug (DT_DEBUG in the executable's RELRO page, written
    // by ld.so before its mprotect): only in the core when copy-on-write pages are dumped.
    expect(gdb).toMatch(/^0x[0-9a-f]+ +0x[0-9a-f]+ +Yes +\S*\/libmpi_mqdtest\.so$/m);

    const notes = execFileSync('eu-readelf', ['--notes', ours], { encoding: 'utf8' });
    expect(notes.match(/^\s+CORE\s+\d+\s+PRSTATUS$/gm)).toHaveLength(3);
    expect(notes).toMatch(/^\s+CORE\s+\d+\s+FILE$/m);
    expect(notes).toMatch(/^\s+CORE\s+\d+\s+PRPSINFO$/m);
    expect(notes).toMatch(/^\s+CORE\s+\d+\s+AUXV$/m);

    const theirs = join(dir, 'gcore.core');
    execFileSync('gdb', ['-batch', '-nx', '-p', String(t.pid), '-ex', `gcore ${theirs}`], {
      stdio: 'ignore',
      timeout: 60_000,
    });
    await waitFor(() => tracerPid(t.pid) === 0, 10_000);
    const g = mustRead(theirs);
    const o = mustRead(ours);
    expect(g.pid).toBe(o.pid);
    expect(g.threads[0]?.tid).toBe(t.pid);
    expect(g.threads.map((x) => x.tid).sort()).toEqual(o.threads.map((x) => x.tid).sort());
    const paths = (i: CoreInfo) => i.files.map((f) => `${f.start.toString(16)} ${f.fileOffset} ${f.path}`);
    expect(paths(g)).toEqual(paths(o));
    // The threads were parked in the same place for both cores.
    const rips = (i: CoreInfo) => new Map(i.threads.map((x) => [x.tid, x.regs[RIP]]));
    expect(rips(g)).toEqual(rips(o));
  });
});

describe('bad cores', () => {
  function code(path: string) {
    const r = readCoreInfo(path);
    return r.ok ? 'ok' : r.error;
  }

  it('each gets its code and says what is wrong', async () => {
    const t = await startParked(b, {});
    const good = join(dir, 'good.core');
    const c = capture(t.pid, good);
    if (!c.written.ok) throw new Error(c.written.error.message);

    expect(code(b.target)).toMatchObject({
      code: 'MQD_E_CORE_INVALID',
      message: expect.stringContaining('not a core (ET_CORE)'),
    });
    const patched = (name: string, at: number, value: number) => {
      const p = join(dir, name);
      copyFileSync(good, p);
      const fd = openSync(p, 'r+');
      try {
        writeSync(fd, Buffer.from([value]), 0, 1, at);
      } finally {
        closeSync(fd);
      }
      return p;
    };
    expect(code(patched('elf32.core', 4, 1))).toMatchObject({
      code: 'MQD_E_CORE_INVALID',
      message: expect.stringContaining('ELF32 core: this reader reads 64-bit x86_64 cores'),
    });
    expect(code(patched('be.core', 5, 2))).toMatchObject({
      code: 'MQD_E_CORE_INVALID',
      message: expect.stringContaining('big-endian'),
    });
    const half = join(dir, 'half.core');
    copyFileSync(good, half);
    const cut = Math.floor(c.written.value.bytes / 2);
    truncateSync(half, cut);
    expect(code(half)).toMatchObject({
      code: 'MQD_E_CORE_TRUNCATED',
      message: expect.stringContaining(
        `${c.written.value.bytes - cut} of ${c.written.value.bytes} bytes are missing`,
      ),
    });
    const empty = join(dir, 'empty.core');
    writeFileSync(empty, '');
    expect(code(empty)).toMatchObject({
      code: 'MQD_E_CORE_INVALID',
      message: expect.stringContaining('empty'),
    });
    expect(code(join(dir, 'nope.core'))).toMatchObject({
      code: 'MQD_E_CORE_INVALID',
      message: expect.stringContaining('ENOENT'),
    });
  });
});

describe('writeCore failures', () => {
  it('a missing directory or a failed rename: MQD_E_CAPTURE, no file left, no native memory', async () => {
    const t = await startParked(b, {});
    const missing = capture(t.pid, join(dir, 'no-such-dir', 'x.core'));
    expect(missing.written.ok ? 'ok' : missing.written.error.code).toBe('MQD_E_CAPTURE');
    expect(missing.allocations.after).toEqual(missing.allocations.before);

    // The target path is a non-empty directory: the whole core is written, the rename fails.
    const sub = join(dir, 'fail');
    mkdirSync(join(sub, 'taken.core'), { recursive: true });
    writeFileSync(join(sub, 'taken.core', 'keep'), 'x');
    const r = capture(t.pid, join(sub, 'taken.core'));
    expect(r.written.ok ? 'ok' : r.written.error.message).toMatch(
      /^MQD_E_CAPTURE: core of pid \d+: cannot finish/,
    );
    expect(readdirSync(sub)).toEqual(['taken.core']);
    expect(r.allocations.after).toEqual(r.allocations.before);

    // Threads we do not hold: no registers, nothing written.
    const free = writeCore(t.pid, [t.pid], join(sub, 'free.core'));
    expect(free.ok ? 'ok' : free.error.message).toMatch(/^MQD_E_CAPTURE: .*PTRACE_GETREGSET/);
    expect(readdirSync(sub)).toEqual(['taken.core']);
  });
});
