// One merged call-prefix tree per snapshot and thread mode (buildStackTree of @mqd/model),
// computed after the first paint and cached (deferred.ts), like the explanation. At 16,384
// ranks with ~20 distinct stacks it takes tens of milliseconds (the frames of each rank are
// compared with a class representative, not interned), so it runs on the main thread in a task
// of its own.
import { buildStackTree, type JobSnapshot, type StackTree, type ThreadMode } from '@mqd/model';
import { type Computed, type Deferred, deferred, useDeferred } from '../deferred.js';

export type StackTreeResult = Computed<StackTree>;

const trees: Record<ThreadMode, Deferred<StackTree>> = {
  main: deferred('stack tree', (s) => buildStackTree(s, { threads: 'main' })),
  all: deferred('stack tree', (s) => buildStackTree(s, { threads: 'all' })),
};

export function computeStackTree(snapshot: JobSnapshot, threads: ThreadMode): StackTreeResult {
  return trees[threads].get(snapshot);
}

export function useStackTree(snapshot: JobSnapshot, threads: ThreadMode): StackTreeResult | null {
  return useDeferred(trees[threads], snapshot);
}
