// The store's contract, run unchanged on both implementations of StorePort: SqliteStore (a
// fresh data directory per test) and PgStore on a real PostgreSQL 15 started by this file
// (testkit's startPostgres: initdb in a temporary directory, a Unix socket only), a fresh
// database per test. Every assertion holds for both; what only one dialect has (SQLite's WAL,
// file modes, corruption) stays in store.test.ts. Also here: the one migration history gives
// both the same tables and columns, and the PostgreSQL store's coded 503 while the database is
// down, gone by itself once it is back.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { DEFAULT_WATCH_POLICY, JobId, MqdException, SnapshotId } from '@mqd/model';
import { type PostgresServer, startPostgres } from '@mqd/testkit';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { httpStatus } from '../src/http/http.js';
import type { JobRecord, SnapshotMeta, WatchJobInfo, WatchSampleRecord } from '../src/shared/types.js';
import { PgStore } from '../src/store/dialect-pg.js';
import { SqliteStore } from '../src/store/dialect-sqlite.js';
import type { NewSnapshot, RetentionPolicy, StorePort } from '../src/store/store-port.js';
import { MIGRATION_HISTORY, type Migration, migrationsFor } from '../src/store/store-schema.js';
import { createUser, json, startServer } from './helpers.js';

/** Epoch ms past 2^32 (and past a 32-bit INTEGER): timestamps must come back as these numbers. */
const T0 = 1_764_000_000_000;
const NO_RETENTION: RetentionPolicy = { maxSnapshotsPerJob: 0, maxAgeSeconds: 0 };

let server: PostgresServer | undefined;
let admin: pg.Client | undefined;
let databases = 0;

beforeAll(async () => {
  server = await startPostgres();
  admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
});

afterAll(async () => {
  try {
    await admin?.end();
  } finally {
    await server?.stop();
  }
});

