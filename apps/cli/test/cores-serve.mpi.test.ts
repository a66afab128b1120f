// A job's cores opened through the real aggregator and its in-process agent (real locator:
// the directory's rank-N.core files and their notes; real reader: Snapshotter.snapshotCores):
// a hung Open MPI job is snapshotted live, gdb's gcore writes one core per rank, the job is
// killed, and the directory attached as a job gives the same queues (equal digests) with
// `source` naming the cores. Every job is disposed even when the test fails.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { JobSnapshot } from '@mqd/model';
import { loadConfig } from '@mqd/server';
import { disposeAll, type FixtureJob, launchFixture } from '@mqd/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { type LocalServe, serveWithLocalAgent } from '../src/local-serve.js';

const ADMIN = 'admin-token-for-the-cores-serve-test-0123';
let local: LocalServe | null = null;
let job: FixtureJob | null = null;
const root = mkdtempSync('/tmp/mqd-cores-serve-');

afterAll(async () => {
  await local?.close();
  await job?.dispose();
  await disposeAll();
  rmSync(root, { recursive: true, force: true });
});

/** gdb's gcore of each rank into dir/rank-N.core. */
export function gcoreRanks(j: FixtureJob, dir: string): void {
  mkdirSync(dir, { recursive: true });
  for (const r of j.ranks) {
    execFileSync(
      'gdb',
      ['-batch', '-nx', '-p', String(r.pid), '-ex', `gcore ${join(dir, `rank-${r.rank}.core`)}`],
      {
        stdio: 'ignore',
        timeout: 120_000,
      },
    );
  }
}

describe('a directory of cores through mqd serve', () => {
  it('gives the live snapshot of the job the cores were taken from', async () => {
    job = await launchFixture({ mpi: 'openmpi', fixture: 'wrong_tag', np: 2 });
    const cfg = loadConfig({
      env: {},
      argv: ['--core-dir', root],
      overrides: { port: 0, host: '127.0.0.1', dataDir: ':memory:', adminToken: ADMIN },
    });
    if (!cfg.ok) throw new Error(cfg.error.message);
    local = await serveWithLocalAgent(cfg.value);
    const url = local.served.url;
    const auth = { authorization: `Bearer ${ADMIN}` };
    const post = async (path: string, body?: object) => {
      const r = await fetch(`${url}${path}`, {
        method: 'POST',
        headers: body ? { ...auth, 'content-type': 'application/json' } : auth,
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
    const snapshotOf = async (jobId: string) => {
      const taken = await post(`/api/jobs/${jobId}/snapshots`);
      expect(taken.status, JSON.stringify(taken.body)).toBe(201);
      const meta = taken.body['snapshot'] as { id: string; digest: string; ok: number };
      const full = await fetch(`${url}/api/snapshots/${meta.id}/export`, { headers: auth });
      return { meta, snapshot: (await full.json()) as JobSnapshot };
    };

    const live = await post('/api/jobs/attach', { starterPid: job.starterPid });
    expect(live.status, JSON.stringify(live.body)).toBe(201);
    const before = await snapshotOf((live.body['job'] as { id: string }).id);
    expect(before.meta.ok, JSON.stringify(before.snapshot.ranks.map((r) => r.state))).toBe(2);

    const dir = join(root, 'wrong_tag');
    gcoreRanks(job, dir);
    const pids = job.ranks.map((r) => r.pid);
    await job.dispose();
    job = null;

    const attached = await post('/api/jobs/attach', { coresDir: dir });
    expect(attached.status, JSON.stringify(attached.body)).toBe(201);
    const cj = attached.body['job'] as { id: string; method: string; rankCount: number; coresDir: string };
    expect(cj).toMatchObject({ method: 'cores', rankCount: 2, coresDir: dir });
    const after = await snapshotOf(cj.id);
    expect(after.snapshot.ranks.map((r) => [r.rank, r.state.kind])).toEqual([
      [0, 'ok'],
      [1, 'ok'],
    ]);
    // The same queues as the live read (the digest leaves out pause times).
    expect(after.meta.digest).toBe(before.meta.digest);
    expect(after.snapshot.source?.kind).toBe('core');
    expect(after.snapshot.source?.cores.map((c) => [c.rank, c.pid, c.path])).toEqual(
      pids.map((pid, rank) => [rank, pid, join(dir, `rank-${rank}.core`)]),
    );

    // A manifest naming a FIFO: refused without opening it (opening would block the agent).
    const fifoDir = join(root, 'fifo');
    mkdirSync(fifoDir);
    execFileSync('mkfifo', [join(fifoDir, 'rank-0.core')]);
    writeFileSync(
      join(fifoDir, 'manifest.json'),
      JSON.stringify({
        format: 'mqd-capture/1',
        capturedAt: new Date().toISOString(),
        host: 'here',
        starterPid: null,
        ranks: [{ rank: 0, pid: 5, core: 'rank-0.core', executable: '/bin/x', bytes: 0 }],
        failed: [],
      }),
    );
    const fifo = await post('/api/jobs/attach', { coresDir: fifoDir });
    expect(fifo.status, JSON.stringify(fifo.body)).toBe(422);
    expect(fifo.body['code']).toBe('MQD_E_CORE_INVALID');

    // Outside the allowed root: refused with the code whose hint names --core-dir.
    const outside = await post('/api/jobs/attach', { coresDir: '/tmp' });
    expect(outside.status).toBe(403);
    expect(outside.body['code']).toBe('MQD_E_CORE_DIR_FORBIDDEN');
  });
});
