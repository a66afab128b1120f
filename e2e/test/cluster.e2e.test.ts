// Several aggregators behind one address, in the browser: two `mqd serve` processes on
// one real PostgreSQL 15, Debian's haproxy in front, a real `mqd agent` connected through haproxy
// and a real hung wrong_tag job (@mqd/testkit startCluster). Each page is pinned to one instance
// by haproxy's own stickiness cookie (MQDSRV), which is how a site's browsers stay on theirs;
// the page asks /api/health which instance answers it, so the pinning is checked, not assumed.
//   1. A page on instance a sees a snapshot taken by a page on instance b: the "started
//      elsewhere" progress while it runs, then the stored snapshot in its list; the share link
//      made on b opens on a, read-only, with the same diagnosis.
//   2. Faults, and what each page shows: kill -9 of the instance holding the agent (and one of
//      the pages) while the other page takes a snapshot; then PostgreSQL stopped and started.
// Not about the MPI library: one build. Every wait is on a condition; every process is
// ended by its pid in afterAll, also when a test fails.
import { hostname } from 'node:os';
import { normaliseHost } from '@mqd/mpir';
import { hostAgentToken } from '@mqd/server';
import {
  type Cluster,
  type ClusterInstance,
  type HungCluster,
  haproxyAvailable,
  MPI_NAMES,
  postgresAvailable,
  startHungCluster,
} from '@mqd/testkit';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idle, screenshot, type Watched, watchedPage } from './browser.js';
import { DEFAULT_VIEWPORT, e2eRig, takeSnapshot } from './rig.js';

const ADMIN = 'admin-token-for-the-e2e-cluster-0123456789';
const SECRET = 'agent-secret-for-the-e2e-cluster-0123456789';
const HOST = normaliseHost(hostname());
const MPI = MPI_NAMES[0];
const rig = e2eRig({ adminToken: ADMIN });

let hung: HungCluster | null = null;
let jobId = '';

function theCluster(): Cluster {
  if (hung === null) throw new Error('the cluster did not start (beforeAll failed?)');
  return hung.cluster;
}

beforeAll(async () => {
  hung = await startHungCluster({
    names: ['a', 'b'],
    adminToken: ADMIN,
    agentSecret: SECRET,
    mpi: MPI,
    host: HOST,
    agentToken: hostAgentToken(SECRET, HOST),
  });
  const { cluster, job } = hung;
  const att = await cluster.api<{ job: { id: string } }>(cluster.haproxy.url, 'POST', '/api/jobs/attach', {
    host: HOST,
    starterPid: job.starterPid,
  });
  if (att.status !== 201) throw new Error(`attach through haproxy failed: ${att.text}`);
  jobId = att.body.job.id;
}, 180_000);

afterAll(async () => {
  await hung?.stop();
}, 60_000);

/** The id of the instance that answers this page (its own origin, its own cookies). */
function answeringInstance(page: Page): Promise<string | undefined> {
  return page.evaluate(async () => {
    const r = await fetch('/api/health');
    return ((await r.json()) as { instance?: string }).instance;
  });
}

/**
 * A fresh browser context pinned to `inst` by haproxy's MQDSRV cookie, logged in through haproxy
 * with the admin token, on the jobs view of the job. Checks that `inst` is the one answering.
 */
async function pinnedPage(inst: ClusterInstance): Promise<Watched> {
  const lb = theCluster().haproxy.url;
  const ctx = await rig.browser().newContext({ viewport: { ...DEFAULT_VIEWPORT }, deviceScaleFactor: 1 });
  rig.cleanup(() => ctx.close());
  await ctx.addCookies([{ name: 'MQDSRV', value: inst.name, url: lb }]);
  const w = await watchedPage(ctx);
  await w.page.goto(`${lb}/?token=${encodeURIComponent(ADMIN)}`);
  await idle(w.page);
  await w.page.goto(`${lb}/?job=${encodeURIComponent(jobId)}`);
  await idle(w.page);
  expect(await answeringInstance(w.page)).toBe(inst.id);
  await w.page.locator('[data-testid="live-status"][data-status="connected"]').waitFor();
  return w;
}

/**
 * Records, in the page, every change of what a person reads in the progress banners and the
 * live-status label, so a state that lasts a few milliseconds is not missed by polling.
 */