const dirs: string[] = [];
const open: StorePort[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

interface Backend {
  readonly name: 'sqlite' | 'postgres';
  /** A new, empty place for a store: a data directory, or a database's URL. */
  fresh(): Promise<string>;
  open(
    where: string,
    clock: { now: number },
    retention?: RetentionPolicy,
    migrations?: readonly Migration[],
  ): Promise<StorePort>;
}

const sqlite: Backend = {
  name: 'sqlite',
  fresh: async () => {
    const d = mkdtempSync(join(tmpdir(), 'mqd-contract-'));
    dirs.push(d);
    return d;
  },
  open: async (dataDir, clock, retention = NO_RETENTION, migrations = undefined) => {
    const s = new SqliteStore({
      dataDir,
      retention,
      clock: () => clock.now,
      ...(migrations ? { migrations } : {}),
    });
    open.push(s);
    return s;
  },
};

const postgres: Backend = {
  name: 'postgres',
  fresh: async () => {
    const db = `contract_${++databases}`;
    await admin?.query(`CREATE DATABASE ${db}`);
    return (server as PostgresServer).urlOf(db);
  },
  open: async (url, clock, retention = NO_RETENTION, migrations = undefined) => {
    const s = await PgStore.open(url, retention, () => clock.now, migrations ? { migrations } : {});
    open.push(s);
    return s;
  },
};

const job = (id: string, at: number, over: Partial<JobRecord> = {}): JobRecord => ({
  id: JobId(id),
  host: 'n0',
  starterPid: 42,
  starterStartTime: '5000',
  uid: 1000,
  command: 'mpirun -np 2 ./a.out',
  method: 'test',
  ranks: [
    { rank: 0, pid: 100, host: 'n0' },
    { rank: 1, pid: 101, host: 'n1' },
  ],
  createdAt: at,
  createdBy: 'admin',
  endedAt: null,
  ...over,
});

/** A snapshot; its queue digest is its own unless `digest` names a run of equal ones. */
function snap(id: string, jobId: string, takenAt: number, digest = `d-${id}`): NewSnapshot {
  const meta: SnapshotMeta = {
    id: SnapshotId(id),
    jobId: JobId(jobId),
    takenAt,
    durationMicros: 5_000_000_000,
    createdBy: 'admin',
    bytes: 3_000_000_000,
    storedBytes: 22,
    ranks: 2,
    ok: 2,
    errors: 0,
    missing: 0,
    pendingSends: 1,
    pendingReceives: 1,
    unexpected: 0,
    digest,
    missingRanks: [3, 7],
  };
  return { meta, gz: gzipSync(`{"id":"${id}"}`) };
}

const audit = { who: 'admin', action: 'snapshot' } as const;

const info: WatchJobInfo = {
  kind: 'slurm',
  slurmJob: '7',
  program: 'ring',
  command: './ring',
  partition: null,
  account: null,
  nodes: ['n1'],
  rankCount: 2,
  startedAt: T0,
};

const sample = (at: number, snapshotId: string | null = null): WatchSampleRecord => ({
  watchId: '1000:slurm:7',
  at,
  state: 'waiting',
  digest: snapshotId === null ? null : 'dg',
  ranksRead: 2,
  cpu: { ticks: 1, running: 0, switches: 2 },
  stopMicros: 7,
  snapshotId: snapshotId === null ? null : SnapshotId(snapshotId),
});

const verdict = {
  state: 'waiting' as const,
  since: T0 + 1,
  confidence: null,
  leastProgressed: '',
  diagnosis: 'd',
  evidenceSnapshotId: null,
};

describe.each([sqlite, postgres])('store contract on $name', (b) => {
  async function fresh(clock: { now: number }, retention?: RetentionPolicy) {
    return b.open(await b.fresh(), clock, retention);
  }

  it('applies the whole history once, and nothing on a reopen', async () => {
    const where = await b.fresh();
    const clock = { now: T0 };
    const first = await b.open(where, clock);
    const all = MIGRATION_HISTORY.map((m) => m.version);
    expect(first.dialect).toBe(b.name);
    expect(first.migrationsApplied).toEqual(all);
    expect(await first.schemaVersion()).toBe(Math.max(...all));
    await first.close();
    expect(first.isOpen).toBe(false);
    const second = await b.open(where, clock);
    expect(second.migrationsApplied).toEqual([]);
    expect(await second.schemaVersion()).toBe(Math.max(...all));
  });

  it('creates and updates users, finds them by token, name and uid, and expires tokens', async () => {
    const clock = { now: T0 };
    const s = await fresh(clock);
    const alice = await s.upsertUser({
      name: 'alice',
      uid: 1000,
      admin: false,
      tokenHash: 'ta',
      tokenExpiresAt: T0 + 100,
    });
    expect(alice).toEqual({ id: alice.id, name: 'alice', uid: 1000, admin: false });
    expect(typeof alice.id).toBe('number');
    const root = await s.upsertUser({ name: 'root', uid: 1000, admin: true, tokenHash: null });
    expect(root.admin).toBe(true);
    // An update without a token keeps the token and its expiry.
    expect(await s.upsertUser({ name: 'alice', uid: 1001, admin: false, tokenHash: null })).toEqual({
      ...alice,
      uid: 1001,
    });
    expect(await s.userByTokenHash('ta')).toEqual({ ...alice, uid: 1001 });
    expect(await s.userByName('alice')).toEqual({ ...alice, uid: 1001 });
    expect(await s.userByName('bob')).toBeNull();
    expect(await s.userNameOfUid(1000)).toBe('root');
    expect(await s.userNameOfUid(1001)).toBe('alice');
    expect(await s.userNameOfUid(4)).toBeNull();
    expect(await s.loginToken('nope')).toBeNull();
    clock.now = T0 + 100;
    expect(await s.loginToken('ta')).toBe('expired');
    expect(await s.userByTokenHash('ta')).toBeNull();
    // A new token replaces the old one, with its own expiry (null: never).
    await s.upsertUser({ name: 'alice', uid: 1001, admin: false, tokenHash: 'tb', tokenExpiresAt: null });
    expect(await s.loginToken('ta')).toBeNull();
    expect(await s.loginToken('tb')).toEqual({ ...alice, uid: 1001 });
  });

  it('keeps sessions until they expire, with their token, and ends them on logout or revocation', async () => {
    const clock = { now: T0 };
    const s = await fresh(clock);
    const u = await s.upsertUser({
      name: 'alice',
      uid: 1000,
      admin: false,
      tokenHash: 'ta',
      tokenExpiresAt: T0 + 500,
    });
    await s.createSession('s1', u.id, T0 + 100);
    expect(await s.userBySession('s1')).toEqual(u);
    clock.now = T0 + 100;
    expect(await s.userBySession('s1')).toBeNull();
    // loginSession: a session only for a live token.
    expect(await s.loginSession('ta', 's2', T0 + 1000)).toEqual(u);
    expect(await s.loginSession('zz', 's3', T0 + 1000)).toBeNull();
    expect(await s.userBySession('s2')).toEqual(u);
    expect(await s.userBySession('s3')).toBeNull();
    await s.deleteSession('s2');
    expect(await s.userBySession('s2')).toBeNull();
    expect(await s.loginSession('ta', 's4', T0 + 1000)).toEqual(u);
    // The session dies with its login token's expiry.
    clock.now = T0 + 500;
    expect(await s.userBySession('s4')).toBeNull();
    expect(await s.loginSession('ta', 's5', T0 + 1000)).toBe('expired');
    clock.now = T0;
    expect(await s.userBySession('s4')).toEqual(u);
    // Revocation ends the token and every session made with it, audited.
    expect(await s.revokeToken('alice', { who: 'root', action: 'user-create', detail: 'revoke' })).toBe(true);
    expect(await s.revokeToken('nobody', { who: 'root', action: 'user-create' })).toBe(false);
    expect(await s.userBySession('s4')).toBeNull();
    expect(await s.loginToken('ta')).toBeNull();
    expect((await s.activity(10)).map((a) => a.detail)).toEqual(['revoke']);
  });

  it('saves, finds, updates and ends jobs by their starter identity', async () => {
    const clock = { now: T0 };
    const s = await fresh(clock);
    await s.saveJob(job('j1', T0), { who: 'admin', action: 'attach', jobId: 'j1' });
    await s.saveJob(job('j2', T0 + 10, { starterPid: 43 }), { who: 'admin', action: 'attach' });
    await s.saveJob(job('j3', T0 + 20, { uid: 2000, starterPid: 44 }), { who: 'admin', action: 'attach' });
    expect(await s.job('j1')).toEqual(job('j1', T0));
    expect(await s.job('nope')).toBeNull();
    expect((await s.jobs(null)).map((j) => j.id)).toEqual(['j3', 'j2', 'j1']);
    expect((await s.jobs(1000)).map((j) => j.id)).toEqual(['j2', 'j1']);
    expect((await s.findJob('n0', 42, '5000'))?.id).toBe('j1');
    expect((await s.findJob('n0', 42, null))?.id).toBe('j1');
    expect(await s.findJob('n0', 42, '6000')).toBeNull();
    expect(await s.findJob('n9', 42, '5000')).toBeNull();
    // A new layout replaces the old one; another owner's save does not touch the job.
    const grown = job('j1', T0, { ranks: [{ rank: 0, pid: 100, host: 'n0' }], command: 'again' });
    await s.saveJob(grown, { who: 'admin', action: 'attach' });
    expect(await s.job('j1')).toEqual(grown);
    await s.saveJob({ ...grown, uid: 4, command: 'evil' }, { who: 'mallory', action: 'attach' });
    expect((await s.job('j1'))?.command).toBe('again');
    // A reused pid: the old starter's jobs end.
    expect(await s.endReusedJobs('n0', 42, '6000', T0 + 50)).toBe(1);
    expect((await s.job('j1'))?.endedAt).toBe(T0 + 50);
    expect(await s.findJob('n0', 42, '5000')).toBeNull();
    await s.markJobEnded(JobId('j2'), T0 + 60);
    await s.markJobEnded(JobId('j2'), T0 + 70);
    expect((await s.job('j2'))?.endedAt).toBe(T0 + 60);
    // Jobs of cores.
    await s.saveJob(job('c1', T0 + 80, { coresDir: '/cores/a' }), { who: 'admin', action: 'watch-cores' });
    expect((await s.findCoreJob('n0', '/cores/a'))?.coresDir).toBe('/cores/a');
    expect(await s.findCoreJob('n0', '/cores/b')).toBeNull();
    expect((await s.activity(100)).filter((a) => a.action === 'attach')).toHaveLength(5);
  });

  it('attaches a job once, also when many attaches of it race', async () => {
    const clock = { now: T0 };
    const s = await fresh(clock);
    const tries = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        s.attachJob(job(`a${i}`, T0 + i), { who: 'admin', action: 'attach' }),
      ),
    );
    const ids = new Set(tries.map((t) => (t.ok ? t.job.id : 'refused')));
    expect(ids.size).toBe(1);
    expect(await s.jobs(null)).toHaveLength(1);
    // Another owner's attach of that starter is refused, and changes nothing.
    const other = await s.attachJob(job('b', T0, { uid: 2000 }), { who: 'mallory', action: 'attach' });
    expect(other.ok).toBe(false);
    expect(await s.jobs(null)).toHaveLength(1);
    // A new start time: the old job ends, a new one is made.
    const next = await s.attachJob(job('n', T0 + 100, { starterStartTime: '7000' }), {
      who: 'admin',
      action: 'attach',
    });
    expect(next).toMatchObject({ ok: true, job: { id: 'n' } });
    expect((await s.job([...ids][0] as string))?.endedAt).toBe(T0);
    // Cores: found by directory, ended or not.
    const c1 = await s.attachJob(job('c1', T0, { coresDir: '/c' }), { who: 'admin', action: 'watch-cores' });
    const c2 = await s.attachJob(job('c2', T0 + 1, { coresDir: '/c' }), {
      who: 'admin',
      action: 'watch-cores',
    });
    expect(c1).toMatchObject({ ok: true, job: { id: 'c1' } });
    expect(c2).toMatchObject({ ok: true, job: { id: 'c1', createdAt: T0 } });
  });

  it('stores snapshots with their data, newest first, and counts them', async () => {
    const clock = { now: T0 };
    const s = await fresh(clock);
    await s.saveJob(job('j1', T0), audit);
    await s.saveJob(job('j2', T0, { starterPid: 9 }), audit);
    for (const [id, at] of [
      ['s1', T0 + 1],
      ['s2', T0 + 3],
      ['s3', T0 + 3],
      ['s4', T0 + 2],
    ] as const) {
      expect(await s.insertSnapshot(snap(id, 'j1', at), audit)).toEqual({ removed: 0 });
    }
    await s.insertSnapshot(snap('x1', 'j2', T0), audit);
    // Equal times: the later insert first.
    expect((await s.snapshots('j1', 10)).map((m) => m.id)).toEqual(['s3', 's2', 's4', 's1']);
    expect((await s.snapshots('j1', 2)).map((m) => m.id)).toEqual(['s3', 's2']);
    // Many jobs' newest snapshots in one query, each as snapshots() orders them; every id a key.
    const many = await s.snapshotsOfJobs(['j1', 'j2', 'none'], 3);
    expect([...many].map(([k, v]) => [k, v.map((m) => m.id)])).toEqual([
      ['j1', ['s3', 's2', 's4']],
      ['j2', ['x1']],
      ['none', []],
    ]);
    expect(many.get('j1')?.[0]).toEqual((await s.snapshots('j1', 1))[0]);
    expect((await s.snapshotsOfJobs([], 3)).size).toBe(0);
    expect(await s.snapshotMeta('s1')).toEqual(snap('s1', 'j1', T0 + 1).meta);
    expect(await s.snapshotMeta('nope')).toBeNull();
    const data = await s.snapshotData('s1');
    expect(Buffer.isBuffer(data)).toBe(true);
    expect(data?.equals(snap('s1', 'j1', T0 + 1).gz)).toBe(true);
    expect(await s.snapshotData('nope')).toBeNull();
    expect(await s.countSnapshots()).toBe(5);
    expect(await s.countSnapshots('j1')).toBe(4);
    expect(await s.countSnapshots('none')).toBe(0);
    // A snapshot of an unknown job is refused, and nothing of it stays.
    await expect(s.insertSnapshot(snap('bad', 'nojob', T0), audit)).rejects.toThrow();
    expect(await s.countSnapshots()).toBe(5);
    expect((await s.activity(100)).filter((a) => a.action === 'snapshot')).toHaveLength(7);
  });

  it("keeps at most N snapshots per job, and none older than the maximum age but a live job's newest", async () => {
    const clock = { now: T0 };
    const s = await fresh(clock, { maxSnapshotsPerJob: 2, maxAgeSeconds: 100 });
    await s.saveJob(job('j1', T0), audit);
    await s.saveJob(job('j2', T0, { starterPid: 9 }), audit);
    await s.insertSnapshot(snap('o', 'j2', T0), audit);
    await s.insertSnapshot(snap('a', 'j1', T0), audit);
    await s.insertSnapshot(snap('b', 'j1', T0), audit);
    expect(await s.insertSnapshot(snap('c', 'j1', T0), audit)).toEqual({ removed: 1 });
    expect((await s.snapshots('j1', 10)).map((m) => m.id)).toEqual(['c', 'b']);
    // Age: j1's old ones go on the next insert past 100 s; j2's 'o' is its newest, and j2 runs.
    clock.now = T0 + 100_001;
    expect(await s.insertSnapshot(snap('d', 'j1', clock.now), audit)).toEqual({ removed: 2 });
    expect((await s.snapshots('j2', 10)).map((m) => m.id)).toEqual(['o']);
    expect(await s.insertSnapshot(snap('e', 'j2', clock.now), audit)).toEqual({ removed: 1 });
    // Once j2 ended, its newest is as old as any other: a sweep drops it; j1's newest stays.
    clock.now += 100_001;
    await s.markJobEnded(JobId('j2'), clock.now);
    expect(await s.sweep()).toBe(1);
    expect((await s.snapshots('j1', 10)).map((m) => m.id)).toEqual(['d']);
    expect(await s.countSnapshots()).toBe(1);
  });

  it("keeps the first snapshot of each run of equal ones, the watch's, the shared and the newest", async () => {
    const clock = { now: T0 };
    const s = await fresh(clock, { maxSnapshotsPerJob: 4, maxAgeSeconds: 0 });
    await s.saveJob(job('j1', T0), audit);
    // Two watched jobs on j1 (one Slurm job id under two owners, say), each with its episodes.
    const w = '1000:slurm:7';
    const other = '2000:slurm:7';
    await s.upsertWatchJob({ id: w, key: 'slurm:7', uid: 1000, jobId: JobId('j1'), info, at: T0 });
    await s.upsertWatchJob({ id: other, key: 'slurm:7', uid: 2000, jobId: JobId('j1'), info, at: T0 });
    const share = (id: string, snapshotId: string, ttl: number) =>
      s.insertShare(
        {
          id,
          snapshotId: SnapshotId(snapshotId),
          createdBy: 'alice',
          createdAt: clock.now,
          expiresAt: clock.now + ttl,
        },
        { who: 'alice', action: 'share' },
      );
    // 150 equal snapshots (one every 15 s), then a change, then 29 more equal to it.
    for (let i = 1; i <= 180; i++) {
      clock.now = T0 + i * 15_000;
      const id = i <= 150 ? `a${i}` : `b${i - 150}`;
      await s.insertSnapshot(snap(id, 'j1', clock.now, i <= 150 ? 'A' : 'B'), {
        ...audit,
        jobId: 'j1',
        snapshotId: id,
      });
      // The watch's notification of the open hang names a20, its verdict's evidence a40; a60 is
      // shared for a day, a70 for a minute, a90 by a link revoked at once; the other watched
      // job's hang of a100 ended at a101.
      if (id === 'a20' || id === 'a100') {
        await s.openWatchEpisode({
          watchId: id === 'a20' ? w : other,
          startedAt: clock.now,
          snapshotId: SnapshotId(id),
          shareId: null,
        });
      }
      if (id === 'a40')
        await s.insertWatchSample(sample(clock.now), { ...verdict, evidenceSnapshotId: SnapshotId(id) });
      if (id === 'a60') await share('day', id, 86_400_000);
      if (id === 'a70') await share('minute', id, 60_000);
      if (id === 'a90') {
        await share('revoked', id, 86_400_000);
        await s.revokeShare('revoked', { who: 'alice', action: 'share' });
      }
      if (id === 'a101') await s.closeWatchEpisode(other, clock.now);
    }
    const kept = (await s.snapshots('j1', 1000)).map((m) => m.id).reverse();
    expect(kept).toEqual(['a1', 'a20', 'a40', 'a60', 'b1', 'b27', 'b28', 'b29', 'b30']);
    expect(await s.liveShare('day')).not.toBeNull();
    // What retention removed is told from what was never stored.
    expect(await s.removedSnapshotJob('a2')).toBe('j1');
    expect(await s.removedSnapshotJob('a70')).toBe('j1');
    expect(await s.removedSnapshotJob('a100')).toBe('j1');
    expect(await s.removedSnapshotJob('a1')).toBeNull();
    expect(await s.removedSnapshotJob('never')).toBeNull();
  });

  it('answers a snapshot retention removed with its job and where its newest opens, to those who see the job', async () => {
    const clock = { now: Date.now() };
    const s = await fresh(clock, { maxSnapshotsPerJob: 1, maxAgeSeconds: 0 });
    const app = await startServer({}, { store: s });
    try {
      await s.saveJob(job('j1', clock.now), audit);
      for (const id of ['p1', 'p2'])
        await s.insertSnapshot(snap(id, 'j1', clock.now), { ...audit, jobId: 'j1', snapshotId: id });
      const get = async (id: string, headers: Record<string, string>) => {
        const res = await app.app.inject({ method: 'GET', url: `/api/snapshots/${id}`, headers });
        expect(res.statusCode).toBe(404);
        return json<{ code: string; message: string }>(res);
      };
      expect(await get('p1', app.admin)).toEqual({
        statusCode: 404,
        code: 'MQD_E_NOT_FOUND',
        message:
          "MQD_E_NOT_FOUND: snapshot p1 of job j1 was removed by retention; the job's newest snapshot opens at /?view=matrix&job=j1: check the id; it may have been removed by retention",
      });
      // Another uid's user learns nothing of the job; an id never stored is just not there.
      const bob = await createUser(app.app, 'bob', 2000);
      expect((await get('p1', bob)).message).toMatch(/^MQD_E_NOT_FOUND: no snapshot p1: /);
      expect((await get('nope', app.admin)).message).toMatch(/^MQD_E_NOT_FOUND: no snapshot nope: /);
    } finally {
      await app.close();
    }
  });

  it("under the age limit, keeps the first snapshot of a running job's current run", async () => {
    const clock = { now: T0 };
    const s = await fresh(clock, { maxSnapshotsPerJob: 0, maxAgeSeconds: 60 });
    await s.saveJob(job('j1', T0), audit);
    for (let i = 0; i < 4; i++) {
      clock.now = T0 + i * 30_000;
      await s.insertSnapshot(snap(`x${i}`, 'j1', clock.now, i === 0 ? 'X' : 'Y'), audit);
    }
    // x0 (a run of its own) and x1 (the current run's first) are past 60 s: x1 stays.
    expect((await s.snapshots('j1', 10)).map((m) => m.id)).toEqual(['x3', 'x2', 'x1']);
    clock.now = T0 + 200_000;
    expect(await s.sweep()).toBe(1);
    expect((await s.snapshots('j1', 10)).map((m) => m.id)).toEqual(['x3', 'x1']);
    // An ended job keeps nothing past the age limit.
    await s.markJobEnded(JobId('j1'), clock.now);
    expect(await s.sweep()).toBe(2);
    expect(await s.countSnapshots('j1')).toBe(0);
  });

  it("keeps a snapshot's first overview while the snapshot is kept, and none for a snapshot not stored", async () => {
    const clock = { now: T0 };
    const s = await fresh(clock, { maxSnapshotsPerJob: 1, maxAgeSeconds: 1000 });
    await s.saveJob(job('j1', T0), audit);
    expect(await s.putSnapshotOverview('nope', Buffer.from('x'))).toBe(false);
    expect(await s.snapshotOverview('nope')).toBeNull();
    await s.insertSnapshot(snap('a', 'j1', T0), audit);
    expect(await s.snapshotOverview('a')).toBeNull();
    expect(await s.putSnapshotOverview('a', Buffer.from([1, 2, 3]))).toBe(true);
    // Another instance's (the same bytes in practice): the first stays.
    expect(await s.putSnapshotOverview('a', Buffer.from([9]))).toBe(false);
    expect([...((await s.snapshotOverview('a')) ?? [])]).toEqual([1, 2, 3]);
    // Retention removes the snapshot: its overview goes with it.
    await s.insertSnapshot(snap('b', 'j1', T0 + 1), audit);
    expect(await s.snapshotMeta('a')).toBeNull();
    expect(await s.snapshotOverview('a')).toBeNull();
    expect(await s.putSnapshotOverview('a', Buffer.from([1]))).toBe(false);
  });

  it('answers a request key with the first snapshot it got, while that snapshot is kept', async () => {
    const clock = { now: T0 };
    const s = await fresh(clock, { maxSnapshotsPerJob: 1, maxAgeSeconds: 0 });
    const u = await s.upsertUser({ name: 'alice', uid: 1000, admin: false, tokenHash: null });
    await s.saveJob(job('j1', T0), audit);
    const key = { userId: u.id, key: 'k1' };
    await s.insertSnapshot(snap('s1', 'j1', T0), audit, [key]);
    expect((await s.requestedSnapshot(key))?.id).toBe('s1');
    expect(await s.requestedSnapshot({ userId: u.id, key: 'k2' })).toBeNull();
    // Remembered for a request that joined one running; the first answer stays.
    await s.rememberRequest({ userId: u.id, key: 'k2' }, SnapshotId('s1'));
    await s.rememberRequest(key, SnapshotId('s1'));
    expect((await s.requestedSnapshot({ userId: u.id, key: 'k2' }))?.id).toBe('s1');
    // Retention drops s1, and its keys with it.
    await s.insertSnapshot(snap('s2', 'j1', T0 + 1), audit, [key]);
    expect(await s.requestedSnapshot(key)).toBeNull();
    expect(await s.requestedSnapshot({ userId: u.id, key: 'k2' })).toBeNull();
  });

  it('sweeps dead sessions, old audit rows, old ended jobs (with what hangs off them) and old samples', async () => {
    const clock = { now: T0 };
    const s = await fresh(clock, { maxSnapshotsPerJob: 0, maxAgeSeconds: 1000, auditAgeSeconds: 10 });
    const u = await s.upsertUser({ name: 'alice', uid: 1000, admin: false, tokenHash: null });
    await s.createSession('old', u.id, T0 + 1);
    await s.createSession('new', u.id, T0 + 1_000_000);
    await s.saveJob(job('ended', T0, { endedAt: T0 }), audit);
    await s.saveJob(job('running', T0, { starterPid: 7 }), audit);
    await s.insertSnapshot(snap('se', 'ended', T0), audit);
    await s.insertShare(
      { id: 'sh', snapshotId: SnapshotId('se'), createdBy: 'a', createdAt: T0, expiresAt: T0 + 1e9 },
      audit,
    );
    await s.upsertWatchJob({
      id: '1000:slurm:7',
      key: 'slurm:7',
      uid: 1000,
      jobId: JobId('ended'),
      info,
      at: T0,
    });
    await s.insertWatchSample(sample(T0), verdict);
    await s.endWatchJob('1000:slurm:7', T0, null);
    clock.now = T0 + 20_000;
    await s.audit({ who: 'admin', action: 'login' });
    expect(await s.sweep()).toBe(0);
    expect(await s.userBySession('old')).toBeNull();
    expect(await s.userBySession('new')).toEqual(u);
    expect(await s.job('ended')).toBeNull();
    expect(await s.job('running')).not.toBeNull();
    expect(await s.snapshotMeta('se')).toBeNull();
    expect(await s.liveShare('sh')).toBeNull();
    expect(await s.watchJob('1000:slurm:7')).toBeNull();
    expect(await s.countWatchSamples('1000:slurm:7')).toBe(0);
    expect((await s.activity(10)).map((a) => a.action)).toEqual(['login']);
  });

  it('makes share links that live until they expire or are revoked, audited', async () => {
    const clock = { now: T0 };
    const s = await fresh(clock);
    await s.saveJob(job('j1', T0), audit);
    await s.insertSnapshot(snap('s1', 'j1', T0), audit);
    const share = (id: string, by: string, at: number) => ({
      id,
      snapshotId: SnapshotId('s1'),
      createdBy: by,
      createdAt: at,
      expiresAt: at + 1000,
    });
    await s.insertShare(share('a', 'alice', T0), { who: 'alice', action: 'share' });
    await s.insertShare(share('b', 'bob', T0 + 10), { who: 'bob', action: 'share' });
    await expect(s.insertShare(share('a', 'alice', T0), { who: 'alice', action: 'share' })).rejects.toThrow();
    expect(await s.liveShare('a')).toEqual(share('a', 'alice', T0));
    expect(await s.liveShare('zz')).toBeNull();
    expect((await s.liveShares(null)).map((x) => x.id)).toEqual(['b', 'a']);
    expect((await s.liveShares({ name: 'alice', uid: 1000 })).map((x) => x.id)).toEqual(['a']);
    clock.now = T0 + 1000;
    expect(await s.liveShare('a')).toBeNull();
    expect((await s.liveShares(null)).map((x) => x.id)).toEqual(['b']);
    await s.revokeShare('b', { who: 'bob', action: 'share', detail: 'revoke' });
    expect(await s.liveShare('b')).toBeNull();
    expect((await s.activity(10)).filter((x) => x.action === 'share').map((x) => x.detail)).toEqual([
      'revoke',
      '',
      '',
    ]);
  });

  it('pages the audit back by id, newest first', async () => {
    const clock = { now: T0 };
    const s = await fresh(clock);
    for (let i = 0; i < 7; i++) {
      clock.now = T0 + i;
      await s.audit({ who: `u${i}`, action: 'login', jobId: i === 3 ? 'j' : null, detail: `d${i}` });
    }
    const first = await s.activity(3);
    expect(first.map((a) => a.who)).toEqual(['u6', 'u5', 'u4']);
    expect(first[0]).toMatchObject({
      at: T0 + 6,
      action: 'login',
      jobId: null,
      snapshotId: null,
      detail: 'd6',
    });
    const next = await s.activity(3, first[2]?.id);
    expect(next.map((a) => a.who)).toEqual(['u3', 'u2', 'u1']);
    expect(next[0]?.jobId).toBe('j');
    expect((await s.activity(3, next[2]?.id)).map((a) => a.who)).toEqual(['u0']);
  });

  it('keeps the watch policy, watched jobs, capped samples and episodes', async () => {
    const clock = { now: T0 };
    const s = await fresh(clock, { maxSnapshotsPerJob: 0, maxAgeSeconds: 0, maxWatchSamplesPerJob: 2 });
    expect(await s.watchPolicy()).toBeNull();
    const policy = { ...DEFAULT_WATCH_POLICY, enabled: true, users: ['alice'] };
    await s.setWatchPolicy(policy, { who: 'admin', action: 'watch-policy' });
    await s.setWatchPolicy(policy, { who: 'root', action: 'watch-policy' });
    expect(await s.watchPolicy()).toEqual({ policy, updatedAt: T0, updatedBy: 'root' });
    await s.saveJob(job('j1', T0), audit);
    await s.insertSnapshot(snap('s1', 'j1', T0), audit);
    await s.upsertWatchJob({ id: '1000:slurm:7', key: 'slurm:7', uid: 1000, jobId: null, info, at: T0 });
    await s.upsertWatchJob({ id: '2000:slurm:8', key: 'slurm:8', uid: 2000, jobId: null, info, at: T0 + 5 });
    expect(await s.watchJob('1000:slurm:7')).toMatchObject({
      key: 'slurm:7',
      uid: 1000,
      jobId: null,
      info,
      firstSeen: T0,
      lastSeen: T0,
      endedAt: null,
      state: 'unknown',
      since: null,
      leastProgressed: '',
      lastSnapshotId: null,
    });
    // Seen again with its store job: refreshed, the job kept by a later report without one.
    await s.upsertWatchJob({
      id: '1000:slurm:7',
      key: 'slurm:7',
      uid: 1000,
      jobId: JobId('j1'),
      info,
      at: T0 + 1,
    });
    await s.upsertWatchJob({ id: '1000:slurm:7', key: 'slurm:7', uid: 1000, jobId: null, info, at: T0 + 2 });
    expect(await s.watchJob('1000:slurm:7')).toMatchObject({ jobId: 'j1', firstSeen: T0, lastSeen: T0 + 2 });
    for (const at of [T0 + 11, T0 + 12, T0 + 13]) await s.insertWatchSample(sample(at), verdict);
    await s.insertWatchSample(sample(T0 + 14, 's1'), {
      ...verdict,
      state: 'hung',
      confidence: 'high',
      evidenceSnapshotId: SnapshotId('s1'),
      stored: { snapshotId: SnapshotId('s1'), digest: 'dg', state: 'hung' },
    });
    expect((await s.watchSamples('1000:slurm:7', 10)).map((x) => x.at)).toEqual([T0 + 14, T0 + 13]);
    expect((await s.watchSamples('1000:slurm:7', 1))[0]).toEqual(sample(T0 + 14, 's1'));
    expect(await s.countWatchSamples('1000:slurm:7')).toBe(2);
    expect(await s.watchJob('1000:slurm:7')).toMatchObject({
      state: 'hung',
      since: T0 + 1,
      confidence: 'high',
      diagnosis: 'd',
      evidenceSnapshotId: 's1',
      lastSnapshotId: 's1',
      lastDigest: 'dg',
      lastStateStored: 'hung',
    });
    // A later sample without a snapshot keeps the last stored one.
    await s.insertWatchSample(sample(T0 + 15), verdict);
    expect(await s.watchJob('1000:slurm:7')).toMatchObject({ state: 'waiting', lastSnapshotId: 's1' });
    expect((await s.watchJobs(null)).map((w) => w.id)).toEqual(['2000:slurm:8', '1000:slurm:7']);
    expect((await s.watchJobs(1000)).map((w) => w.id)).toEqual(['1000:slurm:7']);
    // Episodes.
    expect(await s.openEpisode('1000:slurm:7')).toBeNull();
    const e = await s.openWatchEpisode({
      watchId: '1000:slurm:7',
      startedAt: T0 + 14,
      snapshotId: SnapshotId('s1'),
      shareId: 'sh',
    });
    expect(typeof e).toBe('number');
    await s.episodeNotified(e, T0 + 16);
    expect(await s.openEpisode('1000:slurm:7')).toEqual({
      id: e,
      watchId: '1000:slurm:7',
      startedAt: T0 + 14,
      endedAt: null,
      snapshotId: 's1',
      shareId: 'sh',
      notifiedAt: T0 + 16,
    });
    await s.closeWatchEpisode('1000:slurm:7', T0 + 17);
    expect(await s.openEpisode('1000:slurm:7')).toBeNull();
    const e2 = await s.openWatchEpisode({
      watchId: '1000:slurm:7',
      startedAt: T0 + 18,
      snapshotId: null,
      shareId: null,
    });
    expect(e2).toBeGreaterThan(e);
    // The job ends: its open episode with it; ended jobs list after live ones.
    await s.endWatchJob('1000:slurm:7', T0 + 20, 'TIMEOUT');
    await s.endWatchJob('1000:slurm:7', T0 + 30, 'LATER');
    expect(await s.watchJob('1000:slurm:7')).toMatchObject({ endedAt: T0 + 20, endReason: 'TIMEOUT' });
    await s.setWatchEndReason('1000:slurm:7', 'CANCELLED');
    expect((await s.watchJob('1000:slurm:7'))?.endReason).toBe('CANCELLED');
    expect((await s.episodes('1000:slurm:7')).map((x) => [x.id, x.endedAt])).toEqual([
      [e, T0 + 17],
      [e2, T0 + 20],
    ]);
    await s.upsertWatchJob({ id: '3000:slurm:9', key: 'slurm:9', uid: 3000, jobId: null, info, at: T0 - 5 });
    expect((await s.watchJobs(null)).map((w) => w.id)).toEqual([
      '2000:slurm:8',
      '3000:slurm:9',
      '1000:slurm:7',
    ]);
    // Seen again (an agent restarted): reopened.
    await s.upsertWatchJob({ id: '1000:slurm:7', key: 'slurm:7', uid: 1000, jobId: null, info, at: T0 + 40 });
    expect(await s.watchJob('1000:slurm:7')).toMatchObject({ endedAt: null, endReason: null });
    expect(await s.watchJob('nope')).toBeNull();
  });

  it('(from store.test.ts) runs each migration once, across reopens', async () => {
    const dir = await b.fresh();
    const clock = { now: 1000 };
    const first = await b.open(dir, clock);
    const released = MIGRATION_HISTORY.map((m) => m.version);
    expect(first.migrationsApplied).toEqual(released);
    await first.close();
    const second = await b.open(dir, clock);
    expect(second.migrationsApplied).toEqual([]);
    await second.close();
    // A new release adds a migration: only it runs, once.
    const next = Math.max(...released) + 1;
    const withNext = [
      ...migrationsFor(b.name),
      { version: next, sql: 'ALTER TABLE jobs ADD COLUMN note TEXT' },
    ];
    const third = await b.open(dir, clock, undefined, withNext);
    expect(third.migrationsApplied).toEqual([next]);
    expect(await third.schemaVersion()).toBe(next);
    await third.close();
    const fourth = await b.open(dir, clock, undefined, withNext);
    expect(fourth.migrationsApplied).toEqual([]);
    expect(await fourth.schemaVersion()).toBe(next);
  });

  it('(from store.test.ts) keeps the watch policy, watched jobs, capped samples and episodes (migration 5)', async () => {
    const dir = await b.fresh();
    const clock = { now: 10_000 };
    const retention = { maxSnapshotsPerJob: 0, maxAgeSeconds: 0, maxWatchSamplesPerJob: 2 };
    const s = await b.open(dir, clock, retention);
    expect(await s.watchPolicy()).toBeNull();
    const policy = { ...DEFAULT_WATCH_POLICY, enabled: true, users: ['alice'] };
    await s.setWatchPolicy(policy, { who: 'admin', action: 'watch-policy' });
    const info = {
      kind: 'slurm' as const,
      slurmJob: '7',
      program: 'ring',
      command: './ring',
      partition: null,
      account: null,
      nodes: ['n1'],
      rankCount: 2,
      startedAt: 1,
    };
    await s.upsertWatchJob({ id: '1000:slurm:7', key: 'slurm:7', uid: 1000, jobId: null, info, at: 10_000 });
    // Three samples with a cap of two: the oldest goes.
    for (const at of [11_000, 12_000, 13_000]) {
      await s.insertWatchSample(
        {
          watchId: '1000:slurm:7',
          at,
          state: 'waiting',
          digest: null,
          ranksRead: 2,
          cpu: { ticks: 1, running: 0, switches: 2 },
          stopMicros: 0,
          snapshotId: null,
        },
        {
          state: 'waiting',
          since: 11_000,
          confidence: null,
          leastProgressed: '',
          diagnosis: 'd',
          evidenceSnapshotId: null,
        },
      );
    }
    expect((await s.watchSamples('1000:slurm:7', 10)).map((x) => x.at)).toEqual([13_000, 12_000]);
    const e = await s.openWatchEpisode({
      watchId: '1000:slurm:7',
      startedAt: 12_000,
      snapshotId: null,
      shareId: null,
    });
    expect((await s.openEpisode('1000:slurm:7'))?.id).toBe(e);
    await s.endWatchJob('1000:slurm:7', 14_000, 'TIMEOUT');
    await s.close();
    // All of it survives a reopen; ending the job closed its episode.
    const again = await b.open(dir, clock, retention);
    expect((await again.watchPolicy())?.policy).toEqual(policy);
    const w = await again.watchJob('1000:slurm:7');
    expect(w).toMatchObject({ state: 'waiting', since: 11_000, endedAt: 14_000, endReason: 'TIMEOUT' });
    expect(await again.openEpisode('1000:slurm:7')).toBeNull();
    expect((await again.episodes('1000:slurm:7')).map((x) => x.endedAt)).toEqual([14_000]);
    // Seen again (an agent restarted): reopened.
    await again.upsertWatchJob({
      id: '1000:slurm:7',
      key: 'slurm:7',
      uid: 1000,
      jobId: null,
      info,
      at: 15_000,
    });
    expect((await again.watchJob('1000:slurm:7'))?.endedAt).toBeNull();
    await again.close();
  });

  it('(from store.test.ts) drops audit rows and ended jobs (with their snapshots) past the audit retention; running jobs stay', async () => {
    const clock = { now: 1_000 };
    const s = await fresh(clock, { maxSnapshotsPerJob: 0, maxAgeSeconds: 0, auditAgeSeconds: 60 });
    await s.saveJob(job('old', 1_000), { who: 'admin', action: 'attach', jobId: 'old' });
    await s.saveJob(
      { ...job('live', 1_000), starterPid: 43 },
      { who: 'admin', action: 'attach', jobId: 'live' },
    );
    await s.insertSnapshot(snap('s-old', 'old', 1_000), { ...audit, jobId: 'old', snapshotId: 's-old' });
    await s.markJobEnded(JobId('old'), 2_000);
    clock.now = 2_000 + 59_000; // not yet past 60 s
    await s.sweep();
    expect(await s.job('old')).not.toBeNull();
    expect(await s.activity(10)).toHaveLength(3);
    clock.now = 2_000 + 61_000;
    await s.audit({ who: 'admin', action: 'login' }); // a fresh row survives the sweep
    await s.sweep();
    expect(await s.job('old')).toBeNull();
    expect(await s.snapshotMeta('s-old')).toBeNull();
    expect(await s.job('live')).not.toBeNull();
    expect((await s.activity(10)).map((e) => e.action)).toEqual(['login']);
  });

  it('(from store.test.ts) writes a snapshot and its audit row together or not at all', async () => {
    const clock = { now: 1 };
    const s = await fresh(clock);
    await s.saveJob(job('j1', 1), { who: 'admin', action: 'attach', jobId: 'j1' });
    await s.insertSnapshot(snap('s1', 'j1', 1), audit);
    // Same id again: the insert fails, and the audit row of the failed write is not kept.
    await expect(s.insertSnapshot(snap('s1', 'j1', 2), { ...audit, snapshotId: 'dup' })).rejects.toThrow(
      /UNIQUE|unique/,
    );
    expect((await s.activity(10)).some((e) => e.snapshotId === 'dup')).toBe(false);
    // A snapshot of an unknown job violates the foreign key: nothing is written.
    await expect(s.insertSnapshot(snap('s2', 'nope', 2), { ...audit, snapshotId: 's2' })).rejects.toThrow(
      /FOREIGN KEY|foreign key/,
    );
    expect(await s.snapshotMeta('s2')).toBeNull();
    expect(await s.countSnapshots()).toBe(1);
  });

  it('(from store.test.ts) keeps at most N snapshots per job, newest first', async () => {
    const clock = { now: 100 };
    const s = await fresh(clock, { maxSnapshotsPerJob: 3, maxAgeSeconds: 0 });
    await s.saveJob(job('j1', 1), { who: 'admin', action: 'attach' });
    await s.saveJob({ ...job('j2', 1), starterPid: 43 }, { who: 'admin', action: 'attach' });
    for (let i = 1; i <= 5; i++) await s.insertSnapshot(snap(`a${i}`, 'j1', i), audit);
    await s.insertSnapshot(snap('b1', 'j2', 1), audit);
    expect((await s.snapshots('j1', 10)).map((m) => m.id)).toEqual(['a5', 'a4', 'a3']);
    expect((await s.snapshots('j2', 10)).map((m) => m.id)).toEqual(['b1']);
    expect(await s.snapshotData('a1')).toBeNull();
  });

  it('(from store.test.ts) drops snapshots older than the maximum age once their share links expired, and the links with them', async () => {
    const clock = { now: 0 };
    const s = await fresh(clock, { maxSnapshotsPerJob: 0, maxAgeSeconds: 60 });
    await s.saveJob(job('j1', 0), { who: 'admin', action: 'attach' });
    await s.insertSnapshot(snap('old', 'j1', 0), audit);
    await s.insertShare(
      { id: 'sh', snapshotId: SnapshotId('old'), createdBy: 'admin', createdAt: 0, expiresAt: 70_000 },
      {
        who: 'admin',
        action: 'share',
      },
    );
    clock.now = 30_000;
    await s.insertSnapshot(snap('mid', 'j1', 30_000), audit);
    expect(await s.countSnapshots('j1')).toBe(2);
    // The share link is live: its snapshot stays past the age limit.
    clock.now = 60_001;
    expect(await s.sweep()).toBe(0);
    expect((await s.liveShare('sh'))?.snapshotId).toBe('old');
    clock.now = 100_000;
    await s.insertSnapshot(snap('new', 'j1', 100_000), audit);
    expect((await s.snapshots('j1', 10)).map((m) => m.id)).toEqual(['new']);
    expect(await s.liveShare('sh')).toBeNull();
  });

  it('(from store.test.ts) finds users by token hash and sessions until they expire', async () => {
    const clock = { now: 0 };
    const s = await fresh(clock);
    const u = await s.upsertUser({ name: 'alice', uid: 1000, admin: false, tokenHash: 'h1' });
    expect(await s.userByTokenHash('h1')).toEqual(u);
    // Updating a user keeps the token unless a new one is given.
    await s.upsertUser({ name: 'alice', uid: 1001, admin: false, tokenHash: null });
    expect((await s.userByTokenHash('h1'))?.uid).toBe(1001);
    await s.createSession('sess', u.id, 1000);
    expect((await s.userBySession('sess'))?.name).toBe('alice');
    clock.now = 1000;
    expect(await s.userBySession('sess')).toBeNull();
  });

  it('(from store.test.ts) makes a login session only for a live login token (loginSession)', async () => {
    const clock = { now: 0 };
    const s = await fresh(clock);
    await s.upsertUser({ name: 'alice', uid: 1000, admin: false, tokenHash: 'h1', tokenExpiresAt: 500 });
    expect(await s.loginSession('unknown', 'sess0', 1000)).toBeNull();
    expect((await s.loginSession('h1', 'sess1', 1000)) as { name: string }).toMatchObject({ name: 'alice' });
    expect((await s.userBySession('sess1'))?.name).toBe('alice');
    // Revoked: no session is made with it any more.
    await s.revokeToken('alice', { who: 'admin', action: 'user-create' });
    expect(await s.loginSession('h1', 'sess2', 1000)).toBeNull();
    expect(await s.userBySession('sess2')).toBeNull();
    // Expired: said so, and no session either.
    await s.upsertUser({ name: 'alice', uid: 1000, admin: false, tokenHash: 'h2', tokenExpiresAt: 500 });
    clock.now = 600;
    expect(await s.loginSession('h2', 'sess3', 1000)).toBe('expired');
    expect(await s.userBySession('sess3')).toBeNull();
  });

  it('(from store.test.ts) finds, refuses or saves an attach in one step (attachJob)', async () => {
    const clock = { now: 1 };
    const s = await fresh(clock);
    const attach = { who: 'alice', action: 'attach' } as const;
    const first = await s.attachJob(job('j1', 1), attach);
    expect(first).toMatchObject({ ok: true, job: { id: 'j1' } });
    // The same starter again: the same job (its id and creation kept), the layout updated.
    clock.now = 2;
    const again = await s.attachJob({ ...job('j2', 2), createdBy: 'bob', command: 'again' }, attach);
    expect(again).toMatchObject({
      ok: true,
      job: { id: 'j1', createdAt: 1, createdBy: 'admin', command: 'again' },
    });
    expect((await s.jobs(null)).map((j) => j.id)).toEqual(['j1']);
    expect((await s.activity(10)).map((e) => e.jobId)).toEqual(['j1', 'j1']);
    // Another owner of the same starter: refused, nothing saved.
    const other = await s.attachJob({ ...job('j3', 3), uid: 2000 }, attach);
    expect(other).toMatchObject({ ok: false, existing: { id: 'j1' } });
    expect(await s.job('j3')).toBeNull();
    // The pid reused by another process (another start time): the old job ends, a new one starts.
    const reused = await s.attachJob({ ...job('j4', 4), starterStartTime: '6000', uid: 2000 }, attach);
    expect(reused).toMatchObject({ ok: true, job: { id: 'j4' } });
    expect((await s.job('j1'))?.endedAt).toBe(2);
    // Cores: found by directory, ended or not, with the first attach's starter.
    const cores = { ...job('c1', 5), coresDir: '/cores/a', starterPid: 7, starterStartTime: '' };
    expect(await s.attachJob(cores, attach)).toMatchObject({ ok: true, job: { id: 'c1' } });
    await s.markJobEnded(JobId('c1'), 6);
    const coresAgain = await s.attachJob({ ...cores, id: JobId('c2'), starterPid: 8 }, attach);
    expect(coresAgain).toMatchObject({ ok: true, job: { id: 'c1', starterPid: 7, endedAt: null } });
    expect(await s.attachJob({ ...cores, id: JobId('c3'), uid: 0 }, attach)).toMatchObject({ ok: false });
  });

  it('gives a lease to one holder at a time, until it expires; its holder renews it', async () => {
    const clock = { now: T0 };
    const s = await fresh(clock);
    expect(await s.tryLease('auto-snapshots', 'a', 1000)).toBe(true);
    expect(await s.tryLease('auto-snapshots', 'b', 1000)).toBe(false);
    expect(await s.tryLease('retention', 'b', 1000)).toBe(true);
    clock.now = T0 + 999;
    expect(await s.tryLease('auto-snapshots', 'a', 1000)).toBe(true);
    clock.now = T0 + 1998;
    expect(await s.tryLease('auto-snapshots', 'b', 1000)).toBe(false);
    clock.now = T0 + 1999;
    expect(await s.tryLease('auto-snapshots', 'b', 1000)).toBe(true);
    expect(await s.tryLease('auto-snapshots', 'a', 1000)).toBe(false);
    // Many at once: exactly one wins.
    const got = await Promise.all(Array.from({ length: 10 }, (_, i) => s.tryLease('watch', `h${i}`, 1000)));
    expect(got.filter(Boolean)).toHaveLength(1);
  });
});

