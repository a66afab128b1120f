// Evidence is kept while it matters, in Debian's chromium against the real aggregator: a job's
// first snapshot of a long run of equal ones still opens after 150 more, and a link to a snapshot
// retention removed, with `job=`, opens the job's newest snapshot with a notice saying so. The
// job is simulated (the server's fake locator and a fixed reader serving the model's 4-rank ring
// deadlock), so its 150 snapshots are real ones taken through the API in seconds.
import { type JobId, syntheticRingDeadlock } from '@mqd/model';
import { createFakeLocator, createFixedReader, type Served, serve } from '@mqd/server';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { e2eServerConfig, idle, screenshot, type Watched } from './browser.js';
import { apiAs, e2eRig } from './rig.js';

const ADMIN = 'admin-token-for-the-e2e-evidence-0123456789';
const STARTER = 4343;
/** Snapshots kept per job past the first of each run (small, so 150 go well past it). */
const KEEP = 5;

const rig = e2eRig({ adminToken: ADMIN });

interface Setup {
  readonly s: Served;
  readonly origin: string;
  readonly jobId: JobId;
  api(method: 'GET' | 'POST', path: string, body?: object): Promise<unknown>;
}

async function setup(): Promise<Setup> {
  const s = await serve({
    // Every snapshot through the API: the rate limit is not what this test is about.
    config: { ...e2eServerConfig(ADMIN), maxSnapshotsPerJob: KEEP, rateLimitMax: 10_000 },
    reader: createFixedReader(syntheticRingDeadlock({ ranks: 4, style: 'openmpi' })),
    locator: createFakeLocator({
      starterPid: STARTER,
      uid: process.getuid?.() ?? 0,
      command: 'ring',
      hosts: ['node-a'],
      ranksPerHost: 4,
    }),
    localHost: 'node-a',
    print: () => {},
    logger: false,
  });
  rig.cleanup(() => s.close());
  const api = await apiAs(s.url, ADMIN);
  await expect
    .poll(async () => ((await api('GET', '/api/health')) as { agents: number }).agents, { timeout: 20_000 })
    .toBe(1);
  const attached = (await api('POST', '/api/jobs/attach', { host: 'node-a', starterPid: STARTER })) as {
    job?: { id: string };
    id?: string;
  };
  const id = attached.job?.id ?? attached.id;
  if (id === undefined) throw new Error(`attach answered no job id: ${JSON.stringify(attached)}`);
  return { s, origin: new URL(s.url).origin, jobId: id as JobId, api };
}

/** Takes `n` snapshots of the job through the API, in turn; their ids, oldest first. */
async function takeSnapshots(x: Setup, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = (await x.api('POST', `/api/jobs/${encodeURIComponent(x.jobId)}/snapshots`)) as {
      id?: string;
      snapshot?: { id?: string };
    };
    const id = r.id ?? r.snapshot?.id;
    if (id === undefined) throw new Error(`the snapshot answer has no id: ${JSON.stringify(r)}`);
    ids.push(id);
  }
  return ids;
}

async function storedIds(x: Setup): Promise<string[]> {
  const r = (await x.api('GET', `/api/jobs/${encodeURIComponent(x.jobId)}/snapshots`)) as {
    snapshots: { id: string }[];
  };
  return r.snapshots.map((m) => m.id);
}

async function openPage(x: Setup, path: string): Promise<Watched> {
  const w = await rig.openPage(x.s.loginUrl);
  await w.page.goto(`${x.origin}${path}`);
  await idle(w.page);
  return w;
}

const snapParam = (page: Page) => new URL(page.url()).searchParams.get('snap');
const banner = (page: Page) => page.locator('[data-testid="diagnosis"] > summary');

/** Console errors but the browser's own lines for the 404s of the removed snapshot. */
const realErrors = (errors: readonly string[]) =>
  errors.filter((e) => !/Failed to load resource: the server responded with a status of 404/.test(e));

describe('evidence kept while it matters', () => {
  it("a link to a job's first snapshot still opens after 150 equal snapshots; a removed one with job= opens the newest with a notice", async () => {
    const x = await setup();
    const ids = await takeSnapshots(x, 151);
    const first = ids[0] as string;
    const pruned = ids[1] as string;
    const newest = ids[150] as string;
    // The first of the run and the newest KEEP stay; the 145 between them are gone.
    expect(await storedIds(x)).toEqual([...ids.slice(-KEEP).reverse(), first]);
    const job = encodeURIComponent(x.jobId);

    const one = await openPage(x, `/?view=matrix&job=${job}&snap=${encodeURIComponent(first)}`);
    await expect.poll(async () => (await banner(one.page).innerText()).trim()).toMatch(/^hung\s+Deadlock\b/);
    expect(await banner(one.page).innerText()).toMatch(/4 of 4 ranks can never proceed/);
    expect(snapParam(one.page)).toBe(first);
    expect(await one.page.getByTestId('snapshot-notice').count()).toBe(0);
    expect(await one.page.getByTestId('error').count()).toBe(0);
    await screenshot(one.page, 'evidence-first');
    expect(one.errors).toEqual([]);

    const two = await openPage(x, `/?view=matrix&job=${job}&snap=${encodeURIComponent(pruned)}`);
    const notice = two.page.getByTestId('snapshot-notice');
    await notice.waitFor();
    expect(await notice.innerText()).toMatch(
      new RegExp(
        `^Snapshot ${pruned} was removed by retention; showing the newest snapshot of job ${x.jobId}, taken \\d{1,2}:\\d{2}( [AP]M)?$`,
      ),
    );
    await expect.poll(async () => (await banner(two.page).innerText()).trim()).toMatch(/^hung\s+Deadlock\b/);
    expect(snapParam(two.page)).toBe(newest);
    expect(await two.page.getByTestId('error').count()).toBe(0);
    await screenshot(two.page, 'evidence-removed-with-job');
    expect(realErrors(two.errors)).toEqual([]);

    // Without job= the coded error stays, and says where the job's newest snapshot opens.
    const three = await openPage(x, `/?view=matrix&snap=${encodeURIComponent(pruned)}`);
    const error = three.page.getByTestId('error');
    await error.first().waitFor();
    const said = await error.first().innerText();
    expect(said).toMatch(/^MQD_E_NOT_FOUND\b/);
    expect(said).toContain(
      `snapshot ${pruned} of job ${x.jobId} was removed by retention; the job's newest snapshot opens at /?view=matrix&job=${x.jobId}`,
    );
    expect(await three.page.getByTestId('snapshot-notice').count()).toBe(0);
    expect(snapParam(three.page)).toBe(pruned);
  });
});
