// The Fortran and C++ versions of the hang fixtures (issue 14): fixtures/fortran/*.f90 (one per
// Fortran binding: ring_ssend with `use mpi_f08`, wrong_tag with `use mpi`, split_wildcard with
// `include 'mpif.h'`) and fixtures/cxx/*.cpp, compiled on demand with the MPI's own wrappers and
// cached under fixtures/<language>/build/<mpi>/. Their queues must equal the C versions'
// (expected-queues.ts); split_wildcard prints each communicator's Fortran handle
// (MQD_FIXTURE_COMM lines) for the reader's `fortranHandle` to be checked against.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type AnyMpiName, MPI_LABELS, MPI_VERSIONS } from './config.js';
import { mpiPrefix, requireMpi } from './fixtures.js';

export type FixtureLanguage = 'fortran' | 'cxx';
export const FIXTURE_LANGUAGES: readonly FixtureLanguage[] = ['fortran', 'cxx'];

/** fixtures/<language> at the repository root (src/ and dist/ sit at the same depth). */
export const languageFixturesDir = (language: FixtureLanguage): string =>
  fileURLToPath(new URL(`../../../fixtures/${language}/`, import.meta.url));

const SOURCE_SUFFIX: Record<FixtureLanguage, string> = { fortran: '.f90', cxx: '.cpp' };

/** The fixtures written in `language` (basenames, sorted). */
export function listLanguageFixtures(language: FixtureLanguage): string[] {
  const suffix = SOURCE_SUFFIX[language];
  return readdirSync(languageFixturesDir(language))
    .filter((f) => f.endsWith(suffix))
    .map((f) => f.slice(0, -suffix.length))
    .sort();
}

/**
 * True when this MPI build has the language: Fortran needs the build's mpi_f08 module (only the
 * Open MPI 5.0.7 build here was configured with gfortran); C++ works everywhere (MPICH's mpicc
 * drives g++ when told the language).
 */
export function languageAvailable(mpi: AnyMpiName, language: FixtureLanguage): boolean {
  if (language === 'cxx') return true;
  return existsSync(join(mpiPrefix(mpi), 'lib', 'mpi_f08.mod'));
}

const mtimeMs = (path: string): number => statSync(path).mtimeMs;

/**
 * Absolute path of the fixture's binary in `language` for this MPI (`mpifort` for Fortran,
 * `mpicxx` or `mpicc -x c++` for C++, `-g -O0`), rebuilt when the source, a shared header or
 * the MPI build is newer; compiled to a temporary name and renamed.
 */
export function languageBinary(mpi: AnyMpiName, language: FixtureLanguage, name: string): string {
  requireMpi(mpi);
  if (!languageAvailable(mpi, language)) {
    throw new Error(
      `MQD_TESTKIT_E_NO_FORTRAN: ${MPI_LABELS[mpi]} ${MPI_VERSIONS[mpi]} was built without Fortran ` +
        `(no ${join(mpiPrefix(mpi), 'lib', 'mpi_f08.mod')}): use an MPI provisioned with gfortran`,
    );
  }
  const dir = languageFixturesDir(language);
  const source = join(dir, `${name}${SOURCE_SUFFIX[language]}`);
  if (!/^[A-Za-z0-9_]+$/.test(name) || !existsSync(source)) {
    throw new Error(
      `MQD_TESTKIT_E_FIXTURE: no ${language} fixture '${name}' (${source}): use one of ${listLanguageFixtures(language).join(', ')}`,
    );
  }
  const cHeaders = join(dir, '..', 'mpi');
  const headers = language === 'fortran' ? [join(dir, 'ready.inc')] : [join(cHeaders, 'fixture.h')];
  const outDir = join(dir, 'build', mpi);
  const binary = join(outDir, name);
  const newestInput = Math.max(
    mtimeMs(source),
    ...headers.map(mtimeMs),
    mtimeMs(join(mpiPrefix(mpi), '.mqd-built')),
  );
  if (existsSync(binary) && mtimeMs(binary) >= newestInput) return binary;

  mkdirSync(outDir, { recursive: true });
  const tmp = `${binary}.tmp-${process.pid}`;
  const bin = join(mpiPrefix(mpi), 'bin');
  let compiler: string;
  let args: string[];
  if (language === 'fortran') {
    compiler = join(bin, 'mpifort');
    args = ['-g', '-O0', '-Wall', '-o', tmp, source];
  } else if (existsSync(join(bin, 'mpicxx'))) {
    compiler = join(bin, 'mpicxx');
    args = ['-g', '-O0', '-Wall', `-I${cHeaders}`, '-o', tmp, source];
  } else {
    // MPICH is built without its C++ wrapper here: its mpicc drives g++ when told the language.
    compiler = join(bin, 'mpicc');
    args = ['-g', '-O0', '-Wall', `-I${cHeaders}`, '-o', tmp, '-x', 'c++', source, '-x', 'none', '-lstdc++'];
  }
  try {
    execFileSync(compiler, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  } catch (e) {
    rmSync(tmp, { force: true });
    const detail = e instanceof Error && 'stderr' in e && typeof e.stderr === 'string' ? e.stderr : String(e);
    throw new Error(`MQD_TESTKIT_E_COMPILE: ${compiler} failed on ${source}: fix the fixture:\n${detail}`);
  }
  renameSync(tmp, binary);
  return binary;
}

const COMM_RE = /^MQD_FIXTURE_COMM rank=(\d+) name=(\S+) fortran=(-?\d+)\s*$/gm;

/** The MQD_FIXTURE_COMM lines of a job's output: rank → communicator name → Fortran handle. */
export function parseCommLines(text: string): Map<number, Map<string, number>> {
  const out = new Map<number, Map<string, number>>();
  for (const m of text.matchAll(COMM_RE)) {
    const rank = Number(m[1]);
    const names = out.get(rank) ?? new Map<string, number>();
    names.set(m[2] ?? '', Number(m[3]));
    out.set(rank, names);
  }
  return out;
}
