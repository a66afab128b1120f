// The series the timeline draws: the job's latest snapshots, read one at a time (snapshots of
// big jobs are large) and reused from the page's cache; a share or a snapshot without a job is a
// single column, the demo its generated series.

import { jobState, type UnchangedRun } from '@mqd/model';
import { useEffect, useState } from 'react';
import type { ApiError, SnapshotListEntry } from '../api.js';
import { cachedSnapshot, rememberSnapshot } from '../data.js';
import { demoSeries } from '../demo.js';
import { beginBusy } from '../idle.js';
import type { ViewProps } from '../view-types.js';
import type { TimelineInput } from './timeline.js';

/** The timeline reads at most this many of the job's latest snapshots. */
const MAX_SNAPSHOTS = 24;

export type Loading =
  | { kind: 'loading'; done: number; total: number }
  | { kind: 'error'; error: ApiError }
  | { kind: 'ready'; inputs: TimelineInput[]; note: string | null; run: UnchangedRun | null };

/**
 * The run of equal snapshots at the end of the job's whole list (the model's jobState, the rule
 * Jobs and Fleet show), so "since" does not depend on how many snapshots the timeline reads.
 */
export function unchangedRunOf(list: readonly SnapshotListEntry[]): UnchangedRun | null {
  const a = jobState({
    steps: list.map((e) => ({
      at: Date.parse(e.takenAt),
      digest: e.meta.digest,
      ranks: e.meta.ranks,
      read: e.meta.ok,
      pending: e.meta.pendingSends + e.meta.pendingReceives,
    })),
    ended: false,
    hungAfter: 2,
  });
  if (a.unchangedSince === null) return null;
  const since = a.unchangedSince;
  const failed = list.filter((e) => e.meta.ok === 0 && Date.parse(e.takenAt) >= since).length;
  return { since, snapshots: a.unchangedSnapshots, failed };
}

export function useSeries({ api, url, data }: ViewProps): Loading {
  const [state, setState] = useState<Loading>({ kind: 'loading', done: 0, total: 0 });
  const jobId = data.jobId ?? url.job;
  useEffect(() => {
    if (data.source === 'demo' && url.demo !== null) {
      setState({ kind: 'ready', inputs: demoSeries(url.demo, url.scenario), note: null, run: null });
      return;
    }
    const single: TimelineInput = { id: data.key, takenAt: data.takenAt, snapshot: data.snapshot };
    if (data.source === 'shared' || jobId === null) {
      setState({
        kind: 'ready',
        inputs: [single],
        note:
          data.source === 'shared'
            ? 'A share link freezes one snapshot: the timeline has a single column.'
            : null,
        run: null,
      });
      return;
    }
    const controller = new AbortController();
    const end = beginBusy();
    (async () => {
      setState({ kind: 'loading', done: 0, total: 0 });
      const list = await api.snapshots(jobId, controller.signal);
      if (controller.signal.aborted) return;
      if (!list.ok) {
        setState({ kind: 'error', error: list.error });
        return;
      }
      const latest = [...list.value].sort((a, b) => a.takenAt.localeCompare(b.takenAt)).slice(-MAX_SNAPSHOTS);
      const inputs: TimelineInput[] = [];
      let done = 0;
      setState({ kind: 'loading', done, total: latest.length });
      // One at a time: snapshots of big jobs are large, and the server reads them from disk.
      for (const entry of latest) {
        const hit =
          entry.id === data.snapshotId
            ? { takenAt: data.takenAt, snapshot: data.snapshot }
            : cachedSnapshot(entry.id);
        if (hit) inputs.push({ id: entry.id, takenAt: hit.takenAt, snapshot: hit.snapshot });
        else {
          const r = await api.snapshot(entry.id, controller.signal);
          if (controller.signal.aborted) return;
          if (!r.ok) {
            setState({ kind: 'error', error: r.error });
            return;
          }
          rememberSnapshot(r.value.id, r.value);
          inputs.push({ id: r.value.id, takenAt: r.value.takenAt, snapshot: r.value.snapshot });
        }
        done++;
        setState({ kind: 'loading', done, total: latest.length });
      }
      if (inputs.length === 0) inputs.push(single);
      const note =
        list.value.length > latest.length
          ? `Showing the latest ${latest.length} of ${list.value.length} snapshots.`
          : null;
      setState({ kind: 'ready', inputs, note, run: unchangedRunOf(list.value) });
    })().finally(end);
    return () => {
      controller.abort();
      end();
    };
  }, [api, data, jobId, url.demo, url.scenario]);
  return state;
}
