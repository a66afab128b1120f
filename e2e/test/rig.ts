// The set-up every e2e file shares: Debian's chromium for the file, the built dashboard checked
// before anything starts, and per test the pages, aggregators and hung jobs it opened, closed after
// it whatever happened (pages first, then everything else in reverse order of creation). Also the
// steps of the attach form the tests drive: attach (failing with the form's coded error, not a
// timeout) and take a snapshot.
import { existsSync } from 'node:fs';
import { type LocalServe, serveWithLocalAgent } from '@mqd/cli';
import type { ServerConfig } from '@mqd/server';
import { disposeAll, type FixtureJob, type LaunchOptions, launchFixture } from '@mqd/testkit';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll } from 'vitest';
import {
  e2eServerConfig,
  idle,
  launchChromium,
  screenshot,
  type Watched,
  WEB_ROOT,
  watchedPage,
} from './browser.js';

export interface Viewport {
  readonly width: number;
  readonly height: number;
}

export const DEFAULT_VIEWPORT: Viewport = { width: 1280, height: 800 };

export interface Rig {
  /** The file's chromium (launched in beforeAll). */
  browser(): Browser;
  /** A fresh context (fixed viewport, device scale 1) at `url`, idle; closed after the test. */
  openPage(url: string, viewport?: Viewport): Promise<Watched>;
  /**
   * The aggregator with its local agent (the real reader and locator) on an ephemeral loopback
   * port, serving the built dashboard; closed after the test.
   */
  serveLocal(config?: ServerConfig): Promise<LocalServe>;
  /** A hung fixture job (@mqd/testkit launchFixture), disposed after the test. */
  launch(o: LaunchOptions): Promise<FixtureJob>;
  /** Runs `f` after the test, after the pages are closed, in reverse order of registration. */
  cleanup(f: () => unknown): void;
}

/**
 * Registers the file's hooks and returns its rig; call once, at the top level of a test file.
 * `adminToken` is the admin token of the aggregators `serveLocal` starts.
 */
export function e2eRig(o: { readonly adminToken: string }): Rig {
  let browser: Browser | null = null;
  const pages: Watched[] = [];
  const cleanups: Array<() => unknown> = [];

  beforeAll(async () => {
    if (!existsSync(`${WEB_ROOT}/index.html`))
      throw new Error(`MQD_E_PROVISION: the dashboard is not built (${WEB_ROOT}): run npm run build`);
    browser = await launchChromium();
  });
  afterEach(async () => {
    const problems: unknown[] = [];
    const steps = [
      ...pages.splice(0).map((p) => () => p.page.context().close()),
      ...cleanups.splice(0).reverse(),
    ];
    // Every step runs, whatever the ones before it threw.
    for (const f of steps) {
      try {
        await f();
      } catch (e) {
        problems.push(e);
      }
    }
    if (problems.length > 0) throw new AggregateError(problems, 'e2e teardown failed');
  });
  afterAll(async () => {
    await browser?.close();
    await disposeAll();
  });

  const theBrowser = (): Browser => {
    if (browser === null) throw new Error('chromium was not launched (beforeAll failed?)');
    return browser;
  };
  return {
    browser: theBrowser,
    openPage: async (url, viewport = DEFAULT_VIEWPORT) => {
      const ctx = await theBrowser().newContext({ viewport: { ...viewport }, deviceScaleFactor: 1 });
      const w = await watchedPage(ctx);
      pages.push(w);
      await w.page.goto(url);
      await idle(w.page);
      return w;
    },
    serveLocal: async (config = e2eServerConfig(o.adminToken)) => {
      const local = await serveWithLocalAgent(config);
      cleanups.push(() => local.close());
      return local;
    },
    launch: async (lo) => {
      const job = await launchFixture(lo);
      cleanups.push(() => job.dispose());
      return job;
    },
    cleanup: (f) => {
      cleanups.push(f);
    },
  };
}

/** What the attach form is given: exactly one of a starter pid, a Slurm job id, a core directory. */
export type AttachTarget =
  | { readonly starterPid: number; readonly host?: string }
  | { readonly slurmJob: string | number; readonly host?: string }
  | { readonly coresDir: string; readonly host?: string };

/** Pages whose attach opened the job's first snapshot, not shown by a takeSnapshot yet. */
const firstSnapshotOf = new WeakSet<Page>();

/**
 * Types `target` into the attach form and submits it. The page takes the job's first snapshot and
 * opens it in the matrix; this waits for that, then goes back to the Jobs view and waits for
 * `row` (default: any job row), so the next takeSnapshot shows that first snapshot instead of
 * taking another. An attach or a first snapshot the server refuses shows a coded error, and this
 * fails with it (after a screenshot `${name}-attach-error`) instead of a timeout.
 */
export async function attach(
  page: Page,
  target: AttachTarget,
  name: string,
  row: Locator = page.getByTestId('job-row'),
): Promise<void> {
  if ('starterPid' in target) await page.getByTestId('attach-pid').fill(String(target.starterPid));
  else if ('slurmJob' in target) await page.getByTestId('attach-slurm').fill(String(target.slurmJob));
  else await page.getByTestId('attach-cores').fill(target.coresDir);
  if (target.host !== undefined) await page.getByTestId('attach-host').fill(target.host);
  await page.getByTestId('attach-button').click();
  await page.getByTestId('matrix-canvas').or(page.getByTestId('error')).first().waitFor({ timeout: 120_000 });
  if (await page.getByTestId('error').isVisible()) {
    await screenshot(page, `${name}-attach-error`);
    throw new Error(`attach failed: ${await page.getByTestId('error').first().innerText()}`);
  }
  await idle(page);
  firstSnapshotOf.add(page);
  await page.keyboard.press('j');
  await row.first().waitFor();
  await idle(page);
}

/**
 * Takes a snapshot of the first listed job (the one just attached) and waits for its matrix; right
 * after attach, opens the first snapshot the attach took instead (the matrix key).
 */
export async function takeSnapshot(page: Page): Promise<void> {
  if (firstSnapshotOf.delete(page)) {
    await page.keyboard.press('m');
    await page.getByTestId('matrix-canvas').waitFor();
    await idle(page);
    return;
  }
  await page.getByTestId('take-snapshot').first().click();
  // A new snapshot opens in the matrix.
  await page.getByTestId('matrix-canvas').waitFor();
  await idle(page);
}

/** A JSON client of the server at `url`, logged in with `token`; a non-2xx answer throws with its body. */
export async function apiAs(
  url: string,
  token: string,
): Promise<(method: 'GET' | 'POST', path: string, body?: object) => Promise<unknown>> {
  const login = await fetch(`${url}/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  if (!login.ok) throw new Error(`login: HTTP ${login.status} ${await login.text()}`);
  const { sessionToken } = (await login.json()) as { sessionToken: string };
  return async (method, path, body) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${sessionToken}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const json: unknown = await res.json();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
}
