// The MPI libraries the session knows, in the order their DLLs are recognised. Adding a library
// is adding its file (library.ts's LibraryQuirks) and a line here.
import { basename } from 'node:path';
import type { MpiLibrary } from '@mqd/model';
import type { LibraryQuirks } from './library.js';
import { mpich } from './mpich.js';
import { openMpi } from './open-mpi.js';
import { otherLibrary } from './other.js';

/** MPICH first: its DLL's version string may also mention other names; the fallback last. */
const LIBRARIES: readonly LibraryQuirks[] = [mpich, openMpi, otherLibrary];

/**
 * Which library a message-queue DLL belongs to, from its file name and version string (Open MPI:
 * libompi_dbg_msgq.so, "Open MPI message queue support..."; MPICH: libtvmpich.so, "MPICH
 * message queue support...").
 */
export function quirksOfDll(dllPath: string, version = ''): LibraryQuirks {
  const text = `${basename(dllPath)} ${version}`;
  return LIBRARIES.find((l) => l.claims(text)) ?? otherLibrary;
}

export function libraryOfDll(dllPath: string, version = ''): MpiLibrary {
  return quirksOfDll(dllPath, version).library;
}

/**
 * The queue a DLL walks newest first when it asks for this symbol (any library's list: a DLL
 * is not trusted to be the library its name says), or undefined.
 */
export function newestFirstQueue(symbol: string): 'sends' | 'receives' | 'unexpected' | undefined {
  for (const l of LIBRARIES) {
    const q = l.newestFirstLists?.get(symbol);
    if (q !== undefined) return q;
  }
  return undefined;
}
