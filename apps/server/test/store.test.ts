import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { DEFAULT_WATCH_POLICY, JobId, SnapshotId } from '@mqd/model';
import { afterEach, describe, expect, it } from 'vitest';
import { type NewSnapshot, type RetentionPolicy, SqliteStore } from '../src/store.js';
import { MIGRATIONS } from '../src/store-schema.js';
import type { JobRecord, SnapshotMeta } from '../src/types.js';

const dirs: string[] = [];
const stores: SqliteStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'mqd-store-'));
  dirs.push(d);
  return d;
}

function open(
  dataDir: string,
  clock: { now: number },
  retention: RetentionPolicy = { maxSnapshotsPerJob: 0, maxAgeSeconds: 0 },
  migrations = MIGRATIONS,
) {
  const s = new SqliteStore({ dataDir, retention, clock: () => clock.now, migrations });
  stores.push(s);
  return s;
}

const job = (id: string, at: number): JobRecord => ({
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
});

function snap(id: string, jobId: string, takenAt: number): NewSnapshot {
  const meta: SnapshotMeta = {
    id: SnapshotId(id),
    jobId: JobId(jobId),
    takenAt,
    durationMicros: 10,
    createdBy: 'admin',
    bytes: 2,
    storedBytes: 22,
    ranks: 2,
    ok: 2,
    errors: 0,
    missing: 0,
    pendingSends: 1,
    pendingReceives: 1,
    unexpected: 0,
    digest: 'd',
    missingRanks: [],
  };
  return { meta, gz: gzipSync(`{"id":"${id}"}`) };
}

const audit = { who: 'admin', action: 'snapshot' } as const;