describe('one migration history, two dialects', () => {
  it('gives SQLite and PostgreSQL the same tables and columns', async () => {
    const db = new Database(':memory:');
    for (const m of migrationsFor('sqlite')) db.exec(m.sql);
    const sqliteTables = (
      db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .all() as {
        name: string;
      }[]
    ).map((r) => r.name);
    const fromSqlite: Record<string, string[]> = {};
    for (const t of sqliteTables) {
      fromSqlite[t] = (db.prepare(`PRAGMA table_info(${t})`).all() as { name: string }[])
        .map((c) => c.name)
        .sort();
    }
    db.close();

    const name = `history_${++databases}`;
    await admin?.query(`CREATE DATABASE ${name}`);
    const c = new pg.Client({ connectionString: (server as PostgresServer).urlOf(name) });
    await c.connect();
    try {
      for (const m of migrationsFor('postgres')) await c.query(m.sql);
      const cols = await c.query<{ table_name: string; column_name: string }>(
        `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'`,
      );
      const fromPg: Record<string, string[]> = {};
      for (const r of cols.rows) fromPg[r.table_name] = [...(fromPg[r.table_name] ?? []), r.column_name];
      for (const t of Object.keys(fromPg)) fromPg[t]?.sort();
      // SQLite's snapshots have an implicit rowid (their insertion order); PostgreSQL names it.
      expect(fromPg.snapshots).toContain('rowid');
      fromPg.snapshots = fromPg.snapshots?.filter((n) => n !== 'rowid') ?? [];
      expect(fromPg).toEqual(fromSqlite);
      expect(Object.keys(fromSqlite).sort()).toEqual(
        [
          'users',
          'sessions',
          'jobs',
          'snapshots',
          'shares',
          'audit',
          'snapshot_requests',
          'watch_policy',
          'watch_jobs',
          'watch_samples',
          'watch_episodes',
          'leases',
          'snapshot_overviews',
        ].sort(),
      );
    } finally {
      await c.end();
    }
  });
});

