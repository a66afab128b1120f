// Records the golden snapshots (fixtures/golden/, see packages/testkit/src/golden.ts) from the
// real jobs of every MPI build (Open MPI 4.1.4, MPICH 4.0.2, Open MPI 5.0.7; MPICH 4.2.1 where
// it was built), and checks that what the real libraries give today is still
// what was recorded: the unit project's golden tests are only as true as this check.
// `UPDATE_GOLDEN=1 npx vitest run --project mpi apps/cli/test/golden.mpi.test.ts` re-records
// (then `UPDATE_GOLDEN=1 npx vitest run --project unit apps/cli/test/golden.test.ts` for the texts).
// The same live snapshot of every hang fixture must also show exactly the expected queues
// (packages/testkit/src/expected-queues.ts, each library's differences there and in
// docs/mpi-facts.md), so a golden can never be re-recorded away from the specification. This
// check once launched each hang fixture a second time per build (the mqd-core snapshot test for
// the 4.x builds, a test of its own for the others); one launch does both now.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { processState, tracerPid } from '@mqd/core';
import { expectQueues, fixtureRig } from '@mqd/core/testing';
import { type JobSnapshot, validateSnapshot } from '@mqd/model';
import {
  expectedQueues,
  GOLDEN_FIXTURES,
  goldenFile,
  isHangFixture,
  MPI_FAMILIES,
  mpiMatrix,
  mpiQueueTraits,
  normaliseSnapshot,
} from '@mqd/testkit';
import { describe, expect, it } from 'vitest';

const UPDATE = process.env['UPDATE_GOLDEN'] === '1';
const rig = fixtureRig();
const { snapshotter } = rig;

// The four builds. MPICH 4.2.1 runs only where it was built (the archive mirror here
// serves no source for it, docs/mpi-facts.md); otherwise its row checks the coded error that
// says so and how to build it.
const MATRIX = mpiMatrix();

describe.each(MATRIX)('%s', (mpi) => {
  it.each(GOLDEN_FIXTURES)('%s: the real job still gives the recorded golden snapshot', async (fixture) => {
    const job = await rig.launch({ mpi, fixture, np: 4 });
    const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })));
    expect(snapshot.ranks.map((r) => [r.rank, r.pid, r.state.kind])).toEqual(
      job.ranks.map((r) => [r.rank, r.pid, 'ok']),
    );
    // No rank is left stopped or traced, and every rank was stopped for its read.
    for (const r of job.ranks) {
      expect(tracerPid(r.pid)).toBe(0);
      expect(processState(r.pid)).not.toBe('t');
    }
    for (const r of snapshot.ranks) expect(r.pausedMicros).toBeGreaterThan(0);
    if (isHangFixture(fixture)) {
      expect(snapshot.mpi.library).toBe(MPI_FAMILIES[mpi]);
      expect(snapshot.mpi.lengthUnit).toBe(mpiQueueTraits(mpi).lengthUnit);
      // The DLL is the build's own, found through the rank's MPIR_dll_name.
      expect(snapshot.mpi.dll?.startsWith(job.prefix)).toBe(true);
      for (const r of snapshot.ranks)
        expect(r.communicators.some((c) => c.name === 'MPI_COMM_NULL' || c.size === 0)).toBe(false);
      expectQueues(mpi, mpiQueueTraits(mpi), snapshot, expectedQueues(mpi, fixture, 4));
    }
    const got = normaliseSnapshot(snapshot);
    const valid = validateSnapshot(got);
    expect(valid.ok ? 'valid' : valid.error.message).toBe('valid');
    const file = goldenFile(mpi, fixture, 'snapshot.json');
    if (UPDATE) {
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, `${JSON.stringify(got, null, 1)}\n`);
    }
    const recorded = JSON.parse(readFileSync(file, 'utf8')) as JobSnapshot;
    // On a difference: if the library or the fixture changed on purpose, re-record (above).
    expect(got).toEqual(recorded);
  });
});
