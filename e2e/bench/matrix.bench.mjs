#!/usr/bin/env node
// Dashboard matrix benchmark in Debian's chromium: apps/web/dist/bench.html renders the matrix
// of a synthetic 16,384-rank job and runs a scripted pan/zoom, measured in the page
// (window.__mqdBench). The baseline, in the same run, is the same page at 1,024 ranks, so the
// figures are also ratios. Results: bench/results/matrix.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { benchPage } from './dist-page.mjs';

const { browser, port, close } = await benchPage('bench.html');
async function run(ranks, width, height, scale) {
  const page = await browser.newPage({
    viewport: { width: width + 40, height: height + 40 },
    deviceScaleFactor: scale,
  });
  await page.goto(
    `http://127.0.0.1:${port}/bench.html?ranks=${ranks}&frames=120&width=${width}&height=${height}`,
  );
  await page.waitForFunction(() => window.__mqdBench?.done === true || window.__mqdBench?.error, undefined, {
    timeout: 180_000,
  });
  const r = await page.evaluate(() => window.__mqdBench);
  await page.close();
  if (r.error) throw new Error(`bench page: ${r.error}`);
  return r;
}
try {
  const rows = [];
  for (const [ranks, scale] of [
    [1024, 1],
    [16384, 1],
    [16384, 2],
  ]) {
    const r = await run(ranks, 1200, 800, scale);
    rows.push({ ranks, deviceScale: scale, ...r });
    console.log(`matrix ${ranks} ranks @${scale}x: ${JSON.stringify(r)}`);
  }
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(
    'bench/results/matrix.json',
    `${JSON.stringify({ bench: 'matrix', date: new Date().toISOString(), targets: { firstRenderMs: 1000, medianFrameMs: 16 }, rows }, null, 2)}\n`,
  );
} finally {
  await close();
}
