// A process flood of uid 65534 against discovery (discovery-flood-scene.ts says how), the victim
// a real hung Open MPI 4.1.4 job of uid 65533: `mpirun -np 2 ring_ssend` (both ranks blocked in
// MPI_Ssend) started through setpriv, its ranks named by their READY lines. The watch samples it
// (real stops through the DLL) before and all through the flood.
import { spawn } from 'node:child_process';
import { chownSync, mkdtempSync } from 'node:fs';
import { done, fixtureBinary, parseReadyLines, pending, starterCommand, waitFor } from '@mqd/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanupFlood,
  floodAgainst,
  groups,
  loose,
  VICTIM,
  type VictimJob,
} from './discovery-flood-scene.js';

afterAll(cleanupFlood);
beforeAll(() => {
  expect(process.getuid?.()).toBe(0);
});

/** ring_ssend on 2 ranks as uid 65533, in a group of its own (killed with the others). */
async function hungJob(dir: string): Promise<VictimJob> {
  const program = fixtureBinary('openmpi', 'ring_ssend');
  const cmd = starterCommand('openmpi', 2, program);
  const home = mkdtempSync(`${dir}/home-`);
  chownSync(home, VICTIM, VICTIM);
  const starter = spawn(
    'setpriv',
    [`--reuid=${VICTIM}`, `--regid=${VICTIM}`, '--clear-groups', cmd.file, ...cmd.args],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home, TMPDIR: home, ...cmd.env },
    },
  );
  const pgid = starter.pid ?? 0;
  groups.push(pgid);
  let out = '';
  starter.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  starter.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const ranks = await waitFor(
    () => {
      if (starter.exitCode !== null) throw new Error(`the victim's mpirun exited: ${out}`);
      const r = parseReadyLines(out);
      return r.length === 2 ? done(r.map((x) => Number(x.pid))) : pending(`${r.length} READY lines`);
    },
    { timeoutMs: 60_000, what: "the victim's 2 READY lines" },
  );
  loose.push(...ranks);
  return { starter: pgid, ranks, program };
}

describe('a process flood of uid 65534 against a real hung MPI job of uid 65533', () => {
  it(
    "keeps the victim's and root's jobs live and snapshotable, and stores at most the per-uid bound of the flooder's",
    {
      timeout: 400_000,
    },
    () => floodAgainst(hungJob),
  );
});
