// One ELF file's symbols and DWARF types, indexed once per file (by build-id) and shared by
// every process that maps it. Addresses here are the file's own (unrelocated); a process adds
// its load bias (process-image.ts). Thread-local (STT_TLS) symbols are kept apart (their value
// is an offset in the module's TLS block) and functions can be looked up by address (OMPD).
//
// Debug info is found the way gdb finds it, through libdw's standard callbacks: in the file,
// by build-id under the debug directories (/usr/lib/debug/.build-id/xx/yyyy.debug), by
// .gnu_debuglink (with its CRC), and dwz alt files (.gnu_debugaltlink, DW_FORM_GNU_ref_alt).
//
// Types are looked up lazily: a name index of the top-level DIEs of each unit is built one unit
// at a time, in priority order (units named by find_function hints and units that already
// answered a lookup come first), and stops as soon as a complete definition is found. Walking
// every DIE of every unit per process is what made the naive approach take 15-30 s.
import koffi from 'koffi';
import { nativeFree, withScratch } from '../native/alloc.js';
import {
  alloc,
  allocDie,
  DIE_SIZE,
  DW_AT,
  DW_TAG,
  dw,
  dwflError,
  offlineCallbacks,
} from '../native/libdw.js';
import { ElfSections, SHT_DYNSYM, SHT_SYMTAB, type SymbolTable } from './elf-sections.js';

type Scratch = Parameters<Parameters<typeof withScratch>[0]>[0];

export interface SymbolInfo {
  readonly value: bigint;
  readonly size: number;
  readonly global: boolean;
}

/** A function of the symbol table, by file address (see DebugFile.functionAt). */
interface FunctionSymbol {
  readonly value: bigint;
  readonly size: bigint;
  readonly name: string;
}

/** A reference to a DIE that stays valid as long as its DebugFile lives. */
export interface TypeRef {
  readonly file: DebugFile;
  readonly dwarf: unknown;
  readonly offset: bigint;
  readonly name: string;
}

interface Unit {
  readonly dwarf: unknown;
  readonly dieOffset: bigint;
}

interface IndexEntry {
  readonly unit: number;
  readonly offset: bigint;
  readonly tag: number;
  readonly declaration: boolean;
}

const TYPE_TAGS = new Set<number>([
  DW_TAG.typedef,
  DW_TAG.structure_type,
  DW_TAG.union_type,
  DW_TAG.base_type,
  DW_TAG.enumeration_type,
  DW_TAG.class_type,
]);

const STT_FUNC = 2;
/** The symbol types looked up by name: NOTYPE, OBJECT, FUNC, GNU_IFUNC (not sections, files, TLS). */
const INDEXED_KINDS: ReadonlySet<number> = new Set([0, 1, 2, 10]);
const STT_TLS = 6;
/** Names a DebugFile searches its symbol table for before it indexes the whole table. */
const LOOKUPS_BEFORE_INDEX = 64;
const STT_GNU_IFUNC = 10;

let callbacks: unknown = null;
let callbacksPath: string | null | undefined;

function dwflCallbacks(): unknown {
  const path = process.env['MQD_DEBUGINFO_PATH'] ?? null;
  if (callbacks === null || callbacksPath !== path) {
    callbacks = offlineCallbacks(path);
    callbacksPath = path;
  }
  return callbacks;
}

export interface DebugFileStats {
  unitsScanned: number;
  unitsTotal: number | null;
  diesVisited: number;
  typeLookups: number;
  symbolsIndexed: number;
}

