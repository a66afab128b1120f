// Launch under the tool through PMIx: Open MPI 5's `mpirun` execs PRRTE's prterun,
// which has no MPIR symbols (no MPIR_Breakpoint to stop at, no MPIR_proctable to read). PRRTE
// holds the application instead: with `--runtime-options stop-in-init` (the bare
// `--stop-in-init` that `prterun --help` lists is accepted and ignored by PRRTE 3.0.8; see
// docs/mpi-facts.md) the job gets PMIX_DEBUG_STOP_IN_INIT and every rank waits in PMIx_Init
// (called from MPI_Init) for a PMIX_DEBUGGER_RELEASE event. A PMIx tool connected to prterun
// reads the process table once every rank has connected to the server, runs the callback, and
// sends that event to the job's namespace.
//
// launch.ts recognises prterun at its entry point by what it maps (libprrte and libpmix, no
// MPIR_Breakpoint); nothing has run yet, so that traced process is killed and prterun started
// again, untraced, with its own argv (plus the option), environment and working directory, as
// the user's wrappers (`mpirun`, `env VAR=...`) had set them. Process layout: Node -> timeout
// (no limit; passes on the exit status and signals) -> prterun -> ranks.
//
// Readiness: the table's process states come from PRRTE (pmix_proc_info_t.state); a rank is
// PMIX_PROC_STATE_CONNECTED once it has registered with the server in PMIx_Init, and the hold
// comes right after that in the same call, before anything returns to MPI_Init. So "every rank
// connected" means every rank is held or about to be, and none can go past it unreleased.
import { spawn } from 'node:child_process';
import { readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { basename } from 'node:path';
import { PmixTool, type ProcessImage, readEnviron } from '@mqd/core';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import { pmixLibraryOf } from './attach.js';
import { type LocalHost, normaliseHost } from './host.js';
import { type JobRanks, makeJob, rankEntry } from './job.js';
import { descendants, isAlive, starterInfo } from './procfs.js';
import {
  findExecutable,
  killTree,
  type LaunchedJob,
  type LaunchOptions,
  launchedJob,
  Wrapper,
} from './supervise.js';

/** pmix_proc_state_t PMIX_PROC_STATE_CONNECTED (pmix_common.h): registered in PMIx_Init. */
const PMIX_PROC_STATE_CONNECTED = 6;
const POLL_MS = 50;
/** How long a launch failure waits for prterun's exit status (timeout passes it on at once). */
const EXIT_STATUS_WAIT_MS = 5_000;
const STOP_IN_INIT = 'stop-in-init';
const RUNTIME_OPTIONS = '--runtime-options';

/** prterun, as recognised by what it maps: a PMIx launcher that holds its ranks for a tool. */
export interface PmixStarter {
  /** /proc/PID/exe. */
  readonly exe: string;
  /** Its argv as it was exec'd (argv[0] included). */
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly cwd: string;
  /** The libpmix it maps: the tool side must speak the same PMIx. */
  readonly library: string;
}

const maps = (image: ProcessImage, lib: string): boolean =>
  image.modules.some((m) => new RegExp(`/lib${lib}\\.so[.\\d]*$`).test(m.path));

/**
 * What a program without MPIR symbols is, by what it maps at its entry point: `prterun` (maps
 * libprrte and libpmix: PRRTE's launcher), `execs-prterun` (maps libpmix, neither libprrte nor
 * an MPI library: Open MPI 5's `mpirun`, which sets its personality and execs prterun), or null.
 */
export function pmixStarterKind(image: ProcessImage): 'prterun' | 'execs-prterun' | null {
  if (pmixLibraryOf(image) === null) return null;
  if (maps(image, 'prrte')) return 'prterun';
  return image.mpiLibrary() === null ? 'execs-prterun' : null;
}

/** prterun's argv, environment and working directory, read while it is held at its entry point. */
export function capturePmixStarter(pid: number, image: ProcessImage): Result<PmixStarter, MqdError> {
  const library = pmixLibraryOf(image);
  const env = readEnviron(pid);
  let argv: string[];
  let cwd: string;
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
    cwd = readlinkSync(`/proc/${pid}/cwd`);
  } catch (e) {
    return err(
      mqdError('MQD_E_JOB_ENDED', `cannot read the command line of prterun (pid ${pid}): ${String(e)}`),
    );
  }
  if (library === null || env === null || argv.length === 0)
    return err(mqdError('MQD_E_JOB_ENDED', `cannot read the command line of prterun (pid ${pid})`));
  return ok({ exe: image.exe, argv, env: Object.fromEntries(env), cwd, library });
}

