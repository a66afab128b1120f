// What each MPI library's message-queue DLL can show, and how its numbers read: the facts the
// views print next to the queues (names, which queues a library's DLL can list, the caveats,
// the unit of lengths). The model decides them once; views only draw the sentences.
import { assertUnreachable } from '../assert.js';
import {
  type JobSnapshot,
  type LengthUnit,
  lengthUnitOfLibrary,
  type MpiLibrary,
  type QueueKind,
} from '../snapshot-spec.js';

/** The library as a sentence names it. */
export const LIBRARY_NAME: Readonly<Record<MpiLibrary, string>> = {
  openmpi: 'Open MPI',
  mpich: 'MPICH',
  unknown: 'the MPI library',
};

/** A queue kind as a sentence names it. */
export const QUEUE_LABEL: Readonly<Record<QueueKind, string>> = {
  sends: 'pending sends',
  receives: 'posted receives',
  unexpected: 'unexpected messages',
};

/**
 * Whether a library's DLL lists a queue: `shown`; `never` (Open MPI's DLL has no unexpected
 * queue); `debug-build` (MPICH lists sends only when built with --enable-debuginfo, which keeps
 * MPIR_Sendq_head); `unknown` for a library we do not know.
 */
export type QueueVisibility = 'shown' | 'never' | 'debug-build' | 'unknown';

export const LIBRARY_QUEUES: Readonly<Record<MpiLibrary, Readonly<Record<QueueKind, QueueVisibility>>>> = {
  openmpi: { sends: 'shown', receives: 'shown', unexpected: 'never' },
  mpich: { sends: 'debug-build', receives: 'shown', unexpected: 'shown' },
  unknown: { sends: 'unknown', receives: 'unknown', unexpected: 'unknown' },
};

/** How a library's queues read where the analysis must know it, one entry per library. */
export interface LibraryFacts {
  /**
   * The send queue lists only nonblocking sends (MPICH's MPIR_Sendq): a rank blocked in
   * MPI_Send or MPI_Ssend may be behind an unexpected message at its receiver that its own
   * queue does not show.
   */
  readonly sendQueueOmitsBlockingSends: boolean;
  /** The DLL hides collective-internal traffic: ranks inside a collective show nothing pending. */
  readonly hidesCollectiveTraffic: boolean;
  /** A blocking send that waits for its receive is listed pending with its length in bytes. */
  readonly listsBlockedSendBytes: boolean;
}

export const LIBRARY_FACTS: Readonly<Record<MpiLibrary, LibraryFacts>> = {
  openmpi: { sendQueueOmitsBlockingSends: false, hidesCollectiveTraffic: true, listsBlockedSendBytes: true },
  mpich: { sendQueueOmitsBlockingSends: true, hidesCollectiveTraffic: false, listsBlockedSendBytes: false },
  unknown: {
    sendQueueOmitsBlockingSends: false,
    hidesCollectiveTraffic: false,
    listsBlockedSendBytes: false,
  },
};

/** The words for a length unit ("bytes", "element counts"). */
export function lengthUnitWords(unit: LengthUnit): string {
  switch (unit) {
    case 'bytes':
      return 'bytes';
    case 'elements':
      return 'element counts';
    default:
      return assertUnreachable(unit);
  }
}

/**
 * A plain sentence for a queue the library cannot show (the snapshot's queue is null), so
 * nobody reads "unknown" as "empty". The coded reason from the snapshot goes next to it.
 */
export function unavailableQueueText(library: MpiLibrary, kind: QueueKind, code?: string): string {
  // Under Open MPI's ucx PML the queues are UCX's (RankSnapshot.queueSource), and so is the reason.
  if (code === 'MQD_E_UCX_SENDS')
    return 'UCX keeps no list of sends: only a send the rank is blocked in is known; this list is unknown, not empty.';
  if (code?.startsWith('MQD_E_UCX_'))
    return `UCX's ${QUEUE_LABEL[kind]} could not be read on this rank: this list is unknown, not empty.`;
  const v = LIBRARY_QUEUES[library][kind];
  if (v === 'never') {
    return `${LIBRARY_NAME[library]}'s DLL cannot show ${QUEUE_LABEL[kind]}: this list is unknown, not empty.`;
  }
  if (v === 'debug-build') {
    return `${LIBRARY_NAME[library]}'s DLL shows ${kind} only when the library was built with --enable-debuginfo (MPIR_Sendq_head): this list is unknown, not empty.`;
  }
  return `${LIBRARY_NAME[library]}'s message-queue DLL cannot show ${QUEUE_LABEL[kind]}: this list is unknown, not empty.`;
}

/** An Open MPI point-to-point layer (PML) component: ob1, ucx, cm, ... */
export type OpenMpiPml = string;

const PML_FUNCTION = /^mca_pml_([a-z0-9]+)_/;
const PML_MODULE = /(?:^|\/)mca_pml_([a-z0-9]+)\.so/;

/**
 * The PML an Open MPI job runs, from its stacks (a `mca_pml_X_*` function or a `mca_pml_X.so`
 * module on any thread of a read rank); null when the stacks do not say (not read, or no rank
 * inside the PML). The first one found: a job runs one PML.
 */
