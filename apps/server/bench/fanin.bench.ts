// Fan-in benchmark of the aggregator. Run from the repository root:
//   npx tsx apps/server/bench/fanin.bench.ts
// An aggregator on 127.0.0.1 (file-backed store in a temp dir) and, in a child process,
// 256 synthetic agents x 64 ranks = 16,384 ranks with realistic queues. Measured: the time of
// POST /api/jobs/:id/snapshots (fan-out, fan-in of every agent's chunks, validation, merge,
// gzip and the SQLite transaction), median of ITERATIONS after one warm-up, and the server's
// RSS and heap. A baseline of 16 agents x 64 ranks runs in the same process first, so the
// result is also a ratio that survives a slower or busier machine. The agents live in another
// process so their work (generating and serialising ranks) is not charged to the server, as
// on a real cluster. Writes bench/results/fanin.json and prints one line. Loopback only, fixed
// iterations, a global deadline; it exits by itself.
import { fork, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SELF = fileURLToPath(import.meta.url);
const ROOT = join(dirname(SELF), '..', '..', '..');
const ITERATIONS = 5;
const TARGET_MS = 2000;
const DEADLINE_MS = 300_000;
const TOKEN = 'bench-agent-token-0123456789abcdef';
const ADMIN = 'bench-admin-token-0123456789abcdef';

// Workspace packages resolve to their TypeScript sources only under the `source` export
// condition (as in the tests); re-run this file with it when tsx was started without it.
const hasSource = [...process.execArgv, process.env['NODE_OPTIONS'] ?? ''].some((a) =>
  a.includes('conditions=source'),
);
if (!hasSource) {
  const r = spawnSync(
    process.execPath,
    [...process.execArgv, '--conditions=source', SELF, ...process.argv.slice(2)],
    {
      stdio: 'inherit',
    },
  );
  process.exit(r.status ?? 1);
}

interface Scenario {
  readonly agents: number;
  readonly ranksPerAgent: number;
}

interface Measured {
  readonly agents: number;
  readonly ranks: number;
  readonly snapshotMs: {
    readonly median: number;
    readonly min: number;
    readonly max: number;
    readonly runs: number[];
  };
  readonly readMs: number;
  readonly jsonBytes: number;
  readonly storedBytes: number;
  readonly serverRssMb: number;
  readonly serverHeapUsedMb: number;
  readonly connectMs: number;
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};
const mb = (n: number) => Math.round((n / 1048576) * 10) / 10;
const round = (n: number) => Math.round(n * 10) / 10;

/** Child process: the synthetic agents. */
async function runAgents(url: string, agents: number, ranksPerAgent: number): Promise<void> {
  const { startSyntheticAgents } = await import('../src/synthetic/synthetic-agents.js');
  const sim = startSyntheticAgents({
    serverUrl: url,
    token: TOKEN,
    agents,
    ranksPerAgent,
    backoff: { initialMs: 100, maxMs: 1000 },
  });
  process.on('disconnect', () => process.exit(0));
  process.on('message', (m) => {
    if (m === 'stop') void sim.dispose().then(() => process.exit(0));
  });
  await sim.whenConnected();
  process.send?.({ ready: true, starterPid: sim.job.starterPid });
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

async function scenario(sc: Scenario): Promise<Measured> {
  const { buildApp } = await import('../src/http/app.js');
  const dataDir = mkdtempSync(join(tmpdir(), 'mqd-fanin-'));
  const app = await buildApp({
    config: {
      dataDir,
      agentToken: TOKEN,
      adminToken: ADMIN,
      rateLimitMax: 10_000,
      maxSnapshotsPerJob: 10,
      // The simulated agents all present the one token.
      allowSharedAgentToken: true,
    },
  });
  try {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const addr = app.server.address();
    if (addr === null || typeof addr === 'string') throw new Error('no address');
    const base = `http://127.0.0.1:${addr.port}`;
    const t0 = performance.now();
    const child = fork(SELF, ['--agents', base, String(sc.agents), String(sc.ranksPerAgent)], {
      execArgv: process.execArgv,
      stdio: 'inherit',
    });
    try {
      const [msg] = (await once(child, 'message')) as [{ starterPid: number }];
      const connectMs = performance.now() - t0;
      const att = await request(`${base}/api/jobs/attach`, 'POST', {
        host: 'sim-0',
        starterPid: msg.starterPid,
      });
      if (att.status !== 201) throw new Error(`attach: ${att.status} ${att.text}`);
      const jobId = (JSON.parse(att.text) as { job: { id: string } }).job.id;
      const runs: number[] = [];
      let last = { id: '', ranks: 0, ok: 0, bytes: 0, storedBytes: 0 };
      for (let i = 0; i <= ITERATIONS; i++) {
        const t = performance.now();
        const r = await request(`${base}/api/jobs/${jobId}/snapshots`, 'POST');
        const ms = performance.now() - t;
        if (r.status !== 201) throw new Error(`snapshot: ${r.status} ${r.text}`);
        last = (JSON.parse(r.text) as { snapshot: typeof last }).snapshot;
        if (last.ok !== sc.agents * sc.ranksPerAgent)
          throw new Error(`only ${last.ok} ranks ok: ${r.text.slice(0, 300)}`);
        if (i > 0) runs.push(ms); // run 0 warms up
      }
      const tr = performance.now();
      const read = await request(`${base}/api/snapshots/${last.id}`, 'GET');
      const readMs = performance.now() - tr;
      if (read.status !== 200) throw new Error(`read: ${read.status}`);
      const mem = process.memoryUsage();
      child.send('stop');
      await once(child, 'exit');
      return {
        agents: sc.agents,
        ranks: last.ranks,
        snapshotMs: {
          median: round(median(runs)),
          min: round(Math.min(...runs)),
          max: round(Math.max(...runs)),
          runs: runs.map(round),
        },
        readMs: round(readMs),
        jsonBytes: last.bytes,
        storedBytes: last.storedBytes,
        serverRssMb: mb(mem.rss),
        serverHeapUsedMb: mb(mem.heapUsed),
        connectMs: round(connectMs),
      };
    } finally {
      if (child.exitCode === null) child.kill();
    }
  } finally {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const deadline = setTimeout(() => {
    console.error(`fanin: gave up after ${DEADLINE_MS} ms`);
    process.exit(2);
  }, DEADLINE_MS);
  deadline.unref();
  const baseline = await scenario({ agents: 16, ranksPerAgent: 64 });
  const target = await scenario({ agents: 256, ranksPerAgent: 64 });
  const result = {
    bench: 'fanin',
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    iterations: ITERATIONS,
    targetMs: TARGET_MS,
    baseline,
    target,
    ratio: {
      ranks: target.ranks / baseline.ranks,
      snapshotTime: round(target.snapshotMs.median / baseline.snapshotMs.median),
    },
    pass: target.snapshotMs.median < TARGET_MS,
    maxRssMb: mb(process.resourceUsage().maxRSS * 1024),
  };
  const out = join(ROOT, 'bench', 'results', 'fanin.json');
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  console.log(
    `fanin: ${target.ranks} ranks (${target.agents} agents) snapshot median ${target.snapshotMs.median} ms ` +
      `(target < ${TARGET_MS} ms: ${result.pass ? 'PASS' : 'FAIL'}), baseline ${baseline.ranks} ranks ` +
      `${baseline.snapshotMs.median} ms, ratio ${result.ratio.snapshotTime}x for ${result.ratio.ranks}x ranks; ` +
      `read ${target.readMs} ms; server RSS ${target.serverRssMb} MB (peak ${result.maxRssMb} MB), heap ` +
      `${target.serverHeapUsedMb} MB; ${mb(target.jsonBytes)} MB JSON stored as ${mb(target.storedBytes)} MB -> ${out}`,
  );
  process.exit(result.pass ? 0 : 1);
}

if (process.argv[2] === '--agents') {
  void runAgents(process.argv[3] ?? '', Number(process.argv[4]), Number(process.argv[5]));
} else {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
