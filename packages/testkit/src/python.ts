// Python (mpi4py) fixture jobs for the tests: Debian's python3 with python3-mpi4py, run on the
// debug Open MPI 4.1.4 build (its libraries first on the library path: the same ABI as the
// Debian Open MPI mpi4py was built against), and the lines of a fixture's MQD_LINE markers.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FIXTURES_DIR } from './config.js';
import { mpiPrefix } from './fixtures.js';
import type { LaunchOptions } from './launch.js';

export const PYTHON = '/usr/bin/python3';
export const PYTHON_FIXTURES = join(FIXTURES_DIR, '..', 'python');

/** True when Debian's python3 can import mpi4py (python3-mpi4py, scripts/provision.sh). */
export function mpi4pyInstalled(): boolean {
  return existsSync(PYTHON) && existsSync('/usr/lib/python3/dist-packages/mpi4py/__init__.py');
}

/** The launch options of fixtures/python/<name>.py on np ranks of Open MPI 4.1.4's debug build. */
export function pythonLaunch(name: string, np: number, extra: Partial<LaunchOptions> = {}): LaunchOptions {
  const lib = join(mpiPrefix('openmpi'), 'lib');
  return {
    mpi: 'openmpi',
    fixture: `python:${name}`,
    program: [PYTHON, join(PYTHON_FIXTURES, `${name}.py`)],
    np,
    ...extra,
    env: {
      LD_LIBRARY_PATH: [lib, process.env.LD_LIBRARY_PATH].filter(Boolean).join(':'),
      PYTHONDONTWRITEBYTECODE: '1',
      ...extra.env,
    },
  };
}

/** The 1-based line of the `# MQD_LINE <tag>` marker in fixtures/python/<name>.py. */
export function markerLine(name: string, tag: string): number {
  const lines = readFileSync(join(PYTHON_FIXTURES, `${name}.py`), 'utf8').split('\n');
  const at = lines.findIndex((l) => l.endsWith(`# MQD_LINE ${tag}`));
  if (at < 0) throw new Error(`fixtures/python/${name}.py has no '# MQD_LINE ${tag}' marker`);
  return at + 1;
}
