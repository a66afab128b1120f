// The hang watch on a real two-node Slurm: nobody attaches anything. Four sbatch
// jobs run side by side on the network-namespace cluster of packages/testkit (startSlurmRig):
// a ring deadlock over both nodes (ring_ssend, -N2), a job computing outside MPI
// (compute_loop), one that progresses slowly (slow_bcast: rank 0 sleeps, then broadcasts), and
// a ring deadlock that opted out with MQD_WATCH=off. The aggregator watches with a short period;
// its webhook goes to a real HTTP listener in the aggregator's namespace. Exactly the watched
// deadlock is flagged hung, within three samples of its ranks blocking, and told once; the
// share link in the notification opens the snapshot; the opted-out job is never stopped (a
// poller on its ranks' /proc/PID/status never sees a tracer or a stop, and its stop time stays
// 0); jobs that end are marked ended; an agent restarted on a node finds its jobs again.
import type { ApiFleetJob, ApiWatchPolicy } from '@mqd/model';
import {
  done,
  fixtureBinary,
  pending,
  type SlurmJob,
  type SlurmRig,
  slurmAvailable,
  spawnInNetns,
  startSlurmRig,
  traceState,
  untilRanksBlocked,
  waitFor,
} from '@mqd/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const RUN = `mqdwt${process.pid}`;
const ADMIN_TOKEN = `admin-${RUN}-0123456789abcdef`;
const AGENT_TOKEN = `agent-${RUN}-0123456789abcdef`;
const HOSTS = ['node1', 'node2'] as const;
const START_TIMEOUT_MS = 60_000;
/** Inside the aggregator's own namespace: any port is free there. */
const HOOK_PORT = 18_080;
const PERIOD_SECONDS = 2;
const HUNG_AFTER = 3;
const PUBLIC_URL = 'http://mqd.example.test';
const MPI = 'mpich';

/** A webhook receiver: prints every POST body on one line, answers 204. */
const LISTENER = `
const http = require('node:http');
http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (d) => { body += d; });
  req.on('end', () => {
    process.stdout.write('MQD_HOOK ' + JSON.stringify({ path: req.url, type: req.headers['content-type'] ?? '', body }) + '\\n');
    res.statusCode = 204;
    res.end();
  });
}).listen(${HOOK_PORT}, '127.0.0.1', () => process.stdout.write('MQD_HOOK_READY\\n'));
`;

interface Hook {
  readonly path: string;
  readonly type: string;
  readonly body: string;
}

let rig: SlurmRig | null = null;
let hook: ReturnType<typeof spawnInNetns> | null = null;
let poller: ReturnType<typeof setInterval> | null = null;

function theRig(): SlurmRig {
  if (rig === null) throw new Error('the Slurm rig was not started');
  return rig;
}

function hooks(): Hook[] {
  const text = hook?.output() ?? '';
  return [...text.matchAll(/^MQD_HOOK (.*)$/gm)].map((m) => JSON.parse(m[1] ?? '{}') as Hook);
}

async function fleet(): Promise<{ policy: ApiWatchPolicy; jobs: ApiFleetJob[] }> {
  const r = await theRig().served.api<{ policy: ApiWatchPolicy; jobs: ApiFleetJob[] }>('GET', '/api/fleet');
  if (r.status !== 200) throw new Error(`GET /api/fleet: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

const bySlurm = (jobs: readonly ApiFleetJob[], j: SlurmJob) =>
  jobs.find((x) => x.slurmJob === String(j.jobId));

/** Waits until the fleet lists the job and `test` holds for it; returns it then. */
function untilFleet(j: SlurmJob, what: string, test: (x: ApiFleetJob) => boolean): Promise<ApiFleetJob> {
  return waitFor(
    async () => {
      const x = bySlurm((await fleet()).jobs, j);
      return x !== undefined && test(x) ? done(x) : pending(JSON.stringify(x ?? 'not listed'));
    },
    { timeoutMs: START_TIMEOUT_MS * 2, what: `Slurm job ${j.jobId}: ${what}` },
  );
}

beforeAll(async () => {
  if (!slurmAvailable()) throw new Error('MQD_E_PROVISION: Slurm is not installed; run scripts/provision.sh');
  for (const f of ['ring_ssend', 'compute_loop', 'slow_bcast']) fixtureBinary(MPI, f);
  rig = await startSlurmRig({
    run: RUN,
    // The watch samples only this cluster's jobs: the agents see every process on the machine,
    // and another test's hung MPI job (Slurm or not) must neither be stopped nor told about.
    partition: RUN,
    adminToken: ADMIN_TOKEN,
    agentToken: AGENT_TOKEN,
    hosts: HOSTS,
    timeoutMs: START_TIMEOUT_MS,
    serveArgs: [
      '--watch',
      'on',
      '--watch-period',
      String(PERIOD_SECONDS),
      '--watch-hung-after',
      String(HUNG_AFTER),
      // The test's samples on a loaded machine may stop ranks for tens of ms: the budget is not
      // what this test is about (the bench checks it at the default period).
      '--watch-stop-budget',
      '3600000',
      '--watch-partitions',
      RUN,
      '--watch-webhook',
      `http://127.0.0.1:${HOOK_PORT}/hook`,
      '--public-url',
      PUBLIC_URL,
    ],
  });
  hook = spawnInNetns('webhook listener', theRig().cluster.aggregatorNetns, [
    process.execPath,
    '-e',
    LISTENER,
  ]);
  await hook.waitForOutput(/MQD_HOOK_READY/, START_TIMEOUT_MS);
}, 120_000);

