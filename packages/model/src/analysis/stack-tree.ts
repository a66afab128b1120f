// The merged call-prefix tree of a snapshot's stacks, as STAT draws it: one node per distinct
// call path prefix (outermost frame at the root), each carrying the set of ranks whose stack
// passes through it, as ranges ("0-2,5"). At 16,384 ranks a job has a handful of distinct
// stacks, so the work is: intern every frame to a number, group threads whose frame-number
// sequences are equal (the equivalence classes), then build the tree from the classes only.
// Rank sets of nodes are unions of class member lists, memoised by class set (a chain of
// nodes below a branch point shares one set), so text is made once per distinct set.

import { isRuntimeFrame, mixedFrames, mpiCallOfFrame } from '../mpi/index.js';
import type { Frame, JobSnapshot, RankSnapshot, ThreadStack } from '../snapshot-spec.js';
import { IntVec } from './csr.js';
import { fewEnough, rareClassMax } from './outliers.js';
import { compressRanks } from './ranges.js';

/** main: one stack per rank (its main thread); all: every thread of every rank. */
export type ThreadMode = 'main' | 'all';

/**
 * What makes two frames of the user's code the same node: `line` their function and source
 * line (DDT's and STAT's line mode: two calls from different lines of main are two nodes),
 * `function` the function alone. Frames of the MPI library and the runtime always merge by
 * function: their lines say where the library polls, which changes from one read to the next.
 */
export type StackKey = 'line' | 'function';

export interface StackTreeOptions {
  readonly threads?: ThreadMode;
  /** Default `function` (the CLI's text); the Stacks view asks for `line`. */
  readonly by?: StackKey;
  /**
   * With threads `all`, leave out the threads the MPI runtime runs for itself (Open MPI's and
   * PMIx's progress threads, UCX's async thread, libevent loops): see isRuntimeThread. They are
   * counted in `runtimeThreads` either way. Default false.
   */
  readonly hideRuntimeThreads?: boolean;
  /** Stacks with at most this many ranks are outliers (default: 1% of the ranks, at least 1). */
  readonly outlierMax?: number;
  /** At most this many classes in the result (default 100); classTotal still counts all. */
  readonly maxClasses?: number;
}

/**
 * Where a node's frame is: the user's code, a library outside MPI (libc, the loader), the
 * outermost MPI call on its path (the call the user made), or inside that call (the library's
 * own frames, folded by default in the Stacks view).
 */
export type StackNodeKind = 'user' | 'runtime' | 'mpi-call' | 'mpi-inside';

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
  /** Source file name (no directory) and line of a user frame when the tree is by line; else null. */
  readonly file: string | null;
  readonly line: number | null;
  readonly kind: StackNodeKind;
  /** Ranks whose stack passes through this frame, as ranges. */
  readonly ranks: string;
  readonly rankCount: number;
  /** Threads through this frame (equals rankCount with threads "main"). */
  readonly threadCount: number;
  /** Threads whose stack ends here (this is their innermost frame). */
  readonly endCount: number;
  /** Children in `nodes`, most ranks first. */
  readonly children: number[];
  /** Whole-stack groups (internal, not the `classes` below) through this node. */
  readonly classes: number[];
}

/** Ranks with the same stack (see StackTree.classes and StackTree.stacks). */
export interface StackClass {
  /** Ranks with this stack, as ranges. */
  readonly ranks: string;
  readonly rankCount: number;
  readonly threadCount: number;
  /** The lowest member rank, to look at as the example. */
  readonly example: number;
  /** Function names, outermost first. */
  readonly frames: string[];
  /** The node of the innermost of those frames. */
  readonly leaf: number;
}

