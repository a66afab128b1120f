// Several aggregators as a site runs them: two `mqd serve` processes on one real
// PostgreSQL 15 and Debian's haproxy in front (testkit startCluster), a
// real `mqd agent` that connects through haproxy, and a real hung MPI job (wrong_tag). The
// server paths are not about the MPI library: one build.
//   - a snapshot asked of the instance that does not hold the agent is read through the other;
//   - kill -9 of the instance holding the agent while a snapshot is asked of the other: the
//     agent reconnects through haproxy, the snapshot finishes with every rank read, and a retry
//     with the same Idempotency-Key gets that same snapshot (stored once);
//   - PostgreSQL stopped: requests through haproxy get a coded 503 (MQD_E_STORE_UNAVAILABLE),
//     and after it is back everything resumes by itself, a new instance's forwarded snapshot too.
// Every process is started here and ended by its pid, also when a test fails.
import { hostname } from 'node:os';
import { normaliseHost } from '@mqd/mpir';
import { hostAgentToken } from '@mqd/server';
import {
  type Cluster,
  type ClusterInstance,
  done,
  type HungCluster,
  haproxyAvailable,
  MPI_NAMES,
  pending,
  postgresAvailable,
  startHungCluster,
  waitFor,
} from '@mqd/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ADMIN = 'admin-token-for-the-cluster-test-0123456789';
const SECRET = 'agent-secret-for-the-cluster-test-0123456789';
const HOST = normaliseHost(hostname());
const MPI = MPI_NAMES[0];

let hung: HungCluster | null = null;

function theCluster(): Cluster {
  if (hung === null) throw new Error('the cluster did not start (beforeAll failed?)');
  return hung.cluster;
}

beforeAll(async () => {
  hung = await startHungCluster({
    names: ['a', 'b'],
    adminToken: ADMIN,
    agentSecret: SECRET,
    mpi: MPI,
    host: HOST,
    agentToken: hostAgentToken(SECRET, HOST),
  });
}, 180_000);

afterAll(async () => {
  await hung?.stop();
}, 60_000);

describe.runIf(postgresAvailable() && haproxyAvailable())(`${MPI}: two aggregators behind haproxy`, () => {
  it('reads through the other instance, survives kill -9 of the agent’s instance, and PostgreSQL going away', async () => {
    const c = theCluster();
    const lb = c.haproxy.url;
    const api = c.api;
    // The agent is connected to one of the two, through haproxy; both know which.
    const holder = await c.waitForHolder(HOST);
    const other = c.instances.find((i) => i !== holder) as ClusterInstance;

    const att = await api<{ job: { id: string; rankCount: number } }>(lb, 'POST', '/api/jobs/attach', {
      host: HOST,
      starterPid: hung?.job.starterPid,
    });
    expect(att.status, att.text).toBe(201);
    expect(att.body.job.rankCount).toBe(4);
    const jobId = att.body.job.id;

    // Asked of the instance without the agent: read through the holder, every rank ok.
    const first = await api<{ snapshot: { id: string; ok: number } }>(
      other.url,
      'POST',
      `/api/jobs/${jobId}/snapshots`,
    );
    expect(first.status, first.text).toBe(201);
    expect(first.body.snapshot.ok).toBe(4);

    // kill -9 of the holder while the other instance is asked for a snapshot.
    const key = `cluster-test-${process.pid}-1`;
    const asked = api<{ snapshot: { id: string; ok: number; missing: number } }>(
      other.url,
      'POST',
      `/api/jobs/${jobId}/snapshots`,
      undefined,
      { 'idempotency-key': key },
    );
    holder.kill9();
    const second = await asked;
    expect(second.status, second.text).toBe(201);
    expect(second.body.snapshot).toMatchObject({ ok: 4, missing: 0 });
    // The agent is now on the surviving instance (it reconnected through haproxy).
    expect(await c.holderOf(HOST, other.url)).toBe(other.id);
    // The same key again: the same snapshot, not a second one.
    const again = await api<{ snapshot: { id: string } }>(
      other.url,
      'POST',
      `/api/jobs/${jobId}/snapshots`,
      undefined,
      {
        'idempotency-key': key,
      },
    );
    expect(again.body.snapshot.id).toBe(second.body.snapshot.id);
    const history = await api<{ snapshots: { id: string }[] }>(lb, 'GET', `/api/jobs/${jobId}/snapshots`);
    expect(history.body.snapshots.map((x) => x.id).sort()).toEqual(
      [first.body.snapshot.id, second.body.snapshot.id].sort(),
    );

    // A new instance (asked directly, not through haproxy) reads through the survivor.
    const fresh = await c.addInstance('c');
    await waitFor(async () => ((await c.holderOf(HOST, fresh.url)) === null ? pending() : done(true)), {
      timeoutMs: 30_000,
      what: 'the new instance to learn where the agent is',
    });

    // PostgreSQL goes away: a coded 503 through haproxy, then everything resumes by itself.
    await c.pg.down();
    const during = await api<{ code: string; message: string }>(lb, 'GET', '/api/jobs');
    expect(during.status, during.text).toBe(503);
    expect(during.body.code).toBe('MQD_E_STORE_UNAVAILABLE');
    // The database's address (a socket path here, a host at a site) is not told to clients.
    expect(during.text).not.toContain(c.pg.dir);
    await c.pg.up();
    await waitFor(async () => ((await api(lb, 'GET', '/api/jobs')).status === 200 ? done(true) : pending()), {
      timeoutMs: 60_000,
      what: 'requests to work again after PostgreSQL came back',
    });
    // The instances speak again through the database: the new one reads through the survivor.
    const third = await waitFor(
      async () => {
        const r = await api<{ snapshot: { id: string; ok: number } }>(
          fresh.url,
          'POST',
          `/api/jobs/${jobId}/snapshots`,
        );
        return r.status === 201 && r.body.snapshot.ok === 4
          ? done(r)
          : pending(`${r.status} ${r.text.slice(0, 200)}`);
      },
      { timeoutMs: 60_000, what: 'a forwarded snapshot after PostgreSQL came back' },
    );
    expect(third.body.snapshot.ok).toBe(4);
  });
});
