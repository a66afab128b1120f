// A queue the MPI library cannot show is null in the snapshot: the summary says which kinds no
// read rank could show, so Jobs and Fleet print "not readable" instead of a count of 0. An empty
// queue the library did show stays 0. The kinds cross between instances with the folds and are
// stored with the snapshot; a snapshot stored before the column existed reads as all read.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateRawSync, gzipSync } from 'node:zlib';
import {
  type Communicator,
  JobId,
  mqdError,
  type Operation,
  type RankSnapshot,
  rankNotRead,
  SnapshotId,
} from '@mqd/model';
import { afterEach, describe, expect, it } from 'vitest';
import { summarize, summaryOf } from '../src/fanout/fanout.js';
import { hungJson, metaJson } from '../src/http/http.js';
import { decodeFolds, encodeFolds, rankFold } from '../src/hub/rank-fold.js';
import type { JobRecord, SnapshotMeta } from '../src/shared/types.js';
import { SqliteStore } from '../src/store/dialect-sqlite.js';
import { MIGRATIONS } from '../src/store/store-schema.js';

const recv: Operation = {
  status: 'pending',
  peer: { local: 1, global: 1 },
  tag: 7,
  length: 8,
  actual: null,
  extraText: [],
  buffer: '0x1000',
  systemBuffer: false,
};

function comm(id: string, r: number, unexpected: Operation[] | null): Communicator {
  return {
    id,
    name: id === '0' ? 'MPI_COMM_WORLD' : `comm ${id}`,
    size: 2,
    localRank: r,
    group: null,
    sends: [],
    receives: [recv],
    unexpected,
    unavailable:
      unexpected === null
        ? {
            unexpected: {
              code: 'MQD_E_QUEUE_UNSUPPORTED',
              message: "Open MPI's DLL cannot show unexpected messages",
            },
          }
        : {},
  };
}

const rank = (r: number, ...communicators: Communicator[]): RankSnapshot => ({
  rank: r,
  pid: 100 + r,
  host: 'n1',
  state: { kind: 'ok' },
  pausedMicros: 10,
  communicators,
});

/** Open MPI's DLL: no unexpected queue on any communicator of any rank. */
const openMpiLike = [0, 1].map((r) => rank(r, comm('0', r, null), comm('3', r, null)));
/** MPICH's: the unexpected queue shown, and empty. */
const mpichLike = [0, 1].map((r) => rank(r, comm('0', r, [])));

describe('which queue kinds a snapshot could not read', () => {
  it('an Open MPI-like snapshot (unexpected null on every rank): unexpected is not readable, not 0', () => {
    const s = summarize(openMpiLike);
    expect(s.unreadable).toEqual(['unexpected']);
    expect(s.pendingReceives).toBe(4);
  });

  it('an MPICH-like snapshot with no unexpected message: unexpected is 0, and readable', () => {
    const s = summarize(mpichLike);
    expect(s.unexpected).toBe(0);
    expect(s.unreadable).toBeUndefined();
  });

  it('one rank or communicator that shows the queue makes it read; ranks not read tell nothing', () => {
    const shownOnOne = [rank(0, comm('0', 0, null)), rank(1, comm('0', 1, [recv]))];
    expect(summarize(shownOnOne)).toMatchObject({ unexpected: 1 });
    expect(summarize(shownOnOne).unreadable).toBeUndefined();
    expect(summarize([rank(0, comm('0', 0, null), comm('3', 0, []))]).unreadable).toBeUndefined();
    const gone = rankNotRead({ rank: 1, pid: 101, host: 'n1' }, mqdError('MQD_E_NO_SUCH_PID', 'gone'));
    expect(summarize([gone]).unreadable).toBeUndefined();
    expect(summarize([openMpiLike[0] as RankSnapshot, gone]).unreadable).toEqual(['unexpected']);
  });

  it('the kinds cross between instances with the folds; folds of an instance that does not tell them read as all read', async () => {
    const folds = openMpiLike.map(rankFold);
    const decoded = decodeFolds(await encodeFolds(folds, 3));
    expect(decoded).toEqual(folds);
    expect(summaryOf(decoded ?? []).unreadable).toEqual(['unexpected']);
    const old = decodeFolds(deflateRawSync(Buffer.from(JSON.stringify([[0, 'ok', null, '0|ok|', 1, 2, 0]]))));
    expect(old).toHaveLength(1);
    expect(summaryOf(old ?? []).unreadable).toBeUndefined();
  });
});