/**
 * prterun's arguments with the hold asked for: `--runtime-options stop-in-init` first, or
 * `stop-in-init` added to the user's own `--runtime-options` (PRRTE refuses the option twice).
 */
export function withStopInInit(args: readonly string[]): string[] {
  const out = [...args];
  const i = out.findIndex((a) => a === RUNTIME_OPTIONS || a.startsWith(`${RUNTIME_OPTIONS}=`));
  if (i < 0) return [RUNTIME_OPTIONS, STOP_IN_INIT, ...out];
  const at = out[i] === RUNTIME_OPTIONS ? i + 1 : i;
  const value = out[at];
  if (value === undefined) return [...out, STOP_IN_INIT];
  if (!value.split(/[=,]/).includes(STOP_IN_INIT)) out[at] = `${value},${STOP_IN_INIT}`;
  return out;
}

function realpathOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    // Gone or unreadable: compared as given.
    return path;
  }
}

const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

/** Waits until the wrapper has its exit status, or `ms` passed; leaves no timer behind. */
async function exitStatusWithin(wrapper: Wrapper, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([wrapper.wait(), new Promise((res) => (timer = setTimeout(res, ms)))]);
  clearTimeout(timer);
}

function describeExit(wrapper: Wrapper): string {
  const s = wrapper.exitStatus();
  if (!s) return 'exited';
  return s.signal !== null ? `was killed by ${s.signal}` : `exited with code ${s.code}`;
}

interface Held {
  readonly tool: PmixTool;
  readonly nspace: string;
  readonly job: JobRanks;
}

/** Connects to prterun's PMIx server and waits until every rank of its job is held in PMIx_Init. */
async function awaitHold(
  pid: number,
  starter: PmixStarter,
  wrapper: Wrapper,
  here: LocalHost,
  deadline: number,
  timeoutMs: number,
  owned: { tool: PmixTool | null; rankPids: number[] },
): Promise<Result<Held, MqdError>> {
  const fail = (detail: string) => err(mqdError('MQD_E_PMIX_LAUNCH', detail));
  let last = 'no rank had started';
  for (;;) {
    // The 'close' of the timeout child may come after prterun is gone: either says it ended.
    // timeout exits with prterun's status right after it, so wait (bounded) for that status,
    // which the error gives.
    if (wrapper.exitStatus() !== undefined || !isAlive(pid)) {
      await exitStatusWithin(wrapper, EXIT_STATUS_WAIT_MS);
      return fail(
        `prterun (pid ${pid}) ${describeExit(wrapper)} before every rank reached PMIx_Init (${last})`,
      );
    }
    if (Date.now() >= deadline)
      return fail(`the ranks were not all held in PMIx_Init within ${timeoutMs} ms (${last})`);
    if (owned.tool === null) {
      // prterun forks its ranks only once its PMIx server is up; before that there is nothing to
      // connect to (PMIx_tool_init would wait for a rendezvous file in this thread).
      if (descendants(pid).length === 0) {
        await sleep(POLL_MS);
        continue;
      }
      const c = PmixTool.connect(starter.library, pid);
      if (!c.ok) {
        last = c.error.message;
        await sleep(4 * POLL_MS);
        continue;
      }
      owned.tool = c.value;
    }
    const tool = owned.tool;
    const ns = tool.jobNamespace();
    const nspace = ns.ok ? ns.value.nspace : null;
    const table = nspace !== null ? tool.procTable(nspace) : null;
    if (!ns.ok) last = ns.error.message;
    else if (nspace === null) last = 'prterun has no job yet';
    else if (table && !table.ok) last = table.error.message;
    else if (table?.ok) {
      const procs = table.value;
      owned.rankPids = procs.filter((p) => p.pid > 0).map((p) => p.pid);
      const waiting = procs.filter((p) => p.pid <= 0 || p.state !== PMIX_PROC_STATE_CONNECTED);
      const gone = procs.find(
        (p) => p.pid > 0 && normaliseHost(p.host, here) === here.short && !isAlive(p.pid),
      );
      if (gone)
        return fail(
          `rank ${gone.rank} (pid ${gone.pid}, ${gone.executable}) ended before it reached PMIx_Init`,
        );
      if (procs.length > 0 && waiting.length === 0) {
        const s = starterInfo(pid);
        if (!s.ok) return s;
        const ranks = procs.map((p) => rankEntry(p.rank, p.pid, normaliseHost(p.host, here), p.executable));
        return ok({ tool, nspace, job: makeJob('pmix', s.value, ranks) });
      }
      last =
        procs.length === 0
          ? `the job ${nspace} has no processes yet`
          : `not yet in PMIx_Init: rank ${waiting.map((p) => p.rank).join(', ')}`;
    }
    await sleep(POLL_MS);
  }
}

