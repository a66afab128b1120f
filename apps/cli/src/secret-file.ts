// Credentials read from files: the agent's token (`mqd agent --token-file`) and the
// aggregator's secret (`mqd agent-token --secret-file`), with the same rules for both.
import { readFileSync, statSync } from 'node:fs';

/**
 * A credential file: owned by us (root), not readable or writable by group or others, so no
 * other user of the node can read the token the agent authenticates with.
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

/**
 * A secret from `file` (checked as above) when given, else from the environment variable
 * `envName`; `undefined` when neither is set.
 */
export function secretFromFileOrEnv(
  file: string | undefined,
  envName: string,
): { ok: true; value: string | undefined } | { ok: false; message: string } {
  if (file === undefined) return { ok: true, value: process.env[envName] };
  return readSecretFile(file);
}
