// Ranks started by srun itself, on a real one-node Slurm (Debian's 22.05;
// packages/testkit/src/slurm.ts): a hung fixture sbatch'ed as `srun --mpi=<plugin> fixture`, so
// the ranks are slurmstepd's children in step 0 and no MPI starter runs. `mqd ranks --slurm` and
// `mqd snapshot --slurm` — the built CLI — find every rank from `scontrol listpids` and its
// environment and read exactly the fixture's queues (@mqd/testkit expectedQueues); the srun that
// started the step publishes MPIR_proctable, so `mqd ranks --attach <srun> --method mpir` lists
// the same ranks. Builds whose PMI client does not speak a plugin never come up under it: those
// are checked to fail as docs/mpi-facts.md ("Ranks started by srun") says. Last, MPICH's ranks
// started by srun across the two nodes of a cluster of network namespaces
// (`startSlurm({netns})`, as apps/cli/test/slurm-multinode.mpi.test.ts), read node by node.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expectQueues } from '@mqd/core/testing';
import { type JobSnapshot, Pid } from '@mqd/model';
import {
  type AnyMpiName,
  createCluster,
  done,
  expectedBlockingCall,
  expectedQueues,
  fixtureBinary,
  MPI_FAMILIES,
  mpiQueueTraits,
  type NetnsCluster,
  netnsId,
  netnsOfPid,
  pending,
  rankBlockedIn,
  readEnviron,
  type SlurmCluster,
  type SlurmJob,
  type SubmitOptions,
  slurmAvailable,
  startSlurm,
  traceState,
  waitFor,
} from '@mqd/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MQD, type MqdRun, mqd } from './run-mqd.js';

const execFileAsync = promisify(execFile);

const FIXTURE = 'wrong_tag';
const TIMEOUT_MS = 60_000;

/** The builds that run under srun, with the plugin their PMI client speaks and the rank it sets. */
const WORKING: ReadonlyArray<{ mpi: AnyMpiName; plugin: 'pmi2' | 'pmix'; rankVariable: string }> = [
  { mpi: 'mpich', plugin: 'pmi2', rankVariable: 'PMI_RANK' },
  { mpi: 'openmpi', plugin: 'pmix', rankVariable: 'PMIX_RANK' },
  { mpi: 'openmpi5', plugin: 'pmix', rankVariable: 'PMIX_RANK' },
];

/** Build and plugin pairs that cannot start a world, and how each fails. */
const FAILING: ReadonlyArray<{
  mpi: AnyMpiName;
  plugin: NonNullable<SubmitOptions['srunMpi']>;
  error: RegExp;
}> = [
  // Open MPI 4.1's internal PMIx finds no PMIx server and it has no PMI-1/2 client (no --with-pmi).
  {
    mpi: 'openmpi',
    plugin: 'pmi2',
    error:
      /MQD_TESTKIT_E_SRUN_FAILED: srun --mpi=pmi2 exited with \d+[\s\S]*OMPI was not built with SLURM's PMI support/,
  },
  // Open MPI 5 sees a PMI-1/2 server it cannot use and starts every process as a singleton.
  {
    mpi: 'openmpi5',
    plugin: 'pmi2',
    error: /MQD_TESTKIT_E_SRUN_SINGLETONS: under srun --mpi=pmi2[\s\S]*4 singletons will be started/,
  },
  // MPICH's simple PMI client finds no PMI_FD under pmix: singletons too.
  { mpi: 'mpich', plugin: 'pmix', error: /MQD_TESTKIT_E_SRUN_SINGLETONS: under srun --mpi=pmix/ },
];

let slurm: SlurmCluster | null = null;
const jobs: SlurmJob[] = [];

function theSlurm(): SlurmCluster {
  if (slurm === null) throw new Error('the Slurm cluster was not started');
  return slurm;
}

beforeAll(async () => {
  if (!slurmAvailable()) throw new Error('MQD_E_PROVISION: Slurm is not installed; run scripts/provision.sh');
  // Compile (or find) the fixtures before the cluster runs.
  for (const { mpi } of [...WORKING, ...FAILING]) fixtureBinary(mpi, FIXTURE);
  slurm = await startSlurm();
}, 120_000);

