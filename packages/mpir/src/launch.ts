// Launch a job under the tool (the MPIR "launch" half): the starter is traced from its first
// instruction, told it is being debugged before it spawns anything, and held at
// MPIR_Breakpoint, where its process table is complete. Open MPI's ranks then wait at the end
// of MPI_Init until mpirun is let go, so a first snapshot there sees them with their
// communicators built; hydra's ranks are not held (unless MPIEXEC_DEBUG is set, in which case
// they spin on MPIR_debug_gate, which we set once they reach it).
//
// Process layout: Node -> timeout (coreutils, no time limit: it forwards signals and passes on
// the exit status) -> sh -> exec starter. The tracee must not be a child libuv spawned: libuv
// waitpids its children on SIGCHLD and would take the starter's ptrace-stops for its exit.
// sh writes its pid on fd 3 and waits for a line there; we seize it while it waits, answer, and
// it execs the starter under our eyes (PTRACE_EVENT_EXEC).
//
// Steps: exec stop -> int3 at the program's entry point (AT_ENTRY: every DT_NEEDED library,
// e.g. Open MPI's libopen-rte, is mapped by then) -> MPIR_being_debugged=1 and int3 on
// MPIR_Breakpoint -> hit: table read, ip rewound, original byte back -> optional callback ->
// release (every thread detached). On every failure the job is killed: it was started to be
// debugged and half of that is not what the user asked for.
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { basename, delimiter, isAbsolute, join, resolve } from 'node:path';
import { Duplex } from 'node:stream';
import { DebugFileRegistry, ProcessImage, ptraceExt as pt, readEnviron } from '@mqd/core';
import { err, type MqdError, mqdError, ok, type Pid, type Result } from '@mqd/model';
import { mpirSymbols, readMpirTable } from './attach.js';
import { type LocalHost, localHost } from './host.js';
import type { JobRanks } from './job.js';
import { descendants, isAlive, starterInfo } from './procfs.js';
import { Tracer, type TraceStop } from './tracer.js';

export interface LaunchOptions<T> {
  /** The starter's environment (default: this process's). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly cwd?: string;
  /** 'inherit' (default): the job writes to our terminal. 'pipe': collected, see output(). */
  readonly stdio?: 'inherit' | 'pipe' | 'ignore';
  /** Time for the starter to reach MPIR_Breakpoint (default 60 s). */
  readonly timeoutMs?: number;
  readonly registry?: DebugFileRegistry;
  readonly here?: LocalHost;
  /**
   * Runs while the starter is held at MPIR_Breakpoint (Open MPI's ranks are then held at the
   * end of MPI_Init), e.g. to take a first snapshot. The job is released when it settles.
   */
  readonly atBreakpoint?: (job: JobRanks) => Promise<T> | T;
}

export interface JobExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface LaunchedJob<T> {
  /** The table read at MPIR_Breakpoint (method 'mpir'). */
  readonly job: JobRanks;
  readonly starterPid: Pid;
  /** What `atBreakpoint` returned. */
  readonly atBreakpoint: T | undefined;
  /** What the job printed so far (stdio 'pipe' only). */
  output(): string;
  /** The starter's exit status once it has exited. */
  exitStatus(): JobExit | undefined;
  /** Resolves when the starter has exited (its status, as `timeout` passes it on). */
  wait(): Promise<JobExit>;
  /** Sends a signal to the starter (mpirun and mpiexec pass SIGINT/SIGTERM on to the ranks). */
  signal(sig?: NodeJS.Signals): void;
  /** SIGKILLs the starter and every process below it, and waits for the starter's status. */
  dispose(): Promise<JobExit>;
}

const WRAPPER_SCRIPT = 'echo $$ >&3; read go <&3; exec 3<&-; exec "$@"';
const DEFAULT_TIMEOUT_MS = 60_000;
const PID_LINE_TIMEOUT_MS = 10_000;
/** Programs that commonly exec the real starter (wrapper scripts): we follow their next exec. */
const EXECERS =
  /^(?:sh|bash|dash|zsh|ksh|env|nice|nohup|stdbuf|setsid|chrt|taskset|numactl|python[\d.]*|perl[\d.]*|ruby[\d.]*)$/;
const AT_ENTRY = 9n;

function findExecutable(name: string, pathVar: string | undefined, cwd: string): string | null {
  const candidates = name.includes('/')
    ? [isAbsolute(name) ? name : resolve(cwd, name)]
    : (pathVar ?? '/usr/local/bin:/usr/bin:/bin').split(delimiter).map((d) => join(d || '.', name));
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      // Not there or not executable: the next PATH entry may have it.
    }
  }
  return null;
}

