// Which shared libraries a reader may load into itself (an MPI library's MQD DLL, an OpenMP
// runtime's libompd): the site's policy, checked by the agent before a reader is asked to load
// a DLL, and by the reader before it loads libompd. Shared by reader/, ompd/ and the Snapshotter,
// which import it downward.
import { lstatSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';

export type DllPolicy = 'any' | 'root-owned';
export const DLL_POLICIES: readonly DllPolicy[] = ['any', 'root-owned'];

/**
 * The path the reader may load under `policy` (for 'root-owned': the resolved file, which with
 * every directory above it must be owned by root and not group/other-writable), or why not.
 */
export function checkDllPolicy(dll: string, policy: DllPolicy): Result<string, MqdError> {
  if (policy === 'any') return ok(dll);
  if (!dll.startsWith('/')) {
    return err(mqdError('MQD_E_DLL_POLICY', `${dll}: not an absolute path (root-owned policy)`));
  }
  let real: string;
  try {
    real = realpathSync(dll);
  } catch (e) {
    return err(mqdError('MQD_E_DLL_POLICY', `${dll}: ${(e as Error).message}`));
  }
  for (let p = real; ; p = dirname(p)) {
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(p);
    } catch (e) {
      return err(mqdError('MQD_E_DLL_POLICY', `${p}: ${(e as Error).message}`));
    }
    // A sticky world-writable directory (/tmp) still lets anyone add files: refused too.
    if (st.uid !== 0 || (st.mode & 0o022) !== 0) {
      const mode = (st.mode & 0o7777).toString(8).padStart(4, '0');
      return err(
        mqdError(
          'MQD_E_DLL_POLICY',
          `${p === real ? 'DLL' : 'directory'} ${p} (for ${dll}) is owned by uid ${st.uid} with mode ${mode}: it must be root-owned and not group/other-writable`,
        ),
      );
    }
    if (p === '/') break;
  }
  return ok(real);
}