afterEach(() => {
  // Every job of this cluster is this file's: cancel what the test left, even a job whose
  // submitFixture threw before handing its id back (dispose kills any step that lingers).
  const s = slurm;
  if (s === null) return;
  jobs.splice(0);
  const ids = s
    .run('squeue', ['-h', '-o', '%i'])
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  for (const id of ids) {
    try {
      s.run('scancel', ['--signal=KILL', '--full', id]);
    } catch {
      // ended meanwhile
    }
  }
});

afterAll(async () => {
  await slurm?.dispose();
}, 60_000);

async function untilBlocked(job: SlurmJob): Promise<void> {
  // READY comes just before the call: wait until every rank is inside it.
  for (const r of job.ranks) {
    const call = expectedBlockingCall(FIXTURE, r.rank);
    await waitFor(
      async () => {
        const check = await rankBlockedIn(Pid(r.pid), call);
        return check.blocked ? done(true) : pending(check.error ?? check.frames.slice(0, 6).join(' < '));
      },
      { timeoutMs: TIMEOUT_MS, what: `rank ${r.rank} (pid ${r.pid}) to block in ${call}` },
    );
  }
}

describe.each(WORKING)('$mpi under srun --mpi=$plugin', ({ mpi, plugin, rankVariable }) => {
  it('mqd ranks and mqd snapshot --slurm JOBID.0 read every rank with the queues of the fixture', async () => {
    const s = theSlurm();
    const job = await s.submitFixture({ mpi, fixture: FIXTURE, launcher: 'srun', timeoutMs: TIMEOUT_MS });
    jobs.push(job);
    expect(job.ranks.map((r) => r.rank)).toEqual([0, 1, 2, 3]);
    await untilBlocked(job);

    // What srun gives each task: the MPI's own rank variable and SLURM_PROCID agree; no
    // mpirun-style OMPI_COMM_WORLD_RANK (no orted/prted starts them).
    for (const r of job.ranks) {
      const env = readEnviron(r.pid);
      expect(env?.get('SLURM_PROCID'), `pid ${r.pid}`).toBe(String(r.rank));
      expect(env?.get(rankVariable), `pid ${r.pid}`).toBe(String(r.rank));
      expect(env?.get('SLURM_STEP_ID'), `pid ${r.pid}`).toBe('0');
      expect(env?.has('OMPI_COMM_WORLD_RANK'), `pid ${r.pid}`).toBe(false);
    }

    // The whole job and its step 0 list the same ranks: the batch step's shell and srun map no
    // MPI library and are not ranks.
    for (const id of [String(job.jobId), `${job.jobId}.0`]) {
      const ranks = await mqd(['ranks', '--slurm', id, '--json'], s.env);
      expect(ranks.code, ranks.err).toBe(0);
      const listed = JSON.parse(ranks.out) as {
        method: string;
        ranks: Array<{ rank: number; pid: number }>;
        warnings: string[];
      };
      expect(listed.method).toBe('slurm');
      expect(listed.ranks.map((r) => [r.rank, r.pid])).toEqual(job.ranks.map((r) => [r.rank, r.pid]));
      expect(listed.warnings).toEqual([]);
    }

    const snap = await mqd(['snapshot', '--slurm', `${job.jobId}.0`, '--json'], s.env);
    expect(snap.code, snap.err + snap.out.slice(0, 3000)).toBe(0);
    const got = JSON.parse(snap.out) as JobSnapshot;
    expect(got.mpi.library).toBe(MPI_FAMILIES[mpi]);
    expect(got.ranks.map((r) => [r.rank, r.pid, r.state.kind])).toEqual(
      job.ranks.map((r) => [r.rank, r.pid, 'ok']),
    );
    expectQueues(`${mpi} srun --mpi=${plugin}`, mpiQueueTraits(mpi), got, expectedQueues(mpi, FIXTURE));
    // Nothing stays stopped or traced after the read.
    expect(job.ranks.map((r) => traceState(r.pid))).toEqual(
      job.ranks.map(() =>
        expect.objectContaining({ tracerPid: 0, state: expect.not.stringMatching(/^[tT]$/) }),
      ),
    );

    // The step's srun is an MPIR starter: its table names the same pids.
    expect(job.srunPid).not.toBeNull();
    const viaMpir = await mqd(
      ['ranks', '--attach', String(job.srunPid), '--method', 'mpir', '--json'],
      s.env,
    );
    expect(viaMpir.code, viaMpir.err).toBe(0);
    const table = JSON.parse(viaMpir.out) as {
      method: string;
      starter: { pid: number; exe: string } | null;
      ranks: Array<{ rank: number; pid: number }>;
    };
    expect(table.method).toBe('mpir');
    expect(table.starter).toMatchObject({ pid: job.srunPid, exe: '/usr/bin/srun' });
    expect(table.ranks.map((r) => [r.rank, r.pid])).toEqual(job.ranks.map((r) => [r.rank, r.pid]));
  });
});

