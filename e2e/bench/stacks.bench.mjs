#!/usr/bin/env node
// Dashboard Stacks view benchmark in Debian's chromium: apps/web/dist/stacks-bench.html mounts
// the real StacksView on a synthetic job with stacks (~20 distinct stacks) and times it until
// the tree is on screen, measured in the page (window.__mqdStacksBench). Baselines in the same
// run: a JSON round trip of the same snapshot in the page, and the same page at 1,024 ranks.
// Target: under 1 s at 16,384 ranks. Results: bench/results/stacks-view.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { benchPage } from './dist-page.mjs';

const { browser, port, close } = await benchPage('stacks-bench.html');
async function run(ranks) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, deviceScaleFactor: 1 });
  await page.goto(`http://127.0.0.1:${port}/stacks-bench.html?ranks=${ranks}&runs=7`);
  await page.waitForFunction(() => window.__mqdStacksBench?.done === true, undefined, { timeout: 180_000 });
  const r = await page.evaluate(() => window.__mqdStacksBench);
  await page.close();
  if (r.error) throw new Error(`stacks bench page: ${r.error}`);
  return r;
}
const TARGET_MS = 1000;
try {
  const rows = [];
  for (const ranks of [1024, 16384]) {
    const r = await run(ranks);
    rows.push({
      ...r,
      ratioToJsonRoundTrip: Math.round((r.renderMedianMs / r.jsonRoundTripMedianMs) * 1000) / 1000,
    });
    console.log(`stacks ${ranks} ranks: ${JSON.stringify(r)}`);
  }
  const big = rows.at(-1);
  const pass = big !== undefined && big.renderMedianMs < TARGET_MS;
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(
    'bench/results/stacks-view.json',
    `${JSON.stringify({ bench: 'stacks view', date: new Date().toISOString(), targets: { renderMs: TARGET_MS }, pass, rows }, null, 2)}\n`,
  );
  console.log(
    `stacks: 16,384 ranks render ${big?.renderMedianMs} ms (target < ${TARGET_MS} ms): ${pass ? 'ok' : 'MISSED'}`,
  );
  if (!pass) process.exitCode = 1;
} finally {
  await close();
}
