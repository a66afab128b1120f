// discoverJobs' rules on real processes that look like ranks without being an MPI job: `sleep`
// with Open MPI's libmpi.so preloaded (it maps an MPI library) and a rank variable in its
// environment. Slurm grouping and what Slurm's listpids allows, one uid per entry (a process
// of uid 65534 via setpriv naming the same job), the starter walk and its MQD_WATCH, clipping
// of what users name. No MPI job is started and nothing is stopped.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { procStartTime } from '@mqd/core';
import { done, mpiPrefix, pending, waitFor } from '@mqd/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { DiscoveryCache, discoverJobs, localHost, type SlurmRunner } from '../src/index.js';
import { expectRunningFree } from './helpers/checks.js';

const NOBODY = 65534;
const host = localHost().short;
const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const c of children.splice(0)) {
    try {
      process.kill(-(c.pid ?? 0), 'SIGKILL'); // its own group: a shell's sleep goes too
    } catch {
      // gone already
    }
  }
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const libmpi = () => join(mpiPrefix('openmpi'), 'lib', 'libmpi.so');

/** `sleep 600` (or `argv`) with libmpi preloaded and `env`, optionally as uid 65534. */
function fakeRank(env: Record<string, string>, o: { nobody?: boolean; argv?: string[] } = {}): ChildProcess {
  const argv = o.argv ?? ['sleep', '600'];
  const cmd = o.nobody
    ? ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', ...argv]
    : argv;
  const c = spawn(cmd[0] ?? 'sleep', cmd.slice(1), {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', LD_PRELOAD: libmpi(), ...env },
    stdio: 'ignore',
    detached: true,
  });
  children.push(c);
  return c;
}

/** Waits until `pid` runs `comm` (exec done, environment in place). */
async function execd(pid: number, comm = 'sleep'): Promise<number> {
  return waitFor(
    () => {
      let now = '';
      try {
        now = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      } catch {
        // not yet there
      }
      return now === comm ? done(pid) : pending(`pid ${pid} runs ${now || 'nothing'}`);
    },
    { timeoutMs: 10_000, what: `pid ${pid} to exec ${comm}` },
  );
}

const slurmEnv = (rank: number) => ({
  SLURM_JOB_ID: '4711',
  PMI_RANK: String(rank),
  PMI_SIZE: '3',
  SLURM_JOB_NAME: `ring\u0007${'n'.repeat(300)}`,
  SLURM_JOB_PARTITION: 'batch',
  SLURM_JOB_ACCOUNT: 'physics',
});

describe('discoverJobs: Slurm jobs', () => {
  it('groups a Slurm job by id, one entry per uid, names clipped; listpids keeps only its pids', async () => {
    const r0 = await execd(fakeRank(slurmEnv(0)).pid ?? 0);
    const r1 = await execd(fakeRank(slurmEnv(1)).pid ?? 0);
    const r2 = await execd(fakeRank(slurmEnv(2), { nobody: true }).pid ?? 0);
    const mine = (found: ReturnType<typeof discoverJobs>) => found.filter((j) => j.key === 'slurm:4711');

    const found = mine(discoverJobs({ host }));
    expect(found.map((j) => [j.uid, j.ranks.map((r) => [r.rank, r.pid, r.startTime])])).toEqual([
      [
        0,
        [
          [0, r0, procStartTime(r0)],
          [1, r1, procStartTime(r1)],
        ],
      ],
      [NOBODY, [[2, r2, procStartTime(r2)]]],
    ]);
    const [job] = found;
    expect(job).toMatchObject({
      kind: 'slurm',
      slurmJob: '4711',
      partition: 'batch',
      account: 'physics',
      worldSize: 3,
      watch: 'on',
    });
    expect(job?.starterPid).toBeUndefined();
    expect(job?.jobName).toHaveLength(128);
    expect(job?.jobName).toMatch(/^ringn+…$/); // the control character is gone
    expect(job?.command).toBe('sleep 600');

    // Where slurmd answers, only what listpids lists for the job is kept; asked once per cache.
    const calls: string[][] = [];
    const listing =
      (pids: number[]): SlurmRunner =>
      (cmd, args) => {
        calls.push([cmd, ...args]);
        return `PID      JOBID    STEPID   LOCALID GLOBALID\n${pids.map((p) => `${p} 4711 0 0 0`).join('\n')}\n`;
      };
    const cache = new DiscoveryCache();
    const onlyR0 = mine(discoverJobs({ host, cache, slurm: listing([r0]) }));
    expect(onlyR0.map((j) => j.ranks.map((r) => r.pid))).toEqual([[r0]]);
    expect(mine(discoverJobs({ host, cache, slurm: listing([r0]) }))).toEqual(onlyR0);
    expect(calls).toEqual([['scontrol', 'listpids', '4711']]);
    // slurmd says the job has nothing here: a faked SLURM_JOB_ID is no job.
    const unknown: SlurmRunner = () => {
      throw Object.assign(new Error('failed'), {
        stderr: 'slurm_job_step_get_pids: Invalid job id specified',
      });
    };
    expect(mine(discoverJobs({ host, slurm: unknown }))).toEqual([]);
    // Slurm cannot say (no slurmd here): kept unchecked, and logged.
    const lines: string[] = [];
    const broken: SlurmRunner = () => {
      throw Object.assign(new Error('failed'), { stderr: 'fetch_config: DNS SRV lookup failed' });
    };
    expect(mine(discoverJobs({ host, slurm: broken, log: (l) => lines.push(l) })).length).toBe(2);
    expect(lines.join('\n')).toMatch(/scontrol listpids 4711 failed/);
    expectRunningFree([r0, r1, r2]);
  });
});

