// The dashboard attaches a Slurm job by its id (issue 16): a real one-node Slurm (Debian's
// munge, slurmctld, slurmd), a hung MPICH fixture submitted with sbatch, the real aggregator
// with its local agent (real reader, real locator: scontrol on this node), and chromium typing
// the job id into the attach form. Every wait is on a condition.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type LocalServe, serveWithLocalAgent } from '@mqd/cli';
import { type SlurmCluster, slurmAvailable, startSlurm } from '@mqd/testkit';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { e2eServerConfig, idle, launchChromium, screenshot, type Watched, watchedPage } from './browser.js';

const WEB = fileURLToPath(new URL('../../apps/web/dist', import.meta.url));
const ADMIN = 'admin-token-for-the-e2e-slurm-0123456789';

let browser: Browser;
let slurm: SlurmCluster | null = null;
let local: LocalServe | null = null;
let page: Watched | null = null;
const savedConf = process.env['SLURM_CONF'];

beforeAll(async () => {
  if (!existsSync(`${WEB}/index.html`))
    throw new Error(`the dashboard is not built (${WEB}): run npm run build`);
  if (!slurmAvailable()) throw new Error('MQD_E_PROVISION: Slurm is not installed; run scripts/provision.sh');
  browser = await launchChromium();
  slurm = await startSlurm();
  // The local agent runs in this process: its scontrol calls find the test cluster this way.
  process.env['SLURM_CONF'] = slurm.conf;
}, 120_000);
afterAll(async () => {
  await page?.page.context().close();
  await local?.close();
  await slurm?.dispose();
  await browser?.close();
  if (savedConf === undefined) delete process.env['SLURM_CONF'];
  else process.env['SLURM_CONF'] = savedConf;
});

describe('a Slurm job in the dashboard', () => {
  it('is attached by its job id, snapshotted, and diagnosed', async () => {
    const s = slurm as SlurmCluster;
    const job = await s.submitFixture({ mpi: 'mpich', fixture: 'wrong_tag' });
    local = await serveWithLocalAgent(e2eServerConfig(ADMIN));
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
    page = await watchedPage(ctx);
    const p = page.page;
    await p.goto(local.served.loginUrl);
    await idle(p);
    await p.getByTestId('attach-slurm').fill(String(job.jobId));
    await p.getByTestId('attach-button').click();
    const row = p.getByTestId('job-row').first();
    await row.waitFor();
    await idle(p);
    expect(await row.innerText()).toContain(`Slurm job ${job.jobId} (wrong_tag)`);
    await screenshot(p, 'slurm-jobs');
    await p.getByTestId('take-snapshot').first().click();
    await p.getByTestId('matrix-canvas').waitFor();
    await idle(p);
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
