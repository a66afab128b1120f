// What only the SQLite store has: WAL and a reopen after a crash. Everything both stores do is
// in store-contract.test.ts, run on SQLite and on PostgreSQL (corruption and a full disk:
// security.test.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { JobId, SnapshotId } from '@mqd/model';
import { afterEach, describe, expect, it } from 'vitest';
import type { JobRecord, SnapshotMeta } from '../src/shared/types.js';
import { SqliteStore } from '../src/store/dialect-sqlite.js';
import type { NewSnapshot, RetentionPolicy } from '../src/store/store-port.js';
import { MIGRATIONS } from '../src/store/store-schema.js';

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
});