export function openMpiPml(snap: Pick<JobSnapshot, 'ranks'>): OpenMpiPml | null {
  for (const r of snap.ranks) {
    for (const t of r.threads ?? []) {
      for (const f of t.frames) {
        const m =
          (f.function === null ? null : PML_FUNCTION.exec(f.function)) ??
          (f.module === null ? null : PML_MODULE.exec(f.module));
        if (m?.[1] !== undefined) return m[1];
      }
    }
  }
  return null;
}

/** Some rank lists an operation in some queue. */
function anyQueued(snap: Pick<JobSnapshot, 'ranks'>): boolean {
  return snap.ranks.some((r) =>
    r.communicators.some(
      (c) => (c.sends?.length ?? 0) + (c.receives?.length ?? 0) + (c.unexpected?.length ?? 0) > 0,
    ),
  );
}

/**
 * Library caveats that change how the numbers read; shown once per snapshot. Open MPI's ucx
 * PML keeps no request lists, so its DLL's queues read empty: when the reader read them from
 * UCX instead (queueSource) it says so; otherwise said when the stacks show ucx, as a
 * condition when they show no PML and every queue reads empty (an entry in any queue shows the
 * PML keeps lists), and not at all under another PML.
 */
export function libraryCaveats(snap: Pick<JobSnapshot, 'mpi' | 'ranks'>): string[] {
  const out: string[] = [];
  const lib = snap.mpi.library;
  switch (lib) {
    case 'openmpi': {
      const fromUcx = snap.ranks.filter((r) => r.queueSource?.source === 'ucx').length;
      if (fromUcx > 0) {
        // The ucx PML's queues, read from UCX itself (RankSnapshot.queueSource).
        out.push(
          `This job runs the ucx PML: receives and unexpected messages${fromUcx < snap.ranks.length ? ` of ${fromUcx} ranks` : ''} are read from UCX's worker (Open MPI's DLL sees none); sends only where a rank is blocked in one.`,
        );
        break;
      }
      out.push("Open MPI's DLL cannot show unexpected messages; sends and receives are shown.");
      const pml = openMpiPml(snap);
      if (pml === 'ucx')
        out.push('This job runs the ucx PML, which keeps no request lists: every queue reads empty.');
      else if (pml === null && !anyQueued(snap))
        out.push('Under the ucx PML Open MPI keeps no request lists, so every queue reads empty.');
      break;
    }
    case 'mpich':
      out.push(
        `MPICH reports lengths as ${lengthUnitWords(lengthUnitOfLibrary(lib))}, and only non-blocking sends.`,
      );
      out.push('MPICH marks every entry pending, even ones that already matched.');
      break;
    case 'unknown':
      break;
    default:
      assertUnreachable(lib);
  }
  if (snap.mpi.dll === null) out.push('No message-queue DLL could be loaded for this job.');
  return out;
}

/** A library's default eager limit over one transport: above it a send waits for its receive. */
export interface EagerLimit {
  /** The layer and transport ("ob1 over shared memory"). */
  readonly transport: string;
  readonly bytes: number;
  /** The parameter that changes it. */
  readonly parameter: string;
}

/**
 * Default eager limits, where they are fixed by the library rather than by a network provider:
 * Open MPI 4.1 and 5.0 ob1 (btl vader/sm 4 KiB, btl tcp 64 KiB), MPICH ch3 (128 KiB over tcp).
 * MPICH ch4 takes its limit from the transport (libfabric provider, shared-memory cells): not
 * listed, so a sentence says it is unknown. Empty for a library we do not know.
 */
export const EAGER_LIMITS: Readonly<Record<MpiLibrary, readonly EagerLimit[]>> = {
  openmpi: [
    {
      transport: 'ob1 over shared memory',
      bytes: 4096,
      parameter: 'btl_vader_eager_limit (btl_sm_eager_limit in 5.0)',
    },
    { transport: 'ob1 over TCP', bytes: 65536, parameter: 'btl_tcp_eager_limit' },
  ],
  mpich: [{ transport: 'ch3 over TCP', bytes: 131072, parameter: 'MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE' }],
  unknown: [],
};

/** What the eager limits leave unsaid, per library (MPICH ch4's comes from its transport). */
const EAGER_LIMIT_NOTE: Readonly<Record<MpiLibrary, string>> = {
  openmpi: '',
  mpich: '; ch4: set by the transport, unknown',
  unknown: '',
};

/** "1 MiB", "64 KiB", "100 B": a message size in binary units, exact when it is a whole number. */
export function bytesText(n: number): string {
  const units: [number, string][] = [
    [1024 ** 3, 'GiB'],
    [1024 ** 2, 'MiB'],
    [1024, 'KiB'],
  ];
  for (const [u, name] of units) {
    if (n >= u) {
      const v = n / u;
      return `${Number.isInteger(v) ? v : v.toFixed(1)} ${name}`;
    }
  }
  return `${n} B`;
}

/** The eager limits of a library in a clause: "Open MPI defaults: 4 KiB for ob1 over shared memory, ...". */
export function eagerLimitText(library: MpiLibrary): string {
  const limits = EAGER_LIMITS[library];
  if (limits.length === 0) return 'unknown for this library';
  const list = limits.map((l) => `${bytesText(l.bytes)} for ${l.transport}`).join(', ');
  return `${LIBRARY_NAME[library]} defaults: ${list}${EAGER_LIMIT_NOTE[library]}`;
}
