// The aggregator's security controls: each attack or fault replayed as a remote client or a user
// with a dashboard account would run it, failing when its control is broken. A revoked login
// keeps its /ui socket, a user mapped to uid 0 lists and hears root's jobs, a `?token=` link
// swaps an admin's session, a failed snapshot is invisible (no event, no log line), `{"uid":
// null}` becomes uid 0, a user named `admin` replaces the built-in one, and a retried snapshot
// request stores a second snapshot.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { err, JobId, mqdError, ok, type Result } from '@mqd/model';
import { io, type Socket } from 'socket.io-client';
import { describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import { buildApp, serverLogger } from '../src/http/app.js';
import type { LocatedJob } from '../src/shared/seams.js';
import { createFakeReader } from '../src/synthetic/fakes.js';
import {
  ADMIN_TOKEN,
  AGENT_TOKEN,
  cleanupAfterEach,
  createUser,
  json,
  serverFor,
  type startServer,
  type TestServer,
  waitFor,
} from './helpers.js';

const cleanup = cleanupAfterEach();

const server = (...args: Parameters<typeof startServer>): Promise<TestServer> => serverFor(cleanup, ...args);

type Auth = { authorization: string };

/**
 * An agent on host n0 whose starter pid 700 is a one-rank job of `uid`. Reads wait while
 * `hold` is set (a snapshot in flight the test releases); `reads` counts them.
 */
async function agentFor(s: TestServer, uid: number) {
  const inner = createFakeReader({ worldSize: 1 });
  const state = { reads: 0, hold: null as Promise<void> | null };
  const job: LocatedJob = {
    ranks: [{ rank: 0, pid: 701, host: 'n0', startTime: '11' }],
    method: 'test',
    uid,
    command: 'mpirun ./ring',
    starterStartTime: '1',
  };
  const agent = startAgent({
    serverUrl: s.url,
    token: AGENT_TOKEN,
    host: 'n0',
    reader: {
      mpi: inner.mpi,
      read: async (targets, opts) => {
        state.reads++;
        if (state.hold) await state.hold;
        return inner.read(targets, opts);
      },
    },
    locator: {
      locate: async (pid: number): Promise<Result<LocatedJob>> =>
        pid === 700 ? ok(job) : err(mqdError('MQD_E_NOT_STARTER', `pid ${pid}`)),
    },
  });
  cleanup.push(() => agent.dispose());
  await agent.whenConnected();
  return state;
}

async function attach(s: TestServer, who: Auth): Promise<string> {
  const r = await s.app.inject({
    method: 'POST',
    url: '/api/jobs/attach',
    headers: who,
    payload: { host: 'n0', starterPid: 700 },
  });
  expect(r.statusCode, r.body).toBe(201);
  return json<{ job: { id: string } }>(r).job.id;
}

/** A session (bearer form) of the user whose login token is in `who`. */
async function session(s: TestServer, who: Auth): Promise<string> {
  const r = await s.app.inject({
    method: 'POST',
    url: '/api/login',
    payload: { token: who.authorization.replace('Bearer ', '') },
  });
  expect(r.statusCode, r.body).toBe(200);
  return json<{ sessionToken: string }>(r).sessionToken;
}

/** A browser's /ui socket with this session; records every event it receives. */
async function uiSocket(
  s: TestServer,
  token: string,
): Promise<{ socket: Socket; events: { name: string; payload: unknown }[]; closed: () => boolean }> {
  // forceNew: not multiplexed over the in-process agent's connection to the same server.
  const socket = io(`${s.url}/ui`, {
    transports: ['websocket'],
    reconnection: false,
    forceNew: true,
    auth: { token },
  });
  cleanup.push(() => {
    socket.disconnect();
  });
  const events: { name: string; payload: unknown }[] = [];
  let closed = false;
  socket.onAny((name: string, payload: unknown) => events.push({ name, payload }));
  socket.on('disconnect', () => {
    closed = true;
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('connect_error', reject);
  });
  return { socket, events, closed: () => closed };
}

const names = (events: readonly { name: string }[]) => events.map((e) => e.name);

describe('a /ui socket lives only as long as its login (6a)', () => {
  it('revoking the token disconnects the socket at once; it hears no later job event and cannot come back', async () => {
    const s = await server();
    const alice = await createUser(s.app, 'alice', 1001);
    await agentFor(s, 1001);
    const job = await attach(s, alice);
    const aliceSocket = await uiSocket(s, await session(s, alice));
    const admin = await uiSocket(s, await session(s, s.admin));

    const rev = await s.app.inject({
      method: 'DELETE',
      url: '/api/admin/users/alice/token',
      headers: s.admin,
    });
    expect(rev.statusCode).toBe(204);
    await waitFor(aliceSocket.closed, "alice's socket disconnected");

    // A snapshot of her job afterwards: the admin hears it, the revoked socket nothing.
    const before = aliceSocket.events.length;
    const snap = await s.app.inject({ method: 'POST', url: `/api/jobs/${job}/snapshots`, headers: s.admin });
    expect(snap.statusCode, snap.body).toBe(201);
    await waitFor(() => names(admin.events).includes('snapshot.done'), 'snapshot.done on the admin socket');
    expect(aliceSocket.events.length).toBe(before);
    // The socket's old session is refused when it tries again.
    aliceSocket.socket.connect();
    const e = await new Promise<Error & { data?: { code?: string } }>((r) =>
      aliceSocket.socket.once('connect_error', r),
    );
    expect(e.data?.code).toBe('MQD_E_UNAUTHENTICATED');
  });

  it('logout, a change of rights and expiry disconnect the sockets of that login', async () => {
    const clock = { now: 1_000_000 };
    const s = await server({ loginTokenTtlSeconds: 3600 }, { clock: () => clock.now });
    const bob = await createUser(s.app, 'bob', 1002);
    const bobSession = await session(s, bob);
    const bobSocket = await uiSocket(s, bobSession);
    const out = await s.app.inject({
      method: 'POST',
      url: '/api/logout',
      headers: { authorization: `Bearer ${bobSession}` },
    });
    expect(out.statusCode).toBe(200);
    await waitFor(bobSocket.closed, "bob's socket disconnected after logout");

    // An admin gives dave another uid: his socket's rooms were joined under the old one.
    const dave = await createUser(s.app, 'dave', 1004);
    const daveSocket = await uiSocket(s, await session(s, dave));
    await createUser(s.app, 'dave', 1005);
    await waitFor(daveSocket.closed, "dave's socket disconnected after his uid changed");

    const carol = await createUser(s.app, 'carol', 1003);
    const carolSocket = await uiSocket(s, await session(s, carol));
    expect(await s.app.mqd.uiSessions.recheck()).toBe(0);
    clock.now += 3601 * 1000; // carol's login token (and so her session) expired
    expect(await s.app.mqd.uiSessions.recheck()).toBe(1);
    await waitFor(carolSocket.closed, "carol's socket disconnected after expiry");
  });
});

describe('a non-admin mapped to uid 0 (6b)', () => {
  it("lists none of root's jobs and hears none of their events; admins do", async () => {
    const s = await server();
    const mappedRoot = await createUser(s.app, 'mapped-root', 0);
    await agentFor(s, 0);
    const rootSocket = await uiSocket(s, await session(s, mappedRoot));
    const admin = await uiSocket(s, await session(s, s.admin));
    const job = await attach(s, s.admin);
    const snap = await s.app.inject({ method: 'POST', url: `/api/jobs/${job}/snapshots`, headers: s.admin });
    expect(snap.statusCode, snap.body).toBe(201);
    await waitFor(() => names(admin.events).includes('snapshot.done'), 'snapshot.done on the admin socket');

    const list = await s.app.inject({ method: 'GET', url: '/api/jobs', headers: mappedRoot });
    expect(list.statusCode).toBe(200);
    const body = json<{ jobs: { id: string }[]; starters: unknown[] }>(list);
    expect(body.jobs).toEqual([]);
    expect(body.starters).toEqual([]);
    const single = await s.app.inject({ method: 'GET', url: `/api/jobs/${job}`, headers: mappedRoot });
    expect(single.statusCode).toBe(403);
    expect(names(admin.events)).toEqual(expect.arrayContaining(['job.attached', 'snapshot.done']));
    expect(names(rootSocket.events).filter((n) => n.startsWith('job.') || n.startsWith('snapshot.'))).toEqual(
      [],
    );
  });
});

describe('login CSRF: a ?token= link never swaps a session silently (6c)', () => {
  it("keeps the admin's session against another user's token unless the switch is confirmed", async () => {
    const s = await server();
    const mallory = await createUser(s.app, 'mallory', 1666);
    const adminLogin = await s.app.inject({
      method: 'POST',
      url: '/api/login',
      payload: { token: ADMIN_TOKEN },
    });
    const cookie = String(adminLogin.headers['set-cookie']).split(';')[0] ?? '';
    expect(cookie).toMatch(/^mqd_session=/);
    const malloryToken = mallory.authorization.replace('Bearer ', '');

    // What the dashboard does with /?token=MALLORY in the admin's browser: the login is refused.
    const swap = await s.app.inject({
      method: 'POST',
      url: '/api/login',
      headers: { cookie },
      payload: { token: malloryToken },
    });
    expect(swap.statusCode, swap.body).toBe(409);
    expect(json(swap)).toMatchObject({ code: 'MQD_E_SESSION_CONFLICT' });
    expect(json<{ message: string }>(swap).message).toContain("signed in as 'admin'");
    expect(swap.headers['set-cookie']).toBeUndefined();
    const me = await s.app.inject({ method: 'GET', url: '/api/me', headers: { cookie } });
    expect(json<{ user: { name: string } }>(me).user.name).toBe('admin');

    // A foreign page cannot confirm the switch for them.
    const forged = await s.app.inject({
      method: 'POST',
      url: '/api/login',
      headers: { cookie, origin: 'https://evil.example' },
      payload: { token: malloryToken, switchUser: true },
    });
    expect(json(forged)).toMatchObject({ code: 'MQD_E_BAD_ORIGIN' });

    // The person confirmed: the old session ends, the new one is mallory's.
    const confirmed = await s.app.inject({
      method: 'POST',
      url: '/api/login',
      headers: { cookie },
      payload: { token: malloryToken, switchUser: true },
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    expect(json<{ user: { name: string } }>(confirmed).user.name).toBe('mallory');
    expect((await s.app.inject({ method: 'GET', url: '/api/me', headers: { cookie } })).statusCode).toBe(401);

    // Logging in again as the same user is no conflict.
    const again = await s.app.inject({ method: 'POST', url: '/api/login', payload: { token: ADMIN_TOKEN } });
    const adminCookie = String(again.headers['set-cookie']).split(';')[0] ?? '';
    const same = await s.app.inject({
      method: 'POST',
      url: '/api/login',
      headers: { cookie: adminCookie },
      payload: { token: ADMIN_TOKEN },
    });
    expect(same.statusCode).toBe(200);
  });
});

describe('failed snapshots are visible (7)', () => {
  it('a failed snapshot gives every viewer one snapshot.failed and the log one line with its code; auto-snapshots too', async () => {
    const lines: string[] = [];
    const s = await server(
      // Every snapshot of the one-rank job is over this budget: MQD_E_TOO_LARGE.
      { maxSnapshotBytes: 64 },
      { logger: serverLogger('info', { write: (l: string) => lines.push(l) }) },
    );
    const alice = await createUser(s.app, 'alice', 1001);
    await agentFor(s, 1001);
    const job = await attach(s, alice);
    const viewer = await uiSocket(s, await session(s, s.admin)); // a second viewer of alice's job
    const key = 'click-0001-aaaa';
    const r = await s.app.inject({
      method: 'POST',
      url: `/api/jobs/${job}/snapshots`,
      headers: { ...alice, 'idempotency-key': key },
    });
    expect(r.statusCode, r.body).toBe(413);
    expect(json(r)).toMatchObject({ code: 'MQD_E_TOO_LARGE' });
    // A later event on the same socket as a barrier: everything before it has arrived.
    await attach(s, alice);
    await waitFor(() => names(viewer.events).includes('job.attached'), 'job.attached');
    const failed = viewer.events.filter((e) => e.name === 'snapshot.failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]?.payload).toMatchObject({ jobId: job, code: 'MQD_E_TOO_LARGE', requestKey: key });
    expect(String((failed[0]?.payload as { message?: unknown } | undefined)?.message)).toMatch(
      /^MQD_E_TOO_LARGE: .*budget/,
    );

    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const mine = logged.filter((l) => l['event'] === 'snapshot.failed');
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({ level: 'warn', code: 'MQD_E_TOO_LARGE', jobId: job, who: 'alice' });
    expect(new Date(String(mine[0]?.['time'])).toISOString()).toBe(mine[0]?.['time']);
    expect(String(mine[0]?.['msg'])).toMatch(/^MQD_E_TOO_LARGE: /);

    // An auto-snapshot that fails leaves the same trace (not only a counter in /metrics).
    expect(await s.app.mqd.snapshots.autoTick()).toBe(0);
    await waitFor(
      () => viewer.events.filter((e) => e.name === 'snapshot.failed').length === 2,
      'the auto-snapshot failure event',
    );
    const auto = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l['who'] === 'auto');
    expect(auto).toHaveLength(1);
    expect(auto[0]).toMatchObject({ event: 'snapshot.failed', code: 'MQD_E_TOO_LARGE', jobId: job });
  });
});

describe('"no uid" and reserved names (8, 9)', () => {
  it('{"uid": null} stores no uid (no root jobs listed); nothing in a body is coerced', async () => {
    const s = await server();
    await agentFor(s, 0);
    await attach(s, s.admin); // a job of uid 0
    const made = await s.app.inject({
      method: 'POST',
      url: '/api/admin/users',
      headers: s.admin,
      payload: { name: 'nouid', uid: null },
    });
    expect(made.statusCode, made.body).toBe(201);
    expect(json<{ user: { uid: number | null } }>(made).user.uid).toBeNull();
    expect((await s.app.mqd.store.userByName('nouid'))?.uid).toBeNull();
    const token = json<{ token: string }>(made).token;
    const list = await s.app.inject({
      method: 'GET',
      url: '/api/jobs',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(json<{ jobs: unknown[] }>(list).jobs).toEqual([]);
    for (const payload of [
      { name: 'coerced', uid: '0' },
      { name: 'coerced', uid: 1000, admin: 'true' },
      { name: 'coerced', uid: false },
    ]) {
      const bad = await s.app.inject({ method: 'POST', url: '/api/admin/users', headers: s.admin, payload });
      expect(bad.statusCode, JSON.stringify(payload)).toBe(400);
      expect(json(bad)).toMatchObject({ code: 'MQD_E_BAD_INPUT' });
    }
    expect(await s.app.mqd.store.userByName('coerced')).toBeNull();
    // Querystrings still arrive as text and are read as numbers.
    const history = await s.app.inject({
      method: 'GET',
      url: '/api/admin/activity?limit=5',
      headers: s.admin,
    });
    expect(history.statusCode).toBe(200);
  });

  it('refuses reserved names (MQD_E_RESERVED_NAME): the configured admin stays', async () => {
    const s = await server();
    for (const name of ['admin', 'Admin', 'auto']) {
      const r = await s.app.inject({
        method: 'POST',
        url: '/api/admin/users',
        headers: s.admin,
        payload: { name, uid: 0, admin: false },
      });
      expect(r.statusCode, name).toBe(409);
      expect(json(r)).toMatchObject({ code: 'MQD_E_RESERVED_NAME' });
    }
    const me = await s.app.inject({ method: 'GET', url: '/api/me', headers: s.admin });
    expect(json(me)).toMatchObject({ user: { name: 'admin', admin: true, uid: null } });
  });
});

describe('idempotent snapshot requests (11d)', () => {
  it('a retry with the same key gets the same snapshot; concurrent duplicates join the one in flight', async () => {
    const s = await server();
    const alice = await createUser(s.app, 'alice', 1001);
    const agent = await agentFor(s, 1001);
    const job = await attach(s, alice);
    const post = (key: string, jobId = job) =>
      s.app.inject({
        method: 'POST',
        url: `/api/jobs/${jobId}/snapshots`,
        headers: { ...alice, 'idempotency-key': key },
      });
    const idOf = (r: Parameters<typeof json>[0]) => json<{ snapshot: { id: string } }>(r).snapshot.id;

    const first = await post('retry-key-0001');
    const retry = await post('retry-key-0001');
    expect(first.statusCode, first.body).toBe(201);
    expect(retry.statusCode, retry.body).toBe(201);
    expect(idOf(retry)).toBe(idOf(first));
    expect(await s.app.mqd.store.countSnapshots(job)).toBe(1);
    expect(agent.reads).toBe(1);

    // Two requests with one key while the agent is still reading: one read, one snapshot.
    let release = () => {};
    agent.hold = new Promise<void>((r) => {
      release = r;
    });
    const svc = s.app.mqd.snapshots;
    const take = svc.take.bind(svc);
    let takes = 0;
    svc.take = (...a) => {
      takes++;
      return take(...a);
    };
    const both = Promise.all([post('dup-key-0002'), post('dup-key-0002')]);
    await waitFor(() => takes === 2 && agent.reads === 2, 'both requests in, one read');
    release();
    const [a, b] = await both;
    expect(a.statusCode, a.body).toBe(201);
    expect(idOf(b)).toBe(idOf(a));
    expect(await s.app.mqd.store.countSnapshots(job)).toBe(2);
    expect(agent.reads).toBe(2);
    // Replayed later too, from the store.
    expect(idOf(await post('dup-key-0002'))).toBe(idOf(a));
    // Another user's request with the same key is theirs, not alice's.
    const replayedForAdmin = await s.app.inject({
      method: 'POST',
      url: `/api/jobs/${job}/snapshots`,
      headers: { ...s.admin, 'idempotency-key': 'dup-key-0002' },
    });
    expect(idOf(replayedForAdmin)).not.toBe(idOf(a));
  });

  it('a snapshot stored just before a crash is the answer to its retry after the restart', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mqd-idem-'));
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const first = await server({ dataDir });
    const alice = await createUser(first.app, 'alice', 1001);
    await agentFor(first, 1001);
    const job = await attach(first, alice);
    const key = 'lost-answer-0003';
    const taken = await first.app.inject({
      method: 'POST',
      url: `/api/jobs/${job}/snapshots`,
      headers: { ...alice, 'idempotency-key': key },
    });
    expect(taken.statusCode, taken.body).toBe(201);
    await first.close(); // the answer was lost with the process

    // A new aggregator on the same store, no agent yet: the retry is answered from the store.
    const again = await buildApp({ config: { dataDir, adminToken: ADMIN_TOKEN, agentToken: AGENT_TOKEN } });
    cleanup.push(() => again.close());
    const retry = await again.inject({
      method: 'POST',
      url: `/api/jobs/${job}/snapshots`,
      headers: { ...alice, 'idempotency-key': key },
    });
    expect(retry.statusCode, retry.body).toBe(201);
    expect(json<{ snapshot: { id: string } }>(retry).snapshot.id).toBe(
      json<{ snapshot: { id: string } }>(taken).snapshot.id,
    );
    expect(await again.mqd.store.countSnapshots(job)).toBe(1);
    // The same key for another job: MQD_E_IDEMPOTENCY_CONFLICT, nothing taken.
    const other = await again.mqd.store.job(job);
    if (other === null) throw new Error('the job is gone');
    await again.mqd.store.saveJob(
      { ...other, id: JobId('other-job'), starterPid: 800 },
      { who: 't', action: 'attach' },
    );
    const conflict = await again.inject({
      method: 'POST',
      url: '/api/jobs/other-job/snapshots',
      headers: { ...alice, 'idempotency-key': key },
    });
    expect(conflict.statusCode, conflict.body).toBe(409);
    expect(json(conflict)).toMatchObject({ code: 'MQD_E_IDEMPOTENCY_CONFLICT' });
  });
});
