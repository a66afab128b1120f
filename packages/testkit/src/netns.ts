// Multi-node runs on one machine, for tests. Each node is a network namespace joined by a veth
// pair to an "aggregator" namespace that routes between the nodes; processes run inside with
// `ip netns exec` (or a Slurm node's `onNode` argv). They still share this machine's pid
// namespace and filesystem, so the test sees (and kills) every pid, and ptrace works across
// nodes as it does across hosts' agents. Every address is on an interface created here, inside a
// namespace created here: nothing in the caller's own network namespace changes. Every spawned
// process and namespace is torn down by its dispose/kill, and synchronously on process exit as a
// last resort. The product (`mqd serve`, `mqd agent`) is only ever started as a child process
// from fixtures/netns/mqd-cli.ts: the testkit imports none of it.
// Used by apps/cli/test/multinode.mpi.test.ts, slurm-multinode.mpi.test.ts and
// e2e/test/slurm-multinode.e2e.test.ts.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { MpiName } from './config.js';
import { mpiPrefix } from './fixtures.js';
import { parseReadyLines, type RankProcess } from './launch.js';
import { descendants, isRunning } from './procfs.js';
import { SpawnedProcess, trySignal } from './spawned.js';
import { rankBlockedIn } from './stack.js';
import { done, failed, pending, waitFor } from './wait.js';

/** fixtures/netns: fake-ssh, mqd-cli.ts, unix-forward.mjs (see its README). */
const FIXTURES = new URL('../../../fixtures/netns/', import.meta.url);
/** Runs `mqd` from the sources: node --conditions=source --import tsx MQD_CLI_ENTRY ARGS. */
export const MQD_CLI_ENTRY = fileURLToPath(new URL('mqd-cli.ts', FIXTURES));
/** hydra's -launcher-exec: runs the proxy of host H in the namespace MQD_NETNS_HOSTS names. */
export const FAKE_SSH = fileURLToPath(new URL('fake-ssh', FIXTURES));
/** Unix socket -> TCP forwarder, so the test reaches a server inside a namespace. */
export const UNIX_FORWARD = fileURLToPath(new URL('unix-forward.mjs', FIXTURES));
/** The node end of every node's veth has this name (in its own namespace), so hydra's -iface fits all nodes. */
export const NODE_IFACE = 'mqd0';
/** Node i (from 1) is 10.231.i.2/24, its aggregator-side peer 10.231.i.1/24. */
const NET_PREFIX = '10.231';

/** argv for a child node that runs `mqd ARGS` from the sources. */
export const mqdCommand = (args: readonly string[]): string[] => [
  process.execPath,
  '--conditions=source',
  '--import',
  'tsx',
  MQD_CLI_ENTRY,
  ...args,
];

// ---- last-resort cleanup on exit --------------------------------------------------------------

const liveProcesses = new Set<NetnsProcess>();
const liveNamespaces = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // 'exit' listeners must be synchronous: signals and execFileSync only.
  process.on('exit', () => {
    for (const p of liveProcesses) p.killNow();
    for (const ns of liveNamespaces) deleteNetns(ns, { quiet: true });
  });
}

// ---- namespaces ---------------------------------------------------------------------------------

function stderrOf(e: unknown): string {
  if (e instanceof Error && 'stderr' in e) {
    const s = (e as { stderr: unknown }).stderr;
    if (typeof s === 'string' && s.trim() !== '') return s.trim();
  }
  return e instanceof Error ? e.message : String(e);
}

function ip(...args: string[]): void {
  try {
    execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', timeout: 10_000 });
  } catch (e) {
    throw new Error(
      `MQD_TESTKIT_E_NETNS: ip ${args.join(' ')} failed (${stderrOf(e)}): these tests need root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2`,
    );
  }
}

const netnsPath = (ns: string) => `/run/netns/${ns}`;

function deleteNetns(ns: string, o: { quiet?: boolean } = {}): void {
  if (!existsSync(netnsPath(ns))) return;
  try {
    ip('netns', 'del', ns);
  } catch (e) {
    if (!o.quiet) throw e;
  }
  liveNamespaces.delete(ns);
}

