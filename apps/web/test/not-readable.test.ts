// A queue the MPI library cannot show (Open MPI's DLL has no unexpected messages) is never drawn
// as 0: Jobs' snapshot summary and Fleet's hung jobs say "not readable", with what it means in a
// title and a legend line. A queue the library showed empty stays 0.
import { type ApiSnapshotMeta, JobId, SnapshotId } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import {
  type HungJob,
  NOT_READABLE_LEGEND,
  notReadableLegend,
  queueCount,
  snapshotListEntry,
  snapshotSummary,
} from '../src/api.js';
import { HungRow } from '../src/fleet/FleetView.js';

const meta = (over: Partial<ApiSnapshotMeta> = {}): ApiSnapshotMeta => ({
  id: SnapshotId('s1'),
  jobId: JobId('j1'),
  takenAt: '2026-11-27T03:10:00.000Z',
  durationMicros: 10,
  createdBy: 'alice',
  partial: false,
  ranks: 4,
  ok: 4,
  errors: 0,
  missing: 0,
  missingRanks: [],
  pendingSends: 0,
  pendingReceives: 4,
  unexpected: 0,
  digest: 'd',
  bytes: 2,
  storedBytes: 22,
  ...over,
});

const words = (f: Readonly<Record<string, unknown>>) =>
  Object.entries(f)
    .map(([k, v]) => `${k}: ${String(v)}`)
    .join(', ');

describe('Jobs: a snapshot summary with a queue the library cannot show', () => {
  it('Open MPI-like (unexpected not readable): "unexpected: not readable", with the legend line', () => {
    const s = snapshotSummary(meta({ unreadable: ['unexpected'] }));
    expect(words(s)).toBe(
      'ranks: 4, ok: 4, errors: 0, missing: 0, pending sends: 0, pending receives: 4, unexpected: not readable',
    );
    expect(notReadableLegend([s])).toBe(
      "not readable: this MPI library's DLL cannot show the queue; its count is unknown, not 0",
    );
  });

  it('MPICH-like (unexpected shown, empty) and a snapshot stored without the field: "unexpected: 0", no legend', () => {
    for (const m of [meta({ unreadable: [] }), meta()]) {
      const s = snapshotListEntry(m).summary;
      expect(s.unexpected).toBe(0);
      expect(notReadableLegend([s])).toBeNull();
    }
    expect(
      notReadableLegend([snapshotSummary(meta()), snapshotSummary(meta({ unreadable: ['unexpected'] }))]),
    ).toBe(NOT_READABLE_LEGEND);
  });

  it('only the kinds named are not readable', () => {
    expect(queueCount(3, 'sends', ['unexpected'])).toBe(3);
    expect(queueCount(0, 'unexpected', ['unexpected'])).toBe('not readable');
    expect(queueCount(0, 'unexpected', undefined)).toBe(0);
  });
});

describe('Fleet: the hung jobs row', () => {
  const hung = (over: Partial<HungJob> = {}): HungJob => ({
    jobId: JobId('j1'),
    since: '2026-11-27T03:10:00.000Z',
    snapshots: 3,
    digest: 'd',
    pendingSends: 0,
    pendingReceives: 4,
    unexpected: 0,
    lastSnapshotId: SnapshotId('s1'),
    ...over,
  });
  const row = (h: HungJob) =>
    renderToStaticMarkup(
      createElement(
        'table',
        null,
        createElement(
          'tbody',
          null,
          createElement(HungRow, {
            job: h,
            jobLink: () => ({ href: '#', onClick: () => {} }),
            snapLink: () => ({ href: '#', onClick: () => {} }),
          }),
        ),
      ),
    );
  const cells = (html: string) => [...html.matchAll(/<td[^>]*>([^<]*)</g)].map((m) => m[1]);

  it('Open MPI-like: "not readable" in the Unexpected column, with what it means as its title', () => {
    const html = row(hung({ unreadable: ['unexpected'] }));
    expect(cells(html).slice(3, 6)).toEqual(['0', '4', 'not readable']);
    expect(html).toContain(
      `<td title="not readable by this MPI library&#x27;s DLL, not 0">not readable</td>`,
    );
  });

  it('MPICH-like: 0 in the Unexpected column, no mark', () => {
    const html = row(hung());
    expect(cells(html).slice(3, 6)).toEqual(['0', '4', '0']);
    expect(html).not.toContain('not readable');
  });
});
