// What process acquisition hands on: every rank of a job with its pid and host, whichever way
// they were found. Ranks are sorted by rank; byHost groups them by normalised host name, the
// unit an agent works on.
import { Pid, Rank } from '@mqd/model';

/**
 * How the ranks were found: the starter's MPIR table, its PMIx server's process table (Open MPI
 * 5's prterun), its descendants in /proc, pids given by the user, or a Slurm job's processes on
 * this node (`scontrol listpids`).
 */
export type AcquisitionMethod = 'mpir' | 'pmix' | 'process-tree' | 'pid-list' | 'slurm';
/**
 * What the caller asks for: `auto` reads the MPIR table, else asks the starter's PMIx server
 * (when it maps libpmix), else falls back to the process tree.
 */
export type MethodChoice = 'auto' | 'mpir' | 'pmix' | 'process-tree';

export const METHOD_CHOICES: readonly MethodChoice[] = ['auto', 'mpir', 'pmix', 'process-tree'];

export interface StarterInfo {
  readonly pid: Pid;
  /** /proc/PID/exe. */
  readonly exe: string;
  /** Real uid: whose job it is. */
  readonly uid: number;
  /** The command line, arguments joined by spaces. */
  readonly command: string;
}

export interface RankEntry {
  readonly rank: Rank;
  readonly pid: Pid;
  /** Normalised: short, lower case; this machine under its own short name (host.ts). */
  readonly host: string;
  /** As the starter recorded it (may be relative for hydra), or /proc/PID/exe for local discovery. */
  readonly executable: string;
}

export interface JobRanks {
  readonly method: AcquisitionMethod;
  /** Null for a pid list: there is no starter. */
  readonly starter: StarterInfo | null;
  readonly ranks: readonly RankEntry[];
  readonly byHost: Readonly<Record<string, readonly RankEntry[]>>;
  /** What the user should know that did not stop the acquisition (a rank gone, an order fixed). */
  readonly warnings: readonly string[];
}

export function makeJob(
  method: AcquisitionMethod,
  starter: StarterInfo | null,
  ranks: readonly RankEntry[],
  warnings: readonly string[] = [],
): JobRanks {
  const sorted = [...ranks].sort((a, b) => a.rank - b.rank);
  const byHost: Record<string, RankEntry[]> = {};
  for (const r of sorted) {
    const list = byHost[r.host];
    if (list) list.push(r);
    else byHost[r.host] = [r];
  }
  return { method, starter, ranks: sorted, byHost, warnings };
}

export const rankEntry = (rank: number, pid: number, host: string, executable: string): RankEntry => ({
  rank: Rank(rank),
  pid: Pid(pid),
  host,
  executable,
});
