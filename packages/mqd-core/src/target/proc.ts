// Small facts about a process from /proc that the debugger and the MPIR fallback need.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

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
  if (!env) return null;
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

export function processExists(pid: number): boolean {
  try {
    readFileSync(`/proc/${pid}/stat`);
    return true;
  } catch {
    return false;
  }
}

/** State letter from /proc/PID/stat (R, S, D, T, t, Z, ...), or null when gone. */
export function processState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return null;
  }
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