describe('two PostgreSQL stores on one database (two aggregators)', () => {
  it('migrate once when they start together, and share one job, one lease and one request key', async () => {
    const url = await postgres.fresh();
    const clock = { now: T0 };
    const [a, b] = await Promise.all([postgres.open(url, clock), postgres.open(url, clock)]);
    const applied = [a?.migrationsApplied, b?.migrationsApplied].map((m) => m?.length);
    expect(applied.sort()).toEqual([0, MIGRATION_HISTORY.length]);
    const sa = a as StorePort;
    const sb = b as StorePort;
    const attaches = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        (i % 2 ? sa : sb).attachJob(job(`j${i}`, T0 + i), { who: 'admin', action: 'attach' }),
      ),
    );
    expect(new Set(attaches.map((x) => (x.ok ? x.job.id : 'refused'))).size).toBe(1);
    expect(await sb.jobs(null)).toHaveLength(1);
    const leases = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 ? sa : sb).tryLease('auto-snapshots', `i${i % 2}`, 1000)),
    );
    expect(new Set(leases.flatMap((got, i) => (got ? [i % 2] : []))).size).toBe(1);
    const u = await sa.upsertUser({ name: 'alice', uid: 1000, admin: false, tokenHash: null });
    const id = ((await sb.jobs(null))[0] as JobRecord).id;
    await Promise.all([
      sa.insertSnapshot(snap('s1', id, T0), audit, [{ userId: u.id, key: 'k' }]),
      sb.insertSnapshot(snap('s2', id, T0), audit, [{ userId: u.id, key: 'k' }]),
    ]);
    const first = (await sa.requestedSnapshot({ userId: u.id, key: 'k' }))?.id;
    expect(['s1', 's2']).toContain(first);
    expect((await sb.requestedSnapshot({ userId: u.id, key: 'k' }))?.id).toBe(first);
  });
});

