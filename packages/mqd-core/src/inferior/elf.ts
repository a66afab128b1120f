// Just enough ELF to map files into processes and to vet a DLL before dlopen: the header,
// the program headers and the GNU build-id note. Symbols and DWARF come from libdw.
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';

export const EM_X86_64 = 62;
export const EM_AARCH64 = 183;
export const ET_EXEC = 2;
export const ET_DYN = 3;
const PT_LOAD = 1;
const PT_NOTE = 4;
const NT_GNU_BUILD_ID = 3;

export interface ElfLoad {
  readonly offset: bigint;
  readonly vaddr: bigint;
  readonly filesz: bigint;
  readonly memsz: bigint;
}

export interface ElfInfo {
  readonly class: 32 | 64;
  readonly littleEndian: boolean;
  readonly type: number;
  readonly machine: number;
  readonly loads: readonly ElfLoad[];
  readonly buildId: string | null;
}

function readAt(fd: number, pos: number, len: number): Buffer {
  const b = Buffer.alloc(len);
  const n = readSync(fd, b, 0, len, pos);
  return b.subarray(0, n);
}

/**
 * Reads the ELF header, program headers and build-id of a file. Opened without blocking (a FIFO
 * named where a library or executable was would otherwise hang the reader in open()); anything
 * but a regular file is refused before a byte is read.
 */
export function readElfInfo(path: string): Result<ElfInfo, MqdError> {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return err(
      mqdError(
        code === 'ENOENT' ? 'MQD_E_DLL_NOT_FOUND' : 'MQD_E_DLL_LOAD',
        `cannot open ${path} (${code ?? String(e)})`,
      ),
    );
  }
  try {
    if (!fstatSync(fd).isFile()) return err(mqdError('MQD_E_DLL_NOT_ELF', `${path} is not a regular file`));
    return readElfInfoAt(fd, path);
  } finally {
    closeSync(fd);
  }
}

/** readElfInfo of a file the caller holds open (`path` names it in messages only). */
export function readElfInfoAt(fd: number, path: string): Result<ElfInfo, MqdError> {
  const h = readAt(fd, 0, 64);
  if (h.length < 52 || h[0] !== 0x7f || h[1] !== 0x45 || h[2] !== 0x4c || h[3] !== 0x46) {
    return err(mqdError('MQD_E_DLL_NOT_ELF', `${path} is not an ELF file`));
  }
  const cls = h[4] === 2 ? 64 : h[4] === 1 ? 32 : 0;
  if (cls === 0) return err(mqdError('MQD_E_DLL_NOT_ELF', `${path} has an unknown ELF class ${h[4]}`));
  const le = h[5] === 1;
  const u16 = (b: Buffer, o: number) => (le ? b.readUInt16LE(o) : b.readUInt16BE(o));
  const u32 = (b: Buffer, o: number) => (le ? b.readUInt32LE(o) : b.readUInt32BE(o));
  const u64 = (b: Buffer, o: number) => (le ? b.readBigUInt64LE(o) : b.readBigUInt64BE(o));
  const type = u16(h, 16);
  const machine = u16(h, 18);
  const phoff = cls === 64 ? Number(u64(h, 32)) : u32(h, 28);
  const phentsize = u16(h, cls === 64 ? 54 : 42);
  const phnum = u16(h, cls === 64 ? 56 : 44);
  const ph = readAt(fd, phoff, phentsize * phnum);
  const loads: ElfLoad[] = [];
  let buildId: string | null = null;
  for (let i = 0; i < phnum; i++) {
    const o = i * phentsize;
    if (o + phentsize > ph.length) break;
    const pType = u32(ph, o);
    const offset = cls === 64 ? u64(ph, o + 8) : BigInt(u32(ph, o + 4));
    const vaddr = cls === 64 ? u64(ph, o + 16) : BigInt(u32(ph, o + 8));
    const filesz = cls === 64 ? u64(ph, o + 32) : BigInt(u32(ph, o + 16));
    const memsz = cls === 64 ? u64(ph, o + 40) : BigInt(u32(ph, o + 20));
    if (pType === PT_LOAD) loads.push({ offset, vaddr, filesz, memsz });
    if (pType === PT_NOTE && buildId === null && filesz < 65536n) {
      buildId = gnuBuildId(elfNotes(readAt(fd, Number(offset), Number(filesz)), le).notes);
    }
  }
  return ok({ class: cls, littleEndian: le, type, machine, loads, buildId });
}

/** One note of a PT_NOTE segment (an ELF file's, or a core's). */
export interface ElfNote {
  readonly type: number;
  /** The owner name without its NUL ('GNU', 'CORE', 'LINUX'). */
  readonly name: string;
  readonly desc: Buffer;
}

/**
 * The notes of a PT_NOTE segment, in order (4-byte aligned name and descriptor). A note whose
 * descriptor runs past the segment ends the list; its type is `overrun`.
 */
export function elfNotes(b: Buffer, littleEndian = true): { notes: ElfNote[]; overrun: number | null } {
  const u32 = (o: number) => (littleEndian ? b.readUInt32LE(o) : b.readUInt32BE(o));
  const notes: ElfNote[] = [];
  let p = 0;
  while (p + 12 <= b.length) {
    const namesz = u32(p);
    const descsz = u32(p + 4);
    const type = u32(p + 8);
    const nameStart = p + 12;
    const descStart = nameStart + ((namesz + 3) & ~3);
    if (descStart + descsz > b.length) return { notes, overrun: type };
    const z = b.indexOf(0, nameStart);
    const nameEnd = Math.min(nameStart + namesz, b.length);
    notes.push({
      type,
      name: b.toString('utf8', nameStart, z >= 0 && z < nameEnd ? z : nameEnd),
      desc: b.subarray(descStart, descStart + descsz),
    });
    p = descStart + ((descsz + 3) & ~3);
  }
  return { notes, overrun: null };
}

/** The GNU build-id (hex) among a segment's notes, or null. */
export function gnuBuildId(notes: readonly ElfNote[]): string | null {
  const n = notes.find((x) => x.type === NT_GNU_BUILD_ID && x.name === 'GNU');
  return n ? n.desc.toString('hex') : null;
}

/** The machine this debugger runs on, for DLL checks. */
export function hostMachine(): number {
  return process.arch === 'arm64' ? EM_AARCH64 : EM_X86_64;
}
