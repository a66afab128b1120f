// Hybrid MPI+OpenMP fixtures (fixtures/hybrid/*.c): the OMPD-enabled OpenMP runtime
// they link, their binaries, the OpenMP thread states each rank must show, and an independent
// oracle that reads those states with LLVM's own gdb OMPD plugin.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { err, ok, type Pid, type Result } from '@mqd/model';
import {
  type AnyMpiName,
  HYBRID_FIXTURES_DIR,
  mpiCacheDir,
  OPENMP_VERSION,
  openmpPrefixDir,
} from './config.js';
import { compileCached, mpiPrefix, requireMpi } from './fixtures.js';
import { parseEuStack, runEuStack } from './stack.js';

// ---- the runtime ------------------------------------------------------------------------------

/** Install prefix of the OMPD-enabled LLVM OpenMP runtime (lib/libomp.so, lib/libompd.so, include/). */
export function openmpPrefix(): string {
  return openmpPrefixDir();
}

const openmpStamp = (): string => join(openmpPrefix(), '.mqd-built');

/** True when scripts/provision.sh has built the OMPD-enabled runtime (its stamp file exists). */
export function openmpAvailable(): boolean {
  return existsSync(openmpStamp());
}

/** Says what is missing and what to do; tests fail with it rather than skip. */
export function openmpMissingMessage(): string {
  return (
    `MQD_TESTKIT_E_NO_OPENMP: the OMPD-enabled LLVM OpenMP runtime ${OPENMP_VERSION} is not built ` +
    `(no ${openmpStamp()}): run \`npm run provision\` (scripts/provision.sh) first, ` +
    'or set MQD_OPENMP_PREFIX (or MQD_MPI_CACHE) to where it was built'
  );
}

/** Throws openmpMissingMessage unless the runtime is provisioned. */
export function requireOpenmp(): void {
  if (!openmpAvailable()) throw new Error(openmpMissingMessage());
}

// ---- the fixtures -----------------------------------------------------------------------------

export type HybridFixture = 'omp_single_recv' | 'omp_lock_deadlock' | 'omp_nested' | 'omp_taskwait';

/** Every hybrid fixture (fixtures/hybrid/README.md). */
export const HYBRID_FIXTURES: readonly HybridFixture[] = [
  'omp_single_recv',
  'omp_lock_deadlock',
  'omp_nested',
  'omp_taskwait',
];

/** Ranks every hybrid fixture is written for (launchFixture's default np with `hybrid: true`). */
export const HYBRID_NP = 2;

export const isHybridFixture = (name: string): name is HybridFixture =>
  (HYBRID_FIXTURES as readonly string[]).includes(name);

/** Names of the hybrid fixtures (the .c files in fixtures/hybrid), sorted. */
export function listHybridFixtures(): string[] {
  return readdirSync(HYBRID_FIXTURES_DIR)
    .filter((f) => f.endsWith('.c'))
    .map((f) => f.slice(0, -2))
    .sort();
}

/**
 * Environment every hybrid launch gets unless the launch's own env or unsetEnv says otherwise.
 * OMP_DEBUG=enabled makes libomp keep its OMPD state; KMP_BLOCKTIME=0 lets threads waiting in
 * the runtime sleep at once instead of spinning (their OpenMP state is the same either way).
 */
export const HYBRID_DEFAULT_ENV: Readonly<Record<string, string>> = {
  OMP_DEBUG: 'enabled',
  KMP_BLOCKTIME: '0',
};

const shortHash = (text: string): string => createHash('sha256').update(text).digest('hex').slice(0, 8);

/**
 * Absolute path of a hybrid fixture's binary for this MPI: `<mpi>/bin/mpicc` driving clang-16
 * (OMPI_CC / MPICH_CC) with `-g -O0 -fopenmp` against the runtime in openmpPrefix() (rpath to
 * its lib/), cached in fixtures/hybrid/build/<mpi>/ (<mpi>-omp-<hash> for a runtime that
 * MQD_OPENMP_PREFIX puts elsewhere) and rebuilt when the source, a header, the
 * MPI build or the runtime is newer. Compiles to a temporary name and renames.
 */
