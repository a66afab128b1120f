// Writes an ELF core of a process we hold stopped (gcore without gdb), in the layout the kernel
// writes: PT_NOTE first (per thread NT_PRSTATUS + NT_FPREGSET, the process's NT_PRPSINFO, NT_AUXV,
// NT_FILE), then one PT_LOAD per mapping of /proc/PID/maps. What is dumped follows the kernel's
// default coredump_filter 0x33 (REFERENCE.md, "Core files"). Registers come from PTRACE_GETREGSET
// (so this must run on the JS thread that stopped the process), memory from /proc/PID/mem in
// chunks; the core is written under a temporary name beside `outPath` and renamed at the end.
import {
  closeSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import { ESRCH, strerror } from '../native/libc.js';
import {
  NT_PRFPREG,
  NT_PRFPREG_BYTES,
  NT_PRSTATUS,
  NT_PRSTATUS_BYTES,
  readRegSet,
} from '../native/ptrace-ext.js';

export interface CoreWriteOptions {
  /**
   * Read-only file-backed private mappings (text, rodata): 'header-page' (default) dumps only the
   * first page of those that start an ELF file (for its build-id), like the kernel; 'all' dumps
   * them whole, so the core is readable without the original files.
   */
  readonly fileBackedReadOnly?: 'header-page' | 'all';
}

export interface CoreWritten {
  readonly path: string;
  readonly bytes: number;
  readonly segments: number;
  readonly threads: number;
}

const PAGE = 4096;
const CHUNK = 1 << 20;
const EHDR_BYTES = 64;
const PHDR_BYTES = 56;
const SHDR_BYTES = 64;
const PT_LOAD = 1;
const PT_NOTE = 4;
const PN_XNUM = 0xffff;
const NT_PRPSINFO = 3;
const NT_AUXV = 6;
const NT_FILE = 0x46494c45;
const PRSTATUS_BYTES = 336;
const PRPSINFO_BYTES = 136;
/** USER_HZ: /proc's clock ticks per second on Linux x86_64. */
const TICKS_PER_SECOND = 100;
/** Addresses past this cannot be a file position for pread ([vsyscall] is at 0xffffffffff600000). */
const MAX_POSITION = BigInt(Number.MAX_SAFE_INTEGER);

/** One line of /proc/PID/smaps (or maps) and what we decided to dump of it. */
interface Mapping {
  readonly start: bigint;
  readonly end: bigint;
  readonly perms: string;
  readonly pgoff: bigint;
  readonly inode: string;
  readonly path: string;
  /** Anonymous + Swap kB from smaps (pages that differ from the file), null when unknown. */
  anonKb: number | null;
  vmFlags: readonly string[];
}

class CaptureError extends Error {}

function fail(what: string, e: unknown): CaptureError {
  const x = e as NodeJS.ErrnoException;
  return new CaptureError(`${what}: ${x.code ? `${x.code} ` : ''}${x.message ?? String(e)}`);
}

/** /proc/PID/smaps: every mapping with its anonymous pages and VmFlags (smaps_rollup has none). */
function readMappings(pid: number): Mapping[] {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  } catch (e) {
    throw fail(`cannot read /proc/${pid}/smaps`, e);
  }
  const out: Mapping[] = [];
  let cur: Mapping | null = null;
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) ([0-9a-f]+) \S+ (\d+)\s*(.*)$/.exec(line);
    if (m) {
      const [, s, e, perms, off, inode, path] = m;
      cur = {
        start: BigInt(`0x${s}`),
        end: BigInt(`0x${e}`),
        perms: perms ?? '----',
        pgoff: BigInt(`0x${off}`),
        inode: inode ?? '0',
        path: path ?? '',
        anonKb: null,
        vmFlags: [],
      };
      out.push(cur);
      continue;
    }
    if (!cur) continue;
    const kv = /^(Anonymous|Swap):\s+(\d+) kB/.exec(line);
    if (kv) cur.anonKb = (cur.anonKb ?? 0) + Number(kv[2]);
    else if (line.startsWith('VmFlags:')) cur.vmFlags = line.slice(8).trim().split(/\s+/);
  }
  return out;
}

