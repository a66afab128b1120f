// Several aggregators as a site runs them, for the tests that need real processes: a
// PostgreSQL 15 of the test's own (startPostgres), `mqd serve` instances on it, Debian's haproxy
// in front (startHaproxy, a stickiness cookie MQDSRV naming the instance), and real `mqd agent`s
// that connect through haproxy. The CLI test (apps/cli/test/cluster.mpi.test.ts) and the browser
// test (e2e/test/cluster.e2e.test.ts) share it. Every process is started here and ended by its
// pid in stop(), also when a test fails; kill9() is the fault the tests inject.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Haproxy, haproxyAvailable, startHaproxy } from './haproxy.js';
import { type FixtureJob, type LaunchOptions, launchFixture } from './launch.js';
import { mqdCommand } from './netns.js';
import { type PostgresServer, postgresAvailable, startPostgres } from './postgres.js';
import { SpawnedProcess, trySignal } from './spawned.js';
import { done, failed, pending, waitFor } from './wait.js';

export interface ClusterOptions {
  /** Names of the first instances, also their haproxy server names and MQDSRV cookie values. */
  readonly names: readonly string[];
  readonly adminToken: string;
  /** The agents' secret (MQD_AGENT_TOKEN); an agent's own token is derived from it per host. */
  readonly agentSecret: string;
}

export interface ClusterInstance {
  readonly name: string;
  /** http://127.0.0.1:PORT, the instance itself (not through haproxy). */
  readonly url: string;
  readonly port: number;
  /** Its id as /api/health says it (host plus random, per process). */
  readonly id: string;
  output(): string;
  /** kill -9: an instance dies. */
  kill9(): void;
  alive(): boolean;
}

export interface ApiAnswer<T> {
  readonly status: number;
  readonly body: T;
  readonly text: string;
}

export interface Cluster {
  readonly pg: PostgresServer;
  readonly haproxy: Haproxy;
  /** In order of start; killed ones stay listed (alive() says). */
  readonly instances: ClusterInstance[];
  /** Starts one more instance on the same store (not behind haproxy: it is asked directly). */
  addInstance(name: string): Promise<ClusterInstance>;
  /** A real `mqd agent` connecting through haproxy with `token` (hostAgentToken of its host). */
  startAgent(token: string): void;
  /** A request as the admin (bearer token); the body parsed when it is JSON, else null. */
  api<T>(
    base: string,
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<ApiAnswer<T>>;
  /** The id of the instance holding `host`'s agent, as `base` reports it; null: none (yet). */
  holderOf(host: string, base?: string): Promise<string | null>;
  /** Waits until `host`'s agent is connected and returns the instance holding it. */
  waitForHolder(host: string, timeoutMs?: number): Promise<ClusterInstance>;
  /** Ends every process (agents, instances, haproxy, PostgreSQL) and removes the directory. */
  stop(): Promise<void>;
}

/** The URL an `mqd serve` prints once it listens. */
const LISTENING = /aggregator at (http:\/\/127\.0\.0\.1:\d+)/;

export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'mqd-cluster-'));
  // One secret for every instance's channel through PostgreSQL, from a file as a site gives it.
  const clusterSecretFile = join(dir, 'cluster.secret');
  writeFileSync(clusterSecretFile, randomBytes(48).toString('base64'), { mode: 0o600 });
  chmodSync(clusterSecretFile, 0o600);
  const procs: SpawnedProcess[] = [];
  const children: ChildProcess[] = [];
  const instances: ClusterInstance[] = [];
  let pg: PostgresServer | null = null;
  let haproxy: Haproxy | null = null;

  const spawnMqd = (args: readonly string[], env: NodeJS.ProcessEnv): SpawnedProcess => {
    const [cmd, ...rest] = mqdCommand(args);
    const child = spawn(cmd as string, rest, { stdio: ['ignore', 'pipe', 'pipe'], env });
    children.push(child);
    const p = new SpawnedProcess(child);
    procs.push(p);
    return p;
  };
  const kill = (c: ChildProcess) => {
    if (c.pid !== undefined && c.exitCode === null && c.signalCode === null) trySignal(c.pid, 'SIGKILL');
  };

  const api = async <T>(
    base: string,
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<ApiAnswer<T>> => {
    const r = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${o.adminToken}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await r.text();
    let parsed: unknown = null;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
    return { status: r.status, body: parsed as T, text };
  };

  const addInstance = async (name: string): Promise<ClusterInstance> => {
    if (pg === null) throw new Error('the cluster is stopped');
    const p = spawnMqd(['serve', '--no-local-agent', '--port', '0', '--host', '127.0.0.1'], {
      ...process.env,
      MQD_ADMIN_TOKEN: o.adminToken,
      MQD_AGENT_TOKEN: o.agentSecret,
      MQD_STORE_URL: pg.url,
      MQD_CLUSTER_SECRET_FILE: clusterSecretFile,
      MQD_DATA_DIR: join(dir, `data-${name}`),
    });
    const child = children[children.length - 1] as ChildProcess;
    const url = await waitFor(
      () => {
        const m = LISTENING.exec(p.output());
        if (m?.[1] !== undefined) return done(m[1]);
        const exit = p.exitStatus();
        return exit === undefined ? pending() : failed(`mqd serve ${name} exited: ${p.output()}`);
      },
      { timeoutMs: 60_000, what: `mqd serve ${name} to listen` },
    );
    const health = await api<{ instance?: string }>(url, 'GET', '/api/health');
    const id = health.body?.instance;
    if (id === undefined) throw new Error(`instance ${name} names no id in /api/health: ${health.text}`);
    const inst: ClusterInstance = {
      name,
      url,
      port: Number(new URL(url).port),
      id,
      output: () => p.output(),
      kill9: () => kill(child),
      alive: () => child.exitCode === null && child.signalCode === null,
    };
    instances.push(inst);
    return inst;
  };

  const holderOf = async (host: string, base = haproxy?.url ?? ''): Promise<string | null> => {
    const r = await api<{ agents: { host: string; connected: boolean; instance?: string }[] }>(
      base,
      'GET',
      '/api/admin/agents',
    ).catch(() => null);
    if (r === null || r.status !== 200) return null;
    return r.body.agents.find((a) => a.host === host && a.connected)?.instance ?? null;
  };

  const stop = async () => {
    for (const c of children) kill(c);
    // Reaped, so no process of ours outlives the test.
    await Promise.all(
      procs.map((p) =>
        waitFor(() => (p.exitStatus() === undefined ? pending() : done(true)), {
          timeoutMs: 10_000,
          what: 'a cluster process to exit',
        }).catch(() => undefined),
      ),
    );
    await haproxy?.stop();
    await pg?.stop();
    pg = null;
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    pg = await startPostgres();
    for (const name of o.names) await addInstance(name);
    haproxy = await startHaproxy(instances.map((i) => ({ name: i.name, port: i.port })));
  } catch (e) {
    await stop();
    throw e;
  }
  const thePg = pg;
  const theHaproxy = haproxy;
  let agents = 0;
  return {
    pg: thePg,
    haproxy: theHaproxy,
    instances,
    addInstance,
    startAgent: (token) => {
      const file = join(dir, `agent-${agents++}.token`);
      writeFileSync(file, token, { mode: 0o600 });
      chmodSync(file, 0o600);
      spawnMqd(['agent', '--server', theHaproxy.url, '--token-file', file], process.env);
    },
    api,
    holderOf,
    waitForHolder: async (host, timeoutMs = 60_000) => {
      const id = await waitFor(
        async () => {
          const h = await holderOf(host);
          return h === null ? pending(`${host}'s agent is not connected yet`) : done(h);
        },
        { timeoutMs, what: `${host}'s agent connected through haproxy` },
      );
      const inst = instances.find((i) => i.id === id);
      if (inst === undefined) throw new Error(`no instance of this cluster has id ${id}`);
      return inst;
    },
    stop,
  };
}

