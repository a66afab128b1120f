import type { ApiSnapshotMeta } from '@mqd/model';
import { JobId, jobLabel, ok, Pid } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import type { Api, JobSummary, JobsPageRequest, SnapshotListEntry } from '../src/api.js';
import {
  ENDED_PAGE,
  historyOf,
  loadJobs,
  matchesQuery,
  stateText,
  triageOrder,
} from '../src/jobs/job-triage.js';

describe('jobLabel', () => {
  it('names the program a starter runs, not the starter', () => {
    expect(jobLabel('mpirun -np 4 --mca btl self,vader --oversubscribe ./wrong_tag 3')).toEqual({
      program: 'wrong_tag',
      args: '3',
      launcher: 'mpirun',
      slurmJob: null,
    });
    expect(jobLabel('/usr/bin/mpiexec.hydra -n 2 -genv A B /opt/app/bin/solver --steps=10').program).toBe(
      'solver',
    );
    expect(jobLabel('srun --ntasks=8 -p debug ./halo').program).toBe('halo');
    expect(jobLabel('./ring_ssend').program).toBe('ring_ssend');
  });

  it("uses Slurm's job name when the job was attached by its Slurm id", () => {
    expect(jobLabel('Slurm job 1234 (wrong_tag) /home/u/run.sh')).toEqual({
      program: 'wrong_tag',
      args: '',
      launcher: '',
      slurmJob: '1234',
    });
    expect(jobLabel('Slurm job 77.0 () srun ./halo 5')).toMatchObject({ program: 'halo', slurmJob: '77.0' });
  });
});

const meta = (id: string, at: string, over: Partial<ApiSnapshotMeta>): SnapshotListEntry => {
  const m = {
    id,
    jobId: 'j1',
    takenAt: at,
    durationMicros: 1,
    createdBy: 'admin',
    partial: false,
    ranks: 4,
    ok: 4,
    errors: 0,
    missing: 0,
    missingRanks: [],
    pendingSends: 0,
    pendingReceives: 2,
    unexpected: 0,
    digest: 'a',
    bytes: 1,
    storedBytes: 1,
    ...over,
  } as ApiSnapshotMeta;
  return { id: m.id, takenAt: m.takenAt, summary: {}, meta: m };
};
const job = (over: Partial<JobSummary>): JobSummary => ({
  id: JobId('j1'),
  starterPid: Pid(100),
  host: 'node01',
  uid: 1000,
  command: 'mpirun -np 4 ./ring',
  state: 'waiting',
  user: 'alice',
  nodes: ['node01'],
  since: null,
  sinceSnapshots: 0,
  unchangedSince: null,
  unchangedSnapshots: 0,
  diagnosis: '',
  pausedUntil: null,
  lastSnapshotAt: null,
  ranks: 4,
  coresDir: null,
  ...over,
});

