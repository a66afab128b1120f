// The queue tables of fixtures/mpi/README.md (expectedQueues) against the real message-queue DLLs
// of every MPI build (Open MPI 4.1.4, MPICH 4.0.2, Open MPI 5.0.7, and MPICH 4.2.1 where it was
// built), read by the independent mqs-dump tool, for every hang fixture at np=4.

import { assertUnreachable } from '@mqd/model';
import {
  type AnyMpiName,
  type DumpedComm,
  type DumpedOp,
  type ExpectedComm,
  type ExpectedOp,
  expectedQueues,
  type FixtureJob,
  HANG_FIXTURES,
  holdsEntries,
  launchFixture,
  MPI_FAMILIES,
  MPI_LABELS,
  MPI_VERSIONS,
  mpiAvailable,
  mpiMatrix,
  mpiMissingMessage,
  mpiQueueTraits,
  mqsDump,
} from '@mqd/testkit';
import { afterEach, describe, expect, it } from 'vitest';

// The four builds. MPICH 4.2.1 runs only where it was built (the archive mirror here
// serves no source for it, docs/mpi-facts.md); otherwise its row checks the coded error that
// says so and how to build it.
const MATRIX = mpiMatrix();

const jobs: FixtureJob[] = [];
afterEach(async () => {
  await Promise.all(jobs.splice(0).map((j) => j.dispose()));
});

type Queues = Pick<ExpectedComm, 'sends' | 'receives' | 'unexpected'>;
type Observed = Omit<ExpectedComm, 'group'>;

/** What the DLL said, in ExpectedOp terms (negative ranks and wildcard tags become null). */
function observedOp(op: DumpedOp): ExpectedOp {
  return {
    peer: op.desiredLocal < 0 ? null : op.desiredLocal,
    peerWorld: op.desiredGlobal < 0 ? null : op.desiredGlobal,
    tag: op.tagWild ? null : op.desiredTag,
    length: op.desiredLength,
    status: op.status,
  };
}

function observedComm(c: DumpedComm): Observed {
  const q = (ops: DumpedOp[] | null) => (ops === null ? null : ops.map(observedOp));
  return {
    name: c.name,
    size: c.size,
    localRank: c.localRank,
    sends: q(c.sends),
    receives: q(c.receives),
    unexpected: q(c.unexpected),
  };
}

/**
 * The expectation as this MPI's DLL can express it: MPICH never knows world ranks; lists it
 * keeps newest first come reversed (the tables are in matching order); ANY_SOURCE as the DLL
 * writes it (MpiQueueTraits.anySourceRaw, 65534 on MPICH 4.2.1).
 */
function asReported(mpi: AnyMpiName, e: ExpectedComm): Observed {
  const traits = mpiQueueTraits(mpi);
  const reportsGlobal = traits.reportsGlobalRanks;
  const raw = (op: ExpectedOp): ExpectedOp => {
    const o = reportsGlobal ? op : { ...op, peerWorld: null };
    return o.peer === null && traits.anySourceRaw >= 0 ? { ...o, peer: traits.anySourceRaw } : o;
  };
  const q = (name: 'sends' | 'receives' | 'unexpected') => {
    const ops = e[name];
    if (ops === null) return null;
    const shown = ops.map(raw);
    return traits.newestFirst.includes(name) ? shown.reverse() : shown;
  };
  const { group: _group, internal: _internal, ...rest } = e;
  return { ...rest, sends: q('sends'), receives: q('receives'), unexpected: q('unexpected') };
}

