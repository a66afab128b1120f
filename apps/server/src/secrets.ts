// Credentials of `mqd serve` and `mqd agent`: read from files with strict rules, and gone from
// the environment once read. Node builtins only: the agent (`@mqd/server/agent`) uses it too.
import { readFileSync, statSync } from 'node:fs';

/**
 * A credential file: owned by us (root), not readable or writable by group or others, so no
 * other user of the node can read the token it holds.
 */
export function readSecretFile(path: string): { ok: true; value: string } | { ok: false; message: string } {
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(path);
  } catch (e) {
    return { ok: false, message: `cannot read ${path}: ${(e as Error).message}` };
  }
  if ((st.mode & 0o077) !== 0) {
    return {
      ok: false,
      message: `${path} is readable or writable by group or others (mode ${(st.mode & 0o777).toString(8)}): chmod 600 ${path}`,
    };
  }
  if (typeof process.getuid === 'function' && st.uid !== process.getuid()) {
    return { ok: false, message: `${path} belongs to uid ${st.uid}, not to this process: chown it` };
  }
  const v = readFileSync(path, 'utf8').trim();
  return v.length === 0 ? { ok: false, message: `${path} is empty` } : { ok: true, value: v };
}

/** The names of the variables that hold (or name the file of) a credential of MQD's. */
export const SECRET_ENV_NAME = /^MQD_\w*(TOKEN|SECRET)\w*$/;

/**
 * Removes every credential variable from `env` (default: this process's), once the
 * configuration has been read: a child started later, a library loaded later, finds none
 * (issue 27). Children of user jobs also get an allow-listed environment
 * (packages/mqd-core/src/host/reader-spawn.ts childEnv); this covers whatever else is spawned.
 * Returns the names removed.
 */
export function dropSecretsFromEnv(env: NodeJS.ProcessEnv = process.env): string[] {
  const names = Object.keys(env).filter((k) => SECRET_ENV_NAME.test(k));
  for (const k of names) delete env[k];
  return names;
}