export interface StackTree {
  readonly threads: ThreadMode;
  readonly by: StackKey;
  /** Every node; roots are those with parent -1, listed in `roots`. */
  readonly nodes: StackNode[];
  readonly roots: number[];
  /** Ranks with at least one stack in the tree. */
  readonly rankCount: number;
  readonly threadCount: number;
  /** Ranks without stacks (not read, not asked for, or an unwinding error), as ranges. */
  readonly missing: string;
  /** Groups of threads with the same whole stack, largest first (at most maxClasses). */
  readonly classes: StackClass[];
  readonly classTotal: number;
  /**
   * The distinct stacks as a person reads them, largest first: the same frames down to the MPI
   * call the thread is in (the frames inside the call are the library's and change from one read
   * to the next: a transient progress frame makes no stack of its own), or the whole stack when
   * the thread is in no MPI call. Each `leaf` is that MPI call's node (or the innermost frame's).
   */
  readonly stacks: StackClass[];
  readonly stackTotal: number;
  /**
   * Ranks whose stacks (`stacks`, so judged on the user's frames and the MPI call) are shared by
   * few ranks (see outlierMax), as ranges, when they are few (outliers.ts fewEnough). With
   * threads "all", only ranks with no common stack.
   */
  readonly outliers: string;
  /** With threads `all`: the MPI runtime's own threads (isRuntimeThread), hidden or not; else 0. */
  readonly runtimeThreads: number;
  /** Ranks with such threads, as ranges. */
  readonly runtimeThreadRanks: string;
  /** Those threads are left out of the tree (hideRuntimeThreads). */
  readonly runtimeThreadsHidden: boolean;
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

/**
 * The start routines of the runtime's service threads, whatever module they are found in (a
 * static build, a stripped library): Open MPI's and PMIx's progress_engine, UCX's async thread,
 * hwloc's and libevent's loops.
 */
const RUNTIME_THREAD_START =
  /^(?:progress_engine|ucs_async_thread_func|event_base_loop|opal_libevent\w*event_base_loop|listen_thread_fn)$/;

/**
 * A thread the MPI runtime runs for itself, not the user's: not the main thread, in no MPI call,
 * and every frame the runtime's or the C library's (isRuntimeFrame) or a known service-thread
 * start routine. An OpenMP worker (libgomp) or a user's pthread has a frame of its own and stays.
 */
export function isRuntimeThread(t: ThreadStack): boolean {
  if (t.main || t.frames.length === 0) return false;
  for (const f of t.frames) {
    if (mpiCallOfFrame(f) !== null) return false;
    if (isRuntimeFrame(f)) continue;
    if (f.function !== null && RUNTIME_THREAD_START.test(f.function)) continue;
    return false;
  }
  return true;
}

/** Frame identity across ranks: function and module file (pcs differ with ASLR), and the line of user frames by line. */
class FrameInterner {
  private readonly byKey = new Map<string, number>();
  readonly fn: string[] = [];
  readonly mod: (string | null)[] = [];
  readonly file: (string | null)[] = [];
  readonly line: (number | null)[] = [];
  /** The frame is a public MPI call (mpiCallOfFrame). */
  readonly call: boolean[] = [];
  /** The frame is the MPI library's, the runtime's or libc's (isRuntimeFrame). */
  readonly runtime: boolean[] = [];

  constructor(private readonly by: StackKey) {}

