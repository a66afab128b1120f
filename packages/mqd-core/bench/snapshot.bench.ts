// Snapshot speed on real hung 4-rank jobs (Open MPI and MPICH ring_ssend fixtures).
// Run: npm run bench (builds first; the reader runs from dist/ as in production).
// Figures: cold = first snapshot in a fresh Snapshotter (host start, DLL load, symbol and type
// indexing); warm = the next snapshot of the same job; paused = the longest time any rank was
// stopped. Baseline in the same run: a naive debugger that resolves symbols and types per
// process (a fresh Snapshotter for each rank, so nothing is shared between ranks).
import { mkdirSync, writeFileSync } from 'node:fs';
import { Snapshotter } from '@mqd/core';
import { type FixtureJob, launchFixture } from '@mqd/testkit';

const RUNS = Number(process.env['MQD_BENCH_RUNS'] ?? 5);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

interface Row {
  mpi: string;
  coldMs: number;
  warmMs: number;
  maxPausedMs: number;
  naivePerProcessMs: number;
  coldSpeedup: number;
  ranks: number;
}

async function measure(mpi: 'openmpi' | 'mpich'): Promise<Row> {
  const job: FixtureJob = await launchFixture({ mpi, fixture: 'ring_ssend', np: 4 });
  try {
    const targets = job.ranks.map((r) => ({ pid: r.pid, rank: r.rank }));
    const cold: number[] = [];
    const warm: number[] = [];
    const paused: number[] = [];
    const naive: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const s = new Snapshotter();
      let t0 = process.hrtime.bigint();
      const first = await s.snapshot(targets);
      cold.push(ms(t0));
      if (first.snapshot.ranks.some((r) => r.state.kind !== 'ok'))
        throw new Error(`${mpi}: ${JSON.stringify(first.snapshot.ranks.map((r) => r.state))}`);
      for (let w = 0; w < 3; w++) {
        t0 = process.hrtime.bigint();
        const again = await s.snapshot(targets);
        warm.push(ms(t0));
        for (const r of again.snapshot.ranks) paused.push((r.pausedMicros ?? 0) / 1000);
      }
      await s.dispose();
      // Naive baseline: everything resolved again for every process.
      t0 = process.hrtime.bigint();
      for (const t of targets) {
        const one = new Snapshotter();
        await one.snapshot([t]);
        await one.dispose();
      }
      naive.push(ms(t0));
    }
    const row = {
      mpi,
      ranks: targets.length,
      coldMs: median(cold),
      warmMs: median(warm),
      maxPausedMs: Math.max(...paused),
      naivePerProcessMs: median(naive),
      coldSpeedup: median(naive) / median(cold),
    };
    return row;
  } finally {
    await job.dispose();
  }
}

const rows: Row[] = [];
for (const mpi of ['openmpi', 'mpich'] as const) rows.push(await measure(mpi));
const result = {
  bench: 'snapshot',
  date: new Date().toISOString(),
  runs: RUNS,
  targets: { coldMs: 1000, warmMs: 100, maxPausedMs: 10 },
  rows,
};
mkdirSync('bench/results', { recursive: true });
writeFileSync('bench/results/snapshot.json', `${JSON.stringify(result, null, 2)}\n`);
for (const r of rows) {
  console.log(
    `snapshot ${r.mpi} ${r.ranks} ranks: cold ${r.coldMs.toFixed(0)} ms, warm ${r.warmMs.toFixed(1)} ms, max stopped ${r.maxPausedMs.toFixed(2)} ms; naive per-process ${r.naivePerProcessMs.toFixed(0)} ms (${r.coldSpeedup.toFixed(1)}x slower than cold)`,
  );
}