/** 'net:[inode]' of a named namespace, as /proc/PID/ns/net of its members reads. */
export function netnsId(ns: string): string {
  return `net:[${statSync(netnsPath(ns)).ino}]`;
}

/** 'net:[inode]' of the network namespace a process is in. */
export function netnsOfPid(pid: number): string {
  return readlinkSync(`/proc/${pid}/ns/net`);
}

export interface NetnsNode {
  /** The node's host name as MPI and the agents know it, e.g. 'node1'. */
  readonly host: string;
  readonly netns: string;
  /** The node's address, on NODE_IFACE. */
  readonly address: string;
  /** The aggregator namespace's address on this node's link: where this node reaches the aggregator. */
  readonly aggregatorAddress: string;
}

export interface NetnsCluster {
  readonly aggregatorNetns: string;
  readonly nodes: readonly NetnsNode[];
  node(host: string): NetnsNode;
  /** fake-ssh's host -> namespace map (the MQD_NETNS_HOSTS variable). */
  readonly hostsEnv: string;
  /** Deletes the namespaces (and so their veths); kill the processes inside first. Idempotent. */
  dispose(): void;
}

/**
 * Namespaces `${prefix}-agg` and `${prefix}-${host}` per host, a veth from each node to the
 * aggregator namespace, which forwards between them. Leftovers with these names (a crashed run
 * with the same pid) are deleted first; on failure nothing created stays.
 */
