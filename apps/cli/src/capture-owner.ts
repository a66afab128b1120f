// `mqd capture`'s hands in the capture directory: a child running as the job's owner
// (capture-owner-main.ts) finds or creates the directory, copies the job's files into its
// sysroot and writes the manifest. Root itself only ever creates the directory when the owner
// cannot (no write access above it), below directories no other user can change, and gives
// that one new directory to the owner through a descriptor opened O_NOFOLLOW: nothing is
// chowned by path, nothing recursively, nothing it did not create (issue 27).
import { type ChildProcess, fork } from 'node:child_process';
import { closeSync, existsSync, fchownSync, lstatSync, mkdirSync, realpathSync } from 'node:fs';
import { dirname, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openDirNoFollow, type ReaderCredentials, readerForkOptions, readerIdentity } from '@mqd/core';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import type { OwnerAnswers, OwnerMessage, OwnerRequest } from './capture-owner-protocol.js';

function entry(): { file: string; execArgv: string[] } {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.ts')) {
    return {
      file: here.replace(/capture-owner\.ts$/, 'capture-owner-main.ts'),
      execArgv: ['--conditions=source', '--import', 'tsx'],
    };
  }
  const js = here.replace(/capture-owner\.js$/, 'capture-owner-main.js');
  if (!existsSync(js)) throw new Error(`capture child entry ${js} is missing: run npm run build`);
  return { file: js, execArgv: [] };
}

type Request = OwnerRequest extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

/** The owner child of one capture; every request answers a Result, never throws. */
export class CaptureOwner {
  private readonly child: ChildProcess;
  private readonly ready: Promise<Result<ReaderCredentials, MqdError>>;
  private readonly waiting = new Map<number, (m: OwnerMessage & { type: 'answer' }) => void>();
  private nextId = 1;
  private exited: string | null = null;
  private stderr = '';

  constructor(uid: number, gid: number) {
    const { file, execArgv } = entry();
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
      this.child.on('message', (m: OwnerMessage) => {
        if (m.type === 'ready') resolveReady(ok(m.credentials));
        else if (m.type === 'privdrop') resolveReady(err(m.error));
        else this.waiting.get(m.id)?.(m);
      });
      this.child.on('exit', (code, signal) => {
        this.exited = `the capture's owner child ${signal ? `was killed by ${signal}` : `exited with code ${code}`}${this.stderr ? `: ${this.stderr.trim()}` : ''}`;
        resolveReady(err(mqdError('MQD_E_INTERNAL', this.exited)));
        for (const w of this.waiting.values()) w({ type: 'answer', id: 0, result: err(this.failure()) });
      });
      this.child.on('error', () => undefined); // a failed fork shows as its exit
    });
  }

  private failure(): MqdError {
    return mqdError('MQD_E_INTERNAL', this.exited ?? "the capture's owner child is gone");
  }

  /** Who the child is (uid, gid, groups, NoNewPrivs), once it checked itself. */
  credentials(): Promise<Result<ReaderCredentials, MqdError>> {
    return this.ready;
  }

  async ask<R extends Request>(
    req: R,
    timeoutMs: number,
  ): Promise<Result<OwnerAnswers[R['type']], MqdError>> {
    const ready = await this.ready;
    if (!ready.ok) return ready;
    if (this.exited !== null) return err(this.failure());
    const id = this.nextId++;
    return new Promise((resolveAnswer) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        this.dispose();
        resolveAnswer(
          err(
            mqdError(
              'MQD_E_INTERNAL',
              `the capture's owner child did not answer ${req.type} in ${timeoutMs} ms`,
            ),
          ),
        );
      }, timeoutMs);
      this.waiting.set(id, (m) => {
        clearTimeout(timer);
        this.waiting.delete(id);
        // The child's own answer type for this request (capture-owner-main.ts answers in kind).
        resolveAnswer(m.result as Result<OwnerAnswers[R['type']], MqdError>);
      });
      try {
        this.child.send({ ...req, id } as OwnerRequest);
      } catch (e) {
        // The channel closed under us (the child died between two requests).
        this.waiting.get(id)?.({
          type: 'answer',
          id,
          result: err(
            mqdError(
              'MQD_E_INTERNAL',
              `cannot send ${req.type} to the capture's owner child: ${(e as Error).message}`,
            ),
          ),
        });
      }
    });
  }

  dispose(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

/**
 * A directory no user but root can change: owned by root and not writable by group or others,
 * unless sticky (then others cannot rename or remove root's entries in it either).
 */
function rootOnly(path: string): string | null {
  const st = lstatSync(path);
  if (st.uid !== 0) return `${path} belongs to uid ${st.uid}`;
  if (st.isDirectory() && (st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0)
    return `${path} is writable by group or others (mode ${(st.mode & 0o7777).toString(8)})`;
  return null;
}

/** `path` and each directory above it. */
function withParents(path: string): string[] {
  const out: string[] = [];
  for (let p = path; ; p = dirname(p)) {
    out.push(p);
    if (p === dirname(p)) break;
  }
  return out;
}

/**
 * Root creates `dir` for a job owner who cannot create it (uid, gid): only below directories no
 * other user can change (every component of the path as given and as resolved belongs to root
 * and is not writable by others), so no link or rename of a user's can move the new directory
 * elsewhere; then that one new directory is given to the owner through a descriptor opened
 * O_DIRECTORY|O_NOFOLLOW.
 */
export function createForOwner(dir: string, uid: number, gid: number): Result<void, MqdError> {
  const abs = resolve(dir);
  const refuse = (why: string) =>
    err(
      mqdError(
        'MQD_E_CAPTURE_DIR',
        `the job owner (uid ${uid}) cannot create ${abs}, and root creates it only below directories no other user can change: ${why}`,
      ),
    );
  let existing = dirname(abs);
  while (!existsSync(existing) && existing !== dirname(existing)) existing = dirname(existing);
  try {
    const real = realpathSync(existing);
    for (const p of [...withParents(existing), ...withParents(real)]) {
      const why = rootOnly(p);
      if (why) return refuse(why);
    }
    // Below `existing` every directory is new, root's own.
    mkdirSync(dirname(abs), { recursive: true, mode: 0o755 });
    mkdirSync(abs, { mode: 0o700 });
  } catch (e) {
    return refuse((e as Error).message);
  }
  let held: ReturnType<typeof openDirNoFollow>;
  try {
    held = openDirNoFollow(abs);
  } catch (e) {
    return refuse((e as Error).message);
  }
  try {
    if (held.st.uid !== 0) return refuse(`${abs} was replaced while it was created`);
    fchownSync(held.fd, uid, gid);
  } finally {
    closeSync(held.fd);
  }
  return ok(undefined);
}

/** `dir` as the capture uses it: absolute, so root and the owner child mean the same directory. */
export function captureDir(dir: string): string {
  const abs = resolve(dir);
  return abs.endsWith(sep) && abs.length > 1 ? abs.slice(0, -1) : abs;
}
