// Builds the OMPD test natives (native/ompd: an OpenMP "rank" on LLVM's OMPD-enabled runtime,
// a rank naming a misbehaving libompd, the crashing and looping libompd) into native/build/ompd,
// after the conformance kit (they link its libmpi_mqdtest.so), and parks OpenMP targets.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUILD, type Built, buildConformance, startTarget, type Target, waitFor } from './conformance-kit.js';

export const OMPD_NATIVE = fileURLToPath(new URL('../native/ompd', import.meta.url));
export const OMPD_BUILD = join(BUILD, 'ompd');
/** The OMPD-enabled LLVM OpenMP runtime the provisioning builds. */
export const OPENMP_PREFIX = join(process.env['MQD_MPI_CACHE'] ?? '/var/cache/mqd-mpi', 'llvm-openmp-16.0.6');

export interface OmpdBuilt {
  readonly conformance: Built;
  readonly target: string;
  readonly fakeTarget: string;
  readonly crashLib: string;
  readonly loopLib: string;
}

/** Modes of omptest_target (native/ompd/omp_target.c). */
export const OMP_MODE = { single: 1, lock: 2, task: 3 } as const;

/** The environment the targets park in: OMPD state kept, waiting threads asleep. */
export const OMP_ENV = { OMP_DEBUG: 'enabled', OMP_WAIT_POLICY: 'passive', KMP_LOCK_KIND: 'futex' } as const;

export function openmpRuntimeMissing(): string | null {
  const lib = join(OPENMP_PREFIX, 'lib', 'libompd.so');
  return existsSync(lib)
    ? null
    : `${lib} is missing: run scripts/provision.sh (it builds LLVM's OpenMP with OMPD)`;
}

let built: OmpdBuilt | null = null;
export function buildOmpd(): OmpdBuilt {
  if (!built) {
    const conformance = buildConformance();
    execFileSync('make', ['-s', `OUT=${OMPD_BUILD}`, `CONF=${BUILD}`, `P=${OPENMP_PREFIX}`], {
      cwd: OMPD_NATIVE,
      stdio: 'pipe',
    });
    built = {
      conformance,
      target: join(OMPD_BUILD, 'omptest_target'),
      fakeTarget: join(OMPD_BUILD, 'fakeompd_target'),
      crashLib: join(OMPD_BUILD, 'libompd_crash.so'),
      loopLib: join(OMPD_BUILD, 'libompd_loop.so'),
    };
  }
  return built;
}

/** Every thread of `pid` asleep (state S): the shape the target parks in is reached. */
export function allAsleep(pid: number): boolean {
  try {
    return readdirSync(`/proc/${pid}/task`).every((tid) =>
      /^\d+ \(.*\) S /.test(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')),
    );
  } catch {
    return false;
  }
}

/** Starts omptest_target in `mode` and resolves once it is parked (READY, then all threads asleep). */
export async function startOmpTarget(
  b: OmpdBuilt,
  mode: number,
  env: Record<string, string> = OMP_ENV,
  threads = 0,
): Promise<Target> {
  const t = await startTarget(b.target, b.conformance.dll, mode, 0, env);
  await waitFor(
    () => allAsleep(t.pid) && (threads === 0 || readdirSync(`/proc/${t.pid}/task`).length === threads),
    10_000,
  );
  return t;
}
