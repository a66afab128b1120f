// Small facts about a process from /proc that the debugger and the MPIR fallback need.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { type MqdError, mqdError } from '@mqd/model';

/** The process's environment, or null when it cannot be read (gone, or not ours). */
export function readEnviron(pid: number): Map<string, string> | null {
  try {
    const raw = readFileSync(`/proc/${pid}/environ`, 'latin1');
    const env = new Map<string, string>();
    for (const kv of raw.split('\0')) {
      const i = kv.indexOf('=');
      if (i > 0) env.set(kv.slice(0, i), kv.slice(i + 1));
    }
    return env;
  } catch {
    return null;
  }
}

/** Variables through which launchers tell a process its MPI_COMM_WORLD rank, most specific first. */
export const RANK_ENV_VARS = [
  'OMPI_COMM_WORLD_RANK',
  'PMIX_RANK',
  'PMI_RANK',
  'MPI_RANK',
  'SLURM_PROCID',
] as const;

export function rankFromEnviron(pid: number): { rank: number; variable: string } | null {
  const env = readEnviron(pid);
  return env ? rankInEnviron(env) : null;
}

/** The rank an environment (a live process's, or one read from a core) gives, and its variable. */
export function rankInEnviron(env: ReadonlyMap<string, string>): { rank: number; variable: string } | null {
  for (const v of RANK_ENV_VARS) {
    const s = env.get(v);
    if (s !== undefined && /^\d+$/.test(s)) return { rank: Number(s), variable: v };
  }
  return null;
}

/** This host's name as ranks are grouped by: the short name, lower case. */
export function shortHostname(name: string = hostname()): string {
  return (name.split('.')[0] ?? name).toLowerCase();
}

/** The fields of /proc/PID/stat the debugger uses (proc(5) numbering in the comments). */
export interface ProcStat {
  /** Field 1. */
  readonly pid: number;
  /** Field 2, without its parentheses (it may hold spaces and parentheses itself). */
  readonly comm: string;
  /** Field 3: R, S, D, T, t, Z, X, ... */
  readonly state: string;
  /** Field 4. */
  readonly ppid: number;
  /** Field 5. */
  readonly pgrp: number;
  /** Field 6. */
  readonly session: number;
  /** Field 22: clock ticks after boot, as decimal text (with the pid it names one process). */
  readonly startTime: string;
  /** Fields 14 + 15 (utime + stime): CPU clock ticks of every thread; NaN when they are not numbers. */
  readonly cpuTicks: number;
}

/** Parses the text of /proc/PID/stat (pure; the one parser of it in MQD). Null when malformed. */
export function parseProcStat(text: string): ProcStat | null {
  // comm may hold spaces and parentheses: the fields after it start after the last ')'.
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) return null;
  const rest = text.slice(close + 2).split(' '); // rest[0] is field 3
  const pid = Number.parseInt(text.slice(0, open), 10);
  const [state, ppid, pgrp, session] = rest;
  const startTime = rest[22 - 3];
  if (
    !Number.isInteger(pid) ||
    state === undefined ||
    ppid === undefined ||
    pgrp === undefined ||
    session === undefined ||
    startTime === undefined ||
    !/^\d+$/.test(startTime)
  )
    return null;
  return {
    pid,
    comm: text.slice(open + 1, close),
    state,
    ppid: Number(ppid),
    pgrp: Number(pgrp),
    session: Number(session),
    startTime,
    cpuTicks: Number(rest[14 - 3]) + Number(rest[15 - 3]),
  };
}

/** /proc/PID/stat (or /proc/PID/task/TID/stat with `tid`), parsed; null when gone or unreadable. */
export function readProcStat(pid: number, tid?: number): ProcStat | null {
  try {
    const path = tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`;
    return parseProcStat(readFileSync(path, 'utf8'));
  } catch {
    return null;
  }
}

/** Field 22 of /proc/PID/stat (clock ticks since boot, decimal); with the pid it names one process. */
export function procStartTime(pid: number): string | null {
  return readProcStat(pid)?.startTime ?? null;
}

export function processExists(pid: number): boolean {
  return readProcStat(pid) !== null;
}

/** State letter from /proc/PID/stat (R, S, D, T, t, Z, ...), or null when gone. */
export function processState(pid: number): string | null {
  return readProcStat(pid)?.state ?? null;
}

/**
 * True when `pid` has exited and waits for its parent to reap it (state Z, or X while it is
 * being reaped): it has no memory or threads left to read, and ptrace refuses it with EPERM,
 * which must not read as a permission problem.
 */
export function isZombie(pid: number): boolean {
  const state = processState(pid);
  return state === 'Z' || state === 'X';
}

/** What a reader answers for a zombie rank (isZombie). */
export function zombieError(pid: number): MqdError {
  return mqdError(
    'MQD_E_ZOMBIE',
    `pid ${pid} has exited and is a zombie (state Z): its parent has not reaped it yet`,
  );
}

/** Pid of the process tracing `pid` (0 = none), or null when gone. */
export function tracerPid(pid: number): number | null {
  try {
    const m = /TracerPid:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return null;
  }
}
