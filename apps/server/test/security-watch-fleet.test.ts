// The hang watch and the Fleet route as attackers use them. A job whose name is chat markup
// (a channel ping, a disguised link) is really watched, really hangs and really notifies a
// local HTTP receiver: the text arrives neutralised, the raw name in `mqd`. The watcher's share
// link is the system's: a user named `watch` (made in the store, as before the name was
// reserved) lists and revokes none; the job's owner does; another user cannot. /api/fleet over
// a thousand stored jobs: a burst over real HTTP gets 429s past the per-user limit while
// /api/health answers, and one request costs a fixed number of SQL statements (counted at
// better-sqlite3's prepare), with no discovery refresh per request. The store's side of share
// ownership and of the fleet page runs on SQLite and on a real PostgreSQL.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type ApiFleetJob,
  type DiscoveredJob,
  JobId,
  ok,
  type Result,
  SnapshotId,
  syntheticStacksJob,
} from '@mqd/model';
import { type PostgresServer, startPostgres } from '@mqd/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken, RESERVED_NAMES } from '../src/auth/auth.js';
import type { SnapshotHub } from '../src/fanout/fanout.js';
import type { JobRecord, WatchJobInfo } from '../src/shared/types.js';
import { PgStore } from '../src/store/dialect-pg.js';
import { SqliteStore } from '../src/store/dialect-sqlite.js';
import type { StorePort } from '../src/store/store-port.js';
import { MIGRATIONS, migrationsFor } from '../src/store/store-schema.js';
import { chatLink, chatText, MAX_CHAT_VALUE_CHARS, webhookBody } from '../src/watch/notify.js';
import type { CountersReply, WatchAgents } from '../src/watch/source.js';
import { FLEET_REFRESH_MS, type Timers } from '../src/watch/watcher.js';
import {
  ADMIN_TOKEN,
  bodyJson,
  cleanupAfterEach,
  createUser,
  sqliteOf,
  startServer,
  waitFor,
} from './helpers.js';

const cleanup = cleanupAfterEach();
const T0 = 1_800_000_000_000;
const PERIOD_S = 60;
const PUBLIC = 'https://mqd.example.test';
const HOSTILE = '<!channel> *x* `y` <https://evil.example/s/abc|http://real/s/1>';

// --- a hung ring of 4 ranks on one node, whose Slurm job name is HOSTILE ----------------------

const noTimers: Timers = { setTimeout: () => 0, clearTimeout: () => undefined };

/** The agents of one node: discovery of one job (uid 1000), idle counters, a deadlocked read. */
class HungRingNode implements WatchAgents {
  discoveredCalls = 0;
  /** Off: the node reports no job (the fleet tests' jobs are the store's alone). */
  reporting = true;
  readonly job: DiscoveredJob = {
    key: 'slurm:4711',
    kind: 'slurm',
    slurmJob: '4711',
    uid: 1000,
    command: '/home/alice/@here `rm -rf` [x](https://evil.example)',
    startedAt: T0 - 3_600_000,
    jobName: HOSTILE,
    partition: 'batch',
    watch: 'on',
    ranks: [0, 1, 2, 3].map((rank) => ({ rank, pid: 700 + rank, startTime: String(9000 + rank) })),
  };
  discovered() {
    this.discoveredCalls++;
    return this.reporting ? [{ host: 'h1', job: this.job, at: T0 }] : [];
  }
  isConnected(host: string): boolean {
    return host === 'h1';
  }
  async counters(
    _host: string,
    req: { ranks: { rank: number; pid: number }[] },
  ): Promise<Result<CountersReply>> {
    return ok({
      ranks: req.ranks.map((r) => ({ rank: r.rank, cpuTicks: 10, switches: 5, state: 'S' })),
      errors: [],
      clockTicksPerSecond: 100,
      at: 0,
    });
  }
  readonly hub: SnapshotHub = {
    seenStarters: () => [],
    isConnected: (host) => host === 'h1',
    snapshot: async (host, targets, _timeout, onRanks) => {
      const snap = syntheticStacksJob({ ranks: 4, scenario: 'ssend-ring' });
      const ranks = targets.map((t) => {
        const r = snap.ranks.find((x) => x.rank === t.rank);
        if (r === undefined) throw new Error(`rank ${t.rank} is not in the ring`);
        return { ...r, pid: t.pid, host, pausedMicros: 1000 };
      });
      onRanks(ranks);
      return ok({ count: ranks.length, mpi: snap.mpi, durationMicros: 10 });
    },
  };
}

