// Core directories a user may open as a job (attach `{coresDir}`): only inside the roots an
// admin allows (`mqd serve --core-dir DIR`, MQD_CORE_DIRS). Both the aggregator and the agent
// that reads the cores check a path here: the aggregator before it asks, the agent because it
// must not trust a request to name any file on its node. Paths are compared after realpath, so
// a symlink or a `..` that leads out of a root is refused like any other outside path.
import { realpathSync, statSync } from 'node:fs';
import { isAbsolute, sep } from 'node:path';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';

function realDir(p: string): string | null {
  try {
    return realpathSync.native(p);
  } catch {
    // A root that does not exist (yet) allows nothing.
    return null;
  }
}

const inside = (path: string, root: string) =>
  path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);

/**
 * The directory's real path when it lies inside one of `roots` (both resolved), else a coded
 * refusal: MQD_E_CORE_DIR_FORBIDDEN (no roots, or outside them; its hint names the setting), MQD_E_BAD_INPUT (not an absolute path
 * without `..`), MQD_E_NOT_FOUND (no such directory).
 */
export function resolveCoreDir(dir: string, roots: readonly string[]): Result<string, MqdError> {
  if (roots.length === 0) {
    return err(
      mqdError('MQD_E_CORE_DIR_FORBIDDEN', 'core directories are not enabled on this node (no --core-dir)'),
    );
  }
  if (!isAbsolute(dir) || dir.includes('\0') || dir.split('/').includes('..')) {
    return err(mqdError('MQD_E_BAD_INPUT', `core directory '${dir}' must be an absolute path without '..'`));
  }
  const allowed = roots.map(realDir).filter((r): r is string => r !== null);
  const forbidden = () =>
    err(
      mqdError(
        'MQD_E_CORE_DIR_FORBIDDEN',
        `core directory ${dir} is not inside a directory the admin allows (${allowed.join(', ') || 'none exists'})`,
      ),
    );
  let real: string;
  try {
    real = realpathSync.native(dir);
  } catch {
    // Root resolves the path: "not found" only inside a root, so that the answer never tells a
    // user whether a path elsewhere (in a directory they cannot search) exists.
    if (![...roots, ...allowed].some((r) => inside(dir, r))) return forbidden();
    return err(mqdError('MQD_E_NOT_FOUND', `no core directory ${dir} here`));
  }
  if (!allowed.some((r) => inside(real, r))) return forbidden();
  let isDir = false;
  try {
    isDir = statSync(real).isDirectory();
  } catch {
    isDir = false;
  }
  if (!isDir) return err(mqdError('MQD_E_BAD_INPUT', `${dir} is not a directory`));
  return ok(real);
}

/**
 * MQD_E_BAD_INPUT when a core directory's file is owned by `fileUid`, not by the `uid` owning
 * the files before it (null: it is the first); cores of several users are not one job.
 */
export function otherOwner(uid: number | null, fileUid: number): MqdError | null {
  if (uid === null || fileUid === uid) return null;
  return mqdError(
    'MQD_E_BAD_INPUT',
    `the cores belong to uids ${uid} and ${fileUid}: one directory is one user's job`,
  );
}

/**
 * The one uid owning every file (the directory's cores, its manifest): cores of several users
 * are not one job. A file that vanished or is not a regular file is refused with MQD_E_CORE_INVALID.
 */
export function coreFilesOwner(paths: readonly string[]): Result<number, MqdError> {
  let uid: number | null = null;
  for (const p of paths) {
    let st: ReturnType<typeof statSync>;
    try {
      st = statSync(p);
    } catch {
      return err(mqdError('MQD_E_CORE_INVALID', `cannot open ${p}: no such file or not readable`));
    }
    if (!st.isFile()) return err(mqdError('MQD_E_CORE_INVALID', `${p} is not a regular file`));
    const mixed = otherOwner(uid, st.uid);
    if (mixed) return err(mixed);
    uid = st.uid;
  }
  if (uid === null) return err(mqdError('MQD_E_NO_RANKS', 'the core directory holds no core file'));
  return ok(uid);
}

/** `path` (a core the agent is asked to read) resolves to a file inside one of the roots. */
export function coreFileAllowed(path: string, roots: readonly string[]): Result<string, MqdError> {
  let real: string;
  try {
    real = realpathSync.native(path);
  } catch {
    return err(mqdError('MQD_E_CORE_INVALID', `cannot open ${path}: no such file or not readable`));
  }
  const allowed = roots.map(realDir).filter((r): r is string => r !== null);
  if (!allowed.some((r) => inside(real, r))) {
    return err(
      mqdError('MQD_E_CORE_DIR_FORBIDDEN', `core file ${path} is not inside a directory this agent allows`),
    );
  }
  return ok(real);
}
