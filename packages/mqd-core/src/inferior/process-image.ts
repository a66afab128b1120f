// A live process's address space as the debugger sees it: which ELF files are mapped where
// (from /proc/PID/maps), each file's shared DebugFile, and symbol lookup relocated by the load
// bias of that file in this process (PIE/ASLR make it differ per process).
import { readFileSync, readlinkSync, statSync } from 'node:fs';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import type { DebugFile, TypeRef } from './debug-file.js';
import type { DebugFileRegistry } from './debug-file-registry.js';
import { type ElfInfo, readElfInfo } from './elf.js';

/**
 * Where the unwinder reads the DWARF of a pc (inferior/unwind.ts): the libdw module of a file
 * shared by every process that maps it (`DebugFile.dwflModule`, whose addresses are file
 * addresses) and the pc's file address in it. A process's own Dwfl would load each file's DWARF
 * again for every rank that needs it (libc's alone is ~9 MB), growing a long-lived reader with its
 * ranks times the files their polling loops pass through. Null: the process's own Dwfl module
 * (core files, files the session could not open).
 */
export type DwarfAt = (pc: bigint) => { readonly mod: unknown; readonly addr: bigint } | null;

export interface MappedModule {
  readonly path: string;
  /** Address in the process = file address + bias. */
  readonly bias: bigint;
  readonly start: bigint;
  readonly end: bigint;
  readonly file: DebugFile;
}

const elfCache = new Map<string, ElfInfo | null>();

function fileKey(path: string): string | null {
  try {
    const st = statSync(path, { bigint: true });
    return `${st.dev}:${st.ino}:${st.mtimeNs}`;
  } catch {
    return null; // unreadable or gone: not a module we can index
  }
}

/** Reads /proc/PID/maps; a missing process or a denied read is a coded error. */
export function readMaps(pid: number): Result<string, MqdError> {
  try {
    return ok(readFileSync(`/proc/${pid}/maps`, 'utf8'));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ESRCH') return err(mqdError('MQD_E_NO_SUCH_PID', `no process ${pid}`));
    if (code === 'EACCES' || code === 'EPERM')
      return err(mqdError('MQD_E_PTRACE_DENIED', `cannot read /proc/${pid}/maps (${code})`));
    return err(mqdError('MQD_E_NO_SUCH_PID', `cannot read /proc/${pid}/maps (${code ?? String(e)})`));
  }
}

/** The executable of a live process and its file mappings, or why they cannot be read. */
export function readAddressSpace(
  pid: number,
): Result<{ exe: string; mappings: (FileMapping & { readonly deleted: boolean })[] }, MqdError> {
  const maps = readMaps(pid);
  if (!maps.ok) return maps;
  try {
    return ok({ exe: readlinkSync(`/proc/${pid}/exe`), mappings: fileMappings(maps.value) });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return err(mqdError('MQD_E_PID_EXITED', `process ${pid} exited`));
    return err(mqdError('MQD_E_PTRACE_DENIED', `cannot read /proc/${pid}/exe (${code ?? String(e)})`));
  }
}

export class ProcessImage {
  private constructor(
    readonly pid: number,
    readonly exe: string,
    /** Executable first, then the libraries in address order: the dynamic linker's search order. */
    readonly modules: readonly MappedModule[],
  ) {}

  static load(pid: number, registry: DebugFileRegistry): Result<ProcessImage, MqdError> {
    const space = readAddressSpace(pid);
    if (!space.ok) return space;
    const { exe, mappings } = space.value;
    return ok(ProcessImage.of(pid, exe, mappedModules(mappings, processPaths(pid), registry)));
  }

  /** An address space described by other means (a core file's NT_FILE note, inferior/core-image.ts). */
  static of(pid: number, exe: string, modules: readonly MappedModule[]): ProcessImage {
    const sorted = [...modules].sort((a, b) =>
      a.path === exe ? -1 : b.path === exe ? 1 : a.start < b.start ? -1 : 1,
    );
    return new ProcessImage(pid, exe, sorted);
  }