afterAll(async () => {
  if (poller !== null) clearInterval(poller);
  await hook?.kill();
  await rig?.dispose();
}, 60_000);

describe('the hang watch on a two-node Slurm cluster', () => {
  let ring: SlurmJob;
  let compute: SlurmJob;
  let slow: SlurmJob;
  let optedOut: SlurmJob;
  /** Every status line the poller read of the opted-out job's ranks that shows a tracer or a stop. */
  const stopsSeen: string[] = [];
  let polls = 0;

  it('flags exactly the deadlocked job hung within three samples, and tells once with a working link', async () => {
    const r = theRig();
    [ring, compute, slow, optedOut] = await Promise.all([
      r.submit({ mpi: MPI, fixture: 'ring_ssend', nodes: 2, np: 4, timeoutMs: START_TIMEOUT_MS }),
      r.submit({ mpi: MPI, fixture: 'compute_loop', np: 2, env: { MQD_COMPUTE_SECONDS: '1800' } }),
      r.submit({ mpi: MPI, fixture: 'slow_bcast', np: 2, env: { MQD_SLOW_MS: '1500' } }),
      r.submit({ mpi: MPI, fixture: 'ring_ssend', np: 2, env: { MQD_WATCH: 'off' } }),
    ]);
    // A poller on the opted-out ranks for the rest of the file: any tracer or stop is recorded.
    poller = setInterval(() => {
      polls++;
      for (const { pid } of optedOut.ranks) {
        const t = traceState(pid);
        if (t !== undefined && (t.tracerPid !== 0 || /^[tT]/.test(t.state)))
          stopsSeen.push(JSON.stringify(t));
      }
    }, 25);

    await untilRanksBlocked(ring.ranks, () => 'MPI_Ssend', START_TIMEOUT_MS);
    const before = await untilFleet(ring, 'listed with its 4 ranks on both nodes', (x) => x.rankCount === 4);
    expect(before.nodes).toEqual([...HOSTS]);
    expect(before.kind).toBe('slurm');
    expect(before.program).toBe('ring_ssend');
    expect(before.watch).toBe('on');
    const hung = await untilFleet(ring, 'hung', (x) => x.state === 'hung');
    // Blocked before sample `before.samples + 1` at the latest: hung by three samples after it.
    expect(hung.samples - before.samples).toBeLessThanOrEqual(HUNG_AFTER);
    expect(hung.leastProgressed).toBe('');
    expect(hung.diagnosis).toMatch(/^Deadlock: ranks 0-3 wait in MPI_Ssend/);
    expect(hung.since).not.toBeNull();
    expect(hung.snapshotId).not.toBeNull();

    const told = await waitFor(() => (hooks().length > 0 ? done(hooks()) : pending('no webhook yet')), {
      timeoutMs: START_TIMEOUT_MS,
      what: 'the webhook for the hung job',
    });
    expect(told).toHaveLength(1);
    const first = told[0] as Hook;
    expect(first.path).toBe('/hook');
    expect(first.type).toMatch(/^application\/json/);
    const body = JSON.parse(first.body) as {
      text: string;
      mqd: { slurmJob: string; state: string; leastProgressed: string; diagnosis: string; link: string };
    };
    expect(body.mqd).toMatchObject({ slurmJob: String(ring.jobId), state: 'hung', leastProgressed: '' });
    expect(body.text).toContain('hung');
    expect(body.text).toContain(body.mqd.link);
    // The link opens the snapshot that shows the hang.
    const id = new RegExp(`^${PUBLIC_URL}/s/([A-Za-z0-9_-]+)$`).exec(body.mqd.link)?.[1];
    expect(id, body.mqd.link).toBeDefined();
    const shared = await r.served.api<{
      snapshot: { ranks: Array<{ rank: number; mpiCall?: { function: string } }> };
    }>('GET', `/api/shared/${id}`);
    expect(shared.status).toBe(200);
    expect(shared.body.snapshot.ranks.map((x) => [x.rank, x.mpiCall?.function])).toEqual(
      [0, 1, 2, 3].map((k) => [k, 'MPI_Ssend']),
    );

    // Three more samples of everything: still one notification; the other jobs never hung.
    await untilFleet(ring, 'three more samples', (x) => x.samples >= hung.samples + 3);
    expect(hooks()).toHaveLength(1);
    const all = (await fleet()).jobs;
    const c = bySlurm(all, compute);
    const s = bySlurm(all, slow);
    expect(c?.watch).toBe('on');
    expect(s?.watch).toBe('on');
    expect(c?.samples).toBeGreaterThanOrEqual(HUNG_AFTER);
    expect(s?.samples).toBeGreaterThanOrEqual(HUNG_AFTER);
    expect(c?.history.map((h) => h.state)).not.toContain('hung');
    expect(s?.history.map((h) => h.state)).not.toContain('hung');
    expect(c?.state).toBe('computing');
    expect(['waiting', 'progressing']).toContain(s?.state);
    // The opted-out deadlock: listed, not watched, never stopped.
    const o = bySlurm(all, optedOut);
    expect(o?.watch).toBe('off-by-job');
    expect(o?.state).toBe('unknown');
    expect(o?.stopMsThisHour).toBe(0);
    expect(o?.snapshotId).toBeNull();
    expect(polls).toBeGreaterThan(10);
    expect(stopsSeen).toEqual([]);
  });

  it('finds its jobs again after an agent restart, and marks a job that ends', async () => {
    const r = theRig();
    const listed = bySlurm((await fleet()).jobs, ring);
    const node2 = r.agents[1];
    if (node2 === undefined || listed === undefined)
      throw new Error('no agent on node2, or the ring is not listed');
    await node2.kill();
    const again = r.onNode('agent on node2, again', 'node2', r.served.agentCommand(r.cluster.node('node2')));
    await r.served.untilConnected(again, 'node2', START_TIMEOUT_MS);
    const back = await untilFleet(ring, 'both nodes again', (x) => x.nodes.length === 2 && x.rankCount === 4);
    expect(back.key).toBe(listed.key);
    expect(back.jobId).toBe(listed.jobId);

    r.slurm.run('scancel', ['--signal=KILL', '--full', String(compute.jobId)]);
    const ended = await untilFleet(compute, 'ended', (x) => x.endedAt !== null);
    expect(ended.state).not.toBe('hung');

    // The watch turned off by an admin: once a read in flight ends, nothing is left traced or stopped.
    const policy = (await fleet()).policy;
    const off = await r.served.api<ApiWatchPolicy>('POST', '/api/admin/watch', { ...policy, enabled: false });
    expect(off.status, JSON.stringify(off.body)).toBe(200);
    expect(off.body.enabled).toBe(false);
    const ranks = [ring, slow, optedOut].flatMap((j) => j.ranks);
    const left = await waitFor(
      () => {
        const traced = ranks.filter((x) => {
          const t = traceState(x.pid);
          return t === undefined || t.tracerPid !== 0 || /^[tT]/.test(t.state);
        });
        return traced.length === 0 ? done(traced) : pending(JSON.stringify(traced));
      },
      { timeoutMs: 15_000, what: 'every rank running, untraced, after the watch was turned off' },
    );
    expect(left).toEqual([]);
    expect(stopsSeen).toEqual([]);
  });
});
