// Scale-out benchmark: 1,000 synthetic agents x 100 ranks = 100,000 ranks.
// Run from the repository root (after npm run build: the dashboard is served from apps/web/dist):
//   npx tsx apps/server/bench/scale-out.bench.ts
// Every aggregator runs in its own child process (`--serve`), so its RSS and heap are its own;
// the agents run in further child processes (AGENTS_PER_PROC = 100 each) (`--agents`), each playing its share of
// the agents, every agent with its own socket.io connection and handshake (a node process per
// agent would need ~50 MB each, ~50 GB in all: more than the machine). Scenarios:
// - baseline: one instance (SQLite), 10 agents x 100 ranks, in the same run (ratios);
// - one instance (SQLite), 1,000 agents x 100 ranks;
// - two instances on one PostgreSQL (startPostgres) behind haproxy (startHaproxy): the agents
//   connect through haproxy (round robin spreads them over both) and the snapshot is asked
//   through haproxy; skipped with its reason when the cluster mode is not there;
// - one instance again with every agent generating its ranks at every read (`live`, the
//   baseline), no render. The others answer ranks made once after a per-node read
//   time (`ready`, see AGENT_READ): on this machine the agents share the aggregator's two cores.
// Measured per scenario: agents connected (fork to the last welcome), POST snapshot -> stored
// (median of ITERATIONS after one warm-up), the CPU time the agent processes and the instances
// spend during it, where that time goes (timestamps from hooks on the
// instance's hub and store objects, and a split of merge / stringify / gzip measured on the
// stored snapshot), the instance's RSS and heap (now and peak, sampled every 25 ms), JSON and
// stored bytes, and the dashboard's first render of the job in Debian's chromium
// (e2e/bench/scale-out-render.mjs). Writes bench/results/scale-out.json; loopback only; a global
// deadline; it exits by itself.
import { type ChildProcess, execFileSync, fork, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import inspector from 'node:inspector/promises';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SELF = fileURLToPath(import.meta.url);
const ROOT = join(dirname(SELF), '..', '..', '..');
const ITERATIONS = Number(process.env['MQD_BENCH_RUNS'] ?? 3);
const TARGETS = { snapshotMs: 5000, firstRenderMs: 2000, rssMb: 2048 };
/** The whole run's deadline (MQD_BENCH_DEADLINE_S, default 1,500 s); it exits with 2 past it. */
const DEADLINE_MS = Number(process.env['MQD_BENCH_DEADLINE_S'] ?? 1500) * 1000;
/** MQD_BENCH_PROFILE_SNAPSHOTS=DIR: each instance's CPU profile of each timed snapshot, written there. */
const PROFILE_SNAPSHOTS = process.env['MQD_BENCH_PROFILE_SNAPSHOTS'] ?? null;
/**
 * MQD_BENCH_PERF=DIR: the whole machine's on-CPU samples around each timed snapshot (`perf record
 * -a`, every process and the kernel), for `perf report --sort comm,dso`: unlike the inspector's
 * profiles, which sample wall time, it tells which process and which part (kernel, V8, libc,
 * haproxy, PostgreSQL) had the cores when the machine is saturated.
 */
const PERF_SNAPSHOTS = process.env['MQD_BENCH_PERF'] ?? null;
const TOKEN = 'bench-agent-token-0123456789abcdef';
/** The instances' channel secret: the synthetic agents use the shared token, so it is a setting of its own. */
const CLUSTER_SECRET = 'bench-cluster-secret-0123456789abcdef';
const ADMIN = 'bench-admin-token-0123456789abcdef';
/** Agents per agent process (10 processes for 1,000 agents, 1 for the baseline's 10). */
const AGENTS_PER_PROC = Number(process.env['MQD_BENCH_AGENTS_PER_PROC'] ?? 100);
const AGENTS = Number(process.env['MQD_BENCH_AGENTS'] ?? 1000);
const RANKS_PER_AGENT = 100;
const STARTER_PID = 4242;
/** Limits a 100,000-rank snapshot needs raised (reported in the result). */
const LIMITS = {
  snapshotTimeoutMs: 120_000,
  maxSnapshotBytes: 1024 * 1024 * 1024,
  rateLimitMax: 100_000,
  maxSnapshotsPerJob: 10,
};

const hasSource = [...process.execArgv, process.env['NODE_OPTIONS'] ?? ''].some((a) =>
  a.includes('conditions=source'),
);
if (!hasSource) {
  const r = spawnSync(
    process.execPath,
    [...process.execArgv, '--conditions=source', SELF, ...process.argv.slice(2)],
    { stdio: 'inherit' },
  );
  process.exit(r.status ?? 1);
}

const now = () => performance.timeOrigin + performance.now();
const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};
/** This process's CPU time so far (user + system, every thread: libuv's pool and workers too). */
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const mb = (n: number) => Math.round((n / 1048576) * 10) / 10;
const round = (n: number) => Math.round(n * 10) / 10;

// --- child: the synthetic agents ---------------------------------------------------------------

/**
 * How the simulated agents read their ranks (MQD_BENCH_AGENT_READ):
 * - `ready` (the default, as on a cluster): each agent's ranks are made once, by the first read
 *   (the bench's untimed warm-up snapshot), and every later read answers the same ranks after a
 *   fixed per-node read time (MQD_BENCH_NODE_READ_MS, default 150: 64 real ranks read warm in
 *   63-117 ms, docs/benchmarks.md "Many real ranks on one node"). On a cluster each node's agent reads its 100 ranks
 *   on its own cores, in parallel with the others; here 1,000 agents share the aggregator's two
 *   cores, so making 125 MB of synthetic ranks at every snapshot measures this machine's CPU,
 *   not the aggregator. The agents still encode and send every rank at every snapshot with the
 *   real agent code.
 * - `live`: every read generates its ranks (`syntheticRingRank`, ~16 µs a rank): the baseline.
 */
