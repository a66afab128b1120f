// An ELF64 little-endian file's section headers and symbol tables, read with plain file reads.
// DebugFile (debug-file.ts) indexes a symbol table from these bytes instead of asking libdw for
// each entry through koffi (a libc debug file has ~10,000 symbols: ~60 ms one call at a time,
// a few ms here), and only after checking that the table is the one libdw chose (same count,
// sampled entries equal); the OMPD reader reads the TLS relocations of a runtime from them
// (ompd/elf-symbols.ts). Anything else (ELF32, big-endian, no section headers) answers null and
// the callers keep libdw's way.
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

export const SHT_PROGBITS = 1;
export const SHT_SYMTAB = 2;
export const SHT_RELA = 4;
export const SHT_DYNSYM = 11;
/** Size of an Elf64_Sym. */
export const SYM_SIZE = 24;

export interface ElfSection {
  readonly index: number;
  /** Offset of the name in the section-name string table. */
  readonly name: number;
  readonly type: number;
  readonly offset: number;
  readonly size: number;
  readonly link: number;
  readonly entsize: number;
}

/** An open ELF64 LE file: its sections, their names, reads at file offsets. Close it. */
export class ElfSections {
  private constructor(
    private readonly fd: number,
    readonly sections: readonly ElfSection[],
    private readonly names: Buffer,
  ) {}

  /** Null when the file cannot be opened or is not ELF64 little-endian with section headers. */
  static open(path: string): ElfSections | null {
    let fd: number;
    try {
      // A target's file names are its owner's to change: a FIFO there must not block this open.
      fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
    } catch {
      return null;
    }
    if (!fstatSync(fd).isFile()) {
      closeSync(fd);
      return null;
    }
    const at = (pos: number, len: number) => readAt(fd, pos, len);
    const h = at(0, 64);
    if (h.length < 64 || h.readUInt32BE(0) !== 0x7f454c46 || h[4] !== 2 || h[5] !== 1) {
      closeSync(fd);
      return null;
    }
    const shoff = Number(h.readBigUInt64LE(0x28));
    const shentsize = h.readUInt16LE(0x3a);
    const shnum = h.readUInt16LE(0x3c);
    const shstrndx = h.readUInt16LE(0x3e);
    if (shoff === 0 || shentsize < 64 || shnum === 0) {
      closeSync(fd);
      return null;
    }
    const sh = at(shoff, shentsize * shnum);
    const sections: ElfSection[] = [];
    for (let i = 0; i < shnum && (i + 1) * shentsize <= sh.length; i++) {
      const o = i * shentsize;
      sections.push({
        index: i,
        name: sh.readUInt32LE(o),
        type: sh.readUInt32LE(o + 4),
        offset: Number(sh.readBigUInt64LE(o + 24)),
        size: Number(sh.readBigUInt64LE(o + 32)),
        link: sh.readUInt32LE(o + 40),
        entsize: Number(sh.readBigUInt64LE(o + 56)),
      });
    }
    const shstr = sections[shstrndx];
    const names = shstr ? at(shstr.offset, shstr.size) : Buffer.alloc(0);
    return new ElfSections(fd, sections, names);
  }

  close(): void {
    closeSync(this.fd);
  }

  read(pos: number, len: number): Buffer {
    return readAt(this.fd, pos, len);
  }

  nameOf(s: ElfSection): string | null {
    return cString(this.names, s.name);
  }

  find(type: number, name?: string): ElfSection | undefined {
    return this.sections.find((s) => s.type === type && (name === undefined || this.nameOf(s) === name));
  }

  /** A symbol table section (SHT_SYMTAB or SHT_DYNSYM) with its string table, or null. */
  symbolTable(type: typeof SHT_SYMTAB | typeof SHT_DYNSYM): SymbolTable | null {
    const s = this.find(type);
    const strs = s ? this.sections[s.link] : undefined;
    if (!s || !strs || s.entsize !== SYM_SIZE) return null;
    return new SymbolTable(this.read(s.offset, s.size), this.read(strs.offset, strs.size));
  }
}

/** The entries of an Elf64_Sym table; entry 0 is the null symbol, as in the file. */
export class SymbolTable {
  readonly count: number;
  constructor(
    private readonly body: Buffer,
    private readonly strtab: Buffer,
  ) {
    this.count = Math.floor(body.length / SYM_SIZE);
  }

  name(i: number): string | null {
    return cString(this.strtab, this.body.readUInt32LE(i * SYM_SIZE), 'utf8');
  }
  info(i: number): number {
    return this.body.readUInt8(i * SYM_SIZE + 4);
  }
  shndx(i: number): number {
    return this.body.readUInt16LE(i * SYM_SIZE + 6);
  }
  value(i: number): bigint {
    return this.body.readBigUInt64LE(i * SYM_SIZE + 8);
  }
  size(i: number): bigint {
    return this.body.readBigUInt64LE(i * SYM_SIZE + 16);
  }

  /**
   * The defined entry named `name` that `accept` takes (by its st_info), global or weak before
   * local, or null. No index is built: the name's occurrences in the string table first (a
   * missing name costs one memmem), then one pass comparing st_name with them. A name is found
   * wherever `name\0` starts, not only after a NUL: linkers store a name that ends another
   * (`printf` inside `snprintf`) as that one's tail.
   */
  find(name: string, accept: (info: number) => boolean = () => true): SymbolEntry | null {
    const key = Buffer.from(`${name}\0`, 'utf8');
    const offsets = new Set<number>();
    for (let at = this.strtab.indexOf(key); at >= 0; at = this.strtab.indexOf(key, at + 1)) offsets.add(at);
    if (offsets.size === 0) return null;
    let found: SymbolEntry | null = null;
    for (let i = 1; i < this.count; i++) {
      if (!offsets.has(this.body.readUInt32LE(i * SYM_SIZE)) || this.shndx(i) === 0) continue;
      const info = this.info(i);
      if (!accept(info)) continue;
      const bind = info >> 4;
      const global = bind === 1 || bind === 2;
      const entry = { value: this.value(i), size: this.size(i), global, info };
      if (global) return entry;
      found ??= entry;
    }
    return found;
  }

  /** The defined entry named `name` (global before local), or null; no table walk per name. */
  lookup(name: string): { value: bigint; size: bigint; global: boolean } | null {
    const e = this.find(name);
    return e ? { value: e.value, size: e.size, global: e.global } : null;
  }
}

/** One defined entry of a SymbolTable: raw st_value and st_size, binding global/weak, st_info. */
export interface SymbolEntry {
  readonly value: bigint;
  readonly size: bigint;
  readonly global: boolean;
  readonly info: number;
}

function readAt(fd: number, pos: number, len: number): Buffer {
  const b = Buffer.alloc(len);
  const n = len > 0 ? readSync(fd, b, 0, len, pos) : 0;
  return b.subarray(0, n);
}

/** The NUL-terminated string at `off` (null when out of range or empty). */
export function cString(b: Buffer, off: number, encoding: 'latin1' | 'utf8' = 'latin1'): string | null {
  const end = b.indexOf(0, off);
  return off < b.length && end > off ? b.toString(encoding, off, end) : null;
}
