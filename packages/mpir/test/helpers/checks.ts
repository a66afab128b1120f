// Checks every mpir test ends with: nothing stopped, nothing traced, nothing left running.
import { readFileSync } from 'node:fs';
import { processState, tracerPid } from '@mqd/core';
import { listProcesses, liveDescendants } from '@mqd/testkit';
import { expect } from 'vitest';

/** Each pid still alive is neither stopped nor traced. */
export function expectRunningFree(pids: readonly number[]): void {
  for (const pid of pids) {
    const state = processState(pid);
    if (state === null || state === 'Z' || state === 'X') continue;
    expect([pid, state, tracerPid(pid)]).toEqual([pid, expect.not.stringMatching(/^[tT]$/), 0]);
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

/** Live processes anywhere on the machine whose command line contains `marker`. */
export function processesWith(marker: string): { pid: number; cmd: string }[] {
  return listProcesses()
    .filter((p) => p.pid !== process.pid && p.state !== 'Z' && p.state !== 'X')
    .map((p) => ({ pid: p.pid as number, cmd: cmdline(p.pid) }))
    .filter((p) => p.cmd.includes(marker));
}

/** Live descendants of this test process that belong to an MPI job or a launch. */
export function strayJobProcesses(): { pid: number; cmd: string }[] {
  return liveDescendants(process.pid)
    .map((pid) => ({ pid: pid as number, cmd: cmdline(pid) }))
    .filter((p) =>
      /mpirun|orterun|mpiexec|hydra_pmi_proxy|fixtures\/mpi|mqd-launch|timeout --foreground/.test(p.cmd),
    );
}
