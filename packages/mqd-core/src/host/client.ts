// The supervisor of one DLL host child. Requests are serialised; a host that crashes (signal,
// exit) or stops answering (no message for `rankTimeoutMs`) is killed and replaced, the rank
// it was reading gets MQD_E_DLL_CRASHED / MQD_E_DLL_TIMEOUT, and the ranks not read yet are
// read by the fresh host. Nothing else is lost.
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type MpiLibrary, type MqdError, mqdError, type RankSnapshot, rankNotRead } from '@mqd/model';
import { libraryOfDll } from '../mqs/library.js';
import type { HostMessage, HostStats, HostTarget, SnapshotRequest } from './protocol.js';

export interface DllHostOptions {
  readonly readBudgetBytes?: number;
  readonly stopTimeoutMs?: number;
  /** No message from the host for this long while it reads = a looping DLL. */
  readonly rankTimeoutMs?: number;
  /** Host replacements allowed within one request before the rest is given up. */
  readonly maxRestartsPerRequest?: number;
}

export interface HostRun {
  readonly ranks: RankSnapshot[];
  readonly library: MpiLibrary;
  readonly version: string;
  readonly stats: HostStats | null;
  readonly restarts: number;
  /** Set when the DLL could not be used at all (not ELF, wrong level, ...). */
  readonly error: MqdError | null;
}

function hostEntry(): { file: string; execArgv: string[] } {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.ts')) {
    // Running from sources (tests): load the TypeScript host through tsx.
    return {
      file: here.replace(/client\.ts$/, 'host-main.ts'),
      execArgv: ['--conditions=source', '--import', 'tsx'],
    };
  }
  const js = here.replace(/client\.js$/, 'host-main.js');
  if (!existsSync(js)) throw new Error(`DLL host entry ${js} is missing: run npm run build`);
  return { file: js, execArgv: [] };
}

interface Live {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  listener: ((m: HostMessage) => void) | null;
  exitListener: ((desc: string) => void) | null;
  exited: string | null;
}

export class DllHost {
  private live: Live | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private nextId = 1;
  /** Hosts started over this supervisor's life (1 = never restarted). */
  starts = 0;

  constructor(
    readonly dll: string,
    private readonly opts: DllHostOptions = {},
  ) {}

