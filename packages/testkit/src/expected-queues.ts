// What each hang fixture's message queues contain once every rank is blocked, as the MPI
// libraries' own message-queue DLLs report them. fixtures/mpi/README.md explains the same tables
// in prose; test/queues.mpi.test.ts checks both against the real DLLs (through mqs-dump) at np=4.
// Formulas are given for any np >= 2, but only np=4 is verified.
import { assertUnreachable, type LengthUnit, type OpStatus } from '@mqd/model';
import { type AnyMpiName, MPI_FAMILIES, type MpiName, type NewMpiName } from './config.js';

/** One queue entry, in MPI terms. */
export interface ExpectedOp {
  /** Peer's rank in the entry's communicator; null = MPI_ANY_SOURCE. For an unexpected message, its sender. */
  readonly peer: number | null;
  /**
   * The same peer's rank in MPI_COMM_WORLD; null = MPI_ANY_SOURCE. This is the truth, not what
   * every DLL says: Open MPI's reports it, MPICH's always says -1 (unknown).
   */
  readonly peerWorld: number | null;
  /** null = MPI_ANY_TAG. */
  readonly tag: number | null;
  /** The desired length the DLL reports, in MPI_QUEUE_TRAITS[mpi].lengthUnit. */
  readonly length: number;
  /** The status the DLL reports. */
  readonly status: OpStatus;
}

type Queued = { readonly [Q in 'sends' | 'receives' | 'unexpected']: readonly unknown[] | null };

/**
 * Whether a communicator (as mqs-dump or MQD reports it) has an entry in any queue: how the one
 * of several same-named library communicators an ExpectedComm marked `internal` is picked.
 */
export const holdsEntries = (c: Queued): boolean =>
  [c.sends, c.receives, c.unexpected].some((q) => q !== null && q.length > 0);

/** A communicator the user created or MPI_COMM_WORLD, with its three queues. */
export interface ExpectedComm {
  /** The name the DLL reports (MPI_Comm_set_name, or MPI_COMM_WORLD's default). */
  readonly name: string;
  readonly size: number;
  /** This rank's rank in the communicator. */
  readonly localRank: number;
  /** World rank of each local rank. */
  readonly group: readonly number[];
  /**
   * One of the library's own communicators (a name of MpiQueueTraits.otherComms, which several
   * share): the one of that name holding entries is this one; the others stay empty.
   */
  readonly internal?: boolean;
  /** In matching order. null = this MPI's DLL cannot show the queue at all. */
  readonly sends: readonly ExpectedOp[] | null;
  readonly receives: readonly ExpectedOp[] | null;
  readonly unexpected: readonly ExpectedOp[] | null;
}

