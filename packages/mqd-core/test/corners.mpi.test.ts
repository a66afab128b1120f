import { type Communicator, type Operation, validateSnapshot } from '@mqd/model';
import {
  type AnyMpiName,
  CORNER_FIXTURES,
  type ExpectedCornerComm,
  type ExpectedCornerOp,
  expectedCornerQueues,
  mpiMatrix,
  mpiQueueTraits,
  queueDll,
} from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { fixtureRig } from './fixture-rig.js';

const rig = fixtureRig();
const { snapshotter } = rig;

// The four builds. MPICH 4.2.1 runs only where it was built (the archive mirror here
// serves no source for it, docs/mpi-facts.md); otherwise its row checks the coded error that
// says so and how to build it.
const MATRIX = mpiMatrix();

/** What each DLL's mqs_version_string says: the library and its version. */
const DLL_VERSION: Readonly<Record<AnyMpiName, RegExp>> = {
  openmpi: /^Open MPI message queue support .*4\.1\.4/,
  mpich: /^MPICH .*4\.0\.2/,
  openmpi5: /^Open MPI message queue support .*5\.0\.7/,
  mpich42: /^MPICH .*4\.2\.1/,
  mpichch4: /^MPICH .*4\.0\.2/,
};

const row = (o: Operation) => [
  o.peer.local,
  o.peer.global,
  o.tag,
  o.length,
  o.status,
  o.systemBuffer,
  o.actual !== null,
];
const want = (e: ExpectedCornerOp) => [
  e.peer,
  e.peerWorld,
  e.tag,
  e.length,
  e.status,
  e.systemBuffer,
  e.actual,
];

function checkComm(mpi: AnyMpiName, got: Communicator | undefined, w: ExpectedCornerComm, rank: number) {
  const where = `${mpi} rank ${rank} ${w.name}`;
  expect(got, `${where}: communicator missing`).toBeDefined();
  if (!got) return;
  expect([where, got.world, got.size, got.localRank]).toEqual([where, w.world, w.size, w.localRank]);
  // The world's group is never listed; Open MPI's DLL gives the others, MPICH's none.
  const group = w.world || !mpiQueueTraits(mpi).reportsGlobalRanks ? null : [...w.group];
  expect([where, got.group]).toEqual([where, group]);
  expect([where, got.remoteGroup]).toEqual([
    where,
    w.remoteGroup === null ? null : w.remoteGroup ? [...w.remoteGroup] : undefined,
  ]);
  for (const q of ['sends', 'receives', 'unexpected'] as const) {
    const e = w[q];
    if (e === null)
      expect([where, q, got.unavailable[q]?.code]).toEqual([where, q, 'MQD_E_QUEUE_UNSUPPORTED']);
    else expect([where, q, got[q]?.map(row)]).toEqual([where, q, e.map(want)]);
  }
}

describe.each(MATRIX)('%s: interface corners on real jobs', (mpi) => {
  it.each(CORNER_FIXTURES)('%s: queues, world, remote group and DLL as expected', async (fixture) => {
    const job = await rig.launch({ mpi, fixture, np: 4 });
    const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })));
    const valid = validateSnapshot(snapshot);
    expect(valid.ok ? 'valid' : valid.error.message).toBe('valid');
    expect(snapshot.ranks.map((r) => [r.rank, r.state.kind])).toEqual(job.ranks.map((r) => [r.rank, 'ok']));
    // no_dll_name empties MPIR_dll_name: the DLL is the one installed beside the library.
    expect(snapshot.mpi.dll).toBe(queueDll(mpi));
    for (const r of snapshot.ranks) {
      expect(r.dll?.path).toBe(queueDll(mpi));
      expect(r.dll?.version).toMatch(DLL_VERSION[mpi]);
      for (const w of expectedCornerQueues(mpi, fixture, 4)[r.rank] ?? []) {
        checkComm(
          mpi,
          r.communicators.find((c) => c.name === w.name),
          w,
          r.rank,
        );
      }
      // Exactly one world per rank, whatever its name.
      expect(r.communicators.filter((c) => c.world === true)).toHaveLength(1);
    }
  });
});
