// `--attach STARTER_PID` for the CLI's commands (`mqd snapshot`, `mqd capture`): the job is the
// starter's owner's, as on the server (real-locator.ts). Run as root, the starter's table is
// read by a child that is its owner (locate-as-owner.ts), and every rank is then read with the
// starter's uid as the job owner: a rank of another uid, or root's, listed by a user's fake
// starter is refused by the Snapshotter's checks (MQD_E_FOREIGN_PROCESS / MQD_E_ROOT_PROCESS)
// before anything stops it. Root's own starter is root's job (read in this process, as before).
import { procCredentials, type SnapshotTarget } from '@mqd/core';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import { attachStarter, type JobRanks, localHost, localRanks } from '@mqd/mpir';
import { locateAsOwner, type OwnersJob } from './locate-as-owner.js';

export interface AttachedJob extends OwnersJob {
  /** The ranks on this host; those the owner child saw carry their start time. */
  readonly targets: readonly SnapshotTarget[];
  /** The starter's real uid and gid: the job owner. */
  readonly ownerUid: number;
  readonly ownerGid: number;
}

export async function attachAsOwner(starterPid: number): Promise<Result<AttachedJob, MqdError>> {
  const creds = procCredentials(starterPid);
  if (!creds) return err(mqdError('MQD_E_NO_SUCH_PID', `no running process ${starterPid}`));
  const [ownerUid] = creds.uids;
  const [ownerGid] = creds.gids;
  const here = localHost();
  let job: JobRanks;
  const startTimes = new Map<number, string>();
  if (process.geteuid?.() === 0 && ownerUid !== 0) {
    const located = await locateAsOwner(starterPid, here);
    if (!located.ok) return located;
    if (located.value.uid !== ownerUid)
      return err(
        mqdError('MQD_E_PID_REUSED', `starter ${starterPid} changed owner while its table was read`),
      );
    job = located.value.job;
    for (const r of located.value.ranks) if (r.startTime !== undefined) startTimes.set(r.pid, r.startTime);
  } else {
    const found = attachStarter(starterPid, { here });
    if (!found.ok) return found;
    job = found.value;
  }
  const split = localRanks(job, starterPid, here.short);
  if (!split.ok) return split;
  const { local, warnings } = split.value;
  return ok({
    job,
    // Every local rank the starter lists goes on, a foreign one too: the Snapshotter refuses
    // it with its code (from /proc metadata only), so the user sees which rank and why.
    targets: local.map((r) => {
      const startTime = startTimes.get(r.pid);
      return { pid: r.pid, rank: r.rank, host: r.host, ...(startTime !== undefined ? { startTime } : {}) };
    }),
    ownerUid,
    ownerGid,
    warnings,
  });
}
