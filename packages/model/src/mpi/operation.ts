// "The same operation" across reads of one rank: the one definition that the progress verdict
// (analysis/progress.ts), the history walk under the timeline (analysis/history.ts) and the
// server's "looks hung" digest (apps/server/src/fanout/fanout.ts) share, so they cannot disagree on
// whether a job moved.
//
// An operation is identified by what the library fixes when it is posted and keeps while it
// waits: the rank, the communicator, the queue, the peer (local and world), the tag, the
// length, the user buffer, whether it went through a system buffer (MPI_Bsend) and, when Open
// MPI prints it, the request's address (a re-posted receive with the same arguments is a new
// request). Its progress is what changes while it is the same operation: its status (pending ->
// matched -> complete) and the actual match a receive learns (`actual`). An operation whose
// progress changed is the same operation, changed: it moved. Left out of both: the other lines
// of extra text (free text a library may fill with counters), and `lengthUnknown`/`lengthUnit`
// (facts about how `length` reads, fixed with it).
//
// The communicator is its id in the rank's process (Communicator.id): reads of one process see
// the same id while the communicator lives. analysis/comm.ts's commKey is for matching across
// processes, and hashes a group per rank.
import type { Operation, QueueKind } from '../snapshot-spec.js';

const SEP = '\u0001';

const REQUEST_TEXT = /^(?:Send|Receive):\s*(0x[0-9a-fA-F]+)/;

/** Open MPI names the request in extra text line 0 ("Send: 0x..."); null for other libraries. */
export function requestAddress(op: Operation): string | null {
  const first = op.extraText[0];
  if (first === undefined) return null;
  const m = REQUEST_TEXT.exec(first);
  return m?.[1]?.toLowerCase() ?? null;
}

/** The operation's own identifying fields, without where it is (see opIdentity). */
export function opIdentityFields(op: Operation): string {
  const p = op.peer;
  return `${p.local}${SEP}${p.global}${SEP}${op.tag}${SEP}${op.length}${SEP}${op.buffer}${SEP}${op.systemBuffer ? 's' : ''}${SEP}${requestAddress(op) ?? ''}`;
}

/** Identity and progress: equal for two reads of an operation that did not move. */
export function opStateFields(op: Operation): string {
  return `${opIdentityFields(op)}${SEP}${progressFields(op)}`;
}

/** The identity of an operation across reads of its rank: equal keys are the same operation. */
export function opIdentity(rank: number, commId: string, queue: QueueKind, op: Operation): string {
  return `${rank}${SEP}${commId}${SEP}${queue}${SEP}${opIdentityFields(op)}`;
}

/** Identity and progress: equal keys are the same operation, unchanged. */
export function opStateKey(rank: number, commId: string, queue: QueueKind, op: Operation): string {
  return `${rank}${SEP}${commId}${SEP}${queue}${SEP}${opStateFields(op)}`;
}

/** The keys pairOperations compares: the identity and the progress, apart (no long concatenation per operation). */
export function opKeys(rank: number, commId: string, queue: QueueKind, op: Operation): KeyedOp {
  return { identity: opIdentity(rank, commId, queue, op), progress: progressFields(op) };
}

function progressFields(op: Operation): string {
  const a = op.actual;
  const actual = a === null ? '' : `${a.peer.local},${a.peer.global},${a.tag},${a.length}`;
  return `${op.status}${SEP}${actual}`;
}

/** What became of an operation between two reads of its rank. */
export type OpChange = 'unchanged' | 'changed' | 'appeared' | 'disappeared';

/** An operation's keys (opKeys): its identity, and its progress (status, actual match). */
export interface KeyedOp {
  readonly identity: string;
  readonly progress: string;
}

const stateOf = (o: KeyedOp): string => `${o.identity}${SEP}${o.progress}`;

