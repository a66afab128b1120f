// What the dashboard benchmarks share: apps/web/dist served on a free loopback port (static
// files only, nothing outside dist/), and Debian's chromium to load it. Each bench then opens
// its own page (bench.html, stacks-bench.html) with its query and reads the figures the page
// measured.
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = fileURLToPath(new URL('../../apps/web/dist', import.meta.url));
const types = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.map': 'application/json',
};

/** Serves dist/ and starts chromium; exits with MQD_E_USAGE when `page` was not built. */
export async function benchPage(page) {
  if (!existsSync(join(root, page))) {
    console.error(`MQD_E_USAGE: apps/web/dist/${page} is missing: run npm run build first`);
    process.exit(2);
  }
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
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-quic',
    ],
  });
  return {
    browser,
    port,
    close: async () => {
      await browser.close();
      server.close();
    },
  };
}