  /**
   * Relocated address of a symbol (global definitions first, like the dynamic linker). The
   * executable's symbol table first, then what the libraries export (.dynsym, no full index:
   * Open MPI maps ~60 files, libc's table alone is ~10,000 symbols), then every table (locals).
   */
  findSymbol(name: string): { address: bigint; size: number; module: MappedModule } | null {
    const exe = this.modules[0]?.path === this.exe ? this.modules[0] : undefined;
    const inExe = exe?.file.symbol(name);
    if (exe && inExe?.global) return { address: inExe.value + exe.bias, size: inExe.size, module: exe };
    let unknown = false;
    for (const m of this.modules) {
      if (m === exe) continue;
      const s = m.file.exportedSymbol(name);
      if (s === null) unknown = true;
      else if (s && !unknown) return { address: s.value + m.bias, size: s.size, module: m };
    }
    return this.findSymbolInTables(name);
  }

  private findSymbolInTables(name: string): { address: bigint; size: number; module: MappedModule } | null {
    let local: { address: bigint; size: number; module: MappedModule } | null = null;
    for (const m of this.modules) {
      const s = m.file.symbol(name);
      if (!s) continue;
      const hit = { address: s.value + m.bias, size: s.size, module: m };
      if (s.global) return hit;
      local ??= hit;
    }
    return local;
  }

  /** Hints that the DWARF unit of a function holds the types asked next (the DLL's find_function). */
  hintFunction(name: string): bigint | null {
    const s = this.findSymbol(name);
    if (!s) return null;
    s.module.file.hintAddress(s.address - s.module.bias);
    return s.address;
  }

  /** A named type: the module of the MPI library first (where hints point), then all others. */
  findType(name: string): TypeRef | null {
    for (const m of this.orderedForTypes()) {
      if (!m.file.hasDwarf()) continue;
      const t = m.file.findType(name);
      if (t) return t;
    }
    return null;
  }

  private typeOrder: MappedModule[] | null = null;
  private preferred: MappedModule | null = null;

  /** The mapped file that holds `address` (undefined: none, e.g. the stack or an anonymous map). */
  moduleAt(address: bigint): MappedModule | undefined {
    return this.modules.find((x) => address >= x.start && address < x.end);
  }

  /** The DWARF of a pc in this process (`DwarfAt`). Bound, so it can be handed on as it is. */
  readonly dwarfAt: DwarfAt = (pc) => {
    const m = this.moduleAt(pc);
    return m ? { mod: m.file.dwflModule, addr: pc - m.bias } : null;
  };

  preferModuleOf(address: bigint): void {
    const m = this.moduleAt(address);
    if (m) {
      this.preferred = m;
      this.typeOrder = null;
    }
  }

  private orderedForTypes(): MappedModule[] {
    if (!this.typeOrder) {
      const p = this.preferred;
      this.typeOrder = p ? [p, ...this.modules.filter((m) => m !== p)] : [...this.modules];
    }
    return this.typeOrder;
  }

  /** True when some mapped file looks like an MPI library. */
  mpiLibrary(): MappedModule | null {
    return this.modules.find((m) => isMpiLibraryPath(m.path)) ?? null;
  }
}

/** A path that looks like an MPI library's (libmpi*.so*, libmpich*.so*). */
export const isMpiLibraryPath = (path: string): boolean => /\/lib(mpi|mpich)[^/]*\.so/.test(path);

/** One file mapping of an address space: /proc/PID/maps line, or a core's NT_FILE entry. */
export interface FileMapping {
  readonly path: string;
  readonly start: bigint;
  readonly end: bigint;
  /** Offset in the file, bytes. */
  readonly offset: bigint;
}

/**
 * The file-backed mappings of a /proc/PID/maps text (inode not 0), a deleted file under its old
 * path with `deleted` set.
 */
export function fileMappings(maps: string): (FileMapping & { readonly deleted: boolean })[] {
  const out: (FileMapping & { readonly deleted: boolean })[] = [];
  for (const line of maps.split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ (\d+)\s+(\/.*)$/.exec(line);
    if (!m) continue;
    const [, s, e, off, inode, rawPath] = m;
    if (!s || !e || !off || !rawPath || inode === '0') continue;
    const deleted = rawPath.endsWith(' (deleted)');
    const path = deleted ? rawPath.slice(0, -10) : rawPath;
    out.push({ path, start: BigInt(`0x${s}`), end: BigInt(`0x${e}`), offset: BigInt(`0x${off}`), deleted });
  }
  return out;
}