export class DebugFile {
  readonly buildId: string | null;
  private readonly dwfl: unknown;
  private readonly mod: unknown;
  private symbols: Map<string, SymbolInfo> | null = null;
  /** STT_TLS symbols: value is the offset in this module's TLS block (never an address). */
  private readonly tls = new Map<string, SymbolInfo>();
  /** Functions sorted by file address, built on the first functionAt. */
  private functions: FunctionSymbol[] | null = null;
  private dwarfMain: unknown | null | undefined;
  private units: Unit[] = [];
  private unitsDone = false;
  private nextUnitOff: { dwarf: unknown; off: bigint; isAlt: boolean } | null = null;
  private readonly scanned = new Set<number>();
  private readonly priority: number[] = [];
  private readonly index = new Map<string, IndexEntry[]>();
  private readonly typeCache = new Map<string, TypeRef | null>();
  private readonly fieldCache = new Map<string, number>();
  /** Scratch blocks of this file, freed by close(). */
  private readonly owned: unknown[] = [];
  private readonly die = this.own(allocDie());
  private readonly die2 = this.own(allocDie());
  private readonly die3 = this.own(allocDie());
  private readonly attr = this.own(alloc(32));
  private readonly symBuf = this.own(alloc(24));
  private readonly addrBuf = this.own(alloc(8));
  readonly stats: DebugFileStats = {
    unitsScanned: 0,
    unitsTotal: null,
    diesVisited: 0,
    typeLookups: 0,
    symbolsIndexed: 0,
  };
  /** The separate debug file libdw found (null: none, or the debug info is in the file itself). */
  debugFilePath: string | null = null;

  private constructor(
    readonly path: string,
    dwfl: unknown,
    mod: unknown,
  ) {
    this.dwfl = dwfl;
    this.mod = mod;
    const bits = [null as unknown];
    const vaddr = [0n];
    const n = dw.dwfl_module_build_id(mod, bits, vaddr) as number;
    this.buildId = n > 0 && bits[0] ? Buffer.from(koffiBytes(bits[0], n)).toString('hex') : null;
  }

  /**
   * `symbolsFromFile: false` makes every symbol come from libdw one entry at a time (the check
   * of the file reader in packages/mqd-core/test/elf-sections.test.ts).
   */
  static open(path: string, opts: { symbolsFromFile?: boolean } = {}): DebugFile | string {
    const dwfl = dw.dwfl_begin(dwflCallbacks());
    if (!dwfl) return `dwfl_begin: ${dwflError()}`;
    dw.dwfl_report_begin(dwfl);
    const mod = dw.dwfl_report_elf(dwfl, path, path, -1, 0n, false);
    dw.dwfl_report_end(dwfl, null, null);
    if (!mod) {
      const msg = dwflError();
      dw.dwfl_end(dwfl);
      return `${path}: ${msg}`;
    }
    const f = new DebugFile(path, dwfl, mod);
    if (opts.symbolsFromFile === false) {
      f.fileTable = null;
      f.symbolSource = 'libdw';
    }
    return f;
  }

  /**
   * This file's libdw module (reported at bias 0: its addresses are file addresses), for readers
   * of its DWARF outside this class: the unwinder symbolises pcs of every process that maps the
   * file here, so the file's DWARF is loaded once, not once per process (inferior/unwind.ts).
   */
  get dwflModule(): unknown {
    return this.mod;
  }

  close(): void {
    dw.dwfl_end(this.dwfl);
    for (const b of this.owned.splice(0)) nativeFree(b);
  }

  private own(block: unknown): unknown {
    this.owned.push(block);
    return block;
  }

  // ---- symbols --------------------------------------------------------------------------
  // libdw's symbol table is the file's .symtab, else the separate debug file's (found like the
  // DWARF: build-id, .gnu_debuglink, MQD_DEBUGINFO_PATH), else .dynsym: a stripped library with
  // its debug file installed has all its symbols here, LOCAL ones included.

  /**
   * Global symbols win over local ones of the same name (MPICH's queue heads are local). The
   * first lookups search the table by name (SymbolTable.find: a name no module has, such as the
   * `MPIR_Ignore_queues` Open MPI's DLL asks every process for, costs each of ~60 files one
   * string search instead of a map of all its symbols); the table is indexed once a file has been
   * asked for LOOKUPS_BEFORE_INDEX names, or when its table cannot be read from the file.
   */
  symbol(name: string): SymbolInfo | undefined {
    if (this.symbols !== null) return this.symbols.get(name);
    const known = this.looked.get(name);
    if (known !== undefined) return known ?? undefined;
    const table = this.fileTable !== undefined ? this.fileTable : this.fileSymbolTable(this.symtabSize());
    if (table === null || this.looked.size >= LOOKUPS_BEFORE_INDEX) return this.symbolMap().get(name);
    const e = table.find(name, (info) => INDEXED_KINDS.has(info & 0xf));
    const hit = e ? { value: e.value, size: Number(e.size), global: e.global } : null;
    this.looked.set(name, hit);
    return hit ?? undefined;
  }

