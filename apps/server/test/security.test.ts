// Exploits, each as a test that fails when its control is broken: a malformed cookie
// kills the server, pid reuse hands user A's job to user B, a full disk ends the process, a
// corrupt database starts anyway, the data files are world-readable.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { err, MqdException, mqdError, ok, type Result } from '@mqd/model';
import { io } from 'socket.io-client';
import { describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import { buildApp } from '../src/http/app.js';
import { loadConfig } from '../src/http/config.js';
import { hostAgentToken } from '../src/hub/hub.js';
import type { JobLocator, LocatedJob, RankTarget, ReadOptions } from '../src/shared/seams.js';
import { SqliteStore } from '../src/store/dialect-sqlite.js';
import { createFakeReader } from '../src/synthetic/fakes.js';
import {
  AGENT_TOKEN,
  cleanupAfterEach,
  createUser,
  json,
  serverFor,
  startServer,
  type TestServer,
  waitFor,
} from './helpers.js';

const cleanup = cleanupAfterEach();

const server = (config = {}): Promise<TestServer> => serverFor(cleanup, config);

describe('malformed cookies', () => {
  it('answers 401 on REST and refuses the socket.io handshake; the server keeps answering', async () => {
    const s = await server();
    for (const cookie of ['mqd_session=%', 'mqd_session=%E0%A4%A', 'mqd_session=a%zz; x=%']) {
      const res = await s.app.inject({ method: 'GET', url: '/api/jobs', headers: { cookie } });
      expect(res.statusCode, cookie).toBe(401);
      expect(json(res)).toMatchObject({ code: 'MQD_E_UNAUTHENTICATED' });
      // Polling: Node's socket.io client sends extraHeaders (the cookie) on that transport.
      const sock = io(`${s.url}/ui`, {
        transports: ['polling'],
        reconnection: false,
        extraHeaders: { cookie },
      });
      const e = await new Promise<Error & { data?: { code?: string } }>((r) => sock.once('connect_error', r));
      sock.disconnect();
      expect(e.data?.code, cookie).toBe('MQD_E_UNAUTHENTICATED');
    }
    const health = await fetch(`${s.url}/api/health`);
    expect(health.status).toBe(200);
  });
});

/** A locator whose answer the test changes, as a starter exits and its pid is reused. */
/** Attaches starter pid 700 on host n0 (the job the recording agents below locate) as `who`. */
function attachStarter700(s: TestServer, who: { authorization: string }) {
  return s.app.inject({
    method: 'POST',
    url: '/api/jobs/attach',
    headers: who,
    payload: { host: 'n0', starterPid: 700 },
  });
}

function mutableLocator(first: LocatedJob): { locator: JobLocator; set(j: LocatedJob): void } {
  let current = first;
  return {
    set: (j) => {
      current = j;
    },
    locator: {
      locate: async (pid: number): Promise<Result<LocatedJob>> =>
        pid === 700 ? ok(current) : err(mqdError('MQD_E_NOT_STARTER', `pid ${pid}`)),
    },
  };
}

/** An agent on host n0 with a synthetic one-rank reader that records every read's options. */
async function recordingAgent(
  s: TestServer,
  locator: JobLocator,
): Promise<{ targets: readonly RankTarget[]; opts: ReadOptions }[]> {
  const reads: { targets: readonly RankTarget[]; opts: ReadOptions }[] = [];
  const inner = createFakeReader({ worldSize: 1 });
  const agent = startAgent({
    serverUrl: s.url,
    token: AGENT_TOKEN,
    host: 'n0',
    reader: {
      mpi: inner.mpi,
      read: (targets, opts) => {
        reads.push({ targets, opts });
        return inner.read(targets, opts);
      },
    },
    locator,
  });
  cleanup.push(() => agent.dispose());
  await agent.whenConnected();
  return reads;
}

describe('pid reuse', () => {
  it('gives the second user a new job; the first keeps theirs; the agent gets the owner uid and start times', async () => {
    const s = await server();
    const alice = await createUser(s.app, 'alice', 1001);
    const bob = await createUser(s.app, 'bob', 1002);
    const layout = (uid: number, t: string): LocatedJob => ({
      ranks: [{ rank: 0, pid: 701, host: 'n0', startTime: `${t}1` }],
      method: 'test',
      uid,
      command: 'mpirun',
      starterStartTime: t,
    });
    const loc = mutableLocator(layout(1001, '5000'));
    const reads = await recordingAgent(s, loc.locator);
    const attach = (who: { authorization: string }) => attachStarter700(s, who);
    const a = await attach(alice);
    expect(a.statusCode, a.body).toBe(201);
    const aliceJob = json<{ job: { id: string; uid: number } }>(a).job;
    const snap = await s.app.inject({
      method: 'POST',
      url: `/api/jobs/${aliceJob.id}/snapshots`,
      headers: alice,
    });
    expect(snap.statusCode, snap.body).toBe(201);
    expect(reads[0]?.opts.ownerUid).toBe(1001);
    expect(reads[0]?.opts.allowRoot).toBeUndefined();
    expect(reads[0]?.targets).toEqual([{ rank: 0, pid: 701, startTime: '50001' }]);

    // Alice's mpirun exits; Bob's process gets pid 700 (another start time).
    loc.set(layout(1002, '9000'));
    const b = await attach(bob);
    expect(b.statusCode, b.body).toBe(201);
    const bobJob = json<{ job: { id: string; uid: number } }>(b).job;
    expect(bobJob.id).not.toBe(aliceJob.id);
    expect(bobJob.uid).toBe(1002);
    // Alice still owns and reads her job and its snapshot; Bob cannot.
    const mine = await s.app.inject({ method: 'GET', url: `/api/jobs/${aliceJob.id}`, headers: alice });
    expect(mine.statusCode).toBe(200);
    expect(json<{ job: { uid: number } }>(mine).job.uid).toBe(1001);
    const theirs = await s.app.inject({ method: 'GET', url: `/api/jobs/${aliceJob.id}`, headers: bob });
    expect(theirs.statusCode).toBe(403);
    expect((await s.app.mqd.store.job(aliceJob.id))?.endedAt).not.toBeNull();
  });
});

describe('jobs of uid 0', () => {
  it('are for admins only; only their snapshots ask the agent to read root ranks', async () => {
    const s = await server();
    const rootUser = await createUser(s.app, 'mapped-root', 0); // a user mapped to uid 0, not admin
    const admin = await createUser(s.app, 'ops', null, true);
    const loc = mutableLocator({
      ranks: [{ rank: 0, pid: 701, host: 'n0', startTime: '11' }],
      method: 'test',
      uid: 0,
      command: 'mpirun',
      starterStartTime: '1',
    });
    const reads = await recordingAgent(s, loc.locator);
    const attach = (who: { authorization: string }) => attachStarter700(s, who);
    const refused = await attach(rootUser);
    expect(refused.statusCode, refused.body).toBe(403);
    expect(json(refused)).toMatchObject({ code: 'MQD_E_FORBIDDEN' });
    const a = await attach(admin);
    expect(a.statusCode, a.body).toBe(201);
    const job = json<{ job: { id: string } }>(a).job;
    const snap = await s.app.inject({ method: 'POST', url: `/api/jobs/${job.id}/snapshots`, headers: admin });
    expect(snap.statusCode, snap.body).toBe(201);
    expect(reads).toHaveLength(1);
    expect(reads[0]?.opts).toMatchObject({ ownerUid: 0, allowRoot: true });
    const peek = await s.app.inject({ method: 'GET', url: `/api/jobs/${job.id}`, headers: rootUser });
    expect(peek.statusCode).toBe(403);
  });
});

describe('store failures', () => {
  it('refuses to start on a corrupt database with MQD_E_STORE_CORRUPT and says how to recover', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mqd-corrupt-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'mqd.sqlite'), Buffer.alloc(8192, 0x5a));
    let caught: unknown = null;
    try {
      await new SqliteStore({ dataDir: dir, retention: { maxSnapshotsPerJob: 0, maxAgeSeconds: 0 } }).close();
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(MqdException);
    expect((caught as MqdException).error.code).toBe('MQD_E_STORE_CORRUPT');
    expect((caught as MqdException).error.message).toMatch(/\.recover/);
  });

  it('makes the data dir 0700 and the database 0600, also when they already exist', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mqd-perm-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const data = join(dir, 'data');
    mkdirSync(data, { mode: 0o755 });
    writeFileSync(join(data, 'mqd.sqlite'), '', { mode: 0o644 });
    const st = new SqliteStore({ dataDir: data, retention: { maxSnapshotsPerJob: 0, maxAgeSeconds: 0 } });
    await st.close();
    expect(statSync(data).mode & 0o777).toBe(0o700);
    expect(statSync(join(data, 'mqd.sqlite')).mode & 0o777).toBe(0o600);
  });

  it('stays up and read-only (MQD_E_STORE_READONLY) when the disk fills, agents connecting included', async () => {
    const mnt = mkdtempSync(join(tmpdir(), 'mqd-full-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mnt]);
    cleanup.push(() => {
      execFileSync('umount', [mnt]);
      rmSync(mnt, { recursive: true, force: true });
    });
    const s = await server({ dataDir: join(mnt, 'data') });
    const alice = await createUser(s.app, 'alice', 1001);
    // Fill the file system to the last byte.
    try {
      execFileSync('dd', ['if=/dev/zero', `of=${join(mnt, 'fill')}`, 'bs=4k'], { stdio: 'ignore' });
    } catch {
      // dd ends with ENOSPC: that is the point.
    }
    // Agents connect and disconnect: each audit write hits SQLITE_FULL.
    for (let i = 0; i < 3; i++) {
      const agent = startAgent({
        serverUrl: s.url,
        token: AGENT_TOKEN,
        host: `full-${i}`,
        reader: createFakeReader({ worldSize: 1 }),
      });
      await agent.whenConnected();
      await agent.dispose();
    }
    // Creating a user is a write: refused with a coded error, the process alive.
    let res = await s.app.inject({
      method: 'POST',
      url: '/api/admin/users',
      headers: s.admin,
      payload: { name: 'bob', uid: 1002, admin: false },
    });
    for (let i = 0; i < 50 && res.statusCode !== 503; i++) {
      res = await s.app.inject({
        method: 'POST',
        url: '/api/admin/users',
        headers: s.admin,
        payload: { name: `bob${i}`, uid: 1002, admin: false },
      });
    }
    expect(res.statusCode, res.body).toBe(503);
    expect(json(res)).toMatchObject({ code: 'MQD_E_STORE_READONLY' });
    await waitFor(() => s.app.mqd.store.readOnlyReason !== null, 'the store to be read-only');
    // Reads still work.
    const jobs = await s.app.inject({ method: 'GET', url: '/api/jobs', headers: alice });
    expect(jobs.statusCode).toBe(200);
    const health = await fetch(`${s.url}/api/health`);
    expect(health.status).toBe(200);
    await s.close();
  });
});

