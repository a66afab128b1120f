// The dashboard opens a hung job's core files as a job: a real hung Open MPI
// fixture (wrong_tag) is attached and snapshotted live in chromium, Debian's gdb writes one core
// per rank (gcore), the job is killed, and the real aggregator (started with --core-dir on the
// cores' parent directory; its local agent runs the real locator and reader) opens the
// directory typed into the attach form. The diagnosis must be the live job's, and the header
// must say the snapshot was read from core files. Every wait is on a condition.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '@mqd/server';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idle, screenshot, WEB_ROOT } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const ADMIN = 'admin-token-for-the-e2e-cores-0123456789';

const rig = e2eRig({ adminToken: ADMIN });
const root = mkdtempSync('/tmp/mqd-e2e-cores-');

beforeAll(() => {
  if (!existsSync('/usr/bin/gdb'))
    throw new Error('MQD_E_PROVISION: gdb is not installed; run scripts/provision.sh');
});
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

/** Takes a snapshot of the first job in the list and returns the diagnosis it shows. */
async function snapshotDiagnosis(p: Page): Promise<string> {
  await takeSnapshot(p);
  const diagnosis = p.getByTestId('diagnosis');
  await expect.poll(async () => (await diagnosis.textContent()) ?? '').toMatch(/deadlock/i);
  return (await diagnosis.textContent()) ?? '';
}

describe('a job of core files in the dashboard', () => {
  it('is opened from a core directory and diagnosed as the live job was', async () => {
    const job = await rig.launch({ mpi: 'openmpi', fixture: 'wrong_tag', np: 2 });
    const cfg = loadConfig({
      env: {},
      argv: ['--core-dir', root],
      overrides: { port: 0, host: '127.0.0.1', dataDir: ':memory:', adminToken: ADMIN, webRoot: WEB_ROOT },
    });
    if (!cfg.ok) throw new Error(cfg.error.message);
    const local = await rig.serveLocal(cfg.value);
    const page = await rig.openPage(local.served.loginUrl);
    const p = page.page;

    // The live job first: its diagnosis is what the cores must give.
    await attach(p, { starterPid: job.starterPid }, 'cores-live');
    const liveDiagnosis = await snapshotDiagnosis(p);
    expect(await p.getByTestId('snapshot-source').count()).toBe(0);

    // One core per rank with gdb, then the job is gone.
    const dir = join(root, 'wrong_tag');
    mkdirSync(dir);
    for (const r of job.ranks) {
      execFileSync(
        'gdb',
        ['-batch', '-nx', '-p', String(r.pid), '-ex', `gcore ${join(dir, `rank-${r.rank}.core`)}`],
        {
          stdio: 'ignore',
          timeout: 120_000,
        },
      );
    }
    await job.dispose();

    await p.goto(`${local.served.url}/`);
    await idle(p);
    const coreRow = p.getByTestId('job-row').filter({ has: p.getByTestId('job-cores') });
    await attach(p, { coresDir: dir }, 'cores', coreRow);
    expect(await coreRow.innerText()).toContain(dir);
    await screenshot(p, 'cores-jobs');
    await coreRow.getByTestId('take-snapshot').click();
    await p.getByTestId('matrix-canvas').waitFor();
    await idle(p);
    const diagnosis = p.getByTestId('diagnosis');
    await expect.poll(async () => (await diagnosis.textContent()) ?? '').toMatch(/deadlock/i);
    expect(await diagnosis.textContent()).toBe(liveDiagnosis);
    const source = p.getByTestId('snapshot-source');
    await source.waitFor();
    expect(await source.textContent()).toMatch(/read from 2 core files \(signal /);
    // Shown whole, inside the window, whatever the badge beside it has to cut.
    const box = await source.boundingBox();
    expect(box !== null && box.x >= 0 && box.x + box.width <= 1280).toBe(true);
    await screenshot(p, 'cores-matrix');
    expect(page.errors).toEqual([]);
  });
});
