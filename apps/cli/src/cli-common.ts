// Small pieces the long-running commands (`mqd serve`, `mqd agent`) share.
import { DLL_POLICIES, type DllPolicy } from '@mqd/core';

/** `--dll-policy`: 'root-owned' loads only DLLs that root owns in directories only root can write. */
export function parseDllPolicy(v: string | undefined): DllPolicy | null {
  if (v === undefined) return 'any';
  return (DLL_POLICIES as readonly string[]).includes(v) ? (v as DllPolicy) : null;
}

/** Resolves on the first SIGINT or SIGTERM. */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (s: NodeJS.Signals) => resolve(s);
    process.once('SIGINT', on);
    process.once('SIGTERM', on);
  });
}

export { DLL_POLICIES };