describe('browsers', () => {
  it('sends CSP, frame-ancestors, nosniff and Referrer-Policy on every answer', async () => {
    const s = await server();
    for (const url of ['/api/health', '/api/jobs', '/nowhere']) {
      const res = await s.app.inject({ method: 'GET', url });
      expect(res.headers['content-security-policy'], url).toMatch(/script-src 'self'/);
      expect(res.headers['content-security-policy'], url).toMatch(/frame-ancestors 'none'/);
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['referrer-policy']).toBe('no-referrer');
    }
  });

  it('refuses state-changing requests from a foreign Origin (MQD_E_BAD_ORIGIN); no Origin and the own origin pass', async () => {
    const s = await server();
    const host = new URL(s.url).host;
    const post = (origin?: string) =>
      s.app.inject({
        method: 'POST',
        url: '/api/admin/users',
        headers: { ...s.admin, host, ...(origin === undefined ? {} : { origin }) },
        payload: { name: `u${Math.random().toString(36).slice(2, 8)}`, uid: 5, admin: false },
      });
    const foreign = await post('https://evil.example');
    expect(foreign.statusCode).toBe(403);
    expect(json(foreign)).toMatchObject({ code: 'MQD_E_BAD_ORIGIN' });
    expect((await post(`http://${host}`)).statusCode).toBe(201);
    expect((await post()).statusCode).toBe(201);
    const logout = await s.app.inject({
      method: 'POST',
      url: '/api/logout',
      headers: { origin: 'null', cookie: 'mqd_session=x' },
    });
    expect(logout.statusCode).toBe(403);
  });

  it('closes socket.io handshakes from a foreign Origin on /ui and /agents', async () => {
    const s = await server();
    for (const nsp of ['/ui', '/agents']) {
      const sock = io(`${s.url}${nsp}`, {
        transports: ['polling'],
        reconnection: false,
        extraHeaders: { origin: 'https://evil.example', authorization: s.admin.authorization },
        auth: { token: AGENT_TOKEN },
      });
      const e = await new Promise<Error>((r) => sock.once('connect_error', r));
      sock.disconnect();
      expect(e.message, nsp).toMatch(/xhr poll error|Forbidden|403|400/i);
    }
  });

  it('believes the proxy user header only from a configured proxy, and never for the admin', async () => {
    const s = await server({ proxyUserHeader: 'x-remote-user', trustedProxies: ['10.1.2.0/24'] });
    await createUser(s.app, 'alice', 1000);
    const spoofed = await s.app.inject({
      method: 'GET',
      url: '/api/me',
      headers: { 'x-remote-user': 'alice' },
      remoteAddress: '192.168.7.7',
    });
    expect(spoofed.statusCode).toBe(401);
    const proxied = await s.app.inject({
      method: 'GET',
      url: '/api/me',
      headers: { 'x-remote-user': 'alice' },
      remoteAddress: '10.1.2.3',
    });
    expect(proxied.statusCode).toBe(200);
    // X-Forwarded-For cannot make an untrusted peer look like the proxy.
    const forwarded = await s.app.inject({
      method: 'GET',
      url: '/api/me',
      headers: { 'x-remote-user': 'alice', 'x-forwarded-for': '10.1.2.3' },
      remoteAddress: '192.168.7.7',
    });
    expect(forwarded.statusCode).toBe(401);
    const admin = await s.app.inject({
      method: 'GET',
      url: '/api/me',
      headers: { 'x-remote-user': 'admin' },
      remoteAddress: '10.1.2.3',
    });
    expect(admin.statusCode).toBe(403);
  });
});