export function createCluster(prefix: string, hosts: readonly string[]): NetnsCluster {
  if (!/^[a-z][a-z0-9]{0,30}$/.test(prefix)) throw new Error(`bad namespace prefix '${prefix}'`);
  if (hosts.length === 0 || hosts.length > 250) throw new RangeError(`1..250 hosts, got ${hosts.length}`);
  for (const h of hosts) if (!/^[a-z][a-z0-9]{0,15}$/.test(h)) throw new Error(`bad host name '${h}'`);
  installExitHook();
  const aggregatorNetns = `${prefix}-agg`;
  const nodes: NetnsNode[] = hosts.map((host, i) => ({
    host,
    netns: `${prefix}-${host}`,
    address: `${NET_PREFIX}.${i + 1}.2`,
    aggregatorAddress: `${NET_PREFIX}.${i + 1}.1`,
  }));
  const all = [aggregatorNetns, ...nodes.map((n) => n.netns)];
  for (const ns of all) deleteNetns(ns);
  try {
    for (const ns of all) {
      ip('netns', 'add', ns);
      liveNamespaces.add(ns);
      ip('-n', ns, 'link', 'set', 'lo', 'up');
    }
    // ip_forward is per network namespace: this one only.
    ip('netns', 'exec', aggregatorNetns, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1');
    nodes.forEach((n, i) => {
      const aggIface = `veth${i + 1}`;
      // Both ends are created directly in their namespaces: no name ever exists in ours.
      ip(
        'link',
        'add',
        NODE_IFACE,
        'netns',
        n.netns,
        'type',
        'veth',
        'peer',
        'name',
        aggIface,
        'netns',
        aggregatorNetns,
      );
      ip('-n', aggregatorNetns, 'addr', 'add', `${n.aggregatorAddress}/24`, 'dev', aggIface);
      ip('-n', n.netns, 'addr', 'add', `${n.address}/24`, 'dev', NODE_IFACE);
      ip('-n', aggregatorNetns, 'link', 'set', aggIface, 'up');
      ip('-n', n.netns, 'link', 'set', NODE_IFACE, 'up');
      // Other nodes are reached through the aggregator namespace; nothing else is routed.
      ip('-n', n.netns, 'route', 'add', `${NET_PREFIX}.0.0/16`, 'via', n.aggregatorAddress);
    });
  } catch (e) {
    for (const ns of [...all].reverse()) deleteNetns(ns, { quiet: true });
    throw e;
  }
  let disposed = false;
  return {
    aggregatorNetns,
    nodes,
    node: (host) => {
      const n = nodes.find((x) => x.host === host);
      if (n === undefined) throw new Error(`no node '${host}' in this cluster (${hosts.join(', ')})`);
      return n;
    },
    hostsEnv: nodes.map((n) => `${n.host}=${n.netns}`).join(' '),
    dispose: () => {
      if (disposed) return;
      disposed = true;
      const problems: string[] = [];
      for (const ns of [...all].reverse()) {
        try {
          deleteNetns(ns);
        } catch (e) {
          problems.push(e instanceof Error ? e.message : String(e));
        }
      }
      if (problems.length > 0) throw new Error(problems.join('\n'));
    },
  };
}

// ---- processes ----------------------------------------------------------------------------------

/** A process started in a namespace, with its output, and every descendant it was seen with. */
export class NetnsProcess extends SpawnedProcess {
  readonly pid: number;
  private killing: Promise<void> | undefined;

  constructor(
    readonly label: string,
    child: ChildProcess,
  ) {
    super(child);
    this.pid = child.pid ?? 0;
    if (this.pid === 0) throw new Error(`${label}: spawn gave no pid`);
    this.remember(this.pid);
    liveProcesses.add(this);
  }

  /** Remembers the current descendants, so they are killed later even if orphaned by then. */
  track(): void {
    for (const id of [...this.known.values()]) {
      if (!isRunning(id)) continue;
      for (const d of descendants(id.pid)) this.remember(d.pid);
    }
  }

  /** Sends `signal` to the process itself, if it is still the process started. */
  signal(signal: NodeJS.Signals): void {
    const id = this.known.get(this.pid);
    if (id !== undefined && isRunning(id)) trySignal(this.pid, signal);
  }

  /** Waits for output matching `re`; fails at once when the process exits first. */
  waitForOutput(re: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
    return waitFor(
      () => {
        const m = re.exec(this.output());
        if (m) return done(m);
        const exit = this.exit;
        if (exit !== undefined)
          return failed(`${this.label} exited (code ${exit.code}, signal ${exit.signal}):\n${this.output()}`);
        return pending();
      },
      { timeoutMs, what: `${this.label} to print ${re}` },
    );
  }

  /** Synchronous best effort, for process exit. */
  killNow(): void {
    this.track();
    for (const id of this.known.values()) if (isRunning(id)) trySignal(id.pid, 'SIGKILL');
  }

  /** SIGKILLs the process and every descendant seen, by pid, and waits until none runs. Idempotent. */
  kill(timeoutMs = 10_000): Promise<void> {
    this.killing ??= (async () => {
      await waitFor(
        () => {
          this.killNow();
          const left = [...this.known.values()].filter(isRunning);
          // A zombie has exited; only its reaping (by its parent or init) is left.
          return left.length === 0
            ? done(true)
            : pending(`still running: ${left.map((i) => i.pid).join(', ')}`);
        },
        { timeoutMs, what: `every process of ${this.label} to end` },
      );
      // Our direct child is reaped by node; its pipes close once nobody else holds them.
      await this.pipesClosed(timeoutMs, `${this.label} to be reaped`);
      liveProcesses.delete(this);
    })();
    return this.killing;
  }
}

/** Starts `argv` inside `netns` (ip netns exec replaces itself with it: the pid is the program's). */
export function spawnInNetns(
  label: string,
  netns: string,
  argv: readonly string[],
  env: Readonly<Record<string, string>> = {},
): NetnsProcess {
  return spawnArgv(label, ['ip', 'netns', 'exec', netns, ...argv], env);
}

/**
 * Starts `argv` as given: for a wrapper that enters the namespaces itself (a Slurm node's
 * `onNode` argv execs through nsenter/unshare into the program: the pid is the program's).
 */
export function spawnArgv(
  label: string,
  argv: readonly string[],
  env: Readonly<Record<string, string>> = {},
): NetnsProcess {
  installExitHook();
  const [file, ...args] = argv;
  if (file === undefined) throw new Error(`${label}: empty argv`);
  const child = spawn(file, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
    // Its own process group: a ^C of the test runner reaches the runner, which kills by pid.
    detached: true,
  });
  return new NetnsProcess(label, child);
}

// ---- an MPICH job across the nodes --------------------------------------------------------------