async function recordSeen(page: Page): Promise<void> {
  await page.evaluate(() => {
    const seen = { progress: [] as string[], live: [] as string[] };
    (window as unknown as { mqdSeen: typeof seen }).mqdSeen = seen;
    const push = (list: string[], t: string) => {
      if (list.at(-1) !== t) list.push(t);
    };
    const look = () => {
      for (const el of Array.from(document.querySelectorAll<HTMLElement>('.progress-banner'))) {
        const bar = el.querySelector('[data-testid="snapshot-progress"]');
        push(
          seen.progress,
          `${el.innerText.replace(/\s+/g, ' ').trim()}${
            bar === null ? '' : ` [${bar.getAttribute('data-received')}/${bar.getAttribute('data-expected')}]`
          }`,
        );
      }
      const live = document.querySelector<HTMLElement>('[data-testid="live-status"]');
      if (live !== null) push(seen.live, live.innerText.trim());
    };
    look();
    new MutationObserver(look).observe(document.body, {
      subtree: true,
      childList: true,
      attributes: true,
      characterData: true,
    });
  });
}

function seen(page: Page): Promise<{ progress: string[]; live: string[] }> {
  return page.evaluate(
    () => (window as unknown as { mqdSeen: { progress: string[]; live: string[] } }).mqdSeen,
  );
}

/** The diagnosis lines a person reads after a snapshot of wrong_tag (source lines left out). */
async function diagnosisLines(page: Page): Promise<string[]> {
  await page.getByTestId('diagnosis-line').first().waitFor();
  return (await page.getByTestId('diagnosis-line').allInnerTexts()).map((l) =>
    l.trim().replace(/ at .*$/, ''),
  );
}

const WRONG_TAG_LINES = [
  'Rank 0 waits in MPI_Recv for a message from rank 1, tag 99, on MPI_COMM_WORLD,',
  'Ranks 1-3 wait in MPI_Recv for a message from rank 0, tag 1, on MPI_COMM_WORLD,',
];

/** The network's own words in chromium's console when a server went away (not the page's). */
const NETWORK_NOISE = /Failed to load resource|WebSocket connection to .* failed/;

function pageErrors(w: Watched): string[] {
  return w.errors.filter((e) => !NETWORK_NOISE.test(e));
}

const jobsRefresh = (page: Page) => page.locator('.jobs-list').getByRole('button', { name: 'Refresh' });

