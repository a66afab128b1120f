// MPIR_PROCDESC, the entry of the starter's process table (MPIR process acquisition interface,
// MPI Forum "MPIR Process Acquisition Interface" 1.0):
//   struct MPIR_PROCDESC { char *host_name; char *executable_name; int pid; };
// Open MPI 4.1 defines only the struct tag (orte/orted/orted-mpir/orted_mpir.h); hydra also
// typedefs it. Offsets come from DWARF when the starter has it; otherwise the LP64 layout below
// (hydra's debugger.c is not forced to -g, so a build without it is normal).
import type { ProcessImage } from '@mqd/core';

export interface ProcdescLayout {
  /** Bytes between entries. */
  readonly stride: number;
  readonly hostName: number;
  readonly executableName: number;
  readonly pid: number;
  /** Where the layout came from: the starter's DWARF, or the documented LP64 layout. */
  readonly source: 'dwarf' | 'lp64';
}

/** The documented layout on LP64 (x86_64, aarch64): two pointers, an int, padded to 24 bytes. */
export const LP64_PROCDESC: ProcdescLayout = {
  stride: 24,
  hostName: 0,
  executableName: 8,
  pid: 16,
  source: 'lp64',
};

/** The layout from the starter's debug info, or LP64 when it has none (or an odd one). */
export function procdescLayout(image: ProcessImage): ProcdescLayout {
  // The type is declared next to MPIR_Breakpoint (orted_mpir_breakpoint.c, hydra's debugger.c):
  // point the type search at that unit and module instead of indexing every unit of every file.
  const bp = image.hintFunction('MPIR_Breakpoint');
  if (bp !== null) image.preferModuleOf(bp);
  const t = image.findType('MPIR_PROCDESC');
  if (!t) return LP64_PROCDESC;
  const stride = t.file.sizeOf(t);
  const hostName = t.file.fieldOffset(t, 'host_name');
  const executableName = t.file.fieldOffset(t, 'executable_name');
  const pid = t.file.fieldOffset(t, 'pid');
  // Pointers are read as 8 bytes and the pid as 4: a layout that does not fit is not one we can read.
  const fits = (off: number, len: number) => off >= 0 && off + len <= stride;
  if (stride <= 0 || !fits(hostName, 8) || !fits(executableName, 8) || !fits(pid, 4)) return LP64_PROCDESC;
  return { stride, hostName, executableName, pid, source: 'dwarf' };
}

/** One table entry as it is in the starter's memory: the strings are still pointers there. */
export interface RawProcdesc {
  readonly hostNamePtr: bigint;
  readonly executableNamePtr: bigint;
  /** As stored (a C int): may be 0 or negative in a stale or half-filled table. */
  readonly pid: number;
}

/** Decodes `count` entries from the bytes of the table (little-endian, as on x86_64 and aarch64). */
export function decodeProcdescs(bytes: Uint8Array, count: number, layout: ProcdescLayout): RawProcdesc[] {
  if (bytes.length < count * layout.stride) {
    throw new RangeError(
      `${count} entries of ${layout.stride} bytes need ${count * layout.stride} bytes, got ${bytes.length}`,
    );
  }
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: RawProcdesc[] = [];
  for (let i = 0; i < count; i++) {
    const base = i * layout.stride;
    out.push({
      hostNamePtr: dv.getBigUint64(base + layout.hostName, true),
      executableNamePtr: dv.getBigUint64(base + layout.executableName, true),
      pid: dv.getInt32(base + layout.pid, true),
    });
  }
  return out;
}

/** Largest table we believe: a size beyond it is garbage (a stale or unrelated symbol), not a job. */
export const MAX_PROCTABLE_SIZE = 1 << 22;

/** Why a decoded table cannot describe live processes, or null when it looks sane. */
export function staleEntryReason(e: RawProcdesc, index: number): string | null {
  if (!Number.isInteger(e.pid) || e.pid < 1 || e.pid > 0x3fffffff) return `entry ${index} has pid ${e.pid}`;
  if (e.hostNamePtr === 0n) return `entry ${index} has no host name`;
  return null;
}
