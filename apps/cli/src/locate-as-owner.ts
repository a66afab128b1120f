// Locating a job as the starter's owner. The starter's MPIR table is user memory: parsing the
// starter's files and reading it happens in a child (locate-main.ts) that runs with the
// starter's uid/gid and NO_NEW_PRIVS; this side (root in an agent) reads only /proc metadata:
// the starter's owner and start time before and after, and each local rank's owner and start
// time. Local ranks of another uid than the starter's are dropped with a warning: a fake
// starter can list any pid, and those are never handed on to be stopped.
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  procCredentials,
  procStartTime,
  type ReaderCredentials,
  readerForkOptions,
  readerIdentity,
} from '@mqd/core';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import type { JobRanks, LocalHost, MethodChoice, RankEntry } from '@mqd/mpir';
import type { LocateMessage, LocateRequest } from './locate-protocol.js';

export interface OwnedRank extends RankEntry {
  /** /proc/PID/stat start time, for ranks on this host. */
  readonly startTime?: string;
}

export interface OwnedJob {
  readonly job: JobRanks;
  /** The ranks that may be read as the starter's owner (local ones carry their start time). */
  readonly ranks: readonly OwnedRank[];
  readonly uid: number;
  readonly starterStartTime: string;
  readonly warnings: readonly string[];
  /** Who the locate child was (tests check the uid switch). */
  readonly credentials: ReaderCredentials;
}

function entry(): { file: string; execArgv: string[] } {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.ts')) {
    return {
      file: here.replace(/locate-as-owner\.ts$/, 'locate-main.ts'),
      execArgv: ['--conditions=source', '--import', 'tsx'],
    };
  }
  const js = here.replace(/locate-as-owner\.js$/, 'locate-main.js');
  if (!existsSync(js)) throw new Error(`locate child entry ${js} is missing: run npm run build`);
  return { file: js, execArgv: [] };
}

function runChild(
  uid: number,
  gid: number,
  req: LocateRequest,
  timeoutMs: number,
): Promise<Result<{ result: Result<JobRanks, MqdError>; credentials: ReaderCredentials }, MqdError>> {
  const { file, execArgv } = entry();
  const child: ChildProcess = fork(file, [], {
    execArgv,
    serialization: 'advanced',
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    ...readerForkOptions(readerIdentity(uid, gid)),
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-2000);
  });
  return new Promise((resolve) => {
    let creds: ReaderCredentials | null = null;
    let settled = false;
    const finish = (
      r: Result<{ result: Result<JobRanks, MqdError>; credentials: ReaderCredentials }, MqdError>,
    ) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      resolve(r);
    };
    const timer = setTimeout(
      () => finish(err(mqdError('MQD_E_INTERNAL', `the locate child did not answer in ${timeoutMs} ms`))),
      timeoutMs,
    );
    child.on('message', (m: LocateMessage) => {
      switch (m.type) {
        case 'ready':
          creds = m.credentials;
          child.send(req);
          break;
        case 'privdrop':
          finish(err(m.error));
          break;
        case 'located':
          if (creds) finish(ok({ result: m.result, credentials: creds }));
          break;
      }
    });
    child.on('exit', (code, signal) =>
      finish(
        err(
          mqdError(
            'MQD_E_INTERNAL',
            `the locate child ${signal ? `was killed by ${signal}` : `exited with code ${code}`}${stderr ? `: ${stderr.trim()}` : ''}`,
          ),
        ),
      ),
    );
  });
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