describe('job triage', () => {
  const list = [
    meta('s1', '2026-01-01T00:00:01Z', { digest: 'a' }),
    meta('s3', '2026-01-01T00:00:03Z', { digest: 'a', ok: 2, missing: 2, partial: true }),
    meta('s2', '2026-01-01T00:00:02Z', { ok: 0, errors: 4, digest: 'x' }),
  ];

  it('marks failed reads and compares each read with the previous good one', () => {
    const h = historyOf(list);
    expect(h.map((d) => [d.id, d.read, d.changed])).toEqual([
      ['s1', 'ok', null],
      ['s2', 'failed', null],
      ['s3', 'partial', false],
    ]);
  });

  it('says the server’s state in the one vocabulary, with since when and a budget pause', () => {
    const at = '2026-01-01T22:47:00Z';
    const now = Date.parse('2026-01-01T23:00:00Z');
    expect(stateText(job({ state: 'hung', since: at }), now, 'UTC', 'en-GB')).toBe('hung since 22:47');
    expect(stateText(job({ state: 'computing', since: at }), now, 'UTC', 'en-US')).toBe(
      'computing since 10:47 PM',
    );
    expect(
      stateText(job({ state: 'hung', since: at, pausedUntil: '2026-01-01T23:47:00Z' }), now, 'UTC', 'en-GB'),
    ).toBe('hung since 22:47 · sampling paused until 23:47');
    expect(stateText(job({ state: 'ended', since: at }), now, 'UTC')).toBe('ended');
    expect(stateText(job({ state: 'unknown' }), now, 'UTC')).toBe('not known yet');
  });

  it('opens with live hung jobs first, then live by state, ended apart', () => {
    const jobs = [
      job({ id: JobId('e2'), state: 'ended', lastSnapshotAt: '2026-01-01T00:00:05Z' }),
      job({ id: JobId('c1'), state: 'computing' }),
      job({ id: JobId('h2'), state: 'hung', since: '2026-01-01T00:00:09Z' }),
      job({ id: JobId('w1'), state: 'waiting' }),
      job({ id: JobId('h1'), state: 'hung', since: '2026-01-01T00:00:01Z' }),
      job({ id: JobId('e1'), state: 'ended', lastSnapshotAt: '2026-01-01T00:00:09Z' }),
    ];
    const { live, ended } = triageOrder(jobs);
    expect(live.map((j) => j.id)).toEqual(['h1', 'h2', 'w1', 'c1']);
    // Ended ones keep the server's order (newest ended first), page after page.
    expect(ended.map((j) => j.id)).toEqual(['e2', 'e1']);
  });

  it('loads every live job and the newest ended ones a page at a time, each once', async () => {
    // A synthetic server: 2 live jobs and 2,500 ended ones, newest ended first, paged as GET /api/jobs.
    const live = [job({ id: JobId('h1'), state: 'hung' }), job({ id: JobId('w1'), state: 'waiting' })];
    const ended = Array.from({ length: 2500 }, (_, i) => job({ id: JobId(`e${i}`), state: 'ended' }));
    const asked: JobsPageRequest[] = [];
    const api = {
      jobsPage: async (p: JobsPageRequest) => {
        asked.push(p);
        const hits = ended.filter((j) => p.q === undefined || j.id.includes(p.q.trim()));
        return ok({
          jobs: [...live, ...hits.slice(p.endedOffset, p.endedOffset + p.endedLimit)],
          endedTotal: hits.length,
          endedOffset: p.endedOffset,
        });
      },
    } as unknown as Api;
    const first = await loadJobs(api, '', ENDED_PAGE);
    if (!first.ok) throw new Error(first.error.message);
    expect(first.value.endedTotal).toBe(2500);
    expect(first.value.jobs.map((j) => j.id).slice(0, 4)).toEqual(['h1', 'w1', 'e0', 'e1']);
    expect(first.value.jobs).toHaveLength(2 + ENDED_PAGE);
    asked.length = 0;
    const many = await loadJobs(api, '', 1500);
    if (!many.ok) throw new Error(many.error.message);
    expect(asked.map((p) => [p.endedOffset, p.endedLimit])).toEqual([
      [0, 1000],
      [1000, 500],
    ]);
    expect(new Set(many.value.jobs.map((j) => j.id)).size).toBe(2 + 1500);
    const found = await loadJobs(api, ' e2499 ', ENDED_PAGE);
    if (!found.ok) throw new Error(found.error.message);
    expect(asked.at(-1)?.q).toBe(' e2499 ');
    expect(found.value.endedTotal).toBe(1);
    expect(found.value.jobs.map((j) => j.id)).toEqual(['h1', 'w1', 'e2499']);
  });

  it('searches program, user, job id and node, every word', () => {
    const jobs = [
      job({ id: JobId('a1'), command: 'mpirun -np 4 ./halo', user: 'bob', nodes: ['n07'] }),
      job({ id: JobId('b2'), command: 'srun ./ring_ssend', user: 'alice', nodes: ['n01', 'n02'] }),
    ];
    const ids = (q: string) => triageOrder(jobs, q).live.map((j) => j.id);
    expect(ids('halo')).toEqual(['a1']);
    expect(ids('ALICE')).toEqual(['b2']);
    expect(ids('b2')).toEqual(['b2']);
    expect(ids('n02')).toEqual(['b2']);
    expect(ids('ring bob')).toEqual([]);
    expect(ids('')).toEqual(['a1', 'b2']);
    expect(matchesQuery(jobs[0] as JobSummary, 'uid 1000')).toBe(true);
  });
});
