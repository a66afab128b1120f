// Jobs by Slurm id across two nodes, on a real two-node Slurm: Debian's slurmctld in
// one network namespace and a slurmd in each of two others (node1, node2: NodeAddr inside them,
// each with its own host name; packages/testkit/src/slurm.ts `startSlurm({netns})`). A hung
// fixture is sbatch'ed on both nodes (-N2, two ranks per node) with the MPI's own starter inside
// the allocation: MPICH's mpiexec starts its proxies with srun, Open MPI's mpirun its orted on
// node2 with srun (plm/ras slurm), and ranks on different nodes talk TCP over the veths.
// Then the job is attached by its Slurm id through the agent on node1 (`{slurmJob}`): that agent
// names node2 as the job's other node, the aggregator asks node2's agent for its ranks, and the
// snapshot reads each rank on its own node, with exactly the queues the fixture's table says
// (@mqd/testkit expectedQueues, as on one machine). `mqd snapshot --slurm JOBID` run on each
// node reads that node's ranks, with the same queues, and names the other node.
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { expectQueues } from '@mqd/core/testing';
import type { JobSnapshot } from '@mqd/model';
import {
  done,
  expectedBlockingCall,
  expectedQueues,
  fixtureBinary,
  MPI_NAMES,
  MPI_QUEUE_TRAITS,
  netnsId,
  netnsOfPid,
  pending,
  type SlurmRig,
  slurmAvailable,
  startSlurmRig,
  traceState,
  untilRanksBlocked,
  waitFor,
} from '@mqd/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MQD, type MqdRun } from './run-mqd.js';

const execFileAsync = promisify(execFile);

const RUN = `mqdsl${process.pid}`;
const ADMIN_TOKEN = `admin-${RUN}-0123456789abcdef`;
const AGENT_TOKEN = `agent-${RUN}-0123456789abcdef`;
const HOSTS = ['node1', 'node2'] as const;
/** --ntasks-per-node=2: ranks 0-1 on node1 (the batch host), 2-3 on node2. */
const HOST_OF_RANK = ['node1', 'node1', 'node2', 'node2'] as const;
const START_TIMEOUT_MS = 40_000;

/** The two-node Slurm, the aggregator and an agent per node (@mqd/testkit startSlurmRig). */
let rig: SlurmRig | null = null;

function theRig(): SlurmRig {
  if (rig === null) throw new Error('the Slurm rig was not started');
  return rig;
}
const theSlurm = () => theRig().slurm;
const theServer = () => theRig().served;

/**
 * The built `mqd ARGS` on `host` (run-mqd.ts's, inside the node): exit code, stdout, stderr. The
 * wrappers exec into node, so the timeout's SIGKILL reaches mqd itself.
 */
async function mqdOnNode(host: string, args: readonly string[]): Promise<MqdRun> {
  const [file = '', ...rest] = theSlurm().onNode(host, [process.execPath, MQD, ...args]);
  try {
    const r = await execFileAsync(file, rest, {
      env: theSlurm().env,
      maxBuffer: 64 << 20,
      timeout: START_TIMEOUT_MS,
      killSignal: 'SIGKILL',
    });
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof x.code === 'number' ? x.code : -1, out: x.stdout ?? '', err: x.stderr ?? '' };
  }
}

beforeAll(async () => {
  if (!slurmAvailable()) throw new Error('MQD_E_PROVISION: Slurm is not installed; run scripts/provision.sh');
  // Compile (or find) the fixtures before anything is started.
  for (const mpi of MPI_NAMES) fixtureBinary(mpi, 'wrong_tag');
  rig = await startSlurmRig({
    run: RUN,
    adminToken: ADMIN_TOKEN,
    agentToken: AGENT_TOKEN,
    hosts: HOSTS,
    timeoutMs: START_TIMEOUT_MS,
  });
}, 90_000);

afterEach(() => rig?.cancelJobs());

afterAll(() => rig?.dispose(), 60_000);

describe('a two-node Slurm cluster of network namespaces', () => {
  it('has both nodes idle, each slurmd in its own namespace under its own host name', () => {
    const s = theSlurm();
    expect(s.nodes).toEqual([...HOSTS]);
    expect(s.run('sinfo', ['-h', '-N', '-o', '%N %t']).trim().split('\n')).toEqual([
      'node1 idle',
      'node2 idle',
    ]);
    // What a process started "on" a node sees: its node's host name, every node's address.
    for (const host of HOSTS) {
      const [file = '', ...args] = s.onNode(host, ['/bin/sh', '-c', 'hostname; getent hosts node1 node2']);
      const lines = execFileSync(file, args, { encoding: 'utf8' }).trim().split('\n');
      expect(lines.map((l) => l.trim().split(/\s+/))).toEqual([
        [host],
        ...HOSTS.map((h) => [theRig().cluster.node(h).address, h]),
      ]);
    }
  });
});