describe.each(FAILING)('$mpi under srun --mpi=$plugin', ({ mpi, plugin, error }) => {
  it('never starts a world of 4 ranks: the submission fails with the coded reason', async () => {
    await expect(
      theSlurm().submitFixture({
        mpi,
        fixture: FIXTURE,
        launcher: 'srun',
        srunMpi: plugin,
        timeoutMs: TIMEOUT_MS,
      }),
    ).rejects.toThrow(error);
  });
});

describe('mpich under srun --mpi=none (no PMI at all): four singletons', () => {
  it('mqd ranks --slurm ranks them by SLURM_PROCID and warns; each world is of size 1', async () => {
    const s = theSlurm();
    // split_wildcard hangs alone too: its wildcard MPI_Recv waits for a sender that never is.
    const fixture = 'split_wildcard';
    const job = await s.submitFixture({
      mpi: 'mpich',
      fixture,
      launcher: 'srun',
      srunMpi: 'none',
      singletons: true,
      timeoutMs: TIMEOUT_MS,
    });
    jobs.push(job);
    expect(job.ranks.map((r) => r.rank)).toEqual([0, 1, 2, 3]);
    for (const r of job.ranks) {
      const call = expectedBlockingCall(fixture, 0);
      await waitFor(
        async () => {
          const check = await rankBlockedIn(Pid(r.pid), call);
          return check.blocked ? done(true) : pending(check.error ?? check.frames.slice(0, 6).join(' < '));
        },
        { timeoutMs: TIMEOUT_MS, what: `singleton ${r.rank} (pid ${r.pid}) to block in ${call}` },
      );
      expect(readEnviron(r.pid)?.has('PMI_RANK'), `pid ${r.pid}`).toBe(false);
    }

    const ranks = await mqd(['ranks', '--slurm', `${job.jobId}.0`, '--json'], s.env);
    expect(ranks.code, ranks.err).toBe(0);
    const listed = JSON.parse(ranks.out) as {
      ranks: Array<{ rank: number; pid: number }>;
      warnings: string[];
    };
    expect(listed.ranks.map((r) => [r.rank, r.pid])).toEqual(job.ranks.map((r) => [r.rank, r.pid]));
    expect(listed.warnings).toEqual([
      expect.stringMatching(
        /^4 process\(es\) \(pid [\d, ]+\) name their rank only in SLURM_PROCID .*singleton.*MPICH: pmi2, Open MPI: pmix/,
      ),
    ]);

    // What the warning says, as the ranks' own MPI sees it: every world has one process.
    const snap = await mqd(['snapshot', '--slurm', `${job.jobId}.0`, '--json'], s.env);
    expect(snap.code, snap.err).toBe(0);
    const got = JSON.parse(snap.out) as JobSnapshot;
    expect(
      got.ranks.map((r) => {
        const world = r.communicators.find((c) => c.name === 'MPI_COMM_WORLD');
        return [r.rank, r.state.kind, world?.size, world?.localRank];
      }),
    ).toEqual(job.ranks.map((r) => [r.rank, 'ok', 1, 0]));
  });
});

