// The agent's status report: its health, the node's MPI starters and discovered jobs, within the
// message limit; what had to be left out is logged once each time it changes.
import { loadavg } from 'node:os';
import type { DiscoveredJob, MqdError } from '@mqd/model';
import {
  type AgentHealth,
  type DiscoveryScanInfo,
  MAX_DISCOVERED_JOBS,
  MAX_SEEN_JOBS,
} from '../protocol/agent-protocol.js';
import type { SeenStarter } from '../shared/seams.js';
import { clipMpi, statusMessage } from './agent-messages.js';
import type { AgentContext } from './context.js';

export class StatusReporter {
  private readonly startedAt = Date.now();
  private omittedBefore = 0;
  private omittedFoundBefore = 0;
  private leftOutBefore = '';

  constructor(
    private readonly ctx: AgentContext,
    /** The failure the status reports (the newest one). */
    private readonly lastError: () => MqdError | null,
  ) {}

  async send(): Promise<void> {
    const { ctx } = this;
    const opts = ctx.opts;
    let jobs: readonly SeenStarter[] = [];
    try {
      jobs = (await opts.locator?.list?.()) ?? [];
    } catch (e) {
      ctx.log(`agent ${ctx.agentId}: listing starters failed: ${ctx.failed(e).message}`);
    }
    let discovered: readonly DiscoveredJob[] = [];
    // No discovery, or a failed one, knows nothing of the node's jobs: an incomplete report.
    let scan: DiscoveryScanInfo = { complete: false, omitted: [] };
    try {
      const d = opts.discovery;
      if (d?.scan) {
        const s = await d.scan();
        discovered = s.jobs;
        scan = { complete: s.complete, omitted: s.omitted };
      } else if (d) {
        discovered = await d.discover();
        scan = { complete: discovered.length <= MAX_DISCOVERED_JOBS, omitted: [] };
      }
    } catch (e) {
      ctx.log(`agent ${ctx.agentId}: discovering jobs failed: ${ctx.failed(e).message}`);
    }
    const mem = process.memoryUsage();
    const health: AgentHealth = {
      rssBytes: mem.rss,
      heapUsedBytes: mem.heapUsed,
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
      loadAverage1m: loadavg()[0] ?? 0,
      activeRequests: ctx.active.size,
      lastError: this.lastError(),
    };
    const maxBytes = ctx.maxBytes();
    const status = statusMessage(health, clipMpi(opts.reader.mpi), jobs, maxBytes, discovered, scan);
    if (status.omitted > 0 && status.omitted !== this.omittedBefore) {
      ctx.log(
        `agent ${ctx.agentId}: ${status.omitted} of ${jobs.length} MPI starters left out of the status (over ${MAX_SEEN_JOBS} or the ${maxBytes}-byte message limit)`,
      );
    }
    this.omittedBefore = status.omitted;
    if (status.omittedDiscovered > 0 && status.omittedDiscovered !== this.omittedFoundBefore) {
      ctx.log(
        `agent ${ctx.agentId}: ${status.omittedDiscovered} of ${discovered.length} discovered jobs left out of the status (over ${MAX_DISCOVERED_JOBS} or the ${maxBytes}-byte message limit)`,
      );
    }
    this.omittedFoundBefore = status.omittedDiscovered;
    const leftOut = status.discoveryScan.omitted.map((o) => `${o.jobs} of uid ${o.uid}`).join(', ');
    if (leftOut !== this.leftOutBefore && leftOut !== '') {
      ctx.log(
        `agent ${ctx.agentId}: discovery left jobs out of its report (over the per-uid or per-node caps): ${leftOut}; their absence ends none of them`,
      );
    }
    this.leftOutBefore = leftOut;
    ctx.send(status.bytes);
  }
}
