// A Linux x86_64 ELF core file: its threads, process facts and memory segments, read from the
// headers and notes only (cores are gigabytes: memory is read on demand with readCoreBytes).
// Layouts (struct elf_prstatus, elf_prpsinfo, NT_FILE) are in packages/mqd-core/REFERENCE.md,
// "Core files"; the writer (core-writer.ts) produces the same layout.
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import { elfNotes, gnuBuildId } from './elf.js';

export interface CoreSegment {
  readonly vaddr: bigint;
  readonly memsz: bigint;
  /** Bytes of the segment the core holds, from `offset`; the rest of memsz was not dumped. */
  readonly filesz: bigint;
  readonly offset: bigint;
  /** PF_R 4 | PF_W 2 | PF_X 1. */
  readonly flags: number;
}

export interface CoreMappedFile {
  readonly start: bigint;
  readonly end: bigint;
  /** Bytes: NT_FILE's page offset × its page size. */
  readonly fileOffset: bigint;
  readonly path: string;
}

/** Word of struct user_regs_struct (pr_reg, PTRACE_GETREGSET NT_PRSTATUS) holding fs_base, the thread pointer. */
export const USER_REGS_FS_BASE = 21;

export interface CoreThread {
  readonly tid: number;
  /** pr_cursig of this thread's NT_PRSTATUS. */
  readonly signal: number;
  /** struct user_regs_struct, 27 words: r15 … gs (rip is word 16, rsp word 19, fs_base word 21). */
  readonly regs: BigUint64Array;
  /** struct user_fpregs_struct (512 bytes) from the NT_FPREGSET that follows it, or null. */
  readonly fpregs: Uint8Array | null;
}

export interface CoreInfo {
  readonly path: string;
  readonly size: bigint;
  readonly pid: number;
  readonly ppid: number;
  /** -1 when the core has no NT_PRPSINFO. */
  readonly uid: number;
  readonly gid: number;
  readonly fname: string;
  readonly psargs: string;
  /** The signal that made the core: the first NT_PRSTATUS's pr_cursig; 0 if none. */
  readonly signal: number;
  /** The thread whose tid is the pid first, then the others in note order. */
  readonly threads: readonly CoreThread[];
  /** PT_LOAD in file order. */
  readonly segments: readonly CoreSegment[];
  readonly files: readonly CoreMappedFile[];
  readonly auxv: ReadonlyMap<number, bigint>;
}

// ELF constants (<elf.h>).
const ET_CORE = 4;
const EM_X86_64 = 62;
const PT_LOAD = 1;
const PT_NOTE = 4;
const PN_XNUM = 0xffff;
const NT_PRSTATUS = 1;
const NT_FPREGSET = 2;
const NT_PRPSINFO = 3;
const NT_AUXV = 6;
const NT_FILE = 0x46494c45;
const EHDR_BYTES = 64;
const PHDR_BYTES = 56;
const SHDR_BYTES = 64;
/** struct elf_prstatus on x86_64: pr_reg (27 words) at 112, 336 bytes in all. */
const PRSTATUS_BYTES = 336;
const PRSTATUS_REG = 112;
const REG_WORDS = 27;
/** struct elf_prpsinfo on x86_64: 136 bytes. */
const PRPSINFO_BYTES = 136;
/** A note segment larger than this is not a core's (NT_FILE of 100k mappings is ~10 MB). */
const MAX_NOTES_BYTES = 256 * 1024 * 1024;

function invalid(path: string, what: string): Result<never, MqdError> {
  return err(mqdError('MQD_E_CORE_INVALID', `${path}: ${what}`));
}

function readAt(fd: number, pos: bigint, len: number): Buffer {
  const b = Buffer.alloc(len);
  let done = 0;
  while (done < len) {
    const n = readSync(fd, b, done, len - done, pos + BigInt(done));
    if (n === 0) break;
    done += n;
  }
  return b.subarray(0, done);
}

function cString(b: Buffer, start: number, end: number): string {
  const z = b.indexOf(0, start);
  return b.toString('utf8', start, z >= 0 && z < end ? z : end);
}

