import {
  type ApiJob,
  type ApiResponse,
  type ApiSnapshotMeta,
  buildOverview,
  encodeOverview,
  JobId,
  type OverviewFirst,
  overviewFirstLength,
  Pid,
  SnapshotId,
  syntheticRingDeadlock,
  syntheticStacksJob,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { createApi } from '../src/api.js';
import { fourRanks } from './fixtures.js';

interface Call {
  url: string;
  method: string;
  body: unknown;
}

/** A fetch that answers from a table and records what was asked. */
function fakeFetch(routes: Record<string, { status: number; body?: unknown; raw?: string }>) {
  const calls: Call[] = [];
  const impl = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = String(input);
    const method = init?.method ?? 'GET';
    calls.push({ url, method, body: typeof init?.body === 'string' ? JSON.parse(init.body) : undefined });
    const r = routes[`${method} ${url}`];
    if (!r) throw new TypeError('fetch failed');
    // 204 may not carry a body, not even an empty one.
    const text = r.raw ?? (r.body === undefined ? null : JSON.stringify(r.body));
    return new Response(r.status === 204 ? null : text, { status: r.status });
  };
  return { calls, fetch: impl as typeof fetch };
}

// Bodies typed by the API spec (packages/model api-spec.ts): they are what the server sends,
// and a field the spec changes changes them too (they stop compiling).
const meta: ApiSnapshotMeta = {
  id: SnapshotId('s1'),
  jobId: JobId('j1'),
  takenAt: '2026-01-01T00:00:00.000Z',
  durationMicros: 1200,
  createdBy: 'alice',
  partial: true,
  ranks: 4,
  ok: 3,
  errors: 0,
  missing: 1,
  missingRanks: [3],
  pendingSends: 2,
  pendingReceives: 5,
  unexpected: 1,
  digest: 'ab'.repeat(32),
  bytes: 4096,
  storedBytes: 512,
};

const job: ApiJob = {
  id: JobId('j7'),
  host: 'n1',
  starterPid: 4242,
  uid: 1000,
  command: 'mpirun -n 4 ./a.out',
  method: 'mpir-proctable',
  rankCount: 4,
  hosts: [{ host: 'n1', ranks: 4, agentConnected: true }],
  createdAt: '2026-01-01T00:00:00.000Z',
  createdBy: 'alice',
  endedAt: null,
  state: 'hung',
  lastSnapshotAt: meta.takenAt,
  lastSnapshot: meta,
};

const jobsBody: ApiResponse<'jobs'> = { jobs: [job], starters: [] };