function isFileBacked(m: Mapping): boolean {
  return m.inode !== '0' && m.path !== '';
}

/**
 * Bytes of the mapping to dump, the kernel's vma_dump_size with coredump_filter 0x33 (anonymous
 * private and shared, ELF header pages, private huge pages); `readU32` reads the first word.
 */
function dumpSize(m: Mapping, opts: CoreWriteOptions, readU32: (addr: bigint) => number | null): bigint {
  const whole = m.end - m.start;
  if (m.path === '[vdso]') return whole; // always dumped
  if (m.path.startsWith('[vvar') || m.path === '[vsyscall]') return 0n;
  if (m.vmFlags.includes('dd') || m.vmFlags.includes('io')) return 0n; // VM_DONTDUMP, VM_IO
  if (m.perms[0] !== 'r' || m.end > MAX_POSITION) return 0n; // PROT_NONE guards and reservations
  if (!isFileBacked(m)) return whole;
  if (m.perms[3] === 's') {
    // Shared: only when its file has no name left (shared anonymous, SysV shm, deleted memfd).
    return m.path.endsWith(' (deleted)') ? whole : 0n;
  }
  // Private file-backed: pages written since the mapping (copy-on-write: relocations, .data, .bss)
  // make it anonymous in the kernel's sense; writable ones are taken whole when smaps is silent.
  if ((m.anonKb ?? 0) > 0 || m.perms[1] === 'w') return whole;
  if (opts.fileBackedReadOnly === 'all') return whole;
  if (m.pgoff === 0n && readU32(m.start) === 0x464c457f) return BigInt(PAGE);
  return 0n;
}

/** A note: name "CORE", 4-byte aligned name and descriptor. */
function note(type: number, desc: Uint8Array, name = 'CORE'): Buffer {
  const nameBytes = Buffer.from(`${name}\0`, 'latin1');
  const nameLen = (nameBytes.length + 3) & ~3;
  const descLen = (desc.length + 3) & ~3;
  const b = Buffer.alloc(12 + nameLen + descLen);
  b.writeUInt32LE(nameBytes.length, 0);
  b.writeUInt32LE(desc.length, 4);
  b.writeUInt32LE(type, 8);
  nameBytes.copy(b, 12);
  b.set(desc, 12 + nameLen);
  return b;
}

/** Fields after the comm of /proc/PID/[task/TID/]stat, field 3 at index 0. */
function statFields(path: string): string[] {
  const t = readFileSync(path, 'utf8');
  return t.slice(t.lastIndexOf(')') + 2).split(' ');
}

function field(fields: readonly string[], n: number): string {
  return fields[n - 3] ?? '0';
}

function statusField(text: string, key: string): string {
  return new RegExp(`^${key}:\\s*(.*)$`, 'm').exec(text)?.[1] ?? '';
}

function writeTimeval(b: Buffer, at: number, ticks: bigint): void {
  b.writeBigInt64LE(ticks / BigInt(TICKS_PER_SECOND), at);
  b.writeBigInt64LE((ticks % BigInt(TICKS_PER_SECOND)) * BigInt(1_000_000 / TICKS_PER_SECOND), at + 8);
}

/** struct elf_prstatus of one thread (x86_64 offsets: REFERENCE.md, "Core files"). */
function prstatus(pid: number, tid: number, regs: Uint8Array, fpvalid: boolean, main: boolean): Buffer {
  const b = Buffer.alloc(PRSTATUS_BYTES);
  const st = statFields(`/proc/${pid}/task/${tid}/stat`);
  const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
  b.writeBigUInt64LE(BigInt(`0x${statusField(status, 'SigPnd') || '0'}`), 16); // pr_sigpend
  b.writeBigUInt64LE(BigInt(`0x${statusField(status, 'SigBlk') || '0'}`), 24); // pr_sighold
  b.writeInt32LE(tid, 32);
  b.writeInt32LE(Number(field(st, 4)), 36);
  b.writeInt32LE(Number(field(st, 5)), 40);
  b.writeInt32LE(Number(field(st, 6)), 44);
  writeTimeval(b, 48, BigInt(field(st, 14)));
  writeTimeval(b, 64, BigInt(field(st, 15)));
  if (main) {
    // Children's times belong to the process (its first thread's note), like the kernel's.
    const ps = statFields(`/proc/${pid}/stat`);
    writeTimeval(b, 80, BigInt(field(ps, 16)));
    writeTimeval(b, 96, BigInt(field(ps, 17)));
  }
  b.set(regs.subarray(0, NT_PRSTATUS_BYTES), 112);
  b.writeInt32LE(fpvalid ? 1 : 0, 328);
  return b;
}