/** A local webhook receiver: every body it was sent, parsed. */
async function receiver(): Promise<{ url: string; bodies: unknown[] }> {
  const bodies: unknown[] = [];
  const server: Server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  cleanup.push(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, bodies };
}

/** A watched server over HungRingNode on a manual clock; rounds until the ring is notified. */
async function hungRing() {
  const hook = await receiver();
  const node = new HungRingNode();
  const clock = { now: T0 };
  const s = await startServer(
    {
      publicUrl: PUBLIC,
      watchEnabled: true,
      watchPeriodSeconds: PERIOD_S,
      watchHungAfter: 3,
      watchStopBudgetMs: 1000,
      watchWebhooks: [hook.url],
    },
    {
      clock: () => clock.now,
      snapshotHub: node.hub,
      watchAgents: node,
      watchTimers: noTimers,
      slurm: null,
      webhookBackoffMs: 1,
    },
  );
  cleanup.push(() => s.close());
  for (let i = 0; i < 5 && hook.bodies.length === 0; i++) {
    clock.now += PERIOD_S * 1000;
    await s.app.mqd.watcher.tick();
    await s.app.mqd.watcher.settled();
  }
  await waitFor(() => hook.bodies.length === 1, 'the hang notification');
  const body = hook.bodies[0] as { text: string; mqd: { link: string; program: string; jobKey: string } };
  return { s, node, clock, hook, body, shareId: body.mqd.link.slice(`${PUBLIC}/s/`.length) };
}

// --- the webhook's text -----------------------------------------------------------------------

