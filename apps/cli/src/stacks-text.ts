// `mqd snapshot --stacks`: the merged call-prefix tree of the snapshot's stacks as text, the
// way STAT prints it (indentation per frame, the ranks through each frame as ranges and their
// count), then the equivalence classes of whole stacks and the outliers.
import {
  buildStackTree,
  formatStackTree,
  type JobSnapshot,
  jobText,
  type StackKey,
  type StackTree,
  type ThreadMode,
} from '@mqd/model';

export interface StacksTextOptions {
  readonly threads?: ThreadMode;
  /** Module file names after the functions. */
  readonly modules?: boolean;
}

export function stacksText(snapshot: JobSnapshot, opts: StacksTextOptions = {}): string {
  return formatStacks(
    buildStackTree(snapshot, { threads: opts.threads ?? 'main', by: stackKeyFor(snapshot) }),
    opts,
  );
}

/**
 * How the text merges frames: by function, except when a rank has Python frames, whose names
 * (`<module>`, `main`, `step`) say little without their line: then by line (`step at ring.py:12`).
 */
export function stackKeyFor(snapshot: JobSnapshot): StackKey {
  for (const r of snapshot.ranks) {
    for (const t of r.threads ?? []) if ((t.python?.frames.length ?? 0) > 0) return 'line';
  }
  return 'function';
}

export function formatStacks(tree: StackTree, opts: StacksTextOptions = {}): string {
  if (tree.rankCount === 0) {
    return tree.missing === ''
      ? 'stacks: none in this snapshot'
      : `stacks: none in this snapshot (not read on ranks [${tree.missing}])`;
  }
  const what =
    tree.threads === 'all'
      ? `${tree.threadCount} threads of ${tree.rankCount} ranks`
      : `${tree.rankCount} ranks, main threads`;
  const out = [`stacks (${what}, ${tree.classTotal} distinct):`];
  // The tree itself is the model's one formatter; the CLI adds the heading and the classes.
  out.push(formatStackTree(tree, opts.modules === undefined ? {} : { modules: opts.modules }));
  out.push('classes (ranks with the same whole stack):');
  for (const c of tree.classes.slice(0, 10)) {
    out.push(
      `  [${c.ranks}] (${c.rankCount}) ${c.frames
        .slice(-3)
        .map((f) => jobText(f))
        .join(' > ')}`,
    );
  }
  if (tree.classTotal > 10) out.push(`  ... ${tree.classTotal - 10} more`);
  if (tree.outliers !== '') out.push(`outliers: [${tree.outliers}]`);
  return out.join('\n');
}