const AGENT_READ = process.env['MQD_BENCH_AGENT_READ'] === 'live' ? 'live' : 'ready';
const NODE_READ_MS = Number(process.env['MQD_BENCH_NODE_READ_MS'] ?? 150);

type Reader = import('../src/shared/seams.js').RankReader;

/** `base`'s ranks kept after their first read; later reads answer them after NODE_READ_MS. */
function readyReader(base: Reader): Reader {
  const kept = new Map<string, Awaited<ReturnType<Reader['read']>>[number]>();
  return {
    mpi: base.mpi,
    async read(ranks, ro) {
      const missing = ranks.filter((t) => !kept.has(`${t.rank}:${t.pid}`));
      if (missing.length > 0) {
        for (const r of await base.read(missing, ro)) kept.set(`${r.rank}:${r.pid}`, r);
      } else {
        await new Promise((res) => setTimeout(res, NODE_READ_MS));
      }
      return ranks.flatMap((t) => {
        const r = kept.get(`${t.rank}:${t.pid}`);
        return r === undefined ? [] : [r];
      });
    },
  };
}

/** Agents [from, from + count) of a job of `total` nodes; node 0 also runs the starter. */
async function runAgents(url: string, from: number, count: number, total: number): Promise<void> {
  const { startAgent } = await import('../src/agent/agent.js');
  const { createFakeLocator, createFakeReader } = await import('../src/synthetic/fakes.js');
  const hosts = Array.from({ length: total }, (_, i) => `sim-${i}`);
  const job = {
    starterPid: STARTER_PID,
    uid: 1000,
    command: `mpirun -np ${total * RANKS_PER_AGENT} ./ring`,
    hosts,
    ranksPerHost: RANKS_PER_AGENT,
  };
  const agents = hosts.slice(from, from + count).map((host, k) =>
    startAgent({
      serverUrl: url,
      token: TOKEN,
      host,
      agentId: host,
      reader:
        AGENT_READ === 'ready'
          ? readyReader(createFakeReader({ worldSize: total * RANKS_PER_AGENT }))
          : createFakeReader({ worldSize: total * RANKS_PER_AGENT }),
      locator: from + k === 0 ? createFakeLocator(job) : null,
      backoff: { initialMs: 200, maxMs: 2000 },
      log: () => {},
    }),
  );
  process.on('disconnect', () => process.exit(0));
  process.on('message', (m) => {
    if (m === 'stop') void Promise.all(agents.map((a) => a.dispose())).then(() => process.exit(0));
    if (m === 'mem') process.send?.({ rss: process.memoryUsage().rss });
    if (m === 'cpu') process.send?.({ cpuMs: cpuMs() });
  });
  await Promise.all(agents.map((a) => a.whenConnected()));
  process.send?.({ ready: true });
}

// --- child: one aggregator instance ------------------------------------------------------------

interface Phases {
  /** First hub.snapshot call: the fan-out starts. */
  fanoutStart: number;
  fanoutIssued: number;
  firstChunk: number;
  lastChunk: number;
  /** The last host's request settled. */
  gathered: number;
  storeStart: number;
  storeEnd: number;
  hosts: number;
  chunks: number;
  /** Chunks whose ranks' JSON reached the fan-in as the agent sent it (hub.ts OnRanks). */
  chunksAsSent: number;
  /** Chunks read on another instance that crossed folded and deflated (rank-fold.ts). */
  chunksFolded: number;
  /** Arrival times of the chunks read by this instance's own agents, and of the folded ones. */
  localAt: number[];
  foldedAt: number[];
}

