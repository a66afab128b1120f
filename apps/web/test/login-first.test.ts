// A login link (`/?token=…&view=matrix&snap=…`, as the demo prints) asks for its first overview
// only once the login has given the page a session: the early fetch is not started for it, and
// one started before a login is never used after it.
import { readFileSync } from 'node:fs';
import { buildOverview, encodeOverview, SnapshotId, syntheticRingDeadlock } from '@mqd/model';
import { afterEach, describe, expect, it } from 'vitest';
import { createApi } from '../src/api.js';

const script = readFileSync(`${import.meta.dirname}/../public/early-overview.js`, 'utf8');

/** Runs public/early-overview.js in a page at `href`; the fetches it starts. */
function runEarly(href: string): { fetched: string[]; started: boolean } {
  const fetched: string[] = [];
  const u = new URL(href);
  const page: Record<string, unknown> = {};
  const fakeFetch = (path: string) => {
    fetched.push(path);
    return Promise.resolve(new Response(null, { status: 204 }));
  };
  // The script's globals, as a page gives them.
  new Function('location', 'URLSearchParams', 'fetch', 'globalThis', script)(
    { search: u.search, pathname: u.pathname },
    URLSearchParams,
    fakeFetch,
    page,
  );
  return { fetched, started: page['__mqdEarlyOverview'] !== undefined };
}

describe('the early overview', () => {
  it('starts for a snapshot link of a page that has its session', () => {
    expect(runEarly('http://h/?view=matrix&job=j1&snap=s7')).toEqual({
      fetched: ['/api/snapshots/s7/overview'],
      started: true,
    });
  });

  it('does not start for a login link: it would leave without the session (401)', () => {
    expect(runEarly('http://h/?token=abc&view=matrix&job=j1&snap=s7')).toEqual({
      fetched: [],
      started: false,
    });
  });
});

describe('the first overview after a login', () => {
  const g = globalThis as { __mqdEarlyOverview?: { path: string; response: Promise<Response> } };
  afterEach(() => {
    delete g.__mqdEarlyOverview;
  });

  it('is asked again with the session, not taken from a fetch that left before the login', async () => {
    const body = encodeOverview(buildOverview(syntheticRingDeadlock({ ranks: 8, seed: 3 })));
    const unauthenticated = { statusCode: 401, code: 'MQD_E_UNAUTHENTICATED', message: 'no session' };
    g.__mqdEarlyOverview = {
      path: '/api/snapshots/s7/overview',
      response: Promise.resolve(new Response(JSON.stringify(unauthenticated), { status: 401 })),
    };
    const login = {
      user: { name: 'alice', uid: 1000, admin: false },
      sessionToken: 'sess',
      expiresAt: '2026-01-02T00:00:00.000Z',
    };
    const asked: string[] = [];
    const fetchImpl = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
      const key = `${init?.method ?? 'GET'} ${String(input)}`;
      asked.push(key);
      if (key === 'POST /api/login') return new Response(JSON.stringify(login), { status: 200 });
      if (key === 'GET /api/snapshots/s7/overview')
        return new Response(new Blob([body.slice()]), { status: 200 });
      throw new TypeError('fetch failed');
    };
    const api = createApi({ fetch: fetchImpl as typeof fetch });
    expect((await api.login('abc')).ok).toBe(true);
    const r = await api.overview(SnapshotId('s7'), false);
    expect(r.ok ? r.value.head.rankCount : r.error.code).toBe(8);
    expect(asked).toEqual(['POST /api/login', 'GET /api/snapshots/s7/overview']);
  });
});
