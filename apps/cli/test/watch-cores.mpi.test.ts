// The hang watch keeps a hung job's cores (`--watch-capture-cores on`): `mqd
// serve` with its in-process agent (real discovery, real reader) watches a real MPICH ring of
// MPI_Ssend that nobody attaches; when the job is hung the agent writes one core per rank and
// the manifest into a subdirectory of the --core-dir as the job's owner (capture-watch.ts), lets
// the ranks go, and the fleet shows where. After the job is killed the directory opens as a job
// (attach {coresDir}) and its snapshot, read from the cores, shows the ranks in MPI_Ssend.
// Every job is disposed and the directory removed even when the test fails.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { ApiFleetJob, JobSnapshot } from '@mqd/model';
import { loadConfig } from '@mqd/server';
import { disposeAll, done, type FixtureJob, launchFixture, pending, waitFor } from '@mqd/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { type LocalServe, serveWithLocalAgent } from '../src/local-serve.js';

const ADMIN = 'admin-token-for-the-watch-cores-test-0123';
let local: LocalServe | null = null;
let job: FixtureJob | null = null;
const root = mkdtempSync('/tmp/mqd-watch-cores-');

afterAll(async () => {
  await local?.close();
  await job?.dispose();
  await disposeAll();
  rmSync(root, { recursive: true, force: true });
});

/** /proc/PID/status TracerPid: 0 when nothing traces the process. */
const tracerOf = (pid: number): number =>
  Number(/^TracerPid:\s*(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? -1);

describe('the hang watch keeps cores of a hung job', () => {
  it('writes one core per rank and the manifest as the owner; the cores open as a job after the job is gone', async () => {
    job = await launchFixture({ mpi: 'mpich', fixture: 'ring_ssend', np: 2 });
    const cfg = loadConfig({
      env: {},
      argv: [
        '--watch',
        'on',
        '--watch-period',
        '1',
        '--watch-hung-after',
        '2',
        '--watch-capture-cores',
        'on',
        '--core-dir',
        root,
        // Only this test's ring: other hung jobs on the machine are not the test's to core.
        '--watch-programs',
        job.binary,
      ],
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
    const starter = job.starterPid;
    // Other runs' jobs may be listed too: ours is the one its starter's pid names.
    const ours = await waitFor(
      async () => {
        const r = await fetch(`${url}/api/fleet`, { headers: auth });
        const f = (await r.json()) as { jobs: ApiFleetJob[] };
        const j = f.jobs.find((x) => x.key.includes(`:${starter}:`) && x.endedAt === null);
        if (j === undefined) return pending('the job is not in the fleet yet');
        if (j.state !== 'hung' || j.cores == null)
          return pending(`state ${j.state}, cores ${JSON.stringify(j.cores)}`);
        return done(j);
      },
      { timeoutMs: 90_000, maxIntervalMs: 500, what: 'the watch to find the job hung and keep its cores' },
    );
    const cores = ours.cores;
    if (cores == null) throw new Error('no cores');
    expect(cores.dirs).toHaveLength(1);
    const dir = cores.dirs[0]?.dir ?? '';
    expect(cores.dirs[0]?.error).toBeNull();
    expect(dir.startsWith(`${root}/watch-starter-`)).toBe(true);
    expect(cores.ranks.map((r) => [r.rank, r.core, r.error])).toEqual([
      [0, 'rank-0.core', null],
      [1, 'rank-1.core', null],
    ]);
    // The ranks were let go: nothing traces them after the capture.
    for (const r of job.ranks) expect(tracerOf(r.pid), `rank ${r.rank}`).toBe(0);

    // One core per rank plus the manifest, every file the job owner's.
    expect(readdirSync(dir).sort()).toEqual(['manifest.json', 'rank-0.core', 'rank-1.core']);
    const owner = statSync(`/proc/${job.ranks[0]?.pid}`).uid;
    for (const f of ['', 'manifest.json', 'rank-0.core', 'rank-1.core'])
      expect(statSync(join(dir, f)).uid, f || dir).toBe(owner);
    const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as {
      format: string;
      ranks: { rank: number; pid: number; core: string; bytes: number }[];
    };
    expect(manifest.format).toBe('mqd-capture/1');
    expect(manifest.ranks.map((r) => [r.rank, r.pid, r.core])).toEqual(
      job.ranks.map((r) => [r.rank, r.pid, `rank-${r.rank}.core`]),
    );
    for (const r of manifest.ranks) {
      expect(statSync(join(dir, r.core)).size).toBe(r.bytes);
      expect(cores.ranks.find((x) => x.rank === r.rank)?.bytes).toBe(r.bytes);
    }

    // The job is gone; its cores open as a job and show where every rank was.
    await job.dispose();
    job = null;
    const attached = await post('/api/jobs/attach', { coresDir: dir });
    expect(attached.status, JSON.stringify(attached.body)).toBe(201);
    const cj = attached.body['job'] as { id: string; method: string; rankCount: number };
    expect(cj).toMatchObject({ method: 'cores', rankCount: 2 });
    const taken = await post(`/api/jobs/${cj.id}/snapshots`);
    expect(taken.status, JSON.stringify(taken.body)).toBe(201);
    const meta = taken.body['snapshot'] as { id: string };
    const full = await fetch(`${url}/api/snapshots/${meta.id}/export`, { headers: auth });
    const snap = (await full.json()) as JobSnapshot;
    expect(snap.source?.kind).toBe('core');
    expect(snap.ranks.map((r) => [r.rank, r.state.kind, r.mpiCall?.function.replace(/^P/, '')])).toEqual([
      [0, 'ok', 'MPI_Ssend'],
      [1, 'ok', 'MPI_Ssend'],
    ]);
  }, 240_000);
});