  /** Names symbol() answered by search before the table was indexed (null: not there). */
  private readonly looked = new Map<string, SymbolInfo | null>();

  /** Entries of libdw's symbol table (libdw finds it, and the debug file holding it, on the first call). */
  private symtabSize(): number {
    const n = dw.dwfl_module_getsymtab(this.mod) as number;
    this.noteDebugFile();
    return n;
  }

  private debugFileNoted = false;
  /** Records the separate debug file libdw found for the symbols (after dwfl_module_getsymtab). */
  private noteDebugFile(): void {
    if (this.debugFileNoted) return;
    this.debugFileNoted = true;
    const debug = [null as string | null];
    dw.dwfl_module_info(this.mod, null, null, null, null, null, [null], debug);
    this.debugFilePath ??= debug[0] ?? null;
  }

  /** This file's .dynsym (null: none readable), read on the first exportedSymbol. */
  private dynsym: SymbolTable | null | undefined;
  private readonly exportedLooked = new Map<string, SymbolInfo | undefined>();

  /**
   * A symbol this file exports (its .dynsym: defined, global or weak, object/function), read
   * from the file without indexing its whole symbol table; undefined when it does not export
   * it, null when the file has no readable .dynsym (ask symbol()). In a linked library the
   * global symbols of .symtab are exactly the exported ones (the linker turns hidden ones local).
   */
  exportedSymbol(name: string): SymbolInfo | undefined | null {
    if (this.dynsym === undefined) {
      const elf = ElfSections.open(this.path);
      try {
        this.dynsym = elf?.symbolTable(SHT_DYNSYM) ?? null;
      } finally {
        elf?.close();
      }
    }
    if (this.dynsym === null) return null;
    if (this.exportedLooked.has(name)) return this.exportedLooked.get(name);
    const e = this.dynsym.find(name, (info) => {
      const bind = info >> 4;
      return (bind === 1 || bind === 2) && INDEXED_KINDS.has(info & 0xf);
    });
    const hit = e ? { value: e.value, size: Number(e.size), global: true } : undefined;
    this.exportedLooked.set(name, hit);
    return hit;
  }

  /**
   * A thread-local (STT_TLS) symbol: `value` is its offset in this module's TLS block, which
   * each thread has at its own address (`__kmp_gtid` of LLVM's libomp, LOCAL). Never in symbol().
   */
  tlsSymbol(name: string): SymbolInfo | undefined {
    this.symbolMap();
    return this.tls.get(name);
  }

