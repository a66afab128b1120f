// What libompd needs from a module's ELF file that the DebugFile symbol index does not keep:
// thread-local symbols (STT_TLS: `__kmp_gtid` is one, LOCAL in libomp's .symtab), the GOT slots
// of its TLS relocations (R_X86_64_DTPMOD64: the module id; R_X86_64_TPOFF64: an initial-exec
// offset from the thread pointer), and its functions sorted by address, to name a task's entry
// point. Read from the section headers once per file (device, inode, mtime), x86_64 ELF64 only.
import { closeSync, openSync, readSync, statSync } from 'node:fs';

const SHT_SYMTAB = 2;
const SHT_RELA = 4;
const SHT_DYNSYM = 11;
const STT_FUNC = 2;
const STT_TLS = 6;
const STT_GNU_IFUNC = 10;
const R_X86_64_DTPMOD64 = 16;
const R_X86_64_TPOFF64 = 18;

export interface ElfFunction {
  readonly value: bigint;
  readonly size: bigint;
  readonly name: string;
}

export interface ElfSymbolTables {
  /** STT_TLS symbols defined here: name → offset in this module's TLS block. */
  readonly tls: ReadonlyMap<string, bigint>;
  /** Functions defined here, sorted by file address. */
  readonly functions: readonly ElfFunction[];
  /** File addresses of GOT slots the loader fills with this module's TLS module id. */
  readonly dtpmodSlots: readonly bigint[];
  /** File addresses of GOT slots holding a TLS symbol's offset from the thread pointer, by name. */
  readonly tpoffSlots: ReadonlyMap<string, bigint>;
}

const cache = new Map<string, ElfSymbolTables | null>();

/** The tables of the ELF file at `path` (null: unreadable, not ELF64 little-endian). */
export function elfSymbolTables(path: string): ElfSymbolTables | null {
  let key: string;
  try {
    const st = statSync(path, { bigint: true });
    key = `${st.dev}:${st.ino}:${st.mtimeNs}`;
  } catch {
    return null; // gone or unreadable: no tables
  }
  let t = cache.get(key);
  if (t === undefined) {
    t = readTables(path);
    cache.set(key, t);
  }
  return t;
}

interface Section {
  readonly type: number;
  readonly offset: number;
  readonly size: number;
  readonly link: number;
  readonly entsize: number;
}

function readTables(path: string): ElfSymbolTables | null {
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
    if (shoff === 0 || shentsize < 64 || shnum === 0) return null;
    const sh = at(shoff, shentsize * shnum);
    const sections: Section[] = [];
    for (let i = 0; i < shnum && (i + 1) * shentsize <= sh.length; i++) {
      const o = i * shentsize;
      sections.push({
        type: sh.readUInt32LE(o + 4),
        offset: Number(sh.readBigUInt64LE(o + 24)),
        size: Number(sh.readBigUInt64LE(o + 32)),
        link: sh.readUInt32LE(o + 40),
        entsize: Number(sh.readBigUInt64LE(o + 56)),
      });
    }
    const symtabs = new Map<number, { names: (string | null)[]; defined: boolean[] }>();
    const tls = new Map<string, bigint>();
    const fns = new Map<bigint, ElfFunction>();
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
        const info = body[o + 4] ?? 0;
        const shndx = body.readUInt16LE(o + 6);
        const value = body.readBigUInt64LE(o + 8);
        const size = body.readBigUInt64LE(o + 16);
        const end = strtab.indexOf(0, nameOff);
        const name = nameOff > 0 && end > nameOff ? strtab.toString('latin1', nameOff, end) : null;
        out.names.push(name);
        out.defined.push(shndx !== 0);
        if (!name || shndx === 0) continue;
        const type = info & 0xf;
        if (type === STT_TLS) {
          if (!tls.has(name) || info >> 4 !== 0) tls.set(name, value);
        } else if ((type === STT_FUNC || type === STT_GNU_IFUNC) && value !== 0n) {
          const prev = fns.get(value);
          // Prefer the global name of an address (an alias) over a local one.
          if (!prev || info >> 4 !== 0) fns.set(value, { value, size, name });
        }
      }
      return out;
    };
    sections.forEach((s, i) => {
      if (s.type === SHT_SYMTAB || s.type === SHT_DYNSYM) readSymtab(i);
    });
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
    const functions = [...fns.values()].sort((a, b) => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0));
    return { tls, functions, dtpmodSlots, tpoffSlots };
  } finally {
    closeSync(fd);
  }
}

/** The function of `tables` that holds file address `addr` (exact entry, or within its size). */
export function functionAt(tables: ElfSymbolTables, addr: bigint): string | null {
  const f = tables.functions;
  let lo = 0;
  let hi = f.length - 1;
  let best = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const v = f[mid];
    if (!v) break;
    if (v.value <= addr) {
      best = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  const hit = best >= 0 ? f[best] : undefined;
  if (!hit) return null;
  return hit.value === addr || addr < hit.value + hit.size ? hit.name : null;
}
