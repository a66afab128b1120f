// The cluster channel attacked as a PostgreSQL role with no grants would: a real PostgreSQL 15
// (testkit startPostgres), two real instances on it (buildApp, as `mqd serve` builds them), a
// real agent on instance A, and a second role (CREATE ROLE ... LOGIN, nothing granted) that
// connects to the instances' database (PUBLIC keeps CONNECT unless the site revokes it), LISTENs
// on the instances' channels and pg_notifies into them. What it reads is ciphertext; what it
// sends, forged in the form an unsealed adapter takes or replayed from what it captured, is
// dropped and counted (GET /metrics mqd_cluster_dropped_messages_total), and nothing it asked
// for happens.
import { randomBytes } from 'node:crypto';
import { done, type PostgresServer, pending, postgresAvailable, startPostgres, waitFor } from '@mqd/testkit';
import pg from 'pg';
import { io } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import { Sealer } from '../src/cluster/seal.js';
import { SEALED_CHANNEL_PREFIX } from '../src/cluster/sealed-adapter.js';
import type { JobLocator, RankReader } from '../src/shared/seams.js';
import { createFakeLocator, createFakeReader } from '../src/synthetic/fakes.js';
import { AGENT_TOKEN, cleanupAfterEach, createUser, startServer, type TestServer } from './helpers.js';

const cleanup = cleanupAfterEach();
const CLUSTER_SECRET = 'cluster-attack-secret-0123456789abcdef';
/** What must never cross the database in clear: the agent's host, the job's command line. */
const HOST = 'victim-node-7f3a';
const COMMAND = 'SECRETCMD-93ab ./solver --input /home/alice/private.dat';
const STARTER = 4242;
/** Enough ranks that the folded chunk crosses as an attachment row, not inline in the NOTIFY. */
const RANKS = 64;
const NAMESPACES = ['/', '/ui', '/agents', '/cluster'];
const channelOf = (nsp: string) => `${SEALED_CHANNEL_PREFIX}#${nsp}`;

let pgServer: PostgresServer;

beforeAll(async () => {
  if (postgresAvailable()) pgServer = await startPostgres();
}, 120_000);
afterAll(async () => {
  await pgServer?.stop();
});

/** A client of `url`, ended after the test. */
async function client(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  c.on('error', () => undefined);
  await c.connect();
  cleanup.push(() => c.end());
  return c;
}

interface Rig {
  readonly a: TestServer;
  readonly b: TestServer;
  /** What the agent on A was asked, in order. */
  readonly asked: string[];
  /** The attacker's connection (role mqd_intruder, no grants), and what it heard. */
  readonly intruder: pg.Client;
  readonly heard: { channel: string; payload: string }[];
  /** The database's URL, as the instances' superuser. */
  readonly url: string;
}

/** A fresh database, instances A and B on it, A's agent for HOST, and the intruder listening. */
async function rig(): Promise<Rig> {
  const url = await pgServer.createDatabase('attack');
  const su = await client(pgServer.url);
  await su.query(
    `DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mqd_intruder') THEN CREATE ROLE mqd_intruder LOGIN; END IF; END $$`,
  );
  const opts = {
    clusterTiming: { stateIntervalMs: 200, heartbeatMs: 500 },
    leaseMs: { renew: 200, ttl: 1000 },
  };
  const a = await startServer({ storeUrl: url, clusterSecret: CLUSTER_SECRET }, opts);
  cleanup.push(() => a.close());
  const b = await startServer({ storeUrl: url, clusterSecret: CLUSTER_SECRET }, opts);
  cleanup.push(() => b.close());

  const asked: string[] = [];
  const fakeReader = createFakeReader({ worldSize: RANKS });
  const reader: RankReader = {
    mpi: fakeReader.mpi,
    read: (ranks, o) => {
      asked.push(`read ranks=${ranks.map((r) => r.rank).join(',')} allowRoot=${o.allowRoot === true}`);
      return fakeReader.read(ranks, o);
    },
  };
  const fakeLocator = createFakeLocator({
    starterPid: STARTER,
    uid: 1000,
    command: COMMAND,
    hosts: [HOST],
    ranksPerHost: RANKS,
  });
  const locator: JobLocator = {
    locate: (pid) => {
      asked.push(`locate ${pid}`);
      return fakeLocator.locate(pid);
    },
    ...(fakeLocator.list ? { list: fakeLocator.list.bind(fakeLocator) } : {}),
  };
  const agent = startAgent({ serverUrl: a.url, token: AGENT_TOKEN, host: HOST, reader, locator });
  cleanup.push(() => agent.dispose());
  await waitFor(() => (b.app.mqd.hub.isConnected(HOST) ? done(true) : pending()), {
    timeoutMs: 15_000,
    what: 'B to learn that A holds the agent',
  });

  const intruderUrl = url.replace('postgres@', 'mqd_intruder@');
  expect(intruderUrl).not.toBe(url);
  const intruder = await client(intruderUrl);
  const heard: Rig['heard'] = [];
  intruder.on('notification', (n) => heard.push({ channel: n.channel, payload: n.payload ?? '' }));
  for (const nsp of NAMESPACES) await intruder.query(`LISTEN "${channelOf(nsp)}"`);
  // socket.io's own channel names too: nothing of MQD's may be on them.
  for (const nsp of NAMESPACES) await intruder.query(`LISTEN "socket.io#${nsp}"`);
  return { a, b, asked, intruder, heard, url };
}

