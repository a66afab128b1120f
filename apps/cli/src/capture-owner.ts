// `mqd capture`'s hands in the capture directory: a child running as the job's owner
// (capture-owner-main.ts) finds or creates the directory, copies the job's files into its
// sysroot and writes the manifest. Root itself only ever creates the directory when the owner
// cannot (no write access above it), below directories no other user can change, and gives
// that one new directory to the owner through a descriptor opened O_NOFOLLOW: nothing is
// chowned by path, nothing recursively, nothing it did not create.
import { closeSync, existsSync, fchownSync, lstatSync, mkdirSync, realpathSync } from 'node:fs';
import { dirname, resolve, sep } from 'node:path';
import { openDirNoFollow, type ReaderCredentials } from '@mqd/core';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import type { Bundled, NeedsRoot, OwnerAnswer, OwnerRequest, PreparedDir } from './capture-owner-protocol.js';
import { OwnerChild } from './owner-child.js';

/** The owner child of one capture (capture-owner-main.ts); every request answers a Result. */
export class CaptureOwner {
  private readonly child: OwnerChild<OwnerRequest, OwnerAnswer>;

  constructor(uid: number, gid: number) {
    this.child = new OwnerChild('capture-owner-main', uid, gid, "the capture's owner child");
  }

  /** Who the child is (uid, gid, groups, NoNewPrivs), once it checked itself. */
  credentials(): Promise<Result<ReaderCredentials, MqdError>> {
    return this.child.credentials();
  }

  /** Finds or creates `dir` (absolute) as the owner's plain directory without a capture in it. */
  prepare(dir: string): Promise<Result<PreparedDir | NeedsRoot, MqdError>> {
    return this.child.ask({ type: 'prepare', dir }, 30_000);
  }

  /** Copies what the ranks map, and `extra`, under DIR/sysroot (a big job's files take a while). */
  bundle(
    dir: string,
    at: PreparedDir,
    pids: readonly number[],
    extra: readonly string[],
  ): Promise<Result<Bundled, MqdError>> {
    return this.child.ask({ type: 'bundle', dir, at, pids, extra }, 30 * 60_000);
  }

  /** Writes DIR/manifest.json as a new file. */
  manifest(dir: string, at: PreparedDir, text: string): Promise<Result<null, MqdError>> {
    return this.child.ask({ type: 'manifest', dir, at, text }, 30_000);
  }

  dispose(): void {
    this.child.dispose();
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
