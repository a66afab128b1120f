// The hang fixtures (fixtures/mpi/*.c) compiled on demand with each MPI's own wrapper compiler,
// cached under fixtures/mpi/build/<mpi>/ and rebuilt when a source, the shared header or the
// MPI build itself is newer than the binary.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  ALL_MPI_NAMES,
  type AnyMpiName,
  FIXTURES_DIR,
  MPI_FAMILIES,
  MPI_LABELS,
  MPI_VERSIONS,
  mpiCacheDir,
} from './config.js';

/** Install prefix of a provisioned MPI, e.g. /var/cache/mqd-mpi/openmpi-4.1.4 (or openmpi-5.0.7). */
export function mpiPrefix(mpi: AnyMpiName): string {
  return join(mpiCacheDir(), `${MPI_FAMILIES[mpi]}-${MPI_VERSIONS[mpi]}`);
}

const stampOf = (mpi: AnyMpiName): string => join(mpiPrefix(mpi), '.mqd-built');

/** True when scripts/provision.sh has finished building this MPI (its stamp file exists). */
export function mpiAvailable(mpi: AnyMpiName): boolean {
  return existsSync(stampOf(mpi));
}

/** Says what is missing and what to do; tests fail with it rather than skip. */
export function mpiMissingMessage(mpi: AnyMpiName): string {
  return (
    `MQD_TESTKIT_E_NO_MPI: ${MPI_LABELS[mpi]} ${MPI_VERSIONS[mpi]} is not built ` +
    `(no ${stampOf(mpi)}): run \`npm run provision\` (scripts/provision.sh) first, ` +
    'or set MQD_MPI_CACHE to where it was built' +
    (mpi === 'mpich42'
      ? '; its source comes from MQD_MPICH42_TARBALL, Debian, MQD_SOURCES_DIR or mpich.org ' +
        '(README, "Where MPICH 4.2.1 comes from"), and provisioning says MQD_E_PROVISION_MPICH42 ' +
        'when it finds none'
      : '')
  );
}

/**
 * The real-MPI test matrix: every build provisioning makes, MPICH 4.2.1 included
 * (provisioning fails with a coded error rather than leave a build out, so a missing build here
 * fails its tests with mpiMissingMessage instead of shrinking the matrix).
 */
export function mpiMatrix(): readonly AnyMpiName[] {
  return ALL_MPI_NAMES;
}

/** Throws mpiMissingMessage unless the MPI is provisioned. */
export function requireMpi(mpi: AnyMpiName): void {
  if (!mpiAvailable(mpi)) throw new Error(mpiMissingMessage(mpi));
}

/**
 * A fixture whose name ends in this is its base fixture built with separate debug info: the
 * executable stripped of DWARF and pointing at `<binary>.debug` through .gnu_debuglink.
 */
export const DEBUGLINK_SUFFIX = '_debuglink';
/** The base fixtures that also exist as a debuglink variant. */
export const DEBUGLINK_FIXTURES: readonly string[] = ['collective_two'];

/** Names of the fixtures (the .c and .cpp files in fixtures/mpi, and the debuglink variants), sorted. */
export function listFixtures(): string[] {
  const base = readdirSync(FIXTURES_DIR)
    .filter((f) => f.endsWith('.c') || f.endsWith('.cpp'))
    .map((f) => f.replace(/\.(c|cpp)$/, ''));
  return [...base, ...DEBUGLINK_FIXTURES.map((f) => `${f}${DEBUGLINK_SUFFIX}`)].sort();
}

const mtimeMs = (path: string): number => statSync(path).mtimeMs;

/**
 * Absolute path of the fixture's binary for this MPI, compiled with `<prefix>/bin/mpicc -g -O0`
 * if it is missing or stale. Compiles to a temporary name and renames, so concurrent callers
 * never run a half-written binary.
 */
