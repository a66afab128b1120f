// The compact wire of one rank's operations, from a reader (reader-main.ts) to its supervisor
// (client.ts) over Node's IPC channel. The one spec of that format: both ends use it.
//
// Why: a deep rank (40,000 operations) sent as a RankSnapshot object graph is ~6 MB and
// ~160,000 objects through the V8 serializer; serialising it in the reader and deserialising it
// in the agent was more than half of a warm deep snapshot (packages/mqd-core/bench/deep-queues.bench.ts). Here the operations travel as columns (typed arrays, copied as bytes),
// their extra-text lines as indices into a string table, their buffers as one joined string;
// the rest of the rank (communicators without their queues, stacks, OpenMP, DLL) travels as it
// is. The agent rebuilds the very RankSnapshot the reader had, in one pass, with the same key
// order as src/mqs/decode.ts builds (so `mqd snapshot --json` prints the same text).
//
// Invariants:
// - rankFromWire(rankToWire(r)) deep-equals r for every r rankToWire accepts; rankToWire
//   returns null for a rank it cannot carry exactly (a value outside its columns' ranges), and
//   the reader then sends the rank as objects (ReaderMessage `rank`).
// - The agent treats a wire as data from the target's owner: rankFromWire checks every length
//   and index before it reads, and a malformed wire is a coded error for that rank, never a throw.
import {
  type ActualMatch,
  type Communicator,
  err,
  type MqdError,
  mqdError,
  type Operation,
  ok,
  type Peer,
  QUEUE_KINDS,
  type QueueKind,
  type RankSnapshot,
  type Result,
  STATUS_CORRECTIONS,
} from '@mqd/model';

/** A communicator with each queue replaced by its index among OpColumns' queues (null stays null). */
export type WireCommunicator = Omit<Communicator, QueueKind> & { readonly [K in QueueKind]: number | null };

/** The rank without its operations: what the reader read, queues as indices into `ops`. */
export type WireRankHead = Omit<RankSnapshot, 'communicators'> & {
  readonly communicators: readonly WireCommunicator[];
};

/**
 * Every operation of a rank, queue after queue, as columns (struct of arrays). One row per
 * operation; a value that is null in the model is 0 in its column with its flag set.
 */
export interface OpColumns {
  /** Queue q holds rows [queueStarts[q], queueStarts[q + 1]); its length is the queue count + 1. */
  readonly queueStarts: Uint32Array;
  /** Per row: the status in bits 0-1 (STATUSES), then the F_* bits. */
  readonly flags: Uint16Array;
  /** peer.local, peer.global, tag: signed 32-bit as MPI defines them. */
  readonly local: Int32Array;
  readonly global: Int32Array;
  readonly tag: Int32Array;
  /** Desired length in the snapshot's length unit (a double holds any number exactly). */
  readonly length: Float64Array;
  /** The actual fields of the rows flagged F_ACTUAL, in row order (one entry per such row). */
  readonly actualLocal: Int32Array;
  readonly actualGlobal: Int32Array;
  readonly actualTag: Int32Array;
  readonly actualLength: Float64Array;
  /** Per row: how many extra-text lines it has. */
  readonly extraCount: Uint8Array;
  /** The rows' extra-text lines in row order, as indices into `strings`. */
  readonly extraText: Uint32Array;
  /** Each distinct extra-text line once. */
  readonly strings: readonly string[];
  /** Every row's buffer (0x hex), joined by BUFFER_SEP. */
  readonly buffers: string;
}

export interface WireRank {
  readonly head: WireRankHead;
  readonly ops: OpColumns;
}

const STATUSES = ['pending', 'matched', 'complete'] as const satisfies readonly Operation['status'][];
const F_LOCAL_NULL = 1 << 2;
const F_GLOBAL_NULL = 1 << 3;
const F_TAG_NULL = 1 << 4;
const F_LENGTH_UNKNOWN = 1 << 5;
const F_ACTUAL = 1 << 6;
const F_ACTUAL_LOCAL_NULL = 1 << 7;
const F_ACTUAL_GLOBAL_NULL = 1 << 8;
const F_ACTUAL_TAG_NULL = 1 << 9;
const F_ACTUAL_LENGTH_NULL = 1 << 10;
const F_SYSTEM_BUFFER = 1 << 11;
/** lengthUnit present: 'bytes' or 'elements' (never both). */
const F_UNIT_BYTES = 1 << 12;
const F_UNIT_ELEMENTS = 1 << 13;
/** Bits 14-15: `corrected`, as 1 + its index in STATUS_CORRECTIONS (0: absent; room for 3). */
const CORRECTED_SHIFT = 14;
const CORRECTED = STATUS_CORRECTIONS.slice(0, 3);
const F_ALL = (1 << (CORRECTED_SHIFT + 2)) - 1;
/** Buffers are 0x hex (snapshot-spec.ts): a comma is never part of one. */
const BUFFER_SEP = ',';
const QUEUES = QUEUE_KINDS;