describe('api client', () => {
  it('decodes GET /api/jobs as the server sends it, and refuses any other shape', async () => {
    const f = fakeFetch({ 'GET /api/jobs': { status: 200, body: jobsBody } });
    const r = await createApi({ fetch: f.fetch }).jobs();
    expect(r.ok && r.value).toEqual([
      {
        id: 'j7',
        starterPid: 4242,
        host: 'n1',
        uid: 1000,
        command: 'mpirun -n 4 ./a.out',
        state: 'hung',
        user: null,
        nodes: ['n1'],
        since: null,
        sinceSnapshots: 0,
        unchangedSince: null,
        unchangedSnapshots: 0,
        diagnosis: '',
        pausedUntil: null,
        lastSnapshotAt: '2026-01-01T00:00:00.000Z',
        ranks: 4,
        coresDir: null,
      },
    ]);
    // A job of core files carries its directory.
    const coreJob = fakeFetch({
      'GET /api/jobs': { status: 200, body: { jobs: [{ ...job, coresDir: '/var/crash/j7' }], starters: [] } },
    });
    const rc = await createApi({ fetch: coreJob.fetch }).jobs();
    expect(rc.ok && rc.value[0]?.coresDir).toBe('/var/crash/j7');
    // A bare array is not what the server sends: refused, not guessed at.
    const bare = fakeFetch({ 'GET /api/jobs': { status: 200, body: [job] } });
    const r2 = await createApi({ fetch: bare.fetch }).jobs();
    expect(!r2.ok && r2.error.code).toBe('MQD_E_BAD_RESPONSE');
  });

  it('refuses a job with an unknown state, naming the field', async () => {
    const f = fakeFetch({
      'GET /api/jobs': { status: 200, body: { jobs: [{ ...job, state: 'zombie' }], starters: [] } },
    });
    const r = await createApi({ fetch: f.fetch }).jobs();
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error.code).toBe('MQD_E_BAD_RESPONSE');
      expect(r.error.message).toContain('/jobs/0/state');
    }
  });

  it("shows each snapshot's summary from the fields the server sends (GET /api/jobs/:id/snapshots)", async () => {
    const body: ApiResponse<'jobSnapshots'> = { snapshots: [meta] };
    const f = fakeFetch({ 'GET /api/jobs/j1/snapshots': { status: 200, body } });
    const r = await createApi({ fetch: f.fetch }).snapshots(JobId('j1'));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const [entry] = r.value;
    expect(entry?.id).toBe('s1');
    expect(entry?.takenAt).toBe(meta.takenAt);
    // The jobs view prints these pairs: real numbers, not an empty summary.
    expect(entry?.summary).toEqual({
      ranks: 4,
      ok: 3,
      errors: 0,
      missing: 1,
      'pending sends': 2,
      'pending receives': 5,
      unexpected: 1,
    });
    // The shape the dashboard once expected (a nested `summary`) is not the server's: refused.
    const nested = fakeFetch({
      'GET /api/jobs/j1/snapshots': {
        status: 200,
        body: { snapshots: [{ id: 's1', takenAt: meta.takenAt, summary: { ranks: 4 } }] },
      },
    });
    const r2 = await createApi({ fetch: nested.fetch }).snapshots(JobId('j1'));
    expect(!r2.ok && r2.error.code).toBe('MQD_E_BAD_RESPONSE');
    expect(!r2.ok && r2.error.message).toContain('/snapshots/0/');
  });

  it('validates snapshots against the model schema at the edge', async () => {
    // The aggregator's shape (apps/server, GET /api/snapshots/:id): the summary, then the snapshot.
    const good = { meta, snapshot: fourRanks() };
    const bad = { ...good, snapshot: { ...fourRanks(), schemaVersion: 2 } };
    const f = fakeFetch({
      'GET /api/snapshots/s1': { status: 200, body: good },
      'GET /api/snapshots/s2': { status: 200, body: bad },
    });
    const api = createApi({ fetch: f.fetch });
    const r1 = await api.snapshot(SnapshotId('s1'));
    expect(r1.ok && r1.value.snapshot.ranks.length).toBe(4);
    const r2 = await api.snapshot(SnapshotId('s2'));
    expect(!r2.ok && r2.error.code).toBe('MQD_E_BAD_RESPONSE');
  });

  it('accepts the optional stacks fields (threads, mpiCall, stacksError) and refuses a malformed frame', async () => {
    const withStacks = syntheticStacksJob({ ranks: 4, scenario: 'collective-mismatch' });
    const noStacks = withStacks.ranks.map(({ threads: _t, mpiCall: _c, ...r }, i) =>
      i === 1 ? { ...r, stacksError: { code: 'MQD_E_NO_STACKS', message: 'unwinding failed' } } : r,
    );
    const badFrame = structuredClone(withStacks);
    const t0 = badFrame.ranks[0]?.threads?.[0];
    if (t0) t0.frames = [{ ...(t0.frames[0] ?? { pc: '0x1' }), pc: 'not-hex' } as never];
    const f = fakeFetch({
      'GET /api/snapshots/a': { status: 200, body: { meta, snapshot: withStacks } },
      'GET /api/snapshots/b': { status: 200, body: { meta, snapshot: { ...withStacks, ranks: noStacks } } },
      'GET /api/snapshots/c': { status: 200, body: { meta, snapshot: badFrame } },
    });
    const api = createApi({ fetch: f.fetch });
    const a = await api.snapshot(SnapshotId('a'));
    expect(a.ok && a.value.snapshot.ranks[3]?.mpiCall?.function).toBe('MPI_Allreduce');
    expect(a.ok && a.value.snapshot.ranks[0]?.threads?.[0]?.frames.length).toBeGreaterThan(5);
    const b = await api.snapshot(SnapshotId('b'));
    expect(b.ok && b.value.snapshot.ranks[1]?.stacksError?.code).toBe('MQD_E_NO_STACKS');
    const c = await api.snapshot(SnapshotId('c'));
    expect(!c.ok && c.error.code).toBe('MQD_E_BAD_RESPONSE');
  });

  it("passes the server's coded errors through and adds the model's hint", async () => {
    const f = fakeFetch({
      'POST /api/jobs/attach': {
        status: 422,
        body: { statusCode: 422, code: 'MQD_E_NOT_STARTER', message: 'pid 1 is not a starter' },
      },
      'GET /api/jobs': { status: 401, raw: '' },
    });
    const api = createApi({ fetch: f.fetch });
    const r = await api.attach({ starterPid: Pid(1) });
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error).toMatchObject({ status: 422, code: 'MQD_E_NOT_STARTER' });
      expect(r.error.message).toMatch(
        /^MQD_E_NOT_STARTER: pid 1 is not a starter: this pid is not an MPI starter/,
      );
    }
    expect(f.calls[0]).toMatchObject({ method: 'POST', body: { starterPid: 1 } });
    const r401 = await api.jobs();
    expect(!r401.ok && r401.error.code).toBe('MQD_E_UNAUTHENTICATED');
  });

  it('prints a server message that already begins with its code with the code once', async () => {
    const message = 'MQD_E_DLL_TIMEOUT: reading 4 ranks took over 5000 ms: the DLL did not answer in time';
    const f = fakeFetch({
      'POST /api/jobs/attach': { status: 504, body: { statusCode: 504, code: 'MQD_E_DLL_TIMEOUT', message } },
    });
    const r = await createApi({ fetch: f.fetch }).attach({ starterPid: Pid(1) });
    expect(!r.ok && r.error.message.startsWith(message)).toBe(true);
    expect(!r.ok && r.error.message.split('MQD_E_DLL_TIMEOUT').length - 1).toBe(1);
  });

  it('reports an unreachable server and non-JSON answers as coded errors', async () => {
    const f = fakeFetch({ 'GET /api/health': { status: 200, raw: '<html>' } });
    const api = createApi({ fetch: f.fetch });
    const net = await api.jobs();
    expect(!net.ok && net.error.code).toBe('MQD_E_NETWORK');
    const html = await api.health();
    expect(!html.ok && html.error.code).toBe('MQD_E_BAD_RESPONSE');
  });

  it('sends share and login bodies, and encodes ids in paths', async () => {
    const share: ApiResponse<'share'> = {
      id: 'xyz',
      url: '/s/xyz',
      apiUrl: '/api/shared/xyz',
      expiresAt: '2026-01-01T01:00:00.000Z',
    };
    const login: ApiResponse<'login'> = {
      user: { name: 'alice', uid: 1000, admin: false },
      sessionToken: 'sess',
      expiresAt: '2026-01-02T00:00:00.000Z',
    };
    const taken = { ...meta, id: SnapshotId('9'), jobId: JobId('j 1') };
    const f = fakeFetch({
      'POST /api/snapshots/a%2Fb/share': { status: 201, body: share },
      'POST /api/login': { status: 200, body: login },
      // POST answers with the summary; the client reads the snapshot back.
      'POST /api/jobs/j%201/snapshots': { status: 201, body: { snapshot: taken } },
      'GET /api/snapshots/9': { status: 200, body: { meta: taken, snapshot: fourRanks() } },
    });
    const api = createApi({ fetch: f.fetch });
    const r = await api.share(SnapshotId('a/b'), 3600);
    expect(r.ok && r.value).toEqual({ url: '/s/xyz', id: 'xyz' });
    expect(f.calls[0]?.body).toEqual({ expiresInSeconds: 3600 });
    expect((await api.login('t0k')).ok).toBe(true);
    expect(f.calls[1]?.body).toEqual({ token: 't0k' });
    const snap = await api.takeSnapshot(JobId('j 1'));
    expect(snap.ok && snap.value.id).toBe('9');
    expect(snap.ok && snap.value.snapshot.ranks.length).toBe(4);
  });
});

