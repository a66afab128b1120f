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
import { request } from 'node:http';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { MpiName } from './config.js';
import { mpiPrefix } from './fixtures.js';
import { parseReadyLines, type RankProcess } from './launch.js';
import { descendants, identify, isRunning, type ProcIdentity } from './procfs.js';
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

export interface ExitStatus {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

function trySignal(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (e) {
    // ESRCH: already gone, which is what we want.
    if (!(e instanceof Error && 'code' in e && e.code === 'ESRCH')) throw e;
  }
}

/** A process started in a namespace, with its output, and every descendant it was seen with. */
export class NetnsProcess {
  readonly pid: number;
  private readonly chunks: string[] = [];
  private exit: ExitStatus | undefined;
  /** The process and its descendants as first seen: a pid alone could be reused. */
  private readonly known = new Map<number, ProcIdentity>();
  private killing: Promise<void> | undefined;

  constructor(
    readonly label: string,
    private readonly child: ChildProcess,
  ) {
    this.pid = child.pid ?? 0;
    if (this.pid === 0) throw new Error(`${label}: spawn gave no pid`);
    this.remember(this.pid);
    liveProcesses.add(this);
    child.stdout?.setEncoding('utf8').on('data', (d: string) => this.chunks.push(d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => this.chunks.push(d));
    // 'close' comes after 'exit' and after the pipes are drained: output() is complete then.
    child.on('close', (code, signal) => {
      this.exit = { code, signal };
    });
  }

  output(): string {
    return this.chunks.join('');
  }

  exitStatus(): ExitStatus | undefined {
    return this.exit;
  }

  remember(pid: number): void {
    if (this.known.has(pid)) return;
    const id = identify(pid);
    if (id !== undefined) this.known.set(pid, id);
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
      await waitFor(() => (this.exit ? done(true) : pending()), {
        timeoutMs,
        what: `${this.label} to be reaped`,
      }).catch(() => {
        // A stray holder of the pipes: stop reading rather than hang the teardown.
        this.child.stdout?.destroy();
        this.child.stderr?.destroy();
      });
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

// ---- HTTP to a server inside a namespace, through a Unix socket --------------------------------

export interface HttpReply {
  readonly status: number;
  readonly text: string;
}

export function unixHttp(
  socketPath: string,
  method: 'GET' | 'POST',
  path: string,
  o: { readonly token?: string; readonly body?: unknown; readonly timeoutMs?: number } = {},
): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const body = o.body === undefined ? undefined : JSON.stringify(o.body);
    const req = request(
      {
        socketPath,
        method,
        path,
        headers: {
          host: 'localhost',
          ...(o.token === undefined ? {} : { authorization: `Bearer ${o.token}` }),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        timeout: o.timeoutMs ?? 60_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          text += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () =>
      req.destroy(new Error(`${method} ${path}: no answer in ${o.timeoutMs ?? 60_000} ms`)),
    );
    req.on('error', reject);
    req.end(body);
  });
}

export interface TcpBridge extends AsyncDisposable {
  /** The bridge's port on 127.0.0.1. */
  readonly port: number;
  /** http://127.0.0.1:PORT */
  readonly url: string;
  /** Stops listening and ends the connections still open. Idempotent. */
  close(): Promise<void>;
}

/**
 * A TCP listener on 127.0.0.1 (ephemeral port, in the caller's network namespace) that pipes every
 * connection to the Unix socket `socketPath`, bytes unchanged (HTTP, WebSocket upgrades): for a
 * client that speaks only TCP, such as a browser, to reach a server inside a namespace through
 * the socket of its unix-forward (UNIX_FORWARD). Nothing is listening outside loopback.
 */
export function tcpToUnix(socketPath: string): Promise<TcpBridge> {
  const open = new Set<{ destroy(): unknown }>();
  const server = createServer((client) => {
    const upstream = connect(socketPath);
    open.add(client);
    open.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    // Either side failing ends both: a half-open pair would leave the client waiting.
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  return new Promise((resolve, reject) => {
    server.once('error', (e) =>
      reject(new Error(`MQD_TESTKIT_E_NETNS: cannot listen on 127.0.0.1 for ${socketPath}: ${e.message}`)),
    );
    server.listen(0, '127.0.0.1', () => {
      const addr = server.address();
      if (addr === null || typeof addr === 'string') {
        server.close();
        reject(new Error(`MQD_TESTKIT_E_NETNS: the bridge to ${socketPath} has no TCP address`));
        return;
      }
      let closing: Promise<void> | undefined;
      const close = () => {
        closing ??= new Promise<void>((res) => {
          server.close(() => res());
          for (const s of open) s.destroy();
          open.clear();
        });
        return closing;
      };
      resolve({
        port: addr.port,
        url: `http://127.0.0.1:${addr.port}`,
        close,
        [Symbol.asyncDispose]: close,
      });
    });
  });
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

// ---- a served aggregator inside a namespace -----------------------------------------------------

export interface NetnsAggregator {
  readonly aggregator: NetnsProcess;
  readonly forwarder: NetnsProcess;
  /** The aggregator's port inside its namespace (agents connect to ADDRESS:port). */
  readonly port: number;
  /** The Unix socket the test reaches the aggregator through. */
  readonly socketPath: string;
  /** The REST API as `token`, parsed as JSON (a body that is not JSON throws with the status). */
  api<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: T }>;
  /** Waits until the aggregator lists this agent process (default id HOST-PID) as connected. */
  untilConnected(agent: NetnsProcess, host: string, timeoutMs: number): Promise<void>;
  /** Kills the forwarder and the aggregator. */
  kill(): Promise<void>;
}

/**
 * `mqd serve --no-local-agent` on 0.0.0.0 in `netns` (agents connect over the veths with
 * `agentToken`), and a forwarder from `workDir/api.sock` to it for the test (as `adminToken`).
 * On failure what was started is killed before the error is thrown.
 */
export async function startNetnsAggregator(o: {
  readonly netns: string;
  readonly workDir: string;
  readonly adminToken: string;
  readonly agentToken: string;
  readonly timeoutMs: number;
}): Promise<NetnsAggregator> {
  const socketPath = join(o.workDir, 'api.sock');
  const aggregator = spawnInNetns(
    'aggregator',
    o.netns,
    mqdCommand([
      'serve',
      '--no-local-agent',
      // The test's private network namespaces carry no TLS; the aggregator says so loudly.
      '--allow-insecure-http',
      // Every node's agent derives nothing: they share the secret (allowed explicitly here).
      '--allow-shared-agent-token',
      '--host',
      '0.0.0.0',
      '--port',
      '0',
      '--agent-token',
      o.agentToken,
      '--admin-token',
      o.adminToken,
      '--data-dir',
      ':memory:',
    ]),
  );
  let forwarder: NetnsProcess | null = null;
  try {
    const port = Number((await aggregator.waitForOutput(/aggregator at http:\/\/\S+:(\d+)/, o.timeoutMs))[1]);
    forwarder = spawnInNetns('forwarder', o.netns, [
      process.execPath,
      UNIX_FORWARD,
      socketPath,
      '127.0.0.1',
      String(port),
    ]);
    await forwarder.waitForOutput(/MQD_FORWARD_READY/, o.timeoutMs);
    const fwd = forwarder;
    const api = async <T>(method: 'GET' | 'POST', path: string, body?: unknown) => {
      const r = await unixHttp(socketPath, method, path, {
        token: o.adminToken,
        ...(body === undefined ? {} : { body }),
      });
      try {
        return { status: r.status, body: JSON.parse(r.text) as T };
      } catch {
        throw new Error(
          `${method} ${path}: ${r.status} with a body that is not JSON: ${r.text.slice(0, 500)}`,
        );
      }
    };
    return {
      aggregator,
      forwarder: fwd,
      port,
      socketPath,
      api,
      untilConnected: async (agent, host, timeoutMs) => {
        const agentId = `${host}-${agent.pid}`;
        await waitFor(
          async () => {
            const exit = agent.exitStatus();
            if (exit !== undefined)
              return failed(`${agent.label} exited (code ${exit.code}):\n${agent.output()}`);
            const rows = (
              await api<{ agents: Array<{ agentId: string; host: string; connected: boolean }> }>(
                'GET',
                '/api/admin/agents',
              )
            ).body.agents;
            const row = rows.find((a) => a.agentId === agentId);
            return row?.connected === true && row.host === host
              ? done(true)
              : pending(JSON.stringify(row ?? null));
          },
          { timeoutMs, what: `agent ${agentId} to be listed as connected` },
        );
      },
      kill: async () => {
        await fwd.kill();
        await aggregator.kill();
      },
    };
  } catch (e) {
    await forwarder?.kill();
    await aggregator.kill();
    throw e;
  }
}
