// The real RankReader for agents: @mqd/core's Snapshotter behind the server's seam. One
// Snapshotter per agent, so repeated snapshots of a job are warm (DLL loaded, types indexed,
// processes set up).
import { type DllPolicy, Snapshotter } from '@mqd/core';
import { mqdError, type RankSnapshot, rankNotRead } from '@mqd/model';
import type { MpiInfo, RankReader, RankTarget, ReadOptions } from '@mqd/server/agent';

export class CoreRankReader implements RankReader {
  private readonly snapshotter = new Snapshotter();
  mpi: MpiInfo | null = null;

  constructor(
    private readonly dll?: string,
    private readonly dllPolicy: DllPolicy = 'any',
  ) {}

  async read(ranks: readonly RankTarget[], opts: ReadOptions): Promise<RankSnapshot[]> {
    if (opts.signal.aborted) return ranks.map((r) => aborted(r, opts.host));
    const { snapshot } = await this.snapshotter.snapshot(
      ranks.map((r) => ({
        pid: r.pid,
        rank: r.rank,
        host: opts.host,
        ...(r.startTime !== undefined ? { startTime: r.startTime } : {}),
      })),
      {
        ...(this.dll !== undefined ? { dll: this.dll } : {}),
        dllPolicy: this.dllPolicy,
        // The aggregator says whose job it is; with ownerUid, uid 0 is read only when it asks.
        // Without one (an aggregator that predates it) the Snapshotter's default applies: the
        // first rank's owner, shared by all; the locator has already dropped foreign local ranks.
        ...(opts.ownerUid !== undefined ? { ownerUid: opts.ownerUid } : {}),
        ...(opts.allowRoot !== undefined ? { allowRoot: opts.allowRoot } : {}),
      },
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
