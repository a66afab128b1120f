// What libompd needs from the OpenMP runtime's own loaded file that no symbol table has: the GOT
// slots of its TLS relocations (R_X86_64_DTPMOD64: the module id; R_X86_64_TPOFF64: an
// initial-exec offset from the thread pointer). Relocations live in the file the process maps
// (.rela.dyn, against .dynsym), never in a separate debug file, so they are read from it even
// when its symbols come from one. Symbols, TLS symbols and functions are DebugFile's
// (target/debug-file.ts), which follows the debug-file search. Also the two facts a "stripped,
// debug file not found" message needs: whether the file has a .symtab, and its .gnu_debuglink.
// Read from the section headers once per file (device, inode, mtime), x86_64 ELF64 only.
import { closeSync, openSync, readSync, statSync } from 'node:fs';

const SHT_PROGBITS = 1;
const SHT_SYMTAB = 2;
const SHT_RELA = 4;
const R_X86_64_DTPMOD64 = 16;
const R_X86_64_TPOFF64 = 18;

export interface TlsRelocations {
  /** File addresses of GOT slots the loader fills with this module's TLS module id. */
  readonly dtpmodSlots: readonly bigint[];
  /** File addresses of GOT slots holding a TLS symbol's offset from the thread pointer, by name. */
  readonly tpoffSlots: ReadonlyMap<string, bigint>;
  /** The file has its own .symtab (false: stripped; its LOCAL symbols are only in a debug file). */
  readonly hasSymtab: boolean;
  /** The debug file name its .gnu_debuglink names (null: none). */
  readonly debuglink: string | null;
}

const cache = new Map<string, TlsRelocations | null>();

/** The TLS relocations of the ELF file at `path` (null: unreadable, not ELF64 little-endian). */
export function tlsRelocations(path: string): TlsRelocations | null {
  let key: string;
  try {
    const st = statSync(path, { bigint: true });
    key = `${st.dev}:${st.ino}:${st.mtimeNs}`;
  } catch {
    return null; // gone or unreadable: no slots
  }
  let t = cache.get(key);
  if (t === undefined) {
    t = readRelocations(path);
    cache.set(key, t);
  }
  return t;
}

interface Section {
  readonly type: number;
  readonly name: number;
  readonly offset: number;
  readonly size: number;
  readonly link: number;
  readonly entsize: number;
}

function readRelocations(path: string): TlsRelocations | null {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return null; // unreadable: the lookups fail as "not found"
  }
  try {
    const at = (pos: number, len: number): Buffer => {
      const b = Buffer.alloc(len);
      const n = readSync(fd, b, 0, len, pos);
      return b.subarray(0, n);
    };
    const h = at(0, 64);
    if (h.length < 64 || h.readUInt32BE(0) !== 0x7f454c46 || h[4] !== 2 || h[5] !== 1) return null;
    const shoff = Number(h.readBigUInt64LE(0x28));
    const shentsize = h.readUInt16LE(0x3a);
    const shnum = h.readUInt16LE(0x3c);
    const shstrndx = h.readUInt16LE(0x3e);
    if (shoff === 0 || shentsize < 64 || shnum === 0) return null;
    const sh = at(shoff, shentsize * shnum);
    const sections: Section[] = [];
    for (let i = 0; i < shnum && (i + 1) * shentsize <= sh.length; i++) {
      const o = i * shentsize;
      sections.push({
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
    const cstr = (b: Buffer, off: number): string | null => {
      const end = b.indexOf(0, off);
      return off < b.length && end > off ? b.toString('latin1', off, end) : null;
    };
    let debuglink: string | null = null;
    const link = sections.find((s) => s.type === SHT_PROGBITS && cstr(names, s.name) === '.gnu_debuglink');
    if (link) debuglink = cstr(at(link.offset, Math.min(link.size, 4096)), 0);
    // The relocations' symbol table (.dynsym): names and whether each is defined here.
    const symtabs = new Map<number, { names: (string | null)[]; defined: boolean[] }>();
    const readSymtab = (index: number) => {
      const cached = symtabs.get(index);
      if (cached) return cached;
      const s = sections[index];
      const strs = s ? sections[s.link] : undefined;
      const out = { names: [] as (string | null)[], defined: [] as boolean[] };
      symtabs.set(index, out);
      if (!s || !strs || s.entsize < 24) return out;
      const body = at(s.offset, s.size);
      const strtab = at(strs.offset, strs.size);
      for (let o = 0; o + 24 <= body.length; o += s.entsize) {
        const nameOff = body.readUInt32LE(o);
        out.names.push(nameOff > 0 ? cstr(strtab, nameOff) : null);
        out.defined.push(body.readUInt16LE(o + 6) !== 0);
      }
      return out;
    };
    const dtpmodSlots: bigint[] = [];
    const tpoffSlots = new Map<string, bigint>();
    for (const s of sections) {
      if (s.type !== SHT_RELA || s.entsize < 24) continue;
      const syms = readSymtab(s.link);
      const body = at(s.offset, s.size);
      for (let o = 0; o + 24 <= body.length; o += s.entsize) {
        const offset = body.readBigUInt64LE(o);
        const info = body.readBigUInt64LE(o + 8);
        const type = Number(info & 0xffffffffn);
        const sym = Number(info >> 32n);
        if (type === R_X86_64_DTPMOD64) {
          // Symbol 0 (local-dynamic) or a symbol defined here: this module's own id.
          if (sym === 0 || syms.defined[sym] === true) dtpmodSlots.push(offset);
        } else if (type === R_X86_64_TPOFF64) {
          const name = syms.names[sym];
          if (name && syms.defined[sym] === true) tpoffSlots.set(name, offset);
        }
      }
    }
    return {
      dtpmodSlots,
      tpoffSlots,
      hasSymtab: sections.some((s) => s.type === SHT_SYMTAB),
      debuglink,
    };
  } finally {
    closeSync(fd);
  }
}
