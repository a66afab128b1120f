// Launch REAL jobs under the tool: the starter is held at MPIR_Breakpoint with a complete table,
// (Open MPI) its ranks are held at the end of MPI_Init, a first snapshot can be taken there,
// and after the release ring_ok runs to completion with exit 0. Every failure is a coded error
// that leaves nothing stopped, traced or running.
import { dirname } from 'node:path';
import { processState, rankFromEnviron, Snapshotter, tracerPid } from '@mqd/core';
import { fixtureBinary, MPI_NAMES, type MpiName, parseReadyLines, starterCommand } from '@mqd/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { isAlive, type JobRanks, type LaunchedJob, launchUnderTool, localHost } from '../src/index.js';
import { expectRunningFree, processesWith, strayJobProcesses } from './helpers/checks.js';

let launched: LaunchedJob<unknown> | null = null;
const seenPids: number[] = [];
const snapshotter = new Snapshotter();
afterEach(async () => {
  expectRunningFree(seenPids);
  await launched?.dispose();
  launched = null;
  expect(seenPids.filter(isAlive)).toEqual([]);
  seenPids.length = 0;
  expect(strayJobProcesses()).toEqual([]);
});
afterAll(async () => {
  await snapshotter.dispose();
});

const here = localHost();

function command(mpi: MpiName, fixture: string, np: number, extraEnv: Record<string, string> = {}) {
  const binary = fixtureBinary(mpi, fixture);
  const cmd = starterCommand(mpi, np, binary);
  return {
    binary,
    argv: [cmd.file, ...cmd.args],
    opts: { env: { ...process.env, ...cmd.env, ...extraEnv }, cwd: dirname(binary), stdio: 'pipe' as const },
  };
}

interface AtBreakpoint {
  readonly starterState: string | null;
  readonly starterTracer: number | null;
  readonly ranksAlive: boolean;
  readonly readyLinesSoFar: number;
  readonly snapshot: readonly (readonly [number, number, string])[] | null;
}

describe.each(MPI_NAMES)('%s: launch under the tool', (mpi) => {
  it('holds the starter at MPIR_Breakpoint with the table, then ring_ok runs to completion', async () => {
    const np = 4;
    const { binary, argv, opts } = command(mpi, 'ring_ok', np);
    let outputAtBreakpoint = (): string => '';
    const r = await launchUnderTool<AtBreakpoint>(argv, {
      ...opts,
      atBreakpoint: async (job: JobRanks) => {
        const starter = job.starter?.pid ?? 0;
        seenPids.push(starter, ...job.ranks.map((x) => x.pid));
        // Open MPI's ranks wait at the end of MPI_Init for mpirun's release: a snapshot sees them.
        const snap =
          mpi === 'openmpi'
            ? (
                await snapshotter.snapshot(job.ranks.map((x) => ({ pid: x.pid, rank: x.rank })))
              ).snapshot.ranks.map((x) => [x.rank, x.pid, x.state.kind] as const)
            : null;
        return {
          starterState: processState(starter),
          starterTracer: tracerPid(starter),
          ranksAlive: job.ranks.every((x) => isAlive(x.pid)),
          readyLinesSoFar: parseReadyLines(outputAtBreakpoint()).length,
          snapshot: snap,
        };
      },
    });
    expect(r.ok ? 'ok' : r.error.message).toBe('ok');
    if (!r.ok) return;
    launched = r.value;
    outputAtBreakpoint = r.value.output;
    const { job, atBreakpoint } = r.value;
    expect(job.method).toBe('mpir');
    expect(job.starter?.pid).toBe(r.value.starterPid);
    expect(job.ranks.map((x) => [x.rank, x.host, x.executable])).toEqual(
      Array.from({ length: np }, (_, i) => [i, here.short, binary]),
    );
    // At the breakpoint the starter was in a ptrace-stop, traced by this process.
    expect(atBreakpoint?.starterState).toBe('t');
    expect(atBreakpoint?.starterTracer).toBe(process.pid);
    expect(atBreakpoint?.ranksAlive).toBe(true);
    if (mpi === 'openmpi') {
      expect(atBreakpoint?.readyLinesSoFar).toBe(0); // held inside MPI_Init
      expect(atBreakpoint?.snapshot).toEqual(job.ranks.map((x) => [x.rank, x.pid, 'ok']));
    }
    // Released: the starter runs untraced.
    expectRunningFree([r.value.starterPid, ...job.ranks.map((x) => x.pid)]);
    const exit = await r.value.wait();
    const out = r.value.output();
    expect(exit, out).toEqual({ code: 0, signal: null });
    // The table's pids are the pids the ranks report themselves.
    expect(
      parseReadyLines(out)
        .map((x) => [x.rank, x.pid])
        .sort((a, b) => (a[0] ?? 0) - (b[0] ?? 0)),
    ).toEqual(job.ranks.map((x) => [x.rank, x.pid]));
    expect(out.match(/MQD_FIXTURE_DONE/g)?.length).toBe(np);
  });

  it('follows a wrapper that execs the starter (env VAR=... mpirun ...)', async () => {
    const { argv, opts } = command(mpi, 'ring_ok', 2);
    const r = await launchUnderTool(['env', 'MQD_WRAPPED=1', ...argv], opts);
    expect(r.ok ? 'ok' : r.error.message).toBe('ok');
    if (!r.ok) return;
    launched = r.value;
    seenPids.push(r.value.starterPid, ...r.value.job.ranks.map((x) => x.pid));
    expect(r.value.job.ranks.map((x) => x.rank)).toEqual([0, 1]);
    expect(await r.value.wait()).toEqual({ code: 0, signal: null });
  });

  it('a callback that throws: the error propagates, the job is killed, nothing stays traced', async () => {
    const { argv, opts } = command(mpi, 'ring_ok', 2);
    const pids: number[] = [];
    await expect(
      launchUnderTool(argv, {
        ...opts,
        atBreakpoint: (job) => {
          pids.push(job.starter?.pid ?? 0, ...job.ranks.map((x) => x.pid));
          throw new Error('callback failed on purpose');
        },
      }),
    ).rejects.toThrow('callback failed on purpose');
    expect(pids.length).toBe(3);
    seenPids.push(...pids);
    expect(pids.filter(isAlive)).toEqual([]);
  });
});