/**
 * Starts `starter` (prterun, recognised by launch.ts) with its ranks held in PMIx_Init, reads the
 * table through a PMIx tool connection, runs `atBreakpoint`, and releases the ranks
 * (PMIX_DEBUGGER_RELEASE). On every failure the job is killed. Same contract as the MPIR launch.
 */
export async function launchUnderPmix<T>(
  starter: PmixStarter,
  opts: LaunchOptions<T>,
  here: LocalHost,
  timeoutBin: string,
  deadline: number,
  timeoutMs: number,
): Promise<Result<LaunchedJob<T>, MqdError>> {
  const [argv0 = starter.exe, ...args] = starter.argv;
  if (findExecutable(starter.exe, undefined, starter.cwd) === null)
    return err(mqdError('MQD_E_PMIX_LAUNCH', `prterun (${starter.exe}) is no longer executable`));
  // PRRTE acts on its argv[0]'s name ('prterun' runs one job; 'prte' is the DVM): keep the name
  // it was exec'd under (mpirun gives bin/prterun, a link to prte). timeout execs the path it is
  // given as argv[0], so use argv[0] when it names the same file, else the file with its name
  // in PRTE_BASENAME, which PRRTE reads first.
  const named = findExecutable(argv0, starter.env['PATH'], starter.cwd);
  const sameFile = named !== null && realpathOr(named) === realpathOr(starter.exe);
  const program = sameFile ? argv0 : starter.exe;
  const env =
    sameFile || starter.env['PRTE_BASENAME'] !== undefined
      ? starter.env
      : { ...starter.env, PRTE_BASENAME: basename(argv0) };
  const stdio = opts.stdio ?? 'inherit';
  const child = spawn(timeoutBin, ['--foreground', '0', program, ...withStopInInit(args)], {
    cwd: starter.cwd,
    env,
    stdio: stdio === 'pipe' ? ['ignore', 'pipe', 'pipe'] : [stdio, stdio, stdio],
  });
  const spawned = await new Promise<Error | null>((res) => {
    child.once('spawn', () => res(null));
    child.once('error', (e) => res(e));
  });
  if (spawned || child.pid === undefined)
    return err(mqdError('MQD_E_PMIX_LAUNCH', `cannot start ${timeoutBin}: ${spawned?.message ?? 'no pid'}`));
  const wrapper = new Wrapper(child);
  // timeout forks prterun: wait for it (timeout itself is not the PMIx server).
  let pid: number | null = null;
  while (pid === null && wrapper.exitStatus() === undefined && Date.now() < deadline) {
    pid = descendants(child.pid).find((d) => d.depth === 1)?.pid ?? null;
    if (pid === null) await sleep(10);
  }
  if (pid === null) {
    await killTree(child.pid, wrapper);
    return err(
      mqdError(
        'MQD_E_PMIX_LAUNCH',
        `prterun did not start (timeout ${describeExit(wrapper)}): ${wrapper.output().trim()}`,
      ),
    );
  }

  const owned: { tool: PmixTool | null; rankPids: number[] } = { tool: null, rankPids: [] };
  const dropJob = async () => {
    owned.tool?.close();
    await killTree(pid, wrapper, owned.rankPids);
  };
  let held: Result<Held, MqdError>;
  let value: T | undefined;
  try {
    held = await awaitHold(pid, starter, wrapper, here, deadline, timeoutMs, owned);
    if (!held.ok) {
      await dropJob();
      return held;
    }
    owned.rankPids = held.value.job.ranks.map((r) => r.pid as number);
    value = opts.atBreakpoint ? await opts.atBreakpoint(held.value.job) : undefined;
  } catch (e) {
    // A bug, or the callback threw: the job goes.
    await dropJob();
    throw e;
  }
  const { tool, nspace, job } = held.value;
  const released = tool.releaseDebugger(nspace);
  // The server acknowledges the release on this connection; a query after it is answered once
  // the server has it, so finalizing cannot overtake it.
  const flushed = released.ok ? tool.namespaces() : released;
  tool.close();
  owned.tool = null;
  if (!released.ok || !flushed.ok) {
    await dropJob();
    const why = released.ok ? (flushed.ok ? '' : flushed.error.message) : released.error.message;
    return err(mqdError('MQD_E_PMIX_LAUNCH', `the ranks of ${nspace} could not be released (${why})`));
  }
  return ok(launchedJob(pid, wrapper, job, value));
}