export function hybridBinary(mpi: AnyMpiName, name: string): string {
  requireMpi(mpi);
  requireOpenmp();
  const source = join(HYBRID_FIXTURES_DIR, `${name}.c`);
  if (!/^[A-Za-z0-9_]+$/.test(name) || !existsSync(source)) {
    throw new Error(
      `MQD_TESTKIT_E_FIXTURE: no hybrid fixture '${name}' (${source}): use one of ${listHybridFixtures().join(', ')}`,
    );
  }
  const headers = [
    join(HYBRID_FIXTURES_DIR, 'hybrid.h'),
    join(HYBRID_FIXTURES_DIR, '..', 'mpi', 'fixture.h'),
  ];
  const omp = openmpPrefix();
  // A runtime elsewhere (MQD_OPENMP_PREFIX) gets its own directory: the binaries' rpath names it.
  const custom = omp === join(mpiCacheDir(), `llvm-openmp-${OPENMP_VERSION}`) ? '' : `-omp-${shortHash(omp)}`;
  const outDir = join(HYBRID_FIXTURES_DIR, 'build', `${mpi}${custom}`);
  const mpicc = join(mpiPrefix(mpi), 'bin', 'mpicc');
  return compileCached({
    binary: join(outDir, name),
    inputs: [source, ...headers, join(mpiPrefix(mpi), '.mqd-built'), openmpStamp()],
    cwd: HYBRID_FIXTURES_DIR,
    source,
    // Each wrapper reads its own variable; both name the compiler libomp was built with.
    env: { ...process.env, OMPI_CC: 'clang-16', MPICH_CC: 'clang-16' },
    steps: (tmp) => [
      {
        file: mpicc,
        args: [
          '-g',
          '-O0',
          '-Wall',
          '-fopenmp',
          `-I${join(omp, 'include')}`,
          `-I${join(HYBRID_FIXTURES_DIR, '..', 'mpi')}`,
          '-o',
          tmp,
          source,
          `-L${join(omp, 'lib')}`,
          `-Wl,-rpath,${join(omp, 'lib')}`,
        ],
      },
    ],
  });
}

// ---- what each rank's OpenMP threads must show -----------------------------------------------

/** LLVM's kinds of task, as OmpThread.task.kind in @mqd/model names them. */
export type OmpTaskKind = 'initial' | 'implicit' | 'explicit';

/** One OpenMP thread of a rank as a hybrid fixture leaves it (fixtures/hybrid/README.md). */
export interface ExpectedOmpThread {
  /** omp_get_thread_num() in the thread's innermost team. */
  readonly threadNum: number;
  /** The state name libompd's ompd_enumerate_states gives (LLVM: "ompt_state_*"). */
  readonly state: string;
  /** The innermost parallel region: its team size and nesting level (1 = outermost). */
  readonly parallel: { readonly teamSize: number; readonly level: number };
  /** The kind of task the thread executes. */
  readonly taskKind: OmpTaskKind;
  /**
   * The call this thread blocks in, which its stack shows (MPI_Recv, omp_set_lock, or the
   * runtime's __kmpc_omp_taskwait, whose thread LLVM 16 leaves in work_parallel); null for a
   * thread waiting at a barrier.
   */
  readonly call: string | null;
  /**
   * The fixture's omp_lock_t the thread waits for (its OMPD wait id is then that lock's runtime
   * object: nonzero, equal for threads waiting on the same lock); null when the wait id is 0.
   */
  readonly lock: string | null;
}

const thread = (
  threadNum: number,
  state: string,
  teamSize: number,
  level: number,
  taskKind: OmpTaskKind,
  call: string | null = null,
  lock: string | null = null,
): ExpectedOmpThread => ({ threadNum, state, parallel: { teamSize, level }, taskKind, call, lock });

// LLVM 16's names (ompd_enumerate_states), as measured with the oracle on these fixtures.
const WORK = 'ompt_state_work_parallel';
/** A barrier the program asks for or a construct implies (omp single's), __kmpc_barrier. */
const BARRIER = 'ompt_state_wait_barrier';
/** The implicit barrier at the end of a parallel region (the join barrier). */
const END_BARRIER = 'ompt_state_wait_barrier_implicit';
const LOCK = 'ompt_state_wait_lock';

/**
 * Per hybrid fixture, per rank (index = rank, HYBRID_NP ranks), the OpenMP threads of that rank
 * sorted by (parallel.level, threadNum). Every thread is predictable: the fixtures order their
 * threads with counters before the blocking point, never by chance.
 */
