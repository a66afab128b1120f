// Launch a hang fixture under a real MPI starter, wait until every rank is provably where the
// fixture says it hangs, and always take the whole process tree down again.
import { type ChildProcess, spawn } from 'node:child_process';
import { setPriority } from 'node:os';
import { dirname, join } from 'node:path';
import { assertUnreachable, Pid, Rank } from '@mqd/model';
import {
  type AnyMpiName,
  DEFAULT_DISPOSE_TIMEOUT_MS,
  DEFAULT_LAUNCH_TIMEOUT_MS,
  MPI_LABELS,
} from './config.js';
import { blocksOffMainThread } from './expected-stacks.js';
import { fixtureBinary, mpiPrefix, requireMpi } from './fixtures.js';
import { HYBRID_DEFAULT_ENV, HYBRID_NP, hybridBinary } from './hybrid.js';
import { type FixtureLanguage, languageBinary } from './languages.js';
import {
  descendants,
  isGone,
  isRunning,
  isZombie,
  listProcesses,
  type ProcIdentity,
  statOf,
} from './procfs.js';
import { type ExitStatus, SpawnedProcess, trySignal } from './spawned.js';
import { rankBlockedIn } from './stack.js';
import { done, failed, pending, WaitTimeoutError, waitFor } from './wait.js';

export type WaitCondition = 'ready' | 'blocked';

export interface LaunchOptions {
  readonly mpi: AnyMpiName;
  /**
   * A fixture name: the basename of a fixtures/mpi/*.c file, e.g. 'ring_ssend' (with `hybrid`:
   * of a fixtures/hybrid/*.c file, e.g. 'omp_single_recv').
   */
  readonly fixture: string;
  /**
   * A hybrid MPI+OpenMP fixture (fixtures/hybrid, built by hybridBinary): np defaults to
   * HYBRID_NP, the ranks get HYBRID_DEFAULT_ENV (OMP_DEBUG=enabled, KMP_BLOCKTIME=0) under
   * `env`, and 'blocked' accepts the named call on any thread of the rank.
   */
  readonly hybrid?: boolean;
  /**
   * The fixture's Fortran or C++ version (fixtures/fortran, fixtures/cxx, built by
   * languageBinary): same name, same queues as the C fixture.
   */
  readonly language?: FixtureLanguage;
  /**
   * What each rank runs instead of a built fixture: an absolute program and its arguments, e.g.
   * ['/usr/bin/python3', '/…/fixtures/python/wrong_tag.py']; `fixture` then only names the job.
   */
  readonly program?: readonly [string, ...string[]];
  /**
   * Number of ranks; 4 by default (fixtures/mpi/README.md documents the queues for 4), 2 for
   * hybrid fixtures.
   */
  readonly np?: number;
  /** Extra environment for the starter and the ranks; wins over the defaults. */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Variables removed from the environment after the defaults and `env` are applied, e.g.
   * ['OMP_DEBUG'] to run a hybrid fixture without OMPD state.
   */
  readonly unsetEnv?: readonly string[];
  /**
   * 'ready': every rank printed its READY line. 'blocked' (default): also, each rank's main
   * thread (any thread for hybrid fixtures and thread_multiple) is inside the call its READY
   * line names (checked with eu-stack).
   */
  readonly waitFor?: WaitCondition;
  /** Time for the whole launch, READY lines and stack checks included. */
  readonly timeoutMs?: number;
}

export interface RankProcess {
  readonly rank: Rank;
  readonly pid: Pid;
  /** The MPI call the rank said it is about to block in (its READY line). */
  readonly call: string;
}

/** How the starter ended. */
export type JobExit = ExitStatus;

export interface FixtureJob {
  readonly mpi: AnyMpiName;
  readonly fixture: string;
  readonly np: number;
  /**
   * mpirun (Open MPI 4: orterun; Open MPI 5: PRRTE's prterun, which has no MPIR process table)
   * or mpiexec (MPICH hydra), the child this process spawned.
   */
  readonly starterPid: Pid;
  /** Sorted by rank, one per rank. */
  readonly ranks: readonly RankProcess[];
  /** The MPI install prefix, e.g. /var/cache/mqd-mpi/openmpi-4.1.4. */
  readonly prefix: string;
  /** Absolute path of the fixture binary the ranks run. */
  readonly binary: string;
  /** Everything the starter printed so far (stdout and stderr, in arrival order). */
  output(): string;
  /** The starter's exit status once it has exited and its output is complete. */
  exitStatus(): JobExit | undefined;
  /** Waits for the starter to exit (for fixtures that complete, like ring_ok). */
  waitForExit(timeoutMs?: number): Promise<JobExit>;
  /** Kills the starter and every process under it and waits until all are gone. Idempotent. */
  dispose(): Promise<void>;
}

