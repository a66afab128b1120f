// One clock and one verdict, read in Debian's chromium: real jobs nobody attaches (wrong_tag:
// a deadlock; compute_loop: every rank computes) under the hang watch, then 40 snapshots of the
// deadlock taken through the API. The banner, Jobs and Fleet say the same state word for each
// job; the timeline, Jobs and Fleet the same "since" for the deadlock, counted from the first
// snapshot of its run, not a window; and when the admin's stop budget pauses the watch, the
// deadlock still reads "hung since ..." with "sampling paused until ...". Every wait is on a
// condition, none on time.
import { dirname } from 'node:path';
import { loadConfig, type ServerConfig } from '@mqd/server';
import { MPI_NAMES } from '@mqd/testkit';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { idle, screenshot, WEB_ROOT } from './browser.js';
import { e2eRig } from './rig.js';

const ADMIN_TOKEN = 'admin-token-for-the-e2e-one-truth-tests-0123456789abcdef';
const rig = e2eRig({ adminToken: ADMIN_TOKEN });
const auth = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };

/** Discovery, two samples 2 s apart and the reload: well under this on an idle machine. */
const VERDICT_TIMEOUT_MS = 120_000;
const SNAPSHOTS = 40;

/** The hang watch on, sampling only the programs under `programs` (the test's own fixtures). */
function watchConfig(programs: string): ServerConfig {
  const cfg = loadConfig({
    env: {},
    argv: [
      '--watch-programs',
      programs,
      '--watch',
      'on',
      '--watch-period',
      '2',
      '--watch-hung-after',
      '2',
      '--watch-stop-budget',
      '60000',
      // 40 snapshots in a row are one test's, not a flood.
      '--rate-limit-max',
      '1000',
    ],
    overrides: {
      port: 0,
      host: '127.0.0.1',
      dataDir: ':memory:',
      adminToken: ADMIN_TOKEN,
      webRoot: WEB_ROOT,
    },
  });
  if (!cfg.ok) throw new Error(cfg.error.message);
  return cfg.value;
}

const fleetRow = (page: Page, starterPid: number) =>
  page.locator(`[data-testid="fleet-job-row"][data-key*=":${starterPid}:"]`);

async function text(page: Page, selector: string): Promise<string> {
  return (await page.locator(selector).first().innerText()).trim();
}