  private spawn(): Live {
    const { file, execArgv } = hostEntry();
    const child = fork(file, [], {
      execArgv,
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    this.starts++;
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    const live: Live = {
      child,
      listener: null,
      exitListener: null,
      exited: null,
      ready: new Promise<void>((resolve, reject) => {
        const onMsg = (m: HostMessage) => {
          if (m.type === 'ready') resolve();
          else live.listener?.(m);
        };
        child.on('message', onMsg);
        child.on('exit', (code, signal) => {
          const desc = signal ? `killed by ${signal}` : `exited with code ${code}`;
          live.exited = `${desc}${stderr ? `; stderr: ${stderr.trim().split('\n').slice(-3).join(' | ')}` : ''}`;
          reject(new Error(live.exited));
          live.exitListener?.(live.exited);
        });
      }),
    };
    live.ready.catch(() => undefined);
    return live;
  }

  /** Starts the host now if none runs, so its start overlaps the caller's other work. */
  warmUp(): void {
    if (!this.live || this.live.exited) this.live = this.spawn();
  }

  /** Reads `targets` (ranks of one job that use this DLL). Never rejects for DLL or target failures. */
  snapshot(
    targets: readonly HostTarget[],
    keepPids: readonly number[],
    extra: { holdStoppedMs?: number; onStopped?: (pid: number) => void } = {},
  ): Promise<HostRun> {
    const run = this.queue.then(() => this.run(targets, keepPids, extra));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async run(
    targets: readonly HostTarget[],
    keepPids: readonly number[],
    extra: { holdStoppedMs?: number; onStopped?: (pid: number) => void },
  ): Promise<HostRun> {
    const done = new Map<number, RankSnapshot>();
    let pending = [...targets];
    let restarts = 0;
    let last: { library: MpiLibrary; version: string; stats: HostStats } | null = null;
    const maxRestarts = this.opts.maxRestartsPerRequest ?? 3;
    while (pending.length > 0) {
      if (!this.live || this.live.exited) this.live = this.spawn();
      const live = this.live;
      const outcome = await this.request(live, pending, keepPids, extra, done);
      if (outcome.kind === 'done') {
        last = outcome;
        break;
      }
      if (outcome.kind === 'failed') {
        return { ranks: [], library: 'unknown', version: '', stats: null, restarts, error: outcome.error };
      }
      // The host crashed or hung while reading `outcome.pid`: that rank alone pays.
      this.kill(live);
      const culprit = targets.find((t) => t.pid === outcome.pid);
      if (culprit && !done.has(culprit.pid)) {
        const code = outcome.kind === 'timeout' ? 'MQD_E_DLL_TIMEOUT' : 'MQD_E_DLL_CRASHED';
        done.set(
          culprit.pid,
          rankNotRead(culprit, mqdError(code, `${this.dll} on pid ${culprit.pid}: ${outcome.detail}`)),
        );
      }
      pending = targets.filter((t) => !done.has(t.pid));
      restarts++;
      if (restarts > maxRestarts) {
        for (const t of pending) {
          done.set(
            t.pid,
            rankNotRead(
              t,
              mqdError('MQD_E_DLL_CRASHED', `gave up after ${restarts} DLL host restarts in one snapshot`),
            ),
          );
        }
        break;
      }
    }
    const ranks = targets.map((t) => done.get(t.pid)).filter((r): r is RankSnapshot => r !== undefined);
    return {
      ranks,
      // No rank answered: judge the library by the DLL's name alone.
      library: last?.library ?? libraryOfDll(this.dll),
      version: last?.version ?? '',
      stats: last?.stats ?? null,
      restarts,
      error: null,
    };
  }

  private async request(
    live: Live,
    targets: readonly HostTarget[],
    keepPids: readonly number[],
    extra: { holdStoppedMs?: number; onStopped?: (pid: number) => void },
    done: Map<number, RankSnapshot>,
  ): Promise<
    | { kind: 'done'; library: MpiLibrary; version: string; stats: HostStats }
    | { kind: 'failed'; error: MqdError }
    | { kind: 'crashed' | 'timeout'; pid: number | null; detail: string }
  > {
    try {
      await live.ready;
    } catch (e) {
      return { kind: 'crashed', pid: null, detail: `host did not start: ${(e as Error).message}` };
    }
    const id = this.nextId++;
    const rankTimeoutMs = this.opts.rankTimeoutMs ?? 15_000;
    return new Promise((resolve) => {
      let current: number | null = null;
      let timer: NodeJS.Timeout | null = null;
      const arm = () => {
        if (timer) clearTimeout(timer);
        timer = setTimeout(
          () =>
            finish({ kind: 'timeout', pid: current, detail: `no answer for ${rankTimeoutMs} ms (looping?)` }),
          rankTimeoutMs,
        );
      };
      const finish = (r: Parameters<typeof resolve>[0]) => {
        if (timer) clearTimeout(timer);
        live.listener = null;
        live.exitListener = null;
        resolve(r);
      };
      live.listener = (m) => {
        if (!('id' in m) || m.id !== id) return;
        arm();
        switch (m.type) {
          case 'begin':
            current = m.pid;
            break;
          case 'stopped':
            extra.onStopped?.(m.pid);
            break;
          case 'rank':
            done.set(m.rank.pid, m.rank);
            current = null;
            break;
          case 'done':
            finish({ kind: 'done', library: m.library, version: m.version, stats: m.stats });
            break;
          case 'failed':
            finish({ kind: 'failed', error: m.error });
            break;
          case 'pong':
            break;
        }
      };
      live.exitListener = (desc) => finish({ kind: 'crashed', pid: current, detail: `DLL host ${desc}` });
      arm();
      const req: SnapshotRequest = {
        type: 'snapshot',
        id,
        dll: this.dll,
        targets,
        keepPids,
        readBudgetBytes: this.opts.readBudgetBytes ?? 64 << 20,
        stopTimeoutMs: this.opts.stopTimeoutMs ?? 2000,
        ...(extra.holdStoppedMs !== undefined ? { holdStoppedMs: extra.holdStoppedMs } : {}),
      };
      live.child.send(req);
    });
  }

  private kill(live: Live): void {
    if (!live.exited) live.child.kill('SIGKILL');
    if (this.live === live) this.live = null;
  }

  /** The host's pid, if one is running (for tests). */
  get hostPid(): number | null {
    return this.live && !this.live.exited ? (this.live.child.pid ?? null) : null;
  }

  async dispose(): Promise<void> {
    const live = this.live;
    this.live = null;
    if (live && !live.exited) {
      const gone = new Promise<void>((r) => live.child.once('exit', () => r()));
      live.child.kill('SIGKILL');
      await gone;
    }
  }
}
