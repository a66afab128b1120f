import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { DEFAULT_WATCH_POLICY, JobId, SnapshotId } from '@mqd/model';
import { afterEach, describe, expect, it } from 'vitest';
import { type NewSnapshot, type RetentionPolicy, Store } from '../src/store.js';
import { MIGRATIONS } from '../src/store-schema.js';
import type { JobRecord, SnapshotMeta } from '../src/types.js';

const dirs: string[] = [];
const stores: Store[] = [];
afterEach(() => {
  for (const s of stores.splice(0)) s.close();
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
  const s = new Store({ dataDir, retention, clock: () => clock.now, migrations });
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
  it('runs each migration once, across reopens', () => {
    const dir = tmp();
    const clock = { now: 1000 };
    const first = open(dir, clock);
    const released = MIGRATIONS.map((m) => m.version);
    expect(first.migrationsApplied).toEqual(released);
    first.close();
    const second = open(dir, clock);
    expect(second.migrationsApplied).toEqual([]);
    second.close();
    // A new release adds a migration: only it runs, once.
    const next = Math.max(...released) + 1;
    const withNext = [...MIGRATIONS, { version: next, sql: 'ALTER TABLE jobs ADD COLUMN note TEXT' }];
    const third = open(dir, clock, undefined, withNext);
    expect(third.migrationsApplied).toEqual([next]);
    expect(third.schemaVersion()).toBe(next);
    third.close();
    const fourth = open(dir, clock, undefined, withNext);
    expect(fourth.migrationsApplied).toEqual([]);
    const rows = fourth.db.prepare('SELECT version FROM schema_version ORDER BY version').all();
    expect(rows).toEqual([...released, next].map((version) => ({ version })));
  });

  it('keeps the watch policy, watched jobs, capped samples and episodes (migration 5)', () => {
    const dir = tmp();
    const clock = { now: 10_000 };
    const retention = { maxSnapshotsPerJob: 0, maxAgeSeconds: 0, maxWatchSamplesPerJob: 2 };
    const s = open(dir, clock, retention);
    expect(s.watchPolicy()).toBeNull();
    const policy = { ...DEFAULT_WATCH_POLICY, enabled: true, users: ['alice'] };
    s.setWatchPolicy(policy, { who: 'admin', action: 'watch-policy' });
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
    s.upsertWatchJob({ id: '1000:slurm:7', key: 'slurm:7', uid: 1000, jobId: null, info, at: 10_000 });
    // Three samples with a cap of two: the oldest goes.
    for (const at of [11_000, 12_000, 13_000]) {
      s.insertWatchSample(
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
    expect(s.watchSamples('1000:slurm:7', 10).map((x) => x.at)).toEqual([13_000, 12_000]);
    const e = s.openWatchEpisode({
      watchId: '1000:slurm:7',
      startedAt: 12_000,
      snapshotId: null,
      shareId: null,
    });
    expect(s.openEpisode('1000:slurm:7')?.id).toBe(e);
    s.endWatchJob('1000:slurm:7', 14_000, 'TIMEOUT');
    s.close();
    // All of it survives a reopen; ending the job closed its episode.
    const again = open(dir, clock, retention);
    expect(again.watchPolicy()?.policy).toEqual(policy);
    const w = again.watchJob('1000:slurm:7');
    expect(w).toMatchObject({ state: 'waiting', since: 11_000, endedAt: 14_000, endReason: 'TIMEOUT' });
    expect(again.openEpisode('1000:slurm:7')).toBeNull();
    expect(again.episodes('1000:slurm:7').map((x) => x.endedAt)).toEqual([14_000]);
    // Seen again (an agent restarted): reopened.
    again.upsertWatchJob({ id: '1000:slurm:7', key: 'slurm:7', uid: 1000, jobId: null, info, at: 15_000 });
    expect(again.watchJob('1000:slurm:7')?.endedAt).toBeNull();
    again.close();
  });

  it('keeps committed snapshots across a reopen, with WAL on', () => {
    const dir = tmp();
    const clock = { now: 5000 };
    const a = open(dir, clock);
    expect(a.db.pragma('journal_mode', { simple: true })).toBe('wal');
    a.saveJob(job('j1', 1), { who: 'admin', action: 'attach', jobId: 'j1' });
    a.insertSnapshot(snap('s1', 'j1', 4000), { ...audit, jobId: 'j1', snapshotId: 's1' });
    // No close: as if the process died after the commit.
    const b = open(dir, clock);
    expect(b.job('j1')?.ranks).toHaveLength(2);
    expect(b.snapshotMeta('s1')).toMatchObject({ id: 's1', jobId: 'j1', takenAt: 4000, pendingSends: 1 });
    expect(b.snapshotData('s1')).toEqual(snap('s1', 'j1', 4000).gz);
    expect(b.activity(10).map((e) => e.action)).toEqual(['snapshot', 'attach']);
  });

  it('drops audit rows and ended jobs (with their snapshots) past the audit retention; running jobs stay', () => {
    const clock = { now: 1_000 };
    const s = new Store({
      dataDir: ':memory:',
      retention: { maxSnapshotsPerJob: 0, maxAgeSeconds: 0, auditAgeSeconds: 60 },
      clock: () => clock.now,
    });
    stores.push(s);
    s.saveJob(job('old', 1_000), { who: 'admin', action: 'attach', jobId: 'old' });
    s.saveJob({ ...job('live', 1_000), starterPid: 43 }, { who: 'admin', action: 'attach', jobId: 'live' });
    s.insertSnapshot(snap('s-old', 'old', 1_000), { ...audit, jobId: 'old', snapshotId: 's-old' });
    s.markJobEnded(JobId('old'), 2_000);
    clock.now = 2_000 + 59_000; // not yet past 60 s
    s.sweep();
    expect(s.job('old')).not.toBeNull();
    expect(s.activity(10)).toHaveLength(3);
    clock.now = 2_000 + 61_000;
    s.audit({ who: 'admin', action: 'login' }); // a fresh row survives the sweep
    s.sweep();
    expect(s.job('old')).toBeNull();
    expect(s.snapshotMeta('s-old')).toBeNull();
    expect(s.job('live')).not.toBeNull();
    expect(s.activity(10).map((e) => e.action)).toEqual(['login']);
  });

  it('writes a snapshot and its audit row together or not at all', () => {
    const clock = { now: 1 };
    const s = open(':memory:', clock);
    s.saveJob(job('j1', 1), { who: 'admin', action: 'attach', jobId: 'j1' });
    s.insertSnapshot(snap('s1', 'j1', 1), audit);
    // Same id again: the insert fails, and the audit row of the failed write is not kept.
    expect(() => s.insertSnapshot(snap('s1', 'j1', 2), { ...audit, snapshotId: 'dup' })).toThrow(/UNIQUE/);
    expect(s.activity(10).some((e) => e.snapshotId === 'dup')).toBe(false);
    // A snapshot of an unknown job violates the foreign key: nothing is written.
    expect(() => s.insertSnapshot(snap('s2', 'nope', 2), { ...audit, snapshotId: 's2' })).toThrow(
      /FOREIGN KEY/,
    );
    expect(s.snapshotMeta('s2')).toBeNull();
    expect(s.countSnapshots()).toBe(1);
  });

  it('keeps at most N snapshots per job, newest first', () => {
    const clock = { now: 100 };
    const s = open(':memory:', clock, { maxSnapshotsPerJob: 3, maxAgeSeconds: 0 });
    s.saveJob(job('j1', 1), { who: 'admin', action: 'attach' });
    s.saveJob({ ...job('j2', 1), starterPid: 43 }, { who: 'admin', action: 'attach' });
    for (let i = 1; i <= 5; i++) s.insertSnapshot(snap(`a${i}`, 'j1', i), audit);
    s.insertSnapshot(snap('b1', 'j2', 1), audit);
    expect(s.snapshots('j1', 10).map((m) => m.id)).toEqual(['a5', 'a4', 'a3']);
    expect(s.snapshots('j2', 10).map((m) => m.id)).toEqual(['b1']);
    expect(s.snapshotData('a1')).toBeNull();
  });

  it('drops snapshots older than the maximum age, and their share links with them', () => {
    const clock = { now: 0 };
    const s = open(':memory:', clock, { maxSnapshotsPerJob: 0, maxAgeSeconds: 60 });
    s.saveJob(job('j1', 0), { who: 'admin', action: 'attach' });
    s.insertSnapshot(snap('old', 'j1', 0), audit);
    s.insertShare(
      { id: 'sh', snapshotId: SnapshotId('old'), createdBy: 'admin', createdAt: 0, expiresAt: 1e12 },
      {
        who: 'admin',
        action: 'share',
      },
    );
    clock.now = 30_000;
    s.insertSnapshot(snap('mid', 'j1', 30_000), audit);
    expect(s.countSnapshots('j1')).toBe(2);
    clock.now = 60_001;
    expect(s.sweep()).toBe(1);
    expect(s.snapshots('j1', 10).map((m) => m.id)).toEqual(['mid']);
    expect(s.liveShare('sh')).toBeNull();
    clock.now = 100_000;
    s.insertSnapshot(snap('new', 'j1', 100_000), audit);
    expect(s.snapshots('j1', 10).map((m) => m.id)).toEqual(['new']);
  });

  it('finds users by token hash and sessions until they expire', () => {
    const clock = { now: 0 };
    const s = open(':memory:', clock);
    const u = s.upsertUser({ name: 'alice', uid: 1000, admin: false, tokenHash: 'h1' });
    expect(s.userByTokenHash('h1')).toEqual(u);
    // Updating a user keeps the token unless a new one is given.
    s.upsertUser({ name: 'alice', uid: 1001, admin: false, tokenHash: null });
    expect(s.userByTokenHash('h1')?.uid).toBe(1001);
    s.createSession('sess', u.id, 1000);
    expect(s.userBySession('sess')?.name).toBe('alice');
    clock.now = 1000;
    expect(s.userBySession('sess')).toBeNull();
  });
});
