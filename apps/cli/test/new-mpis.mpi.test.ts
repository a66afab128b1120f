// The first real jobs on the newer MPI builds (issue 14): Open MPI 5.0.7 (PRRTE's prterun, which
// has no MPIR process table, so the ranks' pids come from the launcher's READY lines) and MPICH
// 4.2.1 (ch4). Every rank of every hang fixture is snapshotted through the build's own
// message-queue DLL and must show exactly the expected queues
// (packages/testkit/src/expected-queues.ts; each library's differences are documented there and
// in docs/mpi-facts.md).
import { expectQueues, fixtureRig } from '@mqd/core/testing';
import { validateSnapshot } from '@mqd/model';
import {
  expectedQueues,
  HANG_FIXTURES,
  type HangFixture,
  MPI_FAMILIES,
  type MpiQueueTraits,
  mpiQueueTraits,
  NEW_MPI_NAMES,
  type NewMpiName,
} from '@mqd/testkit';
import { describe, expect, it } from 'vitest';

type NewMpi = NewMpiName;
const NEW_MPIS = NEW_MPI_NAMES;
const FIXTURES: readonly HangFixture[] = HANG_FIXTURES;

const LIBRARY = MPI_FAMILIES;
const traitsOf = (mpi: NewMpi): MpiQueueTraits => mpiQueueTraits(mpi);

const rig = fixtureRig();
const { snapshotter } = rig;

// Every newer build is provisioned (issue 30: MPICH 4.2.1 from its local source or mpich.org;
// provisioning fails with a coded error rather than leave it out). A build missing here fails
// with the testkit's MQD_TESTKIT_E_NO_MPI, saying how to build it.
const BUILT: readonly NewMpi[] = NEW_MPIS;

describe.each(BUILT)('%s: snapshots of real hung jobs', (mpi) => {
  it.each(FIXTURES)('%s: every rank shows exactly the expected queues', async (fixture) => {
    const job = await rig.launch({ mpi, fixture, np: 4 });
    const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid })));
    const valid = validateSnapshot(snapshot);
    expect(valid.ok ? 'valid' : valid.error.message).toBe('valid');
    expect(snapshot.mpi.library).toBe(LIBRARY[mpi]);
    expect(snapshot.mpi.lengthUnit).toBe(traitsOf(mpi).lengthUnit);
    // The DLL is the build's own, found through the rank's MPIR_dll_name.
    expect(snapshot.mpi.dll?.startsWith(job.prefix)).toBe(true);
    expect(snapshot.ranks.map((r) => [r.rank, r.pid, r.state.kind])).toEqual(
      job.ranks.map((r) => [r.rank, r.pid, 'ok']),
    );
    expectQueues(mpi, traitsOf(mpi), snapshot, expectedQueues(mpi, fixture, 4));
  });
});
