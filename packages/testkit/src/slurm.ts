// A real one-node Slurm cluster for tests: Debian's munged, slurmctld and slurmd (Slurm 22.05),
// configured in a temporary directory (no systemd, no cgroups: proctrack/linuxproc,
// task/none), started as children of the test and waited on through `sinfo`, never a sleep.
// `submitFixture` sbatches a hung fixture with the MPI's own starter inside the allocation
// (MPICH's mpiexec then launches its proxies with srun) and waits for every rank's READY line.
// Everything started here is stopped by `dispose` (jobs cancelled, daemons killed by pid).
// A fixture may be submitted as an unprivileged user (`SubmitOptions.user`, through setpriv):
// the cluster's directory and slurm.conf are then world-readable (Slurm's clients read the
// conf as that user), and the job's script, output and working directory are the user's.
// `startSlurm({netns})` makes a multi-node cluster instead: one slurmd per network namespace
// (the caller's, e.g. from netns.ts's createCluster), NodeAddr inside it, slurmctld in another. Every
// daemon of a node runs in the node's network namespace with a UTS namespace of its own whose
// host name is the node's, and a private mount of the cluster's hosts file over /etc/hosts
// (nsenter + unshare, see `onNode`), so slurmd, slurmstepd and the MPI starters and ranks it
// runs see `hostname` = their node and resolve every node's name to its NodeAddr. nsenter
// (unlike `ip netns exec`) keeps the machine's /sys, where slurmd looks for cgroupfs.
// `submitFixture({launcher: 'srun'})` starts the ranks with `srun --mpi=<plugin>` instead, in
// step 0 (no MPI starter): MPICH's simple PMI client speaks Slurm's pmi2 plugin, Open MPI's
// internal PMIx client Slurm's pmix plugin (docs/mpi-facts.md "Ranks started by srun").
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
import { type AnyMpiName, MPI_FAMILIES, type MpiName } from './config.js';
import { fixtureBinary, mpiPrefix, requireMpi } from './fixtures.js';
import { starterCommand } from './launch.js';
import { descendants, identify, isRunning, listProcesses, type ProcIdentity, readEnviron } from './procfs.js';
import { done, failed, pending, waitFor } from './wait.js';

