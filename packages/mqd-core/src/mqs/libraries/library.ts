// What the session needs to know about one MPI library beyond the mqs_* interface, behind one
// interface: each library's quirks live in its own file (open-mpi.ts, mpich.ts, other.ts) and
// are listed in index.ts, so supporting another library is adding a file there (as speedscope
// adds an import format), never an `if (library === ...)` in the session.
import type { MpiLibrary } from '@mqd/model';
import type { ProcessImage } from '../../inferior/process-image.js';

/** Reads `len` bytes of the stopped target (or core) at `addr`; null when unreadable. */
export type ReadBytes = (addr: bigint, len: number) => Uint8Array | null;

/**
 * A stopped rank as a library's quirks read it: its symbols and types, and its memory through
 * the stop's page cache (the same reads, budget and failure accounting as the DLL's walk).
 */
export interface RankMemory {
  readonly image: Pick<ProcessImage, 'findSymbol' | 'findType'>;
  bytes: ReadBytes;
  u64(addr: bigint): bigint | null;
  i32(addr: bigint): number | null;
  /** Offset of `field` in the target's type `type` (-1: no such type or field). */
  offsetOf(type: string, field: string): number;
}

/** A RankMemory over `image` and a byte reader (little-endian: x86_64 targets only). */
export function rankMemory(
  image: Pick<ProcessImage, 'findSymbol' | 'findType'>,
  read: ReadBytes,
): RankMemory {
  return {
    image,
    bytes: read,
    u64: (addr) => {
      const b = read(addr, 8);
      return b ? new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0, true) : null;
    },
    i32: (addr) => {
      const b = read(addr, 4);
      return b ? new DataView(b.buffer, b.byteOffset, 4).getInt32(0, true) : null;
    },
    offsetOf: (type, field) => {
      const ty = image.findType(type);
      return ty ? ty.file.fieldOffset(ty, field) : -1;
    },
  };
}

/** One MPI library's quirks: what its DLL says, and what only its own structures can tell. */
export interface LibraryQuirks {
  readonly library: MpiLibrary;
  /** The library's name in messages ("Open MPI's DLL cannot show ..."). */
  readonly displayName: string;
  /** Whether a DLL with this file name and version string (`basename version`) is this library's. */
  claims(dllText: string): boolean;
  /**
   * Symbols of lists the library keeps newest first: a DLL that asks for one (mqs_find_symbol)
   * walks that queue newest first, and the session reverses it into matching order.
   */
  readonly newestFirstLists?: ReadonlyMap<string, 'sends' | 'receives' | 'unexpected'>;
  /**
   * The id the library gives MPI_COMM_WORLD in this process, as the DLL lists communicators;
   * null when it cannot be known.
   */
  worldId(image: Pick<ProcessImage, 'findSymbol'>): string | null;
  /**
   * Whether the communicator with this DLL id is an intercommunicator, read from the library's
   * own structures (the mqs_* interface cannot say): undefined for an intracommunicator (or
   * unknown types), else the world ranks of its remote group (null when they cannot be read).
   * May throw on a corrupt target; the session keeps the reason.
   */
  remoteGroup(mem: RankMemory, id: string): number[] | null | undefined;
  /**
   * The DLL's id of the communicator an MPI call's `MPI_Comm` argument names (the handle as the
   * call's frame holds it); null when it cannot be read.
   */
  commIdOfHandle(mem: RankMemory, handle: bigint): string | null;
  /**
   * What MPI_Comm_c2f returns for each communicator id the DLL gave (issue 14); ids with no
   * readable handle map to null. Best effort, read in the stop.
   */
  fortranHandles(mem: RankMemory, ids: readonly string[]): ReadonlyMap<string, number | null>;
}
