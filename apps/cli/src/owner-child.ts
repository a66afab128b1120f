// A child process that is a job's owner, for the CLI's and the agent's work on what the job
// can name: locating a starter's ranks (locate-main.ts) and making a capture directory
// (capture-owner-main.ts). Forked like a reader (readerForkOptions: the owner's uid/gid when we
// are root, no supplementary groups, an allow-listed environment); the child sets
// PR_SET_NO_NEW_PRIVS and checks who it is (enterReader) before it handles anything. Requests
// are answered by id; a request that gets no answer in time kills the child.
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  enterReader,
  type ReaderCredentials,
  readerForkOptions,
  readerIdentity,
  setParentDeathSignal,
} from '@mqd/core';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';

/** What an owner child says: who it is (or why it is not), then one answer per request. */
export type OwnerChildMessage<A> =
  | { readonly type: 'ready'; readonly credentials: ReaderCredentials }
  | { readonly type: 'privdrop'; readonly error: MqdError }
  | { readonly type: 'answer'; readonly id: number; readonly result: Result<A, MqdError> };

/** Requests carry the id their answer names. */
export type WithId<R> = R & { readonly id: number };

/** The child's entry file next to this one (`name`.ts from the sources, `name`.js built). */
function entry(name: string): { file: string; execArgv: string[] } {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.ts')) {
    return {
      file: here.replace(/owner-child\.ts$/, `${name}.ts`),
      execArgv: ['--conditions=source', '--import', 'tsx'],
    };
  }
  const js = here.replace(/owner-child\.js$/, `${name}.js`);
  if (!existsSync(js)) throw new Error(`owner child entry ${js} is missing: run npm run build`);
  return { file: js, execArgv: [] };
}

/**
 * The parent's end. `R` is the union of requests (each with a string `type`), `A` the union of
 * their answers; `ask` returns the answer type the caller names.
 */
export class OwnerChild<R extends { readonly type: string }, A> {
  private readonly child: ChildProcess;
  private readonly ready: Promise<Result<ReaderCredentials, MqdError>>;
  private readonly waiting = new Map<number, (r: Result<A, MqdError>) => void>();
  private nextId = 1;
  private exited: string | null = null;
  private stderr = '';

  /** `name`: the child's entry file (locate-main, capture-owner-main); `what`: for messages. */
  constructor(
    name: string,
    uid: number,
    gid: number,
    private readonly what: string,
  ) {
    const { file, execArgv } = entry(name);
    this.child = fork(file, [], {
      execArgv,
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      ...readerForkOptions(readerIdentity(uid, gid)),
    });
    this.child.stderr?.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-2000);
    });
    this.ready = new Promise((resolveReady) => {
      this.child.on('message', (m: OwnerChildMessage<A>) => {
        if (m.type === 'ready') resolveReady(ok(m.credentials));
        else if (m.type === 'privdrop') resolveReady(err(m.error));
        else this.waiting.get(m.id)?.(m.result);
      });
      this.child.on('exit', (code, signal) => {
        this.exited = `${this.what} ${signal ? `was killed by ${signal}` : `exited with code ${code}`}${this.stderr ? `: ${this.stderr.trim()}` : ''}`;
        const gone = err(mqdError('MQD_E_INTERNAL', this.exited));
        resolveReady(gone);
        for (const w of [...this.waiting.values()]) w(gone);
      });
      this.child.on('error', () => undefined); // a failed fork shows as its exit
    });
  }

  /** Who the child is (uid, gid, groups, NoNewPrivs) once it checked itself, or why it is not. */
  credentials(): Promise<Result<ReaderCredentials, MqdError>> {
    return this.ready;
  }

  /** Sends `req` and waits (its start included) at most `timeoutMs` for its answer. */
  ask<T extends A>(req: R, timeoutMs: number): Promise<Result<T, MqdError>> {
    const id = this.nextId++;
    return new Promise((resolveAnswer) => {
      const finish = (r: Result<A, MqdError>) => {
        clearTimeout(timer);
        this.waiting.delete(id);
        // The child answers each request in kind (its entry's handler decides the type).
        resolveAnswer(r as Result<T, MqdError>);
      };
      const timer = setTimeout(() => {
        this.dispose();
        finish(err(mqdError('MQD_E_INTERNAL', `${this.what} did not answer ${req.type} in ${timeoutMs} ms`)));
      }, timeoutMs);
      this.waiting.set(id, finish);
      void this.ready.then((ready) => {
        if (!this.waiting.has(id)) return;
        if (!ready.ok) return finish(ready);
        if (this.exited !== null) return finish(err(mqdError('MQD_E_INTERNAL', this.exited)));
        try {
          this.child.send({ ...req, id } satisfies WithId<R>);
        } catch (e) {
          finish(
            err(
              mqdError('MQD_E_INTERNAL', `cannot send ${req.type} to ${this.what}: ${(e as Error).message}`),
            ),
          );
        }
      });
    });
  }

  dispose(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

/**
 * The child's end, called once by its entry file: dies with its parent, checks who it is
 * (enterReader) and says so, then answers every request with `handle` (synchronously, in order)
 * until the parent disconnects. A child that is not who it was asked to be handles nothing.
 */
export function serveAsOwner<R extends { readonly type: string }, A>(
  handle: (req: R, me: ReaderCredentials) => Result<A, MqdError>,
): void {
  const SIGKILL = 9;
  setParentDeathSignal(SIGKILL);
  if (process.ppid === 1) process.exit(1); // the parent died before we could ask
  const send = (m: OwnerChildMessage<A>, then: () => void = () => {}) => process.send?.(m, then);
  const entered = enterReader();
  if (!entered.ok) {
    send({ type: 'privdrop', error: entered.error }, () => process.exit(1));
    return;
  }
  process.on('message', (req: WithId<R>) => {
    send({ type: 'answer', id: req.id, result: handle(req, entered.value) });
  });
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready', credentials: entered.value });
}
