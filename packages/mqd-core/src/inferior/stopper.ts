// Quiescence: every thread of a rank is stopped for the read and resumed right after.
// PTRACE_SEIZE + PTRACE_INTERRUPT: no SIGSTOP is injected, and if this process dies at any
// moment the kernel detaches and the threads run on (the agent can be kill -9'd safely).
// ptrace is per thread on both sides: all calls below run on the one JS thread of the reader.
//
// A seized thread can only be detached once it is in a ptrace-stop (PTRACE_DETACH of a running
// or sleeping tracee fails with ESRCH). A thread in an uninterruptible wait (a vfork parent whose
// child neither execs nor exits, a read from a stalled NFS/Lustre/FUSE server) takes the
// interrupt only when it leaves that wait, which may be never; detaching it early would leave
// this process its tracer and the thread would enter a tracing stop the moment it wakes. So every
// path waits (bounded) for each seized thread's stop before it detaches it, and a thread that
// never stops is kept in `lingering`: the kernel lets it go only when this process ends, which
// the reader does as soon as it sees one (reader-main.ts).
import { readdirSync, readFileSync } from 'node:fs';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import {
  __WALL,
  EPERM,
  ESRCH,
  PTRACE_DETACH,
  PTRACE_EVENT_STOP,
  PTRACE_INTERRUPT,
  PTRACE_SEIZE,
  ptrace,
  strerror,
  WNOHANG,
  waitpid,
} from '../native/libc.js';
import { isZombie, readProcStat, zombieError } from './proc.js';

export interface Stop {
  readonly pid: number;
  /** The threads held stopped, in /proc order (the main thread first). */
  readonly tids: readonly number[];
  readonly startedNs: bigint;
  /** Resumes every thread; returns the microseconds the rank was stopped. */
  resume(): number;
}

/**
 * After a failure, how long threads that were seized but had not stopped yet get to reach their
 * stop (a runnable thread takes microseconds; one that does not stop by then is in a wait).
 */
export const RELEASE_GRACE_MS = 250;

/** Threads this process seized and could not detach (tid → pid): let go only when it ends. */
const lingering = new Map<number, number>();

function listThreads(pid: number): number[] | null {
  try {
    return readdirSync(`/proc/${pid}/task`).map(Number);
  } catch {
    return null;
  }
}

const sleepBuf = new Int32Array(new SharedArrayBuffer(4));
function pause(micros: number): void {
  Atomics.wait(sleepBuf, 0, 0, micros / 1000);
}

/** What waitpid says about one seized thread. */
type Report =
  /** In a ptrace-stop; `signal` is the one to deliver at detach (0 for an event stop). */
  | { readonly kind: 'stopped'; readonly signal: number }
  /** Exited (and reaped now), or not our tracee any more. */
  | { readonly kind: 'gone' }
  /** Nothing yet: still running or in a wait. */
  | { readonly kind: 'none' };

function poll(t: number): Report {
  const [r, status] = waitpid(t, WNOHANG | __WALL);
  if (r === t) {
    if ((status & 0xff) !== 0x7f) return { kind: 'gone' };
    // PTRACE_EVENT_STOP is the interrupt (SIGTRAP) or a group-stop (SIGSTOP, SIGTSTP...): either
    // carries nothing to deliver, and a group-stopped thread stays stopped after the detach. Any
    // other stop is a signal-delivery-stop whose signal must be delivered at the detach.
    return { kind: 'stopped', signal: status >> 16 === PTRACE_EVENT_STOP ? 0 : (status >> 8) & 0xff };
  }
  return r < 0 ? { kind: 'gone' } : { kind: 'none' };
}

/** True once `t` is detached or gone; false when it is not in a stop (it stays ours). */
function detach(t: number, signal: number): boolean {
  const r = ptrace(PTRACE_DETACH, t, 0n, BigInt(signal));
  return r === 0 || r !== -ESRCH;
}

/**
 * Lets go of `held` (stopped: detached now, with their signals) and `seized` (not stopped yet:
 * each detached as soon as it stops, within `graceMs`). A thread killed while held is reaped
 * (a traced thread's exit is reported to us, and its process cannot be reaped before).
 * Returns the threads that are still ours; they are added to `lingering`.
 */
function release(
  pid: number,
  held: ReadonlyMap<number, number>,
  seized: Iterable<number>,
  graceMs: number,
): number[] {
  const pending = new Set(seized);
  for (const [t, signal] of held) if (!detach(t, signal)) pending.add(t);
  const until = process.hrtime.bigint() + BigInt(graceMs) * 1_000_000n;
  let wait = 50;
  while (pending.size > 0) {
    for (const t of [...pending]) {
      const r = poll(t);
      if (r.kind === 'gone' || (r.kind === 'stopped' && detach(t, r.signal))) pending.delete(t);
    }
    if (pending.size === 0 || process.hrtime.bigint() > until) break;
    pause(wait);
    wait = Math.min(wait * 2, 20_000);
  }
  for (const t of pending) lingering.set(t, pid);
  return [...pending];
}

/**
 * Threads this process still traces because they never reached a stop to be detached from
 * (tid → pid), after one more look at each (one that has stopped since is detached now).
 * Not empty: only this process's end lets them go.
 */
export function lingeringTracees(): ReadonlyMap<number, number> {
  for (const [t, pid] of [...lingering]) {
    lingering.delete(t);
    release(pid, new Map(), [t], 0);
  }
  return lingering;
}