export const EXPECTED_OPENMP: Readonly<Record<HybridFixture, readonly (readonly ExpectedOmpThread[])[]>> = {
  omp_single_recv: [0, 1].map(() => [
    thread(0, WORK, 4, 1, 'implicit', 'MPI_Recv'),
    thread(1, BARRIER, 4, 1, 'implicit'),
    thread(2, BARRIER, 4, 1, 'implicit'),
    thread(3, BARRIER, 4, 1, 'implicit'),
  ]),
  omp_lock_deadlock: [0, 1].map(() => [
    thread(0, LOCK, 4, 1, 'implicit', 'omp_set_lock', 'lock_b'),
    thread(1, LOCK, 4, 1, 'implicit', 'omp_set_lock', 'lock_a'),
    thread(2, END_BARRIER, 4, 1, 'implicit'),
    thread(3, END_BARRIER, 4, 1, 'implicit'),
  ]),
  omp_nested: [0, 1].map(() => [
    thread(0, END_BARRIER, 2, 1, 'implicit'),
    thread(0, END_BARRIER, 2, 2, 'implicit'),
    thread(1, WORK, 2, 2, 'implicit', 'MPI_Recv'),
  ]),
  omp_taskwait: [0, 1].map(() => [
    // LLVM 16 sets no wait state for taskwait: only the stack tells it from working.
    thread(0, WORK, 4, 1, 'implicit', '__kmpc_omp_taskwait'),
    thread(1, WORK, 4, 1, 'explicit', 'MPI_Recv'),
    thread(2, END_BARRIER, 4, 1, 'implicit'),
    thread(3, END_BARRIER, 4, 1, 'implicit'),
  ]),
};

/**
 * Tags of the pending receives every rank has posted on MPI_COMM_WORLD (all MPI_ANY_SOURCE,
 * 1 MPI_INT, nobody sends); no rank has a send queued.
 */
export const HYBRID_WORLD_RECEIVE_TAGS: Readonly<Record<HybridFixture, readonly number[]>> = {
  omp_single_recv: [7],
  omp_lock_deadlock: [],
  omp_nested: [8],
  omp_taskwait: [9],
};

/** The call each rank's READY line names (the thread that blocks last). */
export function expectedHybridCall(fixture: HybridFixture, rank: number): string {
  const threads = EXPECTED_OPENMP[fixture][rank] ?? [];
  const call = threads.find((t) => t.call !== null && t.call !== '__kmpc_omp_taskwait')?.call;
  if (call === undefined || call === null) {
    throw new Error(`MQD_TESTKIT_E_FIXTURE: no blocking call for rank ${rank} of '${fixture}'`);
  }
  return call;
}

// ---- the oracle: LLVM's gdb OMPD plugin -------------------------------------------------------

/** One OpenMP thread as LLVM's gdb OMPD plugin reads it from a stopped rank. */
export interface OracleThread {
  /** Linux thread id. */
  readonly tid: number;
  /** thread-num-var of the thread (omp_get_thread_num()); null when libompd gave none. */
  readonly threadNum: number | null;
  /** State name (ompd_enumerate_states). */
  readonly state: string;
  /** The wait id, 0x hex ("0x0" when the state has none). */
  readonly waitId: string;
  /** The current task's entry function (gdb's name for ompd_get_task_function's address); null when unknown. */
  readonly function: string | null;
  /** That entry address, 0x hex; null when libompd gave none. */
  readonly entry: string | null;
  /** levels-var of the thread's current parallel region; null when it has none. */
  readonly level: number | null;
  /** team-size-var of that region; null when it has none. */
  readonly teamSize: number | null;
  /** implicit-task-var of the current task: 'implicit' or 'explicit'; null when unreadable. */
  readonly taskKind: 'implicit' | 'explicit' | null;
}

export interface OracleReport {
  /** Every thread libompd has a handle for, sorted by (level, threadNum, tid). */
  readonly threads: readonly OracleThread[];
  /** Lines the plugin printed that are not records (e.g. why OMPD could not be initialised). */
  readonly notes: readonly string[];
  /** gdb's whole output, for failure messages. */
  readonly raw: string;
}

export interface OracleOptions {
  /** Time for gdb to attach, read and detach; it is killed after it. 60 s by default. */
  readonly timeoutMs?: number;
}

/** The gdb OMPD plugin Debian's libomp-16-dev ships. */
export const OMPD_GDB_PLUGIN = '/usr/lib/llvm-16/share/gdb/python/ompd/__init__.py';
/** Our driver for the plugin's ompdModule (packages/testkit/ompd-oracle.py). */
export const OMPD_ORACLE_SCRIPT: string = fileURLToPath(new URL('../ompd-oracle.py', import.meta.url));