describe('agent credentials', () => {
  it('accepts only the token derived for the host name unless a shared token is allowed', async () => {
    const s = await server({ allowSharedAgentToken: false });
    const codeOf = async (host: string, token: string) => {
      const a = startAgent({
        serverUrl: s.url,
        token,
        host,
        reader: createFakeReader({ worldSize: 1 }),
        backoff: { initialMs: 10_000 },
      });
      cleanup.push(() => a.dispose());
      let code: string | null = null;
      a.onEvent((e) => {
        if (e.kind === 'connect-error') code = e.error.code;
        if (e.kind === 'welcome') code = 'welcome';
      });
      await waitFor(() => code !== null, `agent ${host} to be answered`);
      await a.dispose();
      return code;
    };
    expect(await codeOf('n1', AGENT_TOKEN)).toBe('MQD_E_UNAUTHENTICATED');
    expect(await codeOf('n1', hostAgentToken(AGENT_TOKEN, 'n2'))).toBe('MQD_E_UNAUTHENTICATED');
    expect(await codeOf('n1', hostAgentToken(AGENT_TOKEN, 'n1'))).toBe('welcome');
  });

  it('TLS: an agent refuses a server certificate it does not trust and accepts one signed by --ca', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mqd-tls-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
      ].concat(['-addext', 'subjectAltName=IP:127.0.0.1']),
      { stdio: 'ignore' },
    );
    const app = await buildApp({
      config: {
        dataDir: ':memory:',
        agentToken: AGENT_TOKEN,
        adminToken: 'admin-token-for-tests-0123456789',
        tlsCert: cert,
        tlsKey: key,
      },
    });
    cleanup.push(() => app.close());
    await app.listen({ port: 0, host: '127.0.0.1' });
    const addr = app.server.address();
    if (addr === null || typeof addr === 'string') throw new Error('no TCP address');
    const url = `https://127.0.0.1:${addr.port}`;
    const tryAgent = async (host: string, tls?: { ca: string }) => {
      const a = startAgent({
        serverUrl: url,
        token: hostAgentToken(AGENT_TOKEN, host),
        host,
        reader: createFakeReader({ worldSize: 1 }),
        backoff: { initialMs: 10_000 },
        ...(tls ? { tls } : {}),
      });
      cleanup.push(() => a.dispose());
      let outcome: string | null = null;
      a.onEvent((e) => {
        if (e.kind === 'connect-error') outcome = e.error.message;
        if (e.kind === 'welcome') outcome = 'welcome';
      });
      await waitFor(() => outcome !== null, `agent ${host} to connect or fail`);
      await a.dispose();
      return outcome;
    };
    expect(await tryAgent('untrusting')).not.toBe('welcome');
    expect(await tryAgent('trusting', { ca: readFileSync(cert, 'utf8') })).toBe('welcome');
    // A session cookie over TLS is Secure.
    const login = await app.inject({
      method: 'POST',
      url: '/api/login',
      payload: { token: 'admin-token-for-tests-0123456789' },
    });
    expect(String(login.headers['set-cookie'])).toMatch(/; Secure/);
  });

  it('refuses plain HTTP on a non-loopback address unless allowed (MQD_E_INSECURE)', () => {
    const r = loadConfig({ argv: ['--host', '0.0.0.0'] });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.code).toBe('MQD_E_INSECURE');
    expect(loadConfig({ argv: ['--host', '0.0.0.0', '--allow-insecure-http'] }).ok).toBe(true);
    expect(loadConfig({ argv: ['--host', '127.0.0.1'] }).ok).toBe(true);
  });
});

