// The REST API and the /ui events against their spec (packages/model api-spec.ts), end to end
// through inject() and a real socket.io browser connection: every route of API_ROUTES is
// called, every reply is checked against the spec (helpers.ts does that for every inject of
// every test), and the normalised replies are compared with golden files in test/golden/.
// Ids, tokens, times, ports, sizes, durations and digests are replaced by placeholders.
// Rebaseline after an intended change: UPDATE_GOLDEN=1 npx vitest run --project unit apps/server/test/api-spec.test.ts
// A mismatch writes <name>.actual.json next to the golden file.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  API_ROUTES,
  type ApiResponse,
  decodeOverview,
  decodeResponse,
  decodeUiEvent,
  isUiEventName,
  JobId,
  type RouteName,
  UI_EVENT_NAMES,
} from '@mqd/model';
import type { LightMyRequestResponse } from 'fastify';
import { io, type Socket } from 'socket.io-client';
import { describe, expect, it } from 'vitest';
import { startSyntheticAgents } from '../src/synthetic/synthetic-agents.js';
import {
  ADMIN_TOKEN,
  AGENT_TOKEN,
  bodyJson,
  cleanupAfterEach,
  routeBody,
  routeOf,
  specViolation,
  sqliteOf,
  startServer,
  type TestServer,
  waitFor,
} from './helpers.js';

const GOLDEN_DIR = join(import.meta.dirname, 'golden');
const UPDATE = process.env['UPDATE_GOLDEN'] === '1';

const cleanup = cleanupAfterEach();

/** Volatile values seen in replies -> stable placeholders, in order of first appearance. */
class Normaliser {
  private readonly names = new Map<string, string>();
  private readonly counts = new Map<string, number>();
  constructor(private readonly origin: string) {}

  /** Remember `value` (an id or token) as `<kind-N>`. */
  name(kind: string, value: string): void {
    if (value === '' || this.names.has(value)) return;
    const n = (this.counts.get(kind) ?? 0) + 1;
    this.counts.set(kind, n);
    this.names.set(value, `<${kind}-${n}>`);
  }

  text(s: string): string {
    let out = s.split(this.origin).join('<origin>');
    // Longest first, so an id that contains another is replaced whole.
    for (const [v, p] of [...this.names].sort((a, b) => b[0].length - a[0].length))
      out = out.split(v).join(p);
    return out.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>');
  }

  value(v: unknown, key = ''): unknown {
    if (VOLATILE_NUMBERS.has(key) && typeof v === 'number') return '<n>';
    if (key === 'digest' && typeof v === 'string') return '<sha256>';
    if (key === 'snapshot' && typeof v === 'object' && v !== null && 'ranks' in v) {
      // The snapshot format has its own goldens (packages/model); here only its place matters.
      return `<JobSnapshot: ${(v as { ranks: unknown[] }).ranks.length} ranks>`;
    }
    if (typeof v === 'string') return this.text(v);
    if (Array.isArray(v)) return v.map((x) => this.value(x));
    if (typeof v === 'object' && v !== null) {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, this.value(x, k)]));
    }
    return v;
  }
}

const VOLATILE_NUMBERS = new Set([
  'durationMicros',
  'bytes',
  'storedBytes',
  'rssBytes',
  'heapUsedBytes',
  'uptimeSeconds',
  'loadAverage1m',
  'activeRequests',
  'messages',
  'pending',
]);

/** Compares `actual` with golden/<name>.json (or writes it under UPDATE_GOLDEN=1). */
/** A reply's body for its golden: the JSON, or a binary overview's JSON parts, its first level's blocks and its edge count. */
function goldenBody(route: RouteName, res: LightMyRequestResponse): unknown {
  const body = routeBody(route, res);
  if (!(body instanceof Uint8Array)) return body ?? null;
  const d = decodeOverview(body);
  if (!d.ok) return `<not an overview: ${d.error}>`;
  const { edges, firstLevel, ...rest } = d.value;
  return {
    ...rest,
    firstLevel: firstLevel && {
      level: firstLevel.level,
      dim: firstLevel.dim,
      col: [...firstLevel.col],
      count: [...firstLevel.count],
      maxCount: firstLevel.maxCount,
    },
    edges: { worldSize: edges.worldSize, length: edges.length, comms: edges.comms },
  };
}

