// Ranks of a Slurm job, by job id: users know `squeue`'s id, not their mpirun's pid.
// Slurm says whose job it is (the uid the security model checks) and on which nodes it runs;
// `scontrol listpids` (answered by this node's slurmd) lists every process of the job here,
// whatever started it: srun directly, or mpirun/mpiexec inside the allocation (their ranks then
// run in the batch step, or in the srun step hydra used for its proxies). A rank is a listed
// process that maps an MPI library; its rank comes from the launcher's environment
// (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, then SLURM_PROCID). Processes of another uid
// than the job's are dropped, never read. Ranks on other nodes are their agents' to read.
// Ranks started by srun itself (`srun --mpi=pmi2|pmix`, no MPI starter) are step 0's tasks and
// carry their MPI's own variable (PMI_RANK from Slurm's pmi2, PMIX_RANK from its pmix plugin);
// a task with SLURM_PROCID alone got no world from the plugin and is likely a singleton
// (docs/mpi-facts.md "Ranks started by srun"): kept, with a warning saying so.
import { execFileSync } from 'node:child_process';
import { procCredentials, rankFromEnviron } from '@mqd/core';
import { err, type MqdError, mqdError, ok, type Result, SLURM_JOB_RE } from '@mqd/model';
import { type LocalHost, localHost, normaliseHost } from './host.js';
import { type JobRanks, makeJob, type RankEntry, rankEntry } from './job.js';
import { exeOf, mapsMpiLibrary } from './procfs.js';

export interface SlurmJobSpec {
  readonly jobId: number;
  /** A step id ('0', 'batch', 'extern'), or null for every step. */
  readonly step: string | null;
}

/** `JOBID` or `JOBID.STEP`. */
export function parseSlurmJob(s: string): Result<SlurmJobSpec, MqdError> {
  const t = s.trim();
  const m = SLURM_JOB_RE.test(t) ? /^(\d+)(?:\.(.+))?$/.exec(t) : null;
  if (!m?.[1]) {
    return err(mqdError('MQD_E_USAGE', `--slurm takes JOBID or JOBID.STEP (as squeue shows it), got '${s}'`));
  }
  return ok({ jobId: Number(m[1]), step: m[2] ?? null });
}

/** Runs a Slurm client command; tests and agents may pass their own (e.g. with SLURM_CONF). */
export type SlurmRunner = (cmd: string, args: readonly string[]) => string;

export const defaultSlurmRunner: SlurmRunner = (cmd, args) =>
  execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 20_000 });

export interface SlurmJobInfo {
  readonly jobId: number;
  readonly name: string;
  readonly state: string;
  readonly uid: number;
  readonly user: string;
  /** Expanded node names, normalised as hosts are (short, lower case). */
  readonly nodes: readonly string[];
  readonly command: string;
}

function slurmFailure(e: unknown, what: string): MqdError {
  const x = e as { code?: string; stderr?: string | Buffer; message?: string };
  if (x.code === 'ENOENT') {
    return mqdError('MQD_E_NO_SLURM', `${what}: Slurm's client commands are not installed on this node`);
  }
  const text = String(x.stderr ?? x.message ?? e).trim();
  if (/Invalid job id/i.test(text)) return mqdError('MQD_E_SLURM_JOB', `${what}: ${text}`);
  return mqdError('MQD_E_NO_SLURM', `${what}: ${text.slice(0, 500)}`);
}

