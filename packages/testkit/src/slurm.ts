// A real one-node Slurm cluster for tests: Debian's munged, slurmctld and slurmd (Slurm 22.05),
// configured in a temporary directory (no systemd, no cgroups: proctrack/linuxproc,
// task/none), started as children of the test and waited on through `sinfo`, never a sleep.
// `submitFixture` sbatches a hung fixture with the MPI's own starter inside the allocation
// (MPICH's mpiexec then launches its proxies with srun) and waits for every rank's READY line.
// Everything started here is stopped by `dispose` (jobs cancelled, daemons killed by pid).
// A fixture may be submitted as an unprivileged user (`SubmitOptions.user`, through setpriv):
// the cluster's directory and slurm.conf are then world-readable (Slurm's clients read the
// conf as that user), and the job's script, output and working directory are the user's.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { cpus, hostname, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import type { MpiName } from './config.js';
import { fixtureBinary, mpiPrefix, requireMpi } from './fixtures.js';
import { descendants, identify, isRunning, listProcesses, type ProcIdentity } from './procfs.js';
import { done, failed, pending, waitFor } from './wait.js';

export interface SlurmCluster extends AsyncDisposable {
  /** SLURM_CONF for every Slurm command (and for `mqd ... --slurm`). */
  readonly conf: string;
  /** The environment to run Slurm commands with. */
  readonly env: NodeJS.ProcessEnv;
  readonly node: string;
  /** Runs a Slurm client command (sbatch, scontrol, squeue...) and returns its stdout. */
  run(cmd: string, args: readonly string[]): string;
  /**
   * The environment and the argv prefix (setpriv) that run a command as `user` against this
   * cluster, HOME in a directory of the cluster the user owns (for a child the caller spawns,
   * owns and kills).
   */
  asUser(user: SlurmUser): {
    readonly argv: readonly string[];
    readonly env: NodeJS.ProcessEnv;
    readonly home: string;
  };
  submitFixture(o: SubmitOptions): Promise<SlurmJob>;
  dispose(): Promise<void>;
}

export interface SubmitOptions {
  readonly mpi: MpiName;
  readonly fixture: string;
  readonly np?: number;
  readonly timeoutMs?: number;
  /** Submit as this unprivileged user (setpriv) instead of root. */
  readonly user?: SlurmUser;
}

export interface SlurmUser {
  readonly uid: number;
  readonly gid: number;
}

export interface SlurmJob {
  readonly jobId: number;
  /** The READY lines' pids, by rank. */
  readonly ranks: ReadonlyArray<{ rank: number; pid: number }>;
  readonly output: string;
}

export function slurmAvailable(): boolean {
  return ['/usr/sbin/slurmctld', '/usr/sbin/slurmd', '/usr/sbin/munged', '/usr/bin/sbatch'].every(existsSync);
}

const MUNGE_SOCKET = '/run/munge/munge.socket.2';

/** munged is per machine: start it once (as the munge user) unless it already answers. */
function ensureMunge(children: ChildProcess[]): Promise<void> {
  const answers = () => {
    try {
      execFileSync('/usr/bin/munge', ['-n'], { stdio: ['ignore', 'ignore', 'ignore'] });
      return true;
    } catch {
      return false;
    }
  };
  if (existsSync(MUNGE_SOCKET) && answers()) return Promise.resolve();
  mkdirSync('/run/munge', { recursive: true });
  execFileSync('chown', ['munge:munge', '/run/munge']);
  const m = spawn(
    'setpriv',
    ['--reuid', 'munge', '--regid', 'munge', '--init-groups', '/usr/sbin/munged', '--foreground', '--force'],
    { stdio: 'ignore' },
  );
  children.push(m);
  return waitFor(() => (answers() ? done(true) : pending('munged')), {
    timeoutMs: 20_000,
    what: 'munged answering',
  }).then(() => undefined);
}

function freePortPair(): [number, number] {
  // Ports above the ephemeral range's usual start are picked per process to let two test
  // files run their own clusters one after another without TIME_WAIT clashes.
  const base = 17_000 + ((process.pid * 7) % 2000) * 2;
  return [base, base + 1];
}

