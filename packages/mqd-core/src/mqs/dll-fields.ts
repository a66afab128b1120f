// What a message-queue DLL asks of the library's types that the library does not have.
//
// A DLL finds its library's structures by name at run time (mqs_find_type, mqs_field_offset) and
// trusts the answers. When the library's structs change and the DLL is not updated with them, a
// field lookup answers -1 and the DLL, which rarely checks, reads at "offset - 1 + base": every
// entry it reports is then wrong in a plausible-looking way (tag 65536, peer 0, length 0) rather
// than missing. MPICH 4.0.x with the ch4 device ships such a DLL: dll_mpich.c asks MPIDIG_req_t
// for `rank`, `tag` and `context_id`, which ch4 keeps in the `u.recv` union member (source,
// tag, context_id) since the active-message request was reorganised (docs/mpi-facts.md, "MPICH
// ch4"). Two things follow:
// - every field a DLL asks for and does not get is recorded per session and shown with each rank
//   it reads (`RankSnapshot.dll.missingFields`), so a user sees why the entries may be wrong;
// - for the renames known here, the lookup is answered with the field's new place (recorded too,
//   `dll.renamedFields`), so the DLL reads what it meant to. Only types and fields named below are
//   redirected, and only when the old name is absent from the library's own debug information.

/** type name → field the DLL asks for → its path in the library (dotted: nested members). */
const RENAMED_FIELDS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  // MPICH 4.0.x ch4 (src/mpid/ch4/include/mpidpre.h): the active-message request sits in the
  // device request's `ch4` union, and the receive side's matching fields in its `u.recv`.
  MPIDI_Devreq_t: { am: 'ch4.am' },
  MPIDIG_req_t: { rank: 'u.recv.source', tag: 'u.recv.tag', context_id: 'u.recv.context_id' },
};

/**
 * The unit of the unexpected-message entries this DLL reads, from the types it found in the
 * library (mqs_find_type answers), when it is known to differ from the library's usual one:
 * a DLL that reads requests through `MPIDIG_req_t` (dll_mpich.c built with
 * HAVE_CH4_DEBUGGER_SUPPORT, on MPICH's ch4 device) reads an unexpected message's `count` from
 * the active-message request, which holds the size of the data that arrived, in bytes
 * (datatype MPI_BYTE), while its posted receives and sends count elements. Undefined when the
 * DLL reads them in the library's unit (ch3, Open MPI).
 */
export function unexpectedLengthUnit(typesFound: Iterable<string>): 'bytes' | undefined {
  for (const t of typesFound) if (t === 'MPIDIG_req_t') return 'bytes';
  return undefined;
}

/** Where a field the DLL asked for can be found instead, or undefined. */
export function renamedField(typeName: string, field: string): string | undefined {
  return RENAMED_FIELDS[typeName]?.[field];
}

/** The fields one session's DLL asked for that the library lacks, and how each was answered. */
export class FieldGaps {
  private readonly missing = new Set<string>();
  private readonly renamed = new Map<string, string>();

  /**
   * Answers a failed lookup of `field` in `typeName`: the offset of its known new place (via
   * `offsetOf`, which answers -1 when that is absent too) or -1; either way it is recorded.
   */
  answer(typeName: string, field: string, offsetOf: (path: string) => number): number {
    const path = renamedField(typeName, field);
    const off = path === undefined ? -1 : offsetOf(path);
    if (off >= 0 && path !== undefined) this.renamed.set(`${typeName}.${field}`, `${typeName}.${path}`);
    else this.missing.add(`${typeName}.${field}`);
    return off;
  }

  /** What a rank's `dll` carries: absent fields when none were missing or renamed. */
  info(): { missingFields?: string[]; renamedFields?: string[] } {
    const out: { missingFields?: string[]; renamedFields?: string[] } = {};
    if (this.missing.size > 0) out.missingFields = [...this.missing].sort().slice(0, 64);
    if (this.renamed.size > 0) {
      out.renamedFields = [...this.renamed]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .slice(0, 64)
        .map(([from, to]) => `${from} -> ${to}`);
    }
    return out;
  }
}
