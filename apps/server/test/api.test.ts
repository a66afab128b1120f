import { gunzipSync, gzipSync } from 'node:zlib';
import { JobId, type JobSnapshot, SnapshotId, validateSnapshot } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { MIGRATION_HISTORY } from '../src/store/store-schema.js';
import { startSyntheticAgents } from '../src/synthetic/synthetic-agents.js';
import {
  ADMIN_TOKEN,
  AGENT_TOKEN,
  cleanupAfterEach,
  createUser,
  json,
  serverFor,
  type TestServer,
  waitFor,
} from './helpers.js';

const cleanup = cleanupAfterEach();

interface Clock {
  now: number;
}

const setup = (config = {}, clock?: Clock) =>
  serverFor(cleanup, config, clock ? { clock: () => clock.now } : {});

/** Synthetic job of `uid` on `agents` nodes, attached by `who`. */
async function job(
  s: TestServer,
  who: { authorization: string },
  uid: number,
  prefix: string,
  starterPid: number,
) {
  const sim = startSyntheticAgents({
    serverUrl: s.url,
    token: AGENT_TOKEN,
    agents: 1,
    ranksPerAgent: 2,
    uid,
    starterPid,
    hostPrefix: prefix,
  });
  cleanup.push(() => sim.dispose());
  await sim.whenConnected();
  const res = await s.app.inject({
    method: 'POST',
    url: '/api/jobs/attach',
    headers: who,
    payload: { host: `${prefix}0`, starterPid },
  });
  return res;
}

describe('authentication', () => {
  it('answers 401 with a coded error without a token, and with an unknown one', async () => {
    const s = await setup();
    for (const headers of [{}, { authorization: 'Bearer nope' }, { cookie: 'mqd_session=nope' }]) {
      for (const url of ['/api/jobs', '/api/admin/agents', '/api/snapshots/abc', '/api/me']) {
        const res = await s.app.inject({ method: 'GET', url, headers });
        expect(res.statusCode, url).toBe(401);
        expect(json(res)).toMatchObject({ statusCode: 401, code: 'MQD_E_UNAUTHENTICATED' });
        expect(json<{ message: string }>(res).message).toMatch(/^MQD_E_UNAUTHENTICATED: .+: log in with/);
      }
    }
    const health = await s.app.inject({ method: 'GET', url: '/api/health' });
    expect(json(health)).toMatchObject({
      status: 'ok',
      protocol: 3,
      schemaVersion: Math.max(...MIGRATION_HISTORY.map((m) => m.version)),
    });
  });

  it('logs in with the admin token and then works with the session cookie or bearer', async () => {
    const s = await setup();
    const bad = await s.app.inject({ method: 'POST', url: '/api/login', payload: { token: 'wrong' } });
    expect(bad.statusCode).toBe(401);
    const res = await s.app.inject({ method: 'POST', url: '/api/login', payload: { token: ADMIN_TOKEN } });
    expect(res.statusCode).toBe(200);
    const body = json<{ user: { name: string; admin: boolean }; sessionToken: string }>(res);
    expect(body.user).toEqual({ name: 'admin', uid: null, admin: true });
    const cookie = String(res.headers['set-cookie']);
    expect(cookie).toMatch(/^mqd_session=[\w-]+; Path=\/; HttpOnly; SameSite=Strict/);
    const viaCookie = await s.app.inject({
      method: 'GET',
      url: '/api/me',
      headers: { cookie: cookie.split(';')[0] ?? '' },
    });
    expect(viaCookie.statusCode).toBe(200);
    const viaBearer = await s.app.inject({
      method: 'GET',
      url: '/api/me',
      headers: { authorization: `Bearer ${body.sessionToken}` },
    });
    expect(json(viaBearer)).toEqual({ user: { name: 'admin', uid: null, admin: true } });
    await s.app.inject({
      method: 'POST',
      url: '/api/logout',
      headers: { authorization: `Bearer ${body.sessionToken}` },
    });
    const after = await s.app.inject({
      method: 'GET',
      url: '/api/me',
      headers: { authorization: `Bearer ${body.sessionToken}` },
    });
    expect(after.statusCode).toBe(401);
  });

  it('trusts the proxy user header only when configured', async () => {
    const off = await setup();
    await createUser(off.app, 'alice', 1000);
    const ignored = await off.app.inject({
      method: 'GET',
      url: '/api/me',
      headers: { 'x-remote-user': 'alice' },
    });
    expect(ignored.statusCode).toBe(401);

    const on = await setup({ proxyUserHeader: 'x-remote-user', trustedProxies: ['127.0.0.1'] });
    await createUser(on.app, 'alice', 1000);
    const me = await on.app.inject({ method: 'GET', url: '/api/me', headers: { 'x-remote-user': 'alice' } });
    expect(json(me)).toEqual({ user: { name: 'alice', uid: 1000, admin: false } });
    const stranger = await on.app.inject({
      method: 'GET',
      url: '/api/me',
      headers: { 'x-remote-user': 'mallory' },
    });
    expect(stranger.statusCode).toBe(401);
    expect(json<{ message: string }>(stranger).message).toMatch(/mallory/);
  });

  it('keeps admin routes for admins', async () => {
    const s = await setup();
    const alice = await createUser(s.app, 'alice', 1000);
    const res = await s.app.inject({ method: 'GET', url: '/api/admin/activity', headers: alice });
    expect(res.statusCode).toBe(403);
    expect(json(res)).toMatchObject({ code: 'MQD_E_FORBIDDEN' });
  });
});