export async function startSlurm(): Promise<SlurmCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'mqd-slurm-'));
  // Other users' Slurm clients read slurm.conf here; state and spool stay root's (0700).
  chmodSync(dir, 0o755);
  const node = hostname().split('.')[0] ?? 'localhost';
  const [ctldPort, dPort] = freePortPair();
  for (const d of ['state', 'spool', 'log']) mkdirSync(join(dir, d), { mode: 0o700 });
  const conf = join(dir, 'slurm.conf');
  const memMb = Math.max(1024, Math.floor(totalmem() / 1048576) - 512);
  writeFileSync(
    conf,
    [
      'ClusterName=mqdtest',
      `SlurmctldHost=${node}`,
      `SlurmctldPort=${ctldPort}`,
      `SlurmdPort=${dPort}`,
      'SlurmUser=root',
      'SlurmdUser=root',
      'AuthType=auth/munge',
      `StateSaveLocation=${join(dir, 'state')}`,
      `SlurmdSpoolDir=${join(dir, 'spool')}`,
      `SlurmctldPidFile=${join(dir, 'slurmctld.pid')}`,
      `SlurmdPidFile=${join(dir, 'slurmd.pid')}`,
      `SlurmctldLogFile=${join(dir, 'log', 'slurmctld.log')}`,
      `SlurmdLogFile=${join(dir, 'log', 'slurmd.log')}`,
      'ProctrackType=proctrack/linuxproc',
      'TaskPlugin=task/none',
      'JobAcctGatherType=jobacct_gather/none',
      'SelectType=select/cons_tres',
      'SelectTypeParameters=CR_Core',
      'ReturnToService=2',
      'MpiDefault=none',
      'SchedulerType=sched/builtin',
      `NodeName=${node} CPUs=${cpus().length} RealMemory=${memMb} State=UNKNOWN`,
      'PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const env: NodeJS.ProcessEnv = { ...process.env, SLURM_CONF: conf };
  const children: ChildProcess[] = [];
  const jobs: number[] = [];
  const run = (cmd: string, args: readonly string[]) =>
    execFileSync(cmd, args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

  const stop = async () => {
    // Cancel our jobs and let slurmd end them (slurmstepd daemonises: it is not our child).
    const left = () => {
      try {
        return run('squeue', ['-h', '-o', '%i'])
          .split('\n')
          .filter((l) => jobs.includes(Number(l.trim())));
      } catch {
        return [];
      }
    };
    for (const id of jobs) {
      try {
        run('scancel', ['--signal=KILL', '--full', String(id)]);
      } catch {
        // already gone
      }
    }
    await waitFor(() => (left().length > 0 ? pending('jobs ending') : done(true)), {
      timeoutMs: 20_000,
      what: 'our Slurm jobs gone',
    }).catch(() => undefined);
    // Whatever still runs: our jobs' step daemons (matched by job id) and their trees, then
    // the daemons we started and their children.
    const steps = listProcesses().filter((p) => {
      const m = /^slurmstepd: \[(\d+)\./.exec(cmdline(p.pid));
      return m !== null && jobs.includes(Number(m[1]));
    });
    const roots = [
      ...steps.map((p) => p.pid),
      ...children.flatMap((c) => (c.pid === undefined ? [] : [c.pid])),
    ];
    const everything = [
      ...roots.flatMap((pid) => descendants(pid).map((p) => identify(p.pid))),
      ...roots.map((pid) => identify(pid)),
    ].filter((id): id is ProcIdentity => id !== undefined);
    for (const id of everything) tryKill(id.pid);
    await waitFor(
      () => (everything.some((id) => isRunning(id)) ? pending('Slurm processes exiting') : done(true)),
      { timeoutMs: 20_000, what: 'every Slurm process gone' },
    ).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    const mungeChildren: ChildProcess[] = [];
    await ensureMunge(mungeChildren);
    // munged outlives the cluster on purpose (it is the machine's), unless we started it.
    const ctld = spawn('/usr/sbin/slurmctld', ['-D', '-i', '-f', conf], { env, stdio: 'ignore' });
    children.push(ctld);
    const slurmd = spawn('/usr/sbin/slurmd', ['-D', '-f', conf], { env, stdio: 'ignore' });
    children.push(slurmd);
    children.push(...mungeChildren);
    await waitFor(
      () => {
        if (ctld.exitCode !== null)
          return failed(`slurmctld exited: ${tail(join(dir, 'log', 'slurmctld.log'))}`);
        if (slurmd.exitCode !== null) return failed(`slurmd exited: ${tail(join(dir, 'log', 'slurmd.log'))}`);
        try {
          const state = run('sinfo', ['-h', '-N', '-n', node, '-o', '%t']).trim();
          return state === 'idle' ? done(true) : pending(`node ${state}`);
        } catch {
          return pending('slurmctld not answering yet');
        }
      },
      { timeoutMs: 30_000, what: `Slurm node ${node} idle` },
    );
  } catch (e) {
    await stop();
    throw e;
  }

  const asUser = (user: SlurmUser) => {
    const home = join(dir, `home-${user.uid}`);
    if (!existsSync(home)) {
      mkdirSync(home, { mode: 0o700 });
      chownSync(home, user.uid, user.gid);
    }
    // Root's login names would follow the user's commands into the job's environment.
    const { USER: _user, LOGNAME: _logname, ...rest } = env;
    return {
      argv: ['setpriv', `--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups'],
      env: { ...rest, HOME: home },
      home,
    };
  };

  const sbatch = (args: readonly string[], user: SlurmUser | undefined): string => {
    if (user === undefined) return run('sbatch', args);
    const u = asUser(user);
    const [setpriv = 'setpriv', ...prefix] = u.argv;
    return execFileSync(setpriv, [...prefix, 'sbatch', ...args], {
      env: u.env,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  };

  const submitFixture = async (o: SubmitOptions): Promise<SlurmJob> => {
    requireMpi(o.mpi);
    const np = o.np ?? 4;
    const binary = fixtureBinary(o.mpi, o.fixture);
    // A user's job writes its output into (and runs in) a directory of its own.
    const jobDir = o.user === undefined ? dir : asUser(o.user).home;
    const output = join(jobDir, `${o.fixture}-${o.mpi}-${jobs.length}.out`);
    const script = join(jobDir, `${o.fixture}-${o.mpi}-${jobs.length}.sh`);
    writeFileSync(script, `#!/bin/sh\n${starterLine(o.mpi, np, binary)}\n`, { mode: 0o755 });
    if (o.user !== undefined) chownSync(script, o.user.uid, o.user.gid);
    const sbatchArgs = [
      '--parsable',
      `-N1`,
      `-n${np}`,
      '--overcommit',
      `--chdir=${jobDir}`,
      `--output=${output}`,
      `--job-name=${o.fixture}`,
      script,
    ];
    const out = sbatch(sbatchArgs, o.user).trim();
    const jobId = Number(out.split(';')[0]);
    if (!Number.isInteger(jobId)) throw new Error(`sbatch said '${out}'`);
    jobs.push(jobId);
    const ranks = await waitFor(
      () => {
        const text = existsSync(output) ? readFileSync(output, 'utf8') : '';
        const found = [...text.matchAll(/MQD_FIXTURE_READY rank=(\d+) pid=(\d+)/g)].map((m) => ({
          rank: Number(m[1]),
          pid: Number(m[2]),
        }));
        if (found.length >= np) return done(found.sort((a, b) => a.rank - b.rank));
        const state = run('squeue', ['-h', '-j', String(jobId), '-o', '%T']).trim();
        if (state !== '' && state !== 'RUNNING' && state !== 'PENDING' && state !== 'CONFIGURING') {
          return failed(`job ${jobId} is ${state}: ${text.slice(-2000)}`);
        }
        return pending(`${found.length}/${np} READY lines, job ${state || 'gone'}`);
      },
      { timeoutMs: o.timeoutMs ?? 60_000, what: `${np} READY lines of Slurm job ${jobId}` },
    );
    return { jobId, ranks, output };
  };

  return {
    conf,
    env,
    node,
    run,
    asUser,
    submitFixture,
    dispose: stop,
    [Symbol.asyncDispose]: stop,
  };
}

function starterLine(mpi: MpiName, np: number, binary: string): string {
  const bin = join(mpiPrefix(mpi), 'bin');
  if (mpi === 'mpich') {
    // Inside an allocation hydra launches its proxies with srun (bootstrap slurm).
    return `export MPIR_CVAR_POLLS_BEFORE_YIELD=1\nexec ${bin}/mpiexec -n ${np} ${binary}`;
  }
  return [
    'export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none',
    'export OMPI_MPIR_DO_NOT_WARN=1',
    `exec ${bin}/mpirun --allow-run-as-root --oversubscribe --bind-to none -np ${np} --mca mpi_yield_when_idle 1 ${binary}`,
  ].join('\n');
}

function tryKill(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').slice(-1500);
  } catch {
    return '(no log)';
  }
}
