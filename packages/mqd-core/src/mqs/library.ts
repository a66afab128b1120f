// Which MPI library a message-queue DLL belongs to, from its file name and version string
// (Open MPI: libompi_dbg_msgq.so, "Open MPI message queue support..."; MPICH: libtvmpich.so,
// "MPICH message queue support...").
import { basename } from 'node:path';
import type { MpiLibrary } from '@mqd/model';

export function libraryOfDll(dllPath: string, version = ''): MpiLibrary {
  const text = `${basename(dllPath)} ${version}`;
  if (/tvmpich|\bMPICH\b/i.test(text)) return 'mpich';
  if (/ompi|Open MPI/i.test(text)) return 'openmpi';
  return 'unknown';
}