// Every field of an operation has its column: a field added to the model fails to compile here
// until the wire carries it (both ends).
const CARRIED: {
  readonly op: Record<keyof Operation, true>;
  readonly actual: Record<keyof ActualMatch, true>;
  readonly peer: Record<keyof Peer, true>;
} = {
  op: {
    status: true,
    peer: true,
    tag: true,
    length: true,
    lengthUnknown: true,
    lengthUnit: true,
    actual: true,
    extraText: true,
    buffer: true,
    systemBuffer: true,
    corrected: true,
  },
  actual: { peer: true, tag: true, length: true },
  peer: { local: true, global: true },
};
void CARRIED;

const isInt32 = (x: unknown): x is number => typeof x === 'number' && (x | 0) === x && (x !== 0 || 1 / x > 0); // -0 is not carried

/** Growable Uint32 column. */
class U32 {
  private a: Uint32Array;
  n = 0;
  constructor(initial: number) {
    this.a = new Uint32Array(Math.max(16, initial));
  }
  push(v: number): void {
    if (this.n === this.a.length) {
      const b = new Uint32Array(this.a.length * 2);
      b.set(this.a);
      this.a = b;
    }
    this.a[this.n++] = v;
  }
  done(): Uint32Array {
    return this.a.slice(0, this.n);
  }
}

/**
 * A rank for the wire, or null when one of its values does not fit the columns (then it goes
 * as objects). Never throws for a RankSnapshot of the schema.
 */
export function rankToWire(rank: RankSnapshot): WireRank | null {
  let rows = 0;
  let nQueues = 0;
  for (const c of rank.communicators) {
    for (const q of QUEUES) {
      const ops = c[q];
      if (ops !== null) {
        rows += ops.length;
        nQueues++;
      }
    }
  }
  const queueStarts = new Uint32Array(nQueues + 1);
  const flags = new Uint16Array(rows);
  const local = new Int32Array(rows);
  const global = new Int32Array(rows);
  const tag = new Int32Array(rows);
  const length = new Float64Array(rows);
  const actualLocal = new Int32Array(rows);
  const actualGlobal = new Int32Array(rows);
  const actualTag = new Int32Array(rows);
  const actualLength = new Float64Array(rows);
  const extraCount = new Uint8Array(rows);
  const extraText = new U32(rows * 2);
  const strings: string[] = [];
  const stringIndex = new Map<string, number>();
  const buffers: string[] = new Array(rows);
  let row = 0;
  let nActual = 0;
  let queue = 0;
  const communicators: WireCommunicator[] = [];
  for (const c of rank.communicators) {
    const refs: Record<QueueKind, number | null> = { sends: null, receives: null, unexpected: null };
    for (const q of QUEUES) {
      const ops = c[q];
      if (ops === null) continue;
      refs[q] = queue;
      queueStarts[queue++] = row;
      for (const op of ops) {
        const status = STATUSES.indexOf(op.status);
        if (status < 0) return null;
        let f = status;
        const p = op.peer;
        if (p.local === null) f |= F_LOCAL_NULL;
        else if (isInt32(p.local)) local[row] = p.local;
        else return null;
        if (p.global === null) f |= F_GLOBAL_NULL;
        else if (isInt32(p.global)) global[row] = p.global;
        else return null;
        if (op.tag === null) f |= F_TAG_NULL;
        else if (isInt32(op.tag)) tag[row] = op.tag;
        else return null;
        if (typeof op.length !== 'number') return null;
        length[row] = op.length;
        if (op.lengthUnknown === true) f |= F_LENGTH_UNKNOWN;
        else if (op.lengthUnknown !== undefined) return null;
        if (op.lengthUnit === 'bytes') f |= F_UNIT_BYTES;
        else if (op.lengthUnit === 'elements') f |= F_UNIT_ELEMENTS;
        else if (op.lengthUnit !== undefined) return null;
        const a = op.actual;
        if (a !== null) {
          f |= F_ACTUAL;
          if (a.peer.local === null) f |= F_ACTUAL_LOCAL_NULL;
          else if (isInt32(a.peer.local)) actualLocal[nActual] = a.peer.local;
          else return null;
          if (a.peer.global === null) f |= F_ACTUAL_GLOBAL_NULL;
          else if (isInt32(a.peer.global)) actualGlobal[nActual] = a.peer.global;
          else return null;
          if (a.tag === null) f |= F_ACTUAL_TAG_NULL;
          else if (isInt32(a.tag)) actualTag[nActual] = a.tag;
          else return null;
          if (a.length === null) f |= F_ACTUAL_LENGTH_NULL;
          else if (typeof a.length === 'number') actualLength[nActual] = a.length;
          else return null;
          nActual++;
        }
        if (op.systemBuffer === true) f |= F_SYSTEM_BUFFER;
        else if (op.systemBuffer !== false) return null;
        if (op.corrected !== undefined) {
          const k = CORRECTED.indexOf(op.corrected);
          if (k < 0) return null;
          f |= (k + 1) << CORRECTED_SHIFT;
        }
        flags[row] = f;
        const lines = op.extraText;
        if (lines.length > 255) return null;
        extraCount[row] = lines.length;
        for (const line of lines) {
          if (typeof line !== 'string') return null;
          let k = stringIndex.get(line);
          if (k === undefined) {
            k = strings.length;
            strings.push(line);
            stringIndex.set(line, k);
          }
          extraText.push(k);
        }
        if (typeof op.buffer !== 'string' || op.buffer.includes(BUFFER_SEP)) return null;
        buffers[row] = op.buffer;
        row++;
      }
    }
    // The spread keeps the communicator's key order; the queues keep their places in it.
    communicators.push({ ...c, ...refs });
  }
  queueStarts[queue] = row;
  return {
    head: { ...rank, communicators },
    ops: {
      queueStarts,
      flags,
      local,
      global,
      tag,
      length,
      actualLocal: actualLocal.slice(0, nActual),
      actualGlobal: actualGlobal.slice(0, nActual),
      actualTag: actualTag.slice(0, nActual),
      actualLength: actualLength.slice(0, nActual),
      extraCount,
      extraText: extraText.done(),
      strings,
      buffers: buffers.join(BUFFER_SEP),
    },
  };
}

