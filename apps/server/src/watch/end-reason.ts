// Why a watched Slurm job ended, while slurmctld still remembers it: `scontrol show job ID -o`
// JobState. The aggregator may run where no Slurm client is installed, or slurmctld may have
// forgotten the job: then null. The query runs asynchronously (the aggregator's event loop
// must not wait for slurmctld); tests inject their own runner.
import { execFile } from 'node:child_process';

/** Runs a Slurm client command and gives its stdout (packages/mpir's SlurmRunner, or async). */
export type SlurmQuery = (cmd: string, args: readonly string[]) => string | Promise<string>;

export const defaultSlurmQuery: SlurmQuery = (cmd, args) =>
  new Promise((resolve, reject) => {
    execFile(cmd, [...args], { encoding: 'utf8', timeout: 10_000 }, (e, stdout) =>
      e ? reject(e) : resolve(stdout),
    );
  });

/** End states worth showing; running or pending ones mean the job did not end (yet). */
const ENDED = new Set([
  'TIMEOUT',
  'CANCELLED',
  'FAILED',
  'COMPLETED',
  'NODE_FAIL',
  'OUT_OF_MEMORY',
  'PREEMPTED',
  'BOOT_FAIL',
  'DEADLINE',
]);

export async function slurmEndReason(run: SlurmQuery, slurmJob: string): Promise<string | null> {
  if (!/^\d+$/.test(slurmJob)) return null;
  let out: string;
  try {
    out = await run('scontrol', ['show', 'job', slurmJob, '-o']);
  } catch (e) {
    // No Slurm client here, or slurmctld forgot the job: the reason is unknown, not an error.
    if (e instanceof Error) return null;
    throw e;
  }
  const m = /(?:^|\s)JobState=([A-Z_]+)/.exec(out);
  const state = m?.[1];
  return state !== undefined && ENDED.has(state) ? state : null;
}
