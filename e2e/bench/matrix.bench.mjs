#!/usr/bin/env node
// Dashboard matrix benchmark in Debian's chromium: apps/web/dist/bench.html renders the matrix
// of a synthetic 16,384-rank job and runs a scripted pan/zoom, measured in the page
// (window.__mqdBench). The baseline, in the same run, is the same page at 1,024 ranks, so the
// figures are also ratios. Results: bench/results/matrix.json.
import { createReadStream, existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = fileURLToPath(new URL('../../apps/web/dist', import.meta.url));
if (!existsSync(join(root, 'bench.html'))) {
  console.error('MQD_E_USAGE: apps/web/dist/bench.html is missing: run npm run build first');
  process.exit(2);
}
const types = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.map': 'application/json',
};
const server = createServer((req, res) => {
  const path = normalize(decodeURIComponent((req.url ?? '/').split('?')[0] ?? '/')).replace(
    /^(\.\.[/\\])+/,
    '',
  );
  const file = join(root, path);
  if (!file.startsWith(root) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' });
  createReadStream(file).pipe(res);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const { port } = server.address();

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic'],
});
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
  await browser.close();
  server.close();
}
