// The few /proc facts process acquisition needs beyond @mqd/core's: the process tree, whether a
// process is alive (a zombie is not), who owns it and how it was started.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { processState, readMaps, readProcStat } from '@mqd/core';
import { err, type MqdError, mqdError, ok, Pid, type Result } from '@mqd/model';
import type { StarterInfo } from './job.js';

export interface ProcEntry {
  readonly pid: number;
  readonly ppid: number;
  readonly state: string;
}

/** Every process visible now (threads are not listed: /proc shows thread groups at the top). */
export function listProcesses(): ProcEntry[] {
  const out: ProcEntry[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    // Null when it exited between readdir and read: not part of any tree any more.
    const st = readProcStat(Number(name));
    if (st) out.push({ pid: st.pid, ppid: st.ppid, state: st.state });
  }
  return out;
}

/** Descendants of `pid`, parents before children (breadth first), with their depth below it. */
export function descendants(
  pid: number,
  procs: readonly ProcEntry[] = listProcesses(),
): { pid: number; depth: number }[] {
  const children = new Map<number, number[]>();
  for (const p of procs) {
    const list = children.get(p.ppid);
    if (list) list.push(p.pid);
    else children.set(p.ppid, [p.pid]);
  }
  const out: { pid: number; depth: number }[] = [];
  const queue: { pid: number; depth: number }[] = [{ pid, depth: 0 }];
  const seen = new Set([pid]);
  for (let q = queue.shift(); q; q = queue.shift()) {
    for (const c of children.get(q.pid) ?? []) {
      if (seen.has(c)) continue;
      seen.add(c);
      const d = { pid: c, depth: q.depth + 1 };
      out.push(d);
      queue.push(d);
    }
  }
  return out;
}

/** Running (or stopped): not gone and not a zombie waiting to be reaped. */
export function isAlive(pid: number): boolean {
  const s = processState(pid);
  return s !== null && s !== 'Z' && s !== 'X' && s !== 'x';
}

function errnoCode(e: unknown): string {
  return e instanceof Error && 'code' in e && typeof e.code === 'string' ? e.code : String(e);
}

/** Who a starter is. A pid that does not exist, or a zombie, or one we may not inspect, is a coded error. */
export function starterInfo(pid: number): Result<StarterInfo, MqdError> {
  if (!Number.isInteger(pid) || pid < 1 || pid > 0x3fffffff)
    return err(mqdError('MQD_E_BAD_INPUT', `'${pid}' is not a pid`));
  const state = processState(pid);
  if (state === null) return err(mqdError('MQD_E_NO_SUCH_PID', `no process ${pid}`));
  if (state === 'Z' || state === 'X')
    return err(
      mqdError('MQD_E_JOB_ENDED', `process ${pid} has exited (it is a zombie waiting for its parent)`),
    );
  let status = '';
  let command = '';
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
    command = readFileSync(`/proc/${pid}/cmdline`, 'latin1').replace(/\0+$/, '').split('\0').join(' ');
  } catch (e) {
    return err(mqdError('MQD_E_NO_SUCH_PID', `process ${pid} vanished while it was read (${errnoCode(e)})`));
  }
  const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1] ?? -1);
  let exe: string;
  try {
    exe = readlinkSync(`/proc/${pid}/exe`);
  } catch (e) {
    const code = errnoCode(e);
    if (code === 'ENOENT') return err(mqdError('MQD_E_NO_SUCH_PID', `process ${pid} exited`));
    return err(
      mqdError(
        'MQD_E_PTRACE_DENIED',
        `cannot inspect pid ${pid} (owned by uid ${uid}; /proc/${pid}/exe: ${code})`,
      ),
    );
  }
  return ok({ pid: Pid(pid), exe, uid, command });
}

const MPI_LIBRARY_RE = /\/lib(?:mpi|mpich|pmpi)[^/]*\.so/;

/** Whether a process maps an MPI library; a denied or vanished process is a coded error. */
export function mapsMpiLibrary(pid: number): Result<boolean, MqdError> {
  const maps = readMaps(pid);
  if (!maps.ok) return maps;
  return ok(MPI_LIBRARY_RE.test(maps.value));
}

/** /proc/PID/exe, or null when it cannot be read. */
export function exeOf(pid: number): string | null {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return null;
  }
}