/** The raw fields fixtures/mpi/README.md documents under "Raw fields", per library and queue. */
function rawFields(
  mpi: AnyMpiName,
  queue: 'sends' | 'receives' | 'unexpected',
  op: DumpedOp,
): Partial<DumpedOp> {
  const family = MPI_FAMILIES[mpi];
  switch (family) {
    case 'openmpi': {
      const data = ['Data: 4 instances of MPI datatype', 'MPI_'];
      if (queue === 'sends') {
        return {
          actualLocal: op.desiredLocal,
          actualGlobal: op.desiredGlobal,
          actualTag: op.desiredTag,
          actualLength: op.desiredLength,
          extraText: [expect.stringMatching(/^Send: 0x[0-9a-f]+$/), ...data],
        };
      }
      return {
        actualLocal: 0,
        actualGlobal: 0,
        actualTag: -1,
        actualLength: 0,
        extraText: [expect.stringMatching(/^Receive: 0x[0-9a-f]+$/), ...data],
      };
    }
    case 'mpich':
      switch (queue) {
        case 'sends':
          return {
            desiredGlobal: -1,
            actualLocal: op.desiredLocal,
            actualTag: op.desiredTag,
            actualLength: op.desiredLength,
            extraText: ['Non-blocking send'],
          };
        case 'receives':
          return {
            desiredGlobal: -1,
            actualLocal: op.desiredLocal < 0 ? -2 : op.desiredLocal,
            actualTag: op.tagWild ? -1 : op.desiredTag,
            actualLength: -1,
            extraText: [],
          };
        case 'unexpected':
          return {
            desiredGlobal: -1,
            actualLocal: op.desiredLocal,
            actualTag: op.desiredTag,
            actualLength: -1,
            extraText: [],
            // ch3: no buffer and count 0. ch4: the arrived bytes (checked as the length above) in
            // the library's own staging buffer (eager) or none yet (rendezvous).
            ...(mpiQueueTraits(mpi).unexpectedLength === 'zero' ? { desiredLength: 0, buffer: '0' } : {}),
          };
        default:
          return assertUnreachable(queue);
      }
    default:
      return assertUnreachable(family);
  }
}

const emptyQueues = (mpi: AnyMpiName): Queues => ({
  sends: [],
  receives: [],
  unexpected: mpiQueueTraits(mpi).showsUnexpected ? [] : null,
});

describe.each(MATRIX)('%s', (mpi) => {
  const label = `${MPI_LABELS[mpi]} ${MPI_VERSIONS[mpi]}`;
  it.each(HANG_FIXTURES)(`${label}: %s queues match fixtures/mpi/README.md`, async (fixture) => {
    expect(mpiAvailable(mpi), mpiMissingMessage(mpi)).toBe(true);
    const job = await launchFixture({ mpi, fixture, np: 4 });
    jobs.push(job);
    const dumped = await mqsDump(
      mpi,
      job.ranks.map((r) => r.pid),
    );
    if (!dumped.ok) throw new Error(dumped.error);
    const expected = expectedQueues(mpi, fixture, 4);

    for (const r of job.ranks) {
      const proc = dumped.value[r.rank];
      expect(proc?.error, `rank ${r.rank}: the DLL refused the process`).toBeUndefined();
      const comms = proc?.comms ?? [];
      const mine = expected[r.rank] ?? [];
      const matched = new Set<DumpedComm>();
      for (const e of mine) {
        // A library-internal communicator: the one of that name holding entries.
        const found = comms.filter((c) => c.name === e.name && (!e.internal || holdsEntries(c)));
        for (const c of found) matched.add(c);
        expect(found.length, `rank ${r.rank}: communicators named ${e.name}`).toBe(1);
        const observed = found[0] === undefined ? undefined : observedComm(found[0]);
        expect(observed, `rank ${r.rank} ${e.name}`).toEqual(asReported(mpi, e));
        for (const queue of ['sends', 'receives', 'unexpected'] as const) {
          for (const op of found[0]?.[queue] ?? []) {
            expect(op, `rank ${r.rank} ${e.name} ${queue}: raw fields`).toMatchObject(
              rawFields(mpi, queue, op),
            );
          }
        }
      }
      // Every other communicator is one of the library's own, with nothing queued.
      const names = new Set(mine.filter((e) => !e.internal).map((e) => e.name));
      for (const c of comms.filter((c) => !names.has(c.name) && !matched.has(c))) {
        expect(mpiQueueTraits(mpi).otherComms, `rank ${r.rank}: unexpected communicator`).toContain(c.name);
        const { sends, receives, unexpected } = observedComm(c);
        expect({ sends, receives, unexpected }, `rank ${r.rank} ${c.name} (${c.id})`).toEqual(
          emptyQueues(mpi),
        );
      }
    }
    await job.dispose();
  });
});
