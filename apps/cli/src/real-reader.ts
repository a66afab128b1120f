// The real RankReader for agents: @mqd/core's Snapshotter behind the server's seam. One
// Snapshotter per agent, so repeated snapshots of a job are warm (DLL loaded, types indexed,
// processes set up). Core files are read with Snapshotter.snapshotCores.
import { type DllPolicy, procCredentials, Snapshotter } from '@mqd/core';
import {
  type DiscoveredRank,
  isErrorCode,
  mqdError,
  type RankSnapshot,
  type Result,
  rankNotRead,
} from '@mqd/model';
import type {
  CaptureResult,
  CoreRead,
  MpiInfo,
  RankReader,
  RankTarget,
  ReadOptions,
} from '@mqd/server/agent';
import { captureForWatch } from './capture-watch.js';
import { refusedByUserAgent } from './real-locator.js';

export class CoreRankReader implements RankReader {
  private readonly snapshotter = new Snapshotter();
  mpi: MpiInfo | null = null;

  constructor(
    private readonly dll?: string,
    private readonly dllPolicy: DllPolicy = 'any',
  ) {}

  async read(ranks: readonly RankTarget[], opts: ReadOptions): Promise<RankSnapshot[]> {
    if (opts.signal.aborted) return ranks.map((r) => aborted(r, opts.host));
    // A user's own agent (not root) refuses other uids' processes before any reader sees them,
    // whatever owner the aggregator names (the kernel would refuse the trace anyway).
    const refused = new Map<number, RankSnapshot>();
    for (const r of ranks) {
      const uids = procCredentials(r.pid)?.uids ?? [];
      const why = uids.map((u) => refusedByUserAgent(u, `pid ${r.pid}`)).find((e) => e !== null);
      if (why) refused.set(r.pid, rankNotRead({ rank: r.rank, pid: r.pid, host: opts.host }, why));
    }
    const readable = ranks.filter((r) => !refused.has(r.pid));
    if (readable.length === 0) return [...refused.values()];
    const { snapshot } = await this.snapshotter.snapshot(
      readable.map((r) => ({
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
        ...(opts.maxRankBytes !== undefined ? { maxRankBytes: opts.maxRankBytes } : {}),
        ...(opts.light === true ? { light: true } : {}),
        ...(opts.evals !== undefined && opts.evals.length > 0 ? { evals: opts.evals } : {}),
      },
    );
    if (snapshot.mpi.dll !== null) this.mpi = snapshot.mpi;
    return refused.size === 0 ? snapshot.ranks : [...snapshot.ranks, ...refused.values()];
  }

  /**
   * Reads each target's core file (the agent checked the paths and that they belong to the
   * job's owner; as root the Snapshotter reads each core as its file's owner). Every target is
   * answered with its attach-time pid unless the core now says otherwise (then an error).
   */
  async readCores(cores: readonly RankTarget[], opts: ReadOptions): Promise<CoreRead> {
    if (opts.signal.aborted) return { ranks: cores.map((r) => aborted(r, opts.host)), cores: [] };
    const { snapshot } = await this.snapshotter.snapshotCores(
      cores.map((t) => ({ path: t.core ?? '', rank: t.rank, host: opts.host })),
      {
        ...(this.dll !== undefined ? { dll: this.dll } : {}),
        ...(opts.ownerUid !== undefined ? { ownerUid: opts.ownerUid } : {}),
        ...(opts.maxRankBytes !== undefined ? { maxRankBytes: opts.maxRankBytes } : {}),
        dllPolicy: this.dllPolicy,
      },
    );
    if (snapshot.mpi.dll !== null) this.mpi = snapshot.mpi;
    const byRank = new Map(snapshot.ranks.map((r) => [r.rank, r]));
    // A core the reader could not even identify is reported in `unidentified`, by path order.
    const unidentified = [...(snapshot.unidentified ?? [])];
    const ranks = cores.map((t): RankSnapshot => {
      const r = byRank.get(t.rank);
      const at = { rank: t.rank, pid: t.pid, host: opts.host };
      if (r === undefined) {
        const why = unidentified.shift()?.error;
        return rankNotRead(
          at,
          why !== undefined && isErrorCode(why.code)
            ? { code: why.code, message: why.message }
            : mqdError(
                'MQD_E_CORE_INVALID',
                `${t.core}: ${why?.message ?? 'the reader returned nothing for it'}`,
              ),
        );
      }
      if (r.pid === t.pid) return r;
      if (r.state.kind !== 'ok') return { ...r, pid: t.pid };
      return rankNotRead(
        at,
        mqdError(
          'MQD_E_CORE_INVALID',
          `${t.core} now holds pid ${r.pid}, not ${t.pid}: attach the directory again`,
        ),
      );
    });
    return { ranks, cores: [...(snapshot.source?.cores ?? [])] };
  }

  /** The hang watch's cores of a hung job (capture-watch.ts), written as its owner. */
  capture(
    ranks: readonly DiscoveredRank[],
    dir: string,
    opts: { readonly host: string; readonly ownerUid: number; readonly signal: AbortSignal },
  ): Promise<Result<CaptureResult>> {
    return captureForWatch(this.snapshotter, ranks, dir, opts);
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