export interface SlurmCluster extends AsyncDisposable {
  /** SLURM_CONF for every Slurm command (and for `mqd ... --slurm`). */
  readonly conf: string;
  /** The environment to run Slurm commands with. */
  readonly env: NodeJS.ProcessEnv;
  /** The (first) node's name. */
  readonly node: string;
  /** Every node's name, in slurm.conf's order. */
  readonly nodes: readonly string[];
  /**
   * The cluster's one partition (the default), named for this cluster alone: a watch scoped to
   * it (`--watch-partitions`) leaves alone the MPI jobs of anything else on the machine.
   */
  readonly partition: string;
  /**
   * argv that runs `argv` as on node `name`: in its network namespace, with its host name and
   * the cluster's hosts file (a one-node cluster: `argv` itself). The caller spawns and kills it.
   */
  onNode(name: string, argv: readonly string[]): string[];
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

/** srun's `--mpi` plugins of Debian's Slurm 22.05 (`srun --mpi=list`; pmix is pmix_v4). */
export type SrunMpiPlugin = 'pmi2' | 'pmix' | 'none';

export interface SubmitOptions {
  /**
   * The build. With launcher 'mpirun' only the two 4.x builds (MpiName); with 'srun' any
   * provisioned build.
   */
  readonly mpi: AnyMpiName;
  readonly fixture: string;
  readonly np?: number;
  /** Nodes to spread the ranks over (sbatch -N, np / nodes ranks per node); default 1. */
  readonly nodes?: number;
  readonly timeoutMs?: number;
  /** Submit as this unprivileged user (setpriv) instead of root. */
  readonly user?: SlurmUser;
  /**
   * More environment for the job (sbatch exports it to the batch script, the starter passes it
   * on to every rank), e.g. `{MQD_WATCH: 'off'}` or a fixture's MQD_* knobs.
   */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Who starts the ranks inside the allocation: 'mpirun' (default) the MPI's own starter
   * (mpirun, hydra's mpiexec) in the batch step; 'srun' `srun --mpi=<srunMpi>` in step 0, the
   * ranks then being slurmstepd's children with no MPI starter at all.
   */
  readonly launcher?: 'mpirun' | 'srun';
  /**
   * srun's `--mpi` (launcher 'srun' only). Default: the plugin the build's PMI client speaks,
   * pmi2 for MPICH (hydra's simple PMI), pmix for Open MPI (its internal PMIx).
   */
  readonly srunMpi?: SrunMpiPlugin;
  /**
   * Launcher 'srun' only: the processes are expected to start as singletons (a plugin the
   * build's PMI client does not speak, and a fixture that hangs alone, e.g. split_wildcard's
   * wildcard receive): every READY line must say rank 0, and `ranks` are then by SLURM_PROCID.
   */
  readonly singletons?: boolean;
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
  /**
   * Launcher 'srun': the pid of the srun that started the ranks (in the batch step, on the first
   * node; it publishes MPIR_proctable), not its shepherd (a fork of it with the same command
   * line). Launcher 'mpirun': null.
   */
  readonly srunPid: number | null;
}

/** Where Debian's Slurm mpi/pmix plugin dlopens libpmix from (the file is in libpmix-dev). */
export const SLURM_PMIX_LIBRARY = '/usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so';

/** A node of a multi-node cluster: a network namespace that exists, and its address in there. */
export interface SlurmNetnsNode {
  /** NodeName and the host name its processes see: [a-z][a-z0-9]*. */
  readonly name: string;
  readonly netns: string;
  /** NodeAddr: an address on an interface inside `netns`. */
  readonly address: string;
}

export interface SlurmOptions {
  /** The name of the cluster's one partition; default one of its own (SlurmCluster.partition). */
  readonly partition?: string;
  /**
   * A cluster of network namespaces: slurmctld in `controller.netns` (reached at
   * `controller.address` from every node), one slurmd per node. Client commands (`run`) run in
   * the controller's namespace. Without it: one node, this machine, in the caller's namespaces.
   */
  readonly netns?: {
    readonly controller: { readonly netns: string; readonly address: string };
    readonly nodes: readonly SlurmNetnsNode[];
  };
}

/** The controller's host name in a multi-node cluster (its UTS namespace's). */
const CONTROLLER_NAME = 'mqdctl';

export function slurmAvailable(): boolean {
  return ['/usr/sbin/slurmctld', '/usr/sbin/slurmd', '/usr/sbin/munged', '/usr/bin/sbatch'].every(existsSync);
}

const MUNGE_SOCKET = '/run/munge/munge.socket.2';

/**
 * munged is per machine: start it once (as the munge user) unless it already answers; a munged
 * this cluster started is its child and stops with it (one found answering is left alone).
 * Clusters of test files that run at the same time would share it: the real-MPI project runs
 * one file at a time. A munged per cluster on its own socket (slurm.conf AuthInfo=socket=...)
 * would lift that limit (docs/limits.md).
 */
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

let clustersStarted = 0;

export async function startSlurm(o: SlurmOptions = {}): Promise<SlurmCluster> {
  const multi = o.netns;
  if (multi !== undefined) checkNetnsOptions(multi);
  const dir = mkdtempSync(join(tmpdir(), 'mqd-slurm-'));
  // Other users' Slurm clients read slurm.conf here; state and spool stay root's (0700).
  chmodSync(dir, 0o755);
  const nodes: readonly SlurmNetnsNode[] | null = multi?.nodes ?? null;
  const node = nodes?.[0]?.name ?? hostname().split('.')[0] ?? 'localhost';
  const nodeNames = nodes?.map((n) => n.name) ?? [node];
  const [ctldPort, dPort] = freePortPair();
  for (const d of ['state', 'spool', 'log']) mkdirSync(join(dir, d), { mode: 0o700 });
  // Each slurmd of a multi-node cluster has its own spool, pid and log file (%n: its NodeName).
  for (const n of nodes ?? []) mkdirSync(join(dir, 'spool', n.name), { mode: 0o700 });
  const perNode = (name: string) => (nodes === null ? name : name.replace('.', '-%n.'));
  const conf = join(dir, 'slurm.conf');
  const partition = o.partition ?? `mqd${process.pid}c${++clustersStarted}`;
  const hostsFile = join(dir, 'hosts');
  const memMb = Math.max(1024, Math.floor(totalmem() / 1048576) - 512);
  const nodeLines =
    nodes === null
      ? [`NodeName=${node} CPUs=${cpus().length} RealMemory=${memMb} State=UNKNOWN`]
      : nodes.map(
          (n) =>
            `NodeName=${n.name} NodeAddr=${n.address} NodeHostname=${n.name} CPUs=${cpus().length} RealMemory=${memMb} State=UNKNOWN`,
        );
  writeFileSync(
    conf,
    [
      'ClusterName=mqdtest',
      multi === undefined
        ? `SlurmctldHost=${node}`
        : `SlurmctldHost=${CONTROLLER_NAME}(${multi.controller.address})`,
      `SlurmctldPort=${ctldPort}`,
      `SlurmdPort=${dPort}`,
      // Job ids of clusters started one after another (or by another test run) seldom meet:
      // the teardown matches leftover step daemons by job id.
      `FirstJobId=${1000 + ((process.pid * 13) % 900_000)}`,
      'SlurmUser=root',
      'SlurmdUser=root',
      'AuthType=auth/munge',
      `StateSaveLocation=${join(dir, 'state')}`,
      `SlurmdSpoolDir=${nodes === null ? join(dir, 'spool') : join(dir, 'spool', '%n')}`,
      `SlurmctldPidFile=${join(dir, 'slurmctld.pid')}`,
      `SlurmdPidFile=${join(dir, perNode('slurmd.pid'))}`,
      `SlurmctldLogFile=${join(dir, 'log', 'slurmctld.log')}`,
      `SlurmdLogFile=${join(dir, 'log', perNode('slurmd.log'))}`,
      'ProctrackType=proctrack/linuxproc',
      'TaskPlugin=task/none',
      'JobAcctGatherType=jobacct_gather/none',
      'SelectType=select/cons_tres',
      'SelectTypeParameters=CR_Core',
      'ReturnToService=2',
      'MpiDefault=none',
      'SchedulerType=sched/builtin',
      ...nodeLines,
      `PartitionName=${partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE`,
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  if (multi !== undefined) {
    writeFileSync(
      hostsFile,
      [
        '127.0.0.1 localhost',
        '::1 localhost ip6-localhost',
        `${multi.controller.address} ${CONTROLLER_NAME}`,
        ...multi.nodes.map((n) => `${n.address} ${n.name}`),
        '',
      ].join('\n'),
      { mode: 0o644 },
    );
  }
  /** argv running `argv` in `netns` with host name `host` and the hosts file (multi-node only). */
  const inNamespaces = (netns: string, host: string, argv: readonly string[]): string[] => [
    'nsenter',
    `--net=/run/netns/${netns}`,
    // unshare's mounts are private by default: the hosts file is over /etc/hosts in here only.
    'unshare',
    '--mount',
    '--uts',
    '/bin/sh',
    '-c',
    'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"',
    'mqd-node',
    hostsFile,
    host,
    ...argv,
  ];
  const onNode = (name: string, argv: readonly string[]): string[] => {
    if (nodes === null) {
      if (name !== node) throw new Error(`no node '${name}' in this one-node cluster (${node})`);
      return [...argv];
    }
    const n = nodes.find((x) => x.name === name);
    if (n === undefined) throw new Error(`no node '${name}' in this cluster (${nodeNames.join(', ')})`);
    return inNamespaces(n.netns, n.name, argv);
  };
  // Client commands reach slurmctld from its namespace (a one-node cluster: from ours).
  const clientPrefix: readonly string[] =
    multi === undefined ? [] : ['nsenter', `--net=/run/netns/${multi.controller.netns}`];
  const env: NodeJS.ProcessEnv = { ...process.env, SLURM_CONF: conf };
  const children: ChildProcess[] = [];
  const jobs: number[] = [];
  const run = (cmd: string, args: readonly string[]) => {
    const [file = cmd, ...rest] = [...clientPrefix, cmd, ...args];
    return execFileSync(file, rest, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  };

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
    await ensureMunge(children);
    // munged outlives the cluster only when it was already running (it is then the machine's).
    // Its socket is a path: every namespace's daemons reach it.
    const ctldArgv = ['/usr/sbin/slurmctld', '-D', '-i', '-f', conf];
    const [ctldFile = '', ...ctldArgs] =
      multi === undefined ? ctldArgv : inNamespaces(multi.controller.netns, CONTROLLER_NAME, ctldArgv);
    const ctld = spawn(ctldFile, ctldArgs, { env, stdio: 'ignore' });
    children.push(ctld);
    const slurmds = nodeNames.map((name) => {
      // -N: which NodeName of slurm.conf this slurmd is (its host name says the same).
      const [file = '', ...args] = onNode(
        name,
        nodes === null
          ? ['/usr/sbin/slurmd', '-D', '-f', conf]
          : ['/usr/sbin/slurmd', '-D', '-f', conf, '-N', name],
      );
      const d = spawn(file, args, { env, stdio: 'ignore' });
      children.push(d);
      return { name, d };
    });
    const slurmdLog = (name: string) =>
      join(dir, 'log', nodes === null ? 'slurmd.log' : `slurmd-${name}.log`);
    await waitFor(
      () => {
        if (ctld.exitCode !== null)
          return failed(`slurmctld exited: ${tail(join(dir, 'log', 'slurmctld.log'))}`);
        const dead = slurmds.find((x) => x.d.exitCode !== null);
        if (dead !== undefined) return failed(`slurmd of ${dead.name} exited: ${tail(slurmdLog(dead.name))}`);
        try {
          const states = run('sinfo', ['-h', '-N', '-o', '%N %t'])
            .trim()
            .split('\n')
            .map((l) => l.trim().split(/\s+/));
          const notIdle = nodeNames.filter(
            (n) => !states.some(([name, state]) => name === n && state === 'idle'),
          );
          return notIdle.length === 0
            ? done(true)
            : pending(`not idle: ${states.map((x) => x.join(' ')).join(', ')}`);
        } catch {
          return pending('slurmctld not answering yet');
        }
      },
      { timeoutMs: 30_000, what: `Slurm node(s) ${nodeNames.join(', ')} idle` },
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
      argv: [...clientPrefix, 'setpriv', `--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups'],
      env: { ...rest, HOME: home },
      home,
    };
  };

  const sbatch = (
    args: readonly string[],
    user: SlurmUser | undefined,
    extra: Readonly<Record<string, string>> = {},
  ): string => {
    if (user === undefined && Object.keys(extra).length === 0) return run('sbatch', args);
    const u = user === undefined ? null : asUser(user);
    const [file = 'sbatch', ...rest] = [...(u === null ? clientPrefix : u.argv), 'sbatch', ...args];
    return execFileSync(file, rest, {
      env: { ...(u === null ? env : u.env), ...extra },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  };

  const submitFixture = async (o: SubmitOptions): Promise<SlurmJob> => {
    requireMpi(o.mpi);
    const launcher = o.launcher ?? 'mpirun';
    const plugin = o.srunMpi ?? (MPI_FAMILIES[o.mpi] === 'mpich' ? 'pmi2' : 'pmix');
    const oldMpi: MpiName | null = o.mpi === 'openmpi' || o.mpi === 'mpich' ? o.mpi : null;
    if (launcher === 'mpirun' && oldMpi === null) {
      throw new RangeError(
        `submitFixture starts ${o.mpi} only with launcher 'srun' (its mpirun is not set up here)`,
      );
    }
    if (launcher === 'mpirun' && (o.srunMpi !== undefined || o.singletons !== undefined)) {
      throw new RangeError("srunMpi and singletons are about srun's tasks: they need launcher 'srun'");
    }
    const singletons = o.singletons === true;
    if (launcher === 'srun' && plugin === 'pmix' && !existsSync(SLURM_PMIX_LIBRARY)) {
      throw new Error(
        `MQD_TESTKIT_E_SLURM_NO_PMIX: Slurm's mpi/pmix plugin loads ${SLURM_PMIX_LIBRARY}, which is missing ` +
          '(srun says "can not load PMIx library"): install Debian\'s libpmix-dev (scripts/provision.sh)',
      );
    }
    const np = o.np ?? 4;
    const nodeCount = o.nodes ?? 1;
    if (
      !Number.isInteger(nodeCount) ||
      nodeCount < 1 ||
      nodeCount > nodeNames.length ||
      np % nodeCount !== 0
    ) {
      throw new RangeError(
        `nodes must divide np (${np}) and be 1..${nodeNames.length} (the cluster's nodes), got ${o.nodes}`,
      );
    }
    const binary = fixtureBinary(o.mpi, o.fixture);
    // A user's job writes its output into (and runs in) a directory of its own.
    const jobDir = o.user === undefined ? dir : asUser(o.user).home;
    const output = join(jobDir, `${o.fixture}-${o.mpi}-${jobs.length}.out`);
    const script = join(jobDir, `${o.fixture}-${o.mpi}-${jobs.length}.sh`);
    const body =
      launcher === 'mpirun' && oldMpi !== null
        ? starterLine(oldMpi, np, binary, nodeCount > 1)
        : srunLines(o.mpi, plugin, np, binary, nodeCount > 1);
    writeFileSync(script, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
    if (o.user !== undefined) chownSync(script, o.user.uid, o.user.gid);
    const sbatchArgs = [
      '--parsable',
      `-N${nodeCount}`,
      `-n${np}`,
      // Ranks 0..np/nodes-1 on the first node, and so on (both starters place by node in order).
      ...(nodeCount > 1 ? [`--ntasks-per-node=${np / nodeCount}`] : []),
      '--overcommit',
      `--chdir=${jobDir}`,
      `--output=${output}`,
      `--job-name=${o.fixture}`,
      script,
    ];
    const out = sbatch(sbatchArgs, o.user, o.env).trim();
    const jobId = Number(out.split(';')[0]);
    if (!Number.isInteger(jobId)) throw new Error(`sbatch said '${out}'`);
    jobs.push(jobId);
    const readOutput = () => {
      const text = existsSync(output) ? readFileSync(output, 'utf8') : '';
      const found = [...text.matchAll(/MQD_FIXTURE_READY rank=(\d+) pid=(\d+)/g)].map((m) => ({
        rank: Number(m[1]),
        pid: Number(m[2]),
      }));
      return { text, found };
    };
    /** The coded reason srun's output gives why the world can never come up, or null. */
    const srunFailed = (text: string, found: ReadonlyArray<{ rank: number }>): string | null => {
      if (launcher !== 'srun') return null;
      const why = srunFailure(text, found, plugin, np, singletons);
      // Both ends of the output: the MPI says why at the start, srun's exit comes last.
      const shown = text.length > 4000 ? `${text.slice(0, 2000)}\n...\n${text.slice(-2000)}` : text;
      return why === null ? null : `job ${jobId}: ${why}\n${shown}`;
    };
    const ranks = await waitFor(
      () => {
        const { text, found } = readOutput();
        const why = srunFailed(text, found);
        if (why !== null) return failed(why);
        if (found.length >= np && singletons) return done(bySlurmProcId(found));
        if (found.length >= np) return done(found.sort((a, b) => a.rank - b.rank));
        const state = run('squeue', ['-h', '-j', String(jobId), '-o', '%T']).trim();
        if (state !== '' && state !== 'RUNNING' && state !== 'PENDING' && state !== 'CONFIGURING') {
          // The job ended between the read above and squeue: srun's exit line is in the output
          // now, and its coded reason says more than the job's state.
          const last = readOutput();
          return failed(
            srunFailed(last.text, last.found) ?? `job ${jobId} is ${state}: ${last.text.slice(-2000)}`,
          );
        }
        return pending(`${found.length}/${np} READY lines, job ${state || 'gone'}`);
      },
      { timeoutMs: o.timeoutMs ?? 60_000, what: `${np} READY lines of Slurm job ${jobId}` },
    );
    return { jobId, ranks, output, srunPid: launcher === 'srun' ? findSrun(jobId) : null };
  };

  return {
    conf,
    env,
    node,
    nodes: nodeNames,
    partition,
    onNode,
    run,
    asUser,
    submitFixture,
    dispose: stop,
    [Symbol.asyncDispose]: stop,
  };
}

function starterLine(mpi: MpiName, np: number, binary: string, acrossNodes: boolean): string {
  const bin = join(mpiPrefix(mpi), 'bin');
  if (mpi === 'mpich') {
    // Inside an allocation hydra launches its proxies with srun (bootstrap slurm).
    return `export MPIR_CVAR_POLLS_BEFORE_YIELD=1\nexec ${bin}/mpiexec -n ${np} ${binary}`;
  }
  return [
    // Across nodes ranks talk TCP (mpirun starts its orted on the other nodes with srun).
    `export OMPI_MCA_btl=self,vader${acrossNodes ? ',tcp' : ''} OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none`,
    'export OMPI_MPIR_DO_NOT_WARN=1',
    `exec ${bin}/mpirun --allow-run-as-root --oversubscribe --bind-to none -np ${np} --mca mpi_yield_when_idle 1 ${binary}`,
  ].join('\n');
}

/**
 * The batch script of launcher 'srun': the build's launch environment (the same MCA and CVAR
 * settings as `starterCommand`'s), then srun --mpi; its exit status is printed, so a job whose
 * ranks never come up fails at once instead of at the timeout.
 */
function srunLines(
  mpi: AnyMpiName,
  plugin: SrunMpiPlugin,
  np: number,
  binary: string,
  acrossNodes: boolean,
): string {
  const env: Record<string, string> = { ...starterCommand(mpi, np, binary).env };
  if (acrossNodes && env['OMPI_MCA_btl'] !== undefined) env['OMPI_MCA_btl'] += ',tcp';
  if (plugin === 'pmix') {
    // Debian's libpmix (Slurm's PMIx server in slurmstepd) offers the security modes
    // "munge,native" (PMIX_SECURITY_MODE); Open MPI's internal PMIx client has no munge
    // component and then fails pmix_init ("psec ... munge ... not found"): native only.
    env['PMIX_MCA_psec'] = 'native';
  }
  return [
    ...Object.entries(env).map(([k, v]) => `export ${k}=${shellQuote(v)}`),
    `srun --mpi=${plugin} -n ${np} ${shellQuote(binary)}`,
    'echo "MQD_SRUN_EXIT rc=$?"',
  ].join('\n');
}

function shellQuote(s: string): string {
  return /^[\w@%+=:,./^-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`;
}

/**
 * Why an srun-started job can never give `np` ranks, from its output so far, or null. Each is a
 * coded message: the MPI did not get its world from the plugin.
 */
function srunFailure(
  text: string,
  found: ReadonlyArray<{ rank: number }>,
  plugin: SrunMpiPlugin,
  np: number,
  singletons: boolean,
): string | null {
  const ranks = new Set(found.map((f) => f.rank));
  if (singletons && found.some((f) => f.rank !== 0)) {
    return `MQD_TESTKIT_E_SRUN_NOT_SINGLETONS: singletons were expected under srun --mpi=${plugin}, but a process says rank ${found.find((f) => f.rank !== 0)?.rank}`;
  }
  if (!singletons && ranks.size < found.length) {
    // Every process thinks it is rank 0 of a world of its own.
    return (
      `MQD_TESTKIT_E_SRUN_SINGLETONS: under srun --mpi=${plugin} the ${found.length} processes started as ` +
      "singletons (READY lines repeat a rank): this build's PMI client does not speak that plugin"
    );
  }
  if (text.includes('can not load PMIx library')) {
    return `MQD_TESTKIT_E_SLURM_NO_PMIX: Slurm's mpi/pmix plugin cannot load ${SLURM_PMIX_LIBRARY}: install libpmix-dev`;
  }
  const exit = /MQD_SRUN_EXIT rc=(\d+)/.exec(text);
  if (exit !== null && found.length < np) {
    return (
      `MQD_TESTKIT_E_SRUN_FAILED: srun --mpi=${plugin} exited with ${exit[1]} after ${found.length}/${np} ` +
      'READY lines (its output follows)'
    );
  }
  return null;
}

/** Singletons all say rank 0: rank them by the task id srun gave each (its SLURM_PROCID). */
function bySlurmProcId(found: ReadonlyArray<{ pid: number }>): Array<{ rank: number; pid: number }> {
  return found
    .map((f) => ({ rank: Number(readEnviron(f.pid)?.get('SLURM_PROCID') ?? Number.NaN), pid: f.pid }))
    .sort((a, b) => a.rank - b.rank);
}

/**
 * The srun of job `jobId` that started its ranks: a process named srun with the job's
 * SLURM_JOB_ID whose parent is not itself an srun (srun forks a shepherd of the same name).
 */
function findSrun(jobId: number): number | null {
  const procs = listProcesses();
  const isSrun = (pid: number) => /^(\S*\/)?srun(\s|$)/.test(cmdline(pid));
  const byPid = new Map<number, (typeof procs)[number]>(procs.map((p) => [p.pid, p]));
  const sruns = procs.filter(
    (p) => isSrun(p.pid) && readEnviron(p.pid)?.get('SLURM_JOB_ID') === String(jobId),
  );
  const top = sruns.filter((p) => {
    const parent = byPid.get(p.ppid);
    return parent === undefined || !isSrun(parent.pid);
  });
  return top.length === 1 ? (top[0]?.pid ?? null) : null;
}

function checkNetnsOptions(o: NonNullable<SlurmOptions['netns']>): void {
  if (o.nodes.length === 0) throw new RangeError('a multi-node cluster needs at least one node');
  const names = new Set<string>();
  for (const n of o.nodes) {
    if (!/^[a-z][a-z0-9]{0,30}$/.test(n.name) || n.name === CONTROLLER_NAME || names.has(n.name)) {
      throw new Error(`bad or repeated node name '${n.name}'`);
    }
    names.add(n.name);
  }
  for (const ns of [o.controller.netns, ...o.nodes.map((n) => n.netns)]) {
    if (!existsSync(`/run/netns/${ns}`)) throw new Error(`no network namespace '${ns}' (/run/netns/${ns})`);
  }
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
