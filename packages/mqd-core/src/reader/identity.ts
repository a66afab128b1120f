// Who may be read, and as whom. Root stays in the agent, which only reads /proc metadata
// (owner uids, start times) and decides; everything that parses a target's files, loads the
// library it names or stops it runs in a reader child that first became the target's owner
// (libuv's setgroups(0)/setgid/setuid when the agent forks it with uid/gid) and then set
// PR_SET_NO_NEW_PRIVS. The child verifies all of it before it answers anything.
import { readFileSync } from 'node:fs';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import { readProcStat, zombieError } from '../inferior/proc.js';
import { credentials, setNoNewPrivs } from '../native/libc.js';

/** Real, effective, saved and filesystem ids of a process, from /proc/PID/status; null when gone. */
export interface ProcCredentials {
  readonly uids: readonly [number, number, number, number];
  readonly gids: readonly [number, number, number, number];
}

function ids(status: string, field: 'Uid' | 'Gid'): [number, number, number, number] | null {
  const m = new RegExp(`^${field}:\\s+(\\d+)\\s+(\\d+)\\s+(\\d+)\\s+(\\d+)`, 'm').exec(status);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])] : null;
}

export function procCredentials(pid: number): ProcCredentials | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const uids = ids(status, 'Uid');
    const gids = ids(status, 'Gid');
    return uids && gids ? { uids, gids } : null;
  } catch {
    return null;
  }
}

/** What the caller says about the job a pid must belong to. */
export interface OwnerRule {
  /** Every id (real, effective, saved, fs) of the process must be this uid. */
  readonly ownerUid: number;
  /** Processes of uid 0 are read only when an admin asked for it. */
  readonly allowRoot: boolean;
  /** The start time the pid had when it was located; a different one = the pid was reused. */
  readonly startTime?: string | undefined;
}

/** Null when `pid` may be read under `rule`; else why not (the process must then not be touched). */
export function checkTarget(pid: number, rule: OwnerRule): MqdError | null {
  const creds = procCredentials(pid);
  const stat = readProcStat(pid);
  const start = stat?.startTime ?? null;
  if (!creds || start === null) return mqdError('MQD_E_NO_SUCH_PID', `no running process ${pid}`);
  if (rule.startTime !== undefined && start !== rule.startTime) {
    return mqdError(
      'MQD_E_PID_REUSED',
      `pid ${pid} started at tick ${start}, the located process at tick ${rule.startTime}`,
    );
  }
  // Before the owner checks: a zombie's ids are still there, but nothing else is.
  if (stat?.state === 'Z' || stat?.state === 'X') return zombieError(pid);
  const foreign = creds.uids.find((u) => u !== rule.ownerUid);
  if (foreign !== undefined) {
    return mqdError(
      'MQD_E_FOREIGN_PROCESS',
      `pid ${pid} runs as uid ${creds.uids.join('/')}, the job owner is uid ${rule.ownerUid}`,
    );
  }
  if (rule.ownerUid === 0 && !rule.allowRoot) {
    return mqdError('MQD_E_ROOT_PROCESS', `pid ${pid} runs as uid 0`);
  }
  return null;
}

// Who a reader runs as, and how it is forked as them: reader-spawn.ts (node builtins only, so
// the CLI can start its reader before it loads this code).
export { identityKey, type ReaderIdentity, readerForkOptions, readerIdentity } from './reader-spawn.js';

/** What a reader child reports about itself once it checked its identity. */
export interface ReaderCredentials {
  readonly uid: number;
  readonly euid: number;
  readonly gid: number;
  readonly egid: number;
  readonly groups: readonly number[];
  readonly noNewPrivs: boolean;
}

/**
 * Run first in a reader child: sets PR_SET_NO_NEW_PRIVS and verifies that the process is who
 * the agent asked for (uids, gids, no supplementary groups when switched, NoNewPrivs: 1).
 * An error means the child must not load, parse or stop anything.
 */
export function enterReader(env: NodeJS.ProcessEnv = process.env): Result<ReaderCredentials, MqdError> {
  const want = { uid: Number(env['MQD_READER_UID']), gid: Number(env['MQD_READER_GID']) };
  const switched = env['MQD_READER_SWITCHED'] === '1';
  if (!Number.isInteger(want.uid) || !Number.isInteger(want.gid)) {
    return err(mqdError('MQD_E_PRIVDROP', 'the reader was started without MQD_READER_UID/MQD_READER_GID'));
  }
  const nnp = setNoNewPrivs();
  if (nnp < 0) return err(mqdError('MQD_E_PRIVDROP', `prctl(PR_SET_NO_NEW_PRIVS) failed (errno ${-nnp})`));
  const c = credentials();
  let status = '';
  try {
    status = readFileSync('/proc/self/status', 'utf8');
  } catch (e) {
    return err(mqdError('MQD_E_PRIVDROP', `cannot read /proc/self/status: ${(e as Error).message}`));
  }
  const groups = (/^Groups:[ \t]*(.*)$/m.exec(status)?.[1] ?? '')
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map(Number);
  const noNewPrivs = /^NoNewPrivs:\s+1$/m.test(status);
  const got: ReaderCredentials = { ...c, groups, noNewPrivs };
  const wrong: string[] = [];
  if (c.uid !== want.uid || c.euid !== want.uid) wrong.push(`uid ${c.uid}/${c.euid}, wanted ${want.uid}`);
  if (c.gid !== want.gid || c.egid !== want.gid) wrong.push(`gid ${c.gid}/${c.egid}, wanted ${want.gid}`);
  if (switched && groups.length > 0) wrong.push(`supplementary groups ${groups.join(',')} kept`);
  if (!noNewPrivs) wrong.push('NoNewPrivs is not 1');
  const saved = [ids(status, 'Uid'), ids(status, 'Gid')];
  if (saved[0]?.some((u) => u !== want.uid)) wrong.push(`uids ${saved[0]?.join('/')}`);
  if (saved[1]?.some((g) => g !== want.gid)) wrong.push(`gids ${saved[1]?.join('/')}`);
  if (wrong.length > 0)
    return err(mqdError('MQD_E_PRIVDROP', `reader pid ${process.pid}: ${wrong.join('; ')}`));
  return ok(got);
}