export interface MpiQueueTraits {
  /** Unit of ExpectedOp.length: Open MPI reports bytes, MPICH element counts. */
  readonly lengthUnit: LengthUnit;
  /** Open MPI's DLL has no unexpected-message queue (mqs_no_information). */
  readonly showsUnexpected: boolean;
  /** MPICH only records nonblocking sends (MPI_Isend...), never a blocking MPI_Send/MPI_Ssend. */
  readonly showsBlockingSends: boolean;
  /** Whether the DLL fills desired_global_rank (MPICH's is always -1). */
  readonly reportsGlobalRanks: boolean;
  /**
   * Names of the other communicators the DLL lists in every fixture; their queues are always
   * empty. MPICH also lists internal communicators named '--unnamed--' (how many varies by rank).
   */
  readonly otherComms: readonly string[];
  /**
   * What an unexpected entry's length says: 'zero' (ch3: the receive-side request has no count
   * yet) or 'bytes' (ch4: the active-message request holds the arrived data's size in bytes, even
   * though posted entries count elements).
   */
  readonly unexpectedLength: 'zero' | 'bytes';
  /** ch4 reports every unexpected entry pending; ch3 completes the eager ones. */
  readonly unexpectedAlwaysPending: boolean;
  /**
   * Whether MQD reads an intercommunicator's remote group from this library (it is not in the
   * DLL's interface): MPIR_Group's lpids, ch3's VC table, or ch4's rank map (dev.ch4.map). Every
   * build here: true; a build where it is not read gets null (Communicator.remoteGroup).
   */
  readonly readsRemoteGroup: boolean;
  /**
   * Queues the DLL walks from a list MPICH keeps only for debuggers, where each entry is put at
   * the head (src/mpi/debugger/dbginit.c): the DLL lists them newest first and MQD reverses them
   * into matching order (mqs/session.ts NEWEST_FIRST_LISTS). The tables here are in matching
   * order; the raw DLL output (mqs-dump) is reversed for these queues.
   */
  readonly newestFirst: readonly ('sends' | 'receives' | 'unexpected')[];
  /**
   * The local rank the DLL writes for an MPI_ANY_SOURCE receive: -1, or 65534 where it reads the
   * (int) source as two unsigned bytes (MPICH 4.2.1's fetch_int16 of MPIR_Debugq.rank).
   */
  readonly anySourceRaw: number;
  /**
   * Whether a rank blocked in MPI_Barrier shows the barrier's own receive (MPICH 4.2.1 lists its
   * debug queues for every request, so the dissemination step's receive, tag 1, appears on the
   * communicator's internal collective twin, named '--unnamed--').
   */
  readonly showsBarrierReceives: boolean;
  /**
   * The code a queue this library cannot show carries (Communicator.unavailable), per queue;
   * MQD_E_QUEUE_UNSUPPORTED where absent.
   */
  readonly unknownQueueCodes?: Partial<Readonly<Record<'sends' | 'receives' | 'unexpected', string>>>;
}

export const MPI_QUEUE_TRAITS: Readonly<Record<MpiName, MpiQueueTraits>> = {
  openmpi: {
    lengthUnit: 'bytes',
    showsUnexpected: false,
    showsBlockingSends: true,
    reportsGlobalRanks: true,
    otherComms: ['MPI_COMM_SELF', 'MPI_COMM_NULL'],
    unexpectedLength: 'zero',
    unexpectedAlwaysPending: false,
    readsRemoteGroup: true,
    newestFirst: [],
    anySourceRaw: -1,
    showsBarrierReceives: false,
  },
  mpich: {
    lengthUnit: 'elements',
    showsUnexpected: true,
    showsBlockingSends: false,
    reportsGlobalRanks: false,
    otherComms: ['MPI_COMM_SELF', 'MPI_ICOMM_WORLD', '--unnamed--'],
    unexpectedLength: 'zero',
    unexpectedAlwaysPending: false,
    readsRemoteGroup: true,
    // MPIR_Sendq_head (only nonblocking sends here, never two on one communicator in a fixture).
    newestFirst: ['sends'],
    anySourceRaw: -1,
    showsBarrierReceives: false,
  },
};

/**
 * The same traits for the newer builds, each difference from its family's older build
 * with the reason; apps/cli/test/golden.mpi.test.ts checks them against the real DLLs.
 */
