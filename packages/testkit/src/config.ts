// Every path and version the testkit depends on, read in one place.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The two MPI builds every existing test iterates (MPI_NAMES): Open MPI 4.1.4 and MPICH 4.0.2.
 * Code that switches over MpiName or keys a Record by it stays exhaustive over these two.
 */
export type MpiName = 'openmpi' | 'mpich';
export const MPI_NAMES: readonly MpiName[] = ['openmpi', 'mpich'];

/**
 * The newer builds scripts/provision.sh also makes: Open MPI 5.0.7 (PRRTE's prterun,
 * bundled PMIx), MPICH 4.2.1 (ch4; only from MQD_MPICH42_TARBALL: the archive serves no source
 * for it) and MPICH 4.0.2 built a second time with ch4:ofi, MPICH 4.x's default device
 * (`mpichch4`). Kept out of MpiName until every switch over MpiName handles them; AnyMpiName is
 * what the launcher, the fixture builder and the paths accept.
 */
export type NewMpiName = 'openmpi5' | 'mpich42' | 'mpichch4';
export const NEW_MPI_NAMES: readonly NewMpiName[] = ['openmpi5', 'mpichch4', 'mpich42'];
export type AnyMpiName = MpiName | NewMpiName;
/** Every build, the two old ones first. */
export const ALL_MPI_NAMES: readonly AnyMpiName[] = [...MPI_NAMES, ...NEW_MPI_NAMES];

/**
 * Versions built by scripts/provision.sh; keep in step with OMPI_VERSION, MPICH_VERSION,
 * OMPI5_VERSION, MPICH42_VERSION and MPICH_CH4_VERSION there.
 */
export const MPI_VERSIONS: Readonly<Record<AnyMpiName, string>> = {
  openmpi: '4.1.4',
  mpich: '4.0.2',
  openmpi5: '5.0.7',
  mpich42: '4.2.1',
  // The install directory is mpich-4.0.2-ch4 (<family>-<version>); labels read "MPICH 4.0.2-ch4".
  mpichch4: '4.0.2-ch4',
};

export const MPI_LABELS: Readonly<Record<AnyMpiName, string>> = {
  openmpi: 'Open MPI',
  mpich: 'MPICH',
  openmpi5: 'Open MPI',
  mpich42: 'MPICH',
  mpichch4: 'MPICH',
};

/**
 * The library family of each build: the model's MpiLibrary (what a snapshot's mpi.library says)
 * and the first half of the install directory name (<family>-<version>).
 */
export type MpiFamily = 'openmpi' | 'mpich';
export const MPI_FAMILIES: Readonly<Record<AnyMpiName, MpiFamily>> = {
  openmpi: 'openmpi',
  mpich: 'mpich',
  openmpi5: 'openmpi',
  mpich42: 'mpich',
  mpichch4: 'mpich',
};

/** Same default as scripts/provision.sh. Read when called, so a test may point it elsewhere. */
export function mpiCacheDir(): string {
  return process.env['MQD_MPI_CACHE'] ?? '/var/cache/mqd-mpi';
}

/**
 * fixtures/mpi at the repository root. src/ and dist/ sit at the same depth under
 * packages/testkit, so the same relative URL works for the sources and the built files.
 */
export const FIXTURES_DIR: string = fileURLToPath(new URL('../../../fixtures/mpi/', import.meta.url));

/**
 * The OMPD-enabled LLVM OpenMP runtime scripts/provision.sh builds (keep in step with
 * OPENMP_VERSION there): libomp.so with its full .symtab, libompd.so, omp.h, omp-tools.h.
 */
export const OPENMP_VERSION = '16.0.6';

/**
 * Install prefix of that runtime: $MQD_OPENMP_PREFIX if set, else
 * <cache>/llvm-openmp-<OPENMP_VERSION> (provision.sh honours the same variable).
 */
export function openmpPrefixDir(): string {
  return process.env['MQD_OPENMP_PREFIX'] ?? join(mpiCacheDir(), `llvm-openmp-${OPENMP_VERSION}`);
}

/** fixtures/hybrid at the repository root: the MPI+OpenMP fixtures (fixtures/hybrid/README.md). */
export const HYBRID_FIXTURES_DIR: string = fileURLToPath(
  new URL('../../../fixtures/hybrid/', import.meta.url),
);

/** Default time for a job to print its READY lines and block (startup under load is slow). */
export const DEFAULT_LAUNCH_TIMEOUT_MS = 60_000;
/** Default time for dispose() to see every process of a job gone. */
export const DEFAULT_DISPOSE_TIMEOUT_MS = 20_000;