  /**
   * The function holding file address `addr` (its entry, or inside its size), the global name of
   * an address with aliases; null when none (the outlined region or task entry of OMPD).
   */
  functionAt(addr: bigint): string | null {
    this.functions ??= this.readFunctions();
    const f = this.functions;
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

  /**
   * The separate debug file libdw found for this file's symbols or DWARF (null: none found, or
   * not needed because the file has its own .symtab and the DWARF was not asked for).
   */
  separateDebugFile(): string | null {
    this.symtabSize();
    return this.debugFilePath;
  }

  private symbolMap(): Map<string, SymbolInfo> {
    if (this.symbols === null) this.symbols = this.readSymbols();
    return this.symbols;
  }

  /**
   * Every defined symbol of libdw's table, in table order: its name, ELF type and binding, file
   * address (as libdw relocates it), raw st_value and size.
   */
  private forEachSymbol(
    visit: (name: string, type: number, bind: number, value: bigint, stValue: bigint, size: bigint) => void,
  ): void {
    const n = this.symtabSize();
    const table = this.fileSymbolTable(n);
    if (table) {
      for (let i = 1; i < n; i++) {
        const name = table.name(i);
        if (!name || table.shndx(i) === 0) continue;
        const info = table.info(i);
        const value = table.value(i);
        visit(name, info & 0xf, info >> 4, value, value, table.size(i));
      }
      return;
    }
    const symView = new DataView(koffiView(this.symBuf, 24));
    const addrView = new DataView(koffiView(this.addrBuf, 8));
    for (let i = 1; i < n; i++) {
      const name = dw.dwfl_module_getsym_info(this.mod, i, this.symBuf, this.addrBuf, null, null, null) as
        | string
        | null;
      if (!name) continue;
      const shndx = symView.getUint16(6, true);
      if (shndx === 0) continue; // undefined: defined elsewhere
      const info = symView.getUint8(4);
      visit(
        name,
        info & 0xf,
        info >> 4,
        addrView.getBigUint64(0, true),
        symView.getBigUint64(8, true),
        symView.getBigUint64(16, true),
      );
    }
  }

  /** Which table libdw chose, read from its file (undefined: not looked for yet). */
  private fileTable: SymbolTable | null | undefined = undefined;
  /** Set by fileSymbolTable: what libdw's table was read from (tests, stats). */
  symbolSource: 'file' | 'libdw' | null = null;

  /**
   * The symbol table libdw chose for this module (the file's .symtab, else the separate debug
   * file's, else .dynsym), read straight from that file: libdw hands entries out one call at a
   * time, ~5 us each through koffi. Used only when it is the same table: as many entries as libdw
   * has, and 16 entries spread over it equal to libdw's (name, section, value, size, and libdw's
   * address equal to the raw value: modules are reported at bias 0). Else null: libdw's way.
   */
  private fileSymbolTable(n: number): SymbolTable | null {
    if (this.fileTable !== undefined) return this.fileTable;
    this.fileTable = null;
    this.symbolSource = 'libdw';
    if (n <= 1) return null;
    const debug = [null as string | null];
    dw.dwfl_module_info(this.mod, null, null, null, null, null, [null], debug);
    const candidates: [string, typeof SHT_SYMTAB | typeof SHT_DYNSYM][] = [[this.path, SHT_SYMTAB]];
    if (debug[0]) candidates.push([debug[0], SHT_SYMTAB]);
    candidates.push([this.path, SHT_DYNSYM]);
    for (const [file, type] of candidates) {
      const elf = ElfSections.open(file);
      if (!elf) continue;
      let table: SymbolTable | null;
      try {
        table = elf.symbolTable(type);
      } finally {
        elf.close();
      }
      if (!table || table.count !== n) continue;
      if (!this.sameAsLibdw(table, n)) return null;
      this.fileTable = table;
      this.symbolSource = 'file';
      return table;
    }
    return null;
  }

  private sameAsLibdw(table: SymbolTable, n: number): boolean {
    const symView = new DataView(koffiView(this.symBuf, 24));
    const addrView = new DataView(koffiView(this.addrBuf, 8));
    const step = Math.max(1, Math.floor((n - 1) / 16));
    for (let i = 1; i < n; i += step) {
      const name = dw.dwfl_module_getsym_info(this.mod, i, this.symBuf, this.addrBuf, null, null, null) as
        | string
        | null;
      if ((name || null) !== table.name(i)) return false;
      if (symView.getUint16(6, true) !== table.shndx(i)) return false;
      if (
        symView.getBigUint64(8, true) !== table.value(i) ||
        symView.getBigUint64(16, true) !== table.size(i)
      )
        return false;
      if (table.shndx(i) !== 0 && addrView.getBigUint64(0, true) !== table.value(i)) return false;
    }
    return true;
  }

  private readSymbols(): Map<string, SymbolInfo> {
    const map = new Map<string, SymbolInfo>();
    this.forEachSymbol((name, type, bind, value, stValue, size) => {
      const global = bind === 1 || bind === 2;
      if (type === STT_TLS) {
        // libdw relocates st_value like an address; a TLS value is an offset: keep it raw.
        const prev = this.tls.get(name);
        if (!prev || (global && !prev.global))
          this.tls.set(name, { value: stValue, size: Number(size), global });
        return;
      }
      if (!INDEXED_KINDS.has(type)) return;
      const prev = map.get(name);
      if (prev && (prev.global || !global)) return;
      map.set(name, { value, size: Number(size), global });
    });
    this.stats.symbolsIndexed = map.size;
    return map;
  }

  private readFunctions(): FunctionSymbol[] {
    const byAddr = new Map<bigint, FunctionSymbol & { global: boolean }>();
    this.forEachSymbol((name, type, bind, value, _stValue, size) => {
      if ((type !== STT_FUNC && type !== STT_GNU_IFUNC) || value === 0n) return;
      const global = bind === 1 || bind === 2;
      const prev = byAddr.get(value);
      // Prefer the global name of an address (an alias) over a local one.
      if (!prev || (global && !prev.global)) byAddr.set(value, { value, size, name, global });
    });
    return [...byAddr.values()]
      .map(({ value, size, name }) => ({ value, size, name }))
      .sort((a, b) => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0));
  }

