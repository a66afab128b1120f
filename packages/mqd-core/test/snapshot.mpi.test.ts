// mqd-core against REAL hung jobs: Open MPI 4.1.4 and MPICH 4.0.2, every hang fixture, 4 ranks.
// The expected queues (packages/testkit/src/expected-queues.ts, fixtures/mpi/README.md) state
// what each library's DLL shows; here MQD's snapshot must show exactly that, in matching order,
// with the communicators' names, sizes and groups, and unsupported queues as unsupported.

import { type JobSnapshot, validateSnapshot } from '@mqd/model';
import { expectedQueues, HANG_FIXTURES, MPI_NAMES, MPI_QUEUE_TRAITS, queueDll } from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { processState, tracerPid } from '../src/index.js';
import { holdStopped, waitFor } from './conformance-kit.js';
import { fixtureRig } from './fixture-rig.js';
import { expectQueues } from './queue-checks.js';

const rig = fixtureRig();
const { snapshotter } = rig;

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
    expectQueues(mpi, MPI_QUEUE_TRAITS[mpi], snapshot, expectedQueues(mpi, fixture, 4));
    for (const r of snapshot.ranks) {
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
