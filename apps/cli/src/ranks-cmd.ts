// `mqd ranks --attach PID [--method auto|mpir|process-tree] [--json]`
// `mqd ranks --pid PID[:RANK] ... [--json]`
import { procCredentials } from '@mqd/core';
import { type MqdError, ok, type Result } from '@mqd/model';
import {
  attachStarter,
  type JobRanks,
  localHost,
  METHOD_CHOICES,
  type MethodChoice,
  type PidTarget,
  parseSlurmJob,
  ranksFromPids,
  slurmRanks,
} from '@mqd/mpir';
import { commandArgs, usageError } from './command-args.js';
import { locateAsOwner } from './locate-as-owner.js';
import { parsePidArg } from './pid-arg.js';
import { type Io, RANKS_USAGE } from './usage.js';

const isMethod = (s: string): s is MethodChoice => (METHOD_CHOICES as readonly string[]).includes(s);

const usage = (io: Io, detail: string): number => usageError(io, RANKS_USAGE, detail);

/** The human form: one line for the job, one per rank, warnings last. */
export function formatJobRanks(job: JobRanks): string {
  const hosts = Object.keys(job.byHost);
  const head = job.starter
    ? `job of pid ${job.starter.pid} (${job.starter.command || job.starter.exe}), uid ${job.starter.uid}`
    : job.method === 'slurm'
      ? 'Slurm job ranks on this node'
      : 'ranks given by pid';
  const lines = [
    `${head}: ${job.ranks.length} rank${job.ranks.length === 1 ? '' : 's'} on ${hosts.length} host${hosts.length === 1 ? '' : 's'} (via ${job.method})`,
  ];
  const rows = [
    ['rank', 'pid', 'host', 'executable'],
    ...job.ranks.map((r) => [String(r.rank), String(r.pid), r.host, r.executable]),
  ];
  const widths = [0, 1, 2].map((c) => Math.max(...rows.map((row) => (row[c] ?? '').length)));
  for (const row of rows)
    lines.push(`  ${row.map((cell, c) => (c < 3 ? cell.padEnd(widths[c] ?? 0) : cell)).join('  ')}`);
  for (const w of job.warnings) lines.push(`warning: ${w}`);
  return lines.join('\n');
}

/**
 * attachStarter(pid) as the starter's owner. Run as root, a user's starter (its ELF and DWARF
 * files, its memory, and the libpmix it maps, which the PMIx method loads) is read by a locate
 * child that is that user (locate-as-owner.ts), never by root: a fake starter mapping its own
 * "libpmix.so" once had its constructor run as root here (docs/root-paths.md).
 * Root's own starter, and any starter when we are not root, are read in this process.
 */
async function attachForRanks(pid: number, method: MethodChoice): Promise<Result<JobRanks, MqdError>> {
  const owner = procCredentials(pid)?.uids[0];
  if (process.geteuid?.() !== 0 || owner === undefined || owner === 0) return attachStarter(pid, { method });
  const located = await locateAsOwner(pid, localHost(), { method });
  if (!located.ok) return located;
  // The owner's answer as it listed it, with the warnings for local ranks of another uid.
  return ok({ ...located.value.job, warnings: located.value.warnings });
}

export async function ranksCommand(argv: string[], io: Io): Promise<number> {
  const values = commandArgs(io, RANKS_USAGE, argv, {
    attach: { type: 'string' },
    slurm: { type: 'string' },
    method: { type: 'string' },
    pid: { type: 'string', multiple: true },
    json: { type: 'boolean' },
  });
  if (typeof values === 'number') return values;
  const pids = values.pid ?? [];
  if ([values.attach !== undefined, values.slurm !== undefined, pids.length > 0].filter(Boolean).length !== 1)
    return usage(io, 'give one of --attach PID, --slurm JOBID or --pid PID...');
  const method = values.method ?? 'auto';
  if (!isMethod(method)) return usage(io, `--method takes ${METHOD_CHOICES.join(', ')}, got '${method}'`);
  if (values.method !== undefined && values.attach === undefined)
    return usage(io, '--method goes with --attach');

  let result: Result<JobRanks, MqdError>;
  if (values.slurm !== undefined) {
    const spec = parseSlurmJob(values.slurm);
    if (!spec.ok) return usage(io, spec.error.message);
    const found = slurmRanks(spec.value);
    result = found.ok ? { ok: true, value: found.value.job } : found;
  } else if (values.attach !== undefined) {
    if (!/^\d+$/.test(values.attach)) return usage(io, `--attach takes a pid, got '${values.attach}'`);
    result = await attachForRanks(Number(values.attach), method);
  } else {
    const targets: PidTarget[] = [];
    for (const p of pids) {
      const t = parsePidArg(p);
      if ('code' in t) {
        io.err(t.message);
        return 2;
      }
      targets.push(t.rank !== undefined ? { pid: t.pid, rank: t.rank } : t.pid);
    }
    result = ranksFromPids(targets);
  }
  if (!result.ok) {
    io.err(result.error.message);
    return 1;
  }
  io.out(values.json ? JSON.stringify(result.value, null, 2) : formatJobRanks(result.value));
  return 0;
}
