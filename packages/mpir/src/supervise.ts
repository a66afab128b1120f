// What both launches share (the MPIR one in launch.ts, the PMIx one in pmix-launch.ts): the
// `timeout` child that supervises the starter (its output, its exit status), and killing a job
// without losing a process it forks meanwhile.
import type { ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import { Duplex } from 'node:stream';
import type { DebugFileRegistry } from '@mqd/core';
import type { Pid } from '@mqd/model';
import type { LocalHost } from './host.js';
import type { JobRanks } from './job.js';
import { descendants, isAlive } from './procfs.js';

export interface LaunchOptions<T> {
  /** The starter's environment (default: this process's). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly cwd?: string;
  /** 'inherit' (default): the job writes to our terminal. 'pipe': collected, see output(). */
  readonly stdio?: 'inherit' | 'pipe' | 'ignore';
  /**
   * Time for the starter to reach MPIR_Breakpoint, or (prterun) for every rank to be held in
   * PMIx_Init (default 60 s).
   */
  readonly timeoutMs?: number;
  readonly registry?: DebugFileRegistry;
  readonly here?: LocalHost;
  /**
   * Runs while the starter is held at MPIR_Breakpoint (Open MPI 4's ranks are then held at the
   * end of MPI_Init), or while Open MPI 5's ranks are held in PMIx_Init (inside MPI_Init, before
   * any communicator exists), e.g. to take a first snapshot. The job is released when it settles.
   */
  readonly atBreakpoint?: (job: JobRanks) => Promise<T> | T;
}

export interface JobExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface LaunchedJob<T> {
  /** The table read at MPIR_Breakpoint (method 'mpir'), or from prterun's PMIx server ('pmix'). */
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

export function findExecutable(name: string, pathVar: string | undefined, cwd: string): string | null {
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

/** The `timeout` child: its output, its exit, and the pid line sh writes on fd 3. */
export class Wrapper {
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

export function kill(pid: number, sig: NodeJS.Signals): void {
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
export async function killTree(
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

/** The LaunchedJob of a released starter `pid` supervised by `wrapper`. */
export function launchedJob<T>(
  pid: number,
  wrapper: Wrapper,
  job: JobRanks,
  value: T | undefined,
): LaunchedJob<T> {
  const rankPids = job.ranks.map((r) => r.pid as number);
  return {
    job,
    starterPid: job.starter?.pid ?? (pid as Pid),
    atBreakpoint: value,
    output: () => wrapper.output(),
    exitStatus: () => wrapper.exitStatus(),
    wait: () => wrapper.wait(),
    signal: (sig: NodeJS.Signals = 'SIGTERM') => {
      if (wrapper.exitStatus() === undefined) kill(pid, sig);
    },
    dispose: () => killTree(pid, wrapper, rankPids.filter(isAlive)),
  };
}
