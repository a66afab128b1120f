// Many ranks on one node: the ranks of one DLL read by parallel reader children
// (bounded by cores) against one reader, in the same run. 64 busy-polling MPI ranks would
// oversubscribe this 2-core machine 32 times and measure the scheduler, so the ranks here are 64
// conformance targets (native/conformance: an MPI-like library and its own mqs_* DLL, queues on
// three communicators, blocked in a sleep): the same reader path (stop, DLL walk, stacks,
// resume, IPC) without MPI's busy polling. Warm snapshots, stacks on, MQD_BENCH_RUNS rounds
// (default 15) alternating one reader and the default pool; medians.
// Run: npm run bench. MQD_BENCH_RANKS changes the 64.
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { Snapshotter } from '@mqd/core';
import { buildConformance, killAllTargets, startTarget, type Target } from '@mqd/core/testing';

const RANKS = Number(process.env['MQD_BENCH_RANKS'] ?? 64);
const RUNS = Number(process.env['MQD_BENCH_RUNS'] ?? 15);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

const b = buildConformance();
const procs: Target[] = [];
try {
  for (let r = 0; r < RANKS; r++) procs.push(await startTarget(b.target, b.dll, 0, r));
  const targets = procs.map((p, rank) => ({ pid: p.pid, rank }));
  const one = new Snapshotter({ maxReadersPerDll: 1 });
  const pool = new Snapshotter();
  const t: { one: number[]; pool: number[] } = { one: [], pool: [] };
  const stops: number[] = [];
  let readers = 0;
  try {
    const check = async (s: Snapshotter, into: number[] | null) => {
      const t0 = process.hrtime.bigint();
      const { snapshot } = await s.snapshot(targets, { dll: b.dll });
      if (into) into.push(ms(t0));
      const bad = snapshot.ranks.filter((r) => r.state.kind !== 'ok');
      if (bad.length > 0 || snapshot.ranks.length !== RANKS)
        throw new Error(`${bad.length} ranks not read: ${JSON.stringify(bad[0]?.state)}`);
      return snapshot;
    };
    for (let i = 0; i < 2; i++) {
      await check(one, null);
      await check(pool, null);
    }
    readers = pool.hostPids().length;
    for (let i = 0; i < RUNS; i++) {
      await check(one, t.one);
      const snap = await check(pool, t.pool);
      for (const r of snap.ranks) stops.push((r.pausedMicros ?? Number.NaN) / 1000);
    }
  } finally {
    await one.dispose();
    await pool.dispose();
  }
  const row = {
    ranks: RANKS,
    cores: availableParallelism(),
    readers,
    oneReaderMs: median(t.one),
    poolMs: median(t.pool),
    speedup: median(t.one) / median(t.pool),
    medianStopMs: median(stops),
  };
  const result = {
    bench: 'parallel-readers',
    date: new Date().toISOString(),
    runs: RUNS,
    ranksAre: 'conformance targets (native/conformance), not MPI ranks',
    targets: { poolMs: 100 },
    rows: [row],
  };
  mkdirSync('bench/results', { recursive: true });
  writeFileSync('bench/results/parallel-readers.json', `${JSON.stringify(result, null, 2)}\n`);
  console.log(
    `parallel readers: ${row.ranks} ranks, ${row.readers} readers on ${row.cores} cores: warm ${row.poolMs.toFixed(1)} ms vs one reader ${row.oneReaderMs.toFixed(1)} ms (x${row.speedup.toFixed(2)}); stop per rank median ${row.medianStopMs.toFixed(3)} ms`,
  );
} finally {
  killAllTargets();
}