describe.runIf(postgresAvailable() && haproxyAvailable())(
  `${MPI}: two aggregators behind haproxy, in chromium`,
  () => {
    it('a page on one instance sees the snapshot taken through the other, its progress, and its share link', async () => {
      const c = theCluster();
      const [a, b] = c.instances as [ClusterInstance, ClusterInstance];
      const onA = await pinnedPage(a);
      const onB = await pinnedPage(b);
      // Both list the job attached through haproxy, whichever instance attached it.
      await onA.page.getByTestId('job-row').waitFor();
      await onB.page.getByTestId('job-row').waitFor();
      expect(await onA.page.getByTestId('snapshot-link').count()).toBe(0);
      await recordSeen(onA.page);

      await takeSnapshot(onB.page);
      const snap = new URL(onB.page.url()).searchParams.get('snap') ?? '';
      expect(snap).not.toBe('');
      expect(await diagnosisLines(onB.page)).toEqual(WRONG_TAG_LINES);

      // Page a: the live "started elsewhere" progress came from instance b through PostgreSQL,
      // then the done event reloaded its list with the snapshot, every rank read.
      const link = onA.page.getByTestId('snapshot-link');
      await link.waitFor();
      expect(await link.count()).toBe(1);
      expect(await onA.page.locator('.snapshot-list li').first().getAttribute('data-read')).toBe('ok');
      const progress = (await seen(onA.page)).progress;
      expect(progress.join('\n')).toContain(
        `A snapshot of job ${jobId} is being taken (started elsewhere): every rank is stopped briefly while its queues are read`,
      );
      // Once the ranks' answers arrive, the bar counts them against the job's four.
      expect(progress.filter((t) => t.endsWith('/4]')).length).toBeGreaterThan(0);
      await screenshot(onA.page, 'cluster-snapshot-seen-on-a');
      await link.click();
      await onA.page.getByTestId('matrix-canvas').waitFor();
      await idle(onA.page);
      expect(new URL(onA.page.url()).searchParams.get('snap')).toBe(snap);
      expect(await diagnosisLines(onA.page)).toEqual(WRONG_TAG_LINES);

      // A share link made on b opens on a (a fresh context, no session, pinned to a).
      await onB.page.getByTestId('share-button').click();
      const box = onB.page.getByTestId('share-link').locator('input');
      await box.waitFor();
      const shareUrl = await box.inputValue();
      expect(new URL(shareUrl).origin).toBe(c.haproxy.url);
      const ctx = await rig.browser().newContext({ viewport: { ...DEFAULT_VIEWPORT }, deviceScaleFactor: 1 });
      rig.cleanup(() => ctx.close());
      await ctx.addCookies([{ name: 'MQDSRV', value: a.name, url: c.haproxy.url }]);
      const shared = await watchedPage(ctx);
      await shared.page.goto(shareUrl);
      await shared.page.getByTestId('read-only-banner').waitFor();
      await idle(shared.page);
      expect(await answeringInstance(shared.page)).toBe(a.id);
      expect(await diagnosisLines(shared.page)).toEqual(WRONG_TAG_LINES);
      await screenshot(shared.page, 'cluster-share-made-on-b-opened-on-a');
      expect(onA.errors).toEqual([]);
      expect(onB.errors).toEqual([]);
      expect(shared.errors).toEqual([]);
    });

    it('kill -9 of the agent’s instance mid-snapshot, then PostgreSQL stopped: what each page shows', async () => {
      const c = theCluster();
      const holder = await c.waitForHolder(HOST);
      const other = c.instances.find((i) => i !== holder && i.alive()) as ClusterInstance;
      // p is on the instance that will die (with the agent); q on the one that stays.
      const p = await pinnedPage(holder);
      const q = await pinnedPage(other);
      await recordSeen(p.page);
      const before = await p.page.getByTestId('snapshot-link').count();

      // q asks for a snapshot and the agent's instance is killed meanwhile: the agent reconnects
      // through haproxy to q's instance, which reads every rank; q's page opens the snapshot.
      const taking = takeSnapshot(q.page);
      holder.kill9();
      await taking;
      expect(await diagnosisLines(q.page)).toEqual(WRONG_TAG_LINES);
      expect(await c.holderOf(HOST, other.url)).toBe(other.id);
      await screenshot(q.page, 'cluster-snapshot-through-kill9');

      // p lost its instance: its label says "connecting…", then "live" again once socket.io got
      // through haproxy to the survivor; its list then shows q's snapshot, and it takes one itself.
      await p.page
        .locator('[data-testid="live-status"][data-status="connected"]')
        .waitFor({ timeout: 30_000 });
      expect((await seen(p.page)).live).toEqual(['live', 'connecting…', 'live']);
      expect(await answeringInstance(p.page)).toBe(other.id);
      await jobsRefresh(p.page).click();
      await idle(p.page);
      await expect.poll(() => p.page.getByTestId('snapshot-link').count()).toBe(before + 1);
      await takeSnapshot(p.page);
      expect(await diagnosisLines(p.page)).toEqual(WRONG_TAG_LINES);
      await screenshot(p.page, 'cluster-after-kill9-on-survivor');

      // PostgreSQL goes away: q's refresh shows the coded error and what to do, never a blank list.
      await q.page.goto(`${c.haproxy.url}/?job=${encodeURIComponent(jobId)}`);
      await idle(q.page);
      await q.page.getByTestId('job-row').waitFor();
      await c.pg.down();
      await jobsRefresh(q.page).click();
      const error = q.page.locator('.jobs-list').getByTestId('error');
      await error.waitFor();
      const said = await error.innerText();
      expect(said).toContain('MQD_E_STORE_UNAVAILABLE');
      expect(said).toContain('requests fail with 503 meanwhile and resume by themselves');
      expect(said).not.toContain(c.pg.dir);
      await screenshot(q.page, 'cluster-postgres-down');

      // PostgreSQL back: the next refresh lists the job again, and a snapshot reads every rank.
      await c.pg.up();
      await expect
        .poll(
          async () => {
            await jobsRefresh(q.page).click();
            await idle(q.page);
            return q.page.locator('.jobs-list').getByTestId('error').count();
          },
          { timeout: 60_000 },
        )
        .toBe(0);
      await q.page.getByTestId('job-row').waitFor();
      await takeSnapshot(q.page);
      expect(await diagnosisLines(q.page)).toEqual(WRONG_TAG_LINES);
      await screenshot(q.page, 'cluster-after-postgres-back');
      // Only the network's own console lines (a dropped socket, a proxy's 5xx), no page errors.
      expect(pageErrors(p)).toEqual([]);
      expect(pageErrors(q)).toEqual([]);
    });
  },
);
