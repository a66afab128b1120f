// One merged call-prefix tree per snapshot and tree options (buildStackTree of @mqd/model),
// derived once per snapshot by its context (../snapshot-context.ts) after the first paint, like
// the explanation. At 16,384 ranks with ~20 distinct stacks it takes tens of milliseconds (the
// frames of each rank are compared with a class representative, not interned), so it runs on
// the main thread in a task of its own.
import type { JobSnapshot, StackKey, StackTree, StackTreeOptions, ThreadMode } from '@mqd/model';
import { type Computed, contextOf, useStackTree as useContextStackTree } from '../snapshot-context.js';

export type StackTreeResult = Computed<StackTree>;

/** How the view asks for the tree: the URL's `threads`, `sby` and (inverted) `srt`. */
export interface ViewTreeOptions {
  /** User frames by line (the view's default) or merged by function. */
  readonly by?: StackKey;
  /** Leave out the MPI runtime's own threads (default true: they crowd "All threads"). */
  readonly hideRuntime?: boolean;
}

/** The model's options for the view's: one spelling, so the view and its callers share a tree. */
function treeOptions(threads: ThreadMode, opts: ViewTreeOptions): StackTreeOptions {
  return { threads, by: opts.by ?? 'line', hideRuntimeThreads: opts.hideRuntime ?? true };
}

export function computeStackTree(
  snapshot: JobSnapshot,
  threads: ThreadMode,
  opts: ViewTreeOptions = {},
): StackTreeResult {
  return contextOf(snapshot).stackTree(treeOptions(threads, opts)).get();
}

export function useStackTree(
  snapshot: JobSnapshot,
  threads: ThreadMode,
  opts: ViewTreeOptions = {},
): StackTreeResult | null {
  return useContextStackTree(snapshot, treeOptions(threads, opts));
}
