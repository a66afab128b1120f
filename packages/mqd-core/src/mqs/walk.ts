// What the walk of one stop keeps (raw: the DLL's records stay in the shim until the rank is
// resumed) and how it becomes the model's communicators afterwards. The walk itself is
// MqsSession's (it drives the DLL); this file is its data and the pure assembly after the resume.
import {
  type Communicator,
  type LengthUnit,
  type MqdError,
  mqdError,
  type Operation,
  type RankSnapshot,
  STATUS_CORRECTIONS,
  type StatusCorrection,
} from '@mqd/model';
import type { ReadFailure } from '../inferior/memory.js';
import { type CommunicatorHeader, decodeOperations, deriveGlobalRanks, isWorldHeader } from './decode.js';
import type { CompletedCheck, CorrectedStatus, CorrectionNotes } from './libraries/library.js';
import {
  mqs_end_of_list,
  mqs_ok,
  mqs_op_class,
  mqs_status,
  PENDING_OPERATION,
  WALK_OUT_OF_MEMORY,
} from './mqs-spec.js';

export const QUEUES = [
  ['sends', mqs_op_class.pending_sends],
  ['receives', mqs_op_class.pending_receives],
  ['unexpected', mqs_op_class.unexpected_messages],
] as const;

export type QueueName = (typeof QUEUES)[number][0];

/**
 * The fewest bytes one queue entry takes in a snapshot's JSON (every field at its shortest, and
 * the comma after it): a rank whose entries alone pass its byte budget at this size is over it.
 */
export const MIN_OPERATION_JSON_BYTES =
  JSON.stringify({
    status: 'pending',
    peer: { local: null, global: null },
    tag: null,
    length: 0,
    actual: null,
    extraText: [],
    buffer: '0x0',
    systemBuffer: false,
  } satisfies Operation).length + 1;

/** Queue entries a rank may have under a byte budget (the walk stops one past it). */
export function entryBudget(maxRankBytes: number | undefined): number {
  return maxRankBytes === undefined
    ? Number.POSITIVE_INFINITY
    : Math.floor(maxRankBytes / MIN_OPERATION_JSON_BYTES);
}

/**
 * One queue as walked in the stop: which of the stop's raw records are its (they stay in the
 * shim until the rank is resumed, `StopRecords`), decoded after the resume.
 */
export type RawQueue =
  | {
      readonly kind: 'records';
      /** Index of its first record among the stop's. */
      readonly first: number;
      readonly count: number;
      readonly rc: number;
      /** Our diagnosis when the walk broke off on a failed callback (never shown to the DLL). */
      readonly why: string | null;
      /** Statuses the library's own state corrects, by index in walk order (read in the stop). */
      readonly corrections?: ReadonlyMap<number, CorrectedStatus>;
    }
  /** mqs_setup_operation_iterator said mqs_no_information: the library cannot show this queue. */
  | { readonly kind: 'unavailable'; readonly rc: number }
  /** mqs_setup_operation_iterator failed with any other code: a DLL error, not "unsupported". */
  | { readonly kind: 'error'; readonly error: MqdError };

export interface RawCommunicator {
  readonly header: CommunicatorHeader;
  readonly group: number[] | null;
  /** An intercommunicator's remote group (null: not readable); undefined for an intracommunicator. */
  readonly remoteGroup: number[] | null | undefined;
  readonly queues: readonly (readonly [QueueName, RawQueue])[];
}

/** Every record the walks of one stop read, copied out of the shim after the resume. */
export type StopRecords = Buffer;

/** The walk of one stop: the communicators read, and the DLL error that cut it short, if any. */
export interface RawWalk {
  readonly comms: RawCommunicator[];
  readonly error: MqdError | null;
  /** The id the library gives MPI_COMM_WORLD in this process (null: not known). */
  readonly worldId: string | null;
  /** Each communicator's Fortran handle by id (libraries/); empty for libraries it does not know. */
  readonly fortran: ReadonlyMap<string, number | null>;
}