  id(f: Frame): number {
    const name = f.function ?? UNKNOWN_FUNCTION;
    const runtime = isRuntimeFrame(f);
    const withLine = this.by === 'line' && !runtime && f.line !== null;
    const file = withLine ? basename(f.file) : null;
    const line = withLine ? f.line : null;
    const key = `${name}\u0000${f.module ?? ''}\u0000${file ?? ''}\u0000${line ?? ''}`;
    let id = this.byKey.get(key);
    if (id === undefined) {
      id = this.fn.length;
      this.fn.push(name);
      this.mod.push(basename(f.module));
      this.file.push(file);
      this.line.push(line);
      this.call.push(mpiCallOfFrame(f) !== null);
      this.runtime.push(runtime);
      this.byKey.set(key, id);
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
 * Same stack as a class's representative: same function and module at every depth (and line,
 * by line). Compared as strings, innermost first (where stacks differ most), without interning:
 * at 16,384 ranks with ~20 distinct stacks, interning only the representatives is what keeps
 * this fast. By line, two stacks that differ only in lines inside the library are two groups
 * here and one path once interned (merged below).
 */
function sameFrames(a: readonly Frame[], b: readonly Frame[], byLine: boolean): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (x === undefined || y === undefined) return false;
    if (x.function !== y.function || x.module !== y.module) return false;
    if (byLine && (x.line !== y.line || x.file !== y.file)) return false;
  }
  return true;
}

/** Sorted distinct union of member lists. */
function unionMembers(lists: readonly IntVec[]): Int32Array {
  if (lists.length === 1) {
    const m = lists[0];
    return m ? m.data.slice(0, m.length) : new Int32Array(0);
  }
  let total = 0;
  for (const m of lists) total += m.length;
  const all = new Int32Array(total);
  let at = 0;
  for (const m of lists) {
    all.set(m.data.subarray(0, m.length), at);
    at += m.length;
  }
  all.sort();
  let k = 0;
  for (let i = 0; i < all.length; i++) if (i === 0 || all[i] !== all[k - 1]) all[k++] = all[i] ?? 0;
  return all.subarray(0, k);
}

export function buildStackTree(snap: JobSnapshot, opts: StackTreeOptions = {}): StackTree {
  const mode = opts.threads ?? 'main';
  const by = opts.by ?? 'function';
  const byLine = by === 'line';
  const hide = mode === 'all' && opts.hideRuntimeThreads === true;
  const frames = new FrameInterner(by);
  const raw: Cls[] = [];
  // Groups by innermost function name (one string hash per thread, not per frame).
  const buckets = new Map<string, number[]>();
  const missing: number[] = [];
  const runtimeRanks: number[] = [];
  let runtimeThreads = 0;
  let rankCount = 0;
  let threadCount = 0;

  for (const r of snap.ranks) {
    let ts = treeThreads(r, mode);
    if (mode === 'all') {
      let service = 0;
      for (const t of ts) if (!t.main && isRuntimeThread(t)) service++;
      if (service > 0) {
        runtimeThreads += service;
        runtimeRanks.push(r.rank);
        if (hide) ts = ts.filter((t) => t.main || !isRuntimeThread(t));
      }
    }
    if (ts.length === 0) {
      missing.push(r.rank);
      continue;
    }
    rankCount++;
    // A rank counted once per group even when several of its threads share a stack.
    let lastCls = -1;
    for (const t of ts) {
      // A CPython thread's Python frames in place of the interpreter's (mixedFrames).
      const tf = mixedFrames(t).frames;
      const n = tf.length;
      const key = tf[0]?.function ?? UNKNOWN_FUNCTION;
      let bucket = buckets.get(key);
      if (bucket === undefined) {
        bucket = [];
        buckets.set(key, bucket);
      }
      let found = -1;
      for (const c of bucket) {
        const cls = raw[c];
        if (cls && sameFrames(cls.rep, tf, byLine)) {
          found = c;
          break;
        }
      }
      if (found < 0) {
        found = raw.length;
        bucket.push(found);
        // Innermost first in the snapshot; outermost first in the tree.
        const path = new Int32Array(n);
        for (let i = 0; i < n; i++) {
          const f = tf[n - 1 - i];
          if (f !== undefined) path[i] = frames.id(f);
        }
        raw.push({ path, rep: tf, members: new IntVec(), threads: 0, leaf: -1 });
      }
      const cls = raw[found];
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

  // Groups whose interned paths are equal are one (by line, lines inside the library differed).
  const classes: Cls[] = [];
  {
    const byPath = new Map<string, number>();
    for (const c of raw) {
      const key = c.path.join(',');
      const at = byPath.get(key);
      const into = at === undefined ? undefined : classes[at];
      if (into === undefined) {
        byPath.set(key, classes.length);
        classes.push(c);
        continue;
      }
      const merged = unionMembers([into.members, c.members]);
      const members = new IntVec();
      for (const m of merged) members.push(m);
      classes[at ?? 0] = { ...into, members, threads: into.threads + c.threads };
    }
  }

  // Trie of the classes' paths: one node per distinct prefix.
  interface Building {
    parent: number;
    depth: number;
    frame: number;
    kind: StackNodeKind;
    threads: number;
    ends: number;
    classes: number[];
    childOf: Map<number, number>;
  }
  const building: Building[] = [];
  const rootOf = new Map<number, number>();
  /** Per class, the node of its MPI call (or its leaf): where the stack a person reads ends. */
  const cutOf: number[] = [];
  for (let ci = 0; ci < classes.length; ci++) {
    const cls = classes[ci];
    if (cls === undefined) continue;
    let parent = -1;
    let cut = -1;
    for (let d = 0; d < cls.path.length; d++) {
      const fid = cls.path[d] ?? 0;
      const table = parent < 0 ? rootOf : (building[parent]?.childOf ?? rootOf);
      let id = table.get(fid);
      if (id === undefined) {
        id = building.length;
        const up = building[parent]?.kind;
        const kind: StackNodeKind =
          up === 'mpi-call' || up === 'mpi-inside'
            ? 'mpi-inside'
            : frames.call[fid]
              ? 'mpi-call'
              : frames.runtime[fid]
                ? 'runtime'
                : 'user';
        building.push({
          parent,
          depth: d,
          frame: fid,
          kind,
          threads: 0,
          ends: 0,
          classes: [],
          childOf: new Map(),
        });
        table.set(fid, id);
      }
      const b = building[id];
      if (b === undefined) break;
      b.threads += cls.threads;
      b.classes.push(ci);
      if (cut < 0 && b.kind === 'mpi-call') cut = id;
      parent = id;
    }
    const leaf = building[parent];
    if (leaf) leaf.ends += cls.threads;
    cls.leaf = parent;
    cutOf.push(cut < 0 ? parent : cut);
  }

  // Rank sets: union of the classes' members, made once per distinct class set.
  const memo = new Map<string, { text: string; count: number }>();
  const rankSet = (cs: readonly number[]) => {
    const key = cs.join(',');
    let hit = memo.get(key);
    if (hit === undefined) {
      const lists: IntVec[] = [];
      for (const c of cs) {
        const m = classes[c]?.members;
        if (m !== undefined) lists.push(m);
      }
      const all = unionMembers(lists);
      hit = { text: compressRanks(all), count: all.length };
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
      file: frames.file[b.frame] ?? null,
      line: frames.line[b.frame] ?? null,
      kind: b.kind,
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

  // The stacks a person reads: classes cut at their MPI call, grouped by that node.
  interface Readable {
    readonly node: number;
    readonly parts: number[];
    threads: number;
    members: Int32Array;
  }
  const readable: Readable[] = [];
  {
    const byNode = new Map<number, Readable>();
    for (let ci = 0; ci < classes.length; ci++) {
      const node = cutOf[ci] ?? -1;
      let g = byNode.get(node);
      if (g === undefined) {
        g = { node, parts: [], threads: 0, members: new Int32Array(0) };
        byNode.set(node, g);
        readable.push(g);
      }
      g.parts.push(ci);
      g.threads += classes[ci]?.threads ?? 0;
    }
    for (const g of readable) {
      const lists: IntVec[] = [];
      for (const c of g.parts) {
        const m = classes[c]?.members;
        if (m !== undefined) lists.push(m);
      }
      g.members = unionMembers(lists);
    }
  }
  readable.sort((a, b) => b.members.length - a.members.length || (a.members[0] ?? 0) - (b.members[0] ?? 0));
  const outlierMax = opts.outlierMax ?? rareClassMax(snap.ranks.length);
  const largest = readable[0]?.members.length ?? 0;
  // A rank is an outlier when every stack it has is rare: with threads "all" a rank whose main
  // thread is with the crowd is not one for a lone helper thread of its own.
  const common = new Set<number>();
  const rare: number[] = [];
  for (const g of readable) {
    const size = g.members.length;
    if (size <= outlierMax && size < largest) for (const m of g.members) rare.push(m);
    else for (const m of g.members) common.add(m);
  }
  const odd = mode === 'all' ? rare.filter((m) => !common.has(m)) : rare;
  // Named only when few (outliers.ts): 1 of 4 ranks is a quarter of the job.
  const outliers = fewEnough(odd.length, snap.ranks.length) ? odd : [];
  const pathOf = (node: number): string[] => {
    const out: string[] = [];
    for (let p = nodes[node]; p !== undefined; p = nodes[p.parent]) out.push(p.function);
    return out.reverse();
  };
  const order = classes.map((_, i) => i);
  order.sort(
    (a, b) =>
      (classes[b]?.members.length ?? 0) - (classes[a]?.members.length ?? 0) ||
      (classes[a]?.members.get(0) ?? 0) - (classes[b]?.members.get(0) ?? 0),
  );
  const whole: StackClass[] = order.slice(0, opts.maxClasses ?? 100).map((ci) => {
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
  const stacks: StackClass[] = readable.slice(0, opts.maxClasses ?? 100).map((g) => {
    const set = rankSet(g.parts);
    return {
      ranks: set.text,
      rankCount: set.count,
      threadCount: g.threads,
      example: g.members[0] ?? 0,
      frames: pathOf(g.node),
      leaf: g.node,
    };
  });

  return {
    threads: mode,
    by,
    nodes,
    roots,
    rankCount,
    threadCount,
    missing: compressRanks(missing),
    classes: whole,
    classTotal: classes.length,
    stacks,
    stackTotal: readable.length,
    outliers: compressRanks(outliers.sort((a, b) => a - b)),
    runtimeThreads,
    runtimeThreadRanks: compressRanks(runtimeRanks),
    runtimeThreadsHidden: hide,
  };
}

/** Does any snapshot rank carry stacks (threads read)? */
export function hasStacks(snap: JobSnapshot): boolean {
  return snap.ranks.some((r) => r.threads !== undefined || r.mpiCall !== undefined);
}

/** A user frame's source place by line, `wrong_tag.c:36`; null when the node has none. */
export function stackNodePlace(n: StackNode): string | null {
  if (n.line === null) return null;
  return n.file === null ? `:${n.line}` : `${n.file}:${n.line}`;
}

/**
 * Node ids matching a search (case-insensitive substring of the function, or of the source place
 * `file:line` by line), and their ancestors.
 */
export function searchStackTree(
  tree: StackTree,
  query: string,
): { readonly matches: Set<number>; readonly onPath: Set<number> } {
  const q = query.trim().toLowerCase();
  const matches = new Set<number>();
  const onPath = new Set<number>();
  if (q === '') return { matches, onPath };
  for (const n of tree.nodes) {
    const place = stackNodePlace(n);
    if (!n.function.toLowerCase().includes(q) && place?.toLowerCase().includes(q) !== true) continue;
    matches.add(n.id);
    for (let p = n.parent; p >= 0 && !onPath.has(p); p = tree.nodes[p]?.parent ?? -1) onPath.add(p);
  }
  return { matches, onPath };
}