  // ---- DWARF ----------------------------------------------------------------------------
  private dwarf(): unknown | null {
    if (this.dwarfMain === undefined) {
      this.dwarfMain = withScratch((a) => dw.dwfl_module_getdwarf(this.mod, a('uint8_t', 8)) ?? null);
      const main = [null as string | null];
      const debug = [null as string | null];
      dw.dwfl_module_info(this.mod, null, null, null, null, null, main, debug);
      this.debugFilePath = debug[0] ?? this.debugFilePath;
      if (this.dwarfMain) this.nextUnitOff = { dwarf: this.dwarfMain, off: 0n, isAlt: false };
    }
    return this.dwarfMain;
  }

  hasDwarf(): boolean {
    return this.dwarf() !== null;
  }

  /** Enumerates one more unit header (main file first, then the dwz alt file); false at the end. */
  private enumerateUnit(): boolean {
    const cur = this.nextUnitOff;
    if (this.unitsDone || cur === null) return false;
    const next = [0n];
    const hsize = [0n];
    const r = dw.dwarf_nextcu(cur.dwarf, cur.off, next, hsize, null, null, null) as number;
    if (r !== 0) {
      const alt = cur.isAlt ? null : (dw.dwarf_getalt(cur.dwarf) ?? null);
      if (alt) {
        this.nextUnitOff = { dwarf: alt, off: 0n, isAlt: true };
        return this.enumerateUnit();
      }
      this.unitsDone = true;
      this.stats.unitsTotal = this.units.length;
      return false;
    }
    this.units.push({ dwarf: cur.dwarf, dieOffset: cur.off + BigInt(hsize[0] ?? 0) });
    this.nextUnitOff = { dwarf: cur.dwarf, off: BigInt(next[0] ?? 0), isAlt: cur.isAlt };
    return true;
  }

  /** Index the named top-level type DIEs of unit `u`. */
  private scanUnit(u: number): void {
    if (this.scanned.has(u)) return;
    this.scanned.add(u);
    this.stats.unitsScanned++;
    const unit = this.units[u];
    if (!unit) return;
    if (!dw.dwarf_offdie(unit.dwarf, unit.dieOffset, this.die)) return;
    if ((dw.dwarf_child(this.die, this.die2) as number) !== 0) return;
    let visited = 0;
    do {
      visited++;
      const tag = dw.dwarf_tag(this.die2) as number;
      if (TYPE_TAGS.has(tag)) {
        const name = dw.dwarf_diename(this.die2) as string | null;
        if (name) {
          const entry: IndexEntry = {
            unit: u,
            offset: BigInt(dw.dwarf_dieoffset(this.die2) as number | bigint),
            tag,
            declaration: (dw.dwarf_hasattr(this.die2, DW_AT.declaration) as number) !== 0,
          };
          const list = this.index.get(name);
          if (list) list.push(entry);
          else this.index.set(name, [entry]);
        }
      }
    } while ((dw.dwarf_siblingof(this.die2, this.die2) as number) === 0);
    this.stats.diesVisited += visited;
  }

