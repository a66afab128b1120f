// Cluster jobs from the node agents' discovery reports: one Slurm job on two nodes is one job
// (same key), but reports of one key under different owners are never merged (a forged or
// recycled key must not pull another user's ranks into a job). Each cluster job is registered
// as a store job (as an attach would make it, method 'discovered'), so the dashboard's job
// views and SnapshotService work on it unchanged.
import { type DiscoveredJob, JobId, jobLabel } from '@mqd/model';
import { DISCOVERED_METHOD, newId } from '../fanout/fanout.js';
import type { LocatedRank } from '../shared/seams.js';
import type { JobRecord, WatchJobInfo } from '../shared/types.js';

/** One rank of a cluster job, with the node it runs on. */
export interface ClusterRank {
  readonly rank: number;
  readonly host: string;
  readonly pid: number;
  readonly startTime: string;
}

export interface ClusterJob {
  /** `${uid}:${key}`: the watch's identity of the job. */
  readonly id: string;
  readonly key: string;
  readonly uid: number;
  /** The first-reported node's entry (kind, starter, command, Slurm metadata). */
  readonly first: DiscoveredJob;
  /** Host of the first rank (or of the starter): the store job's host. */
  readonly host: string;
  readonly nodes: readonly string[];
  /** Sorted by world rank, each rank once. */
  readonly ranks: readonly ClusterRank[];
  /** `off` when any node's part of the job opted out (MQD_WATCH=off). */
  readonly watch: 'on' | 'off';
  /** Newest report time of any node, epoch ms. */
  readonly seenAt: number;
}

export const watchId = (uid: number, key: string): string => `${uid}:${key}`;

/** Merges the agents' reports into cluster jobs, ordered by id. */
export function mergeDiscovered(
  reports: readonly { host: string; job: DiscoveredJob; at: number }[],
): ClusterJob[] {
  const byId = new Map<
    string,
    { first: DiscoveredJob; ranks: Map<number, ClusterRank>; nodes: Set<string>; off: boolean; at: number }
  >();
  for (const { host, job, at } of reports) {
    const id = watchId(job.uid, job.key);
    let m = byId.get(id);
    if (m === undefined) {
      m = { first: job, ranks: new Map(), nodes: new Set(), off: false, at };
      byId.set(id, m);
    }
    m.nodes.add(host);
    m.off ||= job.watch === 'off';
    m.at = Math.max(m.at, at);
    // Fill in Slurm metadata another node knew.
    m.first = {
      ...m.first,
      ...(m.first.partition === undefined && job.partition !== undefined ? { partition: job.partition } : {}),
      ...(m.first.account === undefined && job.account !== undefined ? { account: job.account } : {}),
      ...(m.first.jobName === undefined && job.jobName !== undefined ? { jobName: job.jobName } : {}),
      startedAt: Math.min(m.first.startedAt, job.startedAt),
    };
    for (const r of job.ranks) {
      // A rank reported by two nodes (should not happen) keeps the first report.
      if (!m.ranks.has(r.rank))
        m.ranks.set(r.rank, { rank: r.rank, host, pid: r.pid, startTime: r.startTime });
    }
  }
  const out: ClusterJob[] = [];
  for (const [id, m] of byId) {
    const ranks = [...m.ranks.values()].sort((a, b) => a.rank - b.rank);
    const host = ranks[0]?.host ?? [...m.nodes][0] ?? '';
    out.push({
      id,
      key: m.first.key,
      uid: m.first.uid,
      first: m.first,
      host,
      nodes: [...m.nodes].sort(),
      ranks,
      watch: m.off ? 'off' : 'on',
      seenAt: m.at,
    });
  }
  return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** The program's name: Slurm's job name, else the program the command runs ("mpirun -np 4 ./ring" reads "ring"). */
export function programOf(job: Pick<DiscoveredJob, 'jobName' | 'command'>): string {
  if (job.jobName !== undefined && job.jobName !== '') return job.jobName;
  const program = jobLabel(job.command).program;
  return program === '' ? '?' : program;
}

/**
 * The program a command runs, as the command names it: "mpirun -np 4 /scratch/p/ring" reads
 * "/scratch/p/ring" (the first word whose file name is the program jobLabel finds).
 */
export function programPathOf(command: string): string {
  const program = jobLabel(command).program;
  const words = command.trim().split(/\s+/);
  return words.find((w) => w.slice(w.lastIndexOf('/') + 1) === program) ?? program;
}

/**
 * Whether a command is in a policy's `programs`: an entry with a `/` is a prefix of the path of
 * the program it runs or of its starter (its first word), any other entry either's file name.
 */
export function programInScope(command: string, programs: readonly string[]): boolean {
  const paths = [programPathOf(command), command.trim().split(/\s+/)[0] ?? ''];
  const names = paths.map((p) => p.slice(p.lastIndexOf('/') + 1));
  return programs.some((p) => (p.includes('/') ? paths.some((x) => x.startsWith(p)) : names.includes(p)));
}

export function infoOf(c: ClusterJob): WatchJobInfo {
  return {
    kind: c.first.kind,
    slurmJob: c.first.slurmJob ?? null,
    program: programOf(c.first),
    command: c.first.command,
    partition: c.first.partition ?? null,
    account: c.first.account ?? null,
    nodes: c.nodes,
    rankCount: c.ranks.length,
    startedAt: c.first.startedAt,
    watch: c.watch,
  };
}

/**
 * The store job of a cluster job: the starter (or the first rank) on the first rank's host,
 * its start time the identity. Registering it again (a new rank layout) keeps the record's
 * id and identity and replaces the layout.
 */
export function jobRecordOf(c: ClusterJob, createdAt: number, existing: JobRecord | null): JobRecord {
  const first = c.ranks[0];
  const starterPid = c.first.starterPid ?? first?.pid ?? 0;
  const starterStartTime = c.first.starterStartTime ?? first?.startTime ?? '';
  const ranks: LocatedRank[] = c.ranks.map((r) => ({
    rank: r.rank,
    pid: r.pid,
    host: r.host,
    startTime: r.startTime,
  }));
  return {
    id: existing?.id ?? JobId(`w${newId(9)}`),
    host: existing?.host ?? c.host,
    starterPid: existing?.starterPid ?? starterPid,
    starterStartTime: existing?.starterStartTime ?? starterStartTime,
    uid: c.uid,
    command: c.first.command,
    method: DISCOVERED_METHOD,
    ranks,
    createdAt: existing?.createdAt ?? createdAt,
    createdBy: existing?.createdBy ?? 'watch',
    endedAt: null,
  };
}
