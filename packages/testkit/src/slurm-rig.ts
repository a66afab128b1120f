// A Slurm cluster of network namespaces with the aggregator and one agent per node, as a real
// site runs them: slurmctld and `mqd serve --no-local-agent` in the aggregator's namespace
// (which routes between the nodes), a slurmd in each node's namespace under the node's host
// name, and on each node an `mqd agent` started as slurmd's children see the node (so
// `scontrol listpids` there answers for that node). Shared by the CLI's Slurm multi-node test
// and the dashboard's (e2e); what each checks stays in the test.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCluster, type NetnsCluster, type NetnsProcess, spawnArgv } from './netns.js';
import { type NetnsAggregator, startNetnsAggregator } from './netns-aggregator.js';
import { type SlurmCluster, type SlurmJob, type SubmitOptions, startSlurm } from './slurm.js';
import { teardownAll } from './teardown.js';

export interface SlurmRigOptions {
  /** Names the namespaces and the work directory: unique per test process (e.g. with its pid). */
  readonly run: string;
  readonly adminToken: string;
  readonly agentToken: string;
  /** For each start (the aggregator, the daemons, each agent's connection). */
  readonly timeoutMs: number;
  /** The nodes, in order; the first is the batch host (default node1, node2). */
  readonly hosts?: readonly string[];
  /** More `mqd serve` flags for the aggregator. */
  readonly serveArgs?: readonly string[];
  /**
   * The Slurm partition's name (default: one of the cluster's own), for flags that name it before
   * the cluster exists (`--watch-partitions`).
   */
  readonly partition?: string;
}

export interface SlurmRig extends AsyncDisposable {
  readonly cluster: NetnsCluster;
  readonly slurm: SlurmCluster;
  readonly served: NetnsAggregator;
  /** The nodes' agents, in the order of `hosts`, each connected when startSlurmRig resolved. */
  readonly agents: readonly NetnsProcess[];
  readonly workDir: string;
  /** A process on `host` as its Slurm node sees the world (namespace, host name), with SLURM_CONF; killed by dispose. */
  onNode(label: string, host: string, argv: readonly string[]): NetnsProcess;
  /** Submits a fixture (SlurmCluster.submitFixture); cancelled by cancelJobs or dispose. */
  submit(o: SubmitOptions): Promise<SlurmJob>;
  /** Cancels (scancel KILL) every job submitted since the last call: for afterEach. */
  cancelJobs(): void;
  /** Everything started, even when a part failed: processes first, then Slurm, the namespaces. */
  dispose(): Promise<void>;
}

/** Starts the whole rig; on failure what was started is torn down before the error is thrown. */
export async function startSlurmRig(o: SlurmRigOptions): Promise<SlurmRig> {
  const hosts = o.hosts ?? ['node1', 'node2'];
  const workDir = mkdtempSync(join(tmpdir(), `${o.run}-`));
  const started: NetnsProcess[] = [];
  const jobs: SlurmJob[] = [];
  let cluster: NetnsCluster | null = null;
  let slurm: SlurmCluster | null = null;
  let served: NetnsAggregator | null = null;
  const cancelJobs = () => {
    for (const j of jobs.splice(0)) {
      try {
        slurm?.run('scancel', ['--signal=KILL', '--full', String(j.jobId)]);
      } catch {
        // already gone: the cluster's dispose kills whatever is left of it anyway
      }
    }
  };
  const dispose = () =>
    teardownAll(`Slurm rig ${o.run}`, [
      cancelJobs,
      ...started.map((p) => () => p.kill()),
      () => served?.kill(),
      () => slurm?.dispose(),
      () => cluster?.dispose(),
      () => rmSync(workDir, { recursive: true, force: true }),
    ]);
  try {
    const c = createCluster(o.run, hosts);
    cluster = c;
    const firstNode = c.node(hosts[0] ?? 'node1');
    // The aggregator and Slurm start side by side: both take a few seconds.
    const [srv, cl] = await Promise.allSettled([
      startNetnsAggregator({
        netns: c.aggregatorNetns,
        workDir,
        adminToken: o.adminToken,
        agentToken: o.agentToken,
        timeoutMs: o.timeoutMs,
        ...(o.serveArgs === undefined ? {} : { serveArgs: o.serveArgs }),
      }),
      startSlurm({
        ...(o.partition === undefined ? {} : { partition: o.partition }),
        netns: {
          // slurmctld in the aggregator's namespace, which routes between the nodes.
          controller: { netns: c.aggregatorNetns, address: firstNode.aggregatorAddress },
          nodes: c.nodes.map((n) => ({ name: n.host, netns: n.netns, address: n.address })),
        },
      }),
    ]);
    if (srv.status === 'fulfilled') served = srv.value;
    if (cl.status === 'fulfilled') slurm = cl.value;
    if (srv.status === 'rejected') throw srv.reason;
    if (cl.status === 'rejected') throw cl.reason;
    const s = slurm as SlurmCluster;
    const agg = served as NetnsAggregator;
    const onNode = (label: string, host: string, argv: readonly string[]): NetnsProcess => {
      const p = spawnArgv(label, s.onNode(host, argv), { SLURM_CONF: s.conf });
      started.push(p);
      return p;
    };
    const agents = hosts.map((host) => onNode(`agent on ${host}`, host, agg.agentCommand(c.node(host))));
    await Promise.all(agents.map((a, i) => agg.untilConnected(a, hosts[i] ?? '', o.timeoutMs)));
    return {
      cluster: c,
      slurm: s,
      served: agg,
      agents,
      workDir,
      onNode,
      submit: async (so) => {
        const job = await s.submitFixture(so);
        jobs.push(job);
        return job;
      },
      cancelJobs,
      dispose,
      [Symbol.asyncDispose]: dispose,
    };
  } catch (e) {
    await dispose().catch((t: unknown) => {
      throw new AggregateError([e, t], `starting the Slurm rig ${o.run} failed, and so did its teardown`);
    });
    throw e;
  }
}
