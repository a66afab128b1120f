// Pure decoding of what a DLL wrote into the interface's records (mqs_communicator,
// mqs_pending_operation) into the model's communicators and operations. No koffi, no target:
// the walk (session.ts) copies the raw records while the rank is stopped, and these run after
// it is resumed. Layouts and status values come from mqs-spec.ts.
import { type Communicator, isWorld, type Operation, QUEUE_KINDS } from '@mqd/model';
import { COMMUNICATOR, mqs_status, PENDING_OPERATION } from './mqs-spec.js';

/** Decodes a target int the DLL widened into 8 bytes: negative or unknown -> null. */
export function decodeRank(v: DataView, off: number, commSize: number): number | null {
  const lo = v.getInt32(off, true);
  const hi = v.getInt32(off + 4, true);
  if (hi !== 0 && hi !== -1) return null;
  if (lo < 0) return null;
  // MPICH reads a receive's source as 2 bytes: ANY_SOURCE (-2) shows as 65534.
  if ((lo === 0xfffe || lo === 0xffff) && commSize < 0xfffe) return null;
  return lo;
}

/** A length field: negative, or a widened int -1 (0x00000000ffffffff), means unknown. */
export function decodeLength(v: DataView, off: number): number | null {
  const big = v.getBigInt64(off, true);
  if (big < 0n) return null;
  if (big === 0xffffffffn) return null;
  return Number(big);
}

/** A fixed-size C char array: the text up to the first NUL (or all of it). */
export function cString(bytes: Uint8Array): string {
  const z = bytes.indexOf(0);
  return Buffer.from(z >= 0 ? bytes.subarray(0, z) : bytes).toString('utf8');
}

export function decodeStatus(raw: number): Operation['status'] {
  switch (raw) {
    case mqs_status.complete:
      return 'complete';
    case mqs_status.matched:
      return 'matched';
    default:
      // mqs_status.pending, and anything a DLL invents: nothing has matched that we know of.
      return 'pending';
  }
}

/** The text of a C char array of `len` bytes at `from`: up to the first NUL (or all of it). */
function cStringAt(bytes: Buffer, from: number, len: number): string {
  if (bytes[from] === 0) return '';
  const z = bytes.indexOf(0, from);
  return bytes.toString('utf8', from, z >= 0 && z < from + len ? z : from + len);
}

/** One mqs_pending_operation record (PENDING_OPERATION.size bytes at `at` in `bytes`). */
export function decodeOperation(bytes: Uint8Array, at: number, commSize: number): Operation {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return decodeAt(buf, new DataView(buf.buffer, buf.byteOffset, buf.byteLength), at, commSize);
}

function decodeAt(buf: Buffer, v: DataView, at: number, commSize: number): Operation {
  const P = PENDING_OPERATION;
  const status = decodeStatus(v.getInt32(at + P.status, true));
  const tagWild = v.getInt32(at + P.tag_wild, true) !== 0;
  const rawTag = v.getInt32(at + P.desired_tag, true);
  // The lines as the DLL wrote them (Open MPI's [0] what, [1] data, [2] type; MPICH clears [1]):
  // an empty line between two others stays, so each keeps its place; trailing empty ones go.
  const extraText: string[] = [];
  let lastLine = 0;
  for (let i = 0; i < P.extraLines; i++) {
    const s = cStringAt(buf, at + P.extra_text + i * P.extraLineLen, P.extraLineLen);
    extraText.push(s);
    if (s.length > 0) lastLine = i + 1;
  }
  extraText.length = lastLine;
  const length = decodeLength(v, at + P.desired_length);
  const op: Operation = {
    status,
    peer: {
      local: decodeRank(v, at + P.desired_local_rank, commSize),
      global: decodeRank(v, at + P.desired_global_rank, 1 << 30),
    },
    // MPI_ANY_TAG is -1 in both libraries; MPICH does not set tag_wild.
    tag: tagWild || rawTag === -1 ? null : rawTag,
    length: length ?? 0,
    actual: null,
    extraText,
    buffer: `0x${v.getBigUint64(at + P.buffer, true).toString(16)}`,
    systemBuffer: v.getInt32(at + P.system_buffer, true) !== 0,
  };
  if (length === null) op.lengthUnknown = true;
  // Any queue's operation once matched (sends too: Open MPI copies desired into actual).
  if (status !== 'pending') {
    const aTag = v.getInt32(at + P.actual_tag, true);
    op.actual = {
      peer: {
        local: decodeRank(v, at + P.actual_local_rank, commSize),
        global: decodeRank(v, at + P.actual_global_rank, 1 << 30),
      },
      tag: aTag === -1 ? null : aTag,
      length: decodeLength(v, at + P.actual_length),
    };
  }
  return op;
}

