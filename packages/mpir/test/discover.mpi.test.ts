// Discovery of REAL MPI jobs on this node (the hang watch): Open MPI 4.1.4 mpirun jobs
// of the ring fixture, one of them run by a real unprivileged user (uid 65534 via setpriv), are
// found by a /proc scan with the ranks their READY lines name; nothing is stopped or traced;
// MQD_WATCH=off shows as watch 'off'; a process that only fakes a rank variable is no rank; an
// ended job is no longer listed.
import { type ChildProcess, spawn } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { procStartTime } from '@mqd/core';
import {
  disposeAll,
  done,
  type FixtureJob,
  fixtureBinary,
  launchFixture,
  parseReadyLines,
  pending,
  type RankProcess,
  starterCommand,
  waitFor,
} from '@mqd/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DiscoveryCache, discoverJobs, isAlive, localHost, rankCounters } from '../src/index.js';
import { expectRunningFree } from './helpers/checks.js';

const NOBODY = 65534;
const host = localHost().short;
const jobs: FixtureJob[] = [];
const cleanups: (() => void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) c();
  await Promise.all(jobs.splice(0).map((j) => j.dispose()));
});
afterAll(disposeAll);

const keyOf = (pid: number) => `starter:${host}:${pid}:${procStartTime(pid)}`;

function expectJob(
  found: ReturnType<typeof discoverJobs>,
  starterPid: number,
  ranks: readonly RankProcess[],
) {
  const job = found.find((j) => j.key === keyOf(starterPid));
  expect(job, `a job keyed by starter ${starterPid}`).toBeDefined();
  // Discovery lists a job's ranks by rank; the READY lines come in whatever order the ranks
  // printed them (rank 1 before rank 0 on a loaded machine).
  expect(job?.ranks.map((r) => [r.rank, r.pid, r.startTime])).toEqual(
    [...ranks].sort((a, b) => a.rank - b.rank).map((r) => [r.rank, r.pid, procStartTime(r.pid)]),
  );
  expect(job).toMatchObject({ kind: 'starter', starterPid, worldSize: ranks.length });
  return job;
}

/** An mpirun job of ring_ssend started as uid 65534 in its own process group, killed by group. */
async function nobodyJob(np: number): Promise<{ starterPid: number; ranks: RankProcess[] }> {
  const cmd = starterCommand('openmpi', np, fixtureBinary('openmpi', 'ring_ssend'));
  const home = mkdtempSync('/tmp/mqd-discover-');
  chownSync(home, NOBODY, NOBODY);
  let out = '';
  const starter: ChildProcess = spawn(
    'setpriv',
    [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', cmd.file, ...cmd.args],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home, TMPDIR: home, ...cmd.env },
    },
  );
  const pgid = starter.pid ?? 0;
  cleanups.push(() => {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // the group is gone already
    }
    rmSync(home, { recursive: true, force: true });
  });
  starter.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  starter.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const ranks = await waitFor(
    () => {
      if (starter.exitCode !== null) throw new Error(`the starter exited: ${out}`);
      const r = parseReadyLines(out);
      return r.length === np ? done(r) : pending(`${r.length} READY lines`);
    },
    { timeoutMs: 60_000, what: `${np} READY lines` },
  );
  return { starterPid: pgid, ranks };
}

describe('discoverJobs on real Open MPI jobs', () => {
  it('finds root and uid-65534 jobs with their ranks, uid, key and watch setting; then forgets them', async () => {
    const cache = new DiscoveryCache();
    const mine = await launchFixture({ mpi: 'openmpi', fixture: 'ring_ssend', np: 2, waitFor: 'ready' });
    jobs.push(mine);
    const optOut = await launchFixture({
      mpi: 'openmpi',
      fixture: 'ring_ssend',
      np: 2,
      waitFor: 'ready',
      env: { MQD_WATCH: 'Off' },
    });
    jobs.push(optOut);
    const theirs = await nobodyJob(2);
    // A process that names a rank in its environment but maps no MPI library: not a rank.
    const fake = spawn('sleep', ['600'], {
      env: { ...process.env, OMPI_COMM_WORLD_RANK: '0' },
      stdio: 'ignore',
    });
    cleanups.push(() => fake.kill('SIGKILL'));
    const fakePid = fake.pid ?? 0;
    await waitFor(() => (procStartTime(fakePid) !== null ? done(true) : pending('sleep started')), {
      timeoutMs: 10_000,
      what: 'the fake rank',
    });

    const found = discoverJobs({ cache });
    const a = expectJob(found, mine.starterPid, mine.ranks);
    expect(a).toMatchObject({ uid: 0, watch: 'on' });
    expect(a?.command).toMatch(/mpirun/);
    // The start is the starter's, within a few seconds of now.
    expect(Math.abs((a?.startedAt ?? 0) - Date.now())).toBeLessThan(120_000);
    expect(expectJob(found, optOut.starterPid, optOut.ranks)).toMatchObject({ uid: 0, watch: 'off' });
    expect(expectJob(found, theirs.starterPid, theirs.ranks)).toMatchObject({ uid: NOBODY, watch: 'on' });
    expect(found.flatMap((j) => j.ranks.map((r) => r.pid))).not.toContain(fakePid);
    // Starters are never ranks.
    const starters = [mine.starterPid, optOut.starterPid, theirs.starterPid];
    expect(found.flatMap((j) => j.ranks.map((r) => r.pid)).filter((p) => starters.includes(p))).toEqual([]);

    // A second scan with the cache finds the same; nothing was stopped or traced by either.
    expect(discoverJobs({ cache })).toEqual(found);
    expectRunningFree([...starters, ...[mine, optOut, theirs].flatMap((j) => j.ranks.map((r) => r.pid))]);

    // Counters of the uid-65534 job's ranks read for that uid; refused for root's.
    const targets = theirs.ranks.map((r) => ({
      rank: r.rank,
      pid: r.pid,
      startTime: procStartTime(r.pid) ?? '',
    }));
    const asOwner = rankCounters(targets, NOBODY);
    expect(asOwner.errors).toEqual([]);
    // One answer per target, in the targets' order (the fixture lists its ranks as they came up).
    expect(asOwner.ranks.map((r) => r.rank)).toEqual(targets.map((t) => t.rank));
    expect(targets.map((t) => t.rank).sort((a, b) => a - b)).toEqual([0, 1]);
    expect(rankCounters(targets, 0).errors.map((e) => e.error.code)).toEqual([
      'MQD_E_FOREIGN_PROCESS',
      'MQD_E_FOREIGN_PROCESS',
    ]);

    // Ended: no longer discovered.
    const endedStarter = mine.starterPid;
    await mine.dispose();
    jobs.splice(jobs.indexOf(mine), 1);
    expect(isAlive(endedStarter)).toBe(false);
    const after = discoverJobs({ cache });
    expect(after.map((j) => j.starterPid)).not.toContain(endedStarter);
    expect(after.some((j) => j.starterPid === optOut.starterPid)).toBe(true);
  });

  it('MPICH: ranks under hydra_pmi_proxy are keyed by mpiexec, the outermost starter', async () => {
    const job = await launchFixture({ mpi: 'mpich', fixture: 'ring_ssend', np: 2, waitFor: 'ready' });
    jobs.push(job);
    const found = discoverJobs();
    expect(expectJob(found, job.starterPid, job.ranks)).toMatchObject({ uid: 0, watch: 'on' });
    expect(found.filter((j) => j.ranks.some((r) => job.ranks.some((x) => x.pid === r.pid)))).toHaveLength(1);
    expectRunningFree([job.starterPid, ...job.ranks.map((r) => r.pid)]);
  });
});