describe('stored and served', () => {
  const dirs: string[] = [];
  const stores: SqliteStore[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const open = (dataDir: string, migrations = MIGRATIONS) => {
    const s = new SqliteStore({
      dataDir,
      retention: { maxSnapshotsPerJob: 0, maxAgeSeconds: 0 },
      clock: () => 5000,
      migrations,
    });
    stores.push(s);
    return s;
  };
  const job: JobRecord = {
    id: JobId('j1'),
    host: 'n1',
    starterPid: 42,
    starterStartTime: '5000',
    uid: 1000,
    command: 'mpirun -np 2 ./a.out',
    method: 'test',
    ranks: [
      { rank: 0, pid: 100, host: 'n1' },
      { rank: 1, pid: 101, host: 'n1' },
    ],
    createdAt: 1,
    createdBy: 'admin',
    endedAt: null,
  };
  const meta = (id: string, ranks: readonly RankSnapshot[]): SnapshotMeta => ({
    ...summarize(ranks),
    id: SnapshotId(id),
    jobId: job.id,
    takenAt: 4000,
    durationMicros: 10,
    createdBy: 'admin',
    bytes: 2,
    storedBytes: 22,
  });

  it('a stored snapshot keeps its unreadable kinds, the API shows them, a read one has none', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mqd-unreadable-'));
    dirs.push(dir);
    const s = open(dir);
    await s.saveJob(job, { who: 'admin', action: 'attach', jobId: 'j1' });
    for (const [id, ranks] of [
      ['s1', openMpiLike],
      ['s2', mpichLike],
    ] as const) {
      await s.insertSnapshot(
        { meta: meta(id, ranks), gz: gzipSync('{}') },
        { who: 'admin', action: 'snapshot', jobId: 'j1', snapshotId: id },
      );
    }
    const s1 = await s.snapshotMeta('s1');
    const s2 = await s.snapshotMeta('s2');
    expect(s1?.unreadable).toEqual(['unexpected']);
    expect(s2?.unreadable).toBeUndefined();
    expect(s1 && metaJson(s1).unreadable).toEqual(['unexpected']);
    expect(s2 && 'unreadable' in metaJson(s2)).toBe(false);
    const hung = {
      jobId: job.id,
      since: 4000,
      snapshots: 3,
      digest: 'd',
      pendingSends: 0,
      pendingReceives: 4,
      unexpected: 0,
      unreadable: s1?.unreadable ?? [],
      lastSnapshotId: SnapshotId('s1'),
    };
    expect(hungJson(hung).unreadable).toEqual(['unexpected']);
  });

  it('a snapshot stored before the column existed reads as every kind read', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mqd-unreadable-'));
    dirs.push(dir);
    const before = MIGRATIONS.filter((m) => m.version < 11);
    const old = open(dir, before);
    await old.saveJob(job, { who: 'admin', action: 'attach', jobId: 'j1' });
    old.db
      .prepare(
        `INSERT INTO snapshots (id, job_id, taken_at, duration_micros, rank_count, ok_count, error_count,
           missing_count, pending_sends, pending_receives, unexpected_count, digest, missing_ranks, created_by,
           bytes, stored_bytes, data) VALUES ('s0', 'j1', 4000, 10, 2, 2, 0, 0, 0, 4, 0, 'd', '[]', 'admin', 2, 22, x'00')`,
      )
      .run();
    await old.close();
    stores.splice(stores.indexOf(old), 1);
    const now = open(dir);
    const m = await now.snapshotMeta('s0');
    expect(m).toMatchObject({ unexpected: 0, pendingReceives: 4 });
    expect(m?.unreadable).toBeUndefined();
  });
});