describe('discoverJobs: jobs outside Slurm', () => {
  it('keys ranks by their outermost starter, takes its MQD_WATCH, clips command lines; fakes without libmpi are no ranks', async () => {
    // A shell that runs as `mpirun` (comm), starting two "ranks": the starter of a job.
    const dir = mkdtempSync('/tmp/mqd-discover-');
    dirs.push(dir);
    symlinkSync('/bin/sh', join(dir, 'mpirun'));
    const script =
      'MQD_WATCH=on OMPI_COMM_WORLD_RANK=0 sleep 600 & MQD_WATCH=on OMPI_COMM_WORLD_RANK=1 sleep 600 & wait';
    const starter = fakeRank(
      { MQD_WATCH: 'no', OMPI_COMM_WORLD_SIZE: '2' },
      { argv: [join(dir, 'mpirun'), '-c', script] },
    );
    const starterPid = await execd(starter.pid ?? 0, 'mpirun');
    // A rank of no starter, with a long command line; and a fake rank mapping no MPI library.
    const long = await execd(
      fakeRank(
        { OMPI_COMM_WORLD_RANK: '0' },
        { argv: ['sleep', '600', ...Array.from({ length: 2000 }, () => '0.000')] },
      ).pid ?? 0,
    );
    const noMpi = await execd(fakeRank({ OMPI_COMM_WORLD_RANK: '0', LD_PRELOAD: '' }).pid ?? 0);

    const under = await waitFor(
      () => {
        const j = discoverJobs({ host }).find((x) => x.starterPid === starterPid);
        return j?.ranks.length === 2 ? done(j) : pending(`${j?.ranks.length ?? 0} ranks under the starter`);
      },
      { timeoutMs: 10_000, what: 'both ranks under the fake mpirun' },
    );
    expect(under).toMatchObject({
      key: `starter:${host}:${starterPid}:${procStartTime(starterPid)}`,
      kind: 'starter',
      starterStartTime: procStartTime(starterPid),
      uid: 0,
      worldSize: 2,
      watch: 'off', // the starter's MQD_WATCH=no
    });
    expect(under.command).toMatch(/mpirun -c /);
    expect(under.ranks.map((r) => r.rank)).toEqual([0, 1]);
    const found = discoverJobs({ host });
    const alone = found.find((j) => j.ranks.some((r) => r.pid === long));
    expect(alone).toMatchObject({
      key: `starter:${host}:${long}:${procStartTime(long)}`,
      starterPid: long,
      watch: 'on',
    });
    expect(alone?.command).toHaveLength(4096);
    expect(found.flatMap((j) => j.ranks.map((r) => r.pid))).not.toContain(noMpi);
    expect(found.flatMap((j) => j.ranks.map((r) => r.pid))).not.toContain(starterPid);
  });
});

describe('discovery and counters stop nothing', () => {
  it('make no ptrace, kill or process_vm_readv call (a scan and a counters read under strace)', async () => {
    const rank = await execd(fakeRank({ OMPI_COMM_WORLD_RANK: '0' }).pid ?? 0);
    const dir = mkdtempSync('/tmp/mqd-discover-strace-');
    dirs.push(dir);
    const log = join(dir, 'strace.log');
    const probe = fileURLToPath(new URL('./helpers/discover-probe.ts', import.meta.url));
    const run = spawnSync(
      'strace',
      [
        '-f',
        '-qq',
        '-e',
        'trace=ptrace,kill,tkill,tgkill,process_vm_readv,pidfd_send_signal',
        '-o',
        log,
        process.execPath,
        '--conditions',
        'source',
        '--import',
        'tsx',
        probe,
        `${rank}:${procStartTime(rank)}:0`,
      ],
      { encoding: 'utf8', timeout: 120_000 },
    );
    expect(run.status, run.stderr).toBe(0);
    const out = JSON.parse(run.stdout) as {
      jobs: { ranks: { pid: number }[] }[];
      counters: { ranks: { rank: number }[] }[];
    };
    // The scan and the read did happen...
    expect(out.jobs.some((j) => j.ranks.some((r) => r.pid === rank))).toBe(true);
    expect(out.counters[0]?.ranks.map((r) => r.rank)).toEqual([0]);
    // ...and no process was traced or had its memory read, and neither the rank nor a process
    // group was signalled (tsx's esbuild, a Go program, preempts its own threads with SIGURG).
    const lines = readFileSync(log, 'utf8').split('\n');
    const calls = lines.filter((l) => {
      const m = /^\d+ (ptrace|kill|tkill|tgkill|process_vm_readv|pidfd_send_signal)\((-?\d+)?/.exec(l);
      if (!m) return false;
      if (m[1] === 'ptrace' || m[1] === 'process_vm_readv' || m[1] === 'pidfd_send_signal') return true;
      return m[2] === undefined || m[2] === String(rank) || Number(m[2]) <= 0;
    });
    expect(calls).toEqual([]);
    expect(lines.some((l) => l.includes(`(${rank},`) || l.includes(`(${rank})`))).toBe(false);
    expectRunningFree([rank]);
  });
});