/** Where one ELF file sits in an address space, before its symbols are opened. */
export interface ModuleSpan {
  /** The path as the process saw it. */
  readonly path: string;
  /** The path to open here (through /proc/PID/root when the process has another root). */
  readonly rootPath: string;
  /** Device, inode and mtime of rootPath: the registry's key. */
  readonly key: string;
  readonly bias: bigint;
  readonly start: bigint;
  readonly end: bigint;
}

/**
 * The ELF files of an address space: per file, the span of its mappings and the load bias
 * anchored by its offset-0 mapping. `onDisk` turns a path as the process saw it into the path
 * to open here; files that cannot be opened or are not ELF are left out. `only` picks files by
 * their path (the others are not opened at all).
 */
export function moduleSpans(
  mappings: readonly FileMapping[],
  onDisk: (path: string) => string,
  only: (path: string) => boolean = () => true,
): ModuleSpan[] {
  // First mapping of each file, and the file offset-0 mapping that anchors its bias.
  const seen = new Map<string, { start: bigint; end: bigint; zeroStart: bigint | null }>();
  for (const { path, start, end, offset } of mappings) {
    if (!only(path)) continue;
    const cur = seen.get(path);
    if (!cur) seen.set(path, { start, end, zeroStart: offset === 0n ? start : null });
    else {
      if (end > cur.end) cur.end = end;
      if (cur.zeroStart === null && offset === 0n) cur.zeroStart = start;
    }
  }
  const spans: ModuleSpan[] = [];
  for (const [path, r] of seen) {
    if (r.zeroStart === null) continue;
    const rootPath = onDisk(path);
    const key = fileKey(rootPath);
    if (key === null) continue;
    let info = elfCache.get(key);
    if (info === undefined) {
      const res = readElfInfo(rootPath);
      info = res.ok ? res.value : null;
      elfCache.set(key, info);
    }
    if (!info) continue;
    const first = info.loads.find((l) => l.offset === 0n) ?? info.loads[0];
    if (!first) continue;
    const pageVaddr = first.vaddr & ~0xfffn;
    spans.push({ path, rootPath, key, bias: r.zeroStart - pageVaddr, start: r.start, end: r.end });
  }
  return spans;
}

/** The ELF modules of an address space (moduleSpans) with each file's shared DebugFile. */
export function mappedModules(
  mappings: readonly FileMapping[],
  onDisk: (path: string) => string,
  registry: DebugFileRegistry,
): MappedModule[] {
  const modules: MappedModule[] = [];
  for (const { path, rootPath, key, bias, start, end } of moduleSpans(mappings, onDisk)) {
    const file = registry.get(key, rootPath);
    if (typeof file === 'string') continue;
    modules.push({ path, bias, start, end, file });
  }
  return modules;
}

/**
 * How to turn the paths `pid` maps into paths to open here: unchanged when it shares our mount
 * namespace and root (one check per process instead of two stats per mapped file: Open MPI maps
 * ~60), else pathInProcess per file.
 */
export function processPaths(pid: number): (path: string) => string {
  try {
    const sameNs = readlinkSync(`/proc/${pid}/ns/mnt`) === readlinkSync('/proc/self/ns/mnt');
    const ours = statSync('/', { bigint: true });
    const theirs = statSync(`/proc/${pid}/root/`, { bigint: true });
    if (sameNs && ours.dev === theirs.dev && ours.ino === theirs.ino) return (path) => path;
  } catch {
    // Not allowed to look (or gone): decide per file.
  }
  return (path) => pathInProcess(pid, path);
}

/** The path to open here for a file the process `pid` maps at `path`. */
export function pathInProcess(pid: number, path: string): string {
  // Same mount namespace: the path as is; otherwise through the process's root.
  try {
    const a = statSync(path, { bigint: true });
    const b = statSync(`/proc/${pid}/root${path}`, { bigint: true });
    return a.ino === b.ino && a.dev === b.dev ? path : `/proc/${pid}/root${path}`;
  } catch {
    return path;
  }
}
