// The hang watch keeps cores of a hung job (policy captureCores): once per
// hang episode each node's agent is asked to capture its ranks (the `capture` request), the
// result shows in the fleet and in the webhook's text; never with the policy off; an agent
// without a core directory refuses and the fleet says why; the flag is refused without
// --core-dir. The agents are fakes (the real capture: apps/cli/test/watch-cores.mpi.test.ts).
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type ApiFleetJob,
  type DiscoveredJob,
  decodeResponse,
  err,
  type JobSnapshot,
  type MqdError,
  mqdError,
  ok,
  type Result,
  syntheticStacksJob,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import type { SnapshotHub } from '../src/fanout/fanout.js';
import { loadConfig, watchPolicyOf } from '../src/http/config.js';
import { decodeServerMessage } from '../src/protocol/agent-protocol-decode.js';
import type { CaptureAgents, CaptureReply } from '../src/watch/capture.js';
import type { CountersReply, CounterTarget, WatchAgents } from '../src/watch/source.js';
import type { Timers } from '../src/watch/watcher.js';
import { bodyJson, cleanupAfterEach, startServer, waitFor } from './helpers.js';

const cleanup = cleanupAfterEach();
const PERIOD_S = 60;
const T0 = 1_800_000_000_000;

/** A ring deadlock of 4 ranks of uid 1000 on two nodes: ranks 0,1 on n1, 2,3 on n2. */
const LAYOUT: Record<string, { rank: number; pid: number }[]> = {
  n1: [
    { rank: 0, pid: 100 },
    { rank: 1, pid: 101 },
  ],
  n2: [
    { rank: 2, pid: 200 },
    { rank: 3, pid: 201 },
  ],
};
const JOB: Omit<DiscoveredJob, 'ranks'> = {
  key: 'slurm:101',
  kind: 'slurm',
  slurmJob: '101',
  uid: 1000,
  command: '/home/alice/ring',
  startedAt: T0 - 3_600_000,
  jobName: 'ring',
  watch: 'on',
};
const ring = (): JobSnapshot => syntheticStacksJob({ ranks: 4, scenario: 'ssend-ring' });
/** The ring after it moved on: every rank outside MPI, at a line that changes each read. */
const moving = (n: number): JobSnapshot => {
  const s = ring();
  return {
    ...s,
    ranks: s.ranks.map((r) => ({
      ...r,
      mpiCall: null,
      threads: [
        {
          tid: r.pid,
          name: 'app',
          main: true,
          truncated: false,
          error: null,
          frames: [
            { pc: '0x1', function: 'kernel', module: '/a', file: 'a.c', line: 100 + n, inlined: false },
            { pc: '0x2', function: 'main', module: '/a', file: 'a.c', line: 20, inlined: false },
          ],
        },
      ],
    })),
  };
};

interface CaptureCall {
  readonly host: string;
  readonly ranks: CounterTarget[];
  readonly ownerUid: number;
  readonly name: string;
}

/** The agents, faked, with or without the capture request; every capture asked is recorded. */
class FakeAgents implements WatchAgents, CaptureAgents {
  reads = 0;
  /** The job is hung (true) or computing with moving stacks (false). */
  hung = true;
  readonly captures: CaptureCall[] = [];
  /** What an agent answers: a directory under /cores, or this error (no core dir). */
  refuse: MqdError | null = null;
  discovered() {
    return Object.entries(LAYOUT).map(([host, ranks]) => ({
      host,
      job: { ...JOB, ranks: ranks.map((r) => ({ ...r, startTime: String(1000 + r.pid) })) },
      at: T0,
    }));
  }
  isConnected(host: string): boolean {
    return host in LAYOUT;
  }
  async counters(_host: string, req: { ranks: CounterTarget[] }): Promise<Result<CountersReply>> {
    return ok({
      ranks: req.ranks.map((r) => ({
        rank: r.rank,
        cpuTicks: this.hung ? 10 : this.reads * 6000,
        switches: 5,
        state: this.hung ? 'S' : 'R',
      })),
      errors: [],
      clockTicksPerSecond: 100,
      at: 0,
    });
  }
  async capture(
    host: string,
    req: { ranks: CounterTarget[]; ownerUid: number; name: string },
  ): Promise<Result<CaptureReply>> {
    this.captures.push({ host, ...req });
    if (this.refuse !== null) return err(this.refuse);
    return ok({
      dir: `/cores/${req.name}`,
      ranks: req.ranks.map((r) => ({
        rank: r.rank,
        pid: r.pid,
        core: `rank-${r.rank}.core`,
        bytes: 1000 + r.rank,
        pausedMicros: 250_000,
        error: null,
      })),
    });
  }
  readonly hub: SnapshotHub = {
    seenStarters: () => [],
    isConnected: (host) => host in LAYOUT,
    snapshot: async (host, targets, _timeout, onRanks) => {
      if (host === 'n1') this.reads++;
      const snap = this.hung ? ring() : moving(this.reads);
      const ranks = targets.map((t) => {
        const r = snap.ranks.find((x) => x.rank === t.rank);
        if (r === undefined) throw new Error(`rank ${t.rank} not in the fake snapshot`);
        return { ...r, pid: t.pid, host, pausedMicros: 1000 };
      });
      onRanks(ranks);
      return ok({ count: ranks.length, mpi: snap.mpi, durationMicros: 10 });
    },
  };
}

