// DebugFile's symbols read straight from the ELF file (inferior/elf-sections.ts) against libdw's
// own table read one entry at a time, on real files: the system libc (stripped, its debug file by
// build-id when libc6-dbg is installed), an unstripped MPI library of the provisioned builds, a
// fixture executable (PIE), and copies split as distributions ship them (strip --strip-all with
// the debug file found by .gnu_debuglink; stripped with no debug file: .dynsym only). Every
// lookup the readers make (symbol, tlsSymbol, functionAt) must answer the same either way, and
// the file path must be the one taken (or libdw's, when the tables differ).
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mpiPrefix } from '@mqd/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { DebugFile } from '../src/inferior/debug-file.js';
import { ElfSections, SHT_DYNSYM, SHT_SYMTAB } from '../src/inferior/elf-sections.js';

const work = mkdtempSync(join(tmpdir(), 'mqd-elf-sections-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const LIBC = '/usr/lib/x86_64-linux-gnu/libc.so.6';
const MPICH_LIB = join(mpiPrefix('mpich'), 'lib', 'libmpi.so.12');
const fixtureExe = (): string => {
  const dir = new URL('../../../fixtures/mpi/build/mpich/', import.meta.url).pathname;
  const name = existsSync(dir) ? readdirSync(dir).find((f) => f === 'ring_ssend') : undefined;
  return name ? join(dir, name) : LIBC;
};

/** Every symbol name of the table libdw uses, by walking functionAt over all functions too. */
function names(path: string): string[] {
  const elf = ElfSections.open(path);
  if (!elf) return [];
  try {
    const t = elf.symbolTable(SHT_SYMTAB) ?? elf.symbolTable(SHT_DYNSYM);
    const out: string[] = [];
    for (let i = 1; t && i < t.count; i++) {
      const n = t.name(i);
      if (n) out.push(n);
    }
    return out;
  } finally {
    elf.close();
  }
}

function compare(path: string, namesFrom: string, expectSource: 'file' | 'libdw'): number {
  const fast = DebugFile.open(path);
  const slow = DebugFile.open(path, { symbolsFromFile: false });
  if (typeof fast === 'string' || typeof slow === 'string') throw new Error(String(fast));
  try {
    const every = names(namesFrom);
    expect(every.length).toBeGreaterThan(10);
    // At most ~2,000 names spread over the table (expect() per name is the slow part here).
    const step = Math.max(1, Math.floor(every.length / 2000));
    const all = every.filter((_, i) => i % step === 0);
    let functions = 0;
    for (const n of all) {
      expect(fast.symbol(n), n).toEqual(slow.symbol(n));
      expect(fast.tlsSymbol(n), n).toEqual(slow.tlsSymbol(n));
      const s = slow.symbol(n);
      if (s && s.size > 0) {
        functions++;
        expect(fast.functionAt(s.value), n).toBe(slow.functionAt(s.value));
      }
    }
    expect(fast.symbol('mqd_no_such_symbol_anywhere')).toBeUndefined();
    expect(fast.separateDebugFile()).toBe(slow.separateDebugFile());
    expect(fast.symbolSource).toBe(expectSource);
    expect(slow.symbolSource).toBe('libdw');
    return functions;
  } finally {
    fast.close();
    slow.close();
  }
}

describe('symbols read from the ELF file equal libdw’s', () => {
  it('the system libc (its debug file by build-id when installed, else its own tables)', () => {
    const dbg = DebugFile.open(LIBC);
    if (typeof dbg === 'string') throw new Error(dbg);
    const debugFile = dbg.separateDebugFile();
    dbg.close();
    expect(compare(LIBC, debugFile ?? LIBC, 'file')).toBeGreaterThan(100);
  });

  it('an unstripped MPI library and a PIE executable', () => {
    expect(compare(MPICH_LIB, MPICH_LIB, 'file')).toBeGreaterThan(500);
    const exe = fixtureExe();
    compare(exe, exe, 'file');
  });

  it('a stripped copy with its debug file by .gnu_debuglink, and one with no debug file (.dynsym)', () => {
    const lib = join(work, 'libmpi.so.12');
    copyFileSync(MPICH_LIB, lib);
    execFileSync('objcopy', ['--only-keep-debug', lib, join(work, 'libmpi.dbg')]);
    execFileSync('strip', ['--strip-all', lib]);
    execFileSync('objcopy', ['--add-gnu-debuglink=libmpi.dbg', 'libmpi.so.12'], { cwd: work });
    compare(lib, join(work, 'libmpi.dbg'), 'file');
    const split = DebugFile.open(lib);
    if (typeof split === 'string') throw new Error(split);
    expect(split.separateDebugFile()).toBe(join(work, 'libmpi.dbg'));
    split.close();
    const bare = join(work, 'bare.so');
    copyFileSync(MPICH_LIB, bare);
    execFileSync('strip', ['--strip-all', bare]);
    compare(bare, bare, 'file');
  });
});

describe('SymbolTable.lookup', () => {
  it('finds a global of .dynsym without a table per name, and answers null for a missing one', () => {
    const elf = ElfSections.open(MPICH_LIB);
    if (!elf) throw new Error('not ELF64');
    try {
      const dyn = elf.symbolTable(SHT_DYNSYM);
      const hit = dyn?.lookup('MPIR_dll_name');
      const f = DebugFile.open(MPICH_LIB, { symbolsFromFile: false });
      if (typeof f === 'string') throw new Error(f);
      expect(hit?.value).toBe(f.symbol('MPIR_dll_name')?.value);
      expect(hit?.global).toBe(true);
      f.close();
      expect(dyn?.lookup('MPIR_no_such_thing')).toBeNull();
      // A prefix of a real name is not that name.
      expect(dyn?.lookup('MPIR_dll_nam')).toBeNull();
    } finally {
      elf.close();
    }
  });

  it('finds every defined name, also those stored as the tail of another name', () => {
    // Linkers merge string-table tails: `printf` is kept inside `snprintf`'s bytes and its st_name
    // points past that name's start (hundreds of names in libc's .dynsym and in an MPI library's
    // .symtab), so a search for "\0printf\0" misses it. Every defined name must be found, with
    // the value libdw gives (global before local).
    for (const [path, type, sample] of [
      [LIBC, SHT_DYNSYM, 1],
      [MPICH_LIB, SHT_SYMTAB, 12],
    ] as const) {
      const elf = ElfSections.open(path);
      if (!elf) throw new Error(`${path}: not ELF64`);
      const slow = DebugFile.open(path, { symbolsFromFile: false });
      if (typeof slow === 'string') throw new Error(slow);
      try {
        const t = elf.symbolTable(type);
        if (!t) throw new Error(`${path}: no table ${type}`);
        let checked = 0;
        for (let i = 1; i < t.count; i += sample) {
          const n = t.name(i);
          if (!n || t.shndx(i) === 0) continue;
          const hit = t.lookup(n);
          expect(hit, `${path}: ${n}`).not.toBeNull();
          const libdw = slow.symbol(n);
          if (type === SHT_SYMTAB && libdw) expect(hit?.value, n).toBe(libdw.value);
          checked++;
        }
        expect(checked, path).toBeGreaterThan(1000);
      } finally {
        elf.close();
        slow.close();
      }
    }
  });

  it('refuses what it cannot read: not ELF, missing file', () => {
    expect(ElfSections.open(join(work, 'nothing'))).toBeNull();
    expect(ElfSections.open('/etc/hostname')).toBeNull();
  });
});
