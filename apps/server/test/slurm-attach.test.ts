// Attaching a Slurm job that runs on several nodes: the agent on the node asked
// locates its own ranks and names the job's other nodes (`otherNodes`); the aggregator asks each
// of those nodes' agents for theirs and merges them into one job. Real aggregator and real
// agents over socket.io, synthetic locators and readers (the real two-node Slurm case is
// apps/cli/test/slurm-multinode.mpi.test.ts). Every refusal leaves nothing stored.
import { err, mqdError, ok, type Result } from '@mqd/model';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import type { JobLocator, LocatedJob } from '../src/shared/seams.js';
import { createFakeReader } from '../src/synthetic/fakes.js';
import { AGENT_TOKEN, createUser, json, startServer, type TestServer } from './helpers.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

const JOB = '4242';
const UID = 1001;

/** Ranks `ranks` of the job on `host` (pids 30000 + rank). */
function located(host: string, ranks: readonly number[], extra: Partial<LocatedJob> = {}): LocatedJob {
  return {
    ranks: ranks.map((rank) => ({ rank, pid: 30_000 + rank, host, startTime: `7${rank}` })),
    method: 'slurm',
    uid: UID,
    command: `slurm job ${JOB}`,
    starterStartTime: '700',
    // A Slurm job is pinned by its first process on the node asked.
    starterPid: 30_000 + (ranks[0] ?? 0),
    ...extra,
  };
}

/** A locator that knows only the Slurm job, answering `answer` for it. */
function slurmLocator(answer: Result<LocatedJob>): JobLocator {
  return {
    locate: async (pid) => err(mqdError('MQD_E_NOT_STARTER', `pid ${pid} is not a starter here`)),
    locateSlurm: async (job) => (job === JOB ? answer : err(mqdError('MQD_E_NO_SLURM', `no job ${job}`))),
  };
}

async function agentOn(s: TestServer, host: string, answer: Result<LocatedJob>): Promise<void> {
  const agent = startAgent({
    serverUrl: s.url,
    token: AGENT_TOKEN,
    host,
    reader: createFakeReader({ worldSize: 4 }),
    locator: slurmLocator(answer),
  });
  cleanup.push(() => agent.dispose());
  await agent.whenConnected();
}

async function setUp(): Promise<{ s: TestServer; alice: { authorization: string } }> {
  const s = await startServer();
  cleanup.push(() => s.close());
  const alice = await createUser(s.app, 'alice', UID);
  return { s, alice };
}

const attach = (s: TestServer, who: { authorization: string }) =>
  s.app.inject({
    method: 'POST',
    url: '/api/jobs/attach',
    headers: who,
    payload: { host: 'n1', slurmJob: JOB },
  });

async function jobCount(s: TestServer, who: { authorization: string }): Promise<number> {
  const r = await s.app.inject({ method: 'GET', url: '/api/jobs', headers: who });
  return json<{ jobs: unknown[] }>(r).jobs.length;
}

describe('attach a Slurm job on two nodes', () => {
  it("merges every node's ranks, each read by its own node's agent", async () => {
    const { s, alice } = await setUp();
    await agentOn(s, 'n1', ok(located('n1', [0, 1], { otherNodes: ['n2'] })));
    await agentOn(s, 'n2', ok(located('n2', [2, 3])));
    const a = await attach(s, alice);
    expect(a.statusCode, a.body).toBe(201);
    const job = json<{ job: { id: string; rankCount: number; hosts: { host: string; ranks: number }[] } }>(
      a,
    ).job;
    expect(job.rankCount).toBe(4);
    expect(job.hosts.map((h) => [h.host, h.ranks])).toEqual([
      ['n1', 2],
      ['n2', 2],
    ]);
    const snap = await s.app.inject({ method: 'POST', url: `/api/jobs/${job.id}/snapshots`, headers: alice });
    expect(snap.statusCode, snap.body).toBe(201);
    const ranks = json<{ snapshot: { id: string } }>(snap).snapshot;
    const full = await s.app.inject({ method: 'GET', url: `/api/snapshots/${ranks.id}`, headers: alice });
    const snapshot = json<{ snapshot: { ranks: { rank: number; host: string; state: { kind: string } }[] } }>(
      full,
    ).snapshot;
    expect(snapshot.ranks.map((r) => [r.rank, r.host, r.state.kind])).toEqual([
      [0, 'n1', 'ok'],
      [1, 'n1', 'ok'],
      [2, 'n2', 'ok'],
      [3, 'n2', 'ok'],
    ]);
  });

  it('a node that holds none of the ranks (MQD_E_NO_RANKS) adds nothing', async () => {
    const { s, alice } = await setUp();
    await agentOn(s, 'n1', ok(located('n1', [0, 1], { otherNodes: ['n2'] })));
    await agentOn(s, 'n2', err(mqdError('MQD_E_NO_RANKS', `Slurm job ${JOB} has no ranks on n2`)));
    const a = await attach(s, alice);
    expect(a.statusCode, a.body).toBe(201);
    expect(json<{ job: { rankCount: number } }>(a).job.rankCount).toBe(2);
  });

  it.each([
    ['no agent for the other node', null, 503, 'MQD_E_AGENT_MISSING', /n2/],
    [
      'another uid on the other node',
      ok(located('n2', [2, 3], { uid: 1002 })),
      400,
      'MQD_E_BAD_INPUT',
      /uid 1002/,
    ],
    [
      'the same rank on both nodes',
      ok(located('n2', [1, 2])),
      400,
      'MQD_E_BAD_INPUT',
      /rank 1 was found on two nodes/,
    ],
    [
      'an agent answering for another host',
      ok(located('n1', [2, 3])),
      500,
      'MQD_E_INTERNAL',
      /answered rank 2/,
    ],
    [
      "the other node's agent failing",
      err(mqdError('MQD_E_NO_SLURM', 'scontrol is not installed')),
      502,
      'MQD_E_NO_SLURM',
      /on n2/,
    ],
  ] as const)('%s: refused with its code, nothing stored', async (_what, n2, status, code, text) => {
    const { s, alice } = await setUp();
    await agentOn(s, 'n1', ok(located('n1', [0, 1], { otherNodes: ['n2'] })));
    if (n2 !== null) await agentOn(s, 'n2', n2);
    const a = await attach(s, alice);
    expect(a.statusCode, a.body).toBe(status);
    const body = json<{ code: string; message: string }>(a);
    expect(body.code).toBe(code);
    expect(body.message).toMatch(text);
    expect(await jobCount(s, alice)).toBe(0);
  });
});
