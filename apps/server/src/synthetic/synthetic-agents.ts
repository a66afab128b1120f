// Synthetic agents: N simulated nodes of one MPI job, each a real agent (startAgent) over the
// fake seams, for tests and benchmarks. Kept out of the agent room so that the agent a
// node runs (the `@mqd/server/agent` entry, `mqd agent`) never loads the fakes.
import { type AgentHandle, type BackoffOptions, startAgent } from '../agent/agent.js';
import {
  createFakeDiscovery,
  createFakeLocator,
  createFakeReader,
  type FakeDiscovery,
  type FakeJob,
  fakeDiscoveredJob,
} from './fakes.js';

export interface SyntheticAgentsOptions {
  readonly serverUrl: string;
  readonly token: string;
  /** Number of simulated nodes, each with its own agent. */
  readonly agents: number;
  /** Ranks per node. */
  readonly ranksPerAgent: number;
  readonly starterPid?: number;
  readonly uid?: number;
  readonly command?: string;
  readonly seed?: number;
  readonly evolve?: boolean;
  readonly hostPrefix?: string;
  readonly backoff?: BackoffOptions;
  readonly log?: (line: string) => void;
  /** Each node's agent reports the job in status.discovered and answers counters (fakes.ts). */
  readonly discovery?: boolean;
  /** How often the agents report (and rescan), ms; default: as the aggregator asks. */
  readonly statusIntervalMs?: number;
}

export interface SyntheticAgents extends AsyncDisposable {
  readonly agents: readonly AgentHandle[];
  readonly job: FakeJob;
  /** Per agent (same order), with `discovery`: its fake discovery, to change jobs and counters. */
  readonly discoveries: readonly FakeDiscovery[];
  whenConnected(): Promise<void>;
  dispose(): Promise<void>;
}

/**
 * N simulated nodes of one MPI job, M ranks each: node 0 also runs the starter, so attaching
 * to `job.starterPid` on host `${hostPrefix}0` finds all N*M ranks.
 */
export function startSyntheticAgents(o: SyntheticAgentsOptions): SyntheticAgents {
  const prefix = o.hostPrefix ?? 'sim-';
  const job: FakeJob = {
    starterPid: o.starterPid ?? 4242,
    uid: o.uid ?? 1000,
    command: o.command ?? `mpirun -np ${o.agents * o.ranksPerAgent} ./ring`,
    hosts: Array.from({ length: o.agents }, (_, i) => `${prefix}${i}`),
    ranksPerHost: o.ranksPerAgent,
  };
  const worldSize = o.agents * o.ranksPerAgent;
  const discoveries = o.discovery
    ? job.hosts.map((host) => createFakeDiscovery([fakeDiscoveredJob(job, host)]))
    : [];
  const agents = job.hosts.map((host, i) =>
    startAgent({
      serverUrl: o.serverUrl,
      token: o.token,
      host,
      agentId: `${host}`,
      reader: createFakeReader({
        worldSize,
        ...(o.seed === undefined ? {} : { seed: o.seed }),
        ...(o.evolve === undefined ? {} : { evolve: o.evolve }),
      }),
      locator: i === 0 ? createFakeLocator(job) : null,
      discovery: discoveries[i] ?? null,
      ...(o.statusIntervalMs === undefined ? {} : { statusIntervalMs: o.statusIntervalMs }),
      ...(o.backoff ? { backoff: o.backoff } : {}),
      ...(o.log ? { log: o.log } : {}),
    }),
  );
  const dispose = async () => {
    await Promise.all(agents.map((a) => a.dispose()));
  };
  return {
    agents,
    job,
    discoveries,
    whenConnected: async () => {
      await Promise.all(agents.map((a) => a.whenConnected()));
    },
    dispose,
    [Symbol.asyncDispose]: dispose,
  };
}
