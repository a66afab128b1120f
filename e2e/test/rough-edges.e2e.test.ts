// Rough edges of the dashboard in Debian's chromium against the real
// aggregator. The job is simulated (the server's fake locator and a fixed reader serving the
// model's 4-rank ring deadlock) on two agents, node-a and node-b, so a snapshot can be held
// half-read: node-b's reader waits on a gate the test opens. Every wait is on a condition.
import { type JobId, syntheticRingDeadlock } from '@mqd/model';
import {
  createFakeLocator,
  createFixedReader,
  hostAgentToken,
  type RankReader,
  type Served,
  serve,
  startAgent,
} from '@mqd/server';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { e2eServerConfig, idle, screenshot, type Watched } from './browser.js';
import { apiAs, e2eRig } from './rig.js';

const ADMIN = 'admin-token-for-the-e2e-rough-edges-0123456789';
const STARTER = 4242;

const rig = e2eRig({ adminToken: ADMIN });

/** A reader that, once `hold()` is called, answers only after `release()`. */
function gatedReader(inner: RankReader): RankReader & { hold(): void; release(): void } {
  let gate: Promise<void> | null = null;
  let open: () => void = () => {};
  return {
    mpi: inner.mpi,
    async read(ranks, ro) {
      if (gate !== null) await gate;
      return inner.read(ranks, ro);
    },
    hold() {
      gate = new Promise<void>((r) => {
        open = r;
      });
    },
    release() {
      gate = null;
      open();
    },
  };
}

interface Setup {
  readonly s: Served;
  readonly origin: string;
  readonly jobId: JobId;
  readonly nodeB: ReturnType<typeof gatedReader>;
  /** Calls the REST API as the admin. */
  api(method: 'GET' | 'POST', path: string): Promise<unknown>;
}

/** The aggregator with node-a's agent in process, node-b's agent beside it, the job attached. */
async function setup(): Promise<Setup> {
  const ring = syntheticRingDeadlock({ ranks: 4, style: 'openmpi' });
  const fake = {
    starterPid: STARTER,
    uid: process.getuid?.() ?? 0,
    command: 'ring',
    hosts: ['node-a', 'node-b'],
    ranksPerHost: 2,
  };
  const s = await serve({
    config: e2eServerConfig(ADMIN),
    reader: createFixedReader(ring),
    locator: createFakeLocator(fake),
    localHost: 'node-a',
    print: () => {},
    logger: false,
  });
  rig.cleanup(() => s.close());
  const nodeB = gatedReader(createFixedReader(ring));
  const second = startAgent({
    serverUrl: s.url,
    token: hostAgentToken(s.agentToken, 'node-b'),
    reader: nodeB,
    host: 'node-b',
  });
  rig.cleanup(() => second.dispose());
  // Opens node-b's gate whatever happens, before the agent and the server close (cleanups run
  // last in, first out), so no snapshot stays in flight after a test.
  rig.cleanup(() => nodeB.release());
  const api = await apiAs(s.url, ADMIN);
  // Both agents must be connected before the job spans them.
  await expect
    .poll(async () => ((await api('GET', '/api/health')) as { agents: number }).agents, { timeout: 20_000 })
    .toBe(2);
  const attached = (await api('POST', '/api/jobs/attach', { host: 'node-a', starterPid: STARTER })) as {
    job?: { id: string | number };
    id?: string | number;
  };
  const id = attached.job?.id ?? attached.id;
  if (id === undefined) throw new Error(`attach answered no job id: ${JSON.stringify(attached)}`);
  return { s, origin: new URL(s.url).origin, jobId: String(id) as JobId, nodeB, api: (m, p) => api(m, p) };
}

async function takeSnapshot(x: Setup): Promise<string> {
  const r = (await x.api('POST', `/api/jobs/${encodeURIComponent(x.jobId)}/snapshots`)) as {
    id?: string | number;
    snapshot?: { id?: string | number };
  };
  const id = r.id ?? r.snapshot?.id;
  if (id === undefined) throw new Error(`the snapshot answer has no id: ${JSON.stringify(r)}`);
  return String(id);
}

/** A logged-in page (the login URL sets the session cookie), then `path`. */
async function openPage(x: Setup, path: string): Promise<Watched> {
  const w = await rig.openPage(x.s.loginUrl);
  await w.page.goto(`${x.origin}${path}`);
  await idle(w.page);
  return w;
}

function firstPoint(d: string | null): { x: number; y: number } {
  const m = /^M\s*(-?[\d.e+-]+)[ ,](-?[\d.e+-]+)/.exec(d ?? '');
  if (!m) throw new Error(`not a path: ${d}`);
  return { x: Number(m[1]), y: Number(m[2]) };
}

function points(d: string | null): { x: number; y: number }[] {
  return [...(d ?? '').matchAll(/[ML]\s*(-?[\d.e+-]+)[ ,](-?[\d.e+-]+)/g)].map((m) => ({
    x: Number(m[1]),
    y: Number(m[2]),
  }));
}

