#!/usr/bin/env node
// The dashboard's first render of one job's snapshot, in Debian's chromium, against a running
// aggregator (apps/server/bench/scale-out.bench.ts starts it and calls this script):
//   node e2e/bench/scale-out-render.mjs URL ADMIN_TOKEN JOB_ID SNAPSHOT_ID
// Logs in through the ?token= URL, then opens /?view=matrix&job=J&snap=S once right after the
// snapshot was taken and RUNS times again (a fresh page each time, the session cookie kept; the
// browser's HTTP cache is off so every run fetches the page's code and the snapshot), then RUNS
// times more as a returning browser (its HTTP cache
// on: the hashed assets come from it, the API answers never do), and records, relative to the
// navigation's start (performance.timeOrigin), when each part first showed: the snapshot badge
// (the overview or the snapshot loaded), the diagnosis verdict, the matrix canvas, the matrix's
// first frame with its data on screen (`data-drawn` of MatrixView), and the app idle (the whole snapshot loaded too, every view ready). First
// meaningful content = the verdict and the drawn matrix both on screen. Prints one JSON line
// (medians and every run).
import { chromium } from 'playwright-core';

const [url, token, jobId, snapId] = process.argv.slice(2);
const RUNS = Number(process.env.MQD_BENCH_RENDER_RUNS ?? 5);
/** A page not done by then is recorded as given up (with what it reached), and the runs go on. */
const GIVE_UP_MS = Number(process.env.MQD_BENCH_RENDER_GIVE_UP_MS ?? 120_000);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const r1 = (n) => Math.round(n * 10) / 10;