export interface HungClusterOptions extends ClusterOptions {
  /** The MPI build of the job (MPI_NAMES[0] in the tests; undefined: none built). */
  readonly mpi: LaunchOptions['mpi'] | undefined;
  /** This host's name, as the agent reports it. */
  readonly host: string;
  /** The agent's token for `host` (hostAgentToken(agentSecret, host) of @mqd/server). */
  readonly agentToken: string;
}

/** The set-up the cluster tests share: a cluster, a hung wrong_tag job, its node's agent. */
export interface HungCluster {
  readonly cluster: Cluster;
  readonly job: FixtureJob;
  /** Ends the job, then the cluster; safe after a failed start. */
  stop(): Promise<void>;
}

/**
 * startCluster, then a real hung wrong_tag job of 4 ranks and a real `mqd agent` for its node,
 * connected through haproxy (waited for). Refuses with MQD_E_PROVISION what provisioning did not
 * install (PostgreSQL 15, haproxy, an MPI build).
 */
export async function startHungCluster(o: HungClusterOptions): Promise<HungCluster> {
  if (!postgresAvailable())
    throw new Error('MQD_E_PROVISION: postgresql-15 is missing; run scripts/provision.sh');
  if (!haproxyAvailable()) throw new Error('MQD_E_PROVISION: haproxy is missing; run scripts/provision.sh');
  if (o.mpi === undefined) throw new Error('MQD_E_PROVISION: no MPI build; run scripts/provision.sh');
  const cluster = await startCluster(o);
  let job: FixtureJob | null = null;
  try {
    job = await launchFixture({ mpi: o.mpi, fixture: 'wrong_tag', np: 4 });
    cluster.startAgent(o.agentToken);
    await cluster.waitForHolder(o.host);
  } catch (e) {
    await job?.dispose();
    await cluster.stop();
    throw e;
  }
  const theJob = job;
  return {
    cluster,
    job: theJob,
    stop: async () => {
      await theJob.dispose();
      await cluster.stop();
    },
  };
}
