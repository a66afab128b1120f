// A pure computation over a snapshot (the model's analysis, its stack tree), run after the first
// paint in a task of its own and cached per snapshot, so every view that needs it shares one
// answer. Its failure must not take the views down: it is an answer too ({failed}), shown where
// the result would have been.
import type { JobSnapshot } from '@mqd/model';
import { useEffect, useState } from 'react';
import { beginBusy } from './idle.js';

export type Computed<T> = T | { failed: string };

export interface Deferred<T> {
  /** The cached answer, computing it now if needed. */
  get(snapshot: JobSnapshot): Computed<T>;
  /** The cached answer, or undefined when it has not been computed. */
  peek(snapshot: JobSnapshot): Computed<T> | undefined;
}

export function deferred<T>(what: string, compute: (snapshot: JobSnapshot) => T): Deferred<T> {
  const cache = new WeakMap<JobSnapshot, Computed<T>>();
  return {
    get(snapshot) {
      const hit = cache.get(snapshot);
      if (hit !== undefined) return hit;
      let r: Computed<T>;
      try {
        r = compute(snapshot);
      } catch (e: unknown) {
        console.error(`MQD: ${what} failed`, e);
        r = { failed: e instanceof Error ? e.message : String(e) };
      }
      cache.set(snapshot, r);
      return r;
    },
    peek: (snapshot) => cache.get(snapshot),
  };
}

/** The answer for this snapshot: null until it is computed (the app is busy meanwhile). */
export function useDeferred<T>(d: Deferred<T>, snapshot: JobSnapshot): Computed<T> | null {
  const [result, setResult] = useState<Computed<T> | null>(() => d.peek(snapshot) ?? null);
  useEffect(() => {
    const hit = d.peek(snapshot);
    if (hit !== undefined) {
      setResult(hit);
      return;
    }
    setResult(null);
    const end = beginBusy();
    const timer = setTimeout(() => {
      setResult(d.get(snapshot));
      end();
    }, 0);
    return () => {
      clearTimeout(timer);
      end();
    };
  }, [d, snapshot]);
  return result;
}
