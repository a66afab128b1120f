// The dashboard opens a hung job's core files as a job (issue 17): a real hung Open MPI
// fixture (wrong_tag) is attached and snapshotted live in chromium, Debian's gdb writes one core
// per rank (gcore), the job is killed, and the real aggregator (started with --core-dir on the
// cores' parent directory; its local agent runs the real locator and reader) opens the
// directory typed into the attach form. The diagnosis must be the live job's, and the header
// must say the snapshot was read from core files. Every wait is on a condition.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type LocalServe, serveWithLocalAgent } from '@mqd/cli';
import { loadConfig } from '@mqd/server';
import { disposeAll, type FixtureJob, launchFixture } from '@mqd/testkit';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idle, launchChromium, screenshot, type Watched, WEB_ROOT, watchedPage } from './browser.js';

const WEB = fileURLToPath(new URL('../../apps/web/dist', import.meta.url));
const ADMIN = 'admin-token-for-the-e2e-cores-0123456789';

let browser: Browser;
let local: LocalServe | null = null;
let job: FixtureJob | null = null;
let page: Watched | null = null;
const root = mkdtempSync('/tmp/mqd-e2e-cores-');

beforeAll(async () => {
  if (!existsSync(`${WEB}/index.html`))
    throw new Error(`the dashboard is not built (${WEB}): run npx turbo run build`);
  if (!existsSync('/usr/bin/gdb'))
    throw new Error('MQD_E_PROVISION: gdb is not installed; run scripts/provision.sh');
  browser = await launchChromium();
});
afterAll(async () => {
  await page?.page.context().close();
  await local?.close();
  await job?.dispose();
  await disposeAll();
  await browser?.close();
  rmSync(root, { recursive: true, force: true });
});

/** Takes a snapshot of the first job in the list and returns the diagnosis it shows. */
async function snapshotDiagnosis(p: Page): Promise<string> {
  await p.getByTestId('take-snapshot').first().click();
  await p.getByTestId('matrix-canvas').waitFor();
  await idle(p);
  const diagnosis = p.getByTestId('diagnosis');
  await expect.poll(async () => (await diagnosis.textContent()) ?? '').toMatch(/deadlock/i);
  return (await diagnosis.textContent()) ?? '';
}

describe('a job of core files in the dashboard', () => {
  it('is opened from a core directory and diagnosed as the live job was', async () => {
    job = await launchFixture({ mpi: 'openmpi', fixture: 'wrong_tag', np: 2 });
    const cfg = loadConfig({
      env: {},
      argv: ['--core-dir', root],
      overrides: { port: 0, host: '127.0.0.1', dataDir: ':memory:', adminToken: ADMIN, webRoot: WEB_ROOT },
    });
    if (!cfg.ok) throw new Error(cfg.error.message);
    local = await serveWithLocalAgent(cfg.value);
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
    page = await watchedPage(ctx);
    const p = page.page;
    await p.goto(local.served.loginUrl);
    await idle(p);

    // The live job first: its diagnosis is what the cores must give.
    await p.getByTestId('attach-pid').fill(String(job.starterPid));
    await p.getByTestId('attach-button').click();
    await p.getByTestId('job-row').first().waitFor();
    await idle(p);
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
    job = null;

    await p.goto(`${local.served.url}/`);
    await idle(p);
    await p.getByTestId('attach-cores').fill(dir);
    await p.getByTestId('attach-button').click();
    const coreRow = p.getByTestId('job-row').filter({ has: p.getByTestId('job-cores') });
    await coreRow.waitFor();
    await idle(p);
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
