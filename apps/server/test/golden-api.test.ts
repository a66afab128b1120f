// The API over the golden snapshots (recorded from real Open MPI and MPICH jobs, see
// packages/testkit/src/golden.ts): each one served by a fixed-snapshot agent, attached and
// snapshotted through the REST API, comes back through GET /api/snapshots/:id exactly as the
// library gave it (only pid and host are the request's), decoded by the spec's decoder the
// browser uses, and the job's list entry summarises it truthfully.
import { readFileSync } from 'node:fs';
import { decodeResponse, type JobSnapshot } from '@mqd/model';
import { goldenFile, listGolden } from '@mqd/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import { createFakeLocator, createFixedReader } from '../src/synthetic/fakes.js';
import { AGENT_TOKEN, json, startServer, type TestServer } from './helpers.js';

let s: TestServer;
beforeAll(async () => {
  // Every golden of every build through one server, two expensive requests each: above the
  // default per-minute limit, which is not what this file tests (security.test.ts does).
  s = await startServer({ rateLimitMax: 4 * listGolden().length });
});
afterAll(async () => {
  await s.close();
});

describe.each(listGolden())('%s %s through the API', (mpi, fixture) => {
  it('is stored and served as read, and summarised from its queues', async () => {
    const golden = JSON.parse(readFileSync(goldenFile(mpi, fixture, 'snapshot.json'), 'utf8')) as JobSnapshot;
    const host = `${mpi}-${fixture}`.replaceAll('_', '-');
    const starterPid = 7000 + listGolden().findIndex(([m, f]) => m === mpi && f === fixture);
    const agent = startAgent({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      host,
      reader: createFixedReader(golden),
      locator: createFakeLocator({
        starterPid,
        uid: 1000,
        command: `mpirun -np 4 ./${fixture}`,
        hosts: [host],
        ranksPerHost: golden.ranks.length,
        basePid: 10_000,
      }),
    });
    try {
      await agent.whenConnected();
      const attach = await s.app.inject({
        method: 'POST',
        url: '/api/jobs/attach',
        headers: s.admin,
        payload: { host, starterPid },
      });
      expect(attach.statusCode, attach.body).toBe(201);
      const jobId = json<{ job: { id: string } }>(attach).job.id;
      const taken = await s.app.inject({
        method: 'POST',
        url: `/api/jobs/${jobId}/snapshots`,
        headers: s.admin,
      });
      expect(taken.statusCode, taken.body).toBe(201);

      const list = await s.app.inject({
        method: 'GET',
        url: `/api/jobs/${jobId}/snapshots`,
        headers: s.admin,
      });
      const entries = decodeResponse('jobSnapshots', JSON.parse(list.body));
      expect(entries.ok ? 'decoded' : entries.error.message).toBe('decoded');
      if (!entries.ok) return;
      const entry = entries.value.snapshots[0];
      const count = (q: 'sends' | 'receives' | 'unexpected') =>
        golden.ranks.reduce(
          (n, r) =>
            n +
            r.communicators.reduce(
              (m, c) => m + (c[q]?.filter((o) => o.status === 'pending').length ?? 0),
              0,
            ),
          0,
        );
      expect(entry).toMatchObject({ ranks: golden.ranks.length, ok: golden.ranks.length, missing: 0 });
      expect([entry?.pendingSends, entry?.pendingReceives]).toEqual([count('sends'), count('receives')]);

      const got = await s.app.inject({ method: 'GET', url: `/api/snapshots/${entry?.id}`, headers: s.admin });
      const decoded = decodeResponse('snapshot', JSON.parse(got.body));
      expect(decoded.ok ? 'decoded' : decoded.error.message).toBe('decoded');
      if (!decoded.ok) return;
      const served = decoded.value.snapshot;
      expect(served.mpi).toEqual(golden.mpi);
      expect(served.ranks).toEqual(golden.ranks.map((r) => ({ ...r, pid: 10_000 + r.rank, host })));
    } finally {
      await agent.dispose();
    }
  });
});
