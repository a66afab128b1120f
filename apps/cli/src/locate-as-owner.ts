// Locating a job as the starter's owner. The starter's MPIR table is user memory: parsing the
// starter's files and reading it happens in a child (locate-main.ts) that runs with the
// starter's uid/gid and NO_NEW_PRIVS; this side (root in an agent) reads only /proc metadata:
// the starter's owner and start time before and after, and each local rank's owner and start
// time. Local ranks of another uid than the starter's are dropped with a warning: a fake
// starter can list any pid, and those are never handed on to be stopped.
import { procCredentials, procStartTime, type ReaderCredentials } from '@mqd/core';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import type { JobRanks, LocalHost, MethodChoice, RankEntry } from '@mqd/mpir';
import type { LocateRequest } from './locate-protocol.js';
import { OwnerChild } from './owner-child.js';

export interface OwnedRank extends RankEntry {
  /** /proc/PID/stat start time, for ranks on this host. */
  readonly startTime?: string;
}

/** A job found on behalf of its starter's owner, and what the caller should be warned about. */
export interface OwnersJob {
  readonly job: JobRanks;
  /** Local ranks of another uid that were dropped, ranks on other hosts, ... */
  readonly warnings: readonly string[];
}

export interface OwnedJob extends OwnersJob {
  /** The ranks that may be read as the starter's owner (local ones carry their start time). */
  readonly ranks: readonly OwnedRank[];
  readonly uid: number;
  readonly starterStartTime: string;
  /** Who the locate child was (tests check the uid switch). */
  readonly credentials: ReaderCredentials;
}

/** attachStarter as (uid, gid), in a locate child; its answer and who the child was. */
async function runChild(
  uid: number,
  gid: number,
  req: LocateRequest,
  timeoutMs: number,
): Promise<Result<{ result: Result<JobRanks, MqdError>; credentials: ReaderCredentials }, MqdError>> {
  const child = new OwnerChild<LocateRequest, JobRanks>('locate-main', uid, gid, 'the locate child');
  try {
    const result = await child.ask<JobRanks>(req, timeoutMs);
    const creds = await child.credentials();
    if (!creds.ok) return creds;
    // A failed locate is the child's coded answer; a child that did not answer is ours to report.
    return ok({ result, credentials: creds.value });
  } finally {
    child.dispose();
  }
}

/** attachStarter(pid) run as the starter's owner, with the identity of every local rank pinned. */
export async function locateAsOwner(
  pid: number,
  here: LocalHost,
  opts: { method?: MethodChoice; timeoutMs?: number } = {},
): Promise<Result<OwnedJob, MqdError>> {
  const creds = procCredentials(pid);
  const starterStartTime = procStartTime(pid);
  if (!creds || starterStartTime === null)
    return err(mqdError('MQD_E_NO_SUCH_PID', `no running process ${pid}`));
  const uid = creds.uids[0];
  const req: LocateRequest = {
    type: 'locate',
    pid,
    here: { short: here.short, aliases: [...here.aliases] },
    ...(opts.method ? { method: opts.method } : {}),
  };
  const ran = await runChild(uid, creds.gids[0], req, opts.timeoutMs ?? 30_000);
  if (!ran.ok) return ran;
  if (!ran.value.result.ok) return ran.value.result;
  // The child's answer is data from the starter's owner: only pids are taken from it, and each
  // local one is checked here against /proc.
  if (procStartTime(pid) !== starterStartTime) {
    return err(mqdError('MQD_E_PID_REUSED', `starter ${pid} changed while its table was read`));
  }
  const job = ran.value.result.value;
  const warnings = [...job.warnings];
  const ranks: OwnedRank[] = [];
  for (const r of job.ranks) {
    if (r.host !== here.short) {
      ranks.push(r); // its own node's agent checks it against the job owner
      continue;
    }
    const rc = procCredentials(r.pid);
    const startTime = procStartTime(r.pid);
    if (!rc || startTime === null) {
      warnings.push(`rank ${r.rank} (pid ${r.pid}) has exited`);
      continue;
    }
    if (rc.uids.some((u) => u !== uid)) {
      warnings.push(
        `rank ${r.rank}: pid ${r.pid} runs as uid ${rc.uids.join('/')}, not as the starter's owner uid ${uid}: dropped, never stopped or read (MQD_E_FOREIGN_PROCESS)`,
      );
      continue;
    }
    ranks.push({ ...r, startTime });
  }
  return ok({ job, ranks, uid, starterStartTime, warnings, credentials: ran.value.credentials });
}