describe('mpich under srun --mpi=pmi2 on two Slurm nodes (network namespaces)', () => {
  const HOSTS = ['node1', 'node2'] as const;
  /** sbatch --ntasks-per-node=2, srun's block distribution: ranks 0-1 on node1, 2-3 on node2. */
  const HOST_OF_RANK = ['node1', 'node1', 'node2', 'node2'] as const;
  let cluster: NetnsCluster | null = null;
  let two: SlurmCluster | null = null;

  beforeAll(async () => {
    cluster = createCluster(`mqdsrun${process.pid}`, HOSTS);
    const c = cluster;
    two = await startSlurm({
      netns: {
        controller: { netns: c.aggregatorNetns, address: c.node('node1').aggregatorAddress },
        nodes: c.nodes.map((n) => ({ name: n.host, netns: n.netns, address: n.address })),
      },
    });
  }, 120_000);

  afterAll(async () => {
    // Processes first (they live in the namespaces), then the namespaces.
    const problems: unknown[] = [];
    try {
      await two?.dispose();
    } catch (e) {
      problems.push(e);
    }
    try {
      cluster?.dispose();
    } catch (e) {
      problems.push(e);
    }
    if (problems.length > 0) throw new AggregateError(problems, 'two-node Slurm teardown failed');
  }, 60_000);

  /** The built `mqd ARGS` as on `host` (its namespace and host name), with the cluster's SLURM_CONF. */
  async function mqdOnNode(s: SlurmCluster, host: string, args: readonly string[]): Promise<MqdRun> {
    const [file = '', ...rest] = s.onNode(host, [process.execPath, MQD, ...args]);
    try {
      const r = await execFileAsync(file, rest, {
        env: s.env,
        maxBuffer: 64 << 20,
        timeout: TIMEOUT_MS,
        killSignal: 'SIGKILL',
      });
      return { code: 0, out: r.stdout, err: r.stderr };
    } catch (e) {
      const x = e as { code?: number; stdout?: string; stderr?: string };
      return { code: typeof x.code === 'number' ? x.code : -1, out: x.stdout ?? '', err: x.stderr ?? '' };
    }
  }

  it("each node's mqd snapshot --slurm JOBID.0 reads its ranks; srun's MPIR table names both nodes", async () => {
    const s = two;
    const c = cluster;
    if (s === null || c === null) throw new Error('the two-node cluster was not started');
    let job: SlurmJob | null = null;
    try {
      job = await s.submitFixture({
        mpi: 'mpich',
        fixture: FIXTURE,
        launcher: 'srun',
        nodes: 2,
        timeoutMs: TIMEOUT_MS,
      });
      expect(job.ranks.map((r) => r.rank)).toEqual([0, 1, 2, 3]);
      // The ranks really run on two nodes: each in its node's network namespace.
      expect(job.ranks.map((r) => netnsOfPid(r.pid))).toEqual(
        HOST_OF_RANK.map((h) => netnsId(c.node(h).netns)),
      );
      await untilBlocked(job);
      const expected = expectedQueues('mpich', FIXTURE);
      const fromCli: number[] = [];
      for (const host of HOSTS) {
        const other = host === 'node1' ? 'node2' : 'node1';
        const snap = await mqdOnNode(s, host, ['snapshot', '--slurm', `${job.jobId}.0`, '--json']);
        expect(snap.code, snap.err).toBe(0);
        expect(snap.err).toContain(`warning: ranks on ${other} are read by those nodes' agents`);
        const part = JSON.parse(snap.out) as JobSnapshot;
        const mine = job.ranks.filter((r) => HOST_OF_RANK[r.rank] === host);
        expect(part.ranks.map((r) => [r.rank, r.pid, r.host, r.state.kind])).toEqual(
          mine.map((r) => [r.rank, r.pid, host, 'ok']),
        );
        expectQueues(`mpich srun on ${host}`, mpiQueueTraits('mpich'), part, expected);
        fromCli.push(...part.ranks.map((r) => r.rank));
      }
      expect(fromCli.sort()).toEqual([0, 1, 2, 3]);

      // srun runs on the batch node; its table has every rank with the node it runs on.
      expect(job.srunPid).not.toBeNull();
      const viaMpir = await mqdOnNode(s, 'node1', [
        'ranks',
        '--attach',
        String(job.srunPid),
        '--method',
        'mpir',
        '--json',
      ]);
      expect(viaMpir.code, viaMpir.err).toBe(0);
      const table = JSON.parse(viaMpir.out) as { ranks: Array<{ rank: number; pid: number; host: string }> };
      expect(table.ranks.map((r) => [r.rank, r.pid, r.host])).toEqual(
        job.ranks.map((r) => [r.rank, r.pid, HOST_OF_RANK[r.rank]]),
      );
    } finally {
      if (job !== null) s.run('scancel', ['--signal=KILL', '--full', String(job.jobId)]);
    }
  });
});
