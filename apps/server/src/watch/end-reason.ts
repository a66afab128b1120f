// Why a watched Slurm job ended, while slurmctld still remembers it: `scontrol show job ID -o`
// JobState. The aggregator may run where no Slurm client is installed: then null.
import type { SlurmRunner } from '@mqd/mpir';

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

export function slurmEndReason(run: SlurmRunner, slurmJob: string): string | null {
  if (!/^\d+$/.test(slurmJob)) return null;
  let out: string;
  try {
    out = run('scontrol', ['show', 'job', slurmJob, '-o']);
  } catch (e) {
    // No Slurm client here, or slurmctld forgot the job: the reason is unknown, not an error.
    if (e instanceof Error) return null;
    throw e;
  }
  const m = /(?:^|\s)JobState=([A-Z_]+)/.exec(out);
  const state = m?.[1];
  return state !== undefined && ENDED.has(state) ? state : null;
}