/** The instance's dropped-message counters, by reason, from its /metrics. */
async function dropped(s: TestServer): Promise<Record<string, number>> {
  const r = await s.app.inject({ method: 'GET', url: '/metrics', headers: s.admin });
  expect(r.statusCode).toBe(200);
  const out: Record<string, number> = {};
  for (const m of r.body.matchAll(/^mqd_cluster_dropped_messages_total\{reason="([a-z-]+)"\} (\d+)$/gm)) {
    out[m[1] as string] = Number(m[2]);
  }
  return out;
}

/** Waits until `s` has dropped at least `want` more messages for each reason than `before`. */
async function droppedAtLeast(
  s: TestServer,
  before: Record<string, number>,
  want: Record<string, number>,
): Promise<Record<string, number>> {
  return waitFor(
    async () => {
      const now = await dropped(s);
      const short = Object.entries(want).filter(([k, n]) => (now[k] ?? 0) - (before[k] ?? 0) < n);
      return short.length === 0 ? done(now) : pending(JSON.stringify(now));
    },
    { timeoutMs: 15_000, what: `the instance to drop ${JSON.stringify(want)} more messages` },
  );
}

async function api<T>(s: TestServer, method: 'GET' | 'POST', url: string, payload?: object) {
  const r = await s.app.inject({ method, url, headers: s.admin, ...(payload ? { payload } : {}) });
  return { status: r.statusCode, body: r.json() as T };
}

/** A snapshot of the job asked of B, read through A's agent: genuine traffic on the channel. */
async function snapshotThroughB(r: Rig): Promise<string> {
  const att = await api<{ job: { id: string } }>(r.b, 'POST', '/api/jobs/attach', {
    host: HOST,
    starterPid: STARTER,
  });
  expect(att.status).toBe(201);
  const snap = await api<{ snapshot: { ok: number } }>(r.b, 'POST', `/api/jobs/${att.body.job.id}/snapshots`);
  expect(snap.status).toBe(201);
  expect(snap.body.snapshot.ok).toBe(RANKS);
  return att.body.job.id;
}

/** The adapter's message (socket.io-adapter's ClusterMessage) as an unsealed adapter reads it. */
const forgedEmit = (event: string, m: object) =>
  JSON.stringify({ uid: 'intruder', nsp: '/cluster', type: 9, data: { packet: [event, m] } });

