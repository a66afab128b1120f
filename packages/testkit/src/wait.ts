// Waiting is always on a condition: poll it with a short, growing backoff until it holds or the
// deadline passes. The backoff only spaces out the polls; it never stands in for the condition.
import { setTimeout as delay } from 'node:timers/promises';
import { assertUnreachable } from '@mqd/model';

export interface WaitOptions {
  readonly timeoutMs: number;
  /** What is awaited, for the timeout message ("all 4 READY lines"). */
  readonly what: string;
  /** First pause between polls; doubles up to maxIntervalMs. */
  readonly initialIntervalMs?: number;
  readonly maxIntervalMs?: number;
}

/** What a poll says: keep waiting, done with a value, or give up now with a reason. */
export type Poll<T> =
  | { readonly state: 'pending'; readonly detail?: string }
  | { readonly state: 'done'; readonly value: T }
  | { readonly state: 'failed'; readonly reason: string };

export const pending = (detail?: string): Poll<never> =>
  detail === undefined ? { state: 'pending' } : { state: 'pending', detail };
export const done = <T>(value: T): Poll<T> => ({ state: 'done', value });
export const failed = (reason: string): Poll<never> => ({ state: 'failed', reason });

export class WaitTimeoutError extends Error {
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
    readonly lastDetail: string | undefined,
  ) {
    super(`timed out after ${timeoutMs} ms waiting for ${what}${lastDetail ? ` (last: ${lastDetail})` : ''}`);
    this.name = 'WaitTimeoutError';
  }
}

export class WaitFailedError extends Error {
  constructor(
    readonly what: string,
    readonly reason: string,
  ) {
    super(`gave up waiting for ${what}: ${reason}`);
    this.name = 'WaitFailedError';
  }
}

/** Polls `poll` until it is done (returns its value) or failed / out of time (throws). */
export async function waitFor<T>(poll: () => Poll<T> | Promise<Poll<T>>, opts: WaitOptions): Promise<T> {
  const deadline = Date.now() + opts.timeoutMs;
  const maxInterval = opts.maxIntervalMs ?? 250;
  let interval = opts.initialIntervalMs ?? 10;
  let lastDetail: string | undefined;
  for (;;) {
    const p = await poll();
    switch (p.state) {
      case 'done':
        return p.value;
      case 'failed':
        throw new WaitFailedError(opts.what, p.reason);
      case 'pending':
        lastDetail = p.detail ?? lastDetail;
        break;
      default:
        assertUnreachable(p);
    }
    const left = deadline - Date.now();
    if (left <= 0) throw new WaitTimeoutError(opts.what, opts.timeoutMs, lastDetail);
    await delay(Math.min(interval, left));
    interval = Math.min(interval * 2, maxInterval);
  }
}