/** Parses the driver's output (MQD_OMPD_THREAD and MQD_OMPD_NOTE lines). */
export function parseOracleOutput(text: string): Omit<OracleReport, 'raw'> {
  const threads: OracleThread[] = [];
  const notes: string[] = [];
  for (const line of text.split('\n')) {
    const rec = /^MQD_OMPD_(THREAD|NOTE) (.*)$/.exec(line.trimEnd());
    if (rec === null) continue;
    const body = rec[2] ?? '';
    if (rec[1] === 'NOTE') {
      notes.push(body);
    } else {
      threads.push(parseThreadRecord(body));
    }
  }
  threads.sort(
    (a, b) => (a.level ?? -1) - (b.level ?? -1) || (a.threadNum ?? -1) - (b.threadNum ?? -1) || a.tid - b.tid,
  );
  return { threads, notes };
}

function parseThreadRecord(json: string): OracleThread {
  const v: unknown = JSON.parse(json);
  if (typeof v !== 'object' || v === null) throw new Error(`MQD_TESTKIT_E_ORACLE: bad record ${json}`);
  const o = v as Record<string, unknown>;
  const int = (k: string): number | null => (typeof o[k] === 'number' ? (o[k] as number) : null);
  const str = (k: string): string | null => (typeof o[k] === 'string' ? (o[k] as string) : null);
  const kind = str('taskKind');
  return {
    tid: int('tid') ?? 0,
    threadNum: int('threadNum'),
    state: str('state') ?? '?',
    waitId: str('waitId') ?? '0x0',
    function: str('function'),
    entry: str('entry'),
    level: int('level'),
    teamSize: int('teamSize'),
    taskKind: kind === 'implicit' || kind === 'explicit' ? kind : null,
  };
}

const ORACLE_TIMEOUT_MS = 60_000;

/**
 * Every thread's frames of `pid` (innermost first), by Linux thread id, from one eu-stack
 * sample: to check the call a thread of EXPECTED_OPENMP blocks in, joined by the oracle's tid.
 */
export async function threadFrames(
  pid: Pid,
): Promise<Result<ReadonlyMap<number, readonly string[]>, string>> {
  const run = await runEuStack(pid);
  if (!run.ok) return run;
  const { stdout, stderr, exit } = run.value;
  const tids = [...stdout.matchAll(/^TID (\d+):/gm)].map((m) => Number(m[1]));
  if (tids.length === 0) return err(`eu-stack -p ${pid} gave no threads (exit ${exit}): ${stderr.trim()}`);
  return ok(new Map(tids.map((tid) => [tid, parseEuStack(stdout, tid)])));
}

/**
 * Attaches Debian's gdb to `pid` (which stops it), loads LLVM's OMPD plugin, reads every
 * thread's OpenMP state through the plugin's ompdModule (packages/testkit/ompd-oracle.py) and
 * detaches (gdb -batch). gdb is killed if it outlives the timeout. Do not run it on a pid that
 * another tracer holds. A missing gdb or a timeout is an error value; a rank without OMPD state
 * (no OMP_DEBUG) is an ok report with no threads and the plugin's notes.
 */
export function ompdOracle(pid: Pid, opts: OracleOptions = {}): Promise<Result<OracleReport, string>> {
  const timeoutMs = opts.timeoutMs ?? ORACLE_TIMEOUT_MS;
  const args = [
    '-q',
    '-nx',
    '-batch',
    '-p',
    String(pid),
    '-ex',
    'set pagination off',
    '-x',
    OMPD_ORACLE_SCRIPT,
  ];
  return new Promise((resolve) => {
    const child = spawn('gdb', args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MQD_OMPD_PLUGIN: OMPD_GDB_PLUGIN },
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve(
        err(`MQD_TESTKIT_E_ORACLE: cannot run gdb (${e.message}): install gdb (scripts/provision.sh does)`),
      );
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (timedOut) {
        resolve(
          err(`MQD_TESTKIT_E_ORACLE: gdb on pid ${pid} took over ${timeoutMs} ms and was killed:\n${out}`),
        );
        return;
      }
      if (!out.includes('MQD_OMPD_DONE')) {
        resolve(
          err(
            `MQD_TESTKIT_E_ORACLE: gdb on pid ${pid} ended (exit ${code ?? signal}) before the driver finished:\n${out}`,
          ),
        );
        return;
      }
      try {
        resolve(ok({ ...parseOracleOutput(out), raw: out }));
      } catch (e) {
        resolve(err(`${e instanceof Error ? e.message : String(e)}\n${out}`));
      }
    });
  });
}
