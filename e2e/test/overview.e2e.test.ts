// A large snapshot opens from its overview, in Debian's chromium against the real
// aggregator and four real agents in this process (the fake reader of @mqd/server: 2,400 ranks
// of a hung ring, no MPI build needed; what is tested is how the page loads). The verdict and the
// matrix must be on screen before the whole snapshot is even asked for, say what the whole
// snapshot then says, and the communicator menu must say how many communicators it leaves out.
// The overview's first part alone (no edge table, no whole snapshot) draws both.
import { OVERVIEW_MEDIA_TYPE, overviewFirstLength } from '@mqd/model';
import { createFakeLocator, createFakeReader, hostAgentToken, serve, startAgent } from '@mqd/server';
import { describe, expect, it } from 'vitest';
import { e2eServerConfig, idle, watchedPage } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const ADMIN = 'admin-token-for-the-e2e-tests-0123456789';
const rig = e2eRig({ adminToken: ADMIN });
const STARTER = 5151;
const HOSTS = ['o1', 'o2', 'o3', 'o4'];
const PER_HOST = 600;

describe('a large snapshot opened from its overview', () => {
  it('shows the verdict and the matrix before the whole snapshot is fetched, then the same words', async () => {
    const s = await serve({ config: e2eServerConfig(ADMIN), reader: null, locator: null, print: () => {} });
    rig.cleanup(() => s.close());
    const agents = HOSTS.map((host, i) =>
      startAgent({
        serverUrl: s.url,
        token: hostAgentToken(s.agentToken, host),
        host,
        reader: createFakeReader({ worldSize: HOSTS.length * PER_HOST }),
        locator:
          i === 0
            ? createFakeLocator({
                starterPid: STARTER,
                uid: 1000,
                command: `mpirun -np ${HOSTS.length * PER_HOST} ./ring`,
                hosts: HOSTS,
                ranksPerHost: PER_HOST,
              })
            : null,
      }),
    );
    for (const a of agents) rig.cleanup(() => a.dispose());
    await Promise.all(agents.map((a) => a.whenConnected()));

    const { page, errors } = await rig.openPage(s.loginUrl);
    await attach(page, { starterPid: STARTER, host: 'o1' }, 'overview');
    await takeSnapshot(page);
    const opened = new URL(page.url());
    const snap = opened.searchParams.get('snap');
    expect(snap).not.toBeNull();
    const finalVerdict = (await page.getByTestId('diagnosis-verdict').textContent())?.trim();
    expect(finalVerdict).toBe('Deadlock');

    // The same link opened again in this page: record, from its first script on, when the
    // verdict and the drawn matrix first showed and what the verdict said then.
    await page.addInitScript(() => {
      const seen: Record<string, { at: number; text: string }> = {};
      (window as unknown as { __seen: typeof seen }).__seen = seen;
      new MutationObserver(() => {
        const v = document.querySelector('[data-testid="diagnosis-verdict"]');
        if (v && !seen['verdict']) seen['verdict'] = { at: performance.now(), text: v.textContent ?? '' };
        const m = document.querySelector('.matrix-main[data-drawn="true"]');
        if (m && !seen['drawn']) seen['drawn'] = { at: performance.now(), text: '' };
        const b = document.querySelector('.snapshot-badge:not(.muted)');
        if (b && !seen['badge']) seen['badge'] = { at: performance.now(), text: b.textContent ?? '' };
      }).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
    });
    await page.goto(`${s.url}/?view=matrix&job=${opened.searchParams.get('job')}&snap=${snap}`);
    await idle(page);
    const seen = await page.evaluate(
      () => (window as unknown as { __seen: Record<string, { at: number; text: string }> }).__seen,
    );
    const fetched = await page.evaluate(() =>
      performance
        .getEntriesByType('resource')
        .filter((e) => e.name.includes('/api/snapshots/'))
        .map((e) => ({
          what: e.name.endsWith('/overview') ? 'overview' : 'snapshot',
          start: e.startTime,
          end: (e as PerformanceResourceTiming).responseEnd,
        })),
    );
    const overview = fetched.find((f) => f.what === 'overview');
    const whole = fetched.find((f) => f.what === 'snapshot');
    if (!overview || !whole || !seen['verdict'] || !seen['drawn'] || !seen['badge'])
      throw new Error(`missing marks: ${JSON.stringify({ fetched, seen })}`);
    // The overview first; the verdict, the header and the drawn matrix before the whole
    // snapshot was asked for; the verdict already the whole snapshot's.
    expect(overview.start).toBeLessThan(whole.start);
    expect(seen['verdict'].at).toBeLessThan(whole.start);
    expect(seen['drawn'].at).toBeLessThanOrEqual(whole.start);
    expect(seen['verdict'].text.trim()).toBe(finalVerdict);
    expect(seen['badge'].text).toContain('2,400 ranks');
    expect((await page.getByTestId('diagnosis-verdict').textContent())?.trim()).toBe(finalVerdict);

    // The ring has a row and a column communicator per group of ranks: more than the menu lists.
    const options = await page.getByLabel('Communicator').locator('option').allTextContents();
    const more = options.find((t) => t.startsWith('…and '));
    expect(more).toMatch(/^…and \d+ communicators with fewer operations \(open a cell to filter by one\)$/);
    expect(options.length).toBe(1 + 200 + 1); // "All communicators", the 200 busiest, the note
    expect(errors).toEqual([]);

    // The overview's first part alone (the header, the explanation, the matrix's first level),
    // its edge table cut off and the whole snapshot held back: the verdict and the matrix are
    // drawn from it, and what needs the edge table says it is loading.
    const second = await watchedPage(page.context());
    rig.cleanup(() => second.page.close());
    await second.page.route(
      (u) => u.pathname === `/api/snapshots/${snap}/overview`,
      async (route) => {
        const body = new Uint8Array(await (await route.fetch()).body());
        const firstEnd = overviewFirstLength(body) ?? body.length;
        expect(firstEnd).toBeLessThan(body.length);
        await route.fulfill({
          status: 200,
          contentType: OVERVIEW_MEDIA_TYPE,
          body: Buffer.from(body.subarray(0, firstEnd)),
        });
      },
    );
    let releaseWhole = () => {};
    const wholeHeld = new Promise<void>((r) => {
      releaseWhole = r;
    });
    await second.page.route(
      (u) => u.pathname === `/api/snapshots/${snap}`,
      async (route) => {
        await wholeHeld;
        await route.continue();
      },
    );
    await second.page.goto(`${s.url}/?view=matrix&job=${opened.searchParams.get('job')}&snap=${snap}`);
    await second.page.locator('.matrix-main[data-drawn="true"]').waitFor();
    expect((await second.page.getByTestId('diagnosis-verdict').textContent())?.trim()).toBe(finalVerdict);
    expect(await second.page.locator('.snapshot-badge').first().textContent()).toContain('2,400 ranks');
    // No communicator is listed before the edge table (it holds them).
    expect(await second.page.getByLabel('Communicator').locator('option').allTextContents()).toEqual([
      'All communicators',
    ]);
    // A filter the first level does not show: the matrix is not drawn from it, and says why.
    await second.page.getByRole('checkbox', { name: 'unexpected messages' }).uncheck();
    await expect
      .poll(() => second.page.locator('.matrix-main .progress').textContent())
      .toMatch(/^Loading [\d,]+ operations…$/);
    releaseWhole();
    await idle(second.page);
    expect((await second.page.getByTestId('diagnosis-verdict').textContent())?.trim()).toBe(finalVerdict);
    expect(await second.page.getByLabel('Communicator').locator('option').count()).toBe(1 + 200 + 1);
    // With the whole snapshot here, the filtered matrix is drawn.
    await second.page.locator('.matrix-main[data-drawn="true"]').waitFor();
    expect(await second.page.locator('.matrix-main .progress').count()).toBe(0);
    expect(second.errors).toEqual([]);
  });
});