/** `count` consecutive records from a walk. */
export function decodeOperations(records: Uint8Array, count: number, commSize: number): Operation[] {
  const buf = Buffer.isBuffer(records)
    ? records
    : Buffer.from(records.buffer, records.byteOffset, records.byteLength);
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const ops: Operation[] = new Array(count);
  for (let i = 0; i < count; i++) ops[i] = decodeAt(buf, v, i * PENDING_OPERATION.size, commSize);
  return ops;
}

export interface CommunicatorHeader {
  readonly id: string;
  readonly name: string;
  readonly size: number;
  readonly localRank: number;
  /** MPI_COMM_NULL (size 0, local rank 4294967294): never listed. */
  readonly isNull: boolean;
}

/**
 * Whether a communicator is MPI_COMM_WORLD, by identity: it carries the id the library gives the
 * world in this process (Open MPI: context id 0; MPICH: the address of MPIR_Comm_builtin[0];
 * other libraries: id 0) and its group, when the library shows one, is the identity. Its name
 * plays no part: MPI_Comm_set_name may rename the world, and a user may call a communicator
 * "MPI_COMM_WORLD".
 */
export function isWorldHeader(
  h: CommunicatorHeader,
  group: readonly number[] | null,
  worldId: string | null,
): boolean {
  if (worldId === null || h.id !== worldId) return false;
  return group === null || (group.length === h.size && group.every((g, i) => g === i));
}

/** One mqs_communicator record. */
export function decodeCommunicator(bytes: Uint8Array): CommunicatorHeader {
  const C = COMMUNICATOR;
  const v = new DataView(bytes.buffer, bytes.byteOffset, C.size);
  const size = Number(v.getBigInt64(C.size_, true));
  const uid = v.getBigUint64(C.unique_id, true);
  const name = cString(bytes.subarray(C.name, C.name + C.nameLen));
  return {
    id: uid < 1_000_000n ? uid.toString() : `0x${uid.toString(16)}`,
    name,
    size,
    localRank: v.getInt32(C.local_rank, true),
    isNull: size <= 0 || name === 'MPI_COMM_NULL',
  };
}

/** A group from mqs_get_comm_group: kept only when every entry is a world rank. */
export function decodeGroup(ranks: Int32Array): number[] | null {
  const arr = Array.from(ranks);
  return arr.every((x) => x >= 0) ? arr : null;
}

/**
 * Derives what the library leaves unknown. MPI_COMM_WORLD's group is the identity by definition,
 * so it is never listed (snapshot-spec.ts) and local == global there. Elsewhere the group is the
 * authority: Open MPI copies the local rank into a send's actual global rank, MPICH leaves
 * global ranks -1. Mutates and returns `comm`.
 */
export function deriveGlobalRanks(comm: Communicator): Communicator {
  const worldish = isWorld(comm);
  if (worldish) comm.group = null;
  // On an intercommunicator peers are ranks of the remote group; the DLLs' own global ranks
  // went through the local group, so they are replaced (or dropped when the group is unknown).
  const inter = comm.remoteGroup !== undefined;
  const group = inter ? comm.remoteGroup : comm.group;
  const toGlobal = worldish ? (l: number) => l : group ? (l: number) => group[l] : null;
  if (!toGlobal) {
    if (inter) {
      for (const q of QUEUE_KINDS) {
        for (const op of comm[q] ?? []) {
          op.peer.global = null;
          if (op.actual) op.actual.peer.global = null;
        }
      }
    }
    return comm;
  }
  for (const q of QUEUE_KINDS) {
    for (const op of comm[q] ?? []) {
      if (op.peer.local !== null) op.peer.global = toGlobal(op.peer.local) ?? op.peer.global;
      if (op.actual && op.actual.peer.local !== null) {
        op.actual.peer.global = toGlobal(op.actual.peer.local) ?? op.actual.peer.global;
      }
    }
  }
  return comm;
}
