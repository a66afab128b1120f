// The merged call-prefix tree of a snapshot's stacks, as STAT draws it: one node per distinct
// call path prefix (outermost frame at the root), each carrying the set of ranks whose stack
// passes through it, as ranges ("0-2,5"). At 16,384 ranks a job has a handful of distinct
// stacks, so the work is: intern every frame to a number, group threads whose frame-number
// sequences are equal (the equivalence classes), then build the tree from the classes only.
// Rank sets of nodes are unions of class member lists, memoised by class set (a chain of
// nodes below a branch point shares one set), so text is made once per distinct set.

import type { Frame, JobSnapshot, RankSnapshot, ThreadStack } from '../snapshot-spec.js';
import { jobText } from '../text.js';
import { IntVec } from './csr.js';
import { compressRanks } from './ranges.js';

/** main: one stack per rank (its main thread); all: every thread of every rank. */
export type ThreadMode = 'main' | 'all';

export interface StackTreeOptions {
  readonly threads?: ThreadMode;
  /** Classes with at most this many ranks are outliers (default: 1% of the ranks, at least 1). */
  readonly outlierMax?: number;
  /** At most this many classes in the result (default 100); classTotal still counts all. */
  readonly maxClasses?: number;
}

export interface StackNode {
  /** Index in `nodes`. */
  readonly id: number;
  /** Index of the parent in `nodes`, -1 for a root. */
  readonly parent: number;
  readonly depth: number;
  /** The frame's function, or "??" when no symbol covers it. */
  readonly function: string;
  /** File name of the module (no directory), or null when unmapped. */
  readonly module: string | null;
  /** Ranks whose stack passes through this frame, as ranges. */
  readonly ranks: string;
  readonly rankCount: number;
  /** Threads through this frame (equals rankCount with threads "main"). */
  readonly threadCount: number;
  /** Threads whose stack ends here (this is their innermost frame). */
  readonly endCount: number;
  /** Children in `nodes`, most ranks first. */
  readonly children: number[];
  /** Equivalence classes (indices in `classes`, not cut by maxClasses) through this node. */
  readonly classes: number[];
}

export interface StackClass {
  /** Ranks with this stack, as ranges. */
  readonly ranks: string;
  readonly rankCount: number;
  readonly threadCount: number;
  /** The lowest member rank, to look at as the example. */
  readonly example: number;
  /** Function names, outermost first. */
  readonly frames: string[];
  /** The node of the innermost frame. */
  readonly leaf: number;
}

export interface StackTree {
  readonly threads: ThreadMode;
  /** Every node; roots are those with parent -1, listed in `roots`. */
  readonly nodes: StackNode[];
  readonly roots: number[];
  /** Ranks with at least one stack in the tree. */
  readonly rankCount: number;
  readonly threadCount: number;
  /** Ranks without stacks (not read, not asked for, or an unwinding error), as ranges. */
  readonly missing: string;
  /** Largest first. */
  readonly classes: StackClass[];
  readonly classTotal: number;
  /** Ranks of the classes with few members (see outlierMax), as ranges. */
  readonly outliers: string;
}

const UNKNOWN_FUNCTION = '??';

function basename(path: string | null): string | null {
  if (path === null) return null;
  const i = path.lastIndexOf('/');
  return i < 0 ? path : path.slice(i + 1);
}

/** Frames of a rank that go into the tree under the mode. */
export function treeThreads(r: RankSnapshot, mode: ThreadMode): ThreadStack[] {
  const ts = r.threads;
  if (ts === undefined || ts.length === 0) return [];
  if (mode === 'all') return ts.filter((t) => t.frames.length > 0);
  const main = ts.find((t) => t.main) ?? ts[0];
  return main && main.frames.length > 0 ? [main] : [];
}

/** Frame identity across ranks: function and module file (pcs differ with ASLR). */
class FrameInterner {
  private readonly byFunction = new Map<string, Map<string, number>>();
  readonly fn: string[] = [];
  readonly mod: (string | null)[] = [];

  id(f: Frame): number {
    const name = f.function ?? UNKNOWN_FUNCTION;
    let byModule = this.byFunction.get(name);
    if (byModule === undefined) {
      byModule = new Map();
      this.byFunction.set(name, byModule);
    }
    const modKey = f.module ?? '';
    let id = byModule.get(modKey);
    if (id === undefined) {
      id = this.fn.length;
      this.fn.push(name);
      this.mod.push(basename(f.module));
      byModule.set(modKey, id);
    }
    return id;
  }
}

