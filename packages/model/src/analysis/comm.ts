// Relating communicators and peers across processes. A communicator's `id` is only unique
// within one process (Open MPI's context id happens to agree on every rank, MPICH's id is an
// address and differs per process), so anything that pairs operations of different ranks goes
// through commKey, built from what every member sees alike: name, size and group.
import { isWorld } from '../mpi/world.js';
import type { Communicator, Operation, QueueKind } from '../snapshot-spec.js';

/** One queue entry, named so it can be found again in the snapshot it came from. */
export interface OpRef {
  /** World rank of the process whose queue holds the operation. */
  readonly rank: number;
  readonly commKey: string;
  /** The communicator's name as that rank reports it ("" when unnamed). */
  readonly commName: string;
  readonly queue: QueueKind;
  /** Index in that queue (matching order). */
  readonly index: number;
}

/** Groups at most this long go into the key verbatim; longer ones as a 64-bit hash. */
const VERBATIM_GROUP = 16;

/**
 * A key that is the same on every member of one communicator: name, size and group.
 * MPI_COMM_WORLD's group is the identity by definition, so its key ignores the group (whether
 * the library shows it or not) and costs nothing per rank. A null group makes the key
 * ambiguous between same-named, same-sized communicators (MPICH's split communicators); the
 * analysis then treats them as one, which can only make it find fewer deadlocks, never more.
 * Long groups are hashed (two independent 32-bit mixes): two different groups with the same
 * name, size and both hashes are treated as one communicator (odds about 2^-64 per pair).
 */
export function commKey(c: Communicator): string {
  if (isWorld(c)) return `MPI_COMM_WORLD#${c.size}#world`;
  const head = `${c.name}#${c.size}`;
  if (c.group === null) return `${head}#?`;
  if (c.group.length <= VERBATIM_GROUP) return `${head}#${c.group.join(',')}`;
  return `${head}#h${groupHash(c.group)}`;
}

function groupHash(group: readonly number[]): string {
  let a = 0x811c9dc5;
  let b = 0x9e3779b9;
  for (let i = 0; i < group.length; i++) {
    const v = group[i] ?? 0;
    a = Math.imul(a ^ v, 0x01000193);
    b = Math.imul(b ^ (v + i), 0x85ebca6b);
    b ^= b >>> 13;
  }
  return `${(a >>> 0).toString(36)}.${(b >>> 0).toString(36)}`;
}

/**
 * Unnamed communicators whose operations all carry negative tags are the library's own
 * (MPICH's collective copies); with a negative tag itself, an operation is collective traffic,
 * which the p2p wait-for graph must not treat as a user send or receive.
 */
export function isInternalComm(c: Communicator): boolean {
  if (c.name !== '') return false;
  const s = tagSigns(c.sends) | tagSigns(c.receives) | tagSigns(c.unexpected);
  return s === NEGATIVE;
}

const NEGATIVE = 1;
const NON_NEGATIVE = 2;

/** Which signs the concrete tags of a queue have (bit mask); no allocation, it runs per communicator. */
function tagSigns(q: readonly Operation[] | null): number {
  let s = 0;
  if (q === null) return s;
  for (let i = 0; i < q.length; i++) {
    const tag = q[i]?.tag ?? null;
    if (tag !== null) s |= tag < 0 ? NEGATIVE : NON_NEGATIVE;
  }
  return s;
}

export function isCollectiveInternal(op: Operation, internalComm: boolean): boolean {
  return internalComm || (op.tag !== null && op.tag < 0);
}