export function fixtureBinary(mpi: AnyMpiName, name: string): string {
  requireMpi(mpi);
  if (!/^[A-Za-z0-9_]+$/.test(name)) {
    throw new Error(
      `MQD_TESTKIT_E_FIXTURE: bad fixture name '${name}': use one of ${listFixtures().join(', ')}`,
    );
  }
  const debuglink =
    name.endsWith(DEBUGLINK_SUFFIX) && DEBUGLINK_FIXTURES.includes(name.slice(0, -DEBUGLINK_SUFFIX.length));
  const baseName = debuglink ? name.slice(0, -DEBUGLINK_SUFFIX.length) : name;
  const cxx = existsSync(join(FIXTURES_DIR, `${baseName}.cpp`));
  const source = join(FIXTURES_DIR, `${baseName}.${cxx ? 'cpp' : 'c'}`);
  if (!existsSync(source)) {
    throw new Error(
      `MQD_TESTKIT_E_FIXTURE: no fixture '${name}' (${source}): use one of ${listFixtures().join(', ')}`,
    );
  }
  const header = join(FIXTURES_DIR, 'fixture.h');
  const binary = join(FIXTURES_DIR, 'build', mpi, name);
  // An MPICH built without its C++ wrapper (provisioning's builds all have it): its mpicc drives
  // g++ as well when told the language (-x c++) and given the C++ runtime.
  const cxxWrapper = join(mpiPrefix(mpi), 'bin', 'mpicxx');
  const useCxxWrapper = cxx && existsSync(cxxWrapper);
  const mpicc = useCxxWrapper ? cxxWrapper : join(mpiPrefix(mpi), 'bin', 'mpicc');
  const langArgs = cxx && !useCxxWrapper ? ['-x', 'c++'] : [];
  const libArgs = cxx && !useCxxWrapper ? ['-lstdc++'] : [];
  return compileCached({
    binary,
    inputs: [source, header, stampOf(mpi)],
    cwd: FIXTURES_DIR,
    source,
    steps: (tmp) => [
      { file: mpicc, args: ['-g', '-O0', '-Wall', '-o', tmp, ...langArgs, source, '-x', 'none', ...libArgs] },
      // Separate debug info: DWARF into <binary>.debug, the executable stripped and linked to
      // it by name and CRC (.gnu_debuglink), as distributions ship -dbgsym files.
      ...(debuglink
        ? [
            { file: 'objcopy', args: ['--only-keep-debug', tmp, `${binary}.debug`] },
            { file: 'objcopy', args: ['--strip-debug', tmp] },
            { file: 'objcopy', args: [`--add-gnu-debuglink=${binary}.debug`, tmp] },
          ]
        : []),
    ],
  });
}

/** One command of a fixture's build; `tmp` (the output being built) is in its arguments. */
export interface CompileStep {
  readonly file: string;
  readonly args: readonly string[];
}

/**
 * Builds `binary` by running `steps(tmp)` unless it is newer than every input; the steps write
 * a temporary name that is renamed into place, so concurrent callers never run a half-written
 * binary. A failing step is MQD_TESTKIT_E_COMPILE with the compiler's stderr.
 */
export function compileCached(o: {
  readonly binary: string;
  readonly inputs: readonly string[];
  readonly cwd: string;
  readonly source: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly steps: (tmp: string) => readonly CompileStep[];
}): string {
  const newestInput = Math.max(...o.inputs.map(mtimeMs));
  if (existsSync(o.binary) && mtimeMs(o.binary) >= newestInput) return o.binary;
  mkdirSync(dirname(o.binary), { recursive: true });
  const tmp = `${o.binary}.tmp-${process.pid}`;
  for (const step of o.steps(tmp)) {
    try {
      execFileSync(step.file, [...step.args], {
        cwd: o.cwd,
        stdio: ['ignore', 'pipe', 'pipe'],
        encoding: 'utf8',
        ...(o.env ? { env: o.env } : {}),
      });
    } catch (e) {
      rmSync(tmp, { force: true });
      const detail =
        e instanceof Error && 'stderr' in e && typeof e.stderr === 'string' ? e.stderr : String(e);
      throw new Error(
        `MQD_TESTKIT_E_COMPILE: ${step.file} failed on ${o.source}: fix the fixture:\n${detail}`,
      );
    }
  }
  renameSync(tmp, o.binary);
  return o.binary;
}