function entryPoint(pid: number): bigint | null {
  try {
    const auxv = readFileSync(`/proc/${pid}/auxv`);
    for (let off = 0; off + 16 <= auxv.length; off += 16) {
      if (auxv.readBigUInt64LE(off) === AT_ENTRY) return auxv.readBigUInt64LE(off + 8);
    }
  } catch {
    // Gone or not ours: the caller reports it.
  }
  return null;
}

/** The `timeout` child: its output, its exit, and the pid line sh writes on fd 3. */
class Wrapper {
  private readonly chunks: string[] = [];
  private status: JobExit | undefined;
  private readonly closed: Promise<JobExit>;

  constructor(readonly child: ChildProcess) {
    child.stdout?.setEncoding('utf8').on('data', (d: string) => this.chunks.push(d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => this.chunks.push(d));
    this.closed = new Promise((res) => {
      child.on('close', (code, signal) => {
        this.status = { code, signal };
        res(this.status);
      });
    });
  }

  output(): string {
    return this.chunks.join('');
  }
  exitStatus(): JobExit | undefined {
    return this.status;
  }
  wait(): Promise<JobExit> {
    return this.closed;
  }

  private get control(): Duplex | null {
    // Node gives a child's extra 'pipe' fds as a socketpair: one Duplex for both directions.
    const s = this.child.stdio[3];
    return s instanceof Duplex ? s : null;
  }

  /** The pid sh prints on fd 3 (it is then blocked reading fd 3). */
  readPid(timeoutMs: number): Promise<number | null> {
    const control = this.control;
    if (!control) return Promise.resolve(null);
    return new Promise((res) => {
      let text = '';
      const done = (v: number | null) => {
        clearTimeout(timer);
        control.removeListener('data', onData);
        // Keep reading (to EOF) so the socket closes with the child and 'close' can fire.
        control.resume();
        this.child.removeListener('exit', onExit);
        res(v);
      };
      const onData = (d: Buffer | string): void => {
        text += d.toString();
        const m = /^(\d+)\n/.exec(text);
        if (m) done(Number(m[1]));
      };
      const onExit = () => done(null);
      const timer = setTimeout(() => done(null), timeoutMs);
      control.on('data', onData);
      this.child.once('exit', onExit);
    });
  }

  /** Lets sh go on to exec the starter, and drops our end of fd 3. */
  go(): void {
    const control = this.control;
    control?.end('go\n');
  }
}

function kill(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // ESRCH: already gone.
  }
}

/**
 * Kills a starter and everything below it, without losing a process that is forked meanwhile:
 * the tree is frozen first (SIGSTOP, repeated until no new process appears: a stopped process
 * cannot fork), then SIGKILLed, then awaited. `extra` are pids known to belong to the job (the
 * ranks of its table) even if they were reparented already.
 */
