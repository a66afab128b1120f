// One merged call-prefix tree per snapshot and thread mode (buildStackTree of @mqd/model),
// derived once per snapshot by its context (../snapshot-context.ts) after the first paint, like
// the explanation. At 16,384 ranks with ~20 distinct stacks it takes tens of milliseconds (the
// frames of each rank are compared with a class representative, not interned), so it runs on
// the main thread in a task of its own.
import type { JobSnapshot, StackTree, ThreadMode } from '@mqd/model';
import { type Computed, contextOf, useStackTree as useContextStackTree } from '../snapshot-context.js';

export type StackTreeResult = Computed<StackTree>;

export function computeStackTree(snapshot: JobSnapshot, threads: ThreadMode): StackTreeResult {
  return contextOf(snapshot).stackTree({ threads }).get();
}

export function useStackTree(snapshot: JobSnapshot, threads: ThreadMode): StackTreeResult | null {
  return useContextStackTree(snapshot, { threads });
}