async function runServer(spec: { storeUrl: string | null; port: number }): Promise<void> {
  const { buildApp } = await import('../src/http/app.js');
  const dataDir = mkdtempSync(join(tmpdir(), 'mqd-scale-'));
  const config: Record<string, unknown> = {
    dataDir,
    port: spec.port,
    host: '127.0.0.1',
    agentToken: TOKEN,
    adminToken: ADMIN,
    allowSharedAgentToken: true,
    clusterSecret: CLUSTER_SECRET,
    webRoot: join(ROOT, 'apps', 'web', 'dist'),
    ...LIMITS,
    ...(spec.storeUrl === null ? {} : { storeUrl: spec.storeUrl }),
  };
  // MQD_BENCH_OVERVIEW_EAGER=0: overviews made when first asked for, not when a snapshot is stored.
  const eager = process.env['MQD_BENCH_OVERVIEW_EAGER'] !== '0';
  // biome-ignore lint/suspicious/noExplicitAny: storeUrl is only in newer configs
  const app = await buildApp({ config: config as any, logger: false, overviews: { eager } });
  await app.listen({ port: spec.port, host: '127.0.0.1' });
  const addr = app.server.address();
  if (addr === null || typeof addr === 'string') throw new Error('no address');
  // Timing hooks on this instance's own objects (nothing in the sources changes).
  const { hub, store, snapshots } = app.mqd;
  const phases: Phases[] = [];
  let cur: Phases | null = null;
  let pending = 0;
  // On a cluster: when this instance's own agents' chunks arrived while it read them for another
  // instance's snapshot, and when it sent them on folded (absolute ms, to set beside the asker's).
  const served = {
    chunksAt: [] as number[],
    sentAt: [] as number[],
    batchesInAt: [] as number[],
  };
  const inner = hub as unknown as {
    local?: typeof hub;
    nsp?: {
      serverSideEmit(ev: string, m: unknown): unknown;
      on(ev: string, fn: (m: unknown) => void): unknown;
    };
  };
  if (inner.local !== undefined && inner.nsp !== undefined) {
    const local = inner.local;
    const localSnapshot = local.snapshot.bind(local);
    local.snapshot = (host, ranks, timeoutMs, onRanks, owner, fold) =>
      localSnapshot(
        host,
        ranks,
        timeoutMs,
        (rs, text) => {
          served.chunksAt.push(now());
          onRanks(rs, text);
        },
        owner,
        fold,
      );
    const nsp = inner.nsp;
    // Batches of folded chunks reaching this instance (the asker), to set beside their sending.
    nsp.on('mqd:folded', () => served.batchesInAt.push(now()));
    const emit = nsp.serverSideEmit.bind(nsp);
    nsp.serverSideEmit = (ev, m) => {
      if (ev === 'mqd:folded') served.sentAt.push(now());
      return emit(ev, m);
    };
  }
  const origSnapshot = hub.snapshot.bind(hub);
  hub.snapshot = (host, ranks, timeoutMs, onRanks, owner, fold) => {
    const t = now();
    if (pending === 0 || cur === null) {
      cur = {
        fanoutStart: t,
        fanoutIssued: t,
        firstChunk: 0,
        lastChunk: 0,
        gathered: 0,
        storeStart: 0,
        storeEnd: 0,
        hosts: 0,
        chunks: 0,
        chunksAsSent: 0,
        chunksFolded: 0,
        localAt: [],
        foldedAt: [],
      };
      phases.push(cur);
    }
    const p = cur;
    p.fanoutIssued = t;
    p.hosts++;
    pending++;
    /** A chunk reached the fan-in: its time and count. */
    const arrived = () => {
      const c = now();
      if (p.firstChunk === 0) p.firstChunk = c;
      p.lastChunk = c;
      p.chunks++;
    };
    return origSnapshot(
      host,
      ranks,
      timeoutMs,
      (rs, text) => {
        arrived();
        p.localAt.push(p.lastChunk);
        if (text !== undefined) p.chunksAsSent++;
        onRanks(rs, text);
      },
      owner,
      fold === undefined
        ? undefined
        : {
            level: fold.level,
            onFolded: (c) => {
              arrived();
              p.foldedAt.push(p.lastChunk);
              p.chunksFolded++;
              fold.onFolded(c);
            },
          },
    ).finally(() => {
      pending--;
      p.gathered = now();
    });
  };
  const origInsert = store.insertSnapshot.bind(store);
  store.insertSnapshot = async (...args: Parameters<typeof origInsert>) => {
    const p = phases[phases.length - 1];
    if (p) p.storeStart = now();
    try {
      return await origInsert(...args);
    } finally {
      if (p) p.storeEnd = now();
    }
  };
  let peakRss = 0;
  let peakHeap = 0;
  const sample = () => {
    const m = process.memoryUsage();
    peakRss = Math.max(peakRss, m.rss);
    peakHeap = Math.max(peakHeap, m.heapUsed);
  };
  const sampler = setInterval(sample, 25);
  // Time in garbage collection (the main thread's pauses), for where the snapshot's time goes.
  let gcMs = 0;
  const { PerformanceObserver } = await import('node:perf_hooks');
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcMs += e.duration;
  }).observe({ entryTypes: ['gc'] });
  process.on('disconnect', () => process.exit(0));
  let profiler: inspector.Session | null = null;
  process.on('message', (raw) => {
    const m = raw as { cmd: string; id?: string };
    void (async () => {
      switch (m.cmd) {
        case 'mem': {
          sample();
          const u = process.memoryUsage();
          process.send?.({ rss: u.rss, heapUsed: u.heapUsed, peakRss, peakHeap });
          return;
        }
        case 'cpu':
          process.send?.({ cpuMs: cpuMs(), gcMs });
          return;
        // MQD_BENCH_PROFILE_SNAPSHOTS: a CPU profile of this instance around each timed snapshot.
        case 'profileStart':
          profiler ??= new inspector.Session();
          profiler.connect();
          await profiler.post('Profiler.enable');
          await profiler.post('Profiler.start');
          process.send?.({ ok: true });
          return;
        case 'profileStop': {
          if (profiler === null) throw new Error('no profile running');
          const { profile } = await profiler.post('Profiler.stop');
          profiler.disconnect();
          writeFileSync(m.id ?? 'profile.cpuprofile', JSON.stringify(profile));
          process.send?.({ ok: true });
          return;
        }
        case 'resetPeak':
          peakRss = 0;
          peakHeap = 0;
          sample();
          process.send?.({ ok: true });
          return;
        case 'phases': {
          const s = {
            batchesInAt: served.batchesInAt.splice(0),
            chunksAt: served.chunksAt.splice(0),
            sentAt: served.sentAt.splice(0),
          };
          process.send?.({ phases: phases.splice(0), served: s });
          return;
        }
        case 'agents': {
          // This instance's own agents (a cluster hub also lists the other instances').
          const local = (hub as unknown as { local?: { agents(): unknown[] } }).local ?? hub;
          process.send?.({ agents: local.agents().length });
          return;
        }
        case 'split': {
          // Where the time between the last answer and the store write goes, measured again on
          // the stored snapshot: the merge into one rank array, summarize (counts and digest),
          // each rank's JSON (made during the fan-in, as chunks arrive), and what fanout.ts does
          // when the chunks are not runs of consecutive ranks: join them (snapshotJson) and gzip
          // the whole (gzipSpliceable: pieces side by side). When every chunk is a run (these
          // agents' are), each is deflated as it arrives instead: whereTheTimeGoesMs shows that.
          const { summarize, snapshotJson } = await import('../src/fanout/fanout.js');
          const { gzipSpliceable } = await import('../src/hub/gzip-splice.js');
          const text = await snapshots.json(m.id ?? '');
          if (text === null) throw new Error('snapshot gone');
          const snap = JSON.parse(text) as { ranks: { rank: number }[] };
          const t0 = performance.now();
          const index = new Map<number, number>();
          for (const [i, r] of snap.ranks.entries()) index.set(r.rank, i);
          const merged = new Array(snap.ranks.length);
          for (const r of snap.ranks) merged[index.get(r.rank) ?? 0] = r;
          const t1 = performance.now();
          // biome-ignore lint/suspicious/noExplicitAny: the parsed snapshot's ranks
          summarize(merged as any);
          const t2 = performance.now();
          const texts = merged.map((r) => JSON.stringify(r));
          const t3 = performance.now();
          // biome-ignore lint/suspicious/noExplicitAny: the parsed snapshot
          const json = snapshotJson(snap as any, texts);
          const t4 = performance.now();
          await gzipSpliceable(json, app.mqd.config.gzipLevel);
          const t5 = performance.now();
          process.send?.({
            mergeMs: t1 - t0,
            summarizeMs: t2 - t1,
            rankJsonDuringFanInMs: t3 - t2,
            joinMs: t4 - t3,
            gzipMs: t5 - t4,
            gzipLevel: app.mqd.config.gzipLevel,
          });
          return;
        }
        case 'stop':
          clearInterval(sampler);
          await app.close();
          rmSync(dataDir, { recursive: true, force: true });
          process.exit(0);
      }
    })().catch((e: unknown) => {
      console.error(e);
      process.send?.({ error: String(e) });
    });
  });
  process.send?.({ port: addr.port });
}

