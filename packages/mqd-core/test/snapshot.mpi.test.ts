// mqd-core against a REAL hung job: the snapshotting process killed while it holds a rank
// stopped, and a second snapshot reusing the first one's setup. What every rank of every hang
// fixture shows under every build (exactly the expected queues of
// packages/testkit/src/expected-queues.ts and fixtures/mpi/README.md, in matching order, with
// the communicators' names, sizes and groups) is checked by apps/cli/test/golden.mpi.test.ts on
// the same live snapshot that it compares with the golden one (one launch, not two).

import type { JobSnapshot } from '@mqd/model';
import { MPI_NAMES, queueDll } from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { processState, tracerPid } from '../src/index.js';
import { holdStopped, waitFor } from './conformance-kit.js';
import { fixtureRig } from './fixture-rig.js';

const rig = fixtureRig();
const { snapshotter } = rig;

// What the reader and the Snapshotter do, not the library: one build. A helper killed
// while it holds a rank stopped, and a second snapshot reusing the first one's setup.
describe.each(MPI_NAMES.slice(0, 1))('%s: the snapshotting process on a real hung job', (mpi) => {
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
