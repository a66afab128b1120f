import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type AnyMpiName, MPI_LABELS, MPI_VERSIONS } from './config.js';
import { type CompileStep, compileCached, mpiPrefix, requireMpi } from './fixtures.js';

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
 * True when this MPI build has the language: Fortran needs the build's mpi_f08 module (every
 * build provisioning makes is configured with gfortran; an MPI built elsewhere may not be); C++
 * works everywhere (MPICH's mpicc drives g++ when told the language, where there is no mpicxx).
 */
export function languageAvailable(mpi: AnyMpiName, language: FixtureLanguage): boolean {
  if (language === 'cxx') return true;
  return fortranModule(mpi) !== null;
}

/** Where the build installed mpi_f08.mod: Open MPI puts it in lib/, MPICH in include/. */
function fortranModule(mpi: AnyMpiName): string | null {
  for (const dir of ['lib', 'include']) {
    const mod = join(mpiPrefix(mpi), dir, 'mpi_f08.mod');
    if (existsSync(mod)) return mod;
  }
  return null;
}

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
        `(no mpi_f08.mod in ${join(mpiPrefix(mpi), 'lib')} or include): use an MPI provisioned with gfortran`,
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
  const bin = join(mpiPrefix(mpi), 'bin');
  const compile = (tmp: string): CompileStep => {
    if (language === 'fortran')
      // Module files (a fixture's own `module`) go beside the binary, never into the sources.
      return {
        file: join(bin, 'mpifort'),
        args: ['-g', '-O0', '-Wall', '-J', dirname(tmp), '-o', tmp, source],
      };
    if (existsSync(join(bin, 'mpicxx')))
      return { file: join(bin, 'mpicxx'), args: ['-g', '-O0', '-Wall', `-I${cHeaders}`, '-o', tmp, source] };
    // An MPICH built without its C++ wrapper: its mpicc drives g++ when told the language.
    return {
      file: join(bin, 'mpicc'),
      args: ['-g', '-O0', '-Wall', `-I${cHeaders}`, '-o', tmp, '-x', 'c++', source, '-x', 'none', '-lstdc++'],
    };
  };
  return compileCached({
    binary: join(dir, 'build', mpi, name),
    inputs: [source, ...headers, join(mpiPrefix(mpi), '.mqd-built')],
    cwd: dir,
    source,
    steps: (tmp) => [compile(tmp)],
  });
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