// --- the bench ---------------------------------------------------------------------------------

function ask<T>(child: ChildProcess, msg: unknown): Promise<T> {
  const p = once(child, 'message').then(([m]) => m as T);
  child.send(msg as never);
  return p;
}

async function request(
  url: string,
  method: string,
  body?: unknown,
): Promise<{ status: number; text: string }> {
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, text: await res.text() };
}

interface Instance {
  readonly child: ChildProcess;
  readonly port: number;
}

async function startInstance(storeUrl: string | null, port = 0): Promise<Instance> {
  const child = fork(SELF, ['--serve', JSON.stringify({ storeUrl, port })], {
    execArgv: [
      ...process.execArgv,
      '--max-old-space-size=4096',
      // MQD_BENCH_PROFILE=DIR: a V8 CPU profile of each instance, written to DIR when it stops.
      ...(process.env['MQD_BENCH_PROFILE']
        ? ['--cpu-prof', `--cpu-prof-dir=${process.env['MQD_BENCH_PROFILE']}`]
        : []),
    ],
    stdio: 'inherit',
  });
  const [m] = (await once(child, 'message')) as [{ port?: number; error?: string }];
  if (m.port === undefined) throw new Error(`instance: ${m.error ?? 'no port'}`);
  return { child, port: m.port };
}

async function stopChild(child: ChildProcess, msg: unknown = 'stop'): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = once(child, 'exit');
  child.send(msg as never);
  const t = setTimeout(() => child.kill('SIGKILL'), 20_000);
  await exited;
  clearTimeout(t);
}

interface Scenario {
  readonly name: string;
  readonly agents: number;
  readonly agentProcs: number;
  readonly instances: Instance[];
  /** Where agents, the API and the browser go (an instance, or haproxy). */
  readonly url: string;
  readonly render: boolean;
  /** How the agents read (MQD_BENCH_AGENT_READ in their processes). */
  readonly agentRead: 'ready' | 'live';
}

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);

/** When a quarter, half and three quarters of `at` had come, from `t0` (ms; none when empty). */
function quantilesFrom(name: string, at: readonly number[], t0: number): Record<string, number> {
  if (at.length === 0) return {};
  const sorted = [...at].sort((a, b) => a - b);
  const q = (f: number) =>
    (sorted[Math.min(sorted.length - 1, Math.floor(f * sorted.length))] as number) - t0;
  return { [`${name}Q1`]: q(0.25), [`${name}Q2`]: q(0.5), [`${name}Q3`]: q(0.75) };
}

