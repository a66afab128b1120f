// What the header, the diagnosis and the matrix read of one snapshot, from either source: the
// whole snapshot (its context, snapshot-context.ts), or the server's overview of it (@mqd/model's
// edges/overview.ts) while the whole snapshot is still on its way. The views that draw first
// read these, so a 100,000-rank job's verdict and matrix show before its ranks have arrived.
import {
  type EdgeTable,
  type Explanation,
  expandRanks,
  type JobSnapshot,
  type LengthUnit,
  type Level,
  type OverviewFirst,
  type OverviewHead,
  type OverviewMatrix,
  overviewHead,
  type SnapshotReadStatus,
  snapshotReadStatus,
} from '@mqd/model';
import { contextOf, Derived } from './snapshot-context.js';

export interface SnapshotFacts {
  readonly explanation: Derived<Explanation>;
  /**
   * The matrix's edge table (built on first use from a whole snapshot); null while only the
   * overview's first part is here.
   */
  readonly edges: EdgeTable | null;
  /** The matrix's size and communicators (none listed while the edge table is not here). */
  readonly matrix: OverviewMatrix & { readonly comms: EdgeTable['comms'] };
  /** The overview's first level of the matrix (no filter), to draw before the edge table is here. */
  readonly firstLevel: Level | null;
  readonly readStatus: SnapshotReadStatus;
  /** World ranks that were not read. */
  readonly notRead: readonly number[];
  /** Ranks whose DLL looked up fields the library lacks (RankSnapshot.dll.missingFields). */
  readonly dllMissing: readonly number[];
  readonly head: OverviewHead;
  readonly lengthUnit: LengthUnit;
  /** The whole snapshot; null while only its overview is here. */
  readonly snapshot: JobSnapshot | null;
}

const bySnapshot = new WeakMap<JobSnapshot, SnapshotFacts>();
const byOverview = new WeakMap<OverviewFirst, SnapshotFacts>();

function once<T>(f: () => T): () => T {
  let v: { value: T } | null = null;
  return () => {
    v ??= { value: f() };
    return v.value;
  };
}

/** The facts of a whole snapshot (computed on first use, shared by every view). */
export function factsOfSnapshot(snapshot: JobSnapshot): SnapshotFacts {
  let f = bySnapshot.get(snapshot);
  if (f !== undefined) return f;
  const ctx = contextOf(snapshot);
  const readStatus = once(() => snapshotReadStatus(snapshot));
  const notRead = once(() => snapshot.ranks.flatMap((r) => (r.state.kind === 'ok' ? [] : [r.rank])));
  const dllMissing = once(() =>
    snapshot.ranks.flatMap((r) => (r.dll?.missingFields?.length ? [r.rank] : [])),
  );
  const head = once(() => overviewHead(snapshot));
  f = {
    explanation: ctx.explanation,
    get edges() {
      return ctx.edges;
    },
    get matrix() {
      return ctx.edges;
    },
    firstLevel: null,
    get readStatus() {
      return readStatus();
    },
    get notRead() {
      return notRead();
    },
    get dllMissing() {
      return dllMissing();
    },
    get head() {
      return head();
    },
    lengthUnit: snapshot.mpi.lengthUnit,
    snapshot,
  };
  bySnapshot.set(snapshot, f);
  return f;
}

/** The facts of the server's overview (or its first part) of a snapshot not here yet. */
export function factsOfOverview(o: OverviewFirst): SnapshotFacts {
  let f = byOverview.get(o);
  if (f !== undefined) return f;
  const notRead = once(() => expandRanks(o.notRead) ?? []);
  const dllMissing = once(() => expandRanks(o.dllMissingFields) ?? []);
  // The whole overview has its edge table; its first part only the matrix's size.
  const edges = 'edges' in o ? (o.edges as EdgeTable) : null;
  f = {
    explanation: Derived.known('analysis', o.explanation),
    edges,
    matrix: edges ?? { ...o.matrix, comms: [] },
    firstLevel: o.firstLevel,
    readStatus: o.readStatus,
    get notRead() {
      return notRead();
    },
    get dllMissing() {
      return dllMissing();
    },
    head: o.head,
    lengthUnit: o.head.mpi.lengthUnit,
    snapshot: null,
  };
  byOverview.set(o, f);
  return f;
}