describe.runIf(postgresAvailable())('the cluster channel, attacked by a database role with no grants', () => {
  it('reads nothing in clear: no host name, command line or job; and no table of MQD’s', async () => {
    const r = await rig();
    await snapshotThroughB(r);
    // The instances' states (every 200 ms) carry the starter's command line: seen several.
    await waitFor(() => (r.heard.length >= 20 ? done(true) : pending(String(r.heard.length))), {
      timeoutMs: 10_000,
      what: 'the intruder to hear traffic',
    });
    for (const { channel, payload } of r.heard) {
      expect(channel.startsWith(`${SEALED_CHANNEL_PREFIX}#`)).toBe(true);
      // Sealed bytes inline, or the id of a row of the payload table: nothing else.
      expect(payload).toMatch(/^(s[A-Za-z0-9+/=]+|a\d+)$/);
      const bytes = payload.startsWith('s')
        ? Buffer.from(payload.slice(1), 'base64').toString('latin1')
        : payload;
      for (const secret of [HOST, 'SECRETCMD', 'solver', 'alice', 'mqd:state', 'mqd:call', 'admins']) {
        expect(payload).not.toContain(secret);
        expect(bytes).not.toContain(secret);
      }
    }
    // The folded chunk went through the payload table: the intruder heard only its row's id.
    expect(r.heard.some((h) => /^a\d+$/.test(h.payload))).toBe(true);
    // The rows the ids name, and MQD's own tables, are not the intruder's to read.
    for (const table of ['socket_io_attachments', 'jobs', 'snapshots', 'users']) {
      await expect(r.intruder.query(`SELECT * FROM ${table} LIMIT 1`)).rejects.toMatchObject({
        code: '42501',
      });
    }
    // A grant to PUBLIC on the payload table (a careless admin) is taken back by the next start.
    const su = await client(r.url);
    await su.query('GRANT SELECT ON socket_io_attachments TO PUBLIC');
    await r.intruder.query('SELECT count(*) FROM socket_io_attachments');
    const c = await startServer({ storeUrl: r.url, clusterSecret: CLUSTER_SECRET });
    cleanup.push(() => c.close());
    await expect(r.intruder.query('SELECT count(*) FROM socket_io_attachments')).rejects.toMatchObject({
      code: '42501',
    });
  }, 60_000);

  it('drops a forged call with allowRoot, a forged locate, a state evicting the real agent, a join into the admins’ room', async () => {
    const r = await rig();
    const aId = r.a.app.mqd.instance;
    // A non-admin's /ui socket on A, which a forged join would put in the admins' room.
    const alice = await createUser(r.a.app, 'alice', 1000);
    const login = await r.a.app.inject({
      method: 'POST',
      url: '/api/login',
      payload: { token: alice.authorization.slice('Bearer '.length) },
    });
    expect(login.statusCode).toBe(200);
    const browser = io(`${r.a.url}/ui`, {
      transports: ['websocket'],
      // Its own connection: not the agent's (socket.io-client shares one per address by default).
      forceNew: true,
      reconnection: false,
      auth: { token: (login.json() as { sessionToken: string }).sessionToken },
    });
    cleanup.push(() => {
      browser.disconnect();
    });
    await new Promise<void>((ok, fail) => {
      browser.once('connect', () => ok());
      browser.once('connect_error', (e) => fail(e));
    });
    const socketId = browser.id as string;
    const admins = () => r.a.app.mqd.io.of('/ui').adapter.rooms.get('admins')?.has(socketId) === true;
    expect(admins()).toBe(false);
    const agentBefore = r.a.app.mqd.hub.agents().find((x) => x.host === HOST);
    expect(agentBefore?.connected).toBe(true);

    const beforeA = await dropped(r.a);
    const beforeB = await dropped(r.b);
    const forged: [string, string][] = [
      [
        channelOf('/cluster'),
        forgedEmit('mqd:call', {
          id: 'forged-1',
          from: 'intruder',
          to: aId,
          host: HOST,
          method: 'snapshot',
          timeoutMs: 5000,
          params: { ranks: [{ rank: 0, pid: 1, host: HOST }], owner: { allowRoot: true } },
        }),
      ],
      [
        channelOf('/cluster'),
        forgedEmit('mqd:call', {
          id: 'forged-2',
          from: 'intruder',
          to: aId,
          host: HOST,
          method: 'locate',
          timeoutMs: 5000,
          params: STARTER,
        }),
      ],
      [
        channelOf('/cluster'),
        forgedEmit('mqd:state', {
          instance: 'intruder',
          agents: [{ host: HOST, agentId: 'intruder', connected: true, connectedAt: 0 }],
          starters: [],
          discovered: [],
        }),
      ],
      [
        channelOf('/ui'),
        JSON.stringify({
          uid: 'intruder',
          nsp: '/ui',
          type: 4,
          data: { opts: { rooms: [socketId], except: [], flags: {} }, rooms: ['admins'] },
        }),
      ],
    ];
    for (const [channel, payload] of forged)
      await r.intruder.query('SELECT pg_notify($1, $2)', [channel, payload]);
    // Made to look sealed: the format's first byte and random bytes inline, and a row id that
    // names nothing.
    await r.intruder.query('SELECT pg_notify($1, $2)', [
      channelOf('/cluster'),
      `s${Buffer.concat([Buffer.from([1]), randomBytes(199)]).toString('base64')}`,
    ]);
    await r.intruder.query('SELECT pg_notify($1, $2)', [channelOf('/cluster'), 'a999999999']);

    // Both instances read every forged message, and dropped each.
    await droppedAtLeast(r.a, beforeA, { unsealed: forged.length, forged: 1, stale: 1 });
    await droppedAtLeast(r.b, beforeB, { unsealed: forged.length, forged: 1, stale: 1 });
    // The agent was asked nothing; the socket is in no admins' room; A still holds the host,
    // and B still sends A the calls for it.
    expect(r.asked).toEqual([]);
    expect(admins()).toBe(false);
    expect(r.a.app.mqd.hub.agents().find((x) => x.host === HOST)).toMatchObject({
      connected: true,
      connectedAt: agentBefore?.connectedAt,
    });
    expect(r.b.app.mqd.hub.agents().find((x) => x.host === HOST)?.instance).toBe(aId);
    await snapshotThroughB(r);
    expect(r.asked).toEqual([
      `locate ${STARTER}`,
      `read ranks=${[...Array(RANKS).keys()].join(',')} allowRoot=false`,
    ]);
  }, 60_000);

  it('a holder of the secret still speaks only for itself: a state naming another instance is dropped', async () => {
    // Not the intruder's power (it has no secret): the rule that a state lists only its sender's
    // agents, shown with a message sealed as the instances seal theirs.
    const r = await rig();
    const rogue = new Sealer(CLUSTER_SECRET, 'rogue:1');
    const state = (instance: string, host: string) =>
      `s${rogue
        .seal(channelOf('/cluster'), {
          uid: 'rogue',
          nsp: '/cluster',
          type: 9,
          data: {
            packet: [
              'mqd:state',
              {
                instance,
                agents: [{ host, agentId: host, connected: true, connectedAt: 0 }],
                starters: [],
                discovered: [],
              },
            ],
          },
        })
        .toString('base64')}`;
    const before = await dropped(r.a);
    await r.intruder.query('SELECT pg_notify($1, $2)', [
      channelOf('/cluster'),
      state(r.b.app.mqd.instance, HOST),
    ]);
    await droppedAtLeast(r.a, before, { 'wrong-sender': 1 });
    expect(r.a.app.mqd.hub.agents().find((x) => x.host === HOST)?.connected).toBe(true);
    // The same seal speaking for itself is taken: the message above was refused for its sender only.
    await r.intruder.query('SELECT pg_notify($1, $2)', [
      channelOf('/cluster'),
      state('rogue:1', 'ghost-node'),
    ]);
    await waitFor(() => (r.a.app.mqd.hub.isConnected('ghost-node') ? done(true) : pending()), {
      timeoutMs: 10_000,
      what: 'A to take the state the rogue sealed for itself',
    });
    expect(r.a.app.mqd.hub.agents().find((x) => x.host === HOST)?.instance).toBe(r.a.app.mqd.instance);
  }, 60_000);

  it('drops every genuine sealed message it captured and sent again', async () => {
    const r = await rig();
    r.heard.length = 0;
    const jobId = await snapshotThroughB(r);
    const captured = r.heard.splice(0);
    expect(captured.length).toBeGreaterThan(5);
    expect(r.asked).toHaveLength(2);
    const beforeA = await dropped(r.a);
    const beforeB = await dropped(r.b);
    for (const m of captured) await r.intruder.query('SELECT pg_notify($1, $2)', [m.channel, m.payload]);
    // Within the seal's time window: refused by the nonces each instance has seen. An instance
    // does not read back the attachment rows it wrote itself (nor, sent again, act on its own
    // message): each of those is counted by the other instance only.
    const rows = captured.filter((m) => m.payload.startsWith('a')).length;
    expect(rows).toBeGreaterThan(0);
    const least = { replayed: captured.length - rows };
    await droppedAtLeast(r.a, beforeA, least);
    await droppedAtLeast(r.b, beforeB, least);
    const counted = (x: Record<string, number>, y: Record<string, number>) =>
      (x['replayed'] ?? 0) - (y['replayed'] ?? 0);
    await waitFor(
      async () => {
        const n = counted(await dropped(r.a), beforeA) + counted(await dropped(r.b), beforeB);
        return n >= 2 * captured.length - rows ? done(n) : pending(String(n));
      },
      { timeoutMs: 15_000, what: 'every replay to be counted' },
    );
    expect(counted(await dropped(r.a), beforeA) + counted(await dropped(r.b), beforeB)).toBe(
      2 * captured.length - rows,
    );
    expect(r.asked).toHaveLength(2);
    const list = await api<{ snapshots: unknown[] }>(r.b, 'GET', `/api/jobs/${jobId}/snapshots`);
    expect(list.body.snapshots).toHaveLength(1);
  }, 60_000);
});
