// Quiescence: every thread of a rank is stopped for the read and resumed right after.
// PTRACE_SEIZE + PTRACE_INTERRUPT: no SIGSTOP is injected, and if this process dies at any
// moment the kernel detaches and the threads run on (the agent can be kill -9'd safely).
// ptrace is per thread on both sides: all calls below run on the one JS thread of the reader.
import { readdirSync } from 'node:fs';
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
import { isZombie, zombieError } from './proc.js';

export interface Stop {
  readonly pid: number;
  readonly tids: readonly number[];
  readonly startedNs: bigint;
  /** Resumes every thread; returns the microseconds the rank was stopped. */
  resume(): number;
}

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

/** Stops every thread of `pid`; on failure, nothing stays attached. */
export function stopProcess(pid: number, timeoutMs = 2000): Result<Stop, MqdError> {
  const startedNs = process.hrtime.bigint();
  const attached: number[] = [];
  // A thread caught in a signal-delivery-stop keeps its signal: it is re-injected at detach.
  const pendingSignal = new Map<number, number>();
  const detachAll = () => {
    for (const t of attached) ptrace(PTRACE_DETACH, t, 0n, BigInt(pendingSignal.get(t) ?? 0));
  };
  const stopped = new Set<number>();
  // The rank is perturbed from the moment its first thread stops: that is what pausedMicros
  // measures (waiting for a runnable thread to reach its stop is not time it was stopped).
  let firstStopNs: bigint | null = null;
  const deadline = startedNs + BigInt(timeoutMs) * 1_000_000n;
  // Threads may be created while we attach: repeat until the set is stable.
  for (let round = 0; round < 50; round++) {
    const tids = listThreads(pid);
    if (tids === null) {
      detachAll();
      return err(mqdError(round === 0 ? 'MQD_E_NO_SUCH_PID' : 'MQD_E_PID_EXITED', `process ${pid} is gone`));
    }
    const fresh = tids.filter((t) => !attached.includes(t));
    if (fresh.length === 0) break;
    for (const t of fresh) {
      const r = ptrace(PTRACE_SEIZE, t);
      if (r < 0) {
        if (r === -ESRCH) continue; // the thread exited meanwhile
        detachAll();
        // ptrace refuses a zombie with EPERM too: say what it is, not a permission problem.
        if (r === -EPERM && isZombie(pid)) return err(zombieError(pid));
        if (r === -EPERM) {
          return err(
            mqdError('MQD_E_PTRACE_DENIED', `cannot attach to pid ${pid} thread ${t} (${strerror(-r)})`),
          );
        }
        return err(
          mqdError('MQD_E_STOP_FAILED', `PTRACE_SEIZE of thread ${t} of pid ${pid}: ${strerror(-r)}`),
        );
      }
      attached.push(t);
      ptrace(PTRACE_INTERRUPT, t);
    }
  }
  // Wait for each thread's interrupt stop; a thread that exited is dropped.
  while (stopped.size < attached.length) {
    let progressed = false;
    for (const t of attached) {
      if (stopped.has(t)) continue;
      const [r, status] = waitpid(t, WNOHANG | __WALL);
      if (r === t) {
        progressed = true;
        const isStop = (status & 0xff) === 0x7f;
        firstStopNs ??= process.hrtime.bigint();
        if (isStop && status >> 16 === PTRACE_EVENT_STOP) stopped.add(t);
        else if (isStop) {
          // A signal arrived first: the thread is stopped all the same; deliver it at detach.
          pendingSignal.set(t, (status >> 8) & 0xff);
          stopped.add(t);
        } else stopped.add(t); // exited
      } else if (r < 0) {
        stopped.add(t); // not ours any more (exited and reaped)
        progressed = true;
      }
    }
    if (!progressed) {
      if (process.hrtime.bigint() > deadline) {
        detachAll();
        return err(
          mqdError('MQD_E_STOP_FAILED', `threads of pid ${pid} did not stop within ${timeoutMs} ms`),
        );
      }
      pause(20);
    }
  }
  return ok({
    pid,
    tids: attached,
    startedNs,
    resume(): number {
      detachAll();
      return Math.max(1, Number((process.hrtime.bigint() - (firstStopNs ?? startedNs)) / 1000n));
    },
  });
}