const malformed = (pid: unknown, what: string): MqdError =>
  mqdError('MQD_E_INTERNAL', `the reader's answer for pid ${String(pid)} is malformed (${what})`);

/** The columns' shapes, before any is read: null when sound, else what is wrong. */
function checkColumns(o: OpColumns): string | null {
  const typed: [string, unknown, new (n: number) => ArrayBufferView][] = [
    ['queueStarts', o.queueStarts, Uint32Array],
    ['flags', o.flags, Uint16Array],
    ['local', o.local, Int32Array],
    ['global', o.global, Int32Array],
    ['tag', o.tag, Int32Array],
    ['length', o.length, Float64Array],
    ['actualLocal', o.actualLocal, Int32Array],
    ['actualGlobal', o.actualGlobal, Int32Array],
    ['actualTag', o.actualTag, Int32Array],
    ['actualLength', o.actualLength, Float64Array],
    ['extraCount', o.extraCount, Uint8Array],
    ['extraText', o.extraText, Uint32Array],
  ];
  for (const [name, v, kind] of typed) if (!(v instanceof kind)) return `${name} is not a ${kind.name}`;
  const rows = o.flags.length;
  for (const c of [o.local, o.global, o.tag, o.length, o.extraCount]) {
    if (c.length !== rows) return 'columns of different lengths';
  }
  const nA = o.actualLocal.length;
  if (o.actualGlobal.length !== nA || o.actualTag.length !== nA || o.actualLength.length !== nA) {
    return 'actual columns of different lengths';
  }
  const starts = o.queueStarts;
  if (starts.length < 1 || starts[0] !== 0 || starts[starts.length - 1] !== rows) return 'queue bounds';
  for (let q = 1; q < starts.length; q++) {
    if ((starts[q] as number) < (starts[q - 1] as number)) return 'queue bounds';
  }
  if (!Array.isArray(o.strings) || !o.strings.every((s) => typeof s === 'string')) return 'string table';
  if (typeof o.buffers !== 'string') return 'buffers';
  return null;
}

/**
 * The RankSnapshot a wire carries (deep-equal to what the reader had), or a coded error for
 * that rank when the wire is malformed.
 */
