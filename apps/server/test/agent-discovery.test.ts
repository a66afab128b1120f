// The hang watch's part of the agent protocol (3): status.discovered and the counters request.
// The decoder (strict shapes, a malformed discovered entry dropped alone, the status cut to
// fit), a real hub and agents over socket.io (discovered(), the 'discovered' event, counters
// through the fake discovery), and counters of REAL processes read by packages/mpir's
// rankCounters through an agent: CPU ticks grow for a busy child and not for a sleeping one, a
// wrong start time and another uid (a real process of uid 65534 via setpriv) are refused, and
// nothing is ever stopped or traced.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { procStartTime } from '@mqd/core';
import type { DiscoveredJob } from '@mqd/model';
import { clockTicksPerSecond, rankCounters } from '@mqd/mpir';
import { Server } from 'socket.io';
import { describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import { statusMessage } from '../src/agent/agent-messages.js';
import { AgentHub, type HubEvent } from '../src/hub/hub.js';
import {
  AGENT_NAMESPACE,
  type AgentHealth,
  type AgentMessage,
  encodeMessage,
  MAX_COMMAND_CHARS,
  type ServerMessage,
} from '../src/protocol/agent-protocol.js';
import { decodeAgentMessage, decodeServerMessage } from '../src/protocol/agent-protocol-decode.js';
import type { JobDiscovery } from '../src/shared/seams.js';
import {
  createFakeDiscovery,
  createFakeReader,
  type FakeJob,
  fakeDiscoveredJob,
} from '../src/synthetic/fakes.js';
import { startSyntheticAgents } from '../src/synthetic/synthetic-agents.js';
import type { WatchAgents } from '../src/watch/source.js';
import { AGENT_TOKEN, cleanupAfterEach, waitFor } from './helpers.js';

const cleanup = cleanupAfterEach();
const NOBODY = 65534;

const health: AgentHealth = {
  rssBytes: 1,
  heapUsedBytes: 1,
  uptimeSeconds: 1,
  loadAverage1m: 0,
  activeRequests: 0,
  lastError: null,
};

const slurmJob: DiscoveredJob = {
  key: 'slurm:4711',
  kind: 'slurm',
  slurmJob: '4711',
  uid: 1000,
  command: 'srun ./ring',
  startedAt: 1_700_000_000_000,
  jobName: 'ring',
  partition: 'batch',
  account: 'physics',
  worldSize: 4,
  watch: 'on',
  ranks: [
    { rank: 0, pid: 101, startTime: '5000' },
    { rank: 1, pid: 102, startTime: '5001' },
  ],
};
const starterJob: DiscoveredJob = {
  key: 'starter:node-1:4242:1000',
  kind: 'starter',
  starterPid: 4242,
  starterStartTime: '1000',
  uid: 1000,
  command: 'mpirun -np 2 ./ring',
  startedAt: 1_700_000_000_000,
  watch: 'off',
  ranks: [{ rank: 0, pid: 4243, startTime: '1001' }],
};

const status = (discovered: unknown[]) =>
  Buffer.from(JSON.stringify({ type: 'status', health, mpi: null, jobs: [], discovered }));

describe('status.discovered on the wire', () => {
  it('decodes good entries as sent', () => {
    const d = decodeAgentMessage(status([slurmJob, starterJob]), 1 << 20);
    expect(d.ok && d.value).toEqual({
      type: 'status',
      health,
      mpi: null,
      jobs: [],
      discovered: [slurmJob, starterJob],
      // An agent that says nothing of its scan: complete, as the list is under its cap.
      discoveryScan: { complete: true, omitted: [] },
    });
  });

  it('drops a malformed entry alone and keeps the rest of the status', () => {
    const bad: unknown[] = [
      { ...slurmJob, slurmJob: '47a1', key: 'slurm:47a1' }, // Slurm ids are digits
      { ...slurmJob, key: 'slurm:9999' }, // key and slurmJob disagree
      { ...starterJob, key: 'starter:node-1:4242:999' }, // key and start time disagree
      { ...starterJob, uid: -1 },
      { ...starterJob, watch: 'maybe' },
      { ...starterJob, command: 'x'.repeat(MAX_COMMAND_CHARS + 1) },
      { ...slurmJob, jobName: 'n'.repeat(129) },
      { ...slurmJob, ranks: [...slurmJob.ranks, { rank: 0, pid: 103, startTime: '1' }] }, // rank twice
      { ...slurmJob, ranks: [{ rank: 0, pid: 101 }] }, // no start time
      { ...starterJob, extra: 1 },
    ];
    const d = decodeAgentMessage(status([...bad, starterJob]), 1 << 20);
    expect(d.ok).toBe(true);
    if (!d.ok || d.value.type !== 'status') return;
    expect(d.value.discovered).toEqual([starterJob]);
    expect(d.value.dropped?.map((x) => x.why.replace(/:.*/, ''))).toEqual([
      'discovered[0].slurmJob',
      'discovered[1].key',
      'discovered[2].key',
      'discovered[3].uid',
      'discovered[4].watch',
      'discovered[5].command',
      'discovered[6].jobName',
      'discovered[7].ranks[2].rank',
      'discovered[8].ranks[0].startTime',
      'discovered[9].extra',
    ]);
    // A status without the list is not protocol 3.
    const old = Buffer.from(JSON.stringify({ type: 'status', health, mpi: null, jobs: [] }));
    expect(decodeAgentMessage(old, 1 << 20).ok).toBe(false);
  });

  it('the agent cuts discovered jobs to fit the message limit, and clips what users name', () => {
    const many = Array.from({ length: 200 }, (_, i) => ({
      ...starterJob,
      key: `starter:node-1:${5000 + i}:1000`,
      starterPid: 5000 + i,
      command: `mpirun ${'y'.repeat(10_000)}`,
    }));
    const limit = 64 * 1024;
    const s = statusMessage(health, null, [], limit, many);
    expect(s.bytes.byteLength).toBeLessThanOrEqual(limit);
    expect(s.omittedDiscovered).toBeGreaterThan(0);
    const d = decodeAgentMessage(s.bytes, limit);
    expect(d.ok).toBe(true);
    if (!d.ok || d.value.type !== 'status') return;
    expect(d.value.discovered).toHaveLength(200 - s.omittedDiscovered);
    expect(d.value.dropped).toBeUndefined();
    expect(d.value.discovered[0]?.command).toHaveLength(MAX_COMMAND_CHARS);
    // Over MAX_DISCOVERED_JOBS: the agent lists the first ones only.
    const lots = Array.from({ length: 1100 }, (_, i) => ({
      ...starterJob,
      key: `starter:n:${i + 1}:1000`,
      starterPid: i + 1,
    }));
    expect(statusMessage(health, null, [], 8 << 20, lots).omittedDiscovered).toBe(1100 - 1024);
  });
});

describe('the counters request on the wire', () => {
  it('round-trips a request and its reply, and refuses malformed ones', () => {
    const req: ServerMessage = {
      type: 'request',
      id: 7,
      method: 'counters',
      params: { ranks: [{ rank: 0, pid: 10, startTime: '99' }], ownerUid: 1000 },
    };
    const r = decodeServerMessage(encodeMessage(req), 1 << 20);
    expect(r.ok && r.value).toEqual(req);
    const reply: AgentMessage = {
      type: 'reply',
      id: 7,
      method: 'counters',
      ok: true,
      result: {
        ranks: [{ rank: 0, cpuTicks: 12, switches: 3, state: 'R' }],
        errors: [{ rank: 1, error: { code: 'MQD_E_PID_REUSED', message: 'MQD_E_PID_REUSED: x' } }],
        clockTicksPerSecond: 100,
        at: 1_700_000_000_000,
      },
    };
    const a = decodeAgentMessage(encodeMessage(reply), 1 << 20);
    expect(a.ok && a.value).toEqual(reply);
    const bad = (patch: Record<string, unknown>) =>
      decodeAgentMessage(
        Buffer.from(JSON.stringify({ ...reply, result: { ...reply.result, ...patch } })),
        1 << 20,
      );
    expect(bad({ ranks: [{ rank: 0, cpuTicks: -1, switches: 0, state: 'R' }] }).ok).toBe(false);
    expect(bad({ ranks: [{ rank: 0, cpuTicks: 1, switches: 0, state: 'RR' }] }).ok).toBe(false);
    expect(bad({ ranks: [{ rank: 1, cpuTicks: 1, switches: 0, state: 'R' }] }).ok).toBe(false); // rank 1 twice
    expect(bad({ clockTicksPerSecond: 0 }).ok).toBe(false);
    const noStart = { ...req, params: { ranks: [{ rank: 0, pid: 10 }], ownerUid: 1000 } };
    expect(decodeServerMessage(Buffer.from(JSON.stringify(noStart)), 1 << 20).ok).toBe(false);
    const noOwner = { ...req, params: { ranks: [] } };
    expect(decodeServerMessage(Buffer.from(JSON.stringify(noOwner)), 1 << 20).ok).toBe(false);
  });
});

/** A hub on its own socket.io server (no app), recording its events. */
async function hub() {
  const http = createServer();
  const io = new Server(http, { maxHttpBufferSize: 1 << 20 });
  const events: HubEvent[] = [];
  const h = new AgentHub(io.of(AGENT_NAMESPACE), {
    agentToken: AGENT_TOKEN,
    allowSharedToken: true,
    maxMessageBytes: 1 << 20,
    statusIntervalMs: 50,
    clock: Date.now,
    onEvent: (e) => events.push(e),
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  cleanup.push(async () => {
    h.close();
    await new Promise<void>((resolve) => io.close(() => resolve()));
  });
  return { hub: h, url, events };
}

function agent(url: string, host: string, discovery: JobDiscovery | null) {
  const a = startAgent({
    serverUrl: url,
    token: AGENT_TOKEN,
    host,
    reader: createFakeReader({ worldSize: 4 }),
    discovery,
    statusIntervalMs: 30,
  });
  cleanup.push(() => a.dispose());
  return a;
}

describe('hub: discovered jobs and counters', () => {
  it('lists what each connected agent reports, tells when it changes, and forgets a disconnected agent', async () => {
    const { hub: h, url, events } = await hub();
    const job: FakeJob = {
      starterPid: 4242,
      uid: 1000,
      command: 'srun ./ring',
      hosts: ['n0', 'n1'],
      ranksPerHost: 2,
      slurmJob: '77',
    };
    const d0 = createFakeDiscovery([fakeDiscoveredJob(job, 'n0')]);
    const d1 = createFakeDiscovery([fakeDiscoveredJob(job, 'n1')]);
    const a0 = agent(url, 'n0', d0);
    agent(url, 'n1', d1);
    await waitFor(() => h.discovered().length === 2, 'both reports');
    const listed = h.discovered().sort((x, y) => x.host.localeCompare(y.host));
    expect(listed.map((x) => [x.host, x.job.key, x.job.ranks.map((r) => r.rank)])).toEqual([
      ['n0', 'slurm:77', [0, 1]],
      ['n1', 'slurm:77', [2, 3]],
    ]);
    expect(listed.every((x) => Math.abs(x.at - Date.now()) < 10_000)).toBe(true);
    const changes = () => events.filter((e) => e.kind === 'discovered').length;
    await waitFor(() => d0.calls.discover >= 3, 'a few rescans');
    // Unchanged rescans are not events: one per host so far.
    expect(changes()).toBe(2);
    d0.jobs = [];
    await waitFor(() => h.discovered().length === 1, 'n0 reports none');
    expect(events.at(-1)).toEqual({ kind: 'discovered', host: 'n0', jobs: [] });
    await a0.dispose();
    d1.jobs = [{ ...fakeDiscoveredJob(job, 'n1'), watch: 'off' }];
    await waitFor(() => h.discovered()[0]?.job.watch === 'off', 'the change on n1');
    // A failing scan costs the status nothing else: the agent still reports (health.lastError).
    d1.failWith = new Error('scan failed');
    await waitFor(
      () =>
        h
          .agents()
          .find((x) => x.host === 'n1')
          ?.health?.lastError?.message.includes('scan failed') === true,
      'lastError',
    );
    expect(h.discovered()).toEqual([]);
  });

  it('counters go to the agent and come back: every asked rank in ranks or errors', async () => {
    const { hub: h, url } = await hub();
    const job: FakeJob = {
      starterPid: 4242,
      uid: 1000,
      command: 'mpirun ./ring',
      hosts: ['n0'],
      ranksPerHost: 3,
    };
    const d = createFakeDiscovery([fakeDiscoveredJob(job, 'n0')]);
    d.counterTable.set(20_001, { cpuTicks: 50, switches: 7, state: 'R' });
    agent(url, 'n0', d);
    agent(url, 'bare', null);
    await waitFor(() => h.isConnected('n0') && h.isConnected('bare'), 'agents');
    const ranks = [
      { rank: 0, pid: 20_000, startTime: '2000' },
      { rank: 1, pid: 20_001, startTime: '2000' },
      { rank: 2, pid: 20_002, startTime: '1' },
    ];
    const r = await h.counters('n0', { ranks, ownerUid: 1000 }, 5000);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.ranks).toEqual([
      { rank: 0, cpuTicks: 0, switches: 0, state: 'S' },
      { rank: 1, cpuTicks: 50, switches: 7, state: 'R' },
    ]);
    expect(r.value.errors.map((e) => [e.rank, e.error.code])).toEqual([[2, 'MQD_E_PID_REUSED']]);
    expect(r.value.clockTicksPerSecond).toBe(100);
    // The hub is what the watcher's WatchAgents names (apps/server/src/watch/source.ts), as is.
    const asWatch: WatchAgents = h;
    expect(asWatch.discovered().map((x) => x.job.key)).toEqual(['starter:n0:4242:1000']);
    const foreign = await h.counters('n0', { ranks: ranks.slice(0, 1), ownerUid: 2000 }, 5000);
    expect(foreign.ok && foreign.value.errors.map((e) => e.error.code)).toEqual(['MQD_E_FOREIGN_PROCESS']);
    const bare = await h.counters('bare', { ranks, ownerUid: 1000 }, 5000);
    expect(bare.ok ? 'ok' : bare.error.code).toBe('MQD_E_AGENT_MISSING');
    const nobody = await h.counters('nowhere', { ranks, ownerUid: 1000 }, 5000);
    expect(nobody.ok ? 'ok' : nobody.error.code).toBe('MQD_E_AGENT_MISSING');
  });
});

describe('synthetic agents with discovery', () => {
  it('report one job over their hosts under one key, with settable counters', async () => {
    const { hub: h, url } = await hub();
    const sim = startSyntheticAgents({
      serverUrl: url,
      token: AGENT_TOKEN,
      agents: 2,
      ranksPerAgent: 2,
      discovery: true,
      statusIntervalMs: 30,
    });
    cleanup.push(() => sim.dispose());
    await waitFor(() => h.discovered().length === 2, 'both hosts report');
    expect(new Set(h.discovered().map((x) => x.job.key))).toEqual(new Set(['starter:sim-0:4242:1000']));
    sim.discoveries[1]?.counterTable.set(20_002, { cpuTicks: 9, switches: 1, state: 'R' });
    const r = await h.counters(
      'sim-1',
      { ranks: [{ rank: 2, pid: 20_002, startTime: '2000' }], ownerUid: 1000 },
      5000,
    );
    expect(r.ok && r.value.ranks).toEqual([{ rank: 2, cpuTicks: 9, switches: 1, state: 'R' }]);
  });
});

// --- real processes ------------------------------------------------------------------------

function started(cmd: string, args: string[]): ChildProcess {
  const c = spawn(cmd, args, { stdio: 'ignore' });
  cleanup.push(() => {
    c.kill('SIGKILL');
  });
  return c;
}

async function startTimeOf(c: ChildProcess): Promise<{ pid: number; startTime: string }> {
  const pid = c.pid ?? 0;
  // The child exists once spawn returned a pid; its start time is readable at once.
  await waitFor(() => procStartTime(pid) !== null, `pid ${pid}`);
  return { pid, startTime: procStartTime(pid) ?? '' };
}

/** Neither stopped nor traced (the counters never ptrace). */
function expectFree(pid: number) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  expect(/^State:\s+(\S)/m.exec(status)?.[1]).not.toMatch(/^[tT]$/);
  expect(/^TracerPid:\s+(\d+)/m.exec(status)?.[1]).toBe('0');
}

/** The agent's real counters: packages/mpir's rankCounters (what apps/cli's ProcJobDiscovery wraps). */
const procCounters: JobDiscovery = {
  async discover() {
    return [];
  },
  async counters(p) {
    return { ...rankCounters(p.ranks, p.ownerUid), clockTicksPerSecond: clockTicksPerSecond() };
  },
};

describe('counters of real processes, through a real agent', () => {
  it('CPU ticks grow for a busy child, not for a sleeping one; wrong start times and other owners are refused; nothing is stopped', async () => {
    const { hub: h, url } = await hub();
    agent(url, 'here', procCounters);
    await waitFor(() => h.isConnected('here'), 'agent');
    const busy = await startTimeOf(started('sh', ['-c', 'while :; do :; done']));
    const idle = await startTimeOf(started('sleep', ['600']));
    const theirs = await startTimeOf(
      started('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', 'sleep', '600']),
    );
    await waitFor(
      () => readFileSync(`/proc/${theirs.pid}/status`, 'utf8').includes(`Uid:\t${NOBODY}`),
      'setpriv exec',
    );
    const theirStart = procStartTime(theirs.pid) ?? '';
    const ask = async (ranks: { rank: number; pid: number; startTime: string }[], ownerUid: number) => {
      const r = await h.counters('here', { ranks, ownerUid }, 5000);
      if (!r.ok) throw new Error(r.error.message);
      return r.value;
    };
    const mine = [
      { rank: 0, ...busy },
      { rank: 1, ...idle },
    ];
    const first = await ask(mine, 0);
    expect(first.errors).toEqual([]);
    expect(first.clockTicksPerSecond).toBeGreaterThan(0);
    const ticks = (v: typeof first, rank: number) => v.ranks.find((x) => x.rank === rank)?.cpuTicks ?? -1;
    // Polled until the busy child has burnt 5 more ticks (a condition, not a fixed sleep).
    let last = first;
    const deadline = Date.now() + 30_000;
    while (ticks(last, 0) < ticks(first, 0) + 5) {
      expect(Date.now(), 'the busy child burning CPU within 30 s').toBeLessThan(deadline);
      await new Promise((resolve) => setTimeout(resolve, 20));
      last = await ask(mine, 0);
    }
    expect(ticks(last, 1)).toBe(ticks(first, 1));
    expect(last.ranks.find((x) => x.rank === 1)?.state).toBe('S');
    expect(last.ranks.find((x) => x.rank === 0)?.state).toMatch(/^[RS]$/);
    expect(last.at).toBeGreaterThanOrEqual(first.at);

    // A pid with another start time is another process: refused, not read.
    const reused = await ask([{ rank: 0, pid: busy.pid, startTime: String(Number(busy.startTime) + 1) }], 0);
    expect(reused.ranks).toEqual([]);
    expect(reused.errors.map((e) => e.error.code)).toEqual(['MQD_E_PID_REUSED']);
    // uid 65534's process for root's job, and root's processes for 65534's: refused both ways.
    const asRoot = await ask([{ rank: 0, pid: theirs.pid, startTime: theirStart }], 0);
    expect(asRoot.errors.map((e) => e.error.code)).toEqual(['MQD_E_FOREIGN_PROCESS']);
    const asNobody = await ask(mine, NOBODY);
    expect(asNobody.errors.map((e) => e.error.code)).toEqual([
      'MQD_E_FOREIGN_PROCESS',
      'MQD_E_FOREIGN_PROCESS',
    ]);
    const own = await ask([{ rank: 3, pid: theirs.pid, startTime: theirStart }], NOBODY);
    expect(own.ranks.map((r) => r.rank)).toEqual([3]);
    for (const p of [busy.pid, idle.pid, theirs.pid]) expectFree(p);
  });
});
