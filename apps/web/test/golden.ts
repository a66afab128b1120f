// Real snapshots recorded from MPI jobs with stacks (fixtures/golden, recorded and normalised by
// packages/testkit/src/golden.ts), for the views tests that must hold on what MPI really shows.
// (A copy of packages/model/test/golden.ts: a test may not import across packages, and the
// testkit needs Node types these browser-side tests do not load.)
import { readFileSync } from 'node:fs';
import type { JobSnapshot } from '@mqd/model';

export const GOLDEN_MPIS = ['openmpi', 'mpich', 'mpichch4', 'openmpi5'] as const;
export type GoldenMpi = (typeof GOLDEN_MPIS)[number];
export type GoldenFixture = 'wrong_tag' | 'ring_ssend' | 'collective_mismatch' | 'thread_multiple';

/** The recorded snapshot (validated by apps/cli/test/golden.test.ts). */
export function golden(mpi: GoldenMpi, fixture: GoldenFixture): JobSnapshot {
  return JSON.parse(
    readFileSync(`${import.meta.dirname}/../../../fixtures/golden/${mpi}/${fixture}.snapshot.json`, 'utf8'),
  ) as JobSnapshot;
}

/** A recorded source file of the fixtures (fixtures/mpi), to find the lines a test expects. */
export function fixtureSource(name: string): string {
  return readFileSync(`${import.meta.dirname}/../../../fixtures/mpi/${name}`, 'utf8');
}