export interface OpPairing {
  /** Per later operation: the index of the earlier one it is, -1 when it appeared. */
  readonly earlier: Int32Array;
  /** Per later operation: unchanged, changed or appeared. */
  readonly change: readonly Exclude<OpChange, 'disappeared'>[];
  /** Earlier operations no later one is: they disappeared. */
  readonly gone: readonly number[];
}

/**
 * Pairs one rank's operations at two reads. Equal operations are a multiset: two identical
 * receives both persist only if both were there before. Unchanged pairs are made first, so a
 * changed copy never takes the partner of an unchanged one.
 */
export function pairOperations(before: readonly KeyedOp[], after: readonly KeyedOp[]): OpPairing {
  const earlier = new Int32Array(after.length).fill(-1);
  // The usual case of a hung rank: the same operations in the same order, paired without maps.
  if (before.length === after.length) {
    let same = true;
    for (let i = 0; same && i < after.length; i++) {
      const x = before[i];
      const y = after[i];
      same = x !== undefined && y !== undefined && x.progress === y.progress && x.identity === y.identity;
    }
    if (same) {
      for (let i = 0; i < after.length; i++) earlier[i] = i;
      return { earlier, change: new Array(after.length).fill('unchanged'), gone: [] };
    }
  }
  const used = new Uint8Array(before.length);
  const change: Exclude<OpChange, 'disappeared'>[] = new Array(after.length).fill('appeared');
  if (before.length * after.length <= SMALL) {
    // A few operations (most ranks): scanning costs less than building maps.
    pairScan(before, after, used, earlier, change, true);
    pairScan(before, after, used, earlier, change, false);
    return { earlier, change, gone: unused(used) };
  }
  // Per key: earlier operations in order, and a cursor past those already taken.
  type Bucket = { readonly items: number[]; next: number };
  const byState = new Map<string, Bucket>();
  const byIdentity = new Map<string, Bucket>();
  const put = (m: Map<string, Bucket>, k: string, i: number) => {
    const b = m.get(k);
    if (b) b.items.push(i);
    else m.set(k, { items: [i], next: 0 });
  };
  before.forEach((o, i) => {
    put(byState, stateOf(o), i);
    put(byIdentity, o.identity, i);
  });
  const take = (b: Bucket | undefined): number => {
    if (b === undefined) return -1;
    while (b.next < b.items.length) {
      const i = b.items[b.next++] ?? -1;
      if (i >= 0 && used[i] === 0) {
        used[i] = 1;
        return i;
      }
    }
    return -1;
  };
  after.forEach((o, j) => {
    const i = take(byState.get(stateOf(o)));
    if (i < 0) return;
    earlier[j] = i;
    change[j] = 'unchanged';
  });
  after.forEach((o, j) => {
    if (earlier[j] !== -1) return;
    const i = take(byIdentity.get(o.identity));
    if (i < 0) return;
    earlier[j] = i;
    change[j] = 'changed';
  });
  return { earlier, change, gone: unused(used) };
}

/** Below this many before × after pairs, pairOperations scans instead of building maps. */
const SMALL = 256;

/** One pass of pairOperations without maps: each unpaired later operation takes the first free earlier one with an equal key. */
function pairScan(
  before: readonly KeyedOp[],
  after: readonly KeyedOp[],
  used: Uint8Array,
  earlier: Int32Array,
  change: Exclude<OpChange, 'disappeared'>[],
  unchangedOnly: boolean,
): void {
  for (let j = 0; j < after.length; j++) {
    const y = after[j];
    if (earlier[j] !== -1 || y === undefined) continue;
    for (let i = 0; i < before.length; i++) {
      const x = before[i];
      if (used[i] !== 0 || x === undefined || x.identity !== y.identity) continue;
      if (unchangedOnly && x.progress !== y.progress) continue;
      used[i] = 1;
      earlier[j] = i;
      change[j] = unchangedOnly ? 'unchanged' : 'changed';
      break;
    }
  }
}

function unused(used: Uint8Array): number[] {
  const gone: number[] = [];
  for (let i = 0; i < used.length; i++) if (used[i] === 0) gone.push(i);
  return gone;
}
