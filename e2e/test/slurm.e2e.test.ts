// The dashboard attaches a Slurm job by its id: a real one-node Slurm (Debian's
// munge, slurmctld, slurmd), a hung MPICH fixture submitted with sbatch, the real aggregator
// with its local agent (real reader, real locator: scontrol on this node), and chromium typing
// the job id into the attach form. Every wait is on a condition.
import { type SlurmCluster, slurmAvailable, startSlurm } from '@mqd/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { screenshot } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const ADMIN = 'admin-token-for-the-e2e-slurm-0123456789';

const rig = e2eRig({ adminToken: ADMIN });
let slurm: SlurmCluster | null = null;
const savedConf = process.env['SLURM_CONF'];

beforeAll(async () => {
  if (!slurmAvailable()) throw new Error('MQD_E_PROVISION: Slurm is not installed; run scripts/provision.sh');
  slurm = await startSlurm();
  // The local agent runs in this process: its scontrol calls find the test cluster this way.
  process.env['SLURM_CONF'] = slurm.conf;
}, 120_000);
afterAll(async () => {
  await slurm?.dispose();
  if (savedConf === undefined) delete process.env['SLURM_CONF'];
  else process.env['SLURM_CONF'] = savedConf;
});

describe('a Slurm job in the dashboard', () => {
  it('is attached by its job id, snapshotted, and diagnosed', async () => {
    const s = slurm as SlurmCluster;
    const job = await s.submitFixture({ mpi: 'mpich', fixture: 'wrong_tag' });
    const local = await rig.serveLocal();
    const page = await rig.openPage(local.served.loginUrl);
    const p = page.page;
    await attach(p, { slurmJob: job.jobId }, 'slurm');
    const row = p.getByTestId('job-row').first();
    expect(await row.innerText()).toContain(`Slurm job ${job.jobId} (wrong_tag)`);
    await screenshot(p, 'slurm-jobs');
    await takeSnapshot(p);
    const diagnosis = p.getByTestId('diagnosis');
    await expect.poll(async () => (await diagnosis.textContent()) ?? '').toMatch(/deadlock/i);
    await screenshot(p, 'slurm-matrix');
    // Every rank of the job was read: the snapshot's ranks are exactly the sbatch'ed ones.
    const api = await fetch(`${local.served.url}/api/jobs`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    const jobs = (await api.json()) as { jobs: Array<{ method: string; rankCount: number }> };
    expect(jobs.jobs.map((j) => [j.method, j.rankCount])).toEqual([['slurm', job.ranks.length]]);
    expect(page.errors).toEqual([]);
  });
});