describe('ownership', () => {
  it("does not let user A see, snapshot or read user B's job and snapshots", async () => {
    const s = await setup();
    const alice = await createUser(s.app, 'alice', 1000);
    const bob = await createUser(s.app, 'bob', 2000);
    // Alice may not attach Bob's job, and the refusal stores nothing.
    const refused = await job(s, alice, 2000, 'b-', 300);
    expect(refused.statusCode).toBe(403);
    expect(json(refused)).toMatchObject({ code: 'MQD_E_FORBIDDEN' });
    expect(await s.app.mqd.store.jobs(null)).toEqual([]);

    const attached = await s.app.inject({
      method: 'POST',
      url: '/api/jobs/attach',
      headers: bob,
      payload: { host: 'b-0', starterPid: 300 },
    });
    expect(attached.statusCode, attached.body).toBe(201);
    const jobId = json<{ job: { id: string } }>(attached).job.id;
    const snap = await s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: bob });
    expect(snap.statusCode).toBe(201);
    const snapId = json<{ snapshot: { id: string } }>(snap).snapshot.id;

    const list = await s.app.inject({ method: 'GET', url: '/api/jobs', headers: alice });
    expect(json<{ jobs: unknown[] }>(list).jobs).toEqual([]);
    for (const [method, url] of [
      ['GET', `/api/jobs/${jobId}`],
      ['POST', `/api/jobs/${jobId}/snapshots`],
      ['GET', `/api/jobs/${jobId}/snapshots`],
      ['GET', `/api/snapshots/${snapId}`],
      ['GET', `/api/snapshots/${snapId}/export`],
      ['POST', `/api/snapshots/${snapId}/share`],
    ] as const) {
      const res = await s.app.inject({ method, url, headers: alice });
      expect(res.statusCode, `${method} ${url}`).toBe(403);
      expect(json(res)).toMatchObject({ code: 'MQD_E_FORBIDDEN' });
    }
    // Bob and the admin see it.
    const mine = await s.app.inject({ method: 'GET', url: '/api/jobs', headers: bob });
    expect(json<{ jobs: { id: string }[] }>(mine).jobs.map((j) => j.id)).toEqual([jobId]);
    const all = await s.app.inject({ method: 'GET', url: `/api/snapshots/${snapId}`, headers: s.admin });
    expect(all.statusCode).toBe(200);
    // Only Alice's own snapshot count moved: none.
    expect(await s.app.mqd.store.countSnapshots()).toBe(1);
  });
});

