// What the session needs to know about one MPI library beyond the mqs_* interface, behind one
// interface: each library's quirks live in its own file (open-mpi.ts, mpich.ts, other.ts) and
// are listed in index.ts, so supporting another library is adding a file there (as speedscope
// adds an import format), never an `if (library === ...)` in the session.
import type { MpiLibrary, OpStatus, StatusCorrection } from '@mqd/model';
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
  /** Reads `into.length` bytes at `addr` into `into` (no allocation); false when unreadable. */
  readInto(addr: bigint, into: Uint8Array): boolean;
  u64(addr: bigint): bigint | null;
  i32(addr: bigint): number | null;
  /** Offset of `field` in the target's type `type` (-1: no such type or field). */
  offsetOf(type: string, field: string): number;
}

/**
 * A RankMemory over `image` and a byte reader (little-endian: x86_64 targets only); `readInto`,
 * when given, reads without allocating (else through `read`).
 */
export function rankMemory(
  image: Pick<ProcessImage, 'findSymbol' | 'findType'>,
  read: ReadBytes,
  readInto?: (addr: bigint, into: Uint8Array) => boolean,
): RankMemory {
  return {
    image,
    bytes: read,
    readInto:
      readInto ??
      ((addr, into) => {
        const b = read(addr, into.length);
        if (b) into.set(b);
        return b !== null;
      }),
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

/**
 * What a library's own state says of an operation whose DLL status it contradicts: the status,
 * and the operation's desired fields as the request holds them.
 */
export interface CorrectedStatus {
  readonly reason: StatusCorrection;
  readonly status: OpStatus;
  /** The peer's rank in the operation's communicator; null = any source. */
  readonly peer: number | null;
  /** null = any tag. */
  readonly tag: number | null;
  /** In the snapshot's length unit; null when the request's datatype could not be read. */
  readonly length: number | null;
}

/**
 * Checks, in the stop, one operation the DLL reported complete: given line 0 of the extra text
 * the DLL wrote for it (where a library's DLL names the request), the correction, or null when
 * the DLL's status stands (or the library's state cannot be read).
 */
export type CompletedCheck = (firstLine: string) => CorrectedStatus | null;

/** The user's words for each correction (RankSnapshot.statusCorrections[].message), by library. */
export type CorrectionNotes = Readonly<Partial<Record<StatusCorrection, string>>>;

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
   * What MPI_Comm_c2f returns for each communicator id the DLL gave; ids with no
   * readable handle map to null. Best effort, read in the stop.
   */
  fortranHandles(mem: RankMemory, ids: readonly string[]): ReadonlyMap<string, number | null>;
  /**
   * For a library whose DLL calls some operations complete that are not: a check of each such
   * operation against the library's own state, made once per stop (it may cache what all
   * requests share); null when the types it needs are missing. Absent: the DLL is trusted.
   */
  completedCheck?(mem: RankMemory): CompletedCheck | null;
  /** What each correction this library makes means, for the rank's note. */
  readonly correctionNotes?: CorrectionNotes;
}
