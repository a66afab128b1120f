#!/usr/bin/env node
// The matrix's communicator menu at 16,384 ranks, in Debian's chromium: apps/web/dist/bench.html
// ?mode=menu mounts the real MatrixView on each synthetic scenario's snapshot (halo, ring,
// wrong-tag, collective, stacks), already in memory, and times it until the menu holds every
// entry and a frame has passed (window.__mqdMenuBench). Baselines in the same run: a JSON round
// trip of the same snapshot, and the same page at 1,024 ranks. Target: usable < 3 s after the
// data arrived, one MPI_COMM_SELF entry. Results: bench/results/comm-menu.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { benchPage } from './dist-page.mjs';

const TARGET_MS = 3000;
const { browser, port, close } = await benchPage('bench.html');
async function run(ranks, runs) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
  await page.goto(`http://127.0.0.1:${port}/bench.html?mode=menu&ranks=${ranks}&runs=${runs}`);
  await page.waitForFunction(() => window.__mqdMenuBench?.done === true, undefined, { timeout: 600_000 });
  const r = await page.evaluate(() => window.__mqdMenuBench);
  await page.close();
  if (r.error) throw new Error(`bench page: ${r.error}`);
  return r;
}
let failed = false;
try {
  const baseline = await run(1024, 3);
  const big = await run(16384, 3);
  for (const row of [...baseline.rows, ...big.rows]) {
    console.log(
      `comm menu ${row.scenario} ${row.ranks} ranks: usable ${row.usableMedianMs} ms (max ${row.usableMaxMs}), ` +
        `${row.entries} entries for ${row.distinctComms} communicators, ${row.selfEntries} MPI_COMM_SELF; ` +
        `JSON round trip ${row.jsonRoundTripMedianMs} ms`,
    );
  }
  for (const row of big.rows) {
    if (row.usableMaxMs >= TARGET_MS || row.selfEntries > 1) {
      failed = true;
      console.error(
        `MQD_E_BENCH_TARGET: ${row.scenario}: usable after ${row.usableMaxMs} ms, ${row.selfEntries} MPI_COMM_SELF entries`,
      );
    }
  }
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(
    'bench/results/comm-menu.json',
    `${JSON.stringify({ bench: 'comm-menu', date: new Date().toISOString(), targets: { usableMs: TARGET_MS, selfEntries: 1 }, baseline: baseline.rows, rows: big.rows }, null, 2)}\n`,
  );
} finally {
  await close();
}
if (failed) process.exit(1);
