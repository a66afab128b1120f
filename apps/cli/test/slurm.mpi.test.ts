// Jobs by Slurm id, on a real one-node Slurm (Debian's slurmctld, slurmd, munge;
// packages/testkit/src/slurm.ts): a hung fixture submitted with `sbatch` (the MPI's own starter
// inside the allocation), then `mqd ranks --slurm JOBID` and `mqd snapshot --slurm JOBID` —
// the built CLI, as a user runs it — find every rank from Slurm and read exactly the queues the
// same fixture gives outside Slurm (the golden snapshots, fixtures/golden/).
import { readFileSync } from 'node:fs';
import type { JobSnapshot } from '@mqd/model';
import {
  goldenFile,
  MPI_NAMES,
  normaliseSnapshot,
  type SlurmCluster,
  slurmAvailable,
  startSlurm,
} from '@mqd/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mqd } from './run-mqd.js';

let slurm: SlurmCluster | null = null;

beforeAll(async () => {
  if (!slurmAvailable()) throw new Error('MQD_E_PROVISION: Slurm is not installed; run scripts/provision.sh');
  slurm = await startSlurm();
}, 60_000);
afterAll(async () => {
  await slurm?.dispose();
});

describe.each(MPI_NAMES)('%s under Slurm (sbatch + the MPI starter)', (mpi) => {
  it('mqd ranks and mqd snapshot --slurm JOBID read every rank, with the queues of the fixture', async () => {
    const s = slurm as SlurmCluster;
    const job = await s.submitFixture({ mpi, fixture: 'wrong_tag' });
    try {
      const ranks = await mqd(['ranks', '--slurm', String(job.jobId), '--json'], slurm?.env);
      expect(ranks.err).toBe('');
      const listed = JSON.parse(ranks.out) as { method: string; ranks: Array<{ rank: number; pid: number }> };
      expect(listed.method).toBe('slurm');
      expect(listed.ranks.map((r) => [r.rank, r.pid])).toEqual(job.ranks.map((r) => [r.rank, r.pid]));

      const snap = await mqd(['snapshot', '--slurm', String(job.jobId), '--json'], slurm?.env);
      expect(snap.code, snap.err).toBe(0);
      const got = normaliseSnapshot(JSON.parse(snap.out) as JobSnapshot);
      const golden = JSON.parse(
        readFileSync(goldenFile(mpi, 'wrong_tag', 'snapshot.json'), 'utf8'),
      ) as JobSnapshot;
      expect(got.ranks.map((r) => r.state.kind)).toEqual(['ok', 'ok', 'ok', 'ok']);
      expect(got.ranks.map((r) => [r.rank, r.communicators])).toEqual(
        golden.ranks.map((r) => [r.rank, r.communicators]),
      );
      // The text form names the job as Slurm knows it.
      const text = await mqd(['snapshot', '--slurm', String(job.jobId)], slurm?.env);
      expect(text.out).toMatch(new RegExp(`^Slurm job ${job.jobId} \\(wrong_tag\\) of root \\(uid 0\\)`));
    } finally {
      s.run('scancel', ['--signal=KILL', String(job.jobId)]);
    }
  });
});

describe('bad Slurm job ids', () => {
  it('a job that does not exist is a coded error, a malformed id a usage error', async () => {
    const unknown = await mqd(['snapshot', '--slurm', '999999'], slurm?.env);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toMatch(/^MQD_E_SLURM_JOB: .*Invalid job id/);
    const bad = await mqd(['snapshot', '--slurm', '12;rm'], slurm?.env);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/^MQD_E_USAGE: --slurm takes JOBID/);
  });
});
