// Debian's chromium through playwright-core: the only browser this project uses (browser
// downloads do not work here). Console errors are collected so tests can assert there are none.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, type ServerConfig } from '@mqd/server';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';

export const ARTIFACTS = fileURLToPath(new URL('../artifacts', import.meta.url));
/** The built dashboard the e2e servers serve. */
export const WEB_ROOT = fileURLToPath(new URL('../../apps/web/dist', import.meta.url));

/** An aggregator on an ephemeral loopback port, in-memory store, serving the built dashboard. */
export function e2eServerConfig(adminToken: string): ServerConfig {
  const cfg = loadConfig({
    env: {},
    argv: [],
    overrides: { port: 0, host: '127.0.0.1', dataDir: ':memory:', adminToken, webRoot: WEB_ROOT },
  });
  if (!cfg.ok) throw new Error(cfg.error.message);
  return cfg.value;
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-quic',
      '--no-first-run',
    ],
  });
}

export interface Watched {
  readonly page: Page;
  readonly errors: string[];
}

/** A page whose console errors and page errors are recorded. */
export async function watchedPage(ctx: BrowserContext): Promise<Watched> {
  const page = await ctx.newPage();
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  return { page, errors };
}

/** Waits until the app says it is idle (no fetch or render in flight). */
export async function idle(page: Page, timeoutMs = 30_000): Promise<void> {
  await page.waitForFunction(() => document.body.dataset['mqdIdle'] === 'true', undefined, {
    timeout: timeoutMs,
  });
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: false });
  return path;
}
