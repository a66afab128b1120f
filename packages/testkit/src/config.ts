// Every path and version the testkit depends on, read in one place.
import { fileURLToPath } from 'node:url';

/** The MPI implementations scripts/provision.sh builds with debug info. */
export type MpiName = 'openmpi' | 'mpich';
export const MPI_NAMES: readonly MpiName[] = ['openmpi', 'mpich'];

/** Versions built by scripts/provision.sh; keep in step with OMPI_VERSION / MPICH_VERSION there. */
export const MPI_VERSIONS: Readonly<Record<MpiName, string>> = {
  openmpi: '4.1.4',
  mpich: '4.0.2',
};

export const MPI_LABELS: Readonly<Record<MpiName, string>> = {
  openmpi: 'Open MPI',
  mpich: 'MPICH',
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

/** Default time for a job to print its READY lines and block (startup under load is slow). */
export const DEFAULT_LAUNCH_TIMEOUT_MS = 60_000;
/** Default time for dispose() to see every process of a job gone. */
export const DEFAULT_DISPOSE_TIMEOUT_MS = 20_000;