describe('launch: Open MPI starter that fails before its table', () => {
  it('mpirun with a missing program: MQD_E_JOB_ENDED, nothing left', async () => {
    const { argv, opts } = command('openmpi', 'ring_ok', 2);
    argv[argv.length - 1] = '/nonexistent/mqd-no-such-program';
    const r = await launchUnderTool(argv, opts);
    expect(r.ok ? 'ok' : r.error.code).toBe('MQD_E_JOB_ENDED');
    expect(processesWith('mqd-no-such-program')).toEqual([]);
  });
});

describe('launch: MPICH ranks held on MPIR_debug_gate (MPIEXEC_DEBUG)', () => {
  it('are released once they reach MPI_Init, and ring_ok completes', async () => {
    const { argv, opts } = command('mpich', 'ring_ok', 2, { MPIEXEC_DEBUG: '1' });
    const r = await launchUnderTool(argv, opts);
    expect(r.ok ? 'ok' : r.error.message).toBe('ok');
    if (!r.ok) return;
    launched = r.value;
    seenPids.push(r.value.starterPid, ...r.value.job.ranks.map((x) => x.pid));
    expect(r.value.job.warnings).toEqual([]);
    for (const x of r.value.job.ranks) {
      const env = rankFromEnviron(x.pid);
      if (env) expect(env.rank).toBe(x.rank);
    }
    expect(await r.value.wait()).toEqual({ code: 0, signal: null });
  });
});

describe('launch: not a starter', () => {
  it('a program that does not exist: MQD_E_BAD_INPUT', async () => {
    const r = await launchUnderTool(['/nonexistent/mpirun', '-np', '2', 'x']);
    expect(r.ok ? 'ok' : r.error.code).toBe('MQD_E_BAD_INPUT');
    const empty = await launchUnderTool([]);
    expect(empty.ok ? 'ok' : empty.error.code).toBe('MQD_E_USAGE');
  });

  it('a program without MPIR symbols: MQD_E_NOT_STARTER, and it is killed', async () => {
    const marker = '4242.125';
    const r = await launchUnderTool(['sleep', marker], { stdio: 'ignore' });
    expect(r.ok ? 'ok' : r.error.code).toBe('MQD_E_NOT_STARTER');
    expect(processesWith(marker)).toEqual([]);
  });

  it('a wrapper that exits without exec: MQD_E_JOB_ENDED', async () => {
    const r = await launchUnderTool(['sh', '-c', 'exit 3'], { stdio: 'ignore' });
    expect(r.ok ? 'ok' : r.error.message).toMatch(/^MQD_E_JOB_ENDED: .*exited \(code 3\)/);
  });
});
