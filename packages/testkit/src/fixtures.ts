// The hang fixtures (fixtures/mpi/*.c) compiled on demand with each MPI's own wrapper compiler,
// cached under fixtures/mpi/build/<mpi>/ and rebuilt when a source, the shared header or the
// MPI build itself is newer than the binary.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { FIXTURES_DIR, MPI_LABELS, MPI_VERSIONS, type MpiName, mpiCacheDir } from './config.js';

/** Install prefix of a provisioned MPI, e.g. /var/cache/mqd-mpi/openmpi-4.1.4. */
export function mpiPrefix(mpi: MpiName): string {
  return join(mpiCacheDir(), `${mpi}-${MPI_VERSIONS[mpi]}`);
}

const stampOf = (mpi: MpiName): string => join(mpiPrefix(mpi), '.mqd-built');

/** True when scripts/provision.sh has finished building this MPI (its stamp file exists). */
export function mpiAvailable(mpi: MpiName): boolean {
  return existsSync(stampOf(mpi));
}

/** Says what is missing and what to do; tests fail with it rather than skip. */
export function mpiMissingMessage(mpi: MpiName): string {
  return (
    `MQD_TESTKIT_E_NO_MPI: ${MPI_LABELS[mpi]} ${MPI_VERSIONS[mpi]} is not built ` +
    `(no ${stampOf(mpi)}): run \`npm run provision\` (scripts/provision.sh) first, ` +
    'or set MQD_MPI_CACHE to where it was built'
  );
}

/** Throws mpiMissingMessage unless the MPI is provisioned. */
export function requireMpi(mpi: MpiName): void {
  if (!mpiAvailable(mpi)) throw new Error(mpiMissingMessage(mpi));
}

/** Names of the fixtures (the .c files in fixtures/mpi), sorted. */
export function listFixtures(): string[] {
  return readdirSync(FIXTURES_DIR)
    .filter((f) => f.endsWith('.c'))
    .map((f) => f.slice(0, -2))
    .sort();
}

const mtimeMs = (path: string): number => statSync(path).mtimeMs;

/**
 * Absolute path of the fixture's binary for this MPI, compiled with `<prefix>/bin/mpicc -g -O0`
 * if it is missing or stale. Compiles to a temporary name and renames, so concurrent callers
 * never run a half-written binary.
 */
export function fixtureBinary(mpi: MpiName, name: string): string {
  requireMpi(mpi);
  if (!/^[A-Za-z0-9_]+$/.test(name)) {
    throw new Error(
      `MQD_TESTKIT_E_FIXTURE: bad fixture name '${name}': use one of ${listFixtures().join(', ')}`,
    );
  }
  const source = join(FIXTURES_DIR, `${name}.c`);
  if (!existsSync(source)) {
    throw new Error(
      `MQD_TESTKIT_E_FIXTURE: no fixture '${name}' (${source}): use one of ${listFixtures().join(', ')}`,
    );
  }
  const header = join(FIXTURES_DIR, 'fixture.h');
  const outDir = join(FIXTURES_DIR, 'build', mpi);
  const binary = join(outDir, name);
  const newestInput = Math.max(mtimeMs(source), mtimeMs(header), mtimeMs(stampOf(mpi)));
  if (existsSync(binary) && mtimeMs(binary) >= newestInput) return binary;

  mkdirSync(outDir, { recursive: true });
  const tmp = `${binary}.tmp-${process.pid}`;
  const mpicc = join(mpiPrefix(mpi), 'bin', 'mpicc');
  try {
    execFileSync(mpicc, ['-g', '-O0', '-Wall', '-o', tmp, source], {
      cwd: FIXTURES_DIR,
      stdio: ['ignore', 'pipe', 'pipe'],
      encoding: 'utf8',
    });
  } catch (e) {
    rmSync(tmp, { force: true });
    const detail = e instanceof Error && 'stderr' in e && typeof e.stderr === 'string' ? e.stderr : String(e);
    throw new Error(`MQD_TESTKIT_E_COMPILE: ${mpicc} failed on ${source}: fix the fixture:\n${detail}`);
  }
  renameSync(tmp, binary);
  return binary;
}
