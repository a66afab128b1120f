// The DLL a process names: MPIR_dll_name, else Open MPI's mpimsgq_dll_locations, else the DLL
// its MPI library installs beside itself. It parses the target's ELF/DWARF and reads its memory,
// so it runs only in a reader child (as the target's owner), never in a root agent.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import type { OpenedCore } from '../inferior/core-image.js';
import type { DebugFileRegistry } from '../inferior/debug-file-registry.js';
import { ElfSections, SHT_DYNSYM } from '../inferior/elf-sections.js';
import { InferiorMemory } from '../inferior/memory.js';
import { isZombie, zombieError } from '../inferior/proc.js';
import {
  isMpiLibraryPath,
  moduleSpans,
  ProcessImage,
  processPaths,
  readAddressSpace,
} from '../inferior/process-image.js';

/** At most this many entries of a NULL-terminated mpimsgq_dll_locations are looked at. */
const MAX_LOCATIONS = 64;

/**
 * Where an MPI library's installation keeps its message-queue DLL, from the path of the mapped
 * library (`<libdir>/libmpi.so.40` or `<libdir>/libmpich.so.12`/`libmpi.so.12`): Open MPI's
 * `${libdir}/openmpi/libompi_dbg_msgq.so` (its MPIR_dll_name default), MPICH's
 * `${libdir}/libtvmpich.so` (with --enable-debuginfo). Existing files only, most likely first.
 */
export function installedDllCandidates(mpiLibraryPath: string): string[] {
  const libdir = dirname(mpiLibraryPath);
  const base = mpiLibraryPath.slice(libdir.length + 1);
  const openmpi = [join(libdir, 'openmpi', 'libompi_dbg_msgq.so')];
  const mpich = [join(libdir, 'libtvmpich.so'), join(libdir, 'libtvmpich.so.12')];
  const order =
    /^libmpich/.test(base) || /^libmpi\.so\.12/.test(base) ? [...mpich, ...openmpi] : [...openmpi, ...mpich];
  return order.filter((p) => existsSync(p));
}

/** How the DLL of a process was found (the reader says so in its log and errors). */
export type DllSource = 'MPIR_dll_name' | 'mpimsgq_dll_locations' | 'install path';

/**
 * The DLL for a live process, in the order a debugger should try (the interface text names
 * MPIR_dll_name; Open MPI's ompi_debuggers.c calls mpimsgq_dll_locations "preferred", a
 * NULL-terminated char *[] of candidate paths, though 4.1.4 leaves it NULL; the install path
 * covers a library whose MPIR_dll_name is empty, cleared, or absent).
 */
export function dllNamedBy(pid: number, registry: DebugFileRegistry): Result<string, MqdError> {
  const found = findDll(pid, registry);
  return found.ok ? ok(found.value.path) : found;
}

export function findDll(
  pid: number,
  registry: DebugFileRegistry,
): Result<{ path: string; source: DllSource }, MqdError> {
  const quick = dllNameFromDynsym(pid);
  if (quick !== null) return ok({ path: quick, source: 'MPIR_dll_name' });
  const img = ProcessImage.load(pid, registry);
  if (!img.ok) return img;
  const lib = img.value.mpiLibrary();
  const sym = img.value.findSymbol('MPIR_dll_name');
  const locations = img.value.findSymbol('mpimsgq_dll_locations');
  if (!sym && !locations && !lib)
    return err(mqdError('MQD_E_NOT_MPI', `pid ${pid} (${img.value.exe}) maps no MPI library`));
  const mem = new InferiorMemory(pid, 1 << 20);
  // A rank that exited since it was checked is refused like a permission problem: say which.
  const denied = () =>
    mem.lastFailure !== 'denied'
      ? null
      : err(
          isZombie(pid)
            ? zombieError(pid)
            : mqdError('MQD_E_PTRACE_DENIED', `cannot read the memory of pid ${pid}`),
        );
  const tried: string[] = [];
  if (sym) {
    const name = mem.readCString(sym.address, Math.min(Math.max(sym.size, 1), 4096));
    if (name) return ok({ path: name, source: 'MPIR_dll_name' });
    const d = denied();
    if (d) return d;
    tried.push('MPIR_dll_name is empty or unreadable');
  } else tried.push('no MPIR_dll_name symbol');
  if (locations) {
    const list = mem.readU64(locations.address);
    if (list !== null && list !== 0n) {
      for (let i = 0; i < MAX_LOCATIONS; i++) {
        const p = mem.readU64(list + BigInt(8 * i));
        if (p === null || p === 0n) break;
        const path = mem.readCString(p, 4096);
        if (path && existsSync(path)) return ok({ path, source: 'mpimsgq_dll_locations' });
        if (path) tried.push(`mpimsgq_dll_locations names ${path}, which does not exist here`);
      }
    } else tried.push('mpimsgq_dll_locations is NULL');
  }
  if (lib) {
    const installed = installedDllCandidates(lib.path)[0];
    if (installed) return ok({ path: installed, source: 'install path' });
    tried.push(`no message-queue DLL beside ${lib.path}`);
  }
  return err(mqdError('MQD_E_NO_DLL_NAME', `pid ${pid} (${img.value.exe}): ${tried.join('; ')}`));
}

/**
 * The common case without opening every mapped file: MPIR_dll_name is a global of the MPI
 * library (or of a statically linked executable), so it is in that file's .dynsym. Only the
 * files that look like MPI libraries and the executable are read (Open MPI maps ~60 files, and
 * indexing each through libdw was most of a cold `mqd snapshot`). Null unless it names a DLL:
 * the full search (findDll) then runs and explains what it found.
 */
function dllNameFromDynsym(pid: number): string | null {
  const space = readAddressSpace(pid);
  if (!space.ok) return null;
  const { exe, mappings } = space.value;
  const spans = moduleSpans(
    mappings,
    processPaths(pid),
    (path) => path === exe || isMpiLibraryPath(path),
  ).sort((a, b) => (a.path === exe ? 1 : 0) - (b.path === exe ? 1 : 0));
  for (const span of spans) {
    const elf = ElfSections.open(span.rootPath);
    if (!elf) continue;
    let sym: { value: bigint; size: bigint } | null;
    try {
      sym = elf.symbolTable(SHT_DYNSYM)?.lookup('MPIR_dll_name') ?? null;
    } finally {
      elf.close();
    }
    if (!sym) continue;
    const mem = new InferiorMemory(pid, 1 << 16);
    const name = mem.readCString(sym.value + span.bias, Math.min(Math.max(Number(sym.size), 1), 4096));
    return name ? name : null;
  }
  return null;
}

/** The DLL the process of a core file named in MPIR_dll_name, read from the core's memory. */
export function dllNamedByCore(core: OpenedCore): Result<string, MqdError> {
  const img = core.image;
  const sym = img.findSymbol('MPIR_dll_name');
  if (!sym) {
    if (!img.mpiLibrary())
      return err(mqdError('MQD_E_NOT_MPI', `the process of ${core.path} (${img.exe}) mapped no MPI library`));
    return err(
      mqdError('MQD_E_NO_DLL_NAME', `the process of ${core.path} (${img.exe}) has no MPIR_dll_name symbol`),
    );
  }
  const name = core.readCString(sym.address, Math.min(Math.max(sym.size, 1), 4096));
  if (name === null)
    return err(
      mqdError('MQD_E_CORE_MISSING_PAGES', `${core.path}: MPIR_dll_name is in memory the core does not hold`),
    );
  if (name === '') return err(mqdError('MQD_E_NO_DLL_NAME', `${core.path}: MPIR_dll_name is empty`));
  return ok(name);
}