  /** A find_function hint: the unit holding this address is searched first. */
  hintAddress(addr: bigint): void {
    const dwarf = this.dwarf();
    if (!dwarf) return;
    if (!dw.dwarf_addrdie(dwarf, addr, this.die3)) return;
    const off = BigInt(dw.dwarf_dieoffset(this.die3) as number | bigint);
    // Units are enumerated lazily; enumerate until this one is known.
    for (;;) {
      const idx = this.units.findIndex((x) => x.dwarf === dwarf && x.dieOffset === off);
      if (idx >= 0) {
        if (!this.priority.includes(idx)) this.priority.unshift(idx);
        return;
      }
      if (!this.enumerateUnit()) return;
    }
  }

  /** The complete definition of a named C type (typedef name or struct/union tag), or null. */
  findType(name: string): TypeRef | null {
    this.stats.typeLookups++;
    const cached = this.typeCache.get(name);
    if (cached !== undefined) return cached;
    const dwarf = this.dwarf();
    if (!dwarf) return null;
    const found = this.searchComplete(name);
    this.typeCache.set(name, found);
    return found;
  }

  private completeFromIndex(name: string): TypeRef | null {
    const list = this.index.get(name);
    if (!list) return null;
    for (const e of list) {
      if (e.declaration) continue;
      const unit = this.units[e.unit];
      if (!unit) continue;
      if (e.tag === DW_TAG.typedef) {
        // A typedef of a struct that is only declared here is not complete: resolve the tag.
        if (!dw.dwarf_offdie(unit.dwarf, e.offset, this.die)) continue;
        if ((dw.dwarf_peel_type(this.die, this.die2) as number) !== 0) continue;
        if ((dw.dwarf_hasattr(this.die2, DW_AT.declaration) as number) !== 0) continue;
      }
      return { file: this, dwarf: unit.dwarf, offset: e.offset, name };
    }
    return null;
  }

  private searchComplete(name: string): TypeRef | null {
    const hit = this.completeFromIndex(name);
    if (hit) return hit;
    // Priority units first, then every unit in order, enumerating as we go.
    for (const u of this.priority) {
      this.scanUnit(u);
      const h = this.completeFromIndex(name);
      if (h) return h;
    }
    for (let u = 0; ; u++) {
      if (u >= this.units.length && !this.enumerateUnit()) break;
      if (this.scanned.has(u)) continue;
      this.scanUnit(u);
      const h = this.completeFromIndex(name);
      if (h) {
        const unit = this.units.findIndex((x) => x.dwarf === h.dwarf && this.unitHolds(x, h.offset));
        if (unit >= 0 && !this.priority.includes(unit)) this.priority.push(unit);
        return h;
      }
    }
    // Only declarations: a typedef to an incomplete struct whose definition has another name.
    const list = this.index.get(name) ?? [];
    for (const e of list) {
      const unit = this.units[e.unit];
      if (!unit || e.tag !== DW_TAG.typedef) continue;
      if (!dw.dwarf_offdie(unit.dwarf, e.offset, this.die)) continue;
      if ((dw.dwarf_peel_type(this.die, this.die2) as number) !== 0) continue;
      const tagName = dw.dwarf_diename(this.die2) as string | null;
      if (tagName && tagName !== name) {
        const def = this.completeFromIndex(tagName);
        if (def) return { ...def, name };
      }
    }
    return null;
  }

  private unitHolds(u: Unit, off: bigint): boolean {
    const i = this.units.indexOf(u);
    const next = this.units[i + 1];
    return off >= u.dieOffset && (next === undefined || next.dwarf !== u.dwarf || off < next.dieOffset);
  }