/** struct elf_prpsinfo of the process. */
function prpsinfo(pid: number): Buffer {
  const b = Buffer.alloc(PRPSINFO_BYTES);
  const st = statFields(`/proc/${pid}/stat`);
  const comm = (() => {
    const t = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return t.slice(t.indexOf('(') + 1, t.lastIndexOf(')'));
  })();
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const sname = field(st, 3);
  const state = 'RSDTZW'.indexOf(sname === 't' ? 'T' : sname);
  b.writeInt8(Math.max(state, 0), 0);
  b.write(sname, 1, 1, 'latin1');
  b.writeInt8(sname === 'Z' ? 1 : 0, 2);
  b.writeInt8(Number(field(st, 19)), 3); // nice
  b.writeBigUInt64LE(BigInt(field(st, 9)), 8); // flags
  b.writeUInt32LE(Number(statusField(status, 'Uid').split(/\s+/)[0] ?? 0), 16);
  b.writeUInt32LE(Number(statusField(status, 'Gid').split(/\s+/)[0] ?? 0), 20);
  b.writeInt32LE(pid, 24);
  b.writeInt32LE(Number(field(st, 4)), 28);
  b.writeInt32LE(Number(field(st, 5)), 32);
  b.writeInt32LE(Number(field(st, 6)), 36);
  Buffer.from(comm, 'utf8').copy(b, 40, 0, 15);
  const cmdline = readFileSync(`/proc/${pid}/cmdline`);
  // Arguments joined by spaces, at most 79 bytes and a NUL (ELF_PRARGSZ 80).
  const args = Buffer.from(cmdline.subarray(0, 79)).map((c) => (c === 0 ? 0x20 : c));
  Buffer.from(args).copy(b, 56);
  return b;
}

/** NT_FILE: every file-backed mapping, its page offset in units of the page size. */
function fileNote(maps: readonly Mapping[]): Buffer {
  const files = maps.filter(isFileBacked);
  const head = Buffer.alloc(16 + files.length * 24);
  head.writeBigUInt64LE(BigInt(files.length), 0);
  head.writeBigUInt64LE(BigInt(PAGE), 8);
  files.forEach((m, i) => {
    head.writeBigUInt64LE(m.start, 16 + i * 24);
    head.writeBigUInt64LE(m.end, 24 + i * 24);
    head.writeBigUInt64LE(m.pgoff / BigInt(PAGE), 32 + i * 24);
  });
  return Buffer.concat([head, ...files.map((m) => Buffer.from(`${m.path}\0`, 'utf8'))]);
}

function flagsOf(perms: string): number {
  return (perms[0] === 'r' ? 4 : 0) | (perms[1] === 'w' ? 2 : 0) | (perms[2] === 'x' ? 1 : 0);
}

/** Reads the target's memory through /proc/PID/mem (we are its tracer) into Node buffers only. */
class MemReader {
  private readonly fd: number;
  constructor(pid: number) {
    try {
      this.fd = openSync(`/proc/${pid}/mem`, 'r');
    } catch (e) {
      throw fail(`cannot open /proc/${pid}/mem`, e);
    }
  }
  /** Reads `len` bytes at `addr` into `b[at, at+len)`; returns how many were read before the first unreadable one. */
  read(b: Buffer, at: number, len: number, addr: bigint): number {
    let done = 0;
    while (done < len) {
      let n: number;
      try {
        n = readSync(this.fd, b, at + done, len - done, addr + BigInt(done));
      } catch {
        // EIO/EFAULT: an unreadable page (past a file's end, a hole); the caller zero-fills.
        return done;
      }
      if (n <= 0) return done;
      done += n;
    }
    return done;
  }
  readU32(addr: bigint): number | null {
    const b = Buffer.alloc(4);
    return this.read(b, 0, 4, addr) === 4 ? b.readUInt32LE(0) : null;
  }
  close(): void {
    closeSync(this.fd);
  }
}

