// The Fleet view's jobs table and policy form rendered to static markup (node, no DOM): the
// words a person reads in each column, the links to the snapshot behind a verdict ("last seen"
// for an ended job), the history's text alternative, the sort headers, and the form's labels.
// The view against a real server and a real hung job is e2e/test/fleet.e2e.test.ts.
import { DEFAULT_WATCH_POLICY, type JobId, ok, type SnapshotId, SnapshotId as snapshotId } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { FleetJobs } from '../src/fleet/FleetJobs.js';
import { WatchPolicyForm } from '../src/fleet/WatchPolicyForm.js';
import { DEFAULT_STATE, type FleetSort, urlOf } from '../src/url-state.js';
import { fleetJob } from './fleet-fixtures.js';

const NOW = Date.parse('2026-11-27T04:00:00Z');

const link = (job: JobId | null, snap: SnapshotId) => ({
  href: urlOf({ ...DEFAULT_STATE, view: 'matrix', job, snap }),
  onClick: () => {},
});

function render(jobs: Parameters<typeof FleetJobs>[0]['jobs'], sort: FleetSort = 'state'): string {
  return renderToStaticMarkup(
    createElement(FleetJobs, { jobs, sort, onSort: () => {}, snapshotLink: link, now: NOW, timeZone: 'UTC' }),
  );
}

const rowsOf = (html: string) =>
  html
    .split('<tr data-testid="fleet-job-row"')
    .slice(1)
    .map((r) => `<tr ${r}`);
const text = (html: string) =>
  html
    .replace(/<title>[^<]*<\/title>/g, '')
    .replace(/<[^>]+>/g, ' ')
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ')
    .trim();

describe('Fleet jobs table', () => {
  const hung = fleetJob({
    history: [
      { at: '2026-11-27T03:08:00Z', state: 'waiting', snapshotId: null },
      { at: '2026-11-27T03:10:00Z', state: 'hung', snapshotId: snapshotId('s9') },
    ],
  });
  const computing = fleetJob({
    key: 'starter:node03:4242:99',
    kind: 'starter',
    slurmJob: null,
    jobId: null,
    program: 'compute_loop',
    user: null,
    uid: 1001,
    partition: null,
    account: null,
    nodes: ['node03'],
    rankCount: 2,
    state: 'computing',
    since: '2026-11-27T03:30:00Z',
    confidence: null,
    leastProgressed: '',
    diagnosis: '',
    snapshotId: null,
    watch: 'off-by-job',
  });
  const ended = fleetJob({
    key: 'slurm:77',
    slurmJob: '77',
    program: 'halo',
    jobId: 'j7' as JobId,
    endedAt: '2026-11-27T03:40:00Z',
    endReason: 'TIMEOUT',
    snapshotId: snapshotId('s77'),
    leastProgressed: '2',
  });

  it('says each job in words, hung first, ended last', () => {
    const html = render([ended, computing, hung]);
    expect(html).toMatch(/<details data-testid="fleet-ended">[\s\S]*data-ended="true"/);
    const rows = rowsOf(html);
    expect(rows.map(text)).toEqual([
      'ring_ssend Slurm job 1234 alice debug / proj42 4 ranks on node01, node02 watched ' +
        'hung since 03:12 AM (high confidence) 03:12 AM least progressed: ranks 0-3 ' +
        'Deadlock: ranks 0-3 wait for each other in MPI_Ssend ' +
        'last 2 samples: 03:08 AM waiting, 03:10 AM hung open the snapshot',
      'compute_loop pid 4242 on node03 uid 1001 — 2 ranks on node03 ' +
        'not watched: the job opted out (MQD_WATCH=off) computing 03:30 AM — no samples yet no snapshot yet ' +
        // The ended jobs are folded under their own summary, after the live ones.
        'Ended (1 on this page)',
      'halo Slurm job 77 alice debug / proj42 4 ranks on node01, node02 watched ' +
        'ended at 03:40 AM (TIMEOUT) 03:12 AM least progressed: rank 2 ' +
        'Deadlock: ranks 0-3 wait for each other in MPI_Ssend no samples yet last seen',
    ]);
  });

  it('links the program and the snapshot cell to the snapshot behind the verdict', () => {
    const [h, c, e] = rowsOf(render([hung, computing, ended]));
    expect(h).toContain('href="/?view=matrix&amp;job=j1&amp;snap=s9"');
    expect(h?.match(/<a /g)).toHaveLength(2);
    expect(c).not.toContain('<a ');
    expect(e).toMatch(
      /<a href="\/\?view=matrix&amp;job=j7&amp;snap=s77"[^>]*data-testid="fleet-job-snapshot"[^>]*>last seen<\/a>/,
    );
  });

  it('puts user-controlled text in <bdi>, and the states on the row and the history', () => {
    const [h] = rowsOf(render([hung]));
    expect(h).toContain('<bdi class="program-name" data-testid="fleet-job-program">ring_ssend</bdi>');
    expect(h).toContain('<bdi>alice</bdi>');
    expect(h).toMatch(/data-state="hung" data-watch="on" data-ended="false"/);
    expect(h).toContain('data-states="waiting,hung"');
    // The cells are drawn for the eye (hidden from screen readers, which read the text line).
    expect(h).toMatch(/<svg[^>]*aria-hidden="true"/);
    expect(h).toContain('<title>03:10 AM: hung</title>');
  });

  it('has sort headers that say which order is on', () => {
    const html = render([hung], 'since');
    expect(html).toMatch(
      /<th aria-sort="ascending"><button[^>]*data-testid="fleet-sort-since"[^>]*aria-pressed="true"/,
    );
    expect(html).toContain('longest in their state first');
    expect(render([hung])).toMatch(/<th aria-sort="other"><button[^>]*data-testid="fleet-sort-state"/);
  });

  it('shows the stop budget used when it is used up', () => {
    const [b] = rowsOf(render([fleetJob({ watch: 'budget', stopMsThisHour: 1000, stopBudgetMs: 1000 })]));
    expect(text(b ?? '')).toContain('stop budget used up this hour 1,000 of 1,000 ms this hour');
  });
});

describe('Watch policy form', () => {
  it('labels every field and starts from the policy', () => {
    const html = renderToStaticMarkup(
      createElement(WatchPolicyForm, {
        api: { setWatchPolicy: async () => ok(DEFAULT_WATCH_POLICY) },
        policy: { ...DEFAULT_WATCH_POLICY, users: ['alice', 'bob'], programs: ['/scratch/proj/'] },
        onSaved: () => {},
      }),
    );
    const labels = [...html.matchAll(/<label[^>]*>(.*?)<\/label>/g)].map((m) => text(m[1] ?? ''));
    expect(labels).toEqual([
      'Watch on (sample every job the policy covers)',
      'Sample period (s)',
      'Hung after (samples)',
      'Stop budget (ms per rank per hour)',
      'Keep cores of each hung job (written as its owner, in the core directory of each node)',
      'Users',
      'Partitions',
      'Accounts',
      'Programs',
    ]);
    expect(html).toMatch(/data-testid="fleet-policy-users"[^>]*value="alice, bob"/);
    expect(html).toMatch(/data-testid="fleet-policy-programs"[^>]*value="\/scratch\/proj\/"/);
    expect(html).toMatch(/data-testid="fleet-policy-periodSeconds"[^>]*value="180"/);
    expect(html).not.toMatch(/data-testid="fleet-policy-enabled"[^>]*checked/);
    expect(html).not.toMatch(/data-testid="fleet-policy-captureCores"[^>]*checked/);
    expect(text(html)).toContain('Save the policy');
  });
});
