// The hang watch's aggregator side attacked through what users control: two real
// agents over socket.io (fakes.ts' discovery, its reports replaced by what a node would report
// when uid 65534 forges membership) feed a real server's watcher. The user's entries named with
// root's and another user's Slurm job ids (and MQD_WATCH=off) stay entries of uid 65534 across
// nodes: root's and alice's jobs keep their ranks and their watch mode, the counters the
// watcher asks for carry each entry's own uid and only its pids, the opted-out entries are
// never asked or stopped. Users see their own uid's jobs only (a non-admin user mapped to uid 0
// sees none), the watch policy is admins' (403), and the webhook URL is in no answer.
// The real discovery and a real `mqd serve` against real uid-65534 processes are in
// apps/cli/test/watch-attack.test.ts.
import type { ApiFleetJob, DiscoveredJob } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import type { CountersParams } from '../src/shared/seams.js';
import { startSyntheticAgents } from '../src/synthetic/synthetic-agents.js';
import type { Timers } from '../src/watch/watcher.js';
import {
  ADMIN_TOKEN,
  AGENT_TOKEN,
  bodyJson,
  cleanupAfterEach,
  createUser,
  startServer,
  waitFor,
} from './helpers.js';

const cleanup = cleanupAfterEach();
const NOBODY = 65534;
const HOOK_SECRET = 'T000-B000-attack-secret-9d2e';
const HOOK = `https://hooks.example.test/services/${HOOK_SECRET}?token=${HOOK_SECRET}`;
const noTimers: Timers = { setTimeout: () => 0, clearTimeout: () => undefined };

const slurm = (
  id: string,
  uid: number,
  watch: 'on' | 'off',
  ranks: [number, number][],
  extra: Partial<DiscoveredJob> = {},
): DiscoveredJob => ({
  key: `slurm:${id}`,
  kind: 'slurm',
  slurmJob: id,
  uid,
  command: `/home/${uid}/app`,
  startedAt: 1_800_000_000_000,
  partition: 'batch',
  watch,
  ranks: ranks.map(([rank, pid]) => ({ rank, pid, startTime: String(5000 + pid) })),
  ...extra,
});

