// Loading an MQD DLL into this process and handing it callback tables: the checks before
// dlopen (ELF, architecture, compatibility level, address width) and the koffi plumbing that
// turns functions into a C table (native where the shim answers, counted JS elsewhere).
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import koffi from 'koffi';
import { EM_X86_64, ET_DYN, hostMachine } from '../inferior/elf.js';
import { type HeldLibrary, openLibraryFile } from '../inferior/library-file.js';
import { HotPath, NATIVE_CALLBACKS, type NativeCallback } from '../inferior/shim.js';
import { permanentAlloc } from '../native/alloc.js';
import { dlopen, dlsymAddress, RTLD_NOW } from '../native/libc.js';
import { ENTRY_POINTS, MQS_INTERFACE_COMPATIBILITY, proto } from './mqs-spec.js';

export type Fn = (...args: unknown[]) => unknown;
export type KoffiLib = ReturnType<typeof koffi.load>;

/**
 * A DLL that passed the checks, loaded twice through the same open file (koffi's library, and
 * dlopen's handle for addresses); `file` stays open while it is loaded (library-file.ts).
 */
export interface LoadedDll {
  readonly lib: KoffiLib;
  readonly handle: unknown;
  readonly hot: HotPath;
  readonly file: HeldLibrary;
}

/** Vets and loads a DLL: a regular file, ELF, this machine's architecture, compatibility level 2, width 8. */
export function loadDll(dllPath: string): Result<LoadedDll, MqdError> {
  const opened = openLibraryFile(dllPath);
  if (!opened.ok) {
    const r = opened.error;
    if (r.elf) return err(r.elf);
    return err(
      mqdError(
        r.missing ? 'MQD_E_DLL_NOT_FOUND' : 'MQD_E_DLL_NOT_ELF',
        `the DLL ${dllPath} ${r.why}${r.missing ? '' : " (the MPI library's message-queue DLL is a regular ELF shared object)"}`,
      ),
    );
  }
  const file = opened.value;
  const elf = file.elf;
  const refuse = (e: MqdError) => {
    file.close();
    return err(e);
  };
  if (elf.machine !== hostMachine() || elf.class !== 64) {
    return refuse(
      mqdError(
        'MQD_E_DLL_WRONG_ARCH',
        `${dllPath} is ELF${elf.class} machine ${elf.machine}; this debugger is ELF64 machine ${EM_X86_64}`,
      ),
    );
  }
  if (elf.type !== ET_DYN) return refuse(mqdError('MQD_E_DLL_NOT_ELF', `${dllPath} is not a shared object`));
  const hot = HotPath.get();
  if (!hot.ok) return refuse(hot.error);
  let lib: KoffiLib;
  let handle: unknown;
  // From here on the descriptor stays open whatever happens: the loader may hold its name.
  try {
    lib = koffi.load(file.loadPath);
    // The same name opened again gives koffi's handle back: for entry points' addresses.
    const h = dlopen(file.loadPath, RTLD_NOW);
    if (!('handle' in h)) throw new Error(h.error);
    handle = h.handle;
  } catch (e) {
    return err(mqdError('MQD_E_DLL_LOAD', `dlopen ${dllPath}: ${(e as Error).message}`));
  }
  let compat: number;
  let width: number;
  try {
    compat = lib.func(ENTRY_POINTS.mqs_version_compatibility)() as number;
    width = lib.func(ENTRY_POINTS.mqs_dll_taddr_width)() as number;
  } catch (e) {
    return err(mqdError('MQD_E_DLL_INCOMPATIBLE', `${dllPath} is not an MQD DLL: ${(e as Error).message}`));
  }
  if (compat !== MQS_INTERFACE_COMPATIBILITY) {
    return err(
      mqdError(
        'MQD_E_DLL_INCOMPATIBLE',
        `${dllPath} has compatibility level ${compat}, expected ${MQS_INTERFACE_COMPATIBILITY}`,
      ),
    );
  }
  if (width !== 8) {
    return err(
      mqdError(
        'MQD_E_DLL_WRONG_ARCH',
        `${dllPath} uses ${width}-byte target addresses; this debugger reads 8-byte ones`,
      ),
    );
  }
  return ok({ lib, handle, hot: hot.value, file });
}

/**
 * A callback table for the DLL: the shim's native functions where it has them, libc's malloc and
 * free, and JS functions (counted in `counts`) for the rest; `keep` owns what C holds.
 */
export function callbackTable<K extends string>(
  names: readonly K[],
  impl: Partial<Record<K, Fn>>,
  hot: HotPath,
  keep: unknown[],
  counts: Record<string, number>,
): unknown {
  const block = permanentAlloc('uintptr_t', names.length);
  const view = new BigUint64Array(koffi.view(block, 8 * names.length));
  names.forEach((n, i) => {
    const p = proto[n as keyof typeof proto];
    const f = impl[n];
    if (n in NATIVE_CALLBACKS) {
      view[i] = hot.addresses[n as NativeCallback];
      return;
    }
    if (n === 'malloc' || n === 'free') {
      // libc's own malloc/free: no JS round trip per allocation (koffi trap 3, README.md).
      const libc = dlopen('libc.so.6', RTLD_NOW);
      view[i] = 'handle' in libc ? dlsymAddress(libc.handle, n) : 0n;
      return;
    }
    if (!f) throw new Error(`no implementation of callback ${n}`);
    const counted = (...args: unknown[]) => {
      counts[n] = (counts[n] ?? 0) + 1;
      return f(...args);
    };
    const ptr = koffi.register(counted, koffi.pointer(p));
    keep.push(ptr, counted);
    view[i] = BigInt(koffi.address(ptr));
  });
  keep.push(block);
  return block;
}

/** A C string the DLL may keep (allocated for the life of the process). */
export function nativeString(s: string): unknown {
  // Cached per code for the session's life: the DLL may keep the pointer.
  const buf = permanentAlloc('char', Buffer.byteLength(s) + 1);
  koffi.encode(buf, 'char', s, Buffer.byteLength(s) + 1);
  return buf;
}