const READY_RE = /^MQD_FIXTURE_READY rank=(\d+) pid=(\d+) call=(\S+)\s*$/gm;

/** The READY lines in some output, in the order printed. */
export function parseReadyLines(text: string): RankProcess[] {
  return [...text.matchAll(READY_RE)].map((m) => ({
    rank: Rank(Number(m[1])),
    pid: Pid(Number(m[2])),
    call: m[3] ?? '',
  }));
}

interface StarterCommand {
  readonly file: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/** Open MPI's mpirun on np local ranks, more ranks than cores allowed (each version spells it its way). */
const mpirunArgs = (oversubscribe: readonly string[], np: number, binary: string): string[] => [
  '--allow-run-as-root',
  ...oversubscribe,
  '--bind-to',
  'none',
  '-np',
  String(np),
  '--mca',
  'mpi_yield_when_idle',
  '1',
  binary,
];

/** The command line and environment that start `binary` on np local ranks. */
export function starterCommand(mpi: AnyMpiName, np: number, binary: string): StarterCommand {
  const bin = join(mpiPrefix(mpi), 'bin');
  switch (mpi) {
    case 'openmpi':
      return {
        file: join(bin, 'mpirun'),
        args: mpirunArgs(['--oversubscribe'], np, binary),
        env: {
          // Shared memory and self only: no network is needed (or wanted) in a container.
          OMPI_MCA_btl: 'self,vader',
          // The message-queue DLL reads ob1's request lists; other PMLs leave them empty.
          OMPI_MCA_pml: 'ob1',
          // CMA (process_vm_readv) is often denied in containers; the fixtures never need it.
          OMPI_MCA_btl_vader_single_copy_mechanism: 'none',
          // mpirun warns about MPIR deprecation whenever a debugger is around.
          OMPI_MPIR_DO_NOT_WARN: '1',
        },
      };
    case 'mpich':
      return {
        file: join(bin, 'mpiexec'),
        args: ['-launcher', 'fork', '-n', String(np), binary],
        env: {
          // Hung ranks busy-poll; yielding on every poll leaves the cores to whoever else runs.
          MPIR_CVAR_POLLS_BEFORE_YIELD: '1',
        },
      };
    case 'openmpi5':
      // mpirun is PRRTE's prterun here. --oversubscribe is deprecated in favour of this map-by
      // qualifier (prterun translates the old flag and may warn); the MCA names below are the
      // 5.x ones: btl/vader became btl/sm, and single-copy moved to its own framework, smsc.
      return {
        file: join(bin, 'mpirun'),
        args: mpirunArgs(['--map-by', ':OVERSUBSCRIBE'], np, binary),
        env: {
          OMPI_MCA_btl: 'self,sm',
          // The message-queue DLL reads ob1's request lists; other PMLs leave them empty.
          OMPI_MCA_pml: 'ob1',
          // No single-copy component (CMA, i.e. process_vm_readv, is often denied in containers).
          OMPI_MCA_smsc: '^cma,knem,xpmem',
          // prterun's ranks outlive it when it is SIGKILLed (setpriv's pdeathsig reaches only
          // prterun): fixture.h then asks the kernel to kill each rank with its parent.
          MQD_FIXTURE_PDEATHSIG: '1',
        },
      };
    case 'mpich42':
    case 'mpichch4':
      // The same hydra. ch4 has no POLLS_BEFORE_YIELD (that CVAR is ch3:nemesis's). The fixtures
      // run on one node: ch4's shared-memory module carries every message, libfabric's
      // TCP provider (the embedded one) only brings the job up without a real network.
      return {
        file: join(bin, 'mpiexec'),
        args: ['-launcher', 'fork', '-n', String(np), binary],
        env: {
          FI_PROVIDER: 'tcp',
        },
      };
    default:
      return assertUnreachable(mpi);
  }
}

// ---- the registry of live jobs: killed on exit and on SIGINT/SIGTERM ------------------------

const liveJobs = new Set<Job>();
let handlersInstalled = false;

function killAllNow(): void {
  for (const job of liveJobs) job.killNow();
}

function onSignal(signal: NodeJS.Signals): void {
  killAllNow();
  // Hand the signal on: without our listener the default action (or another listener) runs.
  process.removeListener('SIGINT', onSignal);
  process.removeListener('SIGTERM', onSignal);
  process.removeListener('exit', killAllNow);
  handlersInstalled = false;
  process.kill(process.pid, signal);
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  // 'exit' listeners must be synchronous: killAllNow only sends signals.
  process.on('exit', killAllNow);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

/** Disposes every job still alive in this process (for afterAll hooks). */
export async function disposeAll(): Promise<void> {
  await Promise.all([...liveJobs].map((j) => j.dispose()));
}

/** How many launched jobs have not been disposed yet. */
export const liveJobCount = (): number => liveJobs.size;

// ---- one job ----------------------------------------------------------------------------------

class Job extends SpawnedProcess implements FixtureJob {
  readonly prefix: string;
  ranks: readonly RankProcess[] = [];
  readonly starterPid: Pid;
  private disposing: Promise<void> | undefined;

  constructor(
    readonly mpi: AnyMpiName,
    readonly fixture: string,
    readonly np: number,
    readonly binary: string,
    child: ChildProcess,
  ) {
    super(child);
    this.prefix = mpiPrefix(mpi);
    this.starterPid = Pid(child.pid ?? 0);
    this.remember(this.starterPid);
  }

  async waitForExit(timeoutMs = DEFAULT_LAUNCH_TIMEOUT_MS): Promise<JobExit> {
    return waitFor(() => (this.exit ? done(this.exit) : pending()), {
      timeoutMs,
      what: `${this.describe()} to exit`,
    });
  }

  describe(): string {
    return `${MPI_LABELS[this.mpi]} job ${this.fixture} (np=${this.np}, starter pid ${this.starterPid})`;
  }

  /**
   * True while the starter's pid cannot name anything else: until it is reaped, no new process
   * or process group can get that id, so its process group is still the job's.
   */
  private starterHeld(): boolean {
    const id = this.known.get(this.starterPid);
    return id !== undefined && !isGone(id);
  }

  /** SIGKILLs the starter's process group, but only while that group id is surely ours. */
  private killGroup(): void {
    if (this.starterHeld()) trySignal(-this.starterPid, 'SIGKILL');
  }

  /** Adds the current process tree (descendants of every known process, the starter's group). */
  private collect(): void {
    const procs = listProcesses();
    if (this.starterHeld()) for (const p of procs) if (p.pgid === this.starterPid) this.remember(p.pid);
    for (const r of this.ranks) this.remember(r.pid);
    let before = -1;
    while (before !== this.known.size) {
      before = this.known.size;
      for (const id of [...this.known.values()]) {
        if (statOf(id) === undefined) continue;
        for (const d of descendants(id.pid, procs)) this.remember(d.pid);
      }
    }
  }

  /** SIGKILLs every known process that is still the process we saw. */
  private killKnown(filter: (id: ProcIdentity) => boolean = () => true): void {
    for (const id of this.known.values()) if (filter(id) && isRunning(id)) trySignal(id.pid, 'SIGKILL');
  }

  /** Synchronous best effort, for process 'exit' and signals. */
  killNow(): void {
    this.collect();
    this.killGroup();
    this.killKnown();
  }

  /** Records the ranks of the READY lines, with their identities. */
  setRanks(ranks: readonly RankProcess[]): void {
    this.ranks = [...ranks].sort((a, b) => a.rank - b.rank);
    for (const r of this.ranks) this.remember(r.pid);
  }

  rankRunning(r: RankProcess): boolean {
    const id = this.known.get(r.pid);
    return id !== undefined && isRunning(id);
  }

  dispose(timeoutMs = DEFAULT_DISPOSE_TIMEOUT_MS): Promise<void> {
    this.disposing ??= this.teardown(timeoutMs).finally(() => liveJobs.delete(this));
    return this.disposing;
  }

  private async teardown(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    this.collect();
    // Leaves first (the ranks and anything under them) while the starter and the proxies are
    // alive to reap them; killing the parents first would leave the ranks as orphans for init.
    const rankPids = new Set(this.ranks.map((r) => r.pid));
    const rankTrees = new Set<number>(rankPids);
    for (const pid of rankPids) for (const d of descendants(pid)) rankTrees.add(d.pid);
    this.killKnown((id) => rankTrees.has(id.pid));
    await waitFor(
      () =>
        [...this.known.values()].every((id) => !rankTrees.has(id.pid) || isGone(id)) ? done(true) : pending(),
      {
        timeoutMs: Math.min(2_000, Math.max(0, deadline - Date.now())),
        what: 'ranks reaped by their parents',
      },
    ).catch(() => {
      // Not reaped yet (the parent may be busy dying itself): init reaps them below instead.
    });

    // Then everything else: the starter's process group and every process ever seen.
    await waitFor(
      () => {
        this.collect();
        this.killGroup();
        this.killKnown();
        const left = [...this.known.values()].filter((id) => !isGone(id));
        return left.length === 0 ? done(true) : pending(this.describeLeft(left));
      },
      {
        timeoutMs: Math.max(0, deadline - Date.now()),
        what: `every process of ${this.describe()} to be gone`,
      },
    ).catch((e: unknown) => {
      const left = [...this.known.values()].filter((id) => !isGone(id));
      // A zombie has exited; only its reaping (by init) is pending. Anything else is a leak.
      if (left.some(isRunning)) throw e;
    });
    // The starter is gone, so its pipes close unless a stray process still holds them.
    await this.pipesClosed(
      Math.max(1_000, deadline - Date.now()),
      `the output pipes of ${this.describe()} to close`,
    );
  }

  private describeLeft(left: readonly ProcIdentity[]): string {
    return left
      .map((id) => {
        const st = statOf(id);
        return st === undefined
          ? `${id.pid}`
          : `${id.pid} ${st.comm} (${isZombie(st) ? 'zombie' : st.state})`;
      })
      .join(', ');
  }
}

/** Builds whose hung ranks busy-poll without ever yielding the core (see launchFixture). */
const SPINS_WITHOUT_YIELD: ReadonlySet<AnyMpiName> = new Set<AnyMpiName>(['mpich42', 'mpichch4']);

/** Nice 19 for a rank's main thread (the one that polls); a rank that is already gone is fine. */
function renice(pid: number): void {
  try {
    setPriority(pid, 19);
  } catch {
    // ESRCH: the rank exited; the launch's own checks report that.
  }
}

/**
 * Starts `fixture` on `np` ranks under the MPI's own starter and waits until every rank printed
 * its READY line and (for waitFor 'blocked') is inside the call it named. On failure the job is
 * disposed and the Error message carries the job's output. Pair every launch with dispose().
 */
export async function launchFixture(opts: LaunchOptions): Promise<FixtureJob> {
  const hybrid = opts.hybrid === true;
  const np = opts.np ?? (hybrid ? HYBRID_NP : 4);
  const waitCondition = opts.waitFor ?? 'blocked';
  const timeoutMs = opts.timeoutMs ?? DEFAULT_LAUNCH_TIMEOUT_MS;
  if (!Number.isInteger(np) || np < 1) throw new RangeError(`np must be a positive integer, got ${np}`);
  requireMpi(opts.mpi);
  const binary = opts.program
    ? opts.program[0]
    : hybrid
      ? hybridBinary(opts.mpi, opts.fixture)
      : opts.language !== undefined
        ? languageBinary(opts.mpi, opts.language, opts.fixture)
        : fixtureBinary(opts.mpi, opts.fixture);
  const cmd = starterCommand(opts.mpi, np, binary);
  const env: Record<string, string | undefined> = {
    ...process.env,
    ...cmd.env,
    ...(hybrid ? HYBRID_DEFAULT_ENV : {}),
    ...opts.env,
  };
  for (const name of opts.unsetEnv ?? []) delete env[name];
  const anyThread = hybrid || blocksOffMainThread(opts.fixture);

  installHandlers();
  // Through setpriv --pdeathsig: if this process dies without disposing the job (a test worker
  // killed by a native crash), the starter is killed with it and takes its ranks down, instead
  // of leaving a hung job (some spin) on the machine.
  const programArgs = opts.program?.slice(1) ?? [];
  const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', cmd.file, ...cmd.args, ...programArgs], {
    cwd: dirname(binary),
    env,
    // Its own process group, so the job can be killed as a group and a ^C of the test runner
    // reaches us first (we then kill the job) rather than racing us to the ranks.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const spawned = await new Promise<Error | undefined>((resolve) => {
    child.once('spawn', () => resolve(undefined));
    child.once('error', (e) => resolve(e));
  });
  if (spawned !== undefined || child.pid === undefined) {
    throw new Error(
      `MQD_TESTKIT_E_LAUNCH: cannot start ${cmd.file} (${spawned?.message ?? 'no pid'}): check the MPI build in ${mpiPrefix(opts.mpi)}`,
    );
  }
  const job = new Job(opts.mpi, opts.fixture, np, binary, child);
  liveJobs.add(job);

