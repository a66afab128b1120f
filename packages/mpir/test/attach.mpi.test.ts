// Attach to REAL running jobs (Open MPI 4.1.4 mpirun, MPICH 4.0.2 hydra mpiexec): the MPIR table
// and the process-tree fallback must give the rank -> pid map the ranks themselves report
// (their READY lines and their environment), and every bad input a coded error. Nothing here
// stops or traces a process: after each test, no rank is stopped or traced.
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { rankFromEnviron } from '@mqd/core';
import { disposeAll, done, type FixtureJob, launchFixture, MPI_NAMES, pending, waitFor } from '@mqd/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  attachStarter,
  isAlive,
  type JobRanks,
  localHost,
  ranksFromPids,
  snapshotAttach,
} from '../src/index.js';
import { expectRunningFree, strayJobProcesses } from './helpers/checks.js';

let job: FixtureJob | null = null;
const others: number[] = [];
afterEach(async () => {
  if (job) expectRunningFree([job.starterPid, ...job.ranks.map((r) => r.pid)]);
  await job?.dispose();
  job = null;
  for (const pid of others.splice(0)) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
  expect(strayJobProcesses()).toEqual([]);
});
afterAll(async () => {
  await disposeAll();
});

const here = localHost();

function expectSameRanks(got: JobRanks, j: FixtureJob): void {
  expect(got.ranks.map((r) => [r.rank, r.pid])).toEqual(j.ranks.map((r) => [r.rank, r.pid]));
  // Each pid's own environment agrees on its rank.
  for (const r of got.ranks) expect([r.pid, rankFromEnviron(r.pid)?.rank]).toEqual([r.pid, r.rank]);
  expect(Object.keys(got.byHost)).toEqual([here.short]);
  expect(got.byHost[here.short]?.map((r) => r.rank)).toEqual(j.ranks.map((r) => r.rank));
  expect(got.starter?.pid).toBe(j.starterPid);
  expect(got.starter?.uid).toBe(process.getuid?.());
}

function spawnSleep(): number {
  const child = spawn('sleep', ['300'], { stdio: 'ignore', detached: true });
  child.unref();
  const pid = child.pid;
  if (pid === undefined) throw new Error('sleep did not start');
  others.push(pid);
  return pid;
}

