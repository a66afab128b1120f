// The real RankReader for agents: @mqd/core's Snapshotter behind the server's seam. One
// Snapshotter per agent, so repeated snapshots of a job are warm (DLL loaded, types indexed,
// processes set up).
import { Snapshotter } from '@mqd/core';
import { mqdError, type RankSnapshot, rankNotRead } from '@mqd/model';
import type { MpiInfo, RankReader, RankTarget, ReadOptions } from '@mqd/server';

export class CoreRankReader implements RankReader {
  private readonly snapshotter = new Snapshotter();
  mpi: MpiInfo | null = null;

  constructor(private readonly dll?: string) {}

  async read(ranks: readonly RankTarget[], opts: ReadOptions): Promise<RankSnapshot[]> {
    if (opts.signal.aborted) return ranks.map((r) => aborted(r, opts.host));
    const { snapshot } = await this.snapshotter.snapshot(
      ranks.map((r) => ({ pid: r.pid, rank: r.rank, host: opts.host })),
      this.dll !== undefined ? { dll: this.dll } : {},
    );
    if (snapshot.mpi.dll !== null) this.mpi = snapshot.mpi;
    return snapshot.ranks;
  }

  dispose(): Promise<void> {
    return this.snapshotter.dispose();
  }
}

function aborted(r: RankTarget, host: string): RankSnapshot {
  return rankNotRead(
    { ...r, host },
    mqdError('MQD_E_AGENT_MISSING', 'the request was cancelled before this rank was read'),
  );
}
