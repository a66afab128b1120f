// The stack tree as people read it: STAT-style indented text (the CLI's `mqd stacks`) and the
// dashboard's rows (straight chains as one row, a search match or the selected node ending its
// chain). Both walk a tree buildStackTree (stack-tree.ts) made.

import { jobText } from '../text.js';
import { type StackTree, stackNodePlace } from './stack-tree.js';

export interface StackTextOptions {
  /** Show module names after functions (default false). */
  readonly modules?: boolean;
  /** Collapse chains of single-child nodes with the same rank set deeper than this (default: no collapsing). */
  readonly maxDepth?: number;
}

/**
 * The tree as indented text, STAT style: `[0-3] main` / `  [0-2] MPI_Barrier` / `  [3] MPI_Allreduce`.
 * Each line: two spaces per depth, the rank ranges, the count when more than one rank, the function.
 */
export function formatStackTree(tree: StackTree, opts: StackTextOptions = {}): string {
  const lines: string[] = [];
  const all = tree.threads === 'all';
  const stack: number[] = [...tree.roots].reverse();
  while (stack.length > 0) {
    const id = stack.pop() ?? 0;
    const n = tree.nodes[id];
    if (n === undefined) continue;
    if (opts.maxDepth !== undefined && n.depth > opts.maxDepth) continue;
    const count =
      all && n.threadCount !== n.rankCount
        ? ` (${n.rankCount} ranks, ${n.threadCount} threads)`
        : n.rankCount > 1
          ? ` (${n.rankCount})`
          : '';
    const mod = opts.modules && n.module !== null ? ` in ${jobText(n.module, 256)}` : '';
    const place = stackNodePlace(n);
    const at = place === null ? '' : ` at ${jobText(place, 256)}`;
    lines.push(`${'  '.repeat(n.depth)}[${n.ranks}]${count} ${jobText(n.function)}${at}${mod}`);
    for (let i = n.children.length - 1; i >= 0; i--) stack.push(n.children[i] ?? 0);
  }
  if (tree.missing !== '') lines.push(`no stacks: [${tree.missing}]`);
  return lines.join('\n');
}

/**
 * One row of the tree as the Stacks view shows it: a straight chain of frames (each the only
 * child of the one before, with the same threads: `_start › __libc_start_main › main`) as one
 * row, STAT's collapsed chains; or a single frame. An MPI call always has a row of its own, its
 * frames inside the library folded under it by default.
 */
export interface StackRow {
  /** The nodes of the row, outermost first (one, or a chain). */
  readonly nodes: readonly number[];
  /** The innermost of them: the row's frame, whose children are the row's children. */
  readonly node: number;
  /** The first node of the chain the row belongs to, and the chain's length (1: no chain). */
  readonly chainHead: number;
  readonly chainLength: number;
  /** 1 for a root row (aria-level). */
  readonly level: number;
  /** Index in the rows of the parent row, -1 for a root row. */
  readonly parentRow: number;
  /** Position among its sibling rows, 1-based, and their number (aria-posinset, aria-setsize). */
  readonly posInSet: number;
  readonly setSize: number;
  /** The row has children rows (shown or folded). */
  readonly expandable: boolean;
  readonly expanded: boolean;
  /** Frames inside an MPI call, folded until the person opens them. */
  readonly foldedByDefault: boolean;
}

export interface StackRowOptions {
  /** Show straight chains as one row (default true). */
  readonly chains?: boolean;
  /** Row nodes whose default (open, or folded for an MPI call) the person flipped. */
  readonly toggled?: ReadonlySet<number>;
  /** Chains the person opened into a row per frame, by the chain's first node. */
  readonly unchained?: ReadonlySet<number>;
  /** Nodes kept open whatever else is set (the ancestors of a search's matches). */
  readonly open?: ReadonlySet<number>;
  /** Nodes that end a chain, so each is a row's own frame (a search's matches, the selected node). */
  readonly breakAt?: ReadonlySet<number>;
}

/** The nodes of the chain that starts at `first` (first included), outermost first. */
export function stackChain(tree: StackTree, first: number, breakAt?: ReadonlySet<number>): number[] {
  const chain = [first];
  for (let n = tree.nodes[first]; n !== undefined; ) {
    // An MPI call ends a chain and never joins one: it is the row a person looks for.
    if (n.kind === 'mpi-call' || n.children.length !== 1 || n.endCount > 0 || breakAt?.has(n.id)) break;
    const child = tree.nodes[n.children[0] ?? -1];
    if (child === undefined || child.kind === 'mpi-call' || child.threadCount !== n.threadCount) break;
    chain.push(child.id);
    n = child;
  }
  return chain;
}

/** The rows shown, depth first: chains as one row unless unchained, children of closed rows left out. */
export function stackRows(tree: StackTree, opts: StackRowOptions = {}): StackRow[] {
  const chains = opts.chains ?? true;
  const rows: StackRow[] = [];
  const visit = (ids: readonly number[], level: number, parentRow: number) => {
    for (let i = 0; i < ids.length; i++) {
      const head = ids[i] ?? -1;
      const chain = chains ? stackChain(tree, head, opts.breakAt) : [head];
      // An opened chain is a row per frame, each the only child of the one before.
      const groups = chain.length > 1 && opts.unchained?.has(head) ? chain.map((id) => [id]) : [chain];
      let lvl = level;
      let parent = parentRow;
      let pos = i + 1;
      let size = ids.length;
      for (let g = 0; g < groups.length; g++) {
        const group = groups[g] ?? [];
        const last = group[group.length - 1] ?? head;
        const n = tree.nodes[last];
        if (n === undefined) break;
        const folded = n.kind === 'mpi-call';
        const inner = g < groups.length - 1;
        const expandable = n.children.length > 0;
        const expanded =
          expandable && (opts.open?.has(last) === true || folded === (opts.toggled?.has(last) ?? false));
        const at = rows.length;
        rows.push({
          nodes: group,
          node: last,
          chainHead: head,
          chainLength: chain.length,
          level: lvl,
          parentRow: parent,
          posInSet: pos,
          setSize: size,
          expandable,
          expanded,
          foldedByDefault: folded && expandable,
        });
        if (!expanded) break;
        if (inner) {
          parent = at;
          lvl++;
          pos = 1;
          size = 1;
        } else visit(n.children, lvl + 1, at);
      }
    }
  };
  visit(tree.roots, 1, -1);
  return rows;
}
