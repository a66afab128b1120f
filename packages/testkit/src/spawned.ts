// One spawned process as the testkit holds it: its output, its exit, and every process seen as
// its own, kept by identity (pid and start time) so a pid the kernel has reused is never
// signalled. The fixture jobs (launch.ts) and the processes started in network namespaces
// (netns.ts) are both this, each with its own way of finding and ending the rest of its tree.
import type { ChildProcess } from 'node:child_process';
import { identify, type ProcIdentity } from './procfs.js';
import { done, pending, waitFor } from './wait.js';

export interface ExitStatus {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** Sends a signal; a process that is already gone is what the caller wanted. */
export function trySignal(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (e) {
    // ESRCH: already gone, which is what we want.
    if (!(e instanceof Error && 'code' in e && e.code === 'ESRCH')) throw e;
  }
}

export class SpawnedProcess {
  private readonly chunks: string[] = [];
  protected exit: ExitStatus | undefined;
  /** Every process ever seen as part of this one, so orphans (reparented to init) are not lost. */
  protected readonly known = new Map<number, ProcIdentity>();

  constructor(protected readonly child: ChildProcess) {
    child.stdout?.setEncoding('utf8').on('data', (d: string) => this.chunks.push(d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => this.chunks.push(d));
    // 'close' comes after 'exit' and after the output pipes are drained: output() is complete.
    child.on('close', (code, signal) => {
      this.exit = { code, signal };
    });
  }

  output(): string {
    return this.chunks.join('');
  }

  exitStatus(): ExitStatus | undefined {
    return this.exit;
  }

  /** Remembers `pid` as part of this process tree, with its identity as of now. */
  remember(pid: number): void {
    if (this.known.has(pid)) return;
    const id = identify(pid);
    if (id !== undefined) this.known.set(pid, id);
  }

  /**
   * Waits until the child is reaped and its output pipes are closed; when a stray process
   * outside the tree still holds them, stops reading rather than hang the teardown.
   */
  protected async pipesClosed(timeoutMs: number, what: string): Promise<void> {
    await waitFor(() => (this.exit ? done(true) : pending()), { timeoutMs, what }).catch(() => {
      this.child.stdout?.destroy();
      this.child.stderr?.destroy();
    });
  }
}
