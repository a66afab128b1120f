// The UCX read joined to the DLL's communicators, after the resume: each communicator's posted
// receives and unexpected messages become UCX's (the DLL's lists under the ucx PML are ob1's,
// always empty), its sends the one blocking send the MPI call names (UCX lists no sends), and
// the rank says where its queues came from and what could not be known (RankSnapshot.queueSource).
import {
  type CodedError,
  type Communicator,
  type MpiCall,
  type MqdError,
  mqdError,
  type Operation,
  type QueueSource,
} from '@mqd/model';
import { deriveGlobalRanks } from '../mqs/decode.js';
import type { UcxEntry, UcxRead } from './read.js';
import { UCX_MAX_RANKS } from './tag.js';

/** The blocking sends a rank can be inside: their destination, tag and count are the call's. */
const BLOCKING_SENDS = new Set(['MPI_Send', 'MPI_Ssend', 'MPI_Rsend', 'MPI_Bsend']);

const hex = (a: bigint) => `0x${a.toString(16)}`;
const coded = (e: MqdError): CodedError => ({ code: e.code, message: e.message });

function operationOf(e: UcxEntry): Operation {
  return {
    status: 'pending',
    peer: { local: e.source, global: null },
    tag: e.tag,
    length: e.length ?? 0,
    ...(e.length === null ? { lengthUnknown: true as const } : {}),
    actual: null,
    extraText: [e.detail],
    buffer: hex(e.buffer),
    systemBuffer: false,
  };
}

/** The communicator with all three queues unknown, for one reason. */
function unknownQueues(c: Communicator, why: CodedError): Communicator {
  return {
    ...c,
    sends: null,
    receives: null,
    unexpected: null,
    unavailable: { sends: why, receives: why, unexpected: why },
  };
}

/** The send a rank blocked in MPI_Send/Ssend/Rsend/Bsend is making, from its call's arguments. */
function blockingSend(call: MpiCall | null | undefined): { comm: string; op: Operation } | null {
  if (!call || !BLOCKING_SENDS.has(call.function) || !call.args) return null;
  const { peer, tag, communicator, count, typeSize } = call.args;
  if (communicator === null || peer === null) return null;
  const bytes = count !== null && typeSize !== undefined && typeSize !== null ? count * typeSize : null;
  return {
    comm: communicator,
    op: {
      status: 'pending',
      peer: { local: peer.local, global: peer.global },
      tag,
      length: bytes ?? 0,
      ...(bytes === null ? { lengthUnknown: true as const } : {}),
      actual: null,
      extraText: [`the ${call.function} call's arguments`],
      buffer: '0x0',
      systemBuffer: call.function === 'MPI_Bsend',
    },
  };
}

/**
 * The communicators with UCX's queues in place of the DLL's, and the rank's queueSource. A UCX
 * read that failed leaves no queue claiming to be empty: each is null with the reason.
 */
export function mergeUcx(
  communicators: readonly Communicator[],
  ucx: UcxRead,
  call: MpiCall | null | undefined,
): { communicators: Communicator[]; queueSource: QueueSource } {
  if (ucx.kind === 'error') {
    const why = coded(ucx.error);
    return {
      communicators: communicators.map((c) => unknownQueues(c, why)),
      queueSource: { source: 'ucx', library: ucx.library ?? '', limits: [why] },
    };
  }
  const limits: CodedError[] = ucx.limits.map(coded);
  const byComm = (list: readonly UcxEntry[]) => {
    const m = new Map<string, UcxEntry[]>();
    for (const e of list) {
      const l = m.get(e.comm);
      if (l) l.push(e);
      else m.set(e.comm, [e]);
    }
    return m;
  };
  // Negative tags are Open MPI's own traffic (collectives); its DLL leaves them out, and so do we.
  const user = (e: UcxEntry) => e.tag === null || e.tag >= 0;
  const receives = byComm(ucx.receives.filter(user));
  const unexpected = byComm(ucx.unexpected.filter(user));
  const send = blockingSend(call);
  const sendsNote = coded(mqdError('MQD_E_UCX_SENDS', 'UCX lists no sends of this rank'));
  let tooLarge: string | null = null;
  const out = communicators.map((c) => {
    const listed = c.remoteGroup ? Math.max(c.size, c.remoteGroup?.length ?? 0) : c.size;
    if (listed >= UCX_MAX_RANKS) {
      tooLarge ??= c.name || c.id;
      const why = coded(
        mqdError('MQD_E_UCX_RANK_RANGE', `${c.name || `communicator ${c.id}`} has ${listed} ranks`),
      );
      receives.delete(c.id);
      unexpected.delete(c.id);
      return unknownQueues(c, why);
    }
    const mine = send !== null && send.comm === c.id;
    const next: Communicator = {
      ...c,
      sends: mine && send ? [send.op] : null,
      receives: (receives.get(c.id) ?? []).map(operationOf),
      unexpected: (unexpected.get(c.id) ?? []).map(operationOf),
      unavailable: mine ? {} : { sends: sendsNote },
    };
    receives.delete(c.id);
    unexpected.delete(c.id);
    return deriveGlobalRanks(next);
  });
  if (tooLarge !== null) {
    limits.push(coded(mqdError('MQD_E_UCX_RANK_RANGE', `${tooLarge}'s UCX entries are not shown`)));
  }
  const stray = [...receives.values(), ...unexpected.values()].reduce((n, l) => n + l.length, 0);
  if (stray > 0) {
    limits.push(
      coded(
        mqdError(
          'MQD_E_UCX_READ',
          `${stray} UCX queue entries name communicators the MPI library does not list (ids ${[...new Set([...receives.keys(), ...unexpected.keys()])].join(', ')})`,
        ),
      ),
    );
  }
  limits.push(sendsNote);
  return { communicators: out, queueSource: { source: 'ucx', library: ucx.library, limits } };
}
