// One traced process (every thread of it), driven from the JS main thread: PTRACE_SEIZE'd with
// exec and clone tracing, int3 breakpoints, and a release that always leaves the process
// running, untraced and with its original code, whatever happened before.
//
// ptrace is per thread on both sides: the thread that seized must issue every request and every
// waitpid, so everything here is a synchronous koffi call on the calling thread. waitpid is
// only ever called for one traced tid at a time (never -1): -1 would also reap Node's own
// children behind libuv's back. The tracee must not be a child libuv spawned for the same reason
// in reverse: libuv's SIGCHLD handler would take its ptrace-stops for exits (launch.ts puts
// `timeout` between Node and the tracee).
import { ptraceExt as pt, TargetMemory } from '@mqd/core';
import { type MqdError, mqdError } from '@mqd/model';

/** Something the driver must decide about; routine stops are handled inside. */
export type TraceStop =
  | { readonly kind: 'exec' }
  | { readonly kind: 'breakpoint'; readonly tid: number; readonly address: bigint }
  | { readonly kind: 'exit'; readonly code: number | null; readonly signal: number | null };

const sleepCell = new Int32Array(new SharedArrayBuffer(4));
/** A short synchronous pause: a tracer that releases must not yield (nothing else may touch the tracee). */
function pauseMs(ms: number): void {
  Atomics.wait(sleepCell, 0, 0, ms);
}

export class Tracer {
  /** Every traced thread. */
  private readonly tids = new Set<number>();
  /** Threads in a ptrace-stop that we have not resumed, with the signal to deliver when they go on. */
  private readonly held = new Map<number, number>();
  /** Armed breakpoints: address -> original byte. */
  private readonly breakpoints = new Map<bigint, number>();
  /** Threads stopped on an int3 of ours whose ip still points past it. */
  private readonly pastBreakpoint = new Map<number, bigint>();
  private readonly queue: TraceStop[] = [];
  private exited: TraceStop | null = null;
  private released = false;

  private constructor(readonly pid: number) {
    this.tids.add(pid);
  }

  /** Seizes a single-threaded process that has not started the program yet (it is about to exec). */
  static seize(pid: number): Tracer | MqdError {
    const r = pt.seize(pid, pt.PTRACE_O_TRACEEXEC | pt.PTRACE_O_TRACECLONE | pt.PTRACE_O_EXITKILL);
    if (r === -pt.EPERM)
      return mqdError('MQD_E_PTRACE_DENIED', `cannot trace the launched starter (pid ${pid}): ptrace denied`);
    if (r < 0)
      return mqdError(
        'MQD_E_STOP_FAILED',
        `PTRACE_SEIZE of the launched starter (pid ${pid}) failed (errno ${-r})`,
      );
    return new Tracer(pid);
  }

  get threadCount(): number {
    return this.tids.size;
  }

  /** Resumes a held thread (delivering its pending signal unless told otherwise). */
  resume(tid: number, signal?: number): void {
    const pending = this.held.get(tid);
    if (pending === undefined) return;
    this.held.delete(tid);
    const r = pt.cont(tid, signal ?? pending);
    if (r < 0) this.tids.delete(tid); // gone meanwhile (ESRCH): its exit is all that is left
  }

  private heldTid(): number | null {
    for (const tid of this.held.keys()) return tid;
    return null;
  }

  private readWord(aligned: bigint): bigint | null {
    const b = new TargetMemory(this.pid, 64).readBytes(aligned, 8);
    return b ? new DataView(b.buffer).getBigUint64(0, true) : null;
  }

  /** Writes `bytes` at `addr` through PTRACE_POKEDATA (text too), one aligned word at a time. */
  write(addr: bigint, bytes: Uint8Array): MqdError | null {
    const tid = this.heldTid();
    if (tid === null)
      return mqdError('MQD_E_INTERNAL', 'write to the tracee while no thread of it is stopped');
    for (let i = 0; i < bytes.length; ) {
      const a = addr + BigInt(i);
      const aligned = a & ~7n;
      const word = this.readWord(aligned);
      if (word === null)
        return mqdError('MQD_E_STOP_FAILED', `cannot read the starter's memory at 0x${aligned.toString(16)}`);
      const buf = new DataView(new ArrayBuffer(8));
      buf.setBigUint64(0, word, true);
      for (let off = Number(a - aligned); off < 8 && i < bytes.length; off++, i++)
        buf.setUint8(off, bytes[i] ?? 0);
      const r = pt.pokeWord(tid, aligned, buf.getBigUint64(0, true));
      if (r < 0)
        return mqdError(
          'MQD_E_STOP_FAILED',
          `PTRACE_POKEDATA at 0x${aligned.toString(16)} failed (errno ${-r})`,
        );
    }
    return null;
  }

  writeInt32(addr: bigint, value: number): MqdError | null {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setInt32(0, value, true);
    return this.write(addr, b);
  }

  arm(addr: bigint): MqdError | null {
    if (this.breakpoints.has(addr)) return null;
    const aligned = addr & ~7n;
    const word = this.readWord(aligned);
    if (word === null)
      return mqdError('MQD_E_STOP_FAILED', `cannot read the starter's code at 0x${addr.toString(16)}`);
    const original = Number((word >> (8n * (addr - aligned))) & 0xffn);
    const e = this.write(addr, Uint8Array.of(pt.INT3));
    if (e) return e;
    this.breakpoints.set(addr, original);
    return null;
  }