describe('the job list at scale', () => {
  /** `live` live jobs (the last `hung` of them hung: equal snapshots with receives pending) and `ended` ended ones. */
  async function seeded(live: number, hung: number, ended: number) {
    // Retention keeps the first and the newest of a run of equal snapshots: two make it hung here.
    const s = await setup({ hungSnapshots: 2 });
    const store = s.app.mqd.store;
    const gz = gzipSync(Buffer.from('{}'));
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    for (let i = 0; i < live + ended; i++) {
      const isEnded = i < ended;
      const hungIndex = i >= live + ended - hung ? i : null;
      const host = `node${i % 8}`;
      const id = JobId(`job${i}`);
      const program = hungIndex === null ? `solver${i}` : `stuck${i}`;
      await store.saveJob(
        {
          id,
          host,
          starterPid: 1000 + i,
          starterStartTime: String(i),
          uid: i % 2 === 0 ? 1000 : 2000,
          command: `mpirun -np 2 ./${program}`,
          method: 'mpir-proctable',
          ranks: [0, 1].map((rank) => ({ rank, pid: 5000 + 2 * i + rank, host })),
          createdAt: t0 + i,
          createdBy: 'admin',
          // Ended in the order of their ids: job0 first, the newest ended the last ended id.
          endedAt: isEnded ? t0 + 60_000 + i : null,
        },
        { who: 'admin', action: 'attach', jobId: id },
      );
      for (let k = 0; k < 3; k++) {
        const snapshotId = SnapshotId(`s${i}-${k}`);
        await store.insertSnapshot(
          {
            meta: {
              id: snapshotId,
              jobId: id,
              takenAt: t0 + 1000 * (k + 1) + i,
              durationMicros: 1,
              createdBy: 'admin',
              bytes: 2,
              storedBytes: gz.length,
              ranks: 2,
              ok: 2,
              errors: 0,
              missing: 0,
              missingRanks: [],
              pendingSends: 0,
              pendingReceives: hungIndex === null ? k : 2,
              unexpected: 0,
              digest: hungIndex === null ? `d${i}-${k}` : `h${i}`,
            },
            gz,
          },
          { who: 'admin', action: 'snapshot', jobId: id, snapshotId },
        );
      }
    }
    return s;
  }
  type Page = { jobs: { id: string; state: string }[]; endedTotal?: number; endedOffset?: number };
  const get = async (s: TestServer, url: string, headers = s.admin) => {
    const res = await s.app.inject({ method: 'GET', url, headers });
    expect(res.statusCode, res.body).toBe(200);
    return json<Page>(res);
  };

  it('sends every live job hung first and a page of the newest ended ones with their total', async () => {
    const s = await seeded(6, 2, 250);
    const first = await get(s, '/api/jobs?endedLimit=100');
    const live = first.jobs.filter((j) => j.state !== 'ended');
    expect(live).toHaveLength(6);
    expect(live.slice(0, 2).map((j) => [j.id, j.state])).toEqual([
      ['job254', 'hung'],
      ['job255', 'hung'],
    ]);
    expect(live.slice(2).every((j) => j.state !== 'hung')).toBe(true);
    const ended = first.jobs.filter((j) => j.state === 'ended');
    expect(ended.map((j) => j.id).slice(0, 3)).toEqual(['job249', 'job248', 'job247']);
    expect(ended).toHaveLength(100);
    expect(first).toMatchObject({ endedTotal: 250, endedOffset: 0 });
    const last = await get(s, '/api/jobs?endedLimit=100&endedOffset=200');
    expect(last.jobs.filter((j) => j.state === 'ended').map((j) => j.id)).toEqual(
      Array.from({ length: 50 }, (_, i) => `job${49 - i}`),
    );
    expect(last).toMatchObject({ endedTotal: 250, endedOffset: 200 });
    // Without a page, the answer is every job, as it always was.
    const all = await get(s, '/api/jobs');
    expect(all.jobs).toHaveLength(256);
    expect(all.endedTotal).toBeUndefined();
    // A user's page holds only their uid's jobs.
    const bob = await createUser(s.app, 'bob', 2000);
    const bobs = await get(s, '/api/jobs?endedLimit=10', bob);
    expect(bobs.endedTotal).toBe(125);
    expect(bobs.jobs.map((j) => j.id)).toEqual([
      'job255',
      'job251',
      'job253',
      ...Array.from({ length: 10 }, (_, i) => `job${249 - 2 * i}`),
    ]);
  });

  it('searches program, user, job id and node on the server', async () => {
    const s = await seeded(6, 2, 250);
    await createUser(s.app, 'carol', 1000);
    const ids = async (q: string) =>
      (await get(s, `/api/jobs?endedLimit=100&q=${encodeURIComponent(q)}`)).jobs.map((j) => j.id);
    expect(await ids('stuck255')).toEqual(['job255']);
    expect(await ids('STUCK')).toEqual(['job254', 'job255']);
    expect(await ids('job171')).toEqual(['job171']);
    expect(await ids('solver43 node3')).toEqual(['job43']);
    expect(await ids('solver43 node4')).toEqual([]);
    const carol = await get(s, '/api/jobs?endedLimit=1&q=carol');
    expect(carol.endedTotal).toBe(125);
    expect(carol.jobs.map((j) => j.id)).toEqual(['job254', 'job250', 'job252', 'job248']);
    expect((await get(s, '/api/jobs?endedLimit=5&q=nothing-like-this')).endedTotal).toBe(0);
  });

  it('refuses a bad page size or offset with MQD_E_BAD_INPUT', async () => {
    const s = await seeded(1, 0, 1);
    for (const query of [
      'endedLimit=0',
      'endedLimit=1001',
      'endedLimit=ten',
      'endedOffset=-1',
      'endedLimit=10&endedOffset=1.5',
    ]) {
      const res = await s.app.inject({ method: 'GET', url: `/api/jobs?${query}`, headers: s.admin });
      expect(res.statusCode, query).toBe(400);
      expect(json(res), query).toMatchObject({ code: 'MQD_E_BAD_INPUT' });
    }
  });
});