export const NEW_MPI_QUEUE_TRAITS: Readonly<Record<NewMpiName, MpiQueueTraits>> = {
  // Open MPI 5.0.7's libompi_dbg_msgq.so reads the same ob1 request lists as 4.1's: the same
  // traits and the same raw fields, verified on every hang fixture (queues.mpi.test.ts through
  // mqs-dump, apps/cli/test/golden.mpi.test.ts through MQD) and every corner fixture
  // (expectedCornerQueues, packages/mqd-core/test/corners.mpi.test.ts). Its communicator ids are
  // c_index, equal to 4.1's context ids in these fixtures (docs/mpi-facts.md).
  openmpi5: MPI_QUEUE_TRAITS.openmpi,
  // MPICH 4.2.1 (ch4:ofi), its own DLL (verified on every hang fixture by
  // packages/testkit/test/queues.mpi.test.ts through mqs-dump and by MQD's tests; docs/mpi-facts.md
  // "MPICH 4.2.1"): since 4.1 the DLL reads MPICH's debugger-only lists (MPIR_Debugq) for all
  // three queues, so every request shows: blocking sends too (ch4's MPID_Send is an Isend), the
  // barrier's own receives, every unexpected entry pending with count 0; all three lists are
  // newest first, and an ANY_SOURCE receive's rank reads as 65534.
  mpich42: {
    ...MPI_QUEUE_TRAITS.mpich,
    showsBlockingSends: true,
    unexpectedAlwaysPending: true,
    newestFirst: ['sends', 'receives', 'unexpected'],
    anySourceRaw: 65534,
    showsBarrierReceives: true,
  },
  // MPICH 4.0.2 with ch4:ofi, read with the DLL's stale field names answered (dll-fields.ts; the
  // DLL alone reports garbage): posted receives and sends as ch3's, but the unexpected entries
  // are ch4 active-message requests: their count is the arrived data in bytes and they all stay
  // pending (verified on every hang fixture by packages/testkit/test/queues.mpi.test.ts through
  // mqs-dump and by packages/mqd-core/test/dll-fields.mpi.test.ts and
  // apps/cli/test/golden.mpi.test.ts through MQD; docs/mpi-facts.md).
  mpichch4: {
    ...MPI_QUEUE_TRAITS.mpich,
    unexpectedLength: 'bytes',
    unexpectedAlwaysPending: true,
    // The remote group of an intercommunicator is decoded from dev.ch4.map (mqd-core session.ts).
    readsRemoteGroup: true,
  },
};

/** MPI_QUEUE_TRAITS or NEW_MPI_QUEUE_TRAITS, whichever has this build. */
export function mpiQueueTraits(mpi: AnyMpiName): MpiQueueTraits {
  switch (mpi) {
    case 'openmpi':
    case 'mpich':
      return MPI_QUEUE_TRAITS[mpi];
    case 'openmpi5':
    case 'mpich42':
    case 'mpichch4':
      return NEW_MPI_QUEUE_TRAITS[mpi];
    default:
      return assertUnreachable(mpi);
  }
}

/** The fixtures that hang (ring_ok completes and has no steady state). */
export type HangFixture = 'ring_ssend' | 'wrong_tag' | 'split_wildcard' | 'big_isend' | 'collective_mismatch';
export const HANG_FIXTURES: readonly HangFixture[] = [
  'ring_ssend',
  'wrong_tag',
  'split_wildcard',
  'big_isend',
  'collective_mismatch',
];

export const isHangFixture = (name: string): name is HangFixture =>
  (HANG_FIXTURES as readonly string[]).includes(name);

/** The MPI call each rank is blocked in (what its READY line says). */
export function expectedBlockingCall(fixture: HangFixture, rank: number, np = 4): string {
  switch (fixture) {
    case 'ring_ssend':
      return 'MPI_Ssend';
    case 'wrong_tag':
    case 'split_wildcard':
      return 'MPI_Recv';
    case 'big_isend':
      return 'MPI_Wait';
    case 'collective_mismatch':
      return rank < np - 1 ? 'MPI_Barrier' : 'MPI_Recv';
    default:
      return assertUnreachable(fixture);
  }
}

const INT_BYTES = 4;

/**
 * Where each rank of a dissemination barrier waits when rank np-1 never enters it (MPICH's
 * barrier on one node): in step k rank r sends to r+2^k and receives from r-2^k (mod np); a rank
 * goes on to step k+1 once its step-k sender reached step k. Index = rank, value = the rank it
 * waits for (undefined: not in the barrier, or through it).
 */
