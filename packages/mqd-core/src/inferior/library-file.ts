// A shared library a target names (its MQD DLL in MPIR_dll_name, its runtime's libompd), opened
// once, safely, before anything loads it: open() never blocks (O_NONBLOCK: a FIFO's open would
// wait for a writer for ever, and a new reader after each timeout would wait again), only a
// regular file of bounded size is kept, its ELF header is read from that descriptor, and the
// loader is handed a /proc/self/fd name of the same open file, so the path is never opened twice
// and a file swapped in after the checks is never the one loaded.
import { closeSync, constants, fstatSync, openSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { err, type MqdError, ok, type Result } from '@mqd/model';
import { type ElfInfo, readElfInfoAt } from './elf.js';
import { fileKind, openFailure } from './files-at.js';

/**
 * The largest library loaded: message-queue DLLs and libompd are well under a megabyte (Open
 * MPI's DLL ~80 KB, LLVM's libompd ~450 KB, with debug info); a larger "library" is refused
 * before a byte of it is read or mapped.
 */
export const MAX_LIBRARY_BYTES = 256 * 1024 * 1024;

/** Node opens every file close-on-exec already (libuv); said here too, so no child ever inherits one. */
const O_CLOEXEC = 0o2000000;
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY | O_CLOEXEC;

/** A library held open and checked, for dlopen and koffi.load through `loadPath`. */
export interface HeldLibrary {
  readonly path: string;
  /** The name the loader opens: the held file itself (`/proc/self/fd/N`), or its name in the held directory. */
  readonly loadPath: string;
  readonly elf: ElfInfo;
  readonly size: number;
  /**
   * Releases the descriptors; only before the library was loaded. Once loaded they stay open
   * for the life of the process: the loader knows the library by `loadPath`, and a number reused
   * by another file would make a later dlopen of that name return this library instead.
   */
  close(): void;
}

/** Why a library was refused: the words go after its path ("is a FIFO, not a regular file"). */
export interface LibraryRefusal {
  readonly why: string;
  readonly missing: boolean;
  /** Set when the file is regular but its ELF header is not one (the coded error says how). */
  readonly elf: MqdError | null;
}

/**
 * Opens `path` for loading. `via: 'file'` names the open file itself to the loader (nothing else
 * is ever opened by that name); `via: 'directory'` holds its directory and names the file in it
 * (`/proc/self/fd/D/NAME`), for a library whose RUNPATH is `$ORIGIN` (LLVM's libompd finds its
 * libomp beside itself): the loader's `$ORIGIN` is then that directory, and the file the loader
 * opens is looked up in the directory that was checked, never by the path again.
 */
export function openLibraryFile(
  path: string,
  via: 'file' | 'directory' = 'file',
): Result<HeldLibrary, LibraryRefusal> {
  const held: number[] = [];
  const closeAll = () => {
    for (const fd of held.splice(0)) closeSync(fd);
  };
  const refuse = (why: string, missing = false, elf: MqdError | null = null) => {
    closeAll();
    return err({ why, missing, elf });
  };
  let name = path;
  if (via === 'directory') {
    try {
      held.push(openSync(dirname(path), OPEN_FLAGS | constants.O_DIRECTORY));
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      return refuse(`is in a directory that ${openFailure(e)}`, code === 'ENOENT');
    }
    name = `/proc/self/fd/${held[0]}/${basename(path)}`;
  }
  let fd: number;
  try {
    fd = openSync(name, OPEN_FLAGS);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return refuse(openFailure(e), code === 'ENOENT');
  }
  held.push(fd);
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return refuse(`is ${fileKind(st)}, not a regular file`);
    if (st.size > MAX_LIBRARY_BYTES)
      return refuse(`is ${st.size} bytes, larger than the ${MAX_LIBRARY_BYTES} bytes a library may have`);
    const elf = readElfInfoAt(fd, path);
    if (!elf.ok) return refuse('is not an ELF file', false, elf.error);
    return ok({
      path,
      loadPath: via === 'file' ? `/proc/self/fd/${fd}` : name,
      elf: elf.value,
      size: st.size,
      close: closeAll,
    });
  } catch (e) {
    return refuse(openFailure(e));
  }
}
