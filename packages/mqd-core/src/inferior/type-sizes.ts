// The target's type sizes and byte order, from its executable's ELF header, for the DLL's
// mqs_get_type_sizes callback. The DLLs read every int and pointer of the target through these
// sizes (Open MPI then steps through MPIR_debug_typedefs_sizeof with int_size), and our
// target_to_host is a plain copy, so only a target whose ABI is this host's can be answered:
// an ILP32 or big-endian target gets a coded error here, never LP64 numbers that would make the
// DLL read garbage.
import { closeSync, constants, openSync, readSync } from 'node:fs';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import { hostMachine, readElfInfo } from './elf.js';

/** mqs_target_type_sizes' five standard fields, in order (mqs-spec.ts TYPE_SIZES_FIELDS). */
export type TypeSizes = readonly [
  short: number,
  int: number,
  long: number,
  longLong: number,
  pointer: number,
];

/** LP64 (x86_64, AArch64 Linux): the only data model this debugger's callbacks serve. */
export const LP64_SIZES: TypeSizes = [2, 4, 8, 8, 8];

/** The sizes for the target whose executable is `exe`, or why it cannot be read. */
export function targetTypeSizes(exe: string): Result<TypeSizes, MqdError> {
  // e_ident first: a big-endian header would be misread by the full parse.
  const ident = Buffer.alloc(6);
  try {
    // O_NONBLOCK: the owner may put a FIFO where the executable was; its open must not wait.
    const fd = openSync(exe, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      readSync(fd, ident, 0, 6, 0);
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    return err(
      mqdError('MQD_E_DLL_WRONG_ARCH', `cannot read the target's ELF header ${exe}: ${(e as Error).message}`),
    );
  }
  if (ident.readUInt32BE(0) === 0x7f454c46 && (ident[4] !== 2 || ident[5] !== 1)) {
    const bits = ident[4] === 1 ? 32 : ident[4] === 2 ? 64 : 0;
    const order = ident[5] === 2 ? 'big' : ident[5] === 1 ? 'little' : 'unknown';
    return err(wrongArch(exe, `${bits}-bit ${order}-endian`));
  }
  const elf = readElfInfo(exe);
  if (!elf.ok) {
    return err(
      mqdError('MQD_E_DLL_WRONG_ARCH', `cannot read the target's ELF header ${exe}: ${elf.error.message}`),
    );
  }
  const { class: cls, littleEndian, machine } = elf.value;
  if (cls !== 64 || !littleEndian || machine !== hostMachine()) {
    return err(
      wrongArch(exe, `${cls}-bit ${littleEndian ? 'little' : 'big'}-endian (ELF machine ${machine})`),
    );
  }
  return ok(LP64_SIZES);
}

function wrongArch(exe: string, what: string): MqdError {
  return mqdError(
    'MQD_E_DLL_WRONG_ARCH',
    `the target ${exe} is ${what}; this debugger reads only 64-bit little-endian targets of its own machine (ELF machine ${hostMachine()}), so its type sizes and byte order cannot be given to the DLL: read this job with a debugger built for its architecture`,
  );
}