/** Reads the headers and notes of an x86_64 ELF core; memory stays in the file. */
export function readCoreInfo(path: string): Result<CoreInfo, MqdError> {
  let fd: number;
  try {
    // Never blocks: a FIFO (or a device) where a core was expected is refused, not waited on.
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    const x = e as NodeJS.ErrnoException;
    return invalid(path, `cannot open (${x.code ?? ''} ${x.message})`);
  }
  try {
    if (!fstatSync(fd).isFile()) return invalid(path, 'not a regular file');
    return readCoreInfoFd(fd, path);
  } finally {
    closeSync(fd);
  }
}

/**
 * readCoreInfo of a core the caller already opened and checked (fstat: a regular file, its
 * owner): read through that descriptor, so what is parsed is the file that was checked, not
 * whatever the path names by now. `path` only names it in messages. The caller closes `fd`.
 */
export function readCoreInfoFd(fd: number, path: string): Result<CoreInfo, MqdError> {
  try {
    return parse(path, fd);
  } catch (e) {
    // A read error of an open file (EIO, EISDIR): the file is not usable as a core.
    const x = e as NodeJS.ErrnoException;
    return invalid(path, `cannot read (${x.code ?? ''} ${x.message})`);
  }
}

function parse(path: string, fd: number): Result<CoreInfo, MqdError> {
  const size = fstatSync(fd, { bigint: true }).size;
  const h = readAt(fd, 0n, EHDR_BYTES);
  if (h.length < 4 || h[0] !== 0x7f || h[1] !== 0x45 || h[2] !== 0x4c || h[3] !== 0x46)
    return invalid(path, size === 0n ? 'empty file' : 'not an ELF file');
  if (h[4] === 1) return invalid(path, 'ELF32 core: this reader reads 64-bit x86_64 cores');
  if (h[4] !== 2) return invalid(path, `unknown ELF class ${h[4]}`);
  if (h[5] === 2) return invalid(path, 'big-endian ELF: this reader reads little-endian x86_64 cores');
  if (h[5] !== 1) return invalid(path, `unknown ELF data encoding ${h[5]}`);
  if (h.length < EHDR_BYTES) return truncated(path, size, BigInt(EHDR_BYTES), 'the ELF header');
  const type = h.readUInt16LE(16);
  if (type !== ET_CORE)
    return invalid(path, `an ELF file of type ${elfTypeName(type)}, not a core (ET_CORE)`);
  const machine = h.readUInt16LE(18);
  if (machine !== EM_X86_64)
    return invalid(path, `a core of machine ${machine}: this reader reads x86_64 (62) cores`);
  const phoff = h.readBigUInt64LE(32);
  const shoff = h.readBigUInt64LE(40);
  const phentsize = h.readUInt16LE(54);
  let phnum = h.readUInt16LE(56);
  if (phentsize !== PHDR_BYTES && phnum > 0) return invalid(path, `program header size ${phentsize}`);
  if (phnum === PN_XNUM) {
    // More than 65534 segments: the real count is sh_info of section header 0.
    const sh = readAt(fd, shoff, SHDR_BYTES);
    if (sh.length < SHDR_BYTES) return truncated(path, size, shoff + BigInt(SHDR_BYTES), 'section header 0');
    phnum = sh.readUInt32LE(44);
  }
  const phEnd = phoff + BigInt(phnum * PHDR_BYTES);
  if (phEnd > size) return truncated(path, size, phEnd, 'the program headers');
  const ph = readAt(fd, phoff, phnum * PHDR_BYTES);
  const segments: CoreSegment[] = [];
  const notes: { offset: bigint; filesz: bigint }[] = [];
  let needed = 0n;
  for (let i = 0; i < phnum; i++) {
    const o = i * PHDR_BYTES;
    const pType = ph.readUInt32LE(o);
    const flags = ph.readUInt32LE(o + 4);
    const offset = ph.readBigUInt64LE(o + 8);
    const vaddr = ph.readBigUInt64LE(o + 16);
    const filesz = ph.readBigUInt64LE(o + 32);
    const memsz = ph.readBigUInt64LE(o + 40);
    if (pType === PT_LOAD) segments.push({ vaddr, memsz, filesz, offset, flags });
    else if (pType === PT_NOTE) notes.push({ offset, filesz });
    else continue;
    if (filesz > 0n && offset + filesz > needed) needed = offset + filesz;
  }
  if (needed > size) return truncated(path, size, needed, 'its segments');
  const facts: NoteFacts = { prstatus: [], prpsinfo: null, files: [], auxv: new Map() };
  for (const n of notes) {
    if (n.filesz > BigInt(MAX_NOTES_BYTES)) return invalid(path, `a note segment of ${n.filesz} bytes`);
    const bad = parseNotes(readAt(fd, n.offset, Number(n.filesz)), facts);
    if (bad) return invalid(path, bad);
  }
  const first = facts.prstatus[0];
  if (!first) return invalid(path, 'no NT_PRSTATUS note (no thread): not a process core');
  const ps = facts.prpsinfo;
  const pid = ps?.pid ?? first.tid;
  const threads = [
    ...facts.prstatus.filter((t) => t.tid === pid),
    ...facts.prstatus.filter((t) => t.tid !== pid),
  ].map(({ tid, signal, regs, fpregs }) => ({ tid, signal, regs, fpregs }));
  return ok({
    path,
    size,
    pid,
    ppid: ps?.ppid ?? first.ppid,
    uid: ps?.uid ?? -1,
    gid: ps?.gid ?? -1,
    fname: ps?.fname ?? '',
    psargs: ps?.psargs ?? '',
    signal: first.signal,
    threads,
    segments,
    files: facts.files,
    auxv: facts.auxv,
  });
}