async function killTree(
  starterPid: number,
  wrapper: Wrapper,
  extra: readonly number[] = [],
): Promise<JobExit> {
  const seen = new Set<number>(extra.filter(isAlive));
  for (let round = 0; round < 50; round++) {
    let fresh = false;
    for (const p of [starterPid, ...descendants(starterPid).map((d) => d.pid)]) {
      if (!seen.has(p)) {
        seen.add(p);
        fresh = true;
      }
    }
    for (const p of seen) kill(p, 'SIGSTOP');
    if (!fresh) break;
  }
  for (const p of seen) kill(p, 'SIGKILL');
  const deadline = Date.now() + 10_000;
  while ([...seen].some(isAlive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  // timeout exits once its child is gone; should it not (it was never told the pid), kill it too.
  const w = wrapper.child.pid;
  const killer = setTimeout(() => {
    if (w !== undefined) kill(w, 'SIGKILL');
  }, 5000);
  const status = await wrapper.wait();
  clearTimeout(killer);
  return status;
}

async function releaseGates(
  job: JobRanks,
  here: LocalHost,
  registry: DebugFileRegistry,
  timeoutMs: number,
): Promise<string[]> {
  // Hydra holds each rank in MPI_Init on MPIR_debug_gate when MPIEXEC_DEBUG is set. A rank in
  // the table may not have exec'd its program yet: wait until its MPI library is mapped.
  const warnings: string[] = [];
  const pending = new Map((job.byHost[here.short] ?? []).map((r) => [r.pid as number, r]));
  const deadline = Date.now() + timeoutMs;
  while (pending.size > 0) {
    for (const [pid, r] of pending) {
      if (!isAlive(pid)) {
        pending.delete(pid);
        continue;
      }
      const img = ProcessImage.load(pid, registry);
      const gate = img.ok && img.value.mpiLibrary() ? img.value.findSymbol('MPIR_debug_gate') : null;
      if (!gate) continue;
      if (pt.vmWrite(pid, gate.address, Uint8Array.of(1, 0, 0, 0)) !== 4)
        warnings.push(`could not set MPIR_debug_gate in rank ${r.rank} (pid ${pid}): it stays held`);
      pending.delete(pid);
    }
    if (pending.size === 0) break;
    if (Date.now() >= deadline) {
      for (const r of pending.values())
        warnings.push(
          `rank ${r.rank} (pid ${r.pid}) did not load its MPI library in time: MPIR_debug_gate not set`,
        );
      break;
    }
    await new Promise((res) => setTimeout(res, 20));
  }
  return warnings;
}

interface AtBreakpoint<T> {
  readonly job: JobRanks;
  readonly value: T | undefined;
}

async function drive<T>(
  tracer: Tracer,
  argv: readonly string[],
  opts: LaunchOptions<T>,
  registry: DebugFileRegistry,
  here: LocalHost,
  found: { job: JobRanks | null },
): Promise<Result<AtBreakpoint<T>, MqdError>> {
  const pid = tracer.pid;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const deadline = Date.now() + timeoutMs;
  let phase: 'exec' | 'entry' | 'mpir' = 'exec';
  let execs = 0;
  let entry: bigint | null = null;
  let image: ProcessImage | null = null;
  let mpirBreakpoint: bigint | null = null;
  const what = argv.join(' ');
  for (;;) {
    const stop: TraceStop | 'timeout' = await tracer.next(deadline);
    if (stop === 'timeout') {
      if (execs > 0)
        return err(
          mqdError(
            'MQD_E_EMPTY_PROCTABLE',
            `the starter (pid ${pid}) did not reach MPIR_Breakpoint within ${timeoutMs} ms`,
          ),
        );
      return err(mqdError('MQD_E_BAD_INPUT', `'${what}' did not start within ${timeoutMs} ms`));
    }
    switch (stop.kind) {
      case 'exit': {
        const how = stop.signal !== null ? `signal ${stop.signal}` : `code ${stop.code}`;
        if (execs === 0)
          return err(
            mqdError('MQD_E_BAD_INPUT', `could not start '${what}': the launch shell exited with ${how}`),
          );
        return err(
          mqdError(
            'MQD_E_JOB_ENDED',
            `the starter '${what}' exited (${how}) before it published its process table`,
          ),
        );
      }
      case 'exec': {
        execs++;
        entry = entryPoint(pid);
        if (entry === null)
          return err(mqdError('MQD_E_STOP_FAILED', `cannot read the entry point of pid ${pid}`));
        const e = tracer.arm(entry);
        if (e) return err(e);
        phase = 'entry';
        tracer.resume(pid, 0);
        break;
      }
      case 'breakpoint': {
        if (phase === 'entry' && stop.address === entry) {
          const e = tracer.disarm(entry);
          if (e) return err(e);
          const loaded = ProcessImage.load(pid, registry);
          if (!loaded.ok) return loaded;
          image = loaded.value;
          const syms = mpirSymbols(image);
          if (!syms || syms.breakpoint === null) {
            if (EXECERS.test(basename(image.exe))) {
              // A wrapper (a script's interpreter, env, nice, ...): the starter is its next exec.
              phase = 'exec';
              tracer.resume(stop.tid, 0);
              break;
            }
            return err(
              mqdError(
                'MQD_E_NOT_STARTER',
                `'${image.exe}' has no MPIR_proctable/MPIR_Breakpoint symbols: it is not an MPI starter with MPIR support (the job was killed)`,
              ),
            );
          }
          if (syms.beingDebugged !== null) {
            const w = tracer.writeInt32(syms.beingDebugged, 1);
            if (w) return err(w);
          }
          const a = tracer.arm(syms.breakpoint);
          if (a) return err(a);
          mpirBreakpoint = syms.breakpoint;
          phase = 'mpir';
          tracer.resume(stop.tid, 0);
          break;
        }
        if (phase === 'mpir' && stop.address === mpirBreakpoint && image) {
          // The thread stays stopped on MPIR_Breakpoint until release(); the rest run on.
          const e = tracer.disarm(stop.address);
          if (e) return err(e);
          const syms = mpirSymbols(image);
          const starter = starterInfo(pid);
          if (!starter.ok) return starter;
          if (!syms) return err(mqdError('MQD_E_INTERNAL', 'MPIR symbols vanished between two stops'));
          const table = readMpirTable(image, starter.value, syms, here);
          if (!table.ok) return table;
          found.job = table.value;
          const value = opts.atBreakpoint ? await opts.atBreakpoint(table.value) : undefined;
          return ok({ job: table.value, value });
        }
        return err(
          mqdError(
            'MQD_E_INTERNAL',
            `unexpected breakpoint at 0x${stop.address.toString(16)} in phase ${phase}`,
          ),
        );
      }
      default:
        stop satisfies never;
    }
  }
}

/**
 * Starts `argv` (e.g. ['mpirun', '-np', '4', './app']) under the tool, stops it at
 * MPIR_Breakpoint, reads the process table, runs `atBreakpoint`, and lets the job run.
 */
export async function launchUnderTool<T = undefined>(
  argv: readonly string[],
  opts: LaunchOptions<T> = {},
): Promise<Result<LaunchedJob<T>, MqdError>> {
  if (!pt.BREAKPOINTS_SUPPORTED) {
    return err(
      mqdError(
        'MQD_E_BAD_INPUT',
        `launching under the tool needs x86_64 (this is ${process.arch}); attach instead`,
      ),
    );
  }
  const [program] = argv;
  if (program === undefined || program === '')
    return err(mqdError('MQD_E_USAGE', 'give the starter command to run'));
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  if (findExecutable(program, env['PATH'], cwd) === null)
    return err(
      mqdError('MQD_E_BAD_INPUT', `'${program}' is not an executable file (PATH and ${cwd} searched)`),
    );
  const timeoutBin = findExecutable('timeout', process.env['PATH'], cwd);
  if (timeoutBin === null)
    return err(
      mqdError('MQD_E_BAD_INPUT', "coreutils' timeout is not on PATH; it supervises the launched starter"),
    );
  const registry = opts.registry ?? new DebugFileRegistry();
  const here = opts.here ?? localHost();

  const stdio = opts.stdio ?? 'inherit';
  const child = spawn(
    timeoutBin,
    ['--foreground', '0', '/bin/sh', '-c', WRAPPER_SCRIPT, 'mqd-launch', ...argv],
    {
      cwd,
      env,
      stdio: stdio === 'pipe' ? ['ignore', 'pipe', 'pipe', 'pipe'] : [stdio, stdio, stdio, 'pipe'],
    },
  );
  const spawned = await new Promise<Error | null>((res) => {
    child.once('spawn', () => res(null));
    child.once('error', (e) => res(e));
  });
  if (spawned) return err(mqdError('MQD_E_BAD_INPUT', `cannot start ${timeoutBin}: ${spawned.message}`));
  const wrapper = new Wrapper(child);
  const pid = await wrapper.readPid(PID_LINE_TIMEOUT_MS);
  if (pid === null) {
    if (child.pid !== undefined) kill(child.pid, 'SIGKILL');
    await wrapper.wait();
    return err(mqdError('MQD_E_BAD_INPUT', `the launch wrapper did not start: ${wrapper.output().trim()}`));
  }
  const tracer = Tracer.seize(pid);
  if (!(tracer instanceof Tracer)) {
    await killTree(pid, wrapper);
    return err(tracer);
  }

  let outcome: Result<AtBreakpoint<T>, MqdError>;
  // The table once read, so that a failure after it can also kill ranks already reparented.
  const found: { job: JobRanks | null } = { job: null };
  const tablePids = () => found.job?.ranks.map((r) => r.pid as number) ?? [];
  try {
    wrapper.go();
    outcome = await drive(tracer, argv, opts, registry, here, found);
  } catch (e) {
    // A bug, or the callback threw: nothing may stay stopped or traced, and the job goes.
    tracer.release();
    await killTree(pid, wrapper, tablePids());
    throw e;
  }
  const problem = tracer.release();
  if (!outcome.ok || problem) {
    await killTree(pid, wrapper, tablePids());
    return outcome.ok ? err(problem ?? mqdError('MQD_E_INTERNAL', 'release failed')) : outcome;
  }
  let job = outcome.value.job;
  if (readEnviron(pid)?.has('MPIEXEC_DEBUG')) {
    const warnings = await releaseGates(job, here, registry, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    if (warnings.length > 0) job = { ...job, warnings: [...job.warnings, ...warnings] };
  }
  const rankPids = job.ranks.map((r) => r.pid as number);
  const starterPid = job.starter?.pid ?? (pid as Pid);
  return ok({
    job,
    starterPid,
    atBreakpoint: outcome.value.value,
    output: () => wrapper.output(),
    exitStatus: () => wrapper.exitStatus(),
    wait: () => wrapper.wait(),
    signal: (sig: NodeJS.Signals = 'SIGTERM') => {
      if (wrapper.exitStatus() === undefined) kill(pid, sig);
    },
    dispose: () => killTree(pid, wrapper, rankPids.filter(isAlive)),
  });
}