export function barrierBlockedOn(np: number): (number | undefined)[] {
  const steps = Math.ceil(Math.log2(np));
  const inside = (r: number) => r < np - 1;
  const reached = Array.from({ length: np }, () => 0);
  for (let changed = true; changed; ) {
    changed = false;
    for (let r = 0; r < np - 1; r++) {
      const k = reached[r] ?? 0;
      if (k >= steps) continue;
      const from = (r - (1 << k) + np * 2) % np;
      if (inside(from) && (reached[from] ?? 0) >= k) {
        reached[r] = k + 1;
        changed = true;
      }
    }
  }
  return Array.from({ length: np }, (_, r) => {
    const k = reached[r] ?? 0;
    return inside(r) && k < steps ? (r - (1 << k) + np * 2) % np : undefined;
  });
}
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/**
 * The queues of every rank (index = world rank) of `fixture` under `mpi`, for the communicators
 * the fixture itself uses, in creation order (MPI_COMM_WORLD first). The DLLs list communicators
 * in their own order, so match them by name. Every other communicator they list
 * (MPI_QUEUE_TRAITS[mpi].otherComms) has empty queues.
 */
export function expectedQueues(
  mpi: AnyMpiName,
  fixture: HangFixture,
  np = 4,
  traits: MpiQueueTraits = mpiQueueTraits(mpi),
): ExpectedComm[][] {
  if (!Number.isInteger(np) || np < 2) throw new RangeError(`the fixtures need np >= 2, got ${np}`);
  /** Length of `count` MPI_INTs in this MPI's unit. */
  const ints = (count: number): number => {
    switch (traits.lengthUnit) {
      case 'bytes':
        return count * INT_BYTES;
      case 'elements':
        return count;
      default:
        return assertUnreachable(traits.lengthUnit);
    }
  };
  const unexpected = (ops: readonly ExpectedOp[]): readonly ExpectedOp[] | null =>
    traits.showsUnexpected ? ops : null;
  // MPICH ch3 records an unexpected message with count 0 (the DLL reads the receive-side request,
  // which has no user buffer yet), ch4 with the bytes that arrived; Open MPI shows none at all.
  const unexp = (peer: number, tag: number, intsSent: number, status: OpStatus): ExpectedOp =>
    op(
      peer,
      tag,
      traits.unexpectedLength === 'bytes' ? intsSent * INT_BYTES : 0,
      traits.unexpectedAlwaysPending ? 'pending' : status,
    );
  const next = (r: number) => (r + 1) % np;
  const prev = (r: number) => (r - 1 + np) % np;
  const op = (peer: number | null, tag: number | null, length: number, status: OpStatus): ExpectedOp => ({
    peer,
    peerWorld: peer,
    tag,
    length,
    status,
  });
  const world = (
    r: number,
    queues: Pick<ExpectedComm, 'sends' | 'receives' | 'unexpected'>,
  ): ExpectedComm => ({ name: 'MPI_COMM_WORLD', size: np, localRank: r, group: range(np), ...queues });
  const emptyWorld = (r: number) => world(r, { sends: [], receives: [], unexpected: unexpected([]) });

  switch (fixture) {
    case 'ring_ssend':
      return range(np).map((r) => [
        world(r, {
          // A blocking MPI_Ssend of 1 int waits for its receiver; MPICH does not record it.
          sends: traits.showsBlockingSends ? [op(next(r), 42, ints(1), 'pending')] : [],
          receives: [],
          // The eager-synchronous message from the left neighbour arrived but nobody receives it.
          unexpected: unexpected([unexp(prev(r), 42, 1, 'complete')]),
        }),
      ]);
    case 'wrong_tag':
      return range(np).map((r) =>
        r === 0
          ? [
              world(r, {
                sends: [],
                receives: [op(1, 99, ints(4), 'pending')],
                unexpected: unexpected([
                  unexp(1, 7, 4, 'complete'),
                  unexp(1, 8, 4, 'complete'),
                  ...range(np)
                    .filter((s) => s >= 2)
                    .map((s) => unexp(s, 10 + s, 4, 'complete')),
                ]),
              }),
            ]
          : [world(r, { sends: [], receives: [op(0, 1, ints(4), 'pending')], unexpected: unexpected([]) })],
      );
    case 'split_wildcard':
      return range(np).map((r) => {
        const parity = r % 2;
        const members = range(np).filter((w) => w % 2 === parity);
        const anySource: ExpectedOp = {
          peer: null,
          peerWorld: null,
          tag: 5,
          length: ints(1),
          status: 'pending',
        };
        const anything: ExpectedOp = { ...anySource, tag: null };
        return [
          emptyWorld(r),
          {
            name: parity === 0 ? 'evens' : 'odds',
            size: members.length,
            localRank: Math.floor(r / 2),
            group: members,
            sends: [],
            receives: [anySource],
            unexpected: unexpected([]),
          },
          {
            name: 'world_dup',
            size: np,
            localRank: r,
            group: range(np),
            sends: [],
            receives: [anything],
            unexpected: unexpected([]),
          },
        ];
      });
    case 'big_isend':
      return range(np).map((r) => [
        world(r, {
          sends: [op(next(r), 3, ints(262144), 'pending')],
          receives: [],
          // MPICH: the rendezvous request-to-send from the left neighbour; its data never came.
          unexpected: unexpected([unexp(prev(r), 3, 262144, 'pending')]),
        }),
      ]);
    case 'collective_mismatch': {
      // The barrier's own messages use internal tags (Open MPI: negative, skipped by the DLL)
      // or a collective context id no listed communicator has (MPICH 4.0): none of them is shown.
      // MPICH 4.2.1 shows each rank's blocked dissemination receive (MPIR_BARRIER_TAG 1, count 0)
      // on the world's internal collective communicator.
      const blockedOn = barrierBlockedOn(np);
      const barrier = (r: number): ExpectedComm[] => {
        const from = blockedOn[r];
        if (!traits.showsBarrierReceives || from === undefined) return [];
        return [
          {
            name: '--unnamed--',
            internal: true,
            size: np,
            localRank: r,
            group: range(np),
            sends: [],
            receives: [op(from, 1, 0, 'pending')],
            unexpected: unexpected([]),
          },
        ];
      };
      return range(np).map((r) =>
        r < np - 1
          ? [emptyWorld(r), ...barrier(r)]
          : [
              world(r, {
                sends: [],
                receives: [{ peer: null, peerWorld: null, tag: 1234, length: ints(1), status: 'pending' }],
                unexpected: unexpected([]),
              }),
            ],
      );
    }
    default:
      return assertUnreachable(fixture);
  }
}