describe('PostgreSQL out of reach', () => {
  it('fails with MQD_E_STORE_UNAVAILABLE (HTTP 503) while the database is down, and resumes by itself', async () => {
    const srv = server as PostgresServer;
    const clock = { now: T0 };
    const s = await postgres.open(await postgres.fresh(), clock);
    await s.audit({ who: 'admin', action: 'login' });
    // The admin client of this file goes down with the server: a fresh one is made after.
    admin?.on('error', () => undefined);
    await srv.down();
    try {
      for (const call of [
        () => s.activity(10),
        () => s.audit({ who: 'x', action: 'login' }),
        () => s.sweep(),
      ]) {
        const e = await call().then(
          () => null,
          (x: unknown) => x,
        );
        expect(e).toBeInstanceOf(MqdException);
        expect((e as MqdException).code).toBe('MQD_E_STORE_UNAVAILABLE');
        expect(httpStatus((e as MqdException).code)).toBe(503);
      }
      await expect(PgStore.open(srv.url, NO_RETENTION)).rejects.toMatchObject({
        code: 'MQD_E_STORE_UNAVAILABLE',
      });
    } finally {
      await srv.up();
      admin = new pg.Client({ connectionString: srv.url });
      await admin.connect();
    }
    // Back: the same store works again without being reopened.
    await s.audit({ who: 'admin', action: 'login' });
    expect((await s.activity(10)).map((a) => a.who)).toEqual(['admin', 'admin']);
  });

  it('a connection the server ends (pg_terminate_backend: 57P01) costs at most one coded 503', async () => {
    const url = await postgres.fresh();
    const db = new URL(url.replace('@/', '@localhost/')).pathname.slice(1);
    const s = await postgres.open(url, { now: T0 });
    await s.audit({ who: 'admin', action: 'login' });
    const ended = await admin?.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [db],
    );
    expect(ended?.rowCount).toBeGreaterThan(0);
    const first = await s.activity(10).then(
      () => 'ok',
      (e: unknown) => (e as MqdException).code,
    );
    expect(['ok', 'MQD_E_STORE_UNAVAILABLE']).toContain(first);
    expect(await s.activity(10)).toHaveLength(1);
    await s.audit({ who: 'admin', action: 'login' });
  });

  it('refuses writes with MQD_E_STORE_READONLY on a read-only database, and still reads', async () => {
    const url = await postgres.fresh();
    const db = new URL(url.replace('@/', '@localhost/')).pathname.slice(1);
    const clock = { now: T0 };
    const first = await postgres.open(url, clock);
    await first.audit({ who: 'admin', action: 'login' });
    await first.close();
    await admin?.query(`ALTER DATABASE ${db} SET default_transaction_read_only = on`);
    const s = await postgres.open(url, clock);
    expect(s.migrationsApplied).toEqual([]);
    expect(s.readOnlyReason).toBeNull();
    await expect(s.audit({ who: 'x', action: 'login' })).rejects.toMatchObject({
      code: 'MQD_E_STORE_READONLY',
    });
    await expect(s.tryLease('watch', 'a', 1000)).rejects.toMatchObject({ code: 'MQD_E_STORE_READONLY' });
    expect(s.readOnlyReason).toContain('25006');
    expect((await s.activity(10)).map((a) => a.who)).toEqual(['admin']);
    expect(httpStatus('MQD_E_STORE_READONLY')).toBe(503);
  });

  it('mqd serve opens PgStore itself from --store (config.storeUrl), and closes it with the server', async () => {
    const url = await postgres.fresh();
    // The test servers accept the shared agent token: on PostgreSQL that needs a cluster secret.
    const app = await startServer({
      storeUrl: url,
      clusterSecret: 'store-contract-cluster-secret-0123456789',
    });
    let closed = false;
    try {
      const store = app.app.mqd.store;
      expect(store.dialect).toBe('postgres');
      expect((await app.app.inject({ method: 'GET', url: '/api/jobs', headers: app.admin })).statusCode).toBe(
        200,
      );
      // The admin token and the watch policy were seeded into PostgreSQL.
      expect(await store.userByName('admin')).toMatchObject({ admin: true });
      expect(await store.watchPolicy()).not.toBeNull();
      await app.close();
      closed = true;
      expect(store.isOpen).toBe(false);
    } finally {
      if (!closed) await app.close();
    }
  });

  it('the server answers 503 MQD_E_STORE_UNAVAILABLE while PostgreSQL is down, then serves again by itself', async () => {
    const srv = server as PostgresServer;
    const s = await postgres.open(await postgres.fresh(), { now: Date.now() });
    const app = await startServer({}, { store: s });
    try {
      const jobs = () => app.app.inject({ method: 'GET', url: '/api/jobs', headers: app.admin });
      expect((await jobs()).statusCode).toBe(200);
      admin?.on('error', () => undefined);
      await srv.down();
      try {
        const res = await jobs();
        expect(res.statusCode).toBe(503);
        expect(json(res)).toMatchObject({ code: 'MQD_E_STORE_UNAVAILABLE' });
        expect(res.body).toContain('--store');
        expect(res.body).not.toContain(srv.dir);
      } finally {
        await srv.up();
        admin = new pg.Client({ connectionString: srv.url });
        await admin.connect();
      }
      expect((await jobs()).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });
});