  const deadline = Date.now() + timeoutMs;
  const left = () => Math.max(0, deadline - Date.now());
  try {
    const ranks = await waitFor(
      () => {
        const ready = parseReadyLines(job.output());
        const byRank = new Map<number, RankProcess>();
        for (const r of ready) {
          if (r.rank >= np) return failed(`a READY line names rank ${r.rank}, but np is ${np}`);
          if (byRank.has(r.rank)) return failed(`rank ${r.rank} printed two READY lines`);
          byRank.set(r.rank, r);
        }
        if (byRank.size === np) return done([...byRank.values()]);
        const status = job.exitStatus();
        if (status !== undefined) {
          return failed(
            `the starter exited (code ${status.code}, signal ${status.signal}) after ${byRank.size} of ${np} READY lines`,
          );
        }
        return pending(`${byRank.size} of ${np} READY lines`);
      },
      { timeoutMs: left(), what: `all ${np} READY lines` },
    );
    job.setRanks(ranks);
    // ch4's progress loop never yields in a single-threaded rank (MPIDI_PROGRESS_YIELD is the
    // global lock's yield, a no-op without MPI_THREAD_MULTIPLE) and ch4 has no
    // POLLS_BEFORE_YIELD: each hung rank spins a core flat out. At the lowest priority the spin
    // only takes what nobody else wants, so tests and readers beside the job keep the cores.
    if (SPINS_WITHOUT_YIELD.has(opts.mpi)) for (const r of job.ranks) renice(r.pid);

    if (waitCondition === 'blocked') {
      for (const r of job.ranks) {
        await waitFor(
          async () => {
            const status = job.exitStatus();
            if (status !== undefined)
              return failed(`the starter exited (code ${status.code}, signal ${status.signal})`);
            if (!job.rankRunning(r)) return failed(`rank ${r.rank} (pid ${r.pid}) exited`);
            const check = await rankBlockedIn(r.pid, r.call, anyThread);
            if (check.blocked) return done(true);
            return pending(
              check.error ??
                `${anyThread ? 'threads' : 'main thread'} in ${check.frames.slice(0, 8).join(' < ')}`,
            );
          },
          { timeoutMs: left(), what: `rank ${r.rank} (pid ${r.pid}) to block in ${r.call}` },
        );
      }
    }
    return job;
  } catch (e) {
    // Each wait only gets what is left of the launch's time, so say the launch's own timeout.
    const reason =
      e instanceof WaitTimeoutError
        ? `launch timed out (timeoutMs ${timeoutMs}) waiting for ${e.what}${e.lastDetail ? ` (last: ${e.lastDetail})` : ''}`
        : e instanceof Error
          ? e.message
          : String(e);
    try {
      await job.dispose();
    } catch (disposeError) {
      // The launch error matters more; still say that cleanup failed too.
      throw new Error(
        `MQD_TESTKIT_E_LAUNCH: ${job.describe()}: ${reason}; and dispose failed: ${String(disposeError)}\n--- output ---\n${job.output()}`,
      );
    }
    throw new Error(`MQD_TESTKIT_E_LAUNCH: ${job.describe()}: ${reason}\n--- output ---\n${job.output()}`);
  }
}