/** `perf record -a` into `file` until stop() (MQD_BENCH_PERF). */
async function perfStart(file: string): Promise<{ stop(): Promise<void> }> {
  mkdirSync(dirname(file), { recursive: true });
  const p = spawn('perf', ['record', '-a', '-F', '499', '-o', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  p.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  // perf is recording once it has opened its file.
  for (let i = 0; i < 200 && !existsSync(file) && p.exitCode === null; i++)
    await new Promise((r) => setTimeout(r, 25));
  if (p.exitCode !== null) throw new Error(`perf record: ${err.slice(0, 300)}`);
  return {
    async stop() {
      p.kill('SIGINT');
      if (p.exitCode === null) await once(p, 'exit');
    },
  };
}

async function measure(sc: Scenario) {
  const { instances, url } = sc;
  for (const i of instances) await ask(i.child, { cmd: 'resetPeak' });
  const t0 = performance.now();
  const per = Math.ceil(sc.agents / sc.agentProcs);
  const procs: ChildProcess[] = [];
  for (let from = 0; from < sc.agents; from += per) {
    procs.push(
      fork(
        SELF,
        ['--agents', url, String(from), String(Math.min(per, sc.agents - from)), String(sc.agents)],
        {
          execArgv: process.execArgv,
          stdio: 'inherit',
          env: { ...process.env, MQD_BENCH_AGENT_READ: sc.agentRead },
        },
      ),
    );
  }
  try {
    await Promise.all(procs.map((p) => once(p, 'message')));
    const connectMs = performance.now() - t0;
    const agentsRssMb = sum(
      await Promise.all(procs.map((p) => ask<{ rss: number }>(p, 'mem').then((m) => m.rss))),
    );
    const agentsPerInstance = await Promise.all(
      instances.map((i) => ask<{ agents: number }>(i.child, { cmd: 'agents' }).then((m) => m.agents)),
    );
    // Through a load balancer, the instance asked may not have heard of sim-0's agent on the
    // other instance yet (the cluster's agent states travel with a heartbeat): asked again.
    let att = await request(`${url}/api/jobs/attach`, 'POST', { host: 'sim-0', starterPid: STARTER_PID });
    for (let i = 0; i < 60 && att.status === 503; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      att = await request(`${url}/api/jobs/attach`, 'POST', { host: 'sim-0', starterPid: STARTER_PID });
    }
    if (att.status !== 201) throw new Error(`attach: ${att.status} ${att.text.slice(0, 300)}`);
    const jobId = (JSON.parse(att.text) as { job: { id: string } }).job.id;
    for (const i of instances) await ask(i.child, { cmd: 'phases' }); // drop the attach's
    const runs: number[] = [];
    const breakdowns: Record<string, number>[] = [];
    const cpu: {
      agentProcesses: number;
      instances: number;
      instancesGc: number;
      machine: number;
      machineIdle: number;
    }[] = [];
    let last = { id: '', ranks: 0, ok: 0, bytes: 0, storedBytes: 0 };
    const incomplete: unknown[] = [];
    let gatewayTimeouts = 0;
    let complete = -1; // the first complete one warms up
    for (let attempt = 0; complete < ITERATIONS && attempt < ITERATIONS + 4; attempt++) {
      await allConnected(instances, sc.agents);
      const before = await storedIds(url, jobId);
      const profileTo = PROFILE_SNAPSHOTS !== null && complete >= 0 ? PROFILE_SNAPSHOTS : null;
      if (profileTo !== null) for (const i of instances) await ask(i.child, { cmd: 'profileStart' });
      const perf =
        PERF_SNAPSHOTS !== null && complete >= 0
          ? await perfStart(join(PERF_SNAPSHOTS, `${sc.instances.length}i-run${complete + 1}.perf.data`))
          : null;
      const cpuBefore = await cpuOf(procs, instances);
      const sent = now();
      const r = await request(`${url}/api/jobs/${jobId}/snapshots`, 'POST');
      let answered = now();
      type Meta = typeof last & { missing: number; errors: number };
      let got: Meta;
      if (r.status === 504 || r.status === 502) {
        // The load balancer gave up on the request (its server timeout) while the instance goes
        // on: the snapshot counts when it is stored, seen in the job's list.
        gatewayTimeouts++;
        got = await newlyStored(url, jobId, before);
        answered = now();
      } else if (r.status !== 201) throw new Error(`snapshot: ${r.status} ${r.text.slice(0, 300)}`);
      else got = (JSON.parse(r.text) as { snapshot: Meta }).snapshot;
      // The instance that took the snapshot is the one whose hooks saw a store write.
      const all = await Promise.all(
        instances.map((i) =>
          ask<{
            phases: Phases[];
            served: { chunksAt: number[]; sentAt: number[]; batchesInAt: number[] };
          }>(i.child, { cmd: 'phases' }),
        ),
      );
      const servedAt = all.flatMap((a) => a.served.chunksAt);
      const sentAt = all.flatMap((a) => a.served.sentAt).sort((x, y) => x - y);
      // Each batch's way through PostgreSQL: the k-th received less the k-th sent (in order).
      const inAt = all.flatMap((a) => a.served.batchesInAt).sort((x, y) => x - y);
      const hop = inAt.map((t, k) => t - (sentAt[k] ?? t));
      const p = all.flatMap((a) => a.phases).find((x) => x.storeEnd > 0);
      const cpuAfter = await cpuOf(procs, instances);
      await perf?.stop();
      if (profileTo !== null) {
        for (const [k, i] of instances.entries()) {
          const file = join(profileTo, `${sc.instances.length}i-instance${k}-run${complete + 1}.cpuprofile`);
          await ask(i.child, { cmd: 'profileStop', id: file });
        }
      }
      if (got.ok !== sc.agents * RANKS_PER_AGENT) {
        // A partial snapshot (agents that did not answer in time on a busy machine): kept in
        // the result, not timed as complete.
        incomplete.push({ ms: round(answered - sent), ok: got.ok, missing: got.missing, errors: got.errors });
        continue;
      }
      last = got;
      complete++;
      if (complete === 0) continue; // warm-up
      runs.push(answered - sent);
      cpu.push({
        agentProcesses: cpuAfter.agents - cpuBefore.agents,
        instances: cpuAfter.instances - cpuBefore.instances,
        instancesGc: cpuAfter.instancesGc - cpuBefore.instancesGc,
        machine: cpuAfter.machine - cpuBefore.machine,
        machineIdle: cpuAfter.machineIdle - cpuBefore.machineIdle,
      });
      if (p)
        breakdowns.push({
          requestToFanout: p.fanoutStart - sent,
          fanoutIssue: p.fanoutIssued - p.fanoutStart,
          toFirstChunk: p.firstChunk - p.fanoutStart,
          fanIn: p.lastChunk - p.fanoutStart,
          lastChunkToSettled: p.gathered - p.lastChunk,
          mergeSummarizeStringifyGzip: p.storeStart - p.gathered,
          storeWrite: p.storeEnd - p.storeStart,
          storeToAnswer: answered - p.storeEnd,
          hosts: p.hosts,
          chunks: p.chunks,
          chunksAsSent: p.chunksAsSent,
          chunksFolded: p.chunksFolded,
          toLastLocalChunk: p.localAt.length === 0 ? 0 : Math.max(...p.localAt) - p.fanoutStart,
          toLastFoldedChunk: p.foldedAt.length === 0 ? 0 : Math.max(...p.foldedAt) - p.fanoutStart,
          ...quantilesFrom('local', p.localAt, p.fanoutStart),
          ...quantilesFrom('folded', p.foldedAt, p.fanoutStart),
          // The other instance: its agents' chunks as they reached it, its folded batches sent.
          ...quantilesFrom('heldElsewhere', servedAt, p.fanoutStart),
          ...quantilesFrom('foldedSent', sentAt, p.fanoutStart),
          ...quantilesFrom('batchHop', hop, 0),
          ...(sentAt.length === 0
            ? {}
            : { foldedBatches: sentAt.length, lastFoldedSent: Math.max(...sentAt) - p.fanoutStart }),
        });
    }
    if (last.id === '') throw new Error(`no complete snapshot: ${JSON.stringify(incomplete)}`);
    const memAll = await Promise.all(
      instances.map((i) =>
        ask<{ rss: number; heapUsed: number; peakRss: number; peakHeap: number }>(i.child, { cmd: 'mem' }),
      ),
    );
    // The split of merge..gzip, on the instance that stored it (any instance can read it).
    const split = await ask<Record<string, number>>(instances[0]?.child as ChildProcess, {
      cmd: 'split',
      id: last.id,
    });
    const tr = performance.now();
    const read = await request(`${url}/api/snapshots/${last.id}`, 'GET');
    const readMs = performance.now() - tr;
    if (read.status !== 200) throw new Error(`read: ${read.status}`);
    let render: unknown = null;
    if (sc.render) render = await firstRender(url, jobId, last.id);
    const bd: Record<string, number> = {};
    for (const k of Object.keys(breakdowns[0] ?? {})) bd[k] = round(median(breakdowns.map((b) => b[k] ?? 0)));
    return {
      scenario: sc.name,
      url,
      jobId,
      snapshotId: last.id,
      instances: instances.length,
      agents: sc.agents,
      agentProcesses: procs.length,
      agentsPerInstance,
      ranks: last.ranks,
      connectMs: round(connectMs),
      incompleteSnapshots: incomplete,
      gatewayTimeouts,
      snapshotMs: {
        median: round(median(runs)),
        min: round(Math.min(...runs)),
        max: round(Math.max(...runs)),
        runs: runs.map(round),
      },
      whereTheTimeGoesMs: bd,
      agentRead:
        sc.agentRead === 'ready'
          ? `ranks made once, then answered after ${NODE_READ_MS} ms a node (MQD_BENCH_AGENT_READ=ready)`
          : 'ranks generated at every read (MQD_BENCH_AGENT_READ=live)',
      // CPU time (user + system, all threads) spent during each timed snapshot, from the request
      // to its answer: every agent process together, every instance together, and the instances'
      // garbage-collection pauses (median).
      cpuDuringSnapshotMs: {
        agentProcesses: round(median(cpu.map((c) => c.agentProcesses))),
        instances: round(median(cpu.map((c) => c.instances))),
        instancesGcPauses: round(median(cpu.map((c) => c.instancesGc))),
        // PostgreSQL, haproxy and whatever else ran (machineBusy less agents and instances).
        otherProcesses: round(median(cpu.map((c) => c.machine - c.agentProcesses - c.instances))),
        machineBusy: round(median(cpu.map((c) => c.machine))),
        machineIdle: round(median(cpu.map((c) => c.machineIdle))),
      },
      mergeToGzipSplitMs: Object.fromEntries(Object.entries(split).map(([k, v]) => [k, round(v)])),
      readMs: round(readMs),
      jsonBytes: last.bytes,
      storedBytes: last.storedBytes,
      bytesPerRankJson: round(last.bytes / last.ranks),
      bytesPerRankStored: round(last.storedBytes / last.ranks),
      serverRssMb: memAll.map((m) => mb(m.rss)),
      serverPeakRssMb: memAll.map((m) => mb(m.peakRss)),
      serverHeapUsedMb: memAll.map((m) => mb(m.heapUsed)),
      serverPeakHeapMb: memAll.map((m) => mb(m.peakHeap)),
      agentProcessesRssMb: mb(agentsRssMb),
      firstRender: render,
    };
  } finally {
    await Promise.all(procs.map((p) => stopChild(p)));
  }
}

/** CPU time so far of every agent process together and of every instance together. */
async function cpuOf(
  procs: readonly ChildProcess[],
  instances: readonly Instance[],
): Promise<{ agents: number; instances: number; instancesGc: number; machine: number; machineIdle: number }> {
  const [a, i] = await Promise.all([
    Promise.all(procs.map((p) => ask<{ cpuMs: number }>(p, 'cpu').then((m) => m.cpuMs))),
    Promise.all(instances.map((x) => ask<{ cpuMs: number; gcMs: number }>(x.child, { cmd: 'cpu' }))),
  ]);
  const m = machineCpu();
  return {
    agents: sum(a),
    instances: sum(i.map((x) => x.cpuMs)),
    instancesGc: sum(i.map((x) => x.gcMs)),
    machine: m.busy,
    machineIdle: m.idle,
  };
}

/**
 * The whole machine's CPU time so far, busy and idle, in ms over all cores (/proc/stat's cpu
 * line, USER_HZ ticks): busy less the agents' and instances' own is what PostgreSQL, haproxy and
 * the rest of the machine took.
 */
function machineCpu(): { busy: number; idle: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const tick = 1000 / 100;
  const busy = (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0);
  return { busy: busy * tick, idle: ((idle ?? 0) + (iowait ?? 0)) * tick };
}

async function storedIds(url: string, jobId: string): Promise<Set<string>> {
  const r = await request(`${url}/api/jobs/${jobId}/snapshots`, 'GET');
  if (r.status !== 200) throw new Error(`list: ${r.status}`);
  return new Set((JSON.parse(r.text) as { snapshots: { id: string }[] }).snapshots.map((m) => m.id));
}

/** The first snapshot of the job not in `before`, polled every 250 ms (up to 300 s). */
async function newlyStored<T>(url: string, jobId: string, before: Set<string>): Promise<T> {
  const until = performance.now() + 300_000;
  while (performance.now() < until) {
    const r = await request(`${url}/api/jobs/${jobId}/snapshots`, 'GET');
    if (r.status === 200) {
      const fresh = (JSON.parse(r.text) as { snapshots: (T & { id: string })[] }).snapshots.find(
        (m) => !before.has(m.id),
      );
      if (fresh !== undefined) return fresh;
    }
    await new Promise((res) => setTimeout(res, 250));
  }
  throw new Error('the snapshot was never stored');
}

/** Waits (up to 120 s) until the instances hold `agents` agents between them. */
async function allConnected(instances: readonly Instance[], agents: number): Promise<void> {
  const until = performance.now() + 120_000;
  for (;;) {
    const n = await Promise.all(
      instances.map((i) => ask<{ agents: number }>(i.child, { cmd: 'agents' }).then((m) => m.agents)),
    );
    if (sum(n) >= agents || performance.now() > until) return;
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** e2e/bench/scale-out-render.mjs in its own process (playwright lives in e2e). */
async function firstRender(url: string, jobId: string, snapId: string): Promise<unknown> {
  const script = join(ROOT, 'e2e', 'bench', 'scale-out-render.mjs');
  if (!existsSync(join(ROOT, 'apps', 'web', 'dist', 'index.html')))
    return { error: 'apps/web/dist is missing: run npm run build first' };
  const child = spawn(process.execPath, [script, url, ADMIN, jobId, snapId], {
    cwd: join(ROOT, 'e2e'),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const [code] = (await once(child, 'exit')) as [number];
  const line = out.trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(line);
  } catch {
    return { error: `render bench exited ${code}: ${out.slice(-500)}` };
  }
}

async function oneInstance(agents: number, render: boolean, agentRead: 'ready' | 'live' = AGENT_READ) {
  const inst = await startInstance(null);
  try {
    return await measure({
      name: `one instance (SQLite), ${agents} agents x ${RANKS_PER_AGENT} ranks${agentRead === 'live' ? ', ranks generated at every read' : ''}`,
      agentRead,
      agents,
      agentProcs: Math.ceil(agents / AGENTS_PER_PROC),
      instances: [inst],
      url: `http://127.0.0.1:${inst.port}`,
      render,
    });
  } finally {
    await hold(`http://127.0.0.1:${inst.port}`);
    await stopChild(inst.child, { cmd: 'stop' });
  }
}

/**
 * MQD_BENCH_HOLD=FILE (profiling the dashboard by hand): the instance stays up, agents gone, until
 * FILE (written with its URL) is removed.
 */
async function hold(url: string): Promise<void> {
  const file = process.env['MQD_BENCH_HOLD'];
  if (file === undefined) return;
  writeFileSync(file, `${url}\n`);
  console.log(`scale-out: holding ${url} until ${file} is removed`);
  while (existsSync(file)) await new Promise((r) => setTimeout(r, 1000));
}

/** Why the two-instance scenario cannot run here, or null. */
async function clusterUnavailable(): Promise<string | null> {
  const { postgresAvailable, haproxyAvailable } = await import('@mqd/testkit');
  if (!postgresAvailable()) return 'postgresql-15 is not installed';
  if (!haproxyAvailable()) return 'haproxy is not installed';
  const { DEFAULT_CONFIG } = await import('../src/http/config.js');
  if (!('storeUrl' in DEFAULT_CONFIG)) return 'the server config has no storeUrl (--store postgres://...)';
  if (!existsSync(join(ROOT, 'apps', 'server', 'src', 'store-open.ts')))
    return 'buildApp does not open a PostgreSQL store yet (no store-open.ts)';
  return null;
}

async function twoInstances(agents: number, render: boolean) {
  const why = await clusterUnavailable();
  if (why !== null) return { scenario: 'two instances behind haproxy', notRun: why };
  const { startPostgres, startHaproxy } = await import('@mqd/testkit');
  const pg = await startPostgres();
  const started: Instance[] = [];
  try {
    // One after the other: the first one runs the migrations.
    started.push(await startInstance(pg.url));
    started.push(await startInstance(pg.url));
    // haproxy waits longer than the raised snapshot timeout (a 504 would cut a slow snapshot off).
    const lb = await startHaproxy(
      started.map((i, k) => ({ name: `mqd${k}`, port: i.port })),
      { serverTimeoutS: LIMITS.snapshotTimeoutMs / 1000 + 30 },
    );
    try {
      return await measure({
        name: `two instances (PostgreSQL) behind haproxy, ${agents} agents x ${RANKS_PER_AGENT} ranks`,
        agents,
        agentProcs: Math.ceil(agents / AGENTS_PER_PROC),
        instances: started,
        url: lb.url,
        render,
        agentRead: AGENT_READ,
      });
    } finally {
      await lb.stop();
    }
  } catch (e) {
    return { scenario: 'two instances behind haproxy', notRun: `failed: ${String(e).slice(0, 500)}` };
  } finally {
    for (const i of started) await stopChild(i.child, { cmd: 'stop' });
    await pg.stop();
  }
}

function gitHead(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<void> {
  const deadline = setTimeout(() => {
    console.error(`scale-out: gave up after ${DEADLINE_MS} ms`);
    process.exit(2);
  }, DEADLINE_MS);
  deadline.unref();
  const loadBefore = loadavg().map(round);
  const only = process.env['MQD_BENCH_SCENARIOS'] ?? 'baseline,one,two,live';
  const baseline = only.includes('baseline') ? await oneInstance(10, true) : null;
  console.log(`scale-out baseline: ${JSON.stringify(baseline)}`);
  const one = only.includes('one') ? await oneInstance(AGENTS, true) : null;
  console.log(`scale-out one instance: ${JSON.stringify(one)}`);
  const two = only.includes('two')
    ? await twoInstances(AGENTS, true)
    : { scenario: 'two instances behind haproxy', notRun: 'not asked (MQD_BENCH_SCENARIOS)' };
  console.log(`scale-out two instances: ${JSON.stringify(two)}`);
  // The stop-40 model beside it: every agent generates its ranks at every read, on these cores.
  const live = only.includes('live') ? await oneInstance(AGENTS, false, 'live') : null;
  console.log(`scale-out one instance, ranks generated at every read: ${JSON.stringify(live)}`);
  const render = (x: unknown) =>
    (x as { firstRender?: { firstRenderMs?: number } } | null)?.firstRender?.firstRenderMs;
  const result = {
    bench: 'scale-out',
    date: new Date().toISOString(),
    commit: gitHead(),
    node: process.version,
    cpus: cpus().length,
    memoryGb: round(totalmem() / 2 ** 30),
    loadAverage: { before: loadBefore, after: loadavg().map(round) },
    iterations: ITERATIONS,
    targets: TARGETS,
    limitsRaised: LIMITS,
    agentsModel: `${Math.ceil(AGENTS / AGENTS_PER_PROC)} node processes x ${AGENTS_PER_PROC} agents for ${AGENTS} agents (each its own socket.io connection and handshake, the real agent code with the fake reader; ${AGENT_READ === 'ready' ? `ranks made once, then answered after ${NODE_READ_MS} ms a node` : 'ranks generated at every read'}); one node process per agent would need ~50 GB`,
    baseline,
    oneInstance: one,
    twoInstances: two,
    oneInstanceRanksGeneratedAtEveryRead: live,
    ratio:
      baseline && one && 'snapshotMs' in one
        ? {
            ranks: one.ranks / baseline.ranks,
            snapshotTime: round(one.snapshotMs.median / baseline.snapshotMs.median),
            connect: round(one.connectMs / baseline.connectMs),
            firstRender:
              render(one) !== undefined && render(baseline) !== undefined
                ? round((render(one) ?? 0) / (render(baseline) ?? 1))
                : null,
          }
        : null,
    pass:
      one !== null && 'snapshotMs' in one
        ? {
            snapshot: one.snapshotMs.median < TARGETS.snapshotMs,
            rss: Math.max(...one.serverPeakRssMb) < TARGETS.rssMb,
            firstRender: (render(one) ?? Number.POSITIVE_INFINITY) < TARGETS.firstRenderMs,
          }
        : null,
  };
  const out = process.env['MQD_BENCH_OUT'] ?? join(ROOT, 'bench', 'results', 'scale-out.json');
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`scale-out: -> ${out}: ${JSON.stringify(result.pass)} ratio ${JSON.stringify(result.ratio)}`);
  process.exit(0);
}

const mode = process.argv[2];
if (mode === '--agents') {
  void runAgents(
    process.argv[3] ?? '',
    Number(process.argv[4]),
    Number(process.argv[5]),
    Number(process.argv[6]),
  );
} else if (mode === '--serve') {
  runServer(JSON.parse(process.argv[3] ?? '{}')).catch((e: unknown) => {
    console.error(e);
    process.send?.({ error: String(e) });
    process.exit(1);
  });
} else {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