/** Owner, state and nodes of a job, from `scontrol show job --oneliner`. */
export function slurmJobInfo(
  jobId: number,
  run: SlurmRunner = defaultSlurmRunner,
): Result<SlurmJobInfo, MqdError> {
  let line: string;
  try {
    line = run('scontrol', ['show', 'job', String(jobId), '--oneliner']);
  } catch (e) {
    return err(slurmFailure(e, `scontrol show job ${jobId}`));
  }
  const field = (k: string) => new RegExp(`(?:^|\\s)${k}=(\\S*)`).exec(line)?.[1] ?? null;
  const user = /(?:^|\s)UserId=([^(\s]*)\((\d+)\)/.exec(line);
  const state = field('JobState');
  const nodeList = field('NodeList');
  if (!user?.[2] || state === null) {
    return err(
      mqdError(
        'MQD_E_SLURM_JOB',
        `scontrol show job ${jobId} gave no owner or state: '${line.slice(0, 300)}'`,
      ),
    );
  }
  let nodes: string[] = [];
  if (nodeList && nodeList !== '(null)') {
    try {
      nodes = run('scontrol', ['show', 'hostnames', nodeList])
        .split('\n')
        .map((h) => h.trim())
        .filter((h) => h !== '')
        .map((h) => normaliseHost(h));
    } catch (e) {
      return err(slurmFailure(e, `scontrol show hostnames ${nodeList}`));
    }
  }
  return ok({
    jobId,
    name: field('JobName') ?? '',
    state,
    uid: Number(user[2]),
    user: user[1] ?? '',
    nodes,
    command: field('Command') ?? '',
  });
}

/** `scontrol listpids` rows on this node: pid and step of every process of the job. */
export function slurmLocalPids(
  spec: SlurmJobSpec,
  run: SlurmRunner = defaultSlurmRunner,
): Result<Array<{ pid: number; step: string }>, MqdError> {
  let out: string;
  try {
    out = run('scontrol', [
      'listpids',
      spec.step === null ? String(spec.jobId) : `${spec.jobId}.${spec.step}`,
    ]);
  } catch (e) {
    return err(slurmFailure(e, `scontrol listpids ${spec.jobId}`));
  }
  const rows: Array<{ pid: number; step: string }> = [];
  for (const l of out.split('\n').slice(1)) {
    const [pid, job, step] = l.trim().split(/\s+/);
    if (pid && /^\d+$/.test(pid) && Number(job) === spec.jobId && step) rows.push({ pid: Number(pid), step });
  }
  return ok(rows);
}

export interface SlurmRanks {
  readonly job: JobRanks;
  readonly info: SlurmJobInfo;
  /** Nodes of the job other than this one: their ranks are read by their own agents. */
  readonly otherNodes: readonly string[];
  /** Every process of the job on this node, as `scontrol listpids` listed it (ranks or not). */
  readonly processes: ReadonlyArray<{ readonly pid: number; readonly step: string }>;
}

/**
 * The warning for MPI processes whose only rank is Slurm's task id: no PMI_RANK, PMIX_RANK or
 * OMPI_COMM_WORLD_RANK means the MPI did not get its rank from srun's plugin (`--mpi=none`, or
 * a plugin its PMI client does not speak), so each is probably rank 0 of a world of its own.
 */
export function singletonWarning(pids: readonly number[]): string | null {
  if (pids.length === 0) return null;
  const list = pids.length > 8 ? `${pids.slice(0, 8).join(', ')}, ...` : pids.join(', ');
  return (
    `${pids.length} process(es) (pid ${list}) name their rank only in SLURM_PROCID (no PMI_RANK, ` +
    'PMIX_RANK or OMPI_COMM_WORLD_RANK): each is probably a singleton, rank 0 of its own ' +
    "MPI_COMM_WORLD; start the job with srun's --mpi plugin its MPI speaks (MPICH: pmi2, Open MPI: pmix)"
  );
}

/** The ranks of a Slurm job on this node. */
export function slurmRanks(
  spec: SlurmJobSpec,
  opts: { run?: SlurmRunner; here?: LocalHost } = {},
): Result<SlurmRanks, MqdError> {
  const run = opts.run ?? defaultSlurmRunner;
  const here = opts.here ?? localHost();
  const info = slurmJobInfo(spec.jobId, run);
  if (!info.ok) return info;
  if (info.value.state !== 'RUNNING' && info.value.state !== 'SUSPENDED') {
    return err(
      mqdError(
        info.value.state === 'PENDING' || info.value.state === 'CONFIGURING'
          ? 'MQD_E_SLURM_JOB'
          : 'MQD_E_JOB_ENDED',
        `Slurm job ${spec.jobId} is ${info.value.state}`,
      ),
    );
  }
  const otherNodes = info.value.nodes.filter((n) => !here.aliases.has(n));
  const onThisNode = info.value.nodes.length === 0 || otherNodes.length < info.value.nodes.length;
  const rows = onThisNode ? slurmLocalPids(spec, run) : ok([]);
  if (!rows.ok) return rows;
  const warnings: string[] = [];
  const ranks: RankEntry[] = [];
  const seen = new Map<number, number>();
  const procIdOnly: number[] = [];
  for (const { pid } of rows.value) {
    const mpi = mapsMpiLibrary(pid);
    if (!mpi.ok || !mpi.value) continue; // a starter, a proxy, a shell: not a rank
    const creds = procCredentials(pid);
    if (creds === null) continue; // exited since listpids
    if (creds.uids[0] !== info.value.uid) {
      warnings.push(
        `pid ${pid} belongs to uid ${creds.uids[0]}, not to the job's owner ${info.value.uid}: not read`,
      );
      continue;
    }
    const named = rankFromEnviron(pid);
    const rank = named?.rank;
    if (rank === undefined) {
      warnings.push(`pid ${pid} maps an MPI library but its environment names no rank: not read`);
      continue;
    }
    const other = seen.get(rank);
    if (other !== undefined) {
      warnings.push(`pids ${other} and ${pid} both say rank ${rank}: kept ${other}`);
      continue;
    }
    seen.set(rank, pid);
    if (named?.variable === 'SLURM_PROCID') procIdOnly.push(pid);
    ranks.push(rankEntry(rank, pid, here.short, exeOf(pid) ?? ''));
  }
  const singletons = singletonWarning(procIdOnly);
  if (singletons !== null) warnings.push(singletons);
  if (otherNodes.length > 0) {
    warnings.push(
      `ranks on ${otherNodes.join(', ')} are read by those nodes' agents (mqd agent), not from here`,
    );
  }
  if (ranks.length === 0 && otherNodes.length === 0) {
    return err(
      mqdError(
        'MQD_E_NO_RANKS',
        `Slurm job ${spec.jobId} has no MPI process on this node (${rows.value.length} process(es) listed)`,
      ),
    );
  }
  return ok({
    job: makeJob('slurm', null, ranks, warnings),
    info: info.value,
    otherNodes,
    processes: rows.value,
  });
}