function truncated(path: string, size: bigint, needed: bigint, what: string): Result<never, MqdError> {
  return err(
    mqdError(
      'MQD_E_CORE_TRUNCATED',
      `${path} is ${size} bytes but ${what} end at byte ${needed}: ${needed - size} of ${needed} bytes are missing`,
    ),
  );
}

function elfTypeName(t: number): string {
  return (
    ['ET_NONE', 'ET_REL', 'ET_EXEC (an executable)', 'ET_DYN (a shared object or PIE executable)'][t] ??
    String(t)
  );
}

interface NoteFacts {
  prstatus: (CoreThread & { ppid: number; fpregs: Uint8Array | null })[];
  prpsinfo: { pid: number; ppid: number; uid: number; gid: number; fname: string; psargs: string } | null;
  files: CoreMappedFile[];
  auxv: Map<number, bigint>;
}

/** Walks one PT_NOTE's notes into `facts`; a malformed note is named in the returned text. */
function parseNotes(b: Buffer, facts: NoteFacts): string | null {
  const { notes, overrun } = elfNotes(b);
  for (const { type, name, desc: d } of notes) {
    if (name !== 'CORE') continue; // LINUX (xstate), GNU, …: not used here
    if (type === NT_PRSTATUS) {
      if (d.length < PRSTATUS_BYTES - 4)
        return `NT_PRSTATUS of ${d.length} bytes (x86_64: ${PRSTATUS_BYTES})`;
      const regs = new BigUint64Array(REG_WORDS);
      for (let i = 0; i < REG_WORDS; i++) regs[i] = d.readBigUInt64LE(PRSTATUS_REG + i * 8);
      facts.prstatus.push({
        tid: d.readInt32LE(32),
        signal: d.readInt16LE(12),
        ppid: d.readInt32LE(36),
        regs,
        fpregs: null,
      });
    } else if (type === NT_FPREGSET) {
      // Belongs to the NT_PRSTATUS before it (kernel and gdb order).
      const last = facts.prstatus.at(-1);
      if (last && last.fpregs === null) last.fpregs = new Uint8Array(d);
    } else if (type === NT_PRPSINFO) {
      if (d.length < PRPSINFO_BYTES) return `NT_PRPSINFO of ${d.length} bytes (x86_64: ${PRPSINFO_BYTES})`;
      facts.prpsinfo = {
        uid: d.readUInt32LE(16),
        gid: d.readUInt32LE(20),
        pid: d.readInt32LE(24),
        ppid: d.readInt32LE(28),
        fname: cString(d, 40, 56),
        psargs: cString(d, 56, 136).trimEnd(),
      };
    } else if (type === NT_AUXV) {
      for (let o = 0; o + 16 <= d.length; o += 16) {
        const key = d.readBigUInt64LE(o);
        if (key === 0n) break; // AT_NULL
        facts.auxv.set(Number(key), d.readBigUInt64LE(o + 8));
      }
    } else if (type === NT_FILE) {
      const bad = parseFileNote(d, facts.files);
      if (bad) return bad;
    }
  }
  return overrun === null ? null : `note of type 0x${overrun.toString(16)} runs past its segment`;
}

