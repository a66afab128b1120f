// One merged call-prefix tree per snapshot and thread mode (buildStackTree of @mqd/model),
// computed after the first paint and cached, like the explanation. At 16,384 ranks with ~20
// distinct stacks it takes tens of milliseconds (the frames of each rank are compared with a
// class representative, not interned), so it runs on the main thread in a task of its own.
import { buildStackTree, type JobSnapshot, type StackTree, type ThreadMode } from '@mqd/model';
import { useEffect, useState } from 'react';
import { beginBusy } from '../idle.js';

export type StackTreeResult = StackTree | { failed: string };

const cache: Record<ThreadMode, WeakMap<JobSnapshot, StackTreeResult>> = {
  main: new WeakMap(),
  all: new WeakMap(),
};

export function computeStackTree(snapshot: JobSnapshot, threads: ThreadMode): StackTreeResult {
  const hit = cache[threads].get(snapshot);
  if (hit) return hit;
  let r: StackTreeResult;
  try {
    r = buildStackTree(snapshot, { threads });
  } catch (e: unknown) {
    // The model's code failing must not take the view down; it is shown where the tree would be.
    console.error('MQD: stack tree failed', e);
    r = { failed: e instanceof Error ? e.message : String(e) };
  }
  cache[threads].set(snapshot, r);
  return r;
}

export function useStackTree(snapshot: JobSnapshot, threads: ThreadMode): StackTreeResult | null {
  const [result, setResult] = useState(() => cache[threads].get(snapshot) ?? null);
  useEffect(() => {
    const hit = cache[threads].get(snapshot);
    if (hit) {
      setResult(hit);
      return;
    }
    setResult(null);
    const end = beginBusy();
    const timer = setTimeout(() => {
      setResult(computeStackTree(snapshot, threads));
      end();
    }, 0);
    return () => {
      clearTimeout(timer);
      end();
    };
  }, [snapshot, threads]);
  return result;
}