  /** Puts the original byte back; a thread stopped on it is moved back onto the instruction. */
  disarm(addr: bigint): MqdError | null {
    const original = this.breakpoints.get(addr);
    if (original === undefined) return null;
    const e = this.write(addr, Uint8Array.of(original));
    if (e) return e;
    this.breakpoints.delete(addr);
    for (const [tid, at] of this.pastBreakpoint) {
      if (at !== addr) continue;
      pt.writeIp(tid, addr);
      this.pastBreakpoint.delete(tid);
    }
    return null;
  }

  /** One round of waitpid on every traced thread; routine stops are resumed, the rest queued. */
  private poll(): void {
    for (const tid of [...this.tids]) {
      if (this.held.has(tid)) continue;
      const ev = pt.waitThread(tid);
      switch (ev.kind) {
        case 'none':
          break;
        case 'error': // ECHILD: exited and reaped already
        case 'exited':
        case 'killed':
          this.tids.delete(tid);
          this.pastBreakpoint.delete(tid);
          if (tid === this.pid) {
            this.exited = {
              kind: 'exit',
              code: ev.kind === 'exited' ? ev.code : null,
              signal: ev.kind === 'killed' ? ev.signal : null,
            };
          }
          break;
        case 'stopped':
          this.onStop(tid, ev.signal, ev.event);
          break;
        default:
          ev satisfies never;
      }
    }
  }

  private onStop(tid: number, signal: number, event: number): void {
    this.held.set(tid, 0);
    if (event === pt.PTRACE_EVENT_CLONE) {
      const child = pt.eventMessage(tid);
      if (child > 0n) this.tids.add(Number(child));
      this.resume(tid);
    } else if (event === pt.PTRACE_EVENT_EXEC) {
      // A new program: the old breakpoints went with the old image.
      this.breakpoints.clear();
      this.pastBreakpoint.clear();
      this.queue.push({ kind: 'exec' });
    } else if (event === pt.PTRACE_EVENT_STOP) {
      // A new thread's first stop, or a group-stop: let it run.
      this.resume(tid);
    } else if (signal === pt.SIGTRAP && event === 0) {
      const ip = pt.readIp(tid);
      const at = typeof ip === 'bigint' ? ip - 1n : -1n;
      if (this.breakpoints.has(at)) {
        this.pastBreakpoint.set(tid, at);
        this.queue.push({ kind: 'breakpoint', tid, address: at });
      } else this.resume(tid, signal); // not ours: the program's own SIGTRAP
    } else {
      this.resume(tid, signal); // a signal for the program: deliver it
    }
  }

  /** The next stop the driver must decide about, or 'timeout' at the deadline. */
  async next(deadline: number): Promise<TraceStop | 'timeout'> {
    let interval = 2;
    for (;;) {
      const q = this.queue.shift();
      if (q) return q;
      if (this.exited) return this.exited;
      this.poll();
      if (this.queue.length > 0 || this.exited) continue;
      if (Date.now() >= deadline) return 'timeout';
      await new Promise((r) => setTimeout(r, interval));
      interval = Math.min(interval * 2, 25);
    }
  }

  /** Brings every thread into a ptrace-stop (PTRACE_INTERRUPT); gone threads are dropped. */
  private stopAll(timeoutMs: number): boolean {
    const deadline = Date.now() + timeoutMs;
    const interrupted = new Set<number>();
    for (;;) {
      let progressed = false;
      for (const tid of [...this.tids]) {
        if (this.held.has(tid)) continue;
        if (!interrupted.has(tid)) {
          interrupted.add(tid);
          pt.interrupt(tid);
        }
        const ev = pt.waitThread(tid);
        if (ev.kind === 'none') continue;
        progressed = true;
        if (ev.kind !== 'stopped') {
          this.tids.delete(tid);
          this.pastBreakpoint.delete(tid);
          continue;
        }
        if (ev.event === pt.PTRACE_EVENT_CLONE) {
          const child = pt.eventMessage(tid);
          if (child > 0n) this.tids.add(Number(child));
          this.held.set(tid, 0);
        } else if (ev.event === pt.PTRACE_EVENT_EXEC) {
          // A new image: the old breakpoint addresses mean nothing in it.
          this.breakpoints.clear();
          this.pastBreakpoint.clear();
          this.held.set(tid, 0);
        } else if (ev.event !== 0) {
          this.held.set(tid, 0); // our interrupt, a new thread's first stop
        } else if (ev.signal === pt.SIGTRAP) {
          const ip = pt.readIp(tid);
          const at = typeof ip === 'bigint' ? ip - 1n : -1n;
          if (this.breakpoints.has(at)) {
            this.pastBreakpoint.set(tid, at);
            this.held.set(tid, 0);
          } else this.held.set(tid, ev.signal);
        } else {
          this.held.set(tid, ev.signal); // delivered when it is detached
        }
      }
      if ([...this.tids].every((t) => this.held.has(t))) return true;
      if (Date.now() >= deadline) return false;
      if (!progressed) pauseMs(1);
    }
  }

  /**
   * Leaves the process running and untraced: every thread stopped, every breakpoint byte put
   * back, every thread that stopped on one moved back onto it, then each detached with the
   * signal it was about to receive. Idempotent; never throws.
   */
  release(): MqdError | null {
    if (this.released) return null;
    this.released = true;
    let problem: MqdError | null = null;
    if (!this.stopAll(5000)) {
      problem = mqdError(
        'MQD_E_STOP_FAILED',
        `not every thread of the starter (pid ${this.pid}) stopped for the release`,
      );
    }
    for (const addr of [...this.breakpoints.keys()]) {
      const e = this.disarm(addr);
      problem ??= e;
    }
    for (const [tid, sig] of this.held) pt.detach(tid, sig);
    this.held.clear();
    this.tids.clear();
    return problem;
  }
}