/** What the assembly needs to know of the session that walked. */
export interface WalkFacts {
  /** The library's name in messages (LibraryQuirks.displayName). */
  readonly libraryName: string;
  /** The unit of unexpected-message lengths when it differs from the snapshot's. */
  readonly unexpectedUnit: LengthUnit | undefined;
  /** Queues this DLL walks from a list that holds the newest entry first. */
  readonly newestFirst: ReadonlySet<QueueName>;
  /** The DLL's message for a code, with our diagnosis (MqsSession.dllError). */
  dllError(code: number, what: string, why: string | null): MqdError;
  /** What each correction means, in the rank's note (LibraryQuirks.correctionNotes). */
  readonly correctionNotes?: CorrectionNotes;
}

/** Records looked at per copy out of the shim while checking statuses in the stop. */
const CHECK_CHUNK = 256;

/**
 * In the stop: the records among `count` (from `first`) that the DLL reported complete, checked
 * against the library's own state (`check`), by index in the queue. `copy` copies records of
 * the stop out of the shim into `into` (whole records, PENDING_OPERATION.size bytes each).
 */
export function findCorrections(
  copy: (first: number, count: number, into: Uint8Array) => void,
  first: number,
  count: number,
  check: CompletedCheck,
): ReadonlyMap<number, CorrectedStatus> | undefined {
  const P = PENDING_OPERATION;
  const chunk = Buffer.alloc(Math.min(count, CHECK_CHUNK) * P.size);
  const view = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  const out = new Map<number, CorrectedStatus>();
  for (let at = 0; at < count; at += CHECK_CHUNK) {
    const n = Math.min(CHECK_CHUNK, count - at);
    copy(first + at, n, chunk);
    for (let i = 0; i < n; i++) {
      const rec = i * P.size;
      if (view.getInt32(rec + P.status, true) !== mqs_status.complete) continue;
      const from = rec + P.extra_text;
      const nul = chunk.indexOf(0, from);
      const line = chunk.toString(
        'latin1',
        from,
        nul >= 0 && nul < from + P.extraLineLen ? nul : from + P.extraLineLen,
      );
      const c = check(line);
      if (c !== null) out.set(at + i, c);
    }
  }
  return out.size === 0 ? undefined : out;
}

/** An operation as the library's own state gives it (the DLL's status replaced). */
function applyCorrection(op: Operation, c: CorrectedStatus): void {
  op.status = c.status;
  if (c.status === 'pending') op.actual = null;
  op.peer.local = c.peer;
  // The global rank is derived from the local one with the group (deriveGlobalRanks), as the DLL's.
  if (c.peer === null) op.peer.global = null;
  op.tag = c.tag;
  if (c.length !== null) {
    op.length = c.length;
    delete op.lengthUnknown;
  }
  op.corrected = c.reason;
}

