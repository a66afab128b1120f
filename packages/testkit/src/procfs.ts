// Just enough of /proc to find, identify and reap the processes of a job. A pid alone does not
// identify a process (pids are reused), so every process is remembered with its start time.
// The product's one /proc/PID/stat parser is @mqd/core's parseProcStat (inferior/proc.ts); the
// testkit keeps this twin because it depends on @mqd/model only (it launches the jobs the
// debugger is tested on, and must not share the debugger's code under test).
import { readdirSync, readFileSync } from 'node:fs';
import { Pid } from '@mqd/model';

export interface ProcStat {
  readonly pid: Pid;
  readonly comm: string;
  /** R, S, D, T, t, Z, X, ... (proc(5)). */
  readonly state: string;
  readonly ppid: number;
  readonly pgid: number;
  readonly sid: number;
  /** Clock ticks since boot; with the pid, identifies one process. */
  readonly starttime: bigint;
}

/** A process as it was when first seen; `sameProcess` tells whether a pid still names it. */
export interface ProcIdentity {
  readonly pid: Pid;
  readonly starttime: bigint;
}

function errnoCode(e: unknown): string | undefined {
  return e instanceof Error && 'code' in e && typeof e.code === 'string' ? e.code : undefined;
}

/** Reads a /proc file; a process that is gone (or was never there) gives undefined. */
function readProcFile(path: string): Buffer | undefined {
  try {
    return readFileSync(path);
  } catch (e) {
    const code = errnoCode(e);
    // ENOENT/ESRCH: the process is gone. EACCES cannot happen for root, but for another
    // user's process it means "not ours to manage", which callers treat the same way.
    if (code === 'ENOENT' || code === 'ESRCH' || code === 'EACCES') return undefined;
    throw e;
  }
}

export function parseStat(text: string): ProcStat | undefined {
  // comm may itself contain spaces and parentheses: it ends at the last ')'.
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) return undefined;
  const rest = text
    .slice(close + 2)
    .trim()
    .split(' ');
  // rest[0] is field 3 (state) of proc(5); starttime is field 22.
  const [state, ppid, pgid, sid] = rest;
  const starttime = rest[19];
  if (state === undefined || ppid === undefined || pgid === undefined || sid === undefined) return undefined;
  if (starttime === undefined) return undefined;
  return {
    pid: Pid(Number(text.slice(0, open).trim())),
    comm: text.slice(open + 1, close),
    state,
    ppid: Number(ppid),
    pgid: Number(pgid),
    sid: Number(sid),
    starttime: BigInt(starttime),
  };
}

export function readStat(pid: number): ProcStat | undefined {
  const buf = readProcFile(`/proc/${pid}/stat`);
  return buf === undefined ? undefined : parseStat(buf.toString('utf8'));
}

/** Every process visible in /proc right now. */
export function listProcesses(): ProcStat[] {
  const out: ProcStat[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const st = readStat(Number(name));
    if (st !== undefined) out.push(st);
  }
  return out;
}

export const isZombie = (st: ProcStat): boolean => st.state === 'Z' || st.state === 'X';

/**
 * All descendants of `pid` (children, grandchildren, ...) found through ppid links, zombies
 * included, parents before children. A process whose parent died has been reparented (to init
 * or a subreaper) and is no longer found here; callers that must not lose it remember it first.
 */
export function descendants(pid: number, procs: readonly ProcStat[] = listProcesses()): ProcStat[] {
  const byParent = new Map<number, ProcStat[]>();
  for (const p of procs) {
    const list = byParent.get(p.ppid);
    if (list === undefined) byParent.set(p.ppid, [p]);
    else list.push(p);
  }
  const out: ProcStat[] = [];
  const queue = [pid];
  const seen = new Set<number>([pid]);
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of byParent.get(next) ?? []) {
      if (seen.has(child.pid)) continue;
      seen.add(child.pid);
      out.push(child);
      queue.push(child.pid);
    }
  }
  return out;
}

/** Descendants of `pid` that are still running (not zombies): what a clean dispose leaves empty. */
export function liveDescendants(pid: number): Pid[] {
  return descendants(pid)
    .filter((p) => !isZombie(p))
    .map((p) => p.pid);
}

export function identify(pid: number): ProcIdentity | undefined {
  const st = readStat(pid);
  return st === undefined ? undefined : { pid: st.pid, starttime: st.starttime };
}

/** The stat of `id` if its pid still names the same process (zombie or not), else undefined. */
export function statOf(id: ProcIdentity): ProcStat | undefined {
  const st = readStat(id.pid);
  return st !== undefined && st.starttime === id.starttime ? st : undefined;
}

/** True when the process has exited and been reaped (its pid is free or names another process). */
export const isGone = (id: ProcIdentity): boolean => statOf(id) === undefined;

/** True when the process exists and has not exited (a zombie has exited). */
export function isRunning(id: ProcIdentity): boolean {
  const st = statOf(id);
  return st !== undefined && !isZombie(st);
}

/** A process's environment (/proc/PID/environ), or undefined if it is gone. */
export function readEnviron(pid: number): Map<string, string> | undefined {
  const buf = readProcFile(`/proc/${pid}/environ`);
  if (buf === undefined) return undefined;
  const env = new Map<string, string>();
  for (const entry of buf.toString('utf8').split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0) env.set(entry.slice(0, eq), entry.slice(eq + 1));
  }
  return env;
}