// In the page from its first script on: every animation frame, note when each mark is there.
const MARKS = () => {
  const marks = {};
  window.__mqdMarks = marks;
  const seen = (sel) => {
    const e = document.querySelector(sel);
    return e !== null && e.getClientRects().length > 0;
  };
  const tick = () => {
    const t = performance.now();
    if (marks.header === undefined && document.querySelector('.snapshot-badge:not(.muted)') !== null)
      marks.header = t;
    if (marks.verdict === undefined && seen('[data-testid="diagnosis-verdict"]')) marks.verdict = t;
    if (marks.canvas === undefined && seen('[data-testid="matrix-canvas"]')) marks.canvas = t;
    if (marks.drawn === undefined && document.querySelector('.matrix-main[data-drawn="true"]') !== null)
      marks.drawn = t;
    if (marks.verdict !== undefined && marks.drawn !== undefined)
      marks.firstMeaningful ??= Math.max(marks.verdict, marks.drawn);
    if (marks.idle === undefined && marks.drawn !== undefined && document.body?.dataset.mqdIdle === 'true')
      marks.idle = t;
    if (marks.firstMeaningful !== undefined && marks.idle !== undefined) {
      marks.done = true;
      return;
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
};

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic'],
});
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const login = await ctx.newPage();
  // The page takes the token out of its address before its login request is answered: waiting
  // for the address alone and closing the page could abort the request, and every page after it
  // had no session (401s: a "page never done"). Wait for the answer itself.
  const answered = login.waitForResponse((r) => r.url().endsWith('/api/login'), { timeout: 60_000 });
  await login.goto(`${url}/?token=${encodeURIComponent(token)}`);
  const res = await answered;
  if (!res.ok()) throw new Error(`login: HTTP ${res.status()} ${(await res.text()).slice(0, 300)}`);
  if (!(await ctx.cookies()).some((c) => c.name === 'mqd_session'))
    throw new Error('login: no session cookie');
  await login.close();
  await ctx.addInitScript(MARKS);
  /** `count` pages; `cached`: the browser's HTTP cache (and V8's code cache) on, else off. */
  const measure = async (cached, count = RUNS) => {
    const runs = [];
    for (let i = 0; i < count; i++) {
      const page = await ctx.newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      // What a page that never gets there was doing: console errors, failed requests and API answers that were not 2xx.
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(`console: ${m.text().slice(0, 300)}`);
      });
      page.on('requestfailed', (r) =>
        errors.push(`request failed: ${r.url()} ${r.failure()?.errorText ?? ''}`),
      );
      page.on('response', (r) => {
        if (r.status() >= 400) errors.push(`HTTP ${r.status()}: ${r.url()}`);
      });
      const cdp = await ctx.newCDPSession(page);
      await cdp.send('Network.setCacheDisabled', { cacheDisabled: !cached });
      await page.goto(
        `${url}/?view=matrix&job=${encodeURIComponent(jobId)}&snap=${encodeURIComponent(snapId)}`,
      );
      const gaveUp = await page
        .waitForFunction(() => window.__mqdMarks?.done === true, undefined, {
          timeout: GIVE_UP_MS,
          polling: 250,
        })
        .then(
          () => null,
          // Not there in time: the run is kept with the marks it reached and what the page shows.
          async (e) => ({
            reason: String(e).slice(0, 200),
            shown: (await page.evaluate(() => document.body?.innerText ?? '').catch(() => '')).slice(0, 600),
            idle: await page.evaluate(() => document.body?.dataset.mqdIdle ?? null).catch(() => null),
          }),
        );
      const m = await page.evaluate(() => ({
        ...window.__mqdMarks,
        jsHeapMb: Math.round((performance.memory?.usedJSHeapSize ?? 0) / 104857.6) / 10,
        snapshotFetch: performance
          .getEntriesByType('resource')
          .filter((e) => e.name.includes('/api/snapshots/') || e.name.includes('/api/shared/'))
          .map((e) => ({
            url: e.name.replace(/^.*\/api\//, '/api/'),
            start: e.startTime,
            end: e.responseEnd,
            transferBytes: e.transferSize,
            bytes: e.decodedBodySize,
          })),
      }));
      runs.push({ ...m, errors, ...(gaveUp === null ? {} : { gaveUp }) });
      await page.close();
    }
    return runs;
  };
  // The snapshot just taken, opened at once (its overview may still be being made on the
  // server: reported apart); then RUNS first visits of it opened again (nothing cached: the
  // conservative figure, the one the target is held to); then a returning browser: one page
  // fills the cache (the hashed assets are immutable), RUNS more are measured. The API answers
  // are never cached (the overview is fetched every time).
  const afterSnapshot = await measure(false, 1);
  const runs = await measure(false);
  const warm = await measure(true, 1);
  const returning = await measure(true);
  // A run given up has no figure for the marks it did not reach: it counts as never (Infinity).
  const pickOf = (rs, k) => r1(median(rs.map((r) => r[k] ?? Number.POSITIVE_INFINITY)));
  const pick = (k) => pickOf(runs, k);
  console.log(
    JSON.stringify({
      runs: runs.length,
      rightAfterSnapshot: {
        firstRenderMs: pickOf(afterSnapshot, 'firstMeaningful'),
        verdictMs: pickOf(afterSnapshot, 'verdict'),
        matrixDrawnMs: pickOf(afterSnapshot, 'drawn'),
        all: afterSnapshot,
      },
      returningBrowser: {
        firstRenderMs: pickOf(returning, 'firstMeaningful'),
        verdictMs: pickOf(returning, 'verdict'),
        matrixDrawnMs: pickOf(returning, 'drawn'),
        warmUpFirstRenderMs: pickOf(warm, 'firstMeaningful'),
        all: returning,
      },
      gaveUp: [...afterSnapshot, ...runs, ...warm, ...returning].filter((r) => r.gaveUp !== undefined).length,
      firstRenderMs: pick('firstMeaningful'),
      headerMs: pick('header'),
      verdictMs: pick('verdict'),
      canvasMs: pick('canvas'),
      matrixDrawnMs: pick('drawn'),
      wholeSnapshotIdleMs: pick('idle'),
      definition:
        'navigation start to the diagnosis verdict and the matrix drawn with its data both on screen (median of the first visits of the snapshot opened again; rightAfterSnapshot: opened at once after it was taken); wholeSnapshotIdleMs: the whole snapshot loaded too and the page idle',
      all: runs,
    }),
  );
} finally {
  await browser.close();
}