/** Turns the walk's raw records into the model's communicators (after the rank resumed). */
export function assembleWalk(
  walk: RawWalk,
  records: StopRecords,
  facts: WalkFacts,
): {
  communicators: Communicator[];
  walkError: MqdError | null;
  /** The rank's note on the statuses corrected (absent when none). */
  statusCorrections?: NonNullable<RankSnapshot['statusCorrections']>;
} {
  let walkError: MqdError | null = null;
  const corrected = new Map<StatusCorrection, number>();
  const communicators = walk.comms.map(({ header, group, remoteGroup, queues }) => {
    const comm: Communicator = {
      id: header.id,
      name: header.name,
      size: header.size,
      localRank: header.localRank,
      group,
      sends: null,
      receives: null,
      unexpected: null,
      unavailable: {},
    };
    if (walk.worldId !== null) comm.world = isWorldHeader(header, group, walk.worldId);
    const fortran = walk.fortran.get(header.id);
    if (fortran !== undefined) comm.fortranHandle = fortran;
    if (remoteGroup !== undefined) comm.remoteGroup = remoteGroup;
    for (const [q, rq] of queues) {
      if (rq.kind === 'unavailable') {
        comm.unavailable[q] = mqdError(
          'MQD_E_QUEUE_UNSUPPORTED',
          `${facts.libraryName}'s DLL cannot show ${q === 'unexpected' ? 'unexpected messages' : `pending ${q}`} (mqs_setup_operation_iterator returned ${rq.rc})`,
        );
        continue;
      }
      if (rq.kind === 'error') {
        // Not "unsupported": the DLL failed. The queue is unknown and the rank says why.
        comm.unavailable[q] = rq.error;
        walkError ??= rq.error;
        continue;
      }
      if (rq.rc === WALK_OUT_OF_MEMORY) {
        walkError ??= mqdError(
          'MQD_E_INTERNAL',
          `the reader ran out of memory walking ${q} on communicator '${header.name}' after ${rq.count} entries`,
        );
      }
      const size = PENDING_OPERATION.size;
      const ops = decodeOperations(
        records.subarray(rq.first * size, (rq.first + rq.count) * size),
        rq.count,
        header.size,
      );
      // Entries counted in another unit than the snapshot's say so (Operation.lengthUnit).
      const unit = q === 'unexpected' ? facts.unexpectedUnit : undefined;
      if (unit !== undefined) for (const op of ops) op.lengthUnit = unit;
      // Before the order changes: the corrections are indexed in walk order.
      for (const [i, c] of rq.corrections ?? []) {
        const op = ops[i];
        if (!op) continue;
        applyCorrection(op, c);
        corrected.set(c.reason, (corrected.get(c.reason) ?? 0) + 1);
      }
      // MPICH's debugger lists are newest first; matching order is oldest first.
      if (facts.newestFirst.has(q)) ops.reverse();
      comm[q] = ops;
      if (rq.rc !== mqs_end_of_list && rq.rc !== mqs_ok && rq.rc !== WALK_OUT_OF_MEMORY) {
        // The walk broke off (an unreadable pointer, a DLL error): what was read is kept,
        // and the rank says plainly that this queue is partial.
        walkError ??= facts.dllError(
          rq.rc,
          `the walk of ${q} on communicator '${header.name}' broke off after ${rq.count} entries: mqs_next_operation`,
          rq.why,
        );
      }
    }
    return deriveGlobalRanks(comm);
  });
  // A walk cut short before all communicators were listed outranks a partial queue.
  const result = { communicators, walkError: walk.error ?? walkError };
  if (corrected.size === 0) return result;
  const statusCorrections = STATUS_CORRECTIONS.flatMap((reason) => {
    const count = corrected.get(reason);
    if (count === undefined) return [];
    const message =
      facts.correctionNotes?.[reason] ??
      `${facts.libraryName}'s DLL gave these operations a status its library's own state contradicts`;
    return [{ reason, count, message }];
  });
  return { ...result, statusCorrections };
}

/** The failure of a stop's memory reads that fails the whole read (null: none, or only unmapped reads). */
export function stopMemoryError(
  failure: ReadFailure | null,
  t: { readonly pid: number; readonly rank: number },
  readBudgetBytes: number,
): MqdError | null {
  switch (failure) {
    case 'budget':
      return mqdError(
        'MQD_E_READ_BUDGET',
        `more than ${readBudgetBytes} bytes read from pid ${t.pid} in one stop`,
      );
    case 'gone':
      return mqdError('MQD_E_PID_EXITED', `pid ${t.pid} exited during the read`);
    case 'denied':
      return mqdError('MQD_E_PTRACE_DENIED', `cannot read the memory of pid ${t.pid}`);
    case 'missing':
      return mqdError(
        'MQD_E_CORE_MISSING_PAGES',
        `the core of rank ${t.rank} lacks memory the queues are in (a page the kernel did not dump, in no file found here)`,
      );
    default:
      return null; // unmapped reads end list walks; the DLL decides what they mean
  }
}

/**
 * A DLL's has_queues message is a printf format with at most one `%s` (the image or process
 * name) and no other token; `%%` is a literal percent sign. Anything else is left as written.
 */
export function substituteName(format: string, name: string): string {
  let used = false;
  return format.replace(/%(%|s)/g, (m, c: string) => {
    if (c === '%') return '%';
    if (used) return m;
    used = true;
    return name;
  });
}