export function rankFromWire(w: WireRank): Result<RankSnapshot, MqdError> {
  const head = w?.head;
  const o = w?.ops;
  if (typeof head !== 'object' || head === null || typeof o !== 'object' || o === null) {
    return err(malformed(undefined, 'no head or columns'));
  }
  const pid = head.pid;
  if (!Array.isArray(head.communicators)) return err(malformed(pid, 'communicators'));
  const bad = checkColumns(o);
  if (bad) return err(malformed(pid, bad));
  const rows = o.flags.length;
  // An empty join is one empty string; zero rows carry none.
  const buffers = rows === 0 ? [] : o.buffers.split(BUFFER_SEP);
  if (buffers.length !== rows) return err(malformed(pid, 'buffers'));
  const queues = o.queueStarts.length - 1;
  const { flags, local, global, tag, length, extraCount, extraText, strings } = o;
  const { actualLocal, actualGlobal, actualTag, actualLength } = o;
  const nStrings = strings.length;
  let nActual = 0;
  let line = 0;
  const ops: Operation[] = new Array(rows);
  // Lengths were checked above: every index below is in range.
  for (let i = 0; i < rows; i++) {
    const f = flags[i] as number;
    const status = STATUSES[f & 3];
    const correctedCode = f >> CORRECTED_SHIFT;
    const corrected = correctedCode === 0 ? undefined : CORRECTED[correctedCode - 1];
    if (
      status === undefined ||
      f > F_ALL ||
      (f & F_UNIT_BYTES && f & F_UNIT_ELEMENTS) ||
      (correctedCode !== 0 && corrected === undefined)
    )
      return err(malformed(pid, `flags of operation ${i}`));
    let actual: ActualMatch | null = null;
    if (f & F_ACTUAL) {
      const k = nActual++;
      if (k >= actualLocal.length) return err(malformed(pid, 'actual rows'));
      actual = {
        peer: {
          local: f & F_ACTUAL_LOCAL_NULL ? null : (actualLocal[k] as number),
          global: f & F_ACTUAL_GLOBAL_NULL ? null : (actualGlobal[k] as number),
        },
        tag: f & F_ACTUAL_TAG_NULL ? null : (actualTag[k] as number),
        length: f & F_ACTUAL_LENGTH_NULL ? null : (actualLength[k] as number),
      };
    }
    const nLines = extraCount[i] as number;
    if (line + nLines > extraText.length) return err(malformed(pid, 'extra text'));
    const lines: string[] = new Array(nLines);
    for (let j = 0; j < nLines; j++) {
      const s = extraText[line++] as number;
      if (s >= nStrings) return err(malformed(pid, 'extra text'));
      lines[j] = strings[s] as string;
    }
    // The key order of src/mqs/decode.ts (then walk.ts's lengthUnit and corrected).
    const op: Operation = {
      status,
      peer: {
        local: f & F_LOCAL_NULL ? null : (local[i] as number),
        global: f & F_GLOBAL_NULL ? null : (global[i] as number),
      },
      tag: f & F_TAG_NULL ? null : (tag[i] as number),
      length: length[i] as number,
      actual,
      extraText: lines,
      buffer: buffers[i] as string,
      systemBuffer: (f & F_SYSTEM_BUFFER) !== 0,
    };
    if (f & F_LENGTH_UNKNOWN) op.lengthUnknown = true;
    if (f & F_UNIT_BYTES) op.lengthUnit = 'bytes';
    else if (f & F_UNIT_ELEMENTS) op.lengthUnit = 'elements';
    if (corrected !== undefined) op.corrected = corrected;
    ops[i] = op;
  }
  if (nActual !== actualLocal.length || line !== extraText.length) return err(malformed(pid, 'row counts'));
  const used = new Uint8Array(queues);
  const communicators: Communicator[] = [];
  for (const c of head.communicators) {
    const out: Partial<Record<QueueKind, Operation[] | null>> = {};
    for (const q of QUEUES) {
      const ref = c?.[q];
      if (ref === null) {
        out[q] = null;
        continue;
      }
      if (typeof ref !== 'number' || !Number.isInteger(ref) || ref < 0 || ref >= queues || used[ref]) {
        return err(malformed(pid, `queue reference of communicator ${String(c?.id)}`));
      }
      used[ref] = 1;
      out[q] = ops.slice(o.queueStarts[ref], o.queueStarts[ref + 1]);
    }
    communicators.push({ ...c, ...(out as Record<QueueKind, Operation[] | null>) });
  }
  if (used.some((u) => u === 0)) return err(malformed(pid, 'a queue no communicator holds'));
  return ok({ ...head, communicators });
}