/** A synthetic job attached by the admin and one snapshot of it: the server, the snapshot and job ids. */
async function oneSnapshot(
  prefix: string,
  starterPid: number,
): Promise<{ s: TestServer; id: string; jobId: string }> {
  const s = await setup();
  const res = await job(s, s.admin, 0, prefix, starterPid);
  const jobId = json<{ job: { id: string } }>(res).job.id;
  const snap = await s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: s.admin });
  return { s, id: json<{ snapshot: { id: string } }>(snap).snapshot.id, jobId };
}

describe('snapshots over REST', () => {
  it('exports the stored snapshot as a file, gzip-encoded when the client accepts it', async () => {
    const { s, id } = await oneSnapshot('e-', 400);
    const plain = await s.app.inject({ method: 'GET', url: `/api/snapshots/${id}/export`, headers: s.admin });
    expect(plain.headers['content-disposition']).toMatch(/^attachment; filename="mqd-.+\.json"$/);
    const parsed = JSON.parse(plain.body) as JobSnapshot;
    expect(validateSnapshot(parsed).ok).toBe(true);
    const gz = await s.app.inject({
      method: 'GET',
      url: `/api/snapshots/${id}/export`,
      headers: { ...s.admin, 'accept-encoding': 'gzip' },
    });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(gunzipSync(gz.rawPayload).toString('utf8'))).toEqual(parsed);
  });

  it('sends a snapshot and a shared one gzip-encoded as stored (spliced), equal to the plain answer', async () => {
    const { s, id } = await oneSnapshot('z-', 410);
    const share = await s.app.inject({ method: 'POST', url: `/api/snapshots/${id}/share`, headers: s.admin });
    const shareId = json<{ id: string }>(share).id;
    for (const url of [`/api/snapshots/${id}`, `/api/shared/${shareId}`]) {
      const plain = await s.app.inject({ method: 'GET', url, headers: s.admin });
      expect(plain.statusCode, url).toBe(200);
      expect(plain.headers['content-encoding'], url).toBeUndefined();
      const gz = await s.app.inject({
        method: 'GET',
        url,
        headers: { ...s.admin, 'accept-encoding': 'gzip' },
      });
      expect(gz.statusCode, url).toBe(200);
      expect(gz.headers['content-encoding'], url).toBe('gzip');
      expect(gz.headers.vary, url).toMatch(/accept-encoding/);
      expect(gz.rawPayload.length, url).toBeLessThan(plain.rawPayload.length);
      // Byte for byte the plain answer: the same envelope around the same stored JSON.
      expect(gunzipSync(gz.rawPayload).toString('utf8'), url).toBe(plain.body);
      const body = JSON.parse(plain.body) as { meta: { id: string }; snapshot: JobSnapshot };
      expect(body.meta.id).toBe(id);
      expect(validateSnapshot(body.snapshot).ok).toBe(true);
    }
  });

  it('refuses malformed requests with MQD_E_BAD_INPUT and unknown ids with MQD_E_NOT_FOUND', async () => {
    const s = await setup();
    const bad = await s.app.inject({
      method: 'POST',
      url: '/api/jobs/attach',
      headers: s.admin,
      payload: { starterPid: -3 },
    });
    expect(bad.statusCode).toBe(400);
    expect(json(bad)).toMatchObject({ code: 'MQD_E_BAD_INPUT' });
    expect(json<{ message: string }>(bad).message).toMatch(/starterPid/);
    const none = await s.app.inject({
      method: 'POST',
      url: '/api/jobs/attach',
      headers: s.admin,
      payload: { starterPid: 3 },
    });
    expect(json(none)).toMatchObject({ statusCode: 503, code: 'MQD_E_AGENT_MISSING' });
    const missing = await s.app.inject({ method: 'GET', url: '/api/snapshots/nope', headers: s.admin });
    expect(json(missing)).toMatchObject({ statusCode: 404, code: 'MQD_E_NOT_FOUND' });
  });

  it('rate-limits expensive requests per user', async () => {
    const s = await setup({ rateLimitMax: 2 });
    const res = await job(s, s.admin, 0, 'r-', 500);
    const jobId = json<{ job: { id: string } }>(res).job.id;
    const codes: number[] = [];
    for (let i = 0; i < 3; i++) {
      codes.push(
        (await s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: s.admin }))
          .statusCode,
      );
    }
    expect(codes).toEqual([201, 201, 429]);
    const limited = await s.app.inject({
      method: 'POST',
      url: `/api/jobs/${jobId}/snapshots`,
      headers: s.admin,
    });
    expect(json(limited)).toMatchObject({ code: 'MQD_E_RATE_LIMITED' });
    // Another user has their own budget.
    const other = await createUser(s.app, 'root2', 0, true);
    expect(
      (await s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: other }))
        .statusCode,
    ).toBe(201);
  });

  it('audits every attach, snapshot and share', async () => {
    const { s, id, jobId } = await oneSnapshot('a-', 600);
    await s.app.inject({ method: 'POST', url: `/api/snapshots/${id}/share`, headers: s.admin, payload: {} });
    const act = await s.app.inject({ method: 'GET', url: '/api/admin/activity', headers: s.admin });
    const entries = json<{
      entries: { who: string; action: string; jobId: string | null; snapshotId: string | null }[];
    }>(act).entries;
    expect(
      entries.filter((e) => e.action !== 'agent-connect' && e.action !== 'user-create').slice(0, 3),
    ).toEqual([
      expect.objectContaining({ who: 'admin', action: 'share', jobId, snapshotId: id }),
      expect.objectContaining({ who: 'admin', action: 'snapshot', jobId, snapshotId: id }),
      expect.objectContaining({ who: 'admin', action: 'attach', jobId, snapshotId: null }),
    ]);
  });

  it('lists agents with their health and reports hung jobs', async () => {
    const s = await setup({ hungSnapshots: 2 });
    const res = await job(s, s.admin, 0, 'h-', 700);
    const jobId = json<{ job: { id: string } }>(res).job.id;
    await waitFor(() => s.app.mqd.hub.agents()[0]?.health !== null, 'a status report');
    const agents = await s.app.inject({ method: 'GET', url: '/api/admin/agents', headers: s.admin });
    expect(json<{ agents: unknown[] }>(agents).agents).toEqual([
      expect.objectContaining({
        host: 'h-0',
        connected: true,
        jobs: [expect.objectContaining({ starterPid: 700 })],
      }),
    ]);
    const hung = async () =>
      json<{ jobs: { jobId: string; snapshots: number }[] }>(
        await s.app.inject({ method: 'GET', url: '/api/admin/hung', headers: s.admin }),
      ).jobs;
    expect(await hung()).toEqual([]);
    // The synthetic job does not evolve: two auto-snapshots see the same queues.
    expect(await s.app.mqd.snapshots.autoTick()).toBe(1);
    expect(await hung()).toEqual([]);
    expect(await s.app.mqd.snapshots.autoTick()).toBe(1);
    expect(await hung()).toEqual([expect.objectContaining({ jobId, snapshots: 2 })]);
  });

  it('does not call a job hung while its queues change', async () => {
    const s = await setup({ hungSnapshots: 2 });
    const sim = startSyntheticAgents({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      agents: 1,
      ranksPerAgent: 2,
      evolve: true,
    });
    cleanup.push(() => sim.dispose());
    await sim.whenConnected();
    await s.app.inject({
      method: 'POST',
      url: '/api/jobs/attach',
      headers: s.admin,
      payload: { starterPid: sim.job.starterPid },
    });
    await s.app.mqd.snapshots.autoTick();
    await s.app.mqd.snapshots.autoTick();
    const res = await s.app.inject({ method: 'GET', url: '/api/admin/hung', headers: s.admin });
    expect(json<{ jobs: unknown[] }>(res).jobs).toEqual([]);
    expect(await s.app.mqd.store.countSnapshots()).toBe(2);
  });

  it('serves an OpenAPI document that lists every API route', async () => {
    const s = await setup();
    const res = await s.app.inject({ method: 'GET', url: '/api/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = json<{ openapi: string; paths: Record<string, unknown>; components: { schemas: object } }>(
      res,
    );
    expect(doc.openapi).toBe('3.0.3');
    expect(Object.keys(doc.components.schemas)).toEqual(['ApiError', 'JobSnapshot']);
    expect(Object.keys(doc.paths).sort()).toEqual(
      [
        '/api/admin/activity',
        '/api/admin/agents',
        '/api/admin/hung',
        '/api/admin/users',
        '/api/admin/users/{name}/token',
        '/api/admin/watch',
        '/api/fleet',
        '/api/health',
        '/api/jobs',
        '/api/jobs/attach',
        '/api/jobs/{id}',
        '/api/jobs/{id}/snapshots',
        '/api/login',
        '/api/logout',
        '/api/me',
        '/api/shared/{id}',
        '/api/shared/{id}/overview',
        '/api/shares',
        '/api/shares/{id}',
        '/api/snapshots/{id}',
        '/api/snapshots/{id}/export',
        '/api/snapshots/{id}/overview',
        '/api/snapshots/{id}/share',
        '/api/snapshots/{id}/values',
      ].sort(),
    );
  });
});