class ManualTimers implements Timers {
  setTimeout(): unknown {
    return 0;
  }
  clearTimeout(): void {}
}

async function webhookListener(): Promise<{ url: string; bodies: { text: string }[] }> {
  const bodies: { text: string }[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  cleanup.push(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, bodies };
}

async function rig(captureCores: boolean, agents: FakeAgents) {
  const hook = await webhookListener();
  const clock = { now: T0 };
  const s = await startServer(
    {
      publicUrl: 'https://mqd.example.test',
      watchEnabled: true,
      watchPeriodSeconds: PERIOD_S,
      watchHungAfter: 3,
      watchWebhooks: [hook.url],
      watchCaptureCores: captureCores,
      coreDirs: ['/cores'],
    },
    {
      clock: () => clock.now,
      snapshotHub: agents.hub,
      watchAgents: agents,
      watchTimers: new ManualTimers(),
      slurm: null,
      webhookBackoffMs: 1,
    },
  );
  cleanup.push(() => s.close());
  const job = async (): Promise<ApiFleetJob> => {
    const res = await s.app.inject({ method: 'GET', url: '/api/fleet', headers: s.admin });
    expect(res.statusCode, res.body).toBe(200);
    const d = decodeResponse('fleet', bodyJson(res));
    if (!d.ok) throw new Error(d.error.message);
    const j = d.value.jobs.find((x) => x.key === JOB.key);
    if (j === undefined) throw new Error('the job is not in the fleet');
    return j;
  };
  return {
    hook,
    job,
    round: async () => {
      clock.now += PERIOD_S * 1000;
      await s.app.mqd.watcher.tick();
      await s.app.mqd.watcher.settled();
    },
  };
}

describe('the watcher keeps cores of a hung job (policy captureCores)', () => {
  it('asks each node once per episode, shows the cores in the fleet and names them in the webhook', async () => {
    const agents = new FakeAgents();
    const r = await rig(true, agents);
    let hungAt = -1;
    for (let i = 0; i < 6; i++) {
      await r.round();
      if (hungAt < 0 && (await r.job()).state === 'hung') hungAt = i;
    }
    expect(hungAt).toBeGreaterThanOrEqual(0);
    const j = await r.job();
    expect(j.state).toBe('hung');
    const since = j.since ?? '';
    const name = `watch-slurm-101-${Date.parse(since)}`;
    // Once per node for the one episode, however many hung samples followed.
    expect(agents.captures.map((c) => c.host).sort()).toEqual(['n1', 'n2']);
    for (const c of agents.captures) {
      expect(c).toMatchObject({ ownerUid: 1000, name });
      expect(c.ranks).toEqual((LAYOUT[c.host] ?? []).map((x) => ({ ...x, startTime: String(1000 + x.pid) })));
    }
    expect(j.cores?.episodeStart).toBe(since);
    // The cores' stops (250 ms a rank) count against the stop budget beside the samples' 1 ms ones.
    expect(j.stopMsThisHour).toBeGreaterThanOrEqual(250);
    expect(j.stopMsThisHour).toBeLessThan(260);
    expect(j.cores?.dirs).toEqual([
      { host: 'n1', dir: `/cores/${name}`, error: null },
      { host: 'n2', dir: `/cores/${name}`, error: null },
    ]);
    expect(j.cores?.ranks.map((x) => [x.rank, x.host, x.core, x.bytes, x.error])).toEqual([
      [0, 'n1', 'rank-0.core', 1000, null],
      [1, 'n1', 'rank-1.core', 1001, null],
      [2, 'n2', 'rank-2.core', 1002, null],
      [3, 'n2', 'rank-3.core', 1003, null],
    ]);
    await waitFor(() => r.hook.bodies.length >= 1, 'the webhook');
    expect(r.hook.bodies).toHaveLength(1);
    expect(r.hook.bodies[0]?.text).toContain(`cores kept in n1:/cores/${name}, n2:/cores/${name}`);

    // The job moves on (the episode closes), then hangs again: a second capture, a new directory.
    agents.hung = false;
    for (let i = 0; i < 3; i++) await r.round();
    expect((await r.job()).state).not.toBe('hung');
    expect(agents.captures).toHaveLength(2);
    agents.hung = true;
    for (let i = 0; i < 6; i++) await r.round();
    const again = await r.job();
    expect(again.state).toBe('hung');
    expect(agents.captures).toHaveLength(4);
    const second = `watch-slurm-101-${Date.parse(again.since ?? '')}`;
    expect(second).not.toBe(name);
    expect(agents.captures.slice(2).map((c) => c.name)).toEqual([second, second]);
    expect(again.cores?.dirs.map((d) => d.dir)).toEqual([`/cores/${second}`, `/cores/${second}`]);
  });

  it('asks for nothing with the policy off, and the fleet shows no cores', async () => {
    const agents = new FakeAgents();
    const r = await rig(false, agents);
    for (let i = 0; i < 5; i++) await r.round();
    const j = await r.job();
    expect(j.state).toBe('hung');
    expect(agents.captures).toEqual([]);
    expect(j.cores).toBeNull();
    await waitFor(() => r.hook.bodies.length >= 1, 'the webhook');
    expect(r.hook.bodies[0]?.text).not.toContain('cores kept');
  });

  it('an agent without a core directory refuses; the fleet says why and the webhook keeps quiet about cores', async () => {
    const agents = new FakeAgents();
    agents.refuse = mqdError(
      'MQD_E_CORE_DIR_FORBIDDEN',
      'the agent on n1 has no core directory (--core-dir), so it keeps no cores',
    );
    const r = await rig(true, agents);
    for (let i = 0; i < 5; i++) await r.round();
    const j = await r.job();
    expect(j.state).toBe('hung');
    expect(agents.captures).toHaveLength(2);
    expect(j.cores?.dirs.every((d) => d.dir === null && /no core directory/.test(d.error ?? ''))).toBe(true);
    expect(j.cores?.ranks.every((x) => x.core === null && x.error !== null)).toBe(true);
    await waitFor(() => r.hook.bodies.length >= 1, 'the webhook');
    expect(r.hook.bodies[0]?.text).not.toContain('cores kept');
  });
});

describe('--watch-capture-cores', () => {
  it('is refused without --core-dir, with what to do', () => {
    const c = loadConfig({ env: {}, argv: ['--watch', 'on', '--watch-capture-cores', 'on'] });
    expect(c.ok).toBe(false);
    if (c.ok) return;
    expect(c.error.code).toBe('MQD_E_USAGE');
    expect(c.error.message).toContain('--core-dir');
  });

  it('with a core directory seeds the policy; off by default', () => {
    const on = loadConfig({
      env: { MQD_WATCH_CAPTURE_CORES: 'on' },
      argv: ['--watch', 'on', '--core-dir', '/var/lib/mqd/cores'],
    });
    if (!on.ok) throw new Error(on.error.message);
    expect(watchPolicyOf(on.value).captureCores).toBe(true);
    const off = loadConfig({ env: {}, argv: ['--core-dir', '/var/lib/mqd/cores'] });
    if (!off.ok) throw new Error(off.error.message);
    expect(watchPolicyOf(off.value).captureCores).toBeUndefined();
  });
});

describe('the capture request on the wire', () => {
  const request = (name: string) =>
    Buffer.from(
      JSON.stringify({
        type: 'request',
        id: 1,
        method: 'capture',
        params: { ranks: [{ rank: 0, pid: 10, startTime: '5' }], ownerUid: 1000, name },
      }),
    );
  it('carries one plain path component as the directory name, never a path', () => {
    const good = decodeServerMessage(request('watch-slurm-101-1800000000000'), 1 << 20);
    expect(good.ok).toBe(true);
    for (const bad of ['../etc', 'a/b', '.hidden', '/abs', '']) {
      const d = decodeServerMessage(request(bad), 1 << 20);
      expect(d.ok, bad).toBe(false);
    }
  });
});