describe('tokens and share links', () => {
  it('login tokens expire (MQD_E_TOKEN_EXPIRED) and revocation ends the sessions made with them', async () => {
    const clock = { now: 1_000_000 };
    const s = await startServer({ loginTokenTtlSeconds: 3600 }, { clock: () => clock.now });
    cleanup.push(() => s.close());
    const alice = await createUser(s.app, 'alice', 1000);
    const token = alice.authorization.replace('Bearer ', '');
    const login = await s.app.inject({ method: 'POST', url: '/api/login', payload: { token } });
    expect(login.statusCode).toBe(200);
    const session = { authorization: `Bearer ${json<{ sessionToken: string }>(login).sessionToken}` };
    expect((await s.app.inject({ method: 'GET', url: '/api/me', headers: session })).statusCode).toBe(200);
    clock.now += 3601 * 1000;
    const late = await s.app.inject({ method: 'POST', url: '/api/login', payload: { token } });
    expect(json(late)).toMatchObject({ code: 'MQD_E_TOKEN_EXPIRED' });
    expect((await s.app.inject({ method: 'GET', url: '/api/me', headers: session })).statusCode).toBe(401);

    const bob = await createUser(s.app, 'bob', 1001);
    const bobLogin = await s.app.inject({
      method: 'POST',
      url: '/api/login',
      payload: { token: bob.authorization.replace('Bearer ', '') },
    });
    const bobSession = { authorization: `Bearer ${json<{ sessionToken: string }>(bobLogin).sessionToken}` };
    const rev = await s.app.inject({ method: 'DELETE', url: '/api/admin/users/bob/token', headers: s.admin });
    expect(rev.statusCode).toBe(204);
    expect((await s.app.inject({ method: 'GET', url: '/api/me', headers: bobSession })).statusCode).toBe(401);
    expect((await s.app.inject({ method: 'GET', url: '/api/me', headers: bob })).statusCode).toBe(401);
  });

  it('share links are listed and revoked by their owner only', async () => {
    const s = await server();
    const alice = await createUser(s.app, 'alice', 1001);
    const bob = await createUser(s.app, 'bob', 1002);
    const loc = mutableLocator({
      ranks: [{ rank: 0, pid: 701, host: 'n0' }],
      method: 'test',
      uid: 1001,
      command: 'mpirun',
      starterStartTime: '5',
    });
    const agent = startAgent({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      host: 'n0',
      reader: createFakeReader({ worldSize: 1 }),
      locator: loc.locator,
    });
    cleanup.push(() => agent.dispose());
    await agent.whenConnected();
    const a = await s.app.inject({
      method: 'POST',
      url: '/api/jobs/attach',
      headers: alice,
      payload: { host: 'n0', starterPid: 700 },
    });
    const jobId = json<{ job: { id: string } }>(a).job.id;
    const snap = await s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: alice });
    const snapId = json<{ snapshot: { id: string } }>(snap).snapshot.id;
    const share = await s.app.inject({
      method: 'POST',
      url: `/api/snapshots/${snapId}/share`,
      headers: alice,
    });
    const shareId = json<{ id: string }>(share).id;
    expect((await s.app.inject({ method: 'GET', url: `/api/shared/${shareId}` })).statusCode).toBe(200);
    const mine = await s.app.inject({ method: 'GET', url: '/api/shares', headers: alice });
    expect(json<{ shares: { id: string }[] }>(mine).shares.map((x) => x.id)).toEqual([shareId]);
    expect(
      json<{ shares: unknown[] }>(await s.app.inject({ method: 'GET', url: '/api/shares', headers: bob }))
        .shares,
    ).toEqual([]);
    expect(
      (await s.app.inject({ method: 'DELETE', url: `/api/shares/${shareId}`, headers: bob })).statusCode,
    ).toBe(404);
    expect(
      (await s.app.inject({ method: 'DELETE', url: `/api/shares/${shareId}`, headers: alice })).statusCode,
    ).toBe(204);
    const gone = await s.app.inject({ method: 'GET', url: `/api/shared/${shareId}` });
    expect(gone.statusCode).toBe(404);
  });
});
