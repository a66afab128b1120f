// Credentials of `mqd serve` and `mqd agent`: read from files with strict rules, and gone from
// the environment once read. Node builtins only: the agent (`@mqd/server/agent`) uses it too.
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/** A credential file longer than this is not one (a token is tens of bytes). */
const MAX_SECRET_FILE_BYTES = 64 * 1024;

/**
 * A credential file: owned by us (root), not readable or writable by group or others, so no
 * other user of the node can read the token it holds. Opened once (without blocking on a FIFO)
 * and checked on that descriptor, so the file read is the file checked, not one swapped in at
 * its path after the check (docs/root-paths.md).
 */
export function readSecretFile(path: string): { ok: true; value: string } | { ok: false; message: string } {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    return { ok: false, message: `cannot read ${path}: ${(e as Error).message}` };
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { ok: false, message: `${path} is not a regular file` };
    if ((st.mode & 0o077) !== 0) {
      return {
        ok: false,
        message: `${path} is readable or writable by group or others (mode ${(st.mode & 0o777).toString(8)}): chmod 600 ${path}`,
      };
    }
    if (typeof process.getuid === 'function' && st.uid !== process.getuid()) {
      return { ok: false, message: `${path} belongs to uid ${st.uid}, not to this process: chown it` };
    }
    const buf = Buffer.alloc(MAX_SECRET_FILE_BYTES + 1);
    let n = 0;
    for (let got = -1; got !== 0 && n < buf.length; n += got)
      got = readSync(fd, buf, n, buf.length - n, null);
    if (n > MAX_SECRET_FILE_BYTES)
      return { ok: false, message: `${path} is larger than ${MAX_SECRET_FILE_BYTES} bytes` };
    const v = buf.subarray(0, n).toString('utf8').trim();
    return v.length === 0 ? { ok: false, message: `${path} is empty` } : { ok: true, value: v };
  } catch (e) {
    return { ok: false, message: `cannot read ${path}: ${(e as Error).message}` };
  } finally {
    closeSync(fd);
  }
}

/**
 * The names of the variables that hold (or name the file of) a credential of MQD's; the hang
 * watch's webhook URLs count (a chat webhook's URL is its own secret), and so does the store's
 * URL (MQD_STORE_URL: it may hold the database password).
 */
export const SECRET_ENV_NAME = /^MQD_(\w*(TOKEN|SECRET)\w*|WATCH_WEBHOOKS?|STORE_URL)$/;

/**
 * Removes every credential variable from `env` (default: this process's), once the
 * configuration has been read: a child started later, a library loaded later, finds none
 *. Children of user jobs also get an allow-listed environment
 * (packages/mqd-core/src/reader/reader-spawn.ts childEnv); this covers whatever else is spawned.
 * Returns the names removed.
 */
export function dropSecretsFromEnv(env: NodeJS.ProcessEnv = process.env): string[] {
  const names = Object.keys(env).filter((k) => SECRET_ENV_NAME.test(k));
  for (const k of names) delete env[k];
  return names;
}
