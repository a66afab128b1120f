// The agent's job discovery on a real node (the hang watch, docs/hang-watch.md): packages/mpir's
// read-only /proc scan, with one cache for the agent's life so a steady node costs little per
// status, and Slurm's `scontrol listpids` to check the ranks of Slurm jobs where slurmd answers.
// Counters are read from /proc the same way (rankCounters): nothing is ever stopped or traced.

import type { DiscoveredJob, DiscoveryScan } from '@mqd/model';
import {
  type CounterTarget,
  clockTicksPerSecond,
  DiscoveryCache,
  defaultSlurmRunner,
  discoverNode,
  rankCounters,
  type SlurmRunner,
} from '@mqd/mpir';
import type { CountersParams, CountersResult, JobDiscovery } from '@mqd/server/agent';

export interface ProcDiscoveryOptions {
  /** Slurm's client (default: the installed scontrol; null: Slurm jobs are not checked). */
  readonly slurm?: SlurmRunner | null;
  readonly log?: (line: string) => void;
}

export class ProcJobDiscovery implements JobDiscovery {
  private readonly cache = new DiscoveryCache();
  constructor(
    private readonly host: string,
    private readonly opts: ProcDiscoveryOptions = {},
  ) {}

  async discover(): Promise<readonly DiscoveredJob[]> {
    return (await this.scan()).jobs;
  }

  /** One scan, with whether a cap cut it (per uid, then per node: discoverNode's fair share). */
  async scan(): Promise<DiscoveryScan> {
    return discoverNode({
      host: this.host,
      cache: this.cache,
      slurm: this.opts.slurm === undefined ? defaultSlurmRunner : this.opts.slurm,
      ...(this.opts.log ? { log: this.opts.log } : {}),
    });
  }

  async counters(p: CountersParams): Promise<Omit<CountersResult, 'at'>> {
    const targets: CounterTarget[] = p.ranks.map((r) => ({
      rank: r.rank,
      pid: r.pid,
      startTime: r.startTime,
    }));
    const read = rankCounters(targets, p.ownerUid);
    return { ranks: read.ranks, errors: read.errors, clockTicksPerSecond: clockTicksPerSecond() };
  }
}