/** What no chat format may read as markup, a mention or a link in text a job wrote. */
function expectInert(t: string): void {
  expect(t).not.toMatch(/[<>*`|[\]@~]/);
  expect(t).not.toMatch(/:\/\//);
  expect(t).not.toMatch(/[A-Za-z0-9]\.[A-Za-z]/);
  expect(t).not.toMatch(/(^|[^A-Za-z0-9])_|_($|[^A-Za-z0-9])/);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: none may remain.
  expect(t).not.toMatch(/[\u0000-\u001f\u007f\u200b-\u200f\u202a-\u202e\u2066-\u2069\n]/);
}

describe('webhook text from a hostile job', () => {
  it('chatText neutralises mentions, markup, links and hidden characters, and keeps plain names', () => {
    const hostile = [
      HOSTILE,
      '<!here> <!everyone> <@U024BE7LH> <#C024BE7LH>',
      '@channel @here @everyone @all @alice',
      '**bold** _it_ ~strike~ ```pre``` > quote # heading',
      '[http://real/s/1](https://evil.example/s/abc) ![img](https://evil.example/p.png)',
      'see https://evil.example/s/abc or evil.example/s/abc or www.evil.example',
      'a\u202eevil\u202c b\u200bc\nline two\r\n\tend',
      '&lt;!channel&gt; & <',
      '| a | b |\n|---|---|',
    ];
    for (const h of hostile) expectInert(chatText(h));
    // Slack's own escaping, so an entity the job wrote shows as typed, never as `<`.
    expect(chatText('&lt;!channel&gt; & <')).toBe('&amp;lt;!channel&amp;gt; &amp; &lt;');
    expect(chatText(HOSTILE)).toBe(
      '&lt;!channel&gt; \u2217x\u2217 \u02cby\u02cb &lt;https\u2236//evil\u2024example/s/abc\u01c0http\u2236//real/s/1&gt;',
    );
    // One line, in stored order (no bidi override), hidden characters gone.
    expect(chatText('a\u202eevil\u202c b\u200bc\nline two')).toBe('aevil bc line two');
    // Long values are cut (the whole one stays in `mqd`).
    const long = chatText('x'.repeat(5000));
    expect([...long]).toHaveLength(MAX_CHAT_VALUE_CHARS);
    expect(long.endsWith('…')).toBe(true);
    // What ordinary jobs are called reads as it is.
    for (const plain of [
      'ring',
      'wrong_tag',
      'compute_loop',
      'solver-2',
      '0-3',
      'uid 1000',
      '2026-12-02T01:00:00.000Z',
    ])
      expect(chatText(plain)).toBe(plain);
    // The one link is the server's own: Slack's <url>, only for a plain http(s) URL.
    expect(chatLink(`${PUBLIC}/s/AbC-_1`)).toBe(`<${PUBLIC}/s/AbC-_1>`);
    expect(chatLink('https://evil.example/x|https://mqd/s/1')).toBeNull();
    expect(chatLink('javascript:alert(1)')).toBeNull();
    expect(chatLink('https://a b')).toBeNull();
  });

  it('webhookBody quotes every job-made field and keeps the raw ones in mqd', () => {
    const notice = {
      jobKey: `starter:${HOSTILE}`,
      jobId: 'w1',
      slurmJob: null,
      user: '@here',
      uid: 1000,
      state: 'hung' as const,
      since: '2026-12-02T01:00:00.000Z',
      leastProgressed: '0-3 <!channel>',
      diagnosis: `Deadlock in ${HOSTILE}`,
      link: `${PUBLIC}/s/abc`,
      cores: [`h1:/cores/${HOSTILE}`],
    };
    const b = webhookBody(notice, HOSTILE);
    const links = b.text.match(/<[^>]*>/g) ?? [];
    expect(links).toEqual([`<${PUBLIC}/s/abc>`]);
    expectInert(b.text.replace(`<${PUBLIC}/s/abc>`, '').replace(/ · /g, ' '));
    expect(b.mqd).toEqual({ ...notice, program: HOSTILE });
  });

  it('a watched job named with chat markup notifies a real receiver neutralised; mqd keeps its name', async () => {
    const { body, shareId } = await hungRing();
    // The only link is the server's share URL; everything else is inert.
    expect(body.text.match(/<[^>]*>/g)).toEqual([`<${PUBLIC}/s/${shareId}>`]);
    const rest = body.text.replace(`<${PUBLIC}/s/${shareId}>`, '').replace(/ · /g, ' ');
    expectInert(rest);
    expect(body.text).not.toContain('<!channel>');
    expect(body.text).not.toContain('evil.example');
    expect(body.text).toContain('&lt;!channel&gt;');
    expect(body.text).toContain('Slurm job 4711');
    // The raw values for scripts.
    expect(body.mqd.program).toBe(HOSTILE);
    expect(body.mqd.jobKey).toBe('slurm:4711');
    expect(body.mqd.link).toBe(`${PUBLIC}/s/${shareId}`);
  });
});

// --- the watcher's share links ----------------------------------------------------------------

type Shares = { shares: { id: string; madeBy?: string; createdBy: string }[] };

describe("the watcher's share links belong to the system", () => {
  it('refuses every internal name at user creation and from the proxy, naming them', async () => {
    const s = await startServer({ proxyUserHeader: 'x-remote-user', trustedProxies: ['127.0.0.1'] });
    cleanup.push(() => s.close());
    for (const name of ['watch', 'Watch', 'WATCH', 'system', 'mqd', 'auto', 'admin']) {
      const r = await s.app.inject({
        method: 'POST',
        url: '/api/admin/users',
        headers: s.admin,
        payload: { name, uid: 1000 },
      });
      expect(r.statusCode, name).toBe(409);
      const e = bodyJson(r) as { code: string; message: string };
      expect(e.code).toBe('MQD_E_RESERVED_NAME');
      for (const n of RESERVED_NAMES) expect(e.message).toContain(n);
    }
    expect(await s.app.mqd.store.userByName('watch')).toBeNull();
    // A trusted proxy cannot name it either.
    const viaProxy = await s.app.inject({
      method: 'GET',
      url: '/api/shares',
      headers: { 'x-remote-user': 'watch' },
    });
    expect(viaProxy.statusCode).toBe(403);
  });

  it('a user named watch (made before the name was reserved) lists and revokes none; the owner does, another user not', async () => {
    const { s, shareId } = await hungRing();
    const store = s.app.mqd.store;
    expect((await store.liveShare(shareId))?.madeBy).toBe('watch');
    // A user named `watch`, as an older server let an admin make one: straight into the store.
    const token = 'a-login-token-of-the-user-named-watch';
    await store.upsertUser({ name: 'watch', uid: 4242, admin: false, tokenHash: hashToken(token) });
    const watchUser = { authorization: `Bearer ${token}` };
    const alice = await createUser(s.app, 'alice', 1000);
    const bob = await createUser(s.app, 'bob', 1001);
    const list = async (headers: Record<string, string>) => {
      const r = await s.app.inject({ method: 'GET', url: '/api/shares', headers });
      expect(r.statusCode).toBe(200);
      return (bodyJson(r) as Shares).shares;
    };
    const revoke = (headers: Record<string, string>) =>
      s.app.inject({ method: 'DELETE', url: `/api/shares/${shareId}`, headers });

    expect(await list(watchUser)).toEqual([]);
    expect((await revoke(watchUser)).statusCode).toBe(404);
    expect(await list(bob)).toEqual([]);
    expect((await revoke(bob)).statusCode).toBe(404);
    // Still live: the link opens.
    expect((await s.app.inject({ method: 'GET', url: `/api/shared/${shareId}` })).statusCode).toBe(200);
    // Admins and the job's owner see it, marked as the system's.
    expect((await list(s.admin)).map((x) => [x.id, x.madeBy])).toEqual([[shareId, 'watch']]);
    expect((await list(alice)).map((x) => [x.id, x.madeBy, x.createdBy])).toEqual([
      [shareId, 'watch', 'watch'],
    ]);
    // The owner revokes it: it stops working at once, and the audit says who.
    expect((await revoke(alice)).statusCode).toBe(204);
    expect((await s.app.inject({ method: 'GET', url: `/api/shared/${shareId}` })).statusCode).toBe(404);
    expect(await list(s.admin)).toEqual([]);
    const audit = await store.activity(20);
    expect(audit.some((a) => a.who === 'alice' && a.detail === `revoked ${shareId}`)).toBe(true);
  });

  it("migration 9 marks the watcher's earlier links as the system's, and only those", async () => {
    const store = new SqliteStore({
      dataDir: ':memory:',
      retention: { maxSnapshotsPerJob: 0, maxAgeSeconds: 0 },
      clock: () => T0,
      // Before migration 9, with the snapshot columns this version's insert names (migration 11).
      migrations: MIGRATIONS.filter((m) => m.version < 9 || m.version === 11),
    });
    cleanup.push(() => store.close());
    await seedShares(store, { legacy: store });
    // The same file opened by this version: what the history says the watcher made is marked.
    store.db.exec(migrationsFor('sqlite').find((m) => m.version === 9)?.sql ?? 'SELECT missing');
    expect((await store.liveShare('by-the-watch'))?.madeBy).toBe('watch');
    expect((await store.liveShare('by-a-user-named-watch'))?.madeBy).toBeUndefined();
    expect((await store.liveShares({ name: 'watch', uid: 4242 })).map((x) => x.id)).toEqual([
      'by-a-user-named-watch',
    ]);
    expect((await store.liveShares({ name: 'alice', uid: 1000 })).map((x) => x.id)).toEqual(['by-the-watch']);
  });
});

/**
 * Alice's job (uid 1000) with a snapshot, the watch's share of it (in an episode) and one a user
 * named `watch` (uid 4242) made of it by hand; both as this version makes them (the watch's with
 * madeBy), or, in `legacy` (a store before migration 9), as an older one did (created_by only).
 */
async function seedShares(store: StorePort, o: { legacy?: SqliteStore } = {}): Promise<void> {
  const job: JobRecord = {
    id: JobId('j-alice'),
    host: 'h1',
    starterPid: 10,
    starterStartTime: '1',
    uid: 1000,
    command: 'mpirun ./ring',
    method: 'discovered',
    ranks: [],
    createdAt: T0,
    createdBy: 'watch',
    endedAt: null,
  };
  const a = { who: 'watch', action: 'watch-register' as const };
  await store.saveJob(job, a);
  const { gzipSync } = await import('node:zlib');
  await store.insertSnapshot(
    {
      meta: {
        id: SnapshotId('s-alice'),
        jobId: job.id,
        takenAt: T0,
        durationMicros: 1,
        createdBy: 'watch',
        bytes: 2,
        storedBytes: 2,
        ranks: 0,
        ok: 0,
        errors: 0,
        missing: 0,
        pendingSends: 0,
        pendingReceives: 0,
        unexpected: 0,
        digest: 'd',
        missingRanks: [],
      },
      gz: gzipSync('{}'),
    },
    a,
  );
  const share = (id: string) => ({
    id,
    snapshotId: SnapshotId('s-alice'),
    createdBy: 'watch',
    createdAt: T0,
    expiresAt: T0 + 3_600_000,
  });
  if (o.legacy !== undefined) {
    // As an older version wrote them: no made_by column yet.
    const insert = o.legacy.db.prepare(
      'INSERT INTO shares (id, snapshot_id, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?)',
    );
    for (const id of ['by-the-watch', 'by-a-user-named-watch']) {
      const x = share(id);
      insert.run(x.id, x.snapshotId, x.createdBy, x.createdAt, x.expiresAt);
    }
  } else {
    await store.insertShare({ ...share('by-the-watch'), madeBy: 'watch' }, { who: 'watch', action: 'share' });
    await store.insertShare(share('by-a-user-named-watch'), { who: 'watch', action: 'share' });
  }
  await store.upsertWatchJob({
    id: '1000:slurm:1',
    key: 'slurm:1',
    uid: 1000,
    jobId: job.id,
    info: INFO,
    at: T0,
  });
  await store.openWatchEpisode({
    watchId: '1000:slurm:1',
    startedAt: T0,
    snapshotId: SnapshotId('s-alice'),
    shareId: 'by-the-watch',
  });
}

const INFO: WatchJobInfo = {
  kind: 'slurm',
  slurmJob: '1',
  program: 'ring',
  command: 'mpirun ./ring',
  partition: null,
  account: null,
  nodes: ['h1'],
  rankCount: 4,
  startedAt: T0,
  watch: 'on',
};

// --- /api/fleet's cost ------------------------------------------------------------------------

/**
 * `n` discovered jobs of uid 1000 in the store, as the watch registers them: every 7th hung,
 * every 5th ended, each with two samples; and alice (uid 1000).
 */
async function thousandJobs(store: StorePort, n: number, from = 0): Promise<void> {
  for (let i = from; i < from + n; i++) {
    const id = `1000:slurm:${i}`;
    await store.upsertWatchJob({
      id,
      key: `slurm:${i}`,
      uid: 1000,
      jobId: null,
      info: { ...INFO, slurmJob: String(i) },
      at: T0 + i,
    });
    for (const k of [1, 2]) {
      await store.insertWatchSample(
        {
          watchId: id,
          at: T0 + i + k,
          state: i % 7 === 0 ? 'hung' : 'progressing',
          digest: null,
          ranksRead: 4,
          cpu: { ticks: 0, running: 0, switches: 0 },
          stopMicros: 0,
          snapshotId: null,
        },
        {
          state: i % 7 === 0 ? 'hung' : 'progressing',
          since: T0,
          confidence: null,
          leastProgressed: '',
          diagnosis: '',
          evidenceSnapshotId: null,
        },
      );
    }
    if (i % 5 === 0) await store.endWatchJob(id, T0 + 100_000 + i, null);
  }
}

/** The order the fleet promises: live hung, then live, then ended. */
const rankOf = (j: ApiFleetJob) => (j.endedAt !== null ? 2 : j.state === 'hung' ? 0 : 1);

describe('/api/fleet cost is bounded', () => {
  it('pages in a fixed number of SQL statements over 1,000 jobs, live hung first, with no discovery per request', async () => {
    const node = new HungRingNode();
    node.reporting = false;
    const clock = { now: T0 };
    const s = await startServer(
      { watchEnabled: false },
      { clock: () => clock.now, watchAgents: node, watchTimers: noTimers, slurm: null },
    );
    cleanup.push(() => s.close());
    const store = sqliteOf(s.app);
    const alice = await createUser(s.app, 'alice', 1000);
    // Statements prepared (better-sqlite3 runs each prepared one) during one request.
    let statements = 0;
    const prepare = store.db.prepare.bind(store.db);
    store.db.prepare = ((sql: string) => {
      statements++;
      return prepare(sql);
    }) as typeof store.db.prepare;
    const fleet = async (query: string) => {
      statements = 0;
      const r = await s.app.inject({ method: 'GET', url: `/api/fleet${query}`, headers: alice });
      expect(r.statusCode, r.body).toBe(200);
      return { body: bodyJson(r) as { jobs: ApiFleetJob[]; total: number; offset: number }, statements };
    };

    // The first request starts one discovery refresh (nothing had refreshed it); let it end.
    await fleet('');
    await s.app.mqd.watcher.settled();
    expect(node.discoveredCalls).toBe(1);
    // Ten jobs, then a thousand: the same number of statements for a page.
    await thousandJobs(store, 10);
    const small = await fleet('?limit=500');
    await thousandJobs(store, 1000, 10);
    const big = await fleet('?limit=500');
    expect(big.body.total).toBe(1000 + 10);
    expect(big.body.jobs).toHaveLength(500);
    expect(big.statements).toBe(small.statements);
    // Login check + count + page + samples + user names: a handful, never per job.
    expect(big.statements).toBeLessThanOrEqual(8);
    // Within the refresh interval no request asked the agents anything.
    expect(node.discoveredCalls).toBe(1);

    // The order, and pages that join without overlap.
    const all: ApiFleetJob[] = [];
    for (let offset = 0; offset < big.body.total; offset += 300) {
      const p = await fleet(`?limit=300&offset=${offset}`);
      expect(p.body.offset).toBe(offset);
      all.push(...p.body.jobs);
    }
    expect(all).toHaveLength(1010);
    expect(new Set(all.map((j) => j.key + j.uid)).size).toBe(1010);
    const ranks = all.map(rankOf);
    expect(ranks).toEqual([...ranks].sort((a, b) => a - b));
    expect(ranks[0]).toBe(0);
    expect(all.find((j) => j.key === 'slurm:14')?.history.map((h) => h.state)).toEqual(['hung', 'hung']);
    expect(all.find((j) => j.key === 'slurm:14')?.samples).toBe(2);
    expect(all.find((j) => j.key === 'slurm:14')?.user).toBe('alice');
    // Past the end: an empty page, the same total; out of range: a coded 400.
    expect((await fleet('?offset=5000')).body).toMatchObject({ jobs: [], total: 1010 });
    const bad = await s.app.inject({ method: 'GET', url: '/api/fleet?limit=100000', headers: alice });
    expect(bad.statusCode).toBe(400);
    expect((bodyJson(bad) as { code: string }).code).toBe('MQD_E_BAD_INPUT');
    // Later than the refresh interval, one request refreshes discovery once, in the background.
    clock.now += FLEET_REFRESH_MS;
    await Promise.all([fleet(''), fleet(''), fleet('')]);
    await s.app.mqd.watcher.settled();
    expect(node.discoveredCalls).toBe(2);
  });

  it('a burst of 30 over real HTTP gets 429 with Retry-After past the limit, and /api/health answers before the burst ends', async () => {
    const s = await startServer({ watchEnabled: false, fleetRateLimitMax: 10 }, { slurm: null });
    cleanup.push(() => s.close());
    await thousandJobs(s.app.mqd.store, 1000);
    const alice = await createUser(s.app, 'alice', 1000);
    const order: string[] = [];
    const fleet = async (i: number) => {
      const r = await fetch(`${s.url}/api/fleet?limit=500`, { headers: alice });
      const body = (await r.json()) as { code?: string; jobs?: unknown[] };
      order.push(`fleet ${i}`);
      return { status: r.status, retryAfter: r.headers.get('retry-after'), body };
    };
    // Health asked in the middle of the burst, as another user's page would.
    const first = Array.from({ length: 15 }, (_, i) => fleet(i));
    const health = (async () => {
      const r = await fetch(`${s.url}/api/health`);
      order.push('health');
      return r.status;
    })();
    const burst = [...first, ...Array.from({ length: 15 }, (_, i) => fleet(15 + i))];
    const answers = await Promise.all(burst);
    expect(await health).toBe(200);
    const ok200 = answers.filter((a) => a.status === 200);
    const limited = answers.filter((a) => a.status === 429);
    expect(ok200).toHaveLength(10);
    expect(limited).toHaveLength(20);
    for (const a of limited) {
      expect(a.body.code).toBe('MQD_E_RATE_LIMITED');
      expect(Number(a.retryAfter)).toBeGreaterThan(0);
    }
    for (const a of ok200) expect(a.body.jobs).toHaveLength(500);
    // Health was not queued behind the burst: fleet requests were still being answered after it.
    expect(order.indexOf('health')).toBeLessThan(order.length - 1);
    // Another user's allowance is their own.
    const bob = await createUser(s.app, 'bob', 1001);
    expect((await fetch(`${s.url}/api/fleet`, { headers: bob })).status).toBe(200);
    // The admin token is a user like any other here.
    expect(
      (await fetch(`${s.url}/api/fleet`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status,
    ).toBe(200);
  });
});

// --- the store's side, on both dialects -------------------------------------------------------

let postgres: PostgresServer | undefined;

beforeAll(async () => {
  postgres = await startPostgres();
});

afterAll(async () => {
  await postgres?.stop();
});

async function pgStore(): Promise<StorePort> {
  const url = await (postgres as PostgresServer).createDatabase('mqd_swf');
  const store = await PgStore.open(url, { maxSnapshotsPerJob: 0, maxAgeSeconds: 0 }, () => T0);
  cleanup.push(() => store.close());
  return store;
}

function sqliteStore(): StorePort {
  const store = new SqliteStore({
    dataDir: ':memory:',
    retention: { maxSnapshotsPerJob: 0, maxAgeSeconds: 0 },
    clock: () => T0,
  });
  cleanup.push(() => store.close());
  return store;
}

describe.each([
  ['sqlite', async () => sqliteStore()],
  ['postgres', pgStore],
])('the store (%s)', (_name, open) => {
  it("lists the system's links by the job's uid, never by a name", async () => {
    const store = await open();
    await seedShares(store);
    expect((await store.liveShare('by-the-watch'))?.madeBy).toBe('watch');
    expect((await store.liveShares({ name: 'watch', uid: 4242 })).map((x) => x.id)).toEqual([
      'by-a-user-named-watch',
    ]);
    expect((await store.liveShares({ name: 'alice', uid: 1000 })).map((x) => x.id)).toEqual(['by-the-watch']);
    expect(await store.liveShares({ name: 'rooty', uid: 0 })).toEqual([]);
    expect(await store.liveShares({ name: 'nouid', uid: null })).toEqual([]);
    expect((await store.liveShares(null)).map((x) => x.id).sort()).toEqual([
      'by-a-user-named-watch',
      'by-the-watch',
    ]);
  });

  it('reads a fleet page in its order with samples, counts and names', async () => {
    const store = await open();
    await thousandJobs(store, 40);
    await store.upsertUser({ name: 'alice', uid: 1000, admin: false, tokenHash: null });
    const page = await store.fleetPage({ uid: 1000, limit: 15, offset: 0, history: 1 });
    expect(page.total).toBe(40);
    expect(page.jobs).toHaveLength(15);
    const order = page.jobs.map((e) => (e.job.endedAt !== null ? 2 : e.job.state === 'hung' ? 0 : 1));
    expect(order).toEqual([...order].sort((a, b) => a - b));
    for (const e of page.jobs) {
      expect(e.samples).toBe(2);
      expect(e.history).toHaveLength(1);
      expect(e.user).toBe('alice');
    }
    // Users see no uid 0 jobs; admins (null) all.
    expect((await store.fleetPage({ uid: 0, limit: 10, offset: 0, history: 1 })).total).toBe(0);
    expect((await store.fleetPage({ uid: null, limit: 10, offset: 35, history: 1 })).jobs).toHaveLength(5);
  });
});