describe('share links', () => {
  it('gives read-only access without login until the link expires', async () => {
    const clock: Clock = { now: Date.parse('2026-03-01T00:00:00Z') };
    const s = await setup({}, clock);
    const res = await job(s, s.admin, 0, 's-', 800);
    const jobId = json<{ job: { id: string } }>(res).job.id;
    const snap = await s.app.inject({
      method: 'POST',
      url: `/api/jobs/${jobId}/snapshots`,
      headers: s.admin,
    });
    const snapId = json<{ snapshot: { id: string } }>(snap).snapshot.id;
    const share = await s.app.inject({
      method: 'POST',
      url: `/api/snapshots/${snapId}/share`,
      headers: s.admin,
      payload: { expiresInSeconds: 3600 },
    });
    expect(share.statusCode).toBe(201);
    const { id, url, expiresAt } = json<{ id: string; url: string; expiresAt: string }>(share);
    expect(Buffer.from(id, 'base64url').length).toBeGreaterThanOrEqual(16);
    expect(url).toMatch(new RegExp(`/s/${id}$`));
    expect(expiresAt).toBe('2026-03-01T01:00:00.000Z');

    const view = await s.app.inject({ method: 'GET', url: `/api/shared/${id}` });
    expect(view.statusCode).toBe(200);
    const body = json<{ meta: { id: string }; snapshot: JobSnapshot }>(view);
    expect(body.meta.id).toBe(snapId);
    expect(validateSnapshot(body.snapshot).ok).toBe(true);
    // Read-only: the share id is not a credential for anything else.
    for (const [method, u] of [
      ['GET', '/api/jobs'],
      ['POST', `/api/jobs/${jobId}/snapshots`],
      ['GET', `/api/snapshots/${snapId}`],
    ] as const) {
      const r = await s.app.inject({ method, url: u, headers: { authorization: `Bearer ${id}` } });
      expect(r.statusCode, u).toBe(401);
    }
    expect((await s.app.inject({ method: 'DELETE', url: `/api/shared/${id}` })).statusCode).toBe(404);

    clock.now += 3600_000 - 1;
    expect((await s.app.inject({ method: 'GET', url: `/api/shared/${id}` })).statusCode).toBe(200);
    clock.now += 1;
    const expired = await s.app.inject({ method: 'GET', url: `/api/shared/${id}` });
    expect(expired.statusCode).toBe(404);
    expect(json(expired)).toMatchObject({ code: 'MQD_E_NOT_FOUND' });
  });

  it('refuses a share longer than the configured maximum', async () => {
    const s = await setup({ maxShareTtlSeconds: 60, shareTtlSeconds: 60 });
    const res = await s.app.inject({
      method: 'POST',
      url: '/api/snapshots/whatever/share',
      headers: s.admin,
      payload: { expiresInSeconds: 61 },
    });
    expect(res.statusCode).toBe(400);
    expect(json(res)).toMatchObject({ code: 'MQD_E_BAD_INPUT' });
  });
});