function expectGolden(name: string, actual: unknown): void {
  const file = join(GOLDEN_DIR, `${name}.json`);
  const text = `${JSON.stringify(actual, null, 2)}\n`;
  const actualFile = join(GOLDEN_DIR, `${name}.actual.json`);
  if (UPDATE) {
    mkdirSync(GOLDEN_DIR, { recursive: true });
    writeFileSync(file, text);
    rmSync(actualFile, { force: true });
    return;
  }
  // Compared as JSON, so a formatter that rewraps the file changes nothing.
  const expected = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as unknown) : null;
  const got = JSON.parse(text) as unknown;
  if (expected !== null && JSON.stringify(expected) === JSON.stringify(got)) {
    rmSync(actualFile, { force: true });
    return;
  }
  writeFileSync(actualFile, text);
  expect(
    got,
    expected === null
      ? `no golden file ${name}.json: run with UPDATE_GOLDEN=1 to record it`
      : `${name}.json differs (see ${name}.actual.json; UPDATE_GOLDEN=1 rebaselines)`,
  ).toEqual(expected);
}

interface Call {
  readonly method: string;
  readonly url: string;
  readonly res: LightMyRequestResponse;
}

/** Calls the API through inject(), recording each reply under its route for the goldens. */
function recorder(s: TestServer) {
  const calls: Call[] = [];
  const call = async (
    method: 'GET' | 'POST' | 'DELETE',
    url: string,
    opts: { headers?: Record<string, string>; payload?: object } = {},
  ) => {
    const res = await s.app.inject({
      method,
      url,
      headers: opts.headers ?? { authorization: `Bearer ${ADMIN_TOKEN}` },
      ...(opts.payload === undefined ? {} : { payload: opts.payload }),
    });
    calls.push({ method, url, res });
    return res;
  };
  /** The success body of `route`, decoded as the web decodes it. */
  const ok = async <N extends RouteName>(
    route: N,
    url: string,
    opts: { headers?: Record<string, string>; payload?: object } = {},
  ): Promise<ApiResponse<N>> => {
    const spec = API_ROUTES[route];
    const res = await call(spec.method, url, opts);
    expect(res.statusCode, `${spec.method} ${url}: ${res.body.slice(0, 300)}`).toBe(spec.status);
    if (spec.status === 204) return null as ApiResponse<N>;
    const d = decodeResponse(route, routeBody(route, res));
    if (!d.ok) throw new Error(d.error.message);
    return d.value;
  };
  return { calls, call, ok };
}

