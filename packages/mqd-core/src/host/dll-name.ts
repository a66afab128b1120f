// The DLL a process names in MPIR_dll_name. It parses the target's ELF/DWARF and reads its
// memory, so it runs only in a reader child (as the target's owner), never in a root agent.
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import type { OpenedCore } from '../target/core-image.js';
import type { DebugFileRegistry } from '../target/debug-file.js';
import { TargetMemory } from '../target/memory.js';
import { ProcessImage } from '../target/process-image.js';

export function dllNamedBy(pid: number, registry: DebugFileRegistry): Result<string, MqdError> {
  const img = ProcessImage.load(pid, registry);
  if (!img.ok) return img;
  const sym = img.value.findSymbol('MPIR_dll_name');
  if (!sym) {
    if (!img.value.mpiLibrary())
      return err(mqdError('MQD_E_NOT_MPI', `pid ${pid} (${img.value.exe}) maps no MPI library`));
    return err(mqdError('MQD_E_NO_DLL_NAME', `pid ${pid} (${img.value.exe}) has no MPIR_dll_name symbol`));
  }
  const mem = new TargetMemory(pid, 1 << 16);
  const name = mem.readCString(sym.address, Math.min(Math.max(sym.size, 1), 4096));
  if (!name) {
    if (mem.lastFailure === 'denied')
      return err(mqdError('MQD_E_PTRACE_DENIED', `cannot read the memory of pid ${pid}`));
    return err(mqdError('MQD_E_NO_DLL_NAME', `pid ${pid}: MPIR_dll_name is empty or unreadable`));
  }
  return ok(name);
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
