// What the hang watch needs from the agents and from the model, as interfaces: the agent hub
// (apps/server/src/hub/hub.ts) satisfies WatchAgents structurally (discovery reports and /proc
// counters of the node agents, docs/hang-watch.md), tests pass fakes. The verdict is the
// model's (packages/model/src/analysis/watch.ts `watchVerdict`), injectable the same way.
import type { DiscoveredJob, MqdError, RankCounters, Result, WatchSample, WatchVerdict } from '@mqd/model';
import type { DiscoveryScanReport } from '../protocol/agent-protocol.js';

/** One rank to read counters of: the start time pins its identity, as for a snapshot. */
export interface CounterTarget {
  readonly rank: number;
  readonly pid: number;
  readonly startTime: string;
}

export interface CountersReply {
  readonly ranks: RankCounters[];
  readonly errors: { rank: number; error: MqdError }[];
  readonly clockTicksPerSecond: number;
  /** Epoch ms on the agent's node. */
  readonly at: number;
}

/** The node agents as the watcher sees them (AgentHub). */
export interface WatchAgents {
  /** The latest discovery report of each connected agent: one entry per (host, job). */
  discovered(): { host: string; job: DiscoveredJob; at: number }[];
  /** /proc counters of ranks on `host`, read without stopping anything. */
  counters(
    host: string,
    req: { ranks: CounterTarget[]; ownerUid: number },
    timeoutMs: number,
  ): Promise<Result<CountersReply>>;
  /** An agent is connected for this host (a job it stops reporting has ended only then). */
  isConnected(host: string): boolean;
  /**
   * Per connected agent, whether its latest report lists every job of its host: a job missing
   * from an incomplete one (cut at a cap) is ended only once its ranks are seen gone. The hubs
   * have it; absent (a fake), every connected host's report is complete.
   */
  discoveryScans?(): readonly DiscoveryScanReport[];
}

/** The model's verdict (packages/model/src/analysis/watch.ts); a test may pass its own. */
export type WatchVerdictFn = (
  samples: readonly WatchSample[],
  opts: { readonly hungAfterSamples: number },
) => WatchVerdict;
