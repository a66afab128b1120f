// The aggregator with its in-process agent (real reader and MPIR locator) on real hung jobs:
// attach by starter pid over REST, snapshot, and the stored job snapshot must equal what
// mqd-core reports directly.
import { hostname } from 'node:os';
import { Snapshotter } from '@mqd/core';
import type { JobSnapshot } from '@mqd/model';
import { normaliseHost } from '@mqd/mpir';
import { loadConfig } from '@mqd/server';
import { disposeAll, type FixtureJob, launchFixture, MPI_NAMES } from '@mqd/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { type LocalServe, serveWithLocalAgent } from '../src/local-serve.js';

const ADMIN = 'admin-token-for-the-serve-test-0123456789';
let job: FixtureJob | null = null;
let local: LocalServe | null = null;
afterEach(async () => {
  await local?.close();
  await job?.dispose();
  local = null;
  job = null;
});
afterAll(() => disposeAll());

// Between two stops a blocked rank's queues and MPI call stay, but its innermost frames move
// (MPI's progress loop polls): compare each thread's outer frames from the MPI call out.
const stable = (s: JobSnapshot) =>
  s.ranks.map(({ threads, ...r }) => ({
    ...r,
    pausedMicros: r.pausedMicros === null ? null : 0,
    threads: threads?.map((t) => ({
      tid: t.tid,
      outer: t.frames
        .slice(
          Math.max(
            0,
            t.frames.findIndex((f) => /^P?MPI_[A-Z]/.test(f.function ?? '')),
          ),
        )
        .map((f) => f.function),
    })),
  }));

// The server and the agent's REST path are not the library's: one build. The agent's
// locator and reader under each MPI are locate-owner and the mqd-core tests'.
describe.each(MPI_NAMES.slice(0, 1))('%s: aggregator + agent on a real hung job', (mpi) => {
  it('attaches by starter pid and stores the snapshot mqd-core reports', async () => {
    job = await launchFixture({ mpi, fixture: 'wrong_tag', np: 4 });
    const cfg = loadConfig({
      env: {},
      argv: [],
      overrides: { port: 0, host: '127.0.0.1', dataDir: ':memory:', adminToken: ADMIN },
    });
    if (!cfg.ok) throw new Error(cfg.error.message);
    local = await serveWithLocalAgent(cfg.value);
    const served = local.served;
    const auth = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
    const attach = await fetch(`${served.url}/api/jobs/attach`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ starterPid: job.starterPid }),
    });
    expect(attach.status, await attach.clone().text()).toBe(201);
    const jobId = ((await attach.json()) as { job: { id: string } }).job.id;
    const snap = await fetch(`${served.url}/api/jobs/${jobId}/snapshots`, {
      method: 'POST',
      headers: { authorization: auth.authorization },
    });
    expect(snap.status).toBe(201);
    const { snapshot } = (await snap.json()) as { snapshot: { id: string; snapshot: JobSnapshot } };
    const stored = await fetch(`${served.url}/api/snapshots/${snapshot.id}`, {
      headers: { authorization: auth.authorization },
    });
    const viaApi = ((await stored.json()) as { snapshot: JobSnapshot }).snapshot;
    expect(viaApi.ranks.map((r) => [r.rank, r.pid, r.state.kind])).toEqual(
      job.ranks.map((r) => [r.rank, r.pid, 'ok']),
    );

    const direct = new Snapshotter();
    try {
      const { snapshot: mine } = await direct.snapshot(
        job.ranks.map((r) => ({ pid: r.pid, rank: r.rank, host: normaliseHost(hostname()) })),
      );
      expect(stable(viaApi)).toEqual(stable(mine));
      expect(viaApi.mpi).toEqual(mine.mpi);
    } finally {
      await direct.dispose();
    }
  });
});