// ---- Interface corners: fixtures/mpi/{intercomm,bsend,no_dll_name}.c ----------

/** Fixtures for the corners of the MQD interface (packages/mqd-core/test/corners.mpi.test.ts). */
export type CornerFixture = 'intercomm' | 'bsend' | 'no_dll_name';
export const CORNER_FIXTURES: readonly CornerFixture[] = ['intercomm', 'bsend', 'no_dll_name'];

/** An ExpectedOp with what the corners also check. */
export interface ExpectedCornerOp extends ExpectedOp {
  /** The DLL's system_buffer flag (MPI_Bsend). */
  readonly systemBuffer: boolean;
  /** Whether the DLL fills the actual_* fields (a matched or completed entry). */
  readonly actual: boolean;
}

/** An ExpectedComm with its corners: the world flag, an intercommunicator's remote group. */
export interface ExpectedCornerComm extends Omit<ExpectedComm, 'sends' | 'receives' | 'unexpected'> {
  /** MPI_COMM_WORLD by identity (Communicator.world), whatever its name. */
  readonly world: boolean;
  /**
   * Only on an intercommunicator: the world ranks of its remote group; null where MQD cannot
   * read it (MpiQueueTraits.readsRemoteGroup).
   */
  readonly remoteGroup?: readonly number[] | null;
  readonly sends: readonly ExpectedCornerOp[] | null;
  readonly receives: readonly ExpectedCornerOp[] | null;
  readonly unexpected: readonly ExpectedCornerOp[] | null;
}

/**
 * What the DLLs show for the corner fixtures at np (even, >= 2; verified at 4), with the
 * world ranks MQD derives (peerWorld is the truth; on an intercommunicator the peer is a rank
 * of the remote group). Only the communicators that matter are listed.
 */
