// Any other library (this repository's conformance library, an MPI this reader does not know):
// only what the mqs_* interface says. MPI_COMM_WORLD is id 0, no intercommunicator is known,
// and neither call arguments' communicators nor Fortran handles can be read.
import type { LibraryQuirks } from './library.js';

export const otherLibrary: LibraryQuirks = {
  library: 'unknown',
  // Sentence-initial ("This MPI library's DLL cannot show ..."), unlike LIBRARY_NAME.unknown.
  displayName: 'This MPI library',
  claims: () => true,
  worldId: () => '0',
  remoteGroup: () => undefined,
  commIdOfHandle: () => null,
  fortranHandles: () => new Map(),
};
