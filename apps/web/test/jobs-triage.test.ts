import type { ApiSnapshotMeta } from '@mqd/model';
import { jobLabel } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import type { JobSummary, SnapshotListEntry } from '../src/api.js';
import { bannerText } from '../src/explanation.js';
import { CHIP_TEXT, historyOf, triageOf } from '../src/jobs/job-triage.js';

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
const job = (state: JobSummary['state']) => ({ state }) as JobSummary;

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

  it('says deadlock when the diagnosis does, whatever the server state', () => {
    const h = historyOf(list);
    expect(triageOf(job('running'), h, 'deadlock').chip).toBe('deadlock');
    expect(triageOf(job('running'), h, null).chip).toBe('hung');
    expect(triageOf(job('running'), h, 'stuck').chip).toBe('stuck');
    expect(triageOf(job('ended'), h, 'deadlock').chip).toBe('ended');
    const moved = historyOf([...list, meta('s4', '2026-01-01T00:00:04Z', { digest: 'b' })]);
    expect(triageOf(job('running'), moved, 'stuck').chip).toBe('progressing');
    const failedLast = historyOf([...list, meta('s5', '2026-01-01T00:00:05Z', { ok: 0, missing: 4 })]);
    expect(triageOf(job('running'), failedLast, null).chip).toBe('not-read');
    expect(triageOf(job('running'), [], null).chip).toBe('no-snapshot');
  });

  it("names the model's stuck verdict with the banner's word, unless the queues moved", () => {
    const t = triageOf(job('running'), historyOf(list), 'stuck');
    expect(t.chip).toBe('stuck');
    const banner = bannerText({ verdict: 'stuck', headline: '', lead: '', summary: '' }).verdict;
    expect(CHIP_TEXT[t.chip]).toBe(banner.toLowerCase());
    expect(t.why).toContain('every rank is blocked');
  });
});
