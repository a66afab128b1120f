// mqd-core against REAL hung jobs: Open MPI 4.1.4 and MPICH 4.0.2, every hang fixture, 4 ranks.
// The expected queues (packages/testkit/src/expected-queues.ts, fixtures/mpi/README.md) state
// what each library's DLL shows; here MQD's snapshot must show exactly that, in matching order,
// with the communicators' names, sizes and groups, and unsupported queues as unsupported.

import { type Communicator, type JobSnapshot, type Operation, validateSnapshot } from '@mqd/model';
import {
  type ExpectedComm,
  type ExpectedOp,
  expectedQueues,
  HANG_FIXTURES,
  MPI_NAMES,
  MPI_QUEUE_TRAITS,
  queueDll,
} from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { processState, tracerPid } from '../src/index.js';
import { holdStopped, waitFor } from './conformance-kit.js';
import { fixtureRig } from './fixture-rig.js';

const rig = fixtureRig();
const { snapshotter } = rig;

const opRow = (o: Operation) => [o.peer.local, o.peer.global, o.tag, o.length, o.status];

function expectedRow(mpi: (typeof MPI_NAMES)[number], e: ExpectedOp, comm: Communicator) {
  // The global rank is what the library says, or what MQD derives: from the group, or local ==
  // global on MPI_COMM_WORLD.
  const derived =
    comm.name === 'MPI_COMM_WORLD'
      ? e.peer
      : comm.group && e.peer !== null
        ? (comm.group[e.peer] ?? null)
        : null;
  const global =
    e.peer === null ? null : (derived ?? (MPI_QUEUE_TRAITS[mpi].reportsGlobalRanks ? e.peerWorld : null));
  return [e.peer, global, e.tag, e.length, e.status];
}

function checkComm(
  mpi: (typeof MPI_NAMES)[number],
  got: Communicator | undefined,
  want: ExpectedComm,
  rank: number,
) {
  const where = `${mpi} rank ${rank} ${want.name}`;
  expect(got, `${where}: communicator missing`).toBeDefined();
  if (!got) return;
  expect([where, got.size, got.localRank]).toEqual([where, want.size, want.localRank]);
  // Open MPI's DLL reports groups; MPICH's cannot (null), except MPI_COMM_WORLD which MQD derives.
  // MPI_COMM_WORLD's group is the identity by definition and never listed; other groups come
  // from Open MPI's DLL, while MPICH's cannot report them (null).
  if (want.name === 'MPI_COMM_WORLD') expect([where, got.group]).toEqual([where, null]);
  else if (MPI_QUEUE_TRAITS[mpi].reportsGlobalRanks)
    expect([where, got.group]).toEqual([where, [...want.group]]);
  else expect([where, got.group]).toEqual([where, null]);
  for (const q of ['sends', 'receives', 'unexpected'] as const) {
    const w = want[q];
    if (w === null) {
      expect([where, q, got[q]]).toEqual([where, q, null]);
      expect(got.unavailable[q]?.code).toBe('MQD_E_QUEUE_UNSUPPORTED');
    } else {
      expect([where, q, got[q]?.map(opRow)]).toEqual([where, q, w.map((e) => expectedRow(mpi, e, got))]);
    }
  }
}

describe.each(MPI_NAMES)('%s: snapshots of real hung jobs', (mpi) => {
  it.each(HANG_FIXTURES)('%s: every rank shows exactly the expected queues', async (fixture) => {
    const job = await rig.launch({ mpi, fixture, np: 4 });
    const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid })));
    const valid = validateSnapshot(snapshot);
    expect(valid.ok ? 'valid' : valid.error.message).toBe('valid');
    expect(snapshot.mpi.library).toBe(mpi);
    expect(snapshot.mpi.lengthUnit).toBe(MPI_QUEUE_TRAITS[mpi].lengthUnit);
    expect(snapshot.ranks.map((r) => [r.rank, r.pid, r.state.kind])).toEqual(
      job.ranks.map((r) => [r.rank, r.pid, 'ok']),
    );
    const expected = expectedQueues(mpi, fixture, 4);
    for (const r of snapshot.ranks) {
      const mine = expected[r.rank] ?? [];
      for (const want of mine)
        checkComm(
          mpi,
          r.communicators.find((c) => c.name === want.name),
          want,
          r.rank,
        );
      // Every other communicator the library lists is one of its own, with nothing pending.
      const others = r.communicators.filter((c) => !mine.some((w) => w.name === c.name));
      for (const c of others) {
        expect(MPI_QUEUE_TRAITS[mpi].otherComms).toContain(c.name);
        expect([c.name, c.sends ?? [], c.receives ?? [], c.unexpected ?? []]).toEqual([c.name, [], [], []]);
      }
      expect(r.communicators.some((c) => c.name === 'MPI_COMM_NULL' || c.size === 0)).toBe(false);
      expect(r.pausedMicros).toBeGreaterThan(0);
    }
    // No rank is left stopped or traced.
    for (const r of job.ranks) {
      expect(tracerPid(r.pid)).toBe(0);
      expect(processState(r.pid)).not.toBe('t');
    }
  });

  it('kill -9 of the snapshotting process while a rank is stopped leaves every rank running', async () => {
    const job = await rig.launch({ mpi, fixture: 'ring_ssend', np: 4 });
    const rank0 = job.ranks[0];
    if (!rank0) throw new Error('no rank 0');
    const { child, line } = await holdStopped(queueDll(mpi), rank0.pid);
    expect(line).toMatch(new RegExp(`^STOPPED ${rank0.pid}`));
    expect(processState(rank0.pid)).toBe('t');
    child.kill('SIGKILL');
    await waitFor(() => job.ranks.every((r) => tracerPid(r.pid) === 0) ?? false, 10_000);
    for (const r of job.ranks) expect(processState(r.pid)).toMatch(/^[RS]$/);
  });

  it('a second snapshot of the same job reuses the setup and agrees with the first', async () => {
    const job = await rig.launch({ mpi, fixture: 'wrong_tag', np: 4 });
    const targets = job.ranks.map((r) => ({ pid: r.pid }));
    const a = await snapshotter.snapshot(targets);
    const b = await snapshotter.snapshot(targets);
    // Stacks of busy-polling ranks move between stops (test/stacks.mpi.test.ts covers them).
    const strip = (s: JobSnapshot) =>
      s.ranks.map(({ threads: _t, mpiCall: _c, ...r }) => ({ ...r, pausedMicros: 0 }));
    expect(strip(b.snapshot)).toEqual(strip(a.snapshot));
  });
});
