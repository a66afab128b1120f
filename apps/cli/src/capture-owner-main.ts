// The capture's owner child: makes the capture directory, copies the job's files into its
// sysroot and writes its manifest, as the job's owner. `mqd capture` run as root forks it with
// the owner's uid/gid (no supplementary groups); it sets PR_SET_NO_NEW_PRIVS and checks who it
// is (enterReader) before it touches anything. A file name read out of a rank's memory (the
// DLL) or a link the user planted in the directory can then reach only what the owner could
// open or write anyway; names below the directory are still created one component at a time,
// O_EXCL and O_NOFOLLOW (files-at.ts), and the directory is pinned by its device and inode.
import { closeSync, existsSync, lstatSync, mkdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { atPath, copyNew, fileMappings, openDirNoFollow, openFailure, openSubdir, writeNew } from '@mqd/core';
import { assertUnreachable, err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import type { Bundled, NeedsRoot, OwnerAnswer, OwnerRequest, PreparedDir } from './capture-owner-protocol.js';
import { MANIFEST_NAME, SYSROOT_NAME } from './core-args.js';
import { serveAsOwner } from './owner-child.js';

const dirError = (detail: string) => mqdError('MQD_E_CAPTURE_DIR', detail);

function prepare(dir: string, uid: number): Result<PreparedDir | NeedsRoot, MqdError> {
  let created = false;
  const owned = (st: { uid: number }) =>
    st.uid === uid ? null : dirError(`${dir} belongs to uid ${st.uid}, not to the job owner (uid ${uid})`);
  try {
    const st = lstatSync(dir);
    if (st.isSymbolicLink() || !st.isDirectory())
      return err(dirError(`${dir} is a symbolic link or not a directory`));
    const other = owned(st);
    if (other) return err(other);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    // Below a directory the owner cannot search: root decides whether it makes it for them.
    if (code === 'EACCES') return ok({ needsRoot: dir });
    if (code !== 'ENOENT') return err(dirError(`${dir} ${openFailure(e)}`));
    try {
      mkdirSync(dirname(dir), { recursive: true, mode: 0o755 });
      mkdirSync(dir, { mode: 0o700 });
      created = true;
    } catch (e2) {
      const code = (e2 as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EPERM') return ok({ needsRoot: dir });
      return err(dirError(`cannot create ${dir}: ${openFailure(e2)}`));
    }
  }
  let held: ReturnType<typeof openDirNoFollow>;
  try {
    held = openDirNoFollow(dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return err(
      dirError(
        code === 'ENOTDIR' || code === 'ELOOP'
          ? `${dir} is a symbolic link or not a directory`
          : `${dir} ${openFailure(e)}`,
      ),
    );
  }
  try {
    // Opened without following a link, so checked again: it may have been swapped since the lstat.
    const other = owned(held.st);
    if (other) return err(other);
    try {
      lstatSync(atPath(held.fd, MANIFEST_NAME));
      return err(dirError(`${dir} already holds a capture (${MANIFEST_NAME})`));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') return err(dirError(`${dir}: ${openFailure(e)}`));
    }
    return ok({ dev: held.st.dev, ino: held.st.ino, created });
  } finally {
    closeSync(held.fd);
  }
}

/** `dir` opened again; the same directory prepare() answered for, or why not. */
function reopen(dir: string, at: PreparedDir): Result<number, MqdError> {
  let held: ReturnType<typeof openDirNoFollow>;
  try {
    held = openDirNoFollow(dir);
  } catch (e) {
    return err(dirError(`${dir} ${openFailure(e)} any more`));
  }
  if (held.st.dev !== at.dev || held.st.ino !== at.ino) {
    closeSync(held.fd);
    return err(dirError(`${dir} was replaced by another directory during the capture`));
  }
  return ok(held.fd);
}

/** Copies `file` (an absolute path) to the same path under the directory held by `rootFd`. */
function copyUnder(rootFd: number, file: string): number {
  const parts = resolve('/', file).split('/').filter(Boolean);
  const name = parts.pop();
  if (name === undefined) throw Object.assign(new Error('no file name'), { code: 'EINVAL' });
  const opened: number[] = [];
  try {
    let fd = rootFd;
    for (const p of parts) {
      fd = openSubdir(fd, p, 0o755);
      opened.push(fd);
    }
    return copyNew(file, fd, name);
  } finally {
    for (const fd of opened) closeSync(fd);
  }
}

function bundle(req: Extract<OwnerRequest, { type: 'bundle' }>): Result<Bundled, MqdError> {
  const held = reopen(req.dir, req.at);
  if (!held.ok) return held;
  try {
    let sysFd: number;
    try {
      sysFd = openSubdir(held.value, SYSROOT_NAME, 0o755);
    } catch (e) {
      return err(dirError(`${join(req.dir, SYSROOT_NAME)} ${openFailure(e)}`));
    }
    try {
      const paths = new Set<string>(req.extra.filter((p) => p.startsWith('/')));
      for (const pid of req.pids) {
        let maps = '';
        try {
          // Read as the owner: what the rank maps, never a name the rank chose to say.
          maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
        } catch {
          continue; // the rank has exited since its core was written: its files are in the others' maps or lost
        }
        for (const m of fileMappings(maps)) if (!m.deleted && !m.path.startsWith('/dev/')) paths.add(m.path);
      }
      // No rank maps the OpenMP runtime's OMPD library; LLVM's runtime names the libompd.so beside
      // itself in ompd_dll_locations, so that one goes in too (a core's OpenMP threads then read
      // on another machine through the sysroot).
      for (const p of [...paths]) {
        if (!/^lib(i?omp)[^/]*\.so/.test(basename(p))) continue;
        const ompd = join(dirname(p), 'libompd.so');
        if (existsSync(ompd)) paths.add(ompd);
      }
      let files = 0;
      let bytes = 0;
      const skipped: string[] = [];
      for (const p of paths) {
        try {
          bytes += copyUnder(sysFd, p);
          files++;
        } catch (e) {
          skipped.push(`${p} ${openFailure(e)}`);
        }
      }
      return ok({ files, bytes, skipped });
    } finally {
      closeSync(sysFd);
    }
  } finally {
    closeSync(held.value);
  }
}

function manifest(req: Extract<OwnerRequest, { type: 'manifest' }>): Result<null, MqdError> {
  const held = reopen(req.dir, req.at);
  if (!held.ok) return held;
  try {
    writeNew(held.value, MANIFEST_NAME, req.text, 0o600);
    return ok(null);
  } catch (e) {
    return err(dirError(`${join(req.dir, MANIFEST_NAME)} ${openFailure(e)}`));
  } finally {
    closeSync(held.value);
  }
}

serveAsOwner<OwnerRequest, OwnerAnswer>((req, me) => {
  switch (req.type) {
    case 'prepare':
      return prepare(req.dir, me.uid);
    case 'bundle':
      return bundle(req);
    case 'manifest':
      return manifest(req);
    default:
      return assertUnreachable(req);
  }
});