/** "thread 12 (state D, in the kernel at wait_for_vfork_done)" from /proc, for messages. */
function describeThread(pid: number, tid: number): string {
  const state = readProcStat(pid, tid)?.state ?? '?';
  let wchan = '';
  try {
    wchan = readFileSync(`/proc/${pid}/task/${tid}/wchan`, 'utf8').trim();
  } catch {
    wchan = '';
  }
  const where = wchan !== '' && wchan !== '0' ? `, in the kernel at ${wchan}` : '';
  const what = state === 'D' ? ': an uninterruptible wait' : '';
  return `thread ${tid} (state ${state}${where}${what})`;
}

function describeThreads(pid: number, tids: readonly number[]): string {
  const shown = tids.slice(0, 4).map((t) => describeThread(pid, t));
  return tids.length > 4 ? `${shown.join(', ')} and ${tids.length - 4} more` : shown.join(', ');
}

/** What a failed stop did with the threads that never stopped, for its message. */
function lingerNote(left: readonly number[]): string {
  if (left.length === 0) return '; every thread runs on, none is held';
  return `; every thread that stopped runs on; ${left.length === 1 ? 'the one' : `the ${left.length}`} that never stopped ${left.length === 1 ? 'is' : 'are'} let go when the reader process ends, which it does right away`;
}

/**
 * Stops every thread of `pid`. On failure nothing stays stopped, and nothing stays attached
 * except threads that never reached a stop (lingeringTracees); the error says which and why.
 */
export function stopProcess(pid: number, timeoutMs = 2000): Result<Stop, MqdError> {
  const startedNs = process.hrtime.bigint();
  const seen = new Set<number>();
  /** Seized and interrupted, not yet reported stopped. */
  const seized = new Set<number>();
  /** Stopped, with the signal a signal-delivery-stop caught (re-injected at detach). */
  const held = new Map<number, number>();
  // The rank is perturbed from the moment its first thread stops: that is what pausedMicros
  // measures (waiting for a runnable thread to reach its stop is not time it was stopped).
  let firstStopNs: bigint | null = null;
  const deadline = startedNs + BigInt(timeoutMs) * 1_000_000n;
  const fail = (detail: (left: readonly number[]) => MqdError): Result<Stop, MqdError> =>
    err(detail(release(pid, held, seized, RELEASE_GRACE_MS)));
  // Threads may be created while we attach, but only by a thread that is not stopped yet: once
  // every thread seen is stopped, a listing with nothing new is the whole process.
  for (let round = 0; ; round++) {
    const tids = listThreads(pid);
    if (tids === null) {
      return fail((left) =>
        mqdError(
          round === 0 ? 'MQD_E_NO_SUCH_PID' : 'MQD_E_PID_EXITED',
          `process ${pid} is gone${round === 0 || left.length === 0 ? '' : lingerNote(left)}`,
        ),
      );
    }
    const fresh = tids.filter((t) => !seen.has(t));
    if (fresh.length === 0) break;
    if (round >= 50) {
      return fail((left) =>
        mqdError(
          'MQD_E_STOP_FAILED',
          `pid ${pid} kept creating threads while it was being stopped${lingerNote(left)}`,
        ),
      );
    }
    for (const t of fresh) {
      seen.add(t);
      const r = ptrace(PTRACE_SEIZE, t);
      if (r < 0) {
        if (r === -ESRCH) continue; // the thread exited meanwhile
        // ptrace refuses a zombie with EPERM too: say what it is, not a permission problem.
        if (r === -EPERM && isZombie(pid)) return fail(() => zombieError(pid));
        if (r === -EPERM) {
          return fail((left) =>
            mqdError(
              'MQD_E_PTRACE_DENIED',
              `cannot attach to pid ${pid} thread ${t} (${strerror(-r)})${left.length > 0 ? lingerNote(left) : ''}`,
            ),
          );
        }
        return fail((left) =>
          mqdError(
            'MQD_E_STOP_FAILED',
            `PTRACE_SEIZE of thread ${t} of pid ${pid}: ${strerror(-r)}${lingerNote(left)}`,
          ),
        );
      }
      seized.add(t);
      ptrace(PTRACE_INTERRUPT, t);
    }
    // Wait for each thread's stop; a thread that exited is dropped.
    let wait = 50;
    while (seized.size > 0) {
      let progressed = false;
      for (const t of [...seized]) {
        const r = poll(t);
        if (r.kind === 'none') continue;
        progressed = true;
        seized.delete(t);
        if (r.kind === 'stopped') {
          firstStopNs ??= process.hrtime.bigint();
          held.set(t, r.signal);
        }
      }
      if (progressed) continue;
      if (process.hrtime.bigint() > deadline) {
        const late = [...seized];
        const why = describeThreads(pid, late);
        return fail((left) =>
          mqdError(
            'MQD_E_STOP_FAILED',
            `${late.length} of the ${held.size + late.length} threads of pid ${pid} did not stop within ${timeoutMs} ms: ${why}${lingerNote(left)}`,
          ),
        );
      }
      pause(wait);
      wait = Math.min(wait * 2, 20_000);
    }
  }
  let resumed: number | null = null;
  return ok({
    pid,
    tids: [...held.keys()],
    startedNs,
    resume(): number {
      if (resumed === null) {
        // A thread killed while held is not in a stop any more: release reaps it.
        release(pid, held, [], RELEASE_GRACE_MS);
        resumed = Math.max(1, Number((process.hrtime.bigint() - (firstStopNs ?? startedNs)) / 1000n));
      }
      return resumed;
    },
  });
}