describe('store', () => {
  it('runs each migration once, across reopens', async () => {
    const dir = tmp();
    const clock = { now: 1000 };
    const first = open(dir, clock);
    const released = MIGRATIONS.map((m) => m.version);
    expect(first.migrationsApplied).toEqual(released);
    await first.close();
    const second = open(dir, clock);
    expect(second.migrationsApplied).toEqual([]);
    await second.close();
    // A new release adds a migration: only it runs, once.
    const next = Math.max(...released) + 1;
    const withNext = [...MIGRATIONS, { version: next, sql: 'ALTER TABLE jobs ADD COLUMN note TEXT' }];
    const third = open(dir, clock, undefined, withNext);
    expect(third.migrationsApplied).toEqual([next]);
    expect(await third.schemaVersion()).toBe(next);
    await third.close();
    const fourth = open(dir, clock, undefined, withNext);
    expect(fourth.migrationsApplied).toEqual([]);
    const rows = fourth.db.prepare('SELECT version FROM schema_version ORDER BY version').all();
    expect(rows).toEqual([...released, next].map((version) => ({ version })));
  });

  it('keeps the watch policy, watched jobs, capped samples and episodes (migration 5)', async () => {
    const dir = tmp();
    const clock = { now: 10_000 };
    const retention = { maxSnapshotsPerJob: 0, maxAgeSeconds: 0, maxWatchSamplesPerJob: 2 };
    const s = open(dir, clock, retention);
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
    const again = open(dir, clock, retention);
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

  it('keeps committed snapshots across a reopen, with WAL on', async () => {
    const dir = tmp();
    const clock = { now: 5000 };
    const a = open(dir, clock);
    expect(a.db.pragma('journal_mode', { simple: true })).toBe('wal');
    await a.saveJob(job('j1', 1), { who: 'admin', action: 'attach', jobId: 'j1' });
    await a.insertSnapshot(snap('s1', 'j1', 4000), { ...audit, jobId: 'j1', snapshotId: 's1' });
    // No close: as if the process died after the commit.
    const b = open(dir, clock);
    expect((await b.job('j1'))?.ranks).toHaveLength(2);
    expect(await b.snapshotMeta('s1')).toMatchObject({
      id: 's1',
      jobId: 'j1',
      takenAt: 4000,
      pendingSends: 1,
    });
    expect(await b.snapshotData('s1')).toEqual(snap('s1', 'j1', 4000).gz);
    expect((await b.activity(10)).map((e) => e.action)).toEqual(['snapshot', 'attach']);
  });

  it('drops audit rows and ended jobs (with their snapshots) past the audit retention; running jobs stay', async () => {
    const clock = { now: 1_000 };
    const s = new SqliteStore({
      dataDir: ':memory:',
      retention: { maxSnapshotsPerJob: 0, maxAgeSeconds: 0, auditAgeSeconds: 60 },
      clock: () => clock.now,
    });
    stores.push(s);
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

  it('writes a snapshot and its audit row together or not at all', async () => {
    const clock = { now: 1 };
    const s = open(':memory:', clock);
    await s.saveJob(job('j1', 1), { who: 'admin', action: 'attach', jobId: 'j1' });
    await s.insertSnapshot(snap('s1', 'j1', 1), audit);
    // Same id again: the insert fails, and the audit row of the failed write is not kept.
    await expect(s.insertSnapshot(snap('s1', 'j1', 2), { ...audit, snapshotId: 'dup' })).rejects.toThrow(
      /UNIQUE/,
    );
    expect((await s.activity(10)).some((e) => e.snapshotId === 'dup')).toBe(false);
    // A snapshot of an unknown job violates the foreign key: nothing is written.
    await expect(s.insertSnapshot(snap('s2', 'nope', 2), { ...audit, snapshotId: 's2' })).rejects.toThrow(
      /FOREIGN KEY/,
    );
    expect(await s.snapshotMeta('s2')).toBeNull();
    expect(await s.countSnapshots()).toBe(1);
  });

  it('keeps at most N snapshots per job, newest first', async () => {
    const clock = { now: 100 };
    const s = open(':memory:', clock, { maxSnapshotsPerJob: 3, maxAgeSeconds: 0 });
    await s.saveJob(job('j1', 1), { who: 'admin', action: 'attach' });
    await s.saveJob({ ...job('j2', 1), starterPid: 43 }, { who: 'admin', action: 'attach' });
    for (let i = 1; i <= 5; i++) await s.insertSnapshot(snap(`a${i}`, 'j1', i), audit);
    await s.insertSnapshot(snap('b1', 'j2', 1), audit);
    expect((await s.snapshots('j1', 10)).map((m) => m.id)).toEqual(['a5', 'a4', 'a3']);
    expect((await s.snapshots('j2', 10)).map((m) => m.id)).toEqual(['b1']);
    expect(await s.snapshotData('a1')).toBeNull();
  });

  it('drops snapshots older than the maximum age, and their share links with them', async () => {
    const clock = { now: 0 };
    const s = open(':memory:', clock, { maxSnapshotsPerJob: 0, maxAgeSeconds: 60 });
    await s.saveJob(job('j1', 0), { who: 'admin', action: 'attach' });
    await s.insertSnapshot(snap('old', 'j1', 0), audit);
    await s.insertShare(
      { id: 'sh', snapshotId: SnapshotId('old'), createdBy: 'admin', createdAt: 0, expiresAt: 1e12 },
      {
        who: 'admin',
        action: 'share',
      },
    );
    clock.now = 30_000;
    await s.insertSnapshot(snap('mid', 'j1', 30_000), audit);
    expect(await s.countSnapshots('j1')).toBe(2);
    clock.now = 60_001;
    expect(await s.sweep()).toBe(1);
    expect((await s.snapshots('j1', 10)).map((m) => m.id)).toEqual(['mid']);
    expect(await s.liveShare('sh')).toBeNull();
    clock.now = 100_000;
    await s.insertSnapshot(snap('new', 'j1', 100_000), audit);
    expect((await s.snapshots('j1', 10)).map((m) => m.id)).toEqual(['new']);
  });

  it('finds users by token hash and sessions until they expire', async () => {
    const clock = { now: 0 };
    const s = open(':memory:', clock);
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

  it('makes a login session only for a live login token (loginSession)', async () => {
    const clock = { now: 0 };
    const s = open(':memory:', clock);
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

  it('finds, refuses or saves an attach in one step (attachJob)', async () => {
    const clock = { now: 1 };
    const s = open(':memory:', clock);
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
});
