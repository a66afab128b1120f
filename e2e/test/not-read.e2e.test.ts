// An agent dropout between snapshots, in Debian's chromium against the real aggregator and two
// real agents (in this process, over socket.io, with the fake reader and locator of
// @mqd/server: no MPI build is needed, the dropout is what is tested). Both agents go away
// between the second and third snapshots and come back for the fourth: the timeline must show
// the third as a gap (not as a job whose queues emptied), the matrix its ranks as not read, and
// "unchanged since" must keep the first snapshot's time instead of restarting.
import {
  type AgentHandle,
  createFakeLocator,
  createFakeReader,
  hostAgentToken,
  type Served,
  serve,
  startAgent,
} from '@mqd/server';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { e2eServerConfig, idle, screenshot } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const ADMIN = 'admin-token-for-the-e2e-tests-0123456789';
const rig = e2eRig({ adminToken: ADMIN });
const STARTER = 4242;
const STRIP = 14; // apps/web/src/matrix/renderer.ts: the ANY/unknown strips beside the matrix
const STRIP_GAP = 6;
const HOSTS = ['n1', 'n2'] as const;

/** The agent of `host`: n1 also runs the starter (the locator); 2 ranks per node, a hung ring. */
function agentOn(s: Served, host: (typeof HOSTS)[number]): AgentHandle {
  return startAgent({
    serverUrl: s.url,
    // Each node's own token (the shared one is refused unless configured).
    token: hostAgentToken(s.agentToken, host),
    host,
    reader: createFakeReader({ worldSize: 4 }),
    locator:
      host === 'n1'
        ? createFakeLocator({
            starterPid: STARTER,
            uid: 1000,
            command: 'mpirun -np 4 ./ring',
            hosts: [...HOSTS],
            ranksPerHost: 2,
          })
        : null,
  });
}

async function agents(s: Served): Promise<AgentHandle[]> {
  const list = HOSTS.map((h) => agentOn(s, h));
  for (const a of list) rig.cleanup(() => a.dispose());
  await Promise.all(list.map((a) => a.whenConnected()));
  return list;
}

async function toJobs(page: Page): Promise<void> {
  await page.keyboard.press('j');
  await page.getByTestId('take-snapshot').first().waitFor();
  await idle(page);
}

describe('an agent dropout between snapshots', () => {
  it('the timeline shows a gap, the matrix the ranks not read, "unchanged since" keeps the first time', async () => {
    const s = await serve({ config: e2eServerConfig(ADMIN), reader: null, locator: null, print: () => {} });
    rig.cleanup(() => s.close());
    let live = await agents(s);
    const { page, errors } = await rig.openPage(s.loginUrl);
    await attach(page, { starterPid: STARTER, host: 'n1' }, 'not-read');
    await takeSnapshot(page);
    await toJobs(page);
    await takeSnapshot(page);

    // Both agents drop out: the third snapshot reads no rank.
    for (const a of live) await a.dispose();
    await expect.poll(() => HOSTS.some((h) => s.app.mqd.hub.isConnected(h)), { timeout: 10_000 }).toBe(false);
    await toJobs(page);
    await takeSnapshot(page);
    expect((await page.getByTestId('matrix-not-read').textContent())?.trim()).toBe(
      '4 ranks not read: no agent answered (MQD_E_AGENT_MISSING): their rows and columns are hatched (unknown, not empty).',
    );
    // The reason is in the tooltip of a hatched cell (rank 1's row, rank 2's column).
    const canvas = page.getByTestId('matrix-canvas');
    const box = await canvas.boundingBox();
    if (!box) throw new Error('no matrix canvas');
    const unit = Math.min(box.width - STRIP - STRIP_GAP, box.height - STRIP - STRIP_GAP) / 4;
    await canvas.hover({ position: { x: 2.5 * unit, y: 1.5 * unit } });
    const tip = page.getByTestId('matrix-tooltip');
    await tip.waitFor();
    expect(await tip.textContent()).toContain(
      'rank 1 not read: no agent answered. MQD_E_AGENT_MISSING: no agent is connected for host n1',
    );
    expect(await tip.textContent()).toContain('(its receives are unknown)');
    expect(await tip.textContent()).toContain('no operations known');
    await screenshot(page, 'not-read-matrix-dropout');
    // Its operations panel says the same instead of an empty list.
    await canvas.click({ position: { x: 2.5 * unit, y: 1.5 * unit } });
    expect((await page.getByTestId('cell-not-read').textContent())?.trim()).toBe(
      '2 ranks not read: no agent answered (MQD_E_AGENT_MISSING): what their queues hold is unknown, not empty.',
    );
    await page.keyboard.press('Escape');

    // They come back; the job has not moved.
    live = await agents(s);
    await toJobs(page);
    await takeSnapshot(page);
    expect(await page.getByTestId('matrix-not-read').count()).toBe(0);

    await page.keyboard.press('t');
    await page.getByTestId('timeline-headline').waitFor();
    await idle(page);
    await screenshot(page, 'not-read-timeline');
    expect(await page.getByTestId('timeline-headline').textContent()).toMatch(
      /^No change since \d{1,2}:\d\d( [AP]M)? \(4 snapshots, 1 of them not read\); ranks 0-3 wait\.$/,
    );
    expect(await page.getByTestId('timeline-not-read').textContent()).toMatch(
      /\(no rank read, drawn as a gap\): 4 ranks not read: no agent answered \(MQD_E_AGENT_MISSING\)/,
    );
    // The totals chart draws the failed snapshot as a hatched band, its lines break there.
    expect(await page.locator('[data-failed-snapshot]').count()).toBe(1);
    expect(await page.locator('.not-read-label').first().textContent()).toBe('not read');

    // Every operation of the ring has been there since the first snapshot: read in 3 of the 4.
    const first = await page.evaluate(async (job) => {
      const r = await fetch(`/api/jobs/${job}/snapshots`);
      const body = (await r.json()) as { snapshots: { takenAt: string }[] };
      const oldest = body.snapshots.map((x) => x.takenAt).sort()[0] ?? '';
      // apps/web/src/format.ts formatTime: what the table prints.
      return new Date(oldest).toLocaleString(undefined, {
        year: 'numeric',
        month: 'short',
        day: 'numeric',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
      });
    }, new URL(page.url()).searchParams.get('job'));
    const since = await page.getByTestId('unchanged-since').allTextContents();
    expect(since.length).toBeGreaterThan(0);
    expect(new Set(since)).toEqual(new Set([first]));
    const reads = await page
      .locator('[data-testid="persistent-ops"] tbody tr td:last-child')
      .allTextContents();
    expect(new Set(reads)).toEqual(new Set(['3']));
    expect(errors).toEqual([]);
  });
});