export interface NetnsJobOptions {
  readonly cluster: NetnsCluster;
  /** hydra's ssh launcher and -iface are MPICH's: Open MPI's mpirun would need its own plumbing. */
  readonly mpi: Extract<MpiName, 'mpich'>;
  readonly binary: string;
  /** The node mpiexec runs on. */
  readonly starterHost: string;
  /** Ranks per node, in rank order: [['node1', 2], ['node2', 2]] puts ranks 0-1 on node1. */
  readonly placement: readonly (readonly [string, number])[];
  readonly env?: Readonly<Record<string, string>>;
  /** A directory of the caller's for the launcher copy (removed by the caller). */
  readonly workDir: string;
  readonly timeoutMs: number;
}

export interface NetnsJob {
  readonly starter: NetnsProcess;
  readonly starterPid: number;
  /** Sorted by rank. */
  readonly ranks: readonly RankProcess[];
  dispose(): Promise<void>;
}

/**
 * `mpiexec -launcher ssh` with FAKE_SSH as ssh: hydra's proxy for each host runs in that host's
 * namespace and ranks on different nodes talk TCP over the veths (-iface NODE_IFACE). Waits until
 * every rank printed its READY line and is inside the call it named.
 */
export async function launchNetnsJob(o: NetnsJobOptions): Promise<NetnsJob> {
  const np = o.placement.reduce((s, [, n]) => s + n, 0);
  const deadline = Date.now() + o.timeoutMs;
  const left = () => Math.max(0, deadline - Date.now());
  // A checkout may drop the mode bit; hydra execs the launcher directly, so give it one.
  const ssh = join(o.workDir, 'fake-ssh');
  copyFileSync(FAKE_SSH, ssh);
  chmodSync(ssh, 0o755);
  const starter = spawnInNetns(
    `mpiexec on ${o.starterHost}`,
    o.cluster.node(o.starterHost).netns,
    [
      join(mpiPrefix(o.mpi), 'bin', 'mpiexec'),
      '-launcher',
      'ssh',
      '-launcher-exec',
      ssh,
      '-iface',
      NODE_IFACE,
      '-hosts',
      o.placement.map(([h, n]) => `${h}:${n}`).join(','),
      '-n',
      String(np),
      o.binary,
    ],
    { ...o.env, MQD_NETNS_HOSTS: o.cluster.hostsEnv },
  );
  const job = {
    starter,
    starterPid: starter.pid,
    ranks: [] as RankProcess[],
    dispose: () => starter.kill(),
  };
  try {
    job.ranks = await waitFor(
      () => {
        starter.track();
        const ready = parseReadyLines(starter.output());
        if (ready.length === np) return done([...ready].sort((a, b) => a.rank - b.rank));
        const exit = starter.exitStatus();
        if (exit !== undefined) return failed(`mpiexec exited (code ${exit.code}, signal ${exit.signal})`);
        return pending(`${ready.length} of ${np} READY lines`);
      },
      { timeoutMs: left(), what: `all ${np} READY lines` },
    );
    for (const r of job.ranks) starter.remember(r.pid);
    starter.track();
    for (const r of job.ranks) {
      await waitFor(
        async () => {
          const check = await rankBlockedIn(r.pid, r.call);
          if (check.blocked) return done(true);
          if (starter.exitStatus() !== undefined) return failed('mpiexec exited');
          return pending(check.error ?? check.frames.slice(0, 6).join(' < '));
        },
        { timeoutMs: left(), what: `rank ${r.rank} (pid ${r.pid}) to block in ${r.call}` },
      );
    }
    return job;
  } catch (e) {
    await starter.kill();
    throw new Error(
      `MQD_TESTKIT_E_LAUNCH: ${e instanceof Error ? e.message : String(e)}\n--- mpiexec output ---\n${starter.output()}`,
    );
  }
}

// ---- is a rank stopped or traced? ---------------------------------------------------------------

export interface TraceState {
  /** proc(5) state letter: R, S, D, T (stopped), t (tracing stop), Z, ... */
  readonly state: string;
  readonly tracerPid: number;
}

/** The rank's run state and tracer, or undefined when it is gone. */
export function traceState(pid: number): TraceState | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined; // gone: the caller reports it as such
  }
  const state = /^State:\s+(\S)/m.exec(text)?.[1];
  const tracer = /^TracerPid:\s+(\d+)/m.exec(text)?.[1];
  if (state === undefined || tracer === undefined) return undefined;
  return { state, tracerPid: Number(tracer) };
}