describe.each(MPI_NAMES)('%s: attach to a running starter', (mpi) => {
  it('reads the MPIR table: every rank with its pid, host and executable', async () => {
    job = await launchFixture({ mpi, fixture: 'ring_ssend', np: 4, waitFor: 'ready' });
    for (const method of ['auto', 'mpir'] as const) {
      const r = attachStarter(job.starterPid, { method });
      expect(r.ok ? 'ok' : r.error.message).toBe('ok');
      if (!r.ok) return;
      expect(r.value.method).toBe('mpir');
      expectSameRanks(r.value, job);
      // Both starters record the path they were given (absolute here).
      expect(new Set(r.value.ranks.map((x) => x.executable))).toEqual(new Set([job.binary]));
      expect(r.value.warnings).toEqual([]);
    }
  });

  it('the forced process-tree fallback finds the same ranks', async () => {
    job = await launchFixture({ mpi, fixture: 'ring_ssend', np: 4, waitFor: 'ready' });
    const r = attachStarter(job.starterPid, { method: 'process-tree' });
    expect(r.ok ? 'ok' : r.error.message).toBe('ok');
    if (!r.ok) return;
    expect(r.value.method).toBe('process-tree');
    expectSameRanks(r.value, job);
    expect(new Set(r.value.ranks.map((x) => x.executable))).toEqual(new Set([job.binary]));
  });

  it('the ranks by pid (pid-list) are the same ranks, with or without a given rank', async () => {
    job = await launchFixture({ mpi, fixture: 'ring_ssend', np: 4, waitFor: 'ready' });
    const r = ranksFromPids(job.ranks.map((x) => x.pid));
    expect(r.ok ? [r.value.method, r.value.ranks.map((x) => [x.rank, x.pid])] : r.error.message).toEqual([
      'pid-list',
      job.ranks.map((x) => [x.rank, x.pid]),
    ]);
    const given = ranksFromPids(job.ranks.map((x) => ({ pid: x.pid, rank: x.rank })));
    expect(given.ok && given.value.starter).toBeNull();
    const twice = ranksFromPids(job.ranks.map((x) => ({ pid: x.pid, rank: 0 })));
    expect(twice.ok ? 'ok' : twice.error.code).toBe('MQD_E_BAD_INPUT');
  });

  it('snapshotAttach snapshots every rank found through the starter', async () => {
    job = await launchFixture({ mpi, fixture: 'ring_ssend', np: 4 });
    const r = await snapshotAttach(job.starterPid);
    expect(r.ok ? 'ok' : r.error.message).toBe('ok');
    if (!r.ok) return;
    expect(r.value.job.method).toBe('mpir');
    expect(r.value.result.snapshot.ranks.map((x) => [x.rank, x.pid, x.host, x.state.kind])).toEqual(
      job.ranks.map((x) => [x.rank, x.pid, here.short, 'ok']),
    );
  });

  it('a rank given for its starter is not a starter', async () => {
    job = await launchFixture({ mpi, fixture: 'ring_ssend', np: 2, waitFor: 'ready' });
    const rank1 = job.ranks[1];
    if (!rank1) throw new Error('no rank 1');
    for (const method of ['auto', 'mpir', 'process-tree'] as const) {
      const r = attachStarter(rank1.pid, { method });
      expect(r.ok ? 'ok' : [r.error.code, r.error.message.includes('is rank 1')]).toEqual([
        'MQD_E_NOT_STARTER',
        true,
      ]);
    }
  });

  it('a starter whose ranks are gone: MQD_E_JOB_ENDED', async () => {
    const j = await launchFixture({ mpi, fixture: 'ring_ssend', np: 2, waitFor: 'ready' });
    job = j;
    // Hold the starter so it cannot exit or clean up its table when its ranks die.
    process.kill(j.starterPid, 'SIGSTOP');
    try {
      for (const r of j.ranks) process.kill(r.pid, 'SIGKILL');
      await waitFor(() => (j.ranks.every((r) => !isAlive(r.pid)) ? done(true) : pending()), {
        timeoutMs: 10_000,
        what: 'the ranks to die',
      });
      for (const method of ['auto', 'mpir'] as const) {
        const r = attachStarter(j.starterPid, { method });
        expect(r.ok ? 'ok' : r.error.code).toBe('MQD_E_JOB_ENDED');
      }
      const tree = attachStarter(j.starterPid, { method: 'process-tree' });
      expect(tree.ok ? 'ok' : tree.error.code).toBe('MQD_E_NO_RANKS');
    } finally {
      process.kill(j.starterPid, 'SIGCONT');
    }
  });

  it('a starter after its job was disposed: MQD_E_NO_SUCH_PID', async () => {
    const j = await launchFixture({ mpi, fixture: 'ring_ssend', np: 2, waitFor: 'ready' });
    await j.dispose();
    const r = attachStarter(j.starterPid);
    expect(r.ok ? 'ok' : r.error.code).toBe('MQD_E_NO_SUCH_PID');
    const p = ranksFromPids(j.ranks.map((x) => x.pid));
    expect(p.ok ? 'ok' : p.error.code).toBe('MQD_E_NO_SUCH_PID');
  });

  it('another user may not attach: MQD_E_PTRACE_DENIED', async () => {
    job = await launchFixture({ mpi, fixture: 'ring_ssend', np: 2, waitFor: 'ready' });
    const probe = fileURLToPath(new URL('./helpers/attach-probe.ts', import.meta.url));
    const run = spawnSync(
      'setpriv',
      [
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        process.execPath,
        '--conditions',
        'source',
        '--import',
        'tsx',
        probe,
        String(job.starterPid),
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(run.status, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout) as { ok: boolean; error?: { code: string } };
    expect(result.ok ? 'ok' : result.error?.code).toBe('MQD_E_PTRACE_DENIED');
  });
});

describe('attach: not a starter at all', () => {
  it('a plain sleep process: MQD_E_NOT_STARTER, or MQD_E_NO_RANKS when the tree is forced', () => {
    const pid = spawnSleep();
    for (const method of ['auto', 'mpir'] as const) {
      const r = attachStarter(pid, { method });
      expect(r.ok ? 'ok' : r.error.code).toBe('MQD_E_NOT_STARTER');
    }
    const tree = attachStarter(pid, { method: 'process-tree' });
    expect(tree.ok ? 'ok' : tree.error.code).toBe('MQD_E_NO_RANKS');
    const asRank = ranksFromPids([pid]);
    expect(asRank.ok ? 'ok' : asRank.error.code).toBe('MQD_E_NOT_MPI');
    expectRunningFree([pid]);
  });

  it('a pid that does not exist: MQD_E_NO_SUCH_PID; not a pid at all: MQD_E_BAD_INPUT', () => {
    // pid_max is at most 2^22 on Linux: this pid cannot exist.
    const r = attachStarter(0x3ffffff0);
    expect(r.ok ? 'ok' : r.error.code).toBe('MQD_E_NO_SUCH_PID');
    expect(r.ok ? '' : r.error.message).toMatch(/^MQD_E_NO_SUCH_PID: no process \d+: check the pid/);
    const bad = attachStarter(-3);
    expect(bad.ok ? 'ok' : bad.error.code).toBe('MQD_E_BAD_INPUT');
    const none = ranksFromPids([]);
    expect(none.ok ? 'ok' : none.error.code).toBe('MQD_E_USAGE');
  });
});
