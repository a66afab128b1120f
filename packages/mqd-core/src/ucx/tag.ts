// Open MPI's 64-bit UCX tag (ompi/mca/pml/ucx/pml_ucx_request.h, the same layout in 4.1 and
// 5.0): bits 40-63 the MPI tag (24 bits, so a negative internal tag keeps bit 63 set), bits
// 20-39 the sender's rank in the communicator (20 bits), bits 0-19 the communicator: its context
// id in 4.x (c_contextid), its index in 5.x (c_index), which is in both versions the id Open
// MPI's message-queue DLL lists the communicator by. A posted receive's mask leaves the source
// bits out for MPI_ANY_SOURCE and the tag bits (but not bit 63) out for MPI_ANY_TAG.

/** Bits of the source rank: ranks of 2^20 and more do not fit and are cut in the tag. */
export const UCX_RANK_BITS = 20;
/** The most ranks a communicator may have for every sender to be told apart in the tag. */
export const UCX_MAX_RANKS = 1 << UCX_RANK_BITS;
const CONTEXT_MASK = 0xfffffn;
const SOURCE_MASK = 0xfffffn << 20n;
const TAG_MASK = 0x7fffffn << 40n;

/** What a UCX tag (and, for a posted receive, its mask) says in MPI terms. */
export interface MpiTagFields {
  /** The communicator's id as the DLL lists it (decimal). */
  readonly comm: string;
  /** The sender's rank in the communicator; null = MPI_ANY_SOURCE. */
  readonly source: number | null;
  /** null = MPI_ANY_TAG. */
  readonly tag: number | null;
}

/** The 24-bit MPI tag field, sign-extended (Open MPI's collectives use negative tags). */
function mpiTagOf(ucxTag: bigint): number {
  const raw = Number((ucxTag >> 40n) & 0xffffffn);
  return raw >= 0x800000 ? raw - 0x1000000 : raw;
}

/** The fields of a tag a message carries (an unexpected message: every field is its own). */
export function decodeSendTag(ucxTag: bigint): MpiTagFields {
  return {
    comm: String(Number(ucxTag & CONTEXT_MASK)),
    source: Number((ucxTag & SOURCE_MASK) >> 20n),
    tag: mpiTagOf(ucxTag),
  };
}

/** The fields of a posted receive's tag and mask: a field the mask leaves out is a wildcard. */
export function decodeRecvTag(ucxTag: bigint, mask: bigint): MpiTagFields {
  const sent = decodeSendTag(ucxTag);
  return {
    comm: sent.comm,
    source: (mask & SOURCE_MASK) === 0n ? null : sent.source,
    tag: (mask & TAG_MASK) === 0n ? null : sent.tag,
  };
}

/** The tag a send on `comm` from local rank `source` with MPI tag `tag` carries (tests, the fake worker). */
export function encodeSendTag(comm: number, source: number, tag: number): bigint {
  const t = BigInt(tag < 0 ? tag + 0x1000000 : tag) & 0xffffffn;
  return (t << 40n) | ((BigInt(source) & CONTEXT_MASK) << 20n) | (BigInt(comm) & CONTEXT_MASK);
}

/** A posted receive's tag and mask (MPI_ANY_SOURCE and MPI_ANY_TAG as null). */
export function encodeRecvTag(
  comm: number,
  source: number | null,
  tag: number | null,
): { tag: bigint; mask: bigint } {
  let mask = source === null ? 0x80000000000fffffn : 0x800000ffffffffffn;
  let t = (BigInt(source ?? 0) & CONTEXT_MASK) << 20n;
  t |= BigInt(comm) & CONTEXT_MASK;
  if (tag !== null) {
    mask |= TAG_MASK;
    t |= (BigInt(tag < 0 ? tag + 0x1000000 : tag) & 0xffffffn) << 40n;
  }
  return { tag: t, mask };
}
