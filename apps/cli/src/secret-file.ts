// Credentials read from files: the agent's token (`mqd agent --token-file`) and the
// aggregator's secret (`mqd agent-token --secret-file`), with the rules of @mqd/server's
// readSecretFile (the aggregator's `--*-token-file` settings use the same).
import { mqdError } from '@mqd/model';
import { dropSecretsFromEnv, readSecretFile } from '@mqd/server/agent';
import type { Io } from './usage.js';

export { readSecretFile };

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

/**
 * The secret as secretFromFileOrEnv reads it, after which every secret variable is dropped from
 * this process's environment, so no child, library or later code finds one. A file that fails
 * its checks is a usage error: its exit status (2) comes back as a number.
 */
export function takeSecret(
  io: Io,
  file: string | undefined,
  envName: string,
): { readonly secret: string | undefined } | number {
  const r = secretFromFileOrEnv(file, envName);
  dropSecretsFromEnv();
  if (!r.ok) {
    io.err(mqdError('MQD_E_USAGE', r.message).message);
    return 2;
  }
  return { secret: r.value };
}
