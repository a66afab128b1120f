// What libompd needs from the OpenMP runtime's own loaded file that no symbol table has: the GOT
// slots of its TLS relocations (R_X86_64_DTPMOD64: the module id; R_X86_64_TPOFF64: an
// initial-exec offset from the thread pointer). Relocations live in the file the process maps
// (.rela.dyn, against .dynsym), never in a separate debug file, so they are read from it even
// when its symbols come from one. Symbols, TLS symbols and functions are DebugFile's
// (inferior/debug-file.ts), which follows the debug-file search. Also the two facts a "stripped,
// debug file not found" message needs: whether the file has a .symtab, and its .gnu_debuglink.
// Read from the section headers (inferior/elf-sections.ts) once per file (device, inode, mtime),
// x86_64 ELF64 only.
import { statSync } from 'node:fs';
import { cString, ElfSections, SHT_PROGBITS, SHT_RELA, SHT_SYMTAB } from '../inferior/elf-sections.js';

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

function readRelocations(path: string): TlsRelocations | null {
  const elf = ElfSections.open(path);
  if (!elf) return null; // unreadable or not ELF64 LE: the lookups fail as "not found"
  try {
    let debuglink: string | null = null;
    const link = elf.find(SHT_PROGBITS, '.gnu_debuglink');
    if (link) debuglink = cString(elf.read(link.offset, Math.min(link.size, 4096)), 0);
    // The relocations' symbol table (.dynsym): names and whether each is defined here.
    const symtabs = new Map<number, { names: (string | null)[]; defined: boolean[] }>();
    const readSymtab = (index: number) => {
      const cached = symtabs.get(index);
      if (cached) return cached;
      const s = elf.sections[index];
      const strs = s ? elf.sections[s.link] : undefined;
      const out = { names: [] as (string | null)[], defined: [] as boolean[] };
      symtabs.set(index, out);
      if (!s || !strs || s.entsize < 24) return out;
      const body = elf.read(s.offset, s.size);
      const strtab = elf.read(strs.offset, strs.size);
      for (let o = 0; o + 24 <= body.length; o += s.entsize) {
        const nameOff = body.readUInt32LE(o);
        out.names.push(nameOff > 0 ? cString(strtab, nameOff) : null);
        out.defined.push(body.readUInt16LE(o + 6) !== 0);
      }
      return out;
    };
    const dtpmodSlots: bigint[] = [];
    const tpoffSlots = new Map<string, bigint>();
    for (const s of elf.sections) {
      if (s.type !== SHT_RELA || s.entsize < 24) continue;
      const syms = readSymtab(s.link);
      const body = elf.read(s.offset, s.size);
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
      hasSymtab: elf.find(SHT_SYMTAB) !== undefined,
      debuglink,
    };
  } finally {
    elf.close();
  }
}
