// The builds a real-MPI test file of the testkit cannot run (the same helper as @mqd/core/testing's describeUnbuiltMpis: the testkit's own tests do not import mqd-core).
import { MPI_LABELS, MPI_VERSIONS, requireMpi, unbuiltMpis } from '@mqd/testkit';
import { describe, expect, it } from 'vitest';

/**
 * One test per build of the matrix that is not built here (MPICH 4.2.1 without its source):
 * requireMpi says so with its code and how to build it. For every real-MPI test file.
 */
export function describeUnbuiltMpis(): void {
  for (const mpi of unbuiltMpis()) {
    describe(mpi, () => {
      it(`${MPI_LABELS[mpi]} ${MPI_VERSIONS[mpi]}: not built here, and the error says how to build it`, () => {
        expect(() => requireMpi(mpi)).toThrow(/^MQD_TESTKIT_E_NO_MPI: .*MQD_MPICH42_TARBALL=/);
      });
    });
  }
}