interface Cls {
  /** Frame ids, outermost first. */
  readonly path: Int32Array;
  /** The first member's frames (innermost first): later threads compare against them. */
  readonly rep: readonly Frame[];
  readonly members: IntVec;
  threads: number;
  leaf: number;
}

/**
 * Same stack as a class's representative: same function and module at every depth. Compared
 * as strings, innermost first (where stacks differ most), without interning: at 16,384 ranks
 * with ~20 distinct stacks, interning only the representatives is what keeps this fast.
 */
function sameFrames(a: readonly Frame[], b: readonly Frame[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (x === undefined || y === undefined) return false;
    if (x.function !== y.function || x.module !== y.module) return false;
  }
  return true;
}

export function buildStackTree(snap: JobSnapshot, opts: StackTreeOptions = {}): StackTree {
  const mode = opts.threads ?? 'main';
  const frames = new FrameInterner();
  const classes: Cls[] = [];
  // Classes by innermost function name (one string hash per thread, not per frame).
  const buckets = new Map<string, number[]>();
  const missing: number[] = [];
  let rankCount = 0;
  let threadCount = 0;

  for (const r of snap.ranks) {
    const ts = treeThreads(r, mode);
    if (ts.length === 0) {
      missing.push(r.rank);
      continue;
    }
    rankCount++;
    // A rank counted once per class even when several of its threads share a stack.
    let lastCls = -1;
    for (const t of ts) {
      const n = t.frames.length;
      const key = t.frames[0]?.function ?? UNKNOWN_FUNCTION;
      let bucket = buckets.get(key);
      if (bucket === undefined) {
        bucket = [];
        buckets.set(key, bucket);
      }
      let found = -1;
      for (const c of bucket) {
        const cls = classes[c];
        if (cls && sameFrames(cls.rep, t.frames)) {
          found = c;
          break;
        }
      }
      if (found < 0) {
        found = classes.length;
        bucket.push(found);
        // Innermost first in the snapshot; outermost first in the tree.
        const path = new Int32Array(n);
        for (let i = 0; i < n; i++) {
          const f = t.frames[n - 1 - i];
          if (f !== undefined) path[i] = frames.id(f);
        }
        classes.push({ path, rep: t.frames, members: new IntVec(), threads: 0, leaf: -1 });
      }
      const cls = classes[found];
      if (cls === undefined) continue;
      cls.threads++;
      threadCount++;
      if (
        found !== lastCls &&
        (cls.members.length === 0 || cls.members.get(cls.members.length - 1) !== r.rank)
      ) {
        cls.members.push(r.rank);
      }
      lastCls = found;
    }
  }

  // Trie of the classes' paths: one node per distinct prefix.
  interface Building {
    parent: number;
    depth: number;
    frame: number;
    threads: number;
    ends: number;
    classes: number[];
    childOf: Map<number, number>;
  }
  const building: Building[] = [];
  const rootOf = new Map<number, number>();
  for (let ci = 0; ci < classes.length; ci++) {
    const cls = classes[ci];
    if (cls === undefined) continue;
    let parent = -1;
    for (let d = 0; d < cls.path.length; d++) {
      const fid = cls.path[d] ?? 0;
      const table = parent < 0 ? rootOf : (building[parent]?.childOf ?? rootOf);
      let id = table.get(fid);
      if (id === undefined) {
        id = building.length;
        building.push({ parent, depth: d, frame: fid, threads: 0, ends: 0, classes: [], childOf: new Map() });
        table.set(fid, id);
      }
      const b = building[id];
      if (b === undefined) break;
      b.threads += cls.threads;
      b.classes.push(ci);
      parent = id;
    }
    const leaf = building[parent];
    if (leaf) leaf.ends += cls.threads;
    cls.leaf = parent;
  }

  // Rank sets: union of the classes' members, made once per distinct class set.
  const memo = new Map<string, { text: string; count: number }>();
  const rankSet = (cs: readonly number[]) => {
    const key = cs.join(',');
    let hit = memo.get(key);
    if (hit === undefined) {
      if (cs.length === 1) {
        const m = classes[cs[0] ?? 0]?.members;
        const arr = m ? m.data.subarray(0, m.length) : new Int32Array(0);
        hit = { text: compressRanks(arr), count: arr.length };
      } else {
        let total = 0;
        for (const c of cs) total += classes[c]?.members.length ?? 0;
        const all = new Int32Array(total);
        let at = 0;
        for (const c of cs) {
          const m = classes[c]?.members;
          if (m === undefined) continue;
          all.set(m.data.subarray(0, m.length), at);
          at += m.length;
        }
        all.sort();
        let distinct = 0;
        for (let i = 0; i < all.length; i++) if (i === 0 || all[i] !== all[i - 1]) distinct++;
        hit = { text: compressRanks(all), count: distinct };
      }
      memo.set(key, hit);
    }
    return hit;
  };

  const nodes: StackNode[] = building.map((b, id) => {
    const set = rankSet(b.classes);
    return {
      id,
      parent: b.parent,
      depth: b.depth,
      function: frames.fn[b.frame] ?? UNKNOWN_FUNCTION,
      module: frames.mod[b.frame] ?? null,
      ranks: set.text,
      rankCount: set.count,
      threadCount: b.threads,
      endCount: b.ends,
      children: [...b.childOf.values()],
      classes: b.classes,
    };
  });
  const byWeight = (a: number, b: number) =>
    (nodes[b]?.threadCount ?? 0) - (nodes[a]?.threadCount ?? 0) ||
    (nodes[a]?.ranks ?? '').localeCompare(nodes[b]?.ranks ?? '', 'en') ||
    a - b;
  for (const n of nodes) n.children.sort(byWeight);
  const roots = [...rootOf.values()].sort(byWeight);

  const order = classes.map((_, i) => i);
  order.sort(
    (a, b) =>
      (classes[b]?.members.length ?? 0) - (classes[a]?.members.length ?? 0) ||
      (classes[a]?.members.get(0) ?? 0) - (classes[b]?.members.get(0) ?? 0),
  );
  const outlierMax = opts.outlierMax ?? Math.max(1, Math.floor(snap.ranks.length / 100));
  const largest = classes[order[0] ?? 0]?.members.length ?? 0;
  const outliers: number[] = [];
  for (const c of classes) {
    const size = c.members.length;
    if (size <= outlierMax && size < largest) for (let i = 0; i < size; i++) outliers.push(c.members.get(i));
  }
  const out: StackClass[] = order.slice(0, opts.maxClasses ?? 100).map((ci) => {
    const c = classes[ci];
    if (c === undefined) throw new Error(`stack class ${ci} vanished`);
    const set = rankSet([ci]);
    return {
      ranks: set.text,
      rankCount: set.count,
      threadCount: c.threads,
      example: c.members.get(0),
      frames: Array.from(c.path, (fid) => frames.fn[fid] ?? UNKNOWN_FUNCTION),
      leaf: c.leaf,
    };
  });

  return {
    threads: mode,
    nodes,
    roots,
    rankCount,
    threadCount,
    missing: compressRanks(missing),
    classes: out,
    classTotal: classes.length,
    outliers: compressRanks(outliers),
  };
}

/** Does any snapshot rank carry stacks (threads read)? */
export function hasStacks(snap: JobSnapshot): boolean {
  return snap.ranks.some((r) => r.threads !== undefined || r.mpiCall !== undefined);
}

/** Node ids matching a function-name search (case-insensitive substring), and their ancestors. */
export function searchStackTree(
  tree: StackTree,
  query: string,
): { readonly matches: Set<number>; readonly onPath: Set<number> } {
  const q = query.trim().toLowerCase();
  const matches = new Set<number>();
  const onPath = new Set<number>();
  if (q === '') return { matches, onPath };
  for (const n of tree.nodes) {
    if (!n.function.toLowerCase().includes(q)) continue;
    matches.add(n.id);
    for (let p = n.parent; p >= 0 && !onPath.has(p); p = tree.nodes[p]?.parent ?? -1) onPath.add(p);
  }
  return { matches, onPath };
}

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
    lines.push(`${'  '.repeat(n.depth)}[${n.ranks}]${count} ${jobText(n.function)}${mod}`);
    for (let i = n.children.length - 1; i >= 0; i--) stack.push(n.children[i] ?? 0);
  }
  if (tree.missing !== '') lines.push(`no stacks: [${tree.missing}]`);
  return lines.join('\n');
}