async function snapParam(page: Page): Promise<string | null> {
  return new URL(page.url()).searchParams.get('snap');
}

describe('dashboard rough edges', () => {
  it('a link with job= and no snap= opens the latest snapshot', async () => {
    const x = await setup();
    await takeSnapshot(x);
    const latest = await takeSnapshot(x);
    const { page, errors } = await openPage(x, `/?view=matrix&job=${encodeURIComponent(x.jobId)}`);
    await page.getByTestId('matrix-canvas').waitFor();
    await idle(page);
    expect(await snapParam(page)).toBe(latest);
    expect(await page.getByTestId('no-snapshot').count()).toBe(0);
    await screenshot(page, 'rough-edges-latest');
    // The matching order from the same kind of link: the model's answer for rank 0.
    await page.goto(`${x.origin}/?view=order&job=${encodeURIComponent(x.jobId)}&rank=0`);
    await idle(page);
    expect(await snapParam(page)).toBe(latest);
    await expect.poll(() => page.getByTestId('order-row').count()).toBeGreaterThan(0);
    expect(errors).toEqual([]);
  });

  it('the deadlock banner names the verdict once, not "Deadlock Deadlock: ..."', async () => {
    const x = await setup();
    const snap = await takeSnapshot(x);
    const { page, errors } = await openPage(
      x,
      `/?view=matrix&job=${encodeURIComponent(x.jobId)}&snap=${encodeURIComponent(snap)}`,
    );
    const banner = page.locator('[data-testid="diagnosis"] > summary');
    await expect.poll(async () => (await banner.innerText()).trim()).toMatch(/^hung\s+Deadlock\b/);
    const text = await banner.innerText();
    expect(text.match(/deadlock/gi)).toHaveLength(1);
    expect(text).toMatch(/4 of 4 ranks can never proceed/);
    await screenshot(page, 'rough-edges-banner');
    expect(errors).toEqual([]);
  });

  it('a job without snapshots says so instead of "Pick a job and a snapshot first"', async () => {
    const x = await setup();
    const { page, errors } = await openPage(x, `/?view=matrix&job=${encodeURIComponent(x.jobId)}`);
    const empty = page.getByTestId('no-snapshot');
    await empty.waitFor();
    expect(await empty.innerText()).toMatch(new RegExp(`Job ${x.jobId} has no snapshots yet`));
    expect(errors).toEqual([]);
  });

  it('shows the progress bar for a snapshot someone else started', async () => {
    const x = await setup();
    await takeSnapshot(x);
    const { page, errors } = await openPage(x, `/?job=${encodeURIComponent(x.jobId)}`);
    await page.locator('[data-testid="live-status"][data-status="connected"]').waitFor();
    // Started through the REST API, not by this page; node-b holds its two ranks back.
    x.nodeB.hold();
    const taking = takeSnapshot(x);
    const bar = page.locator('[data-testid="snapshot-progress"][data-origin="elsewhere"]');
    await bar.waitFor();
    expect(await bar.getAttribute('data-received')).toBe('2');
    expect(await bar.getAttribute('data-expected')).toBe('4');
    expect(await bar.getAttribute('data-job')).toBe(x.jobId);
    expect(await page.getByTestId('snapshot-progress').count()).toBe(1);
    await screenshot(page, 'rough-edges-progress-elsewhere');
    x.nodeB.release();
    await taking;
    await bar.waitFor({ state: 'detached' });
    expect(errors).toEqual([]);
  });

  it('the timeline draws "unchanged since the previous snapshot" from the second snapshot, not from 0', async () => {
    const x = await setup();
    await takeSnapshot(x);
    await takeSnapshot(x);
    const latest = await takeSnapshot(x);
    const { page, errors } = await openPage(
      x,
      `/?view=timeline&job=${encodeURIComponent(x.jobId)}&snap=${encodeURIComponent(latest)}&tkind=sends`,
    );
    const persisted = page.locator('path[data-series="persisted-sends"]');
    await persisted.waitFor({ state: 'attached' });
    await idle(page);
    const totals = points(await page.locator('path[data-series="totals-sends"]').getAttribute('d'));
    expect(totals).toHaveLength(3);
    const first = firstPoint(await persisted.getAttribute('d'));
    // Its first point is the second snapshot's, at the same height as the total there (the
    // ring's sends persist), not the first snapshot's at the baseline.
    expect(first.x).toBeCloseTo(totals[1]?.x ?? Number.NaN, 3);
    expect(first.y).toBeCloseTo(totals[1]?.y ?? Number.NaN, 3);
    expect(points(await persisted.getAttribute('d'))).toHaveLength(2);
    await screenshot(page, 'rough-edges-timeline');
    expect(errors).toEqual([]);
  });
});