describe.each(MPI_NAMES.slice(0, 1))('%s: one clock and one verdict on every screen', (mpi) => {
  it('the same verdict word and the same since in banner, Jobs, Fleet and timeline; a budget pause keeps the verdict', async () => {
    const hung = await rig.launch({ mpi, fixture: 'wrong_tag', np: 4 });
    const computing = await rig.launch({ mpi, fixture: 'compute_loop', np: 2, waitFor: 'ready' });
    const local = await rig.serveLocal(watchConfig(`${dirname(hung.binary)}/`));
    const base = local.served.url;
    const { page } = await rig.openPage(local.served.loginUrl);

    // Fleet: the watch's verdicts arrive by themselves.
    await page.goto(`${base}/?view=fleet`);
    const hungRow = fleetRow(page, hung.starterPid);
    const computeRow = fleetRow(page, computing.starterPid);
    await hungRow.and(page.locator('[data-state="hung"]')).waitFor({ timeout: VERDICT_TIMEOUT_MS });
    await computeRow.and(page.locator('[data-state="computing"]')).waitFor({ timeout: VERDICT_TIMEOUT_MS });
    await idle(page);
    const fleetHung = (await hungRow.getByTestId('fleet-job-state').innerText()).trim();
    const since = /^hung since (.+) \(high confidence\)$/.exec(fleetHung)?.[1] ?? '';
    expect(since, fleetHung).not.toBe('');
    const sinceRe = since.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    expect((await computeRow.getByTestId('fleet-job-state').innerText()).trim()).toBe('computing');

    // The jobs the watch registered, by id, and 40 snapshots of the deadlock.
    const fleet = (await (await fetch(`${base}/api/fleet`, { headers: auth })).json()) as {
      jobs: { key: string; jobId: string | null }[];
    };
    const idOf = (pid: number) => fleet.jobs.find((j) => j.key.includes(`:${pid}:`))?.jobId ?? null;
    const hungId = idOf(hung.starterPid);
    const computeId = idOf(computing.starterPid);
    expect(hungId).not.toBeNull();
    expect(computeId).not.toBeNull();
    for (let i = 0; i < SNAPSHOTS; i++) {
      const r = await fetch(`${base}/api/jobs/${hungId}/snapshots`, {
        method: 'POST',
        headers: { authorization: auth.authorization },
      });
      expect(r.status, await r.clone().text()).toBe(201);
    }

    // Jobs: hung first, the same words and the same since; the diagnosis on the row.
    await page.goto(`${base}/?view=jobs`);
    await page.getByTestId('jobs-table').waitFor();
    await idle(page);
    const jobsHung = page.locator(`[data-testid="job-row"][data-job="${hungId}"]`);
    const jobsCompute = page.locator(`[data-testid="job-row"][data-job="${computeId}"]`);
    expect(await jobsHung.getByTestId('job-verdict').innerText()).toBe(`hung since ${since}`);
    expect(await jobsCompute.getByTestId('job-verdict').innerText()).toMatch(/^computing since /);
    expect(await jobsHung.getByTestId('job-diagnosis').innerText()).toMatch(/^Deadlock: /);
    expect(await page.getByTestId('job-row').first().getAttribute('data-state')).toBe('hung');
    // A search by program name keeps only wrong_tag jobs (other runs' may share the node), by id
    // only this one; the search stays in the URL.
    await page.getByTestId('jobs-search').fill('wrong_tag');
    await idle(page);
    expect(new URL(page.url()).searchParams.get('jq')).toBe('wrong_tag');
    const programs = await page.getByTestId('job-program').allInnerTexts();
    expect(programs.length).toBeGreaterThan(0);
    expect(programs.every((p) => p === 'wrong_tag')).toBe(true);
    expect(await jobsHung.count()).toBe(1);
    await page.getByTestId('jobs-search').fill(String(hungId));
    await idle(page);
    expect(await page.getByTestId('job-row').count()).toBe(1);
    await screenshot(page, `${mpi}-one-truth-jobs`);

    // The timeline counts the whole run, not its 24-snapshot window.
    const list = (await (await fetch(`${base}/api/jobs/${hungId}/snapshots`, { headers: auth })).json()) as {
      snapshots: { id: string; takenAt: string }[];
    };
    expect(list.snapshots.length).toBeGreaterThan(SNAPSHOTS);
    const newest = [...list.snapshots].sort((a, b) => b.takenAt.localeCompare(a.takenAt))[0]?.id ?? '';
    await page.goto(`${base}/?view=timeline&job=${hungId}&snap=${newest}`);
    await page.getByTestId('timeline-headline').waitFor({ timeout: VERDICT_TIMEOUT_MS });
    await idle(page);
    const headline = await text(page, '[data-testid="timeline-headline"]');
    const m = /^No change since (.+) \(([\d,]+) snapshots\); ranks 0-3 wait\.$/.exec(headline);
    expect(m?.[1], headline).toBe(since);
    expect(Number((m?.[2] ?? '0').replace(/,/g, ''))).toBeGreaterThan(SNAPSHOTS);

    // The banner says the same state word as Jobs and Fleet, for each job.
    await page.goto(`${base}/?view=matrix&job=${hungId}&snap=${newest}`);
    await page.getByTestId('diagnosis-state').waitFor({ timeout: VERDICT_TIMEOUT_MS });
    expect(await text(page, '[data-testid="diagnosis-state"]')).toBe('hung');
    expect(await text(page, '[data-testid="diagnosis-verdict"]')).toBe('Deadlock');
    await page.goto(`${base}/?view=fleet`);
    await computeRow.getByTestId('fleet-job-snapshot').click();
    await page.getByTestId('diagnosis-state').waitFor({ timeout: VERDICT_TIMEOUT_MS });
    expect(await text(page, '[data-testid="diagnosis-state"]')).toBe('computing');

    // The admin's stop budget runs out: the watch keeps its verdict and says until when.
    const policy = (await (await fetch(`${base}/api/admin/watch`, { headers: auth })).json()) as Record<
      string,
      unknown
    >;
    const set = await fetch(`${base}/api/admin/watch`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ ...policy, stopBudgetMsPerRankHour: 1 }),
    });
    expect(set.status, await set.clone().text()).toBe(200);
    await page.goto(`${base}/?view=fleet`);
    await hungRow.and(page.locator('[data-watch="budget"]')).waitFor({ timeout: VERDICT_TIMEOUT_MS });
    // Two more samples in budget mode: before, the verdict was forgotten after these.
    const samplesNow = async () =>
      (
        (await (await fetch(`${base}/api/fleet`, { headers: auth })).json()) as {
          jobs: { key: string; samples: number }[];
        }
      ).jobs.find((j) => j.key.includes(`:${hung.starterPid}:`))?.samples ?? 0;
    const at = await samplesNow();
    await expect.poll(samplesNow, { timeout: VERDICT_TIMEOUT_MS }).toBeGreaterThanOrEqual(at + 3);
    await page.reload();
    await hungRow.and(page.locator('[data-state="hung"]')).waitFor({ timeout: VERDICT_TIMEOUT_MS });
    await idle(page);
    await screenshot(page, `${mpi}-one-truth-budget`);
    expect((await hungRow.getByTestId('fleet-job-state').innerText()).trim()).toMatch(
      new RegExp(`^hung since ${sinceRe} \\(high confidence\\) · sampling paused until .+$`),
    );
    await page.goto(`${base}/?view=jobs`);
    await page.getByTestId('jobs-table').waitFor();
    await idle(page);
    expect(await jobsHung.getByTestId('job-verdict').innerText()).toMatch(
      new RegExp(`^hung since ${sinceRe} · sampling paused until .+$`),
    );
  });
});