export function expectedCornerQueues(
  mpi: AnyMpiName,
  fixture: CornerFixture,
  np = 4,
): ExpectedCornerComm[][] {
  if (!Number.isInteger(np) || np < 2 || np % 2 !== 0)
    throw new RangeError(`the corner fixtures need an even np >= 2, got ${np}`);
  const traits = mpiQueueTraits(mpi);
  const ints = (count: number): number => (traits.lengthUnit === 'bytes' ? count * INT_BYTES : count);
  const unexpected = (ops: readonly ExpectedCornerOp[]): readonly ExpectedCornerOp[] | null =>
    traits.showsUnexpected ? ops : null;
  const op = (
    peer: number,
    peerWorld: number | null,
    tag: number,
    length: number,
    status: OpStatus,
    more: Partial<Pick<ExpectedCornerOp, 'systemBuffer' | 'actual'>> = {},
  ): ExpectedCornerOp => ({
    peer,
    peerWorld,
    tag,
    length,
    status,
    systemBuffer: false,
    actual: false,
    ...more,
  });
  const next = (r: number) => (r + 1) % np;
  const prev = (r: number) => (r - 1 + np) % np;
  const world = (
    r: number,
    name: string,
    queues: Pick<ExpectedCornerComm, 'sends' | 'receives' | 'unexpected'>,
  ): ExpectedCornerComm => ({ name, world: true, size: np, localRank: r, group: range(np), ...queues });
  switch (fixture) {
    case 'no_dll_name':
      // MPIR_dll_name emptied, MPI_COMM_WORLD renamed: found by the install path, known by identity.
      return range(np).map((r) => [
        world(r, 'mqd_world', {
          sends: [],
          receives: [op(prev(r), prev(r), 3, ints(1), 'pending')],
          unexpected: unexpected([]),
        }),
      ]);
    case 'bsend':
      return range(np).map((r) => [
        world(r, 'MPI_COMM_WORLD', {
          // Open MPI keeps the buffered rendezvous send's request, `complete` (the data is in the
          // attached buffer), system_buffer set, actual fields copied from the desired ones.
          // MPICH records no blocking send, buffered or not.
          // MPICH 4.2.1 lists the Isend MPI_Bsend makes from the attached buffer: the message
          // packed (MPI_PACKED, so its count is bytes), pending, no system_buffer flag.
          sends: !traits.showsBlockingSends
            ? []
            : MPI_FAMILIES[mpi] === 'openmpi'
              ? [op(next(r), next(r), 50, ints(256 * 1024), 'complete', { systemBuffer: true, actual: true })]
              : [op(next(r), next(r), 50, 256 * 1024 * INT_BYTES, 'pending')],
          receives: [op(prev(r), prev(r), 51, ints(1), 'pending')],
          // MPICH: the left neighbour's request-to-send, count 0 like every ch3 unexpected entry;
          // ch4 counts the message's bytes.
          unexpected: unexpected([
            op(
              prev(r),
              prev(r),
              50,
              traits.unexpectedLength === 'bytes' ? 256 * 1024 * INT_BYTES : 0,
              'pending',
            ),
          ]),
        }),
      ]);
    case 'intercomm': {
      const half = np / 2;
      return range(np).map((r) => {
        const low = r < half;
        const l = low ? r : r - half;
        const localGroup = low ? range(half) : range(half).map((i) => half + i);
        const remoteGroup = low ? range(half).map((i) => half + i) : range(half);
        return [
          world(r, 'MPI_COMM_WORLD', { sends: [], receives: [], unexpected: unexpected([]) }),
          {
            name: 'mqd_inter',
            world: false,
            // Both DLLs report the size of the remote group (equal halves here: np / 2).
            size: half,
            localRank: l,
            group: localGroup,
            remoteGroup: traits.readsRemoteGroup ? remoteGroup : null,
            sends: [],
            // The peer's world rank comes from the remote group: unknown where it is not read.
            receives: [
              op(l, traits.readsRemoteGroup ? (remoteGroup[l] ?? -1) : null, 30 + l, ints(4), 'pending'),
            ],
            unexpected: unexpected([]),
          },
        ];
      });
    }
    default:
      return assertUnreachable(fixture);
  }
}
