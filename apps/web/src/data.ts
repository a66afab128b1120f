// The snapshot a view shows, wherever it came from (the live server, a share link, the
// synthetic demo), and the snapshots fetched from the server. What is derived from a snapshot
// lives in snapshot-context.ts.
import type { JobId, JobSnapshot, OverviewFirst, SnapshotId } from '@mqd/model';
import { factsOfOverview, factsOfSnapshot, type SnapshotFacts } from './snapshot-facts.js';

export type SnapshotSource = 'live' | 'shared' | 'demo';

export interface LoadedSnapshot {
  /** Unique per snapshot and source: keys caches and effects. */
  readonly key: string;
  readonly source: SnapshotSource;
  readonly snapshotId: SnapshotId | null;
  readonly jobId: JobId | null;
  readonly takenAt: string;
  readonly snapshot: JobSnapshot;
  /** Shared snapshots are frozen: no share, no new snapshot, no timeline of the live job. */
  readonly readOnly: boolean;
}

/**
 * A stored or shared snapshot of which only the server's overview is here yet (what the header,
 * the diagnosis and the matrix draw first): its first part, then the whole overview with the
 * edge table (a SnapshotOverview); the whole snapshot follows as a LoadedSnapshot with the same
 * key.
 */
export interface LoadedOverview {
  readonly key: string;
  readonly source: SnapshotSource;
  readonly snapshotId: SnapshotId | null;
  readonly jobId: JobId | null;
  readonly takenAt: string;
  readonly overview: OverviewFirst;
  readonly readOnly: boolean;
}

/** What a page shows of one snapshot: the whole of it, or its overview while the rest loads. */
export type Viewed = LoadedSnapshot | LoadedOverview;

/** The facts the first views read, from either. */
export function factsOf(d: Viewed): SnapshotFacts {
  return 'snapshot' in d ? factsOfSnapshot(d.snapshot) : factsOfOverview(d.overview);
}

/** A snapshot made in the page (the demo, a benchmark, a test), stored nowhere: no ids. */
export function localSnapshot(key: string, snapshot: JobSnapshot, readOnly: boolean): LoadedSnapshot {
  return {
    key,
    source: 'demo',
    snapshotId: null,
    jobId: null,
    takenAt: snapshot.takenAt,
    snapshot,
    readOnly,
  };
}

/** Snapshots fetched from the server, by id: the timeline and the snapshot picker reuse them. */
const MAX_CACHED = 32;
const snapshotCache = new Map<string, { takenAt: string; jobId: JobId; snapshot: JobSnapshot }>();

export function cachedSnapshot(
  id: SnapshotId,
): { takenAt: string; jobId: JobId; snapshot: JobSnapshot } | undefined {
  const hit = snapshotCache.get(id);
  if (hit) {
    // Refresh its position: the Map's insertion order is the eviction order.
    snapshotCache.delete(id);
    snapshotCache.set(id, hit);
  }
  return hit;
}

export function rememberSnapshot(
  id: SnapshotId,
  value: { takenAt: string; jobId: JobId; snapshot: JobSnapshot },
): void {
  snapshotCache.delete(id);
  snapshotCache.set(id, value);
  while (snapshotCache.size > MAX_CACHED) {
    const oldest = snapshotCache.keys().next();
    if (oldest.done) break;
    snapshotCache.delete(oldest.value);
  }
}
