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

/**
 * How long `mqd serve` and `mqd agent` wait for their shutdown (the aggregator's requests, the
 * agent, the reader hosts) before they exit anyway: the hosts were SIGKILLed when it began, and
 * one still stuck in the kernel gets SIGKILL again from PR_SET_PDEATHSIG when this process ends.
 */
export const SHUTDOWN_BOUND_MS = 10_000;

/** Runs `close`; false when it did not finish within `boundMs` (the caller then exits). */
export async function closeWithin(
  close: () => Promise<unknown>,
  boundMs = SHUTDOWN_BOUND_MS,
): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), boundMs);
  });
  try {
    return await Promise.race([close().then(() => true as const), bound]);
  } finally {
    clearTimeout(timer);
  }
}