/** `pid` must already be stopped with every thread in `tids` held by us (inferior/stopper.ts stopProcess). */
export function writeCore(
  pid: number,
  tids: readonly number[],
  outPath: string,
  opts: CoreWriteOptions = {},
): Result<CoreWritten, MqdError> {
  const tmp = join(dirname(outPath), `.${basename(outPath)}.${process.pid}.${Date.now()}.tmp`);
  let out: number | null = null;
  let mem: MemReader | null = null;
  try {
    mem = new MemReader(pid);
    const memory = mem;
    const maps = readMappings(pid);
    // Threads: the process's main thread first (gdb takes the first NT_PRSTATUS as the current thread).
    const ordered = [...tids.filter((t) => t === pid), ...tids.filter((t) => t !== pid)];
    const threadNotes: Buffer[] = [];
    let threads = 0;
    for (const tid of ordered) {
      const regs = readRegSet(tid, NT_PRSTATUS, NT_PRSTATUS_BYTES);
      if (typeof regs === 'number') {
        if (tid !== pid && regs === -ESRCH) continue; // ESRCH: the thread exited while held
        throw new CaptureError(`PTRACE_GETREGSET NT_PRSTATUS of thread ${tid}: ${strerror(-regs)}`);
      }
      if (regs.length !== NT_PRSTATUS_BYTES)
        throw new CaptureError(`thread ${tid} gave ${regs.length} register bytes, not ${NT_PRSTATUS_BYTES}`);
      const fp = readRegSet(tid, NT_PRFPREG, NT_PRFPREG_BYTES);
      const fpOk = typeof fp !== 'number' && fp.length === NT_PRFPREG_BYTES;
      const parts = [note(NT_PRSTATUS, prstatus(pid, tid, regs, fpOk, threads === 0))];
      if (threads === 0) {
        parts.push(note(NT_PRPSINFO, prpsinfo(pid)));
        parts.push(note(NT_AUXV, readFileSync(`/proc/${pid}/auxv`)));
        parts.push(note(NT_FILE, fileNote(maps)));
      }
      if (fpOk) parts.push(note(NT_PRFPREG, fp));
      threadNotes.push(...parts);
      threads++;
    }
    if (threads === 0) throw new CaptureError(`no thread of pid ${pid} is held (pass stopProcess's tids)`);
    const notes = Buffer.concat(threadNotes);

    const sizes = maps.map((m) => dumpSize(m, opts, (a) => memory.readU32(a)));
    const phnum = 1 + maps.length;
    const xnum = phnum >= PN_XNUM;
    const phoff = EHDR_BYTES;
    const shoff = phoff + phnum * PHDR_BYTES;
    const notesOff = shoff + (xnum ? SHDR_BYTES : 0);
    let dataOff = BigInt(Math.ceil((notesOff + notes.length) / PAGE) * PAGE);
    const headers = Buffer.alloc(notesOff);
    headers.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0], 0); // ELFCLASS64, little-endian, EV_CURRENT, SYSV
    headers.writeUInt16LE(4, 16); // ET_CORE
    headers.writeUInt16LE(62, 18); // EM_X86_64
    headers.writeUInt32LE(1, 20);
    headers.writeBigUInt64LE(BigInt(phoff), 32);
    headers.writeBigUInt64LE(xnum ? BigInt(shoff) : 0n, 40);
    headers.writeUInt16LE(EHDR_BYTES, 52);
    headers.writeUInt16LE(PHDR_BYTES, 54);
    headers.writeUInt16LE(xnum ? PN_XNUM : phnum, 56);
    headers.writeUInt16LE(xnum ? SHDR_BYTES : 0, 58);
    headers.writeUInt16LE(xnum ? 1 : 0, 60);
    if (xnum) headers.writeUInt32LE(phnum, shoff + 44); // section 0's sh_info: the real count
    const ph = (
      i: number,
      type: number,
      flags: number,
      off: bigint,
      vaddr: bigint,
      filesz: bigint,
      memsz: bigint,
      align: bigint,
    ) => {
      const o = phoff + i * PHDR_BYTES;
      headers.writeUInt32LE(type, o);
      headers.writeUInt32LE(flags, o + 4);
      headers.writeBigUInt64LE(off, o + 8);
      headers.writeBigUInt64LE(vaddr, o + 16);
      headers.writeBigUInt64LE(filesz, o + 32);
      headers.writeBigUInt64LE(memsz, o + 40);
      headers.writeBigUInt64LE(align, o + 48);
    };
    ph(0, PT_NOTE, 0, BigInt(notesOff), 0n, BigInt(notes.length), 0n, 4n);
    const offsets: bigint[] = [];
    maps.forEach((m, i) => {
      const filesz = sizes[i] ?? 0n;
      offsets.push(dataOff);
      ph(1 + i, PT_LOAD, flagsOf(m.perms), dataOff, m.start, filesz, m.end - m.start, BigInt(PAGE));
      dataOff += filesz;
    });

    try {
      out = openSync(tmp, 'wx', 0o600);
    } catch (e) {
      throw fail(`cannot create ${tmp}`, e);
    }
    const fd = out;
    const put = (b: Buffer, at: number, len: number, pos: bigint) => {
      try {
        let done = 0;
        while (done < len) done += writeSync(fd, b, at + done, len - done, Number(pos) + done);
      } catch (e) {
        throw fail(`cannot write ${tmp}`, e);
      }
    };
    put(headers, 0, headers.length, 0n);
    put(notes, 0, notes.length, BigInt(notesOff));
    const buf = Buffer.alloc(CHUNK);
    const zero = Buffer.alloc(PAGE);
    maps.forEach((m, i) => {
      const filesz = sizes[i] ?? 0n;
      for (let done = 0n; done < filesz; done += BigInt(CHUNK)) {
        const len = Number(filesz - done < BigInt(CHUNK) ? filesz - done : BigInt(CHUNK));
        let got = 0;
        while (got < len) {
          // Past an unreadable page, go on page by page: that page stays zeros (a hole).
          const n = memory.read(buf, got, len - got, m.start + done + BigInt(got));
          got += n;
          if (got < len) {
            buf.fill(0, got, Math.min(len, got + PAGE));
            got = Math.min(len, got + PAGE);
          }
        }
        // All-zero pages are left as holes: the file stays sparse, like the kernel's cores.
        for (let p = 0; p < len; ) {
          if (buf.compare(zero, 0, PAGE, p, p + PAGE) === 0) {
            p += PAGE;
            continue;
          }
          let q = p + PAGE;
          while (q < len && buf.compare(zero, 0, PAGE, q, q + PAGE) !== 0) q += PAGE;
          put(buf, p, q - p, (offsets[i] ?? 0n) + done + BigInt(p));
          p = q;
        }
      }
    });
    const state = (() => {
      try {
        return field(statFields(`/proc/${pid}/stat`), 3);
      } catch {
        return 'gone';
      }
    })();
    // A SIGKILL ends even a held process: what was read after it is not its memory.
    if (state === 'gone' || state === 'Z' || state === 'X')
      throw new CaptureError(`process ${pid} exited during the capture`);
    try {
      ftruncateSync(fd, Number(dataOff));
      fsyncSync(fd);
      closeSync(fd);
      out = null;
      renameSync(tmp, outPath);
    } catch (e) {
      throw fail(`cannot finish ${outPath}`, e);
    }
    return ok({ path: outPath, bytes: Number(dataOff), segments: maps.length, threads });
  } catch (e) {
    // A /proc file that vanished or a write that failed is expected; anything else is a bug.
    if (e instanceof CaptureError || typeof (e as NodeJS.ErrnoException).code === 'string')
      return err(mqdError('MQD_E_CAPTURE', `core of pid ${pid}: ${(e as Error).message}`));
    throw e;
  } finally {
    mem?.close();
    if (out !== null) closeSync(out);
    try {
      unlinkSync(tmp);
    } catch {
      // Renamed (success) or never created: nothing to remove.
    }
  }
}