describe('the REST API and /ui events against api-spec.ts', () => {
  it('answers every route as the spec says, with the golden bodies', async () => {
    const s = await startServer({ hungSnapshots: 2 });
    cleanup.push(() => s.close());
    const norm = new Normaliser(s.url);
    norm.name('token', ADMIN_TOKEN);

    // A browser on /ui first, so it hears everything that follows.
    const ui: Socket = io(`${s.url}/ui`, {
      transports: ['websocket'],
      reconnection: false,
      // Its own connection: the synthetic agents in this process must not share (and close) it.
      forceNew: true,
      auth: { token: ADMIN_TOKEN },
    });
    cleanup.push(() => {
      ui.disconnect();
    });
    const events: { name: string; payload: unknown }[] = [];
    ui.onAny((name: string, payload: unknown) => events.push({ name, payload }));
    await new Promise<void>((r) => ui.once('connect', () => r()));

    const sim = startSyntheticAgents({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      agents: 1,
      ranksPerAgent: 2,
      uid: 1000,
      starterPid: 900,
      hostPrefix: 'g-',
    });
    cleanup.push(() => sim.dispose());
    await sim.whenConnected();
    await waitFor(() => s.app.mqd.hub.seenStarters().length === 1, 'the agent reporting its starter');
    await waitFor(() => s.app.mqd.hub.agents()[0]?.health != null, 'a status report');

    const { calls, call, ok } = recorder(s);
    const health = await ok('health', '/api/health', { headers: {} });
    expect(health.agents).toBe(1);
    const login = await ok('login', '/api/login', { headers: {}, payload: { token: ADMIN_TOKEN } });
    norm.name('session', login.sessionToken);
    const user = await ok('createUser', '/api/admin/users', { payload: { name: 'alice', uid: 1000 } });
    norm.name('token', user.token);
    const alice = { authorization: `Bearer ${user.token}` };
    await ok('me', '/api/me', { headers: alice });
    const before = await ok('jobs', '/api/jobs');
    expect(before.starters).toEqual([{ host: 'g-0', starterPid: 900, uid: 1000, command: sim.job.command }]);

    const attached = await ok('attach', '/api/jobs/attach', { headers: alice, payload: { starterPid: 900 } });
    const jobId = attached.job.id;
    norm.name('job', jobId);
    await ok('job', `/api/jobs/${jobId}`, { headers: alice });
    const first = await ok('takeSnapshot', `/api/jobs/${jobId}/snapshots`, { headers: alice });
    norm.name('snapshot', first.snapshot.id);
    const second = await ok('takeSnapshot', `/api/jobs/${jobId}/snapshots`, { headers: alice });
    norm.name('snapshot', second.snapshot.id);
    const list = await ok('jobSnapshots', `/api/jobs/${jobId}/snapshots`, { headers: alice });
    expect(list.snapshots.map((m) => m.id)).toEqual([second.snapshot.id, first.snapshot.id]);
    await ok('jobs', '/api/jobs', { headers: alice });
    await ok('snapshot', `/api/snapshots/${second.snapshot.id}`, { headers: alice });
    await ok('snapshotOverview', `/api/snapshots/${second.snapshot.id}/overview`, { headers: alice });
    await ok('snapshotValues', `/api/snapshots/${second.snapshot.id}/values`, { headers: alice });
    await ok('exportSnapshot', `/api/snapshots/${second.snapshot.id}/export`, { headers: alice });
    const share = await ok('share', `/api/snapshots/${second.snapshot.id}/share`, {
      headers: alice,
      payload: { expiresInSeconds: 600 },
    });
    norm.name('share', share.id);
    await ok('shares', '/api/shares', { headers: alice });
    await ok('shared', `/api/shared/${share.id}`, { headers: {} });
    await ok('sharedOverview', `/api/shared/${share.id}/overview`, { headers: {} });
    await ok('revokeShare', `/api/shares/${share.id}`, { headers: alice });
    await ok('agents', '/api/admin/agents');
    const hung = await ok('hung', '/api/admin/hung');
    expect(hung.jobs.map((j) => j.jobId)).toEqual([jobId]);
    // The hang watch: the policy (admins; replacing it tells every browser: fleet.changed),
    // and the fleet as a user sees it.
    const policy = await ok('watchPolicy', '/api/admin/watch');
    const changed = await ok('setWatchPolicy', '/api/admin/watch', {
      payload: { ...policy, periodSeconds: 600, partitions: ['batch'] },
    });
    expect(changed).toEqual({ ...policy, periodSeconds: 600, partitions: ['batch'] });
    await ok('fleet', '/api/fleet', { headers: alice });
    await ok('activity', '/api/admin/activity?limit=50');
    const openapi = await ok('openapi', '/api/openapi.json', { headers: {} });
    await ok('revokeToken', '/api/admin/users/alice/token');
    await ok('logout', '/api/logout', { headers: { authorization: `Bearer ${login.sessionToken}` } });

    // Coded errors, one of each kind a client meets.
    await call('GET', '/api/jobs', { headers: {} });
    await call('GET', `/api/jobs/${jobId}`, { headers: alice }); // alice's token was revoked
    await call('GET', '/api/snapshots/nope');
    await call('POST', '/api/jobs/attach', { payload: { starterPid: -3 } });
    // Core directories are off unless an admin allows some (--core-dir): the refusal says so.
    await call('POST', '/api/jobs/attach', { payload: { coresDir: '/var/crash/job-1' } });
    await call('GET', '/api/nowhere');
    // A snapshot that fails (the disk filled: the store turned read-only) is heard on /ui.
    sqliteOf(s.app).readOnlyReason = 'SQLITE_FULL: injected by the test';
    await call('POST', `/api/jobs/${jobId}/snapshots`);
    sqliteOf(s.app).readOnlyReason = null;

    await sim.dispose();
    await waitFor(
      () => events.some((e) => e.name === 'agent.disconnected'),
      `agent.disconnected on /ui (heard: ${events.map((e) => e.name).join(', ')}; ui connected: ${ui.connected})`,
    );

    // Every route was called, and every reply kept the spec.
    const called = new Set(calls.map((c) => routeOf(c.method, c.url)));
    expect([...Object.keys(API_ROUTES)].filter((r) => !called.has(r as RouteName))).toEqual([]);
    for (const c of calls) expect(specViolation(c.method, c.url, c.res)).toBeNull();

    // The OpenAPI document has exactly the spec's routes (hidden ones aside).
    const paths = Object.keys(openapi.paths).sort();
    const specPaths = Object.values(API_ROUTES)
      .filter((r) => !('hide' in r))
      .map((r) => `/api${r.url.replace(/:([A-Za-z]+)/g, '{$1}')}`);
    expect(paths).toEqual([...new Set(specPaths)].sort());

    // Every /ui event has the spec's shape; each kind was heard.
    for (const e of events) {
      expect(isUiEventName(e.name), e.name).toBe(true);
      if (!isUiEventName(e.name)) continue;
      const d = decodeUiEvent(e.name, e.payload);
      expect(d.ok, `${e.name}: ${d.ok ? '' : d.error.message}`).toBe(true);
    }
    expect([...new Set(events.map((e) => e.name))].sort()).toEqual([...UI_EVENT_NAMES].sort());

    // Goldens: the first success of each route, the errors, the first event of each kind.
    const firstOf = new Map<string, Call>();
    for (const c of calls) {
      const r = routeOf(c.method, c.url);
      if (r !== null && c.res.statusCode < 400 && !firstOf.has(r)) firstOf.set(r, c);
    }
    for (const [route, c] of firstOf) {
      if (route === 'openapi') continue;
      expectGolden(`${route}`, {
        request: norm.text(`${c.method} ${c.url}`),
        status: c.res.statusCode,
        body: norm.value(goldenBody(route as RouteName, c.res)),
      });
    }
    // The snapshot schema is snapshot-spec.ts's (with goldens of its own); the rest is this API's.
    const doc = openapi as { components?: { schemas?: Record<string, unknown> } };
    expectGolden('openapi', {
      ...(norm.value(openapi) as object),
      components: {
        ...doc.components,
        schemas: {
          ...doc.components?.schemas,
          JobSnapshot: '<JobSnapshot: packages/model snapshot-spec.ts>',
        },
      },
    });
    expectGolden(
      'errors',
      calls
        .filter((c) => c.res.statusCode >= 400)
        .map((c) => ({
          request: norm.text(`${c.method} ${c.url}`),
          status: c.res.statusCode,
          body: norm.value(bodyJson(c.res)),
        })),
    );
    expectGolden(
      'ui-events',
      Object.fromEntries(
        [...UI_EVENT_NAMES].sort().map((n) => [n, norm.value(events.find((e) => e.name === n)?.payload)]),
      ),
    );
  });

  it("lists a job's snapshots with the summary the dashboard shows (the ids the server sent)", async () => {
    const s = await startServer();
    cleanup.push(() => s.close());
    const sim = startSyntheticAgents({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      agents: 1,
      ranksPerAgent: 2,
      uid: 0,
      starterPid: 901,
      hostPrefix: 'sum-',
    });
    cleanup.push(() => sim.dispose());
    await sim.whenConnected();
    const { ok } = recorder(s);
    const job = (await ok('attach', '/api/jobs/attach', { payload: { host: 'sum-0', starterPid: 901 } })).job;
    const taken = (await ok('takeSnapshot', `/api/jobs/${job.id}/snapshots`)).snapshot;
    // The ids exactly as the server sent them, and the body decoded by decodeResponse: the
    // function apps/web's api.ts decodes GET /api/jobs/:id/snapshots with.
    const res = await s.app.inject({
      method: 'GET',
      url: `/api/jobs/${encodeURIComponent(job.id)}/snapshots`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(res.statusCode).toBe(200);
    const decoded = decodeResponse('jobSnapshots', bodyJson(res));
    expect(decoded.ok, decoded.ok ? '' : decoded.error.message).toBe(true);
    if (!decoded.ok) return;
    const [entry] = decoded.value.snapshots;
    expect(entry?.id).toBe(taken.id);
    expect(entry?.jobId).toBe(JobId(job.id));
    // The summary fields the jobs view prints are there, with real numbers.
    expect(entry).toMatchObject({ ranks: 2, ok: 2, errors: 0, missing: 0, partial: false });
    expect(
      (entry?.pendingSends ?? 0) + (entry?.pendingReceives ?? 0) + (entry?.unexpected ?? 0),
    ).toBeGreaterThan(0);
    expect(entry?.digest).toMatch(/^[0-9a-f]{64}$/);
    // What the old dashboard read (a nested `summary`) is not part of the reply.
    expect(bodyJson(res)).not.toHaveProperty(['snapshots', 0, 'summary']);
  });

  it('refuses, in every test, a reply that breaks the spec (the check helpers.ts runs on inject)', () => {
    const reply = (statusCode: number, body: unknown) => {
      const raw = Buffer.from(JSON.stringify(body));
      return {
        statusCode,
        headers: {},
        body: raw.toString(),
        rawPayload: raw,
      } as unknown as LightMyRequestResponse;
    };
    const nested = { snapshots: [{ id: 's1', takenAt: '2026-01-01T00:00:00.000Z', summary: { ranks: 2 } }] };
    expect(specViolation('GET', '/api/jobs/j1/snapshots?limit=5', reply(200, nested))).toMatch(
      /GET \/api\/jobs\/j1\/snapshots\?limit=5 -> 200: .*\/snapshots\/0\//,
    );
    expect(specViolation('POST', '/api/jobs/j1/snapshots', reply(200, {}))).toMatch(/the spec says 201/);
    expect(specViolation('GET', '/api/jobs', reply(500, { message: 'boom' }))).toMatch(
      /not an ApiError body/,
    );
    expect(
      specViolation(
        'GET',
        '/api/jobs',
        reply(403, { statusCode: 401, code: 'MQD_E_FORBIDDEN', message: 'x' }),
      ),
    ).toMatch(/body says statusCode 401/);
    expect(specViolation('GET', '/api/unknown', reply(200, {}))).toMatch(/no route of API_ROUTES/);
    expect(specViolation('GET', '/index.html', reply(200, {}))).toBeNull();
  });
});
