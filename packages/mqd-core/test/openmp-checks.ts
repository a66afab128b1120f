// What the OpenMP tests on real hybrid jobs compare (ompd.mpi.test.ts, ompd-core.mpi.test.ts):
// a rank's OpenMP threads in EXPECTED_OPENMP's order and fields, and the table's own rows in the
// same shape, so a snapshot can be waited on until it matches.
import type { JobSnapshot, OmpThread, OpenMpRuntime, RankSnapshot } from '@mqd/model';
import {
  type AnyMpiName,
  EXPECTED_OPENMP,
  type ExpectedOmpThread,
  type HybridFixture,
  mpiAvailable,
  mpiMissingMessage,
  openmpAvailable,
  openmpMissingMessage,
} from '@mqd/testkit';
import { expect } from 'vitest';

/** Fails (never skips) when provisioning did not build this MPI or the OpenMP runtime. */
export function requireHybridBuilt(mpi: AnyMpiName): void {
  expect(mpiAvailable(mpi), mpiMissingMessage(mpi)).toBe(true);
  expect(openmpAvailable(), openmpMissingMessage()).toBe(true);
}

export const rankOf = (s: JobSnapshot, rank: number): RankSnapshot => {
  const r = s.ranks.find((x) => x.rank === rank);
  if (!r) throw new Error(`rank ${rank} missing from the snapshot`);
  return r;
};

/** EXPECTED_OPENMP's order: (level, thread number, tid). */
export function tableOrder(rt: OpenMpRuntime): OmpThread[] {
  return [...rt.threads].sort(
    (a, b) =>
      (a.parallel?.level ?? 0) - (b.parallel?.level ?? 0) ||
      (a.threadNum ?? -1) - (b.threadNum ?? -1) ||
      a.tid - b.tid,
  );
}

/** What EXPECTED_OPENMP says of a thread, in the same shape as fromOurs. */
export const fromTable = (t: ExpectedOmpThread) => ({
  threadNum: t.threadNum,
  state: t.state,
  teamSize: t.parallel.teamSize,
  level: t.parallel.level,
  kind: t.taskKind,
});

/** What the reader says of a thread, in the table's fields. */
export const fromOurs = (t: OmpThread) => ({
  threadNum: t.threadNum,
  state: t.state,
  teamSize: t.parallel?.teamSize ?? null,
  level: t.parallel?.level ?? null,
  kind: t.task?.kind ?? null,
});

/** A rank's OpenMP in the table's order and shape; its error (or null/undefined) when it has none. */
export const ompShape = (r: RankSnapshot) =>
  r.openmp ? tableOrder(r.openmp).map(fromOurs) : (r.openmpError ?? r.openmp);

/** The table's rows for a rank of a fixture, in ompShape's shape. */
export const expectedOmpShape = (fixture: HybridFixture, rank: number) =>
  (EXPECTED_OPENMP[fixture][rank] ?? []).map(fromTable);