/** NT_FILE: count, page size, count × (start, end, page offset), then count NUL-ended paths. */
function parseFileNote(d: Buffer, out: CoreMappedFile[]): string | null {
  if (d.length < 16) return 'NT_FILE shorter than its header';
  const count = Number(d.readBigUInt64LE(0));
  const pageSize = d.readBigUInt64LE(8);
  let names = 16 + count * 24;
  if (names > d.length) return `NT_FILE of ${count} entries in ${d.length} bytes`;
  for (let i = 0; i < count; i++) {
    const o = 16 + i * 24;
    const z = d.indexOf(0, names);
    if (z < 0) return `NT_FILE path ${i} is not NUL-terminated`;
    out.push({
      start: d.readBigUInt64LE(o),
      end: d.readBigUInt64LE(o + 8),
      fileOffset: d.readBigUInt64LE(o + 16) * pageSize,
      path: d.toString('utf8', names, z),
    });
    names = z + 1;
  }
  return null;
}

/** Segments with file bytes, by address, for readCoreBytes (built once per CoreInfo). */
const byAddress = new WeakMap<CoreInfo, CoreSegment[]>();
function dumped(info: CoreInfo): CoreSegment[] {
  let s = byAddress.get(info);
  if (!s) {
    s = info.segments.filter((x) => x.filesz > 0n).sort((a, b) => (a.vaddr < b.vaddr ? -1 : 1));
    byAddress.set(info, s);
  }
  return s;
}

/** The dumped segment holding `addr`, or null (binary search). */
function segmentAt(segs: readonly CoreSegment[], addr: bigint): CoreSegment | null {
  let lo = 0;
  let hi = segs.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const s = segs[mid];
    if (!s) break;
    if (addr < s.vaddr) hi = mid - 1;
    else if (addr >= s.vaddr + s.filesz) lo = mid + 1;
    else return s;
  }
  return null;
}

/** Bytes at [vaddr, vaddr+len) that the core itself holds (PT_LOAD with filesz covering them), else null. */
export function readCoreBytes(info: CoreInfo, fd: number, vaddr: bigint, len: number): Uint8Array | null {
  const out = new Uint8Array(len);
  const segs = dumped(info);
  let done = 0;
  while (done < len) {
    const a = vaddr + BigInt(done);
    const s = segmentAt(segs, a);
    if (!s) return null;
    const n = Math.min(len - done, Number(s.vaddr + s.filesz - a));
    const got = readSync(fd, out, done, n, s.offset + (a - s.vaddr));
    if (got !== n) return null; // the file shrank since readCoreInfo
    done += n;
  }
  return out;
}

/** The GNU build-id of the ELF file mapped at `start`, read from the core's dump of its first page (kernel cores keep ELF header pages by default), hex; null when that page is not in the core. */
export function coreBuildIdAt(info: CoreInfo, fd: number, start: bigint): string | null {
  const h = readCoreBytes(info, fd, start, EHDR_BYTES);
  // \x7fELF, ELFCLASS64, little-endian: the only kind this reader maps.
  if (!h || ![0x7f, 0x45, 0x4c, 0x46, 2, 1].every((v, i) => h[i] === v)) return null;
  const v = new DataView(h.buffer);
  const phoff = v.getBigUint64(32, true);
  const phnum = v.getUint16(56, true);
  const ph = readCoreBytes(info, fd, start + phoff, phnum * PHDR_BYTES);
  if (!ph) return null;
  const pv = new DataView(ph.buffer);
  for (let i = 0; i < phnum; i++) {
    const o = i * PHDR_BYTES;
    if (pv.getUint32(o, true) !== PT_NOTE) continue;
    // The mapping at `start` holds the file from offset 0: the note is at start + p_offset.
    const offset = pv.getBigUint64(o + 8, true);
    const filesz = Number(pv.getBigUint64(o + 32, true));
    if (filesz > 65536) continue;
    const n = readCoreBytes(info, fd, start + offset, filesz);
    if (!n) continue;
    const id = gnuBuildId(elfNotes(Buffer.from(n.buffer, n.byteOffset, n.length)).notes);
    if (id) return id;
  }
  return null;
}