describe("forged membership at the aggregator (uid 65534 naming root's and alice's jobs)", () => {
  it('keeps one uid per job across nodes, asks counters with each owner only, shows users their uid only', async () => {
    const s = await startServer(
      { watchEnabled: true, watchPeriodSeconds: 60, watchWebhooks: [HOOK] },
      { watchTimers: noTimers, slurm: null },
    );
    cleanup.push(() => s.close());
    const sim = startSyntheticAgents({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      agents: 2,
      ranksPerAgent: 1,
      uid: 1000,
      starterPid: 777,
      hostPrefix: 'wx-',
      discovery: true,
      statusIntervalMs: 50,
    });
    cleanup.push(() => sim.dispose());
    await sim.whenConnected();
    const [n0, n1] = sim.discoveries;
    if (n0 === undefined || n1 === undefined) throw new Error('two agents expected');
    // Node 0: root's Slurm job 4811 (ranks 0, 1) and the user's rank naming the same job and
    // rank 0, opted out. Node 1: the user's rank 1 of "4811" (watch on), alice's job 5000 and
    // the user's rank 0 of "5000", opted out, its partition a forged one.
    n0.jobs = [
      slurm('4811', 0, 'on', [
        [0, 100],
        [1, 101],
      ]),
      slurm('4811', NOBODY, 'off', [[0, 200]], { partition: 'root-only', account: 'admins' }),
    ];
    n1.jobs = [
      slurm('4811', NOBODY, 'on', [[1, 300]]),
      slurm('5000', 1000, 'on', [[0, 400]]),
      slurm('5000', NOBODY, 'off', [[0, 401]], { jobName: 'alice-job' }),
    ];
    const asked: { host: string; ownerUid: number; pids: number[] }[] = [];
    for (const [i, d] of [n0, n1].entries()) {
      const counters = d.counters.bind(d);
      d.counters = async (p: CountersParams) => {
        asked.push({ host: `wx-${i}`, ownerUid: p.ownerUid, pids: p.ranks.map((r) => r.pid) });
        return counters(p);
      };
    }
    const hub = s.app.mqd.hub;
    await waitFor(() => hub.discovered().length === 5, 'both agents reporting the forged entries');
    await s.app.mqd.watcher.tick();

    const fleet = async (authorization: string) => {
      const res = await s.app.inject({ method: 'GET', url: '/api/fleet', headers: { authorization } });
      return { status: res.statusCode, body: bodyJson(res) as { jobs: ApiFleetJob[] }, text: res.body };
    };
    const all = (await fleet(`Bearer ${ADMIN_TOKEN}`)).body.jobs;
    const of = (key: string, uid: number) => all.find((j) => j.key === key && j.uid === uid);
    expect(all).toHaveLength(4);
    expect(of('slurm:4811', 0)).toMatchObject({ watch: 'on', rankCount: 2, nodes: ['wx-0'], samples: 1 });
    expect(of('slurm:4811', 0)?.partition).toBe('batch');
    expect(of('slurm:4811', NOBODY)).toMatchObject({
      watch: 'off-by-job',
      rankCount: 2,
      nodes: ['wx-0', 'wx-1'],
      samples: 0,
      stopMsThisHour: 0,
    });
    expect(of('slurm:5000', 1000)).toMatchObject({ watch: 'on', rankCount: 1, nodes: ['wx-1'], samples: 1 });
    expect(of('slurm:5000', 1000)?.program).not.toBe('alice-job');
    expect(of('slurm:5000', NOBODY)).toMatchObject({ watch: 'off-by-job', samples: 0 });
    // The store jobs behind them: each of its own uid, with only its own pids.
    const pidsOf = async (j: ApiFleetJob | undefined) =>
      (await s.app.mqd.store.job(String(j?.jobId)))?.ranks.map((r) => r.pid).sort((a, b) => a - b);
    expect(await pidsOf(of('slurm:4811', 0))).toEqual([100, 101]);
    expect((await s.app.mqd.store.job(String(of('slurm:4811', 0)?.jobId)))?.uid).toBe(0);
    expect(await pidsOf(of('slurm:5000', 1000))).toEqual([400]);
    // Counters were asked with each job's owner and only its pids; the opted-out user's never.
    expect(asked.sort((a, b) => a.ownerUid - b.ownerUid)).toEqual([
      { host: 'wx-0', ownerUid: 0, pids: [100, 101] },
      { host: 'wx-1', ownerUid: 1000, pids: [400] },
    ]);

    // Users: alice (1000), mallory (65534), and a non-admin user mapped to uid 0.
    const alice = await createUser(s.app, 'alice', 1000);
    const mallory = await createUser(s.app, 'mallory', NOBODY);
    const rooty = await createUser(s.app, 'rooty', 0);
    const keysOf = async (user: { authorization: string }) => {
      const r = await fleet(user.authorization);
      expect(r.status).toBe(200);
      return r.body.jobs.map((j) => `${j.uid}:${j.key}`).sort();
    };
    expect(await keysOf(alice)).toEqual(['1000:slurm:5000']);
    expect(await keysOf(mallory)).toEqual([`${NOBODY}:slurm:4811`, `${NOBODY}:slurm:5000`]);
    expect(await keysOf(rooty)).toEqual([]);
    const policy = {
      enabled: false,
      periodSeconds: 1,
      users: [],
      partitions: [],
      accounts: [],
      stopBudgetMsPerRankHour: 0,
      hungAfterSamples: 2,
    };
    for (const headers of [alice, mallory, rooty]) {
      const get = await s.app.inject({ method: 'GET', url: '/api/admin/watch', headers });
      const set = await s.app.inject({ method: 'POST', url: '/api/admin/watch', headers, payload: policy });
      expect([get.statusCode, set.statusCode]).toEqual([403, 403]);
      expect(set.body).not.toContain(HOOK_SECRET);
    }
    expect(s.app.mqd.watcher.currentPolicy()).toMatchObject({ enabled: true, periodSeconds: 60 });

    // The webhook URL is configuration only: in no answer (fleet, policy, metrics, health).
    const texts = [
      (await fleet(`Bearer ${ADMIN_TOKEN}`)).text,
      (await fleet(mallory.authorization)).text,
      (await s.app.inject({ method: 'GET', url: '/api/admin/watch', headers: s.admin })).body,
      (await s.app.inject({ method: 'GET', url: '/metrics', headers: s.admin })).body,
      (await s.app.inject({ method: 'GET', url: '/api/health' })).body,
    ];
    expect(texts[3]).toMatch(/mqd_job_state/);
    for (const t of texts) {
      expect(t).not.toContain(HOOK_SECRET);
      expect(t).not.toContain('hooks.example.test');
    }
  });
});