describe.each(MPI_NAMES)('%s job on two Slurm nodes (sbatch -N2 + the MPI starter)', (mpi) => {
  it('attached by Slurm job id, every rank is read on its own node with the queues of the fixture', async () => {
    const s = theSlurm();
    const c = theRig().cluster;
    const job = await theRig().submit({ mpi, fixture: 'wrong_tag', nodes: 2, timeoutMs: START_TIMEOUT_MS });
    expect(job.ranks.map((r) => r.rank)).toEqual([0, 1, 2, 3]);
    // The ranks really run on two nodes: each in its node's network namespace.
    expect(job.ranks.map((r) => netnsOfPid(r.pid))).toEqual(
      HOST_OF_RANK.map((h) => netnsId(c.node(h).netns)),
    );
    expect(s.run('squeue', ['-h', '-j', String(job.jobId), '-o', '%N %T']).trim()).toBe('node[1-2] RUNNING');
    // Every rank inside its call, so it has taken in the messages that crossed the veths.
    await untilRanksBlocked(job.ranks, (r) => expectedBlockingCall('wrong_tag', r), START_TIMEOUT_MS);
    // The fixture's queues, as on one machine. (Not the golden snapshot whole: MPICH's internal
    // node-local communicators are per node, of size 2 here, not 4.)
    const expected = expectedQueues(mpi, 'wrong_tag');
    const traits = MPI_QUEUE_TRAITS[mpi];

    // The aggregator: attach by job id through node1's agent, which hands node2 on.
    const api = theServer().api;
    const attach = await api<{ job: { id: string; method: string; hosts: unknown[] } }>(
      'POST',
      '/api/jobs/attach',
      { host: 'node1', slurmJob: String(job.jobId) },
    );
    expect(attach.status, JSON.stringify(attach.body)).toBe(201);
    expect(attach.body.job.method).toBe('slurm');
    expect(attach.body.job.hosts).toEqual([
      { host: 'node1', ranks: 2, agentConnected: true },
      { host: 'node2', ranks: 2, agentConnected: true },
    ]);
    const snap = await api<{ snapshot: { id: string; partial: boolean; ranks: number; ok: number } }>(
      'POST',
      `/api/jobs/${attach.body.job.id}/snapshots`,
    );
    expect(snap.status, JSON.stringify(snap.body)).toBe(201);
    expect(snap.body.snapshot).toMatchObject({ partial: false, ranks: 4, ok: 4 });
    const stored = await api<{ snapshot: JobSnapshot }>('GET', `/api/snapshots/${snap.body.snapshot.id}`);
    expect(stored.status).toBe(200);
    const whole = stored.body.snapshot;
    expect(whole.mpi.library).toBe(mpi);
    expect(whole.ranks.map((r) => [r.rank, r.pid, r.host, r.state.kind])).toEqual(
      job.ranks.map((r) => [r.rank, r.pid, HOST_OF_RANK[r.rank], 'ok']),
    );
    expectQueues(`${mpi} via the aggregator`, traits, whole, expected);
    // Nothing stays stopped or traced after the read.
    expect(job.ranks.map((r) => traceState(r.pid))).toEqual(
      job.ranks.map(() =>
        expect.objectContaining({ tracerPid: 0, state: expect.not.stringMatching(/^[tT]$/) }),
      ),
    );

    // The CLI on each node reads that node's ranks of the job and names the other node.
    const perNode = await Promise.all(
      HOSTS.map(async (host) => ({
        host,
        ...(await mqdOnNode(host, ['snapshot', '--slurm', String(job.jobId), '--json'])),
      })),
    );
    const fromCli: number[] = [];
    for (const { host, code, out, err } of perNode) {
      expect(code, err).toBe(0);
      const other = host === 'node1' ? 'node2' : 'node1';
      expect(err).toContain(`warning: ranks on ${other} are read by those nodes' agents`);
      const part = JSON.parse(out) as JobSnapshot;
      expect(part.ranks.map((r) => [r.rank, r.pid, r.state.kind])).toEqual(
        job.ranks.flatMap((r) => (HOST_OF_RANK[r.rank] === host ? [[r.rank, r.pid, 'ok']] : [])),
      );
      expectQueues(`${mpi} mqd snapshot --slurm on ${host}`, traits, part, expected);
      fromCli.push(...part.ranks.map((r) => r.rank));
    }
    // Between them, the nodes' CLIs read every rank once.
    expect(fromCli.sort()).toEqual([0, 1, 2, 3]);
  });
});

describe('a Slurm job with a node whose agent is missing', () => {
  it('is not attached half: the error names the node without an agent', async () => {
    const job = await theRig().submit({
      mpi: 'mpich',
      fixture: 'wrong_tag',
      nodes: 2,
      timeoutMs: START_TIMEOUT_MS,
    });
    const node2 = theRig().agents[1];
    if (node2 === undefined) throw new Error('no agent on node2');
    await node2.kill();
    // The aggregator has seen it go (not a request racing the disconnect).
    await waitFor(
      async () => {
        const rows = (
          await theServer().api<{ agents: Array<{ host: string; connected: boolean }> }>(
            'GET',
            '/api/admin/agents',
          )
        ).body.agents;
        return rows.some((a) => a.host === 'node2' && a.connected)
          ? pending(JSON.stringify(rows))
          : done(true);
      },
      { timeoutMs: START_TIMEOUT_MS, what: 'the node2 agent listed as disconnected' },
    );
    const r = await theServer().api<{ code: string; message: string }>('POST', '/api/jobs/attach', {
      host: 'node1',
      slurmJob: String(job.jobId),
    });
    expect(r.status, JSON.stringify(r.body)).toBe(503);
    expect(r.body.code).toBe('MQD_E_AGENT_MISSING');
    expect(r.body.message).toMatch(/runs on node2 too .*no agent is connected for node2/);
    // Nothing was stored for it.
    const listed = await theServer().api<{ jobs: Array<{ method: string }> }>('GET', '/api/jobs');
    expect(listed.body.jobs.filter((j) => j.method === 'slurm')).toHaveLength(MPI_NAMES.length);
  });
});
