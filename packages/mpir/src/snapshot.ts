// `mqd snapshot --attach PID`: the ranks from the starter, then one snapshot of those on this
// host through @mqd/core's Snapshotter. Ranks on other hosts are named in the warnings: an
// agent on their host reads them.
import { type SnapshotOptions, type SnapshotResult, Snapshotter } from '@mqd/core';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import { type AttachOptions, attachStarter } from './attach.js';
import { localHost } from './host.js';
import type { JobRanks, RankEntry } from './job.js';

export interface SnapshotAttachOptions extends AttachOptions {
  /** Reuse a Snapshotter (warm DLL hosts); a fresh one is made and disposed otherwise. */
  readonly snapshotter?: Snapshotter;
  readonly snapshot?: SnapshotOptions;
}

export interface AttachedSnapshot {
  readonly job: JobRanks;
  readonly result: SnapshotResult;
}

/** The ranks of `job` on this host, as Snapshotter targets. */
export function localTargets(job: JobRanks, hostShort: string = localHost().short): RankEntry[] {
  return [...(job.byHost[hostShort] ?? [])];
}

export interface LocalRanks {
  /** The ranks of the job on this host (never empty). */
  readonly local: RankEntry[];
  /** How many run on other hosts. */
  readonly remote: number;
  /** The job's warnings, plus one naming the ranks on other hosts when there are any. */
  readonly warnings: readonly string[];
}

/**
 * The ranks of starter `starterPid`'s `job` on this host, the others named in the warnings (an
 * agent on their host reads them); MQD_E_NO_RANKS when none runs here.
 */
export function localRanks(
  job: JobRanks,
  starterPid: number,
  hostShort: string,
): Result<LocalRanks, MqdError> {
  const local = localTargets(job, hostShort);
  if (local.length === 0) {
    return err(
      mqdError(
        'MQD_E_NO_RANKS',
        `none of the ${job.ranks.length} ranks of starter ${starterPid} runs on this host (${hostShort}; hosts: ${Object.keys(job.byHost).join(', ')}); run the agent there`,
      ),
    );
  }
  const remote = job.ranks.length - local.length;
  const warnings =
    remote > 0
      ? [...job.warnings, `${remote} ranks run on other hosts and are not in this snapshot`]
      : job.warnings;
  return ok({ local, remote, warnings });
}

export async function snapshotAttach(
  starterPid: number,
  opts: SnapshotAttachOptions = {},
): Promise<Result<AttachedSnapshot, MqdError>> {
  const here = opts.here ?? localHost();
  const found = attachStarter(starterPid, { ...opts, here });
  if (!found.ok) return found;
  const job = found.value;
  const split = localRanks(job, starterPid, here.short);
  if (!split.ok) return split;
  const { local, remote, warnings } = split.value;
  const withRemote: JobRanks = remote > 0 ? { ...job, warnings } : job;
  const snapshotter = opts.snapshotter ?? new Snapshotter();
  try {
    const result = await snapshotter.snapshot(
      local.map((r) => ({ pid: r.pid, rank: r.rank, host: r.host })),
      opts.snapshot ?? {},
    );
    return ok({ job: withRemote, result });
  } finally {
    if (!opts.snapshotter) await snapshotter.dispose();
  }
}
