// The agent's locator on real jobs: the MPIR table read by a child running as the starter's
// owner gives the same ranks as attachStarter in-process, with start times that pin them.
import { procStartTime } from '@mqd/core';
import { attachStarter, localHost } from '@mqd/mpir';
import { disposeAll, type FixtureJob, launchFixture, MPI_NAMES } from '@mqd/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { MpirJobLocator } from '../src/real-locator.js';

let job: FixtureJob | null = null;
afterEach(async () => {
  await job?.dispose();
  job = null;
});
afterAll(() => disposeAll());

// The locator child (run as the starter's owner) against attachStarter in-process: MQD's
// plumbing, one build; attachStarter itself reads each starter's MPIR table in
// packages/mpir/test/attach.mpi.test.ts under both 4.x builds.
describe.each(MPI_NAMES.slice(0, 1))('%s: locating as the starter owner', (mpi) => {
  it('gives the MPIR ranks with their start times', async () => {
    job = await launchFixture({ mpi, fixture: 'ring_ssend', np: 4, waitFor: 'ready' });
    const direct = attachStarter(job.starterPid);
    expect(direct.ok).toBe(true);
    const located = await new MpirJobLocator().locate(job.starterPid);
    expect(located.ok, located.ok ? '' : located.error.message).toBe(true);
    if (!located.ok || !direct.ok) return;
    expect(located.value.uid).toBe(0);
    expect(located.value.method).toBe(direct.value.method);
    expect(located.value.starterStartTime).toBe(procStartTime(job.starterPid));
    expect(located.value.ranks).toEqual(
      job.ranks.map((r) => ({
        rank: r.rank,
        pid: r.pid,
        host: localHost().short,
        startTime: procStartTime(r.pid),
      })),
    );
  });
});
