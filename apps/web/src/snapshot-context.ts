// Everything derived from one snapshot, in one place per snapshot: the model's SnapshotIndex,
// the matrix's edge table, the explanation (explainSnapshot) and the merged stack trees
// (buildStackTree, one per set of options). Each is computed on first use and kept as long as
// the snapshot is (a WeakMap), so every view and every re-render shares one answer.
//
// The analysis and the stack tree are heavy enough to run after the first paint: `useDerived`
// computes them in a task of their own, the app busy meanwhile (idle.ts). Their failure must not
// take the views down: it is an answer too ({failed}), shown where the result would have been.
// The index and the edges are cheap and needed to draw at all: read them directly.
import {
  buildEdges,
  buildStackTree,
  type Explanation,
  explainSnapshot,
  fillEdgePositions,
  type JobSnapshot,
  SnapshotIndex,
  type SnapshotOverview,
  type StackTree,
  type StackTreeOptions,
} from '@mqd/model';
import { useEffect, useState } from 'react';
import { beginBusy } from './idle.js';
import type { EdgeTable } from './matrix/edges.js';

/** A derivation's answer, or why it failed. */
export type Computed<T> = T | { readonly failed: string };

/** One derived answer of one snapshot, computed at most once. */
export class Derived<T> {
  private value: Computed<T> | undefined;
  constructor(
    private readonly what: string,
    private readonly compute: () => T,
  ) {}

  /** The answer, computing it now if needed. */
  get(): Computed<T> {
    if (this.value === undefined) {
      try {
        this.value = this.compute();
      } catch (e: unknown) {
        // Shown to the user in place of the result; the stack is for whoever opens the console.
        console.error(`MQD: ${this.what} failed`, e);
        this.value = { failed: e instanceof Error ? e.message : String(e) };
      }
    }
    return this.value;
  }

  /** The answer if it was computed, else undefined. */
  peek(): Computed<T> | undefined {
    return this.value;
  }

  /** Takes an answer made elsewhere (the server's overview) if none was computed here. */
  seed(value: T): void {
    this.value ??= value;
  }

  /** A derivation whose answer is already known. */
  static known<T>(what: string, value: T): Derived<T> {
    const d = new Derived<T>(what, () => value);
    d.value = value;
    return d;
  }
}

export class SnapshotContext {
  private indexValue: SnapshotIndex | null = null;
  private edgesValue: EdgeTable | null = null;
  private readonly trees = new Map<string, Derived<StackTree>>();
  readonly explanation: Derived<Explanation>;

  constructor(readonly snapshot: JobSnapshot) {
    this.explanation = new Derived('analysis', () => explainSnapshot(snapshot));
  }

  /** The model's index of the snapshot: the one index every view resolves ranks and peers with. */
  get index(): SnapshotIndex {
    this.indexValue ??= new SnapshotIndex(this.snapshot);
    return this.indexValue;
  }

  /** The matrix's edge table. */
  get edges(): EdgeTable {
    this.edgesValue ??= buildEdges(this.snapshot);
    return this.edgesValue;
  }

  /**
   * Takes what the server's overview of this snapshot already holds: the explanation and the
   * edge table (the model's own, made from the same stored snapshot), so they are not computed
   * again in the page.
   */
  seed(o: SnapshotOverview): void {
    this.explanation.seed(o.explanation);
    // The overview's table came without the positions in the snapshot (they index it): filled
    // from it in place, so the matrix drawn from the overview keeps its table. A snapshot that
    // does not fit it (never expected) gets its own table.
    if (this.edgesValue === null && (o.positions || fillEdgePositions(this.snapshot, o.edges)))
      this.edgesValue = o.edges;
  }

  /** The merged stack tree for these options. */
  stackTree(opts: StackTreeOptions = {}): Derived<StackTree> {
    const key = JSON.stringify(Object.entries(opts).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    let d = this.trees.get(key);
    if (d === undefined) {
      d = new Derived('stack tree', () => buildStackTree(this.snapshot, opts));
      this.trees.set(key, d);
    }
    return d;
  }
}

const contexts = new WeakMap<JobSnapshot, SnapshotContext>();

/** The context of `snapshot`, made on first use. */
export function contextOf(snapshot: JobSnapshot): SnapshotContext {
  let c = contexts.get(snapshot);
  if (c === undefined) {
    c = new SnapshotContext(snapshot);
    contexts.set(snapshot, c);
  }
  return c;
}

/**
 * A derived answer for React: the cached one at once, else null while it is computed in a task
 * after the first paint (the app is busy meanwhile). Pass the same Derived for the same answer
 * (they come from contextOf, so they are stable per snapshot).
 */
export function useDerived<T>(d: Derived<T>): Computed<T> | null {
  const [result, setResult] = useState<{ of: Derived<T>; value: Computed<T> } | null>(() => {
    const hit = d.peek();
    return hit === undefined ? null : { of: d, value: hit };
  });
  useEffect(() => {
    const hit = d.peek();
    if (hit !== undefined) {
      setResult({ of: d, value: hit });
      return;
    }
    const end = beginBusy();
    const timer = setTimeout(() => {
      setResult({ of: d, value: d.get() });
      end();
    }, 0);
    return () => {
      clearTimeout(timer);
      end();
    };
  }, [d]);
  // An answer of the previous snapshot is never shown for this one.
  if (result !== null && result.of === d) return result.value;
  return d.peek() ?? null;
}

/** The explanation of `snapshot` (null while it is computed). */
export function useExplanation(snapshot: JobSnapshot): Computed<Explanation> | null {
  return useDerived(contextOf(snapshot).explanation);
}

/** The merged stack tree of `snapshot` for `opts` (null while it is computed). */
export function useStackTree(snapshot: JobSnapshot, opts: StackTreeOptions): Computed<StackTree> | null {
  // The Derived is looked up by the options' value, so a fresh options object each render is fine.
  return useDerived(contextOf(snapshot).stackTree(opts));
}
