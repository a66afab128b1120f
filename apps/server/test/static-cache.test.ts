// The dashboard's files and how long a browser may keep them: a built asset named by its content
// hash is immutable (a returning page reuses it and V8's code cache: a faster first render);
// index.html, which names the current assets, the single-page routes and the unhashed files are
// asked again each time, so a new build shows at once.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cacheControlOf } from '../src/http/app.js';
import { cleanupAfterEach, startServer } from './helpers.js';

const cleanup = cleanupAfterEach();
const root = mkdtempSync(join(tmpdir(), 'mqd-web-'));
mkdirSync(join(root, 'assets'));
writeFileSync(join(root, 'index.html'), '<!doctype html><script src="/assets/main-Ab3_x-9Z.js"></script>');
writeFileSync(join(root, 'assets', 'main-Ab3_x-9Z.js'), 'export {};');
writeFileSync(join(root, 'assets', 'styles-Zz9_aa00.css'), 'body{}');
writeFileSync(join(root, 'early-overview.js'), ';');
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('cache-control of the dashboard files', () => {
  it('hashed assets are immutable; index.html, the app routes and unhashed files are revalidated', async () => {
    const s = await startServer({ webRoot: root });
    cleanup.push(() => s.close());
    const get = async (url: string) => {
      const r = await s.app.inject({ method: 'GET', url });
      return { status: r.statusCode, cache: r.headers['cache-control'] };
    };
    expect(await get('/assets/main-Ab3_x-9Z.js')).toEqual({
      status: 200,
      cache: 'public, max-age=31536000, immutable',
    });
    expect(await get('/assets/styles-Zz9_aa00.css')).toEqual({
      status: 200,
      cache: 'public, max-age=31536000, immutable',
    });
    for (const url of ['/', '/index.html', '/s/abc123', '/early-overview.js']) {
      expect(await get(url), url).toEqual({ status: 200, cache: 'no-cache' });
    }
  });

  it('API answers are never stored (they hold users’ data)', async () => {
    const s = await startServer({ webRoot: root });
    cleanup.push(() => s.close());
    for (const url of ['/api/jobs', '/api/health', '/api/nothing-here']) {
      const r = await s.app.inject({ method: 'GET', url, headers: s.admin });
      expect(r.headers['cache-control'], url).toBe('no-store');
    }
  });

  it('only a content-hash name under assets/ counts as immutable', () => {
    expect(cacheControlOf('/srv/web/assets/pyramid-worker-Bcvw-bl6.js')).toBe(
      'public, max-age=31536000, immutable',
    );
    expect(cacheControlOf('/srv/web/assets/app.js')).toBe('no-cache');
    expect(cacheControlOf('/srv/web/assets/name-short.js')).toBe('no-cache');
    expect(cacheControlOf('/srv/web/main-Ab3_x-9Z.js')).toBe('no-cache');
    expect(cacheControlOf('/srv/web/index.html')).toBe('no-cache');
  });
});