  /** Loads the DIE of a type, peeled through typedefs/qualifiers, into `out`. */
  private loadPeeled(t: TypeRef, out: unknown): boolean {
    if (!dw.dwarf_offdie(t.dwarf, t.offset, this.die3)) return false;
    return (dw.dwarf_peel_type(this.die3, out) as number) === 0;
  }

  sizeOf(t: TypeRef): number {
    // die2 is free between calls (the index scans use it only inside their own loops).
    if (!this.loadPeeled(t, this.die2)) return -1;
    const tag = dw.dwarf_tag(this.die2) as number;
    if (tag === DW_TAG.pointer_type) return 8;
    return dw.dwarf_bytesize(this.die2) as number;
  }

  /**
   * Byte offset of a member; members of unions and anonymous members are found too. A dotted
   * path (`u.recv.source`) goes through nested struct/union members. -1 if absent.
   */
  fieldOffset(t: TypeRef, field: string): number {
    const key = `${t.offset}:${t.dwarf === this.dwarfMain ? 'm' : 'a'}:${field}`;
    const cached = this.fieldCache.get(key);
    if (cached !== undefined) return cached;
    const off = withScratch((a) => {
      let die = a('uint8_t', DIE_SIZE);
      if (!this.loadPeeled(t, die)) return -1;
      let base = 0;
      const path = field.split('.');
      for (let i = 0; i < path.length; i++) {
        const last = i === path.length - 1;
        const inner = last ? undefined : a('uint8_t', DIE_SIZE);
        const o = this.memberOffset(die, path[i] ?? '', base, a, inner);
        if (o < 0) return -1;
        base = o;
        if (inner !== undefined) die = inner;
      }
      return base;
    });
    this.fieldCache.set(key, off);
    return off;
  }

  /** `typeOut`, when given, receives the found member's peeled type (for a nested lookup). */
  private memberOffset(
    structDie: unknown,
    field: string,
    base: number,
    a: Scratch,
    typeOut?: unknown,
  ): number {
    const child = a('uint8_t', DIE_SIZE);
    if ((dw.dwarf_child(structDie, child) as number) !== 0) return -1;
    const anonymous: unknown[] = [];
    do {
      if ((dw.dwarf_tag(child) as number) !== DW_TAG.member) continue;
      const name = dw.dwarf_diename(child) as string | null;
      if (name !== null && name !== field) continue;
      let loc = 0;
      // A union member has no DW_AT_data_member_location: its offset is 0, not "missing".
      if (dw.dwarf_attr(child, DW_AT.data_member_location, this.attr)) {
        const v = [0n];
        if ((dw.dwarf_formudata(this.attr, v) as number) !== 0) return -1;
        loc = Number(v[0] ?? 0n);
      }
      if (name === field) {
        if (typeOut === undefined) return base + loc;
        const ty = a('uint8_t', DIE_SIZE);
        const typed = dw.dwarf_attr(child, DW_AT.type, this.attr) && dw.dwarf_formref_die(this.attr, ty);
        return typed && (dw.dwarf_peel_type(ty, typeOut) as number) === 0 ? base + loc : -1;
      }
      // Anonymous struct/union member: search inside it after the named ones.
      const sub = a('uint8_t', DIE_SIZE);
      if (dw.dwarf_attr(child, DW_AT.type, this.attr) && dw.dwarf_formref_die(this.attr, sub)) {
        const peeled = a('uint8_t', DIE_SIZE);
        if ((dw.dwarf_peel_type(sub, peeled) as number) === 0) anonymous.push([peeled, base + loc]);
      }
    } while ((dw.dwarf_siblingof(child, child) as number) === 0);
    for (const entry of anonymous) {
      const [d, b] = entry as [unknown, number];
      const r = this.memberOffset(d, field, b, a, typeOut);
      if (r >= 0) return r;
    }
    return -1;
  }
}

function koffiView(p: unknown, len: number): ArrayBuffer {
  return koffi.view(p, len);
}
function koffiBytes(p: unknown, len: number): Uint8Array {
  return new Uint8Array(koffi.decode(p, koffi.array('uint8_t', len)) as number[]);
}
