// Credentials read from files: the agent's token (`mqd agent --token-file`) and the
// aggregator's secret (`mqd agent-token --secret-file`), with the rules of @mqd/server's
// readSecretFile (the aggregator's `--*-token-file` settings use the same).
import { readSecretFile } from '@mqd/server/agent';

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
