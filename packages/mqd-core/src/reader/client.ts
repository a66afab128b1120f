// The supervisor of one reader child. Requests are serialised; a host that crashes (signal,
// exit) or stops answering (no message for `rankTimeoutMs`) is killed and replaced, the rank
// it was reading gets MQD_E_DLL_CRASHED / MQD_E_DLL_TIMEOUT, and the ranks not read yet are
// read by the fresh host. Nothing else is lost. A host killed by a signal this supervisor did
// not send and no crash raises (SIGKILL from the OOM killer or an admin) is no fault of the DLL:
// that rank gets MQD_E_READER_KILLED instead.
import type { ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import {
  type EvalRequest,
  type MpiLibrary,
  type MqdError,
  mqdError,
  ok,
  type RankSnapshot,
  rankNotRead,
} from '@mqd/model';
import { libraryOfDll } from '../mqs/libraries/index.js';
import { credentials } from '../native/libc.js';
import { checkDllPolicy, type DllPolicy } from '../policy/dll-policy.js';
import type { ReaderCredentials, ReaderIdentity } from './identity.js';
import type {
  Captured,
  CaptureRequest,
  RankWire,
  ReaderMessage,
  ReaderRank,
  ReaderRequest,
  ReaderStats,
  Resolved,
  ResolveRequest,
  ResolveTarget,
  SnapshotRequest,
} from './protocol.js';
import { adoptStartedReader, forkReader } from './reader-spawn.js';
import { rankFromWire } from './wire.js';

export interface ReaderClientOptions {
  readonly readBudgetBytes?: number;
  readonly stopTimeoutMs?: number;
  /** No message from the host for this long while it reads = a looping DLL. */
  readonly rankTimeoutMs?: number;
  /** Host replacements allowed within one request before the rest is given up. */
  readonly maxRestartsPerRequest?: number;
  /** 'root-owned': the DLL and every directory above it must be root's and not group/other-writable. */
  readonly dllPolicy?: DllPolicy;
  /** How readers send ranks back (protocol.ts RankWire); default 'columns'. */
  readonly wire?: RankWire;
  /**
   * Most reader children reading the ranks of one DLL in parallel (Snapshotter); default: the
   * cores available. Each reads at least MIN_RANKS_PER_READER ranks, so small jobs use one.
   */
  readonly maxReadersPerDll?: number;
}

/** Below this many ranks per reader a second reader costs more (its own cold start) than it saves. */
export const MIN_RANKS_PER_READER = 8;

export interface ReaderRun {
  readonly ranks: RankSnapshot[];
  readonly library: MpiLibrary;
  readonly version: string;
  readonly stats: ReaderStats | null;
  readonly restarts: number;
  /** Set when the DLL could not be used at all (not ELF, wrong level, ...). */
  readonly error: MqdError | null;
}

interface Live {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  /** Set when the child said it is not who it was asked to be (it exits right after). */
  privdrop: MqdError | null;
  listener: ((m: ReaderMessage) => void) | null;
  exitListener: ((desc: string, how: ExitKind) => void) | null;
  exited: string | null;
  /** Set when this supervisor sent the SIGKILL (timeout, restart, dispose). */
  killedByUs: boolean;
  /**
   * Set when the reader said it still traces threads it could not detach (`retiring`): it gets
   * no further request and is killed once its answer is in (its end lets those threads go).
   */
  retiring: boolean;
}

/** How a reader ended: on its own (crash, exit) or by a signal from outside. */
type ExitKind = 'crashed' | 'killed';

/** The signals a process raises on itself when it faults (a DLL's bad pointer, abort()). */
const CRASH_SIGNALS: ReadonlySet<NodeJS.Signals> = new Set([
  'SIGSEGV',
  'SIGBUS',
  'SIGABRT',
  'SIGILL',
  'SIGFPE',
  'SIGSYS',
  'SIGTRAP',
]);

/** `killedByUs` aside, a reader ended by any other signal was killed from outside. */
export function exitKind(signal: NodeJS.Signals | null): ExitKind {
  return signal !== null && !CRASH_SIGNALS.has(signal) ? 'killed' : 'crashed';
}

/** The identity of a reader that runs as this process (no uid switch). */
function ownIdentity(): ReaderIdentity {
  const me = credentials();
  return { uid: me.uid, gid: me.gid, switched: false };
}

/** How long dispose() waits for a SIGKILLed host to be reaped (one in uninterruptible sleep is not). */
export const DISPOSE_WAIT_MS = 2000;

/** What a rank not read because its supervisor was disposed gets. */
function shutDown(pid: number): MqdError {
  return mqdError(
    'MQD_E_AGENT_MISSING',
    `pid ${pid} was not read: the agent is shutting down and starts no more readers; take the snapshot again once it runs`,
  );
}

export class ReaderClient {
  private live: Live | null = null;
  /** Set by dispose(): from then on no host is started, and what was asked is answered without one. */
  private disposed = false;
  private queue: Promise<unknown> = Promise.resolve();
  private nextId = 1;
  /** Hosts started over this supervisor's life (1 = never restarted). */
  starts = 0;
  /** What the last reader child reported about itself (uid, gid, groups, NoNewPrivs). */
  credentials: ReaderCredentials | null = null;
  readonly identity: ReaderIdentity;
  private boundDll: string | null;
  /**
   * OMPD libraries that crashed or hung one of this supervisor's readers (path → what happened):
   * readers are told not to load them again, so one bad libompd costs one read, not every read.
   */
  readonly ompdRefused: Record<string, string> = {};

  /**
   * `dll` null: a reader that only resolves DLL names until `bind` gives it one. `identity`: the
   * uid/gid its child runs as (default: this process's own, no switch).
   */
  constructor(
    dll: string | null,
    private readonly opts: ReaderClientOptions = {},
    identity: ReaderIdentity | null = null,
  ) {
    this.boundDll = dll;
    this.identity = identity ?? ownIdentity();
  }

  get dll(): string {
    if (this.boundDll === null) throw new Error('ReaderClient: no DLL bound yet');
    return this.boundDll;
  }

  get bound(): boolean {
    return this.boundDll !== null;
  }

  /** Gives a resolving reader its DLL (once; it has not loaded any). */
  bind(dll: string): void {
    if (this.boundDll !== null && this.boundDll !== dll)
      throw new Error('ReaderClient: already bound to another DLL');
    this.boundDll = dll;
  }

  private spawn(): Live {
    if (this.disposed) throw new Error('ReaderClient: a host was asked for after dispose()');
    // A reader the CLI started before it loaded this code (reader-spawn.ts startReaderEarly), or a new one.
    // One that died meanwhile is not used (its request would fail for nothing).
    const adopted = adoptStartedReader(this.identity);
    const early = adopted?.exit === null ? adopted : null;
    const child = early?.child ?? forkReader(this.identity);
    this.starts++;
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    let settle: { resolve: () => void; reject: (e: Error) => void } | null = null;
    const live: Live = {
      child,
      privdrop: null,
      listener: null,
      exitListener: null,
      exited: null,
      killedByUs: false,
      retiring: false,
      ready: new Promise<void>((resolve, reject) => {
        settle = { resolve, reject };
      }),
    };
    const onMsg = (m: ReaderMessage) => {
      if (m.type === 'ready') {
        this.credentials = m.credentials;
        settle?.resolve();
      } else if (m.type === 'privdrop') live.privdrop = m.error;
      else {
        if (m.type === 'retiring') {
          live.retiring = true;
          if (this.live === live) this.live = null;
        }
        live.listener?.(m);
        // Nobody waits on it (a capture's answers come after it): nothing to finish first.
        if (m.type === 'retiring' && live.listener === null) this.kill(live);
      }
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      const desc = signal ? `killed by ${signal}` : `exited with code ${code}`;
      live.exited = `${desc}${stderr ? `; stderr: ${stderr.trim().split('\n').slice(-3).join(' | ')}` : ''}`;
      settle?.reject(new Error(live.exited));
      // Our own SIGKILL (timeout, restart) follows a settled request; of the others, a fault signal
      // is the DLL's (or libompd's), anything else came from outside.
      live.exitListener?.(live.exited, live.killedByUs ? 'crashed' : exitKind(signal));
    };
    child.on('message', onMsg);
    child.on('exit', onExit);
    // What an early reader said before it was adopted, in order.
    for (const m of early?.messages ?? []) onMsg(m as ReaderMessage);
    live.ready.catch(() => undefined);
    return live;
  }

  /** Starts the host now if none runs, so its start overlaps the caller's other work. */
  warmUp(): void {
    if (this.disposed) return;
    if (!this.live || this.live.exited) this.live = this.spawn();
  }

  /** Reads `targets` (ranks of one job that use this DLL). Never rejects for DLL or target failures. */
  snapshot(
    targets: readonly ReaderRank[],
    keepPids: readonly number[],
    extra: {
      holdStoppedMs?: number;
      onStopped?: (pid: number) => void;
      stacks?: boolean;
      light?: boolean;
      evals?: readonly EvalRequest[];
    } = {},
  ): Promise<ReaderRun> {
    const run = this.queue.then(() => this.run(targets, keepPids, extra));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async run(
    targets: readonly ReaderRank[],
    keepPids: readonly number[],
    extra: {
      holdStoppedMs?: number;
      onStopped?: (pid: number) => void;
      stacks?: boolean;
      light?: boolean;
      evals?: readonly EvalRequest[];
    },
  ): Promise<ReaderRun> {
    const done = new Map<number, RankSnapshot>();
    let pending = [...targets];
    let restarts = 0;
    let last: { library: MpiLibrary; version: string; stats: ReaderStats } | null = null;
    const maxRestarts = this.opts.maxRestartsPerRequest ?? 3;
    const allowed = checkDllPolicy(this.dll, this.opts.dllPolicy ?? 'any');
    if (!allowed.ok) {
      return { ranks: [], library: 'unknown', version: '', stats: null, restarts, error: allowed.error };
    }
    while (pending.length > 0) {
      if (this.disposed) {
        for (const t of pending) done.set(t.pid, rankNotRead(t, shutDown(t.pid)));
        break;
      }
      if (!this.live || this.live.exited) this.live = this.spawn();
      const live = this.live;
      const answered = done.size;
      const outcome = await this.request(live, pending, keepPids, extra, done);
      if (outcome.kind === 'done') {
        last = outcome;
        break;
      }
      if (outcome.kind === 'retired') {
        // Not a fault: the reader ended to let go of threads that never stopped; the rank whose
        // stop failed has its answer, the rest are read by a fresh reader.
        const culprit = targets.find((t) => t.pid === outcome.pid);
        if (culprit && !done.has(culprit.pid)) {
          done.set(
            culprit.pid,
            rankNotRead(
              culprit,
              mqdError(
                'MQD_E_STOP_FAILED',
                `threads of pid ${culprit.pid} never stopped; the reader ended to let them go`,
              ),
            ),
          );
        }
        pending = targets.filter((t) => !done.has(t.pid));
        // Each retirement costs a rank; one that answered none of ours counts as a restart.
        if (done.size === answered && ++restarts > maxRestarts) {
          for (const t of pending) {
            done.set(
              t.pid,
              rankNotRead(
                t,
                mqdError('MQD_E_DLL_CRASHED', `gave up after ${restarts} reader restarts in one snapshot`),
              ),
            );
          }
          break;
        }
        continue;
      }
      if (outcome.kind === 'failed') {
        return { ranks: [], library: 'unknown', version: '', stats: null, restarts, error: outcome.error };
      }
      // Killed by dispose(): no culprit, and no fresh host for the rest.
      if (this.disposed) {
        pending = targets.filter((t) => !done.has(t.pid));
        continue;
      }
      // The host crashed, hung or was killed while reading `outcome.pid`: that rank alone pays.
      this.kill(live);
      const culprit = targets.find((t) => t.pid === outcome.pid);
      if (culprit && !done.has(culprit.pid) && outcome.kind === 'killed') {
        // Not the DLL's fault, nor the OMPD library's: nothing is refused next time.
        done.set(
          culprit.pid,
          rankNotRead(
            culprit,
            mqdError('MQD_E_READER_KILLED', `reading pid ${culprit.pid}: ${outcome.detail}`),
          ),
        );
      } else if (culprit && !done.has(culprit.pid)) {
        const what = outcome.kind === 'timeout' ? 'hung' : 'crashed';
        if (outcome.ompd !== null) {
          // In the rank's OMPD library, not the MQD DLL: never load that library again.
          this.ompdRefused[outcome.ompd] = `${what} reading pid ${culprit.pid} (${outcome.detail})`;
          done.set(
            culprit.pid,
            rankNotRead(
              culprit,
              mqdError('MQD_E_OMPD_CRASHED', `${outcome.ompd} on pid ${culprit.pid}: ${outcome.detail}`),
            ),
          );
        } else {
          const code = outcome.kind === 'timeout' ? 'MQD_E_DLL_TIMEOUT' : 'MQD_E_DLL_CRASHED';
          done.set(
            culprit.pid,
            rankNotRead(culprit, mqdError(code, `${this.dll} on pid ${culprit.pid}: ${outcome.detail}`)),
          );
        }
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
    targets: readonly ReaderRank[],
    keepPids: readonly number[],
    extra: {
      holdStoppedMs?: number;
      onStopped?: (pid: number) => void;
      stacks?: boolean;
      light?: boolean;
      evals?: readonly EvalRequest[];
    },
    done: Map<number, RankSnapshot>,
  ): Promise<
    | { kind: 'done'; library: MpiLibrary; version: string; stats: ReaderStats }
    | { kind: 'failed'; error: MqdError }
    | { kind: 'retired'; pid: number }
    | { kind: 'crashed' | 'timeout' | 'killed'; pid: number | null; detail: string; ompd: string | null }
  > {
    try {
      await live.ready;
    } catch (e) {
      if (live.privdrop) return { kind: 'failed', error: live.privdrop };
      return {
        kind: 'crashed',
        pid: null,
        detail: `host did not start: ${(e as Error).message}`,
        ompd: null,
      };
    }
    const id = this.nextId++;
    const rankTimeoutMs = this.opts.rankTimeoutMs ?? 15_000;
    return new Promise((resolve) => {
      let current: number | null = null;
      /** The OMPD library the reader entered for `current`, if it did. */
      let ompd: string | null = null;
      let timer: NodeJS.Timeout | null = null;
      const arm = () => {
        if (timer) clearTimeout(timer);
        timer = setTimeout(
          () =>
            finish({
              kind: 'timeout',
              pid: current,
              detail: `no answer for ${rankTimeoutMs} ms (looping?)`,
              ompd,
            }),
          rankTimeoutMs,
        );
      };
      const finish = (r: Parameters<typeof resolve>[0]) => {
        if (timer) clearTimeout(timer);
        live.listener = null;
        live.exitListener = null;
        if (live.retiring) this.kill(live);
        resolve(r);
      };
      live.listener = (m) => {
        if (!('id' in m) || m.id !== id) return;
        arm();
        switch (m.type) {
          case 'begin':
            current = m.pid;
            ompd = null;
            break;
          case 'ompd':
            if (m.pid === current) ompd = m.library;
            break;
          case 'stopped':
            extra.onStopped?.(m.pid);
            break;
          case 'rank':
          case 'rank-columns': {
            const rank = m.type === 'rank' ? ok(m.rank) : rankFromWire(m.rank);
            // A malformed wire costs the rank being read, like a crash would.
            if (rank.ok) done.set(rank.value.pid, rank.value);
            else if (current !== null) {
              const t = targets.find((x) => x.pid === current);
              if (t) done.set(t.pid, rankNotRead(t, rank.error));
            }
            current = null;
            ompd = null;
            break;
          }
          case 'done':
            finish({ kind: 'done', library: m.library, version: m.version, stats: m.stats });
            break;
          case 'failed':
            finish({ kind: 'failed', error: m.error });
            break;
          case 'retiring':
            finish({ kind: 'retired', pid: m.pid });
            break;
          case 'pong':
            break;
        }
      };
      live.exitListener = (desc, how) =>
        finish({
          kind: how,
          pid: current,
          detail: how === 'killed' ? `the reader was ${desc} from outside MQD` : `DLL host ${desc}`,
          ompd,
        });
      arm();
      const req: SnapshotRequest = {
        type: 'snapshot',
        id,
        dll: this.dll,
        targets,
        keepPids,
        readBudgetBytes: this.opts.readBudgetBytes ?? readBudgetFromEnv(),
        stopTimeoutMs: this.opts.stopTimeoutMs ?? 2000,
        ...(extra.holdStoppedMs !== undefined ? { holdStoppedMs: extra.holdStoppedMs } : {}),
        ...(extra.stacks !== undefined ? { stacks: extra.stacks } : {}),
        ...(extra.light === true ? { light: true } : {}),
        ...(extra.evals !== undefined && extra.evals.length > 0 ? { evals: extra.evals } : {}),
        ...(this.opts.dllPolicy !== undefined ? { ompdPolicy: this.opts.dllPolicy } : {}),
        ompdRefused: { ...this.ompdRefused },
        ...(this.opts.wire !== undefined ? { wire: this.opts.wire } : {}),
      };
      live.child.send(req);
    });
  }

  /**
   * Which DLL each target names (MPIR_dll_name), read by the reader child: the agent never
   * parses a target's files. The child checks each target's owner and start time first.
   */
  resolve(targets: readonly ResolveTarget[]): Promise<Resolved[]> {
    const run = this.queue.then(() => this.runResolve(targets));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private runResolve(targets: readonly ResolveTarget[]): Promise<Resolved[]> {
    const wanted = new Set(targets.map((t) => t.pid));
    return this.ask<Resolved>(
      targets,
      (id) => ({ type: 'resolve', id, targets }) satisfies ResolveRequest,
      (m) => (m.type === 'resolved' ? m.answers : null),
      (t, error) => ({ pid: t.pid, error }),
      this.opts.rankTimeoutMs ?? 15_000,
      'resolve the DLL names',
      wanted,
    );
  }

  /**
   * Writes a core of each target into `dir` (`mqd capture`), as this reader's identity; each
   * rank is stopped only while its core is written. Never rejects.
   */
  capture(targets: readonly ReaderRank[], dir: string): Promise<Captured[]> {
    const run = this.queue.then(() =>
      this.ask<Captured>(
        targets,
        (id) =>
          ({
            type: 'capture',
            id,
            targets,
            dir,
            stopTimeoutMs: this.opts.stopTimeoutMs ?? 2000,
          }) satisfies CaptureRequest,
        (m) => (m.type === 'captured' ? m.answers : null),
        (t, error) => ({ pid: t.pid, rank: (t as ReaderRank).rank, error }),
        // A core of a big rank takes a while to write: a minute per rank.
        60_000 * Math.max(1, targets.length),
        'write the cores',
        new Set(targets.map((t) => t.pid)),
      ),
    );
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * One request answered by one message (resolve, capture): the child runs as the targets'
   * owner, so its answers are data, kept only for pids we asked about; a crash, a hang or no
   * answer for a pid becomes that pid's coded error.
   */
  private async ask<A extends { readonly pid: number }>(
    targets: readonly { readonly pid: number }[],
    request: (id: number) => ReaderRequest,
    answersOf: (m: ReaderMessage) => readonly A[] | null,
    failure: (t: { readonly pid: number }, e: MqdError) => A,
    timeoutMs: number,
    what: string,
    wanted: ReadonlySet<number>,
  ): Promise<A[]> {
    const failAll = (e: MqdError): A[] => targets.map((t) => failure(t, e));
    if (this.disposed) return targets.map((t) => failure(t, shutDown(t.pid)));
    if (!this.live || this.live.exited) this.live = this.spawn();
    const live = this.live;
    try {
      await live.ready;
    } catch (e) {
      this.kill(live);
      return failAll(
        live.privdrop ?? mqdError('MQD_E_DLL_CRASHED', `reader did not start: ${(e as Error).message}`),
      );
    }
    const id = this.nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.kill(live);
        finish(failAll(mqdError('MQD_E_DLL_TIMEOUT', `the reader did not ${what} in ${timeoutMs} ms`)));
      }, timeoutMs);
      const finish = (r: A[]) => {
        clearTimeout(timer);
        live.listener = null;
        live.exitListener = null;
        if (live.retiring) this.kill(live);
        resolve(r);
      };
      live.listener = (m) => {
        if (!('id' in m) || m.id !== id) return;
        const answers = answersOf(m);
        if (answers === null) return;
        const byPid = new Map(answers.filter((a) => wanted.has(a.pid)).map((a) => [a.pid, a]));
        finish(
          targets.map(
            (t) =>
              byPid.get(t.pid) ??
              failure(t, mqdError('MQD_E_INTERNAL', `the reader gave no answer for pid ${t.pid}`)),
          ),
        );
      };
      live.exitListener = (desc, how) =>
        finish(
          failAll(
            how === 'killed'
              ? mqdError('MQD_E_READER_KILLED', `the reader was ${desc} from outside MQD`)
              : mqdError('MQD_E_DLL_CRASHED', `reader ${desc}`),
          ),
        );
      live.child.send(request(id));
    });
  }

  private kill(live: Live): void {
    live.killedByUs = true;
    if (!live.exited) live.child.kill('SIGKILL');
    if (this.live === live) this.live = null;
  }

  /** The host's pid, if one is running (for tests). */
  get hostPid(): number | null {
    return this.live && !this.live.exited ? (this.live.child.pid ?? null) : null;
  }

  /**
   * Kills the host and starts no other: requests in flight and queued are answered without one.
   * Waits up to DISPOSE_WAIT_MS for the host to be reaped; one that is not (stuck in the kernel)
   * no longer keeps this process alive, and dies when it wakes or, with PR_SET_PDEATHSIG, when
   * this process exits.
   */
  async dispose(): Promise<void> {
    this.disposed = true;
    const live = this.live;
    this.live = null;
    if (live && !live.exited) {
      let timer: NodeJS.Timeout | null = null;
      const gone = new Promise<void>((r) => {
        live.child.once('exit', () => r());
        timer = setTimeout(r, DISPOSE_WAIT_MS);
      });
      live.killedByUs = true;
      live.child.kill('SIGKILL');
      await gone;
      if (timer) clearTimeout(timer);
      if (!live.exited) {
        live.child.unref();
        live.child.channel?.unref();
        (live.child.stderr as Socket | null)?.unref();
      }
    }
  }
}

/** Default read budget per rank and stop: 64 MiB, or MQD_READ_BUDGET_BYTES (the error hint names it). */
export const DEFAULT_READ_BUDGET_BYTES = 64 << 20;
export function readBudgetFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const v = env['MQD_READ_BUDGET_BYTES'];
  if (v === undefined || v === '') return DEFAULT_READ_BUDGET_BYTES;
  const n = Number(v);
  // A value that is not a positive integer is ignored rather than turned into no budget at all.
  return Number.isSafeInteger(n) && n >= 4096 ? n : DEFAULT_READ_BUDGET_BYTES;
}
