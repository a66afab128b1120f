// Is a rank really blocked where we think? Ask eu-stack (elfutils) for the main thread's stack.
// eu-stack attaches with ptrace for a few milliseconds, so calls on one pid must not overlap;
// the launcher checks ranks one after the other.
import { spawn } from 'node:child_process';
import { err, libraryEntryCall, ok, Pid, type Result } from '@mqd/model';
import { done, pending, waitFor } from './wait.js';

export interface StackSample {
  /** Function names of the main thread's frames, innermost first ("??" when unknown). */
  readonly frames: readonly string[];
  /** eu-stack's own complaints (it still prints the frames it could unwind). */
  readonly stderr: string;
}

export type StackResult = Result<StackSample, string>;

const EU_STACK_TIMEOUT_MS = 15_000;

/** Frames of the main thread (TID == PID) in eu-stack's output; of every thread with `tid` null. */
export function parseEuStack(text: string, pid: number | null): string[] {
  const frames: string[] = [];
  let inMain = false;
  for (const line of text.split('\n')) {
    const tid = /^TID (\d+):/.exec(line);
    if (tid) {
      inMain = pid === null || Number(tid[1]) === pid;
      continue;
    }
    if (!inMain) continue;
    // The rest of the line: demangled C++ names contain spaces ("int ns::f<int>(int, int)").
    const frame = /^#\d+\s+0x[0-9a-f]+\s*(.*?)\s*$/.exec(line);
    if (frame) frames.push(frame[1] || '??');
  }
  return frames;
}

/**
 * Samples the main thread's stack of `pid` once (every thread's frames, concatenated, with
 * `allThreads`). A missing eu-stack or a gone pid is an error value.
 */
export async function mainThreadStack(pid: Pid, allThreads = false): Promise<StackResult> {
  const run = await runEuStack(pid);
  if (!run.ok) return run;
  const { stdout, stderr, exit } = run.value;
  const frames = parseEuStack(stdout, allThreads ? null : pid);
  // eu-stack exits 1 when one frame of some thread cannot be unwound, yet prints the rest;
  // only an empty main thread means the sample failed.
  if (frames.length === 0)
    return err(`eu-stack -p ${pid} gave no main-thread frames (exit ${exit}): ${stderr.trim()}`);
  return ok({ frames, stderr });
}

/** One eu-stack sample of every thread of `pid`: its output, complaints and exit (code or signal). */
export function runEuStack(
  pid: Pid,
): Promise<Result<{ stdout: string; stderr: string; exit: number | string }, string>> {
  return new Promise((resolve) => {
    const child = spawn('eu-stack', ['-p', String(pid)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), EU_STACK_TIMEOUT_MS);
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve(err(`cannot run eu-stack (${e.message}): install elfutils (scripts/provision.sh does)`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve(ok({ stdout, stderr, exit: code ?? signal ?? 'unknown' }));
    });
  });
}

/**
 * Matches a frame name against an MPI call name: MPI_Recv matches MPI_Recv, PMPI_Recv, and
 * MPICH 4's internal_Recv (PMPI_X may tail-call it and leave no frame of its own: MPICH 4.2.1's
 * PMPI_Waitall).
 */
export function frameMatcher(fn: string): RegExp {
  const name = fn.replace(/^P(?=MPI_)/, '').replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return name.startsWith('MPI_')
    ? new RegExp(`^(?:P?${name}|internal_${name.slice(4)})(?:@.*)?$`)
    : new RegExp(`^${name}(?:@.*)?$`);
}

export interface BlockedCheck {
  readonly blocked: boolean;
  /** The sampled main-thread frames (empty if sampling failed). */
  readonly frames: readonly string[];
  /** Why the check could not be made, if it could not. */
  readonly error?: string;
}

/**
 * Whether the main thread of `pid` is inside `fn` right now (e.g. 'MPI_Ssend', which also
 * matches the PMPI_ entry point the profiling interface puts on the stack).
 */
export async function rankBlockedIn(pid: Pid, fn: string, anyThread = false): Promise<BlockedCheck> {
  const sample = await mainThreadStack(pid, anyThread);
  if (!sample.ok) return { blocked: false, frames: [], error: sample.error };
  const re = frameMatcher(fn);
  // Open MPI's MPI_Finalize leaves only the library function it tail-calls on the stack.
  const call = fn.replace(/^P(?=MPI_)/, '');
  const blocked = sample.value.frames.some((f) => re.test(f) || libraryEntryCall(f) === call);
  return { blocked, frames: sample.value.frames };
}

/**
 * Waits until every rank is inside its call (`callOf(rank)`, on the main thread). A fixture's
 * READY line comes just before the call: a rank that has printed it may not have taken in
 * its messages yet, while a hung job someone looks at has.
 */
export async function untilRanksBlocked(
  ranks: ReadonlyArray<{ readonly rank: number; readonly pid: number }>,
  callOf: (rank: number) => string,
  timeoutMs: number,
): Promise<void> {
  for (const r of ranks) {
    const call = callOf(r.rank);
    await waitFor(
      async () => {
        const check = await rankBlockedIn(Pid(r.pid), call);
        return check.blocked ? done(true) : pending(check.error ?? check.frames.slice(0, 6).join(' < '));
      },
      { timeoutMs, what: `rank ${r.rank} (pid ${r.pid}) to block in ${call}` },
    );
  }
}