describe('overview read as it arrives', () => {
  const body = encodeOverview(buildOverview(syntheticRingDeadlock({ ranks: 64, seed: 9 })));
  const firstEnd = overviewFirstLength(body) ?? 0;

  /** A fetch whose body sends the first part, then the rest only once `release` is called. */
  function streamingFetch(bytes: Uint8Array) {
    let release = () => {};
    const released = new Promise<void>((r) => {
      release = r;
    });
    const impl = async (): Promise<Response> =>
      new Response(
        new ReadableStream<Uint8Array>({
          async start(c) {
            // The first part in two pieces (the header on its own), the rest in 1 KB pieces.
            c.enqueue(bytes.slice(0, 10));
            c.enqueue(bytes.slice(10, firstEnd));
            await released;
            for (let at = firstEnd; at < bytes.length; at += 1024) c.enqueue(bytes.slice(at, at + 1024));
            c.close();
          },
        }),
        { status: 200 },
      );
    return { fetch: impl as typeof fetch, release: () => release() };
  }

  it('gives the first part (explanation, first level) before the edge table has arrived, then the whole', async () => {
    expect(firstEnd).toBeGreaterThan(0);
    expect(firstEnd).toBeLessThan(body.length);
    const f = streamingFetch(body);
    const api = createApi({ fetch: f.fetch });
    const firsts: OverviewFirst[] = [];
    const whole = api.overview('s1', false, undefined, (first) => {
      firsts.push(first);
      // The rest of the body is sent only now: the first part cannot have waited for it.
      f.release();
      return undefined;
    });
    const r = await whole;
    if (!r.ok) throw new Error(r.error.message);
    expect(firsts).toHaveLength(1);
    expect(firsts[0]?.explanation.verdict).toBe(r.value.explanation.verdict);
    expect(firsts[0]?.firstLevel?.dim).toBe(64);
    expect(r.value.edges.length).toBe(firsts[0]?.matrix.length);
  });

  it('gives no first part when it does not decode, and reports the body as not understood', async () => {
    const broken = body.slice();
    // The first JSON part's opening brace: the first part no longer parses.
    broken[16] = 0x20;
    const f = streamingFetch(broken);
    f.release();
    const firsts: OverviewFirst[] = [];
    const r = await createApi({ fetch: f.fetch }).overview('s1', false, undefined, (o) => {
      firsts.push(o);
      return undefined;
    });
    expect(firsts).toEqual([]);
    expect(r.ok ? 'ok' : r.error.code).toBe('MQD_E_BAD_RESPONSE');
    expect(r.ok ? '' : r.error.message).toMatch(/the first JSON part does not parse/);
  });

  it('reads the rest of the body only once what the first part drew has settled', async () => {
    const f = streamingFetch(body);
    f.release();
    let drawn = () => {};
    const frame = new Promise<void>((r) => {
      drawn = r;
    });
    let settled = false;
    const whole = createApi({ fetch: f.fetch })
      .overview('s1', false, undefined, () => frame)
      .then((r) => {
        settled = true;
        return r;
      });
    // The whole body is there to be read (every queued task and microtask runs before this
    // timer's), but the overview waits for the first part's frame.
    await new Promise((r) => setTimeout(r, 0));
    expect(settled).toBe(false);
    drawn();
    const r = await whole;
    expect(r.ok && r.value.edges.length).toBeGreaterThan(0);
  });
});
