// What reading OpenMP through the runtime's libompd adds to a rank's stop (the
// one-stop design's budget for everything beyond the queues is a few milliseconds per rank).
// Run: npm run bench (or: node --conditions=source --import tsx packages/mqd-core/bench/openmp.bench.ts).
// Baseline in the same run, same Snapshotter, same fixture, same MPI: two hybrid omp_single_recv
// jobs side by side, one with OMP_DEBUG=enabled (queues + stacks + OpenMP read in the stop) and
// one without (queues + stacks; the runtime is found and refused as MQD_E_OMPD_DISABLED without
// a libompd call), snapshotted alternately. `paused` is RankSnapshot.pausedMicros.
import { mkdirSync, writeFileSync } from 'node:fs';
import { Snapshotter } from '@mqd/core';
import type { JobSnapshot } from '@mqd/model';
import { launchFixture } from '@mqd/testkit';

const RUNS = Number(process.env['MQD_BENCH_RUNS'] ?? 15);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const pausedOf = (s: JobSnapshot) => s.ranks.map((r) => (r.pausedMicros ?? 0) / 1000);

interface Row {
  mpi: string;
  ranks: number;
  openmpThreadsPerRank: number;
  pausedWithoutOpenMpMs: number;
  pausedWithOpenMpMs: number;
  addedPerRankMs: number;
  ratio: number;
}

async function cost(mpi: 'openmpi' | 'mpich'): Promise<Row> {
  const withOmp = await launchFixture({ mpi, fixture: 'omp_single_recv', hybrid: true });
  const without = await launchFixture({
    mpi,
    fixture: 'omp_single_recv',
    hybrid: true,
    unsetEnv: ['OMP_DEBUG'],
  });
  const s = new Snapshotter();
  try {
    const targetsOf = (j: typeof withOmp) => j.ranks.map((r) => ({ pid: r.pid, rank: r.rank }));
    // Warm both: host, DLL, symbol indexes, libompd loaded and initialised.
    await s.snapshot(targetsOf(without), { stacks: true });
    let sample = (await s.snapshot(targetsOf(withOmp), { stacks: true })).snapshot;
    const base: number[] = [];
    const omp: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      base.push(...pausedOf((await s.snapshot(targetsOf(without), { stacks: true })).snapshot));
      sample = (await s.snapshot(targetsOf(withOmp), { stacks: true })).snapshot;
      omp.push(...pausedOf(sample));
    }
    const bad = sample.ranks.find((r) => !r.openmp);
    if (bad) throw new Error(`${mpi}: rank ${bad.rank} has no OpenMP: ${JSON.stringify(bad.openmpError)}`);
    return {
      mpi,
      ranks: sample.ranks.length,
      openmpThreadsPerRank: sample.ranks[0]?.openmp?.threads.length ?? 0,
      pausedWithoutOpenMpMs: median(base),
      pausedWithOpenMpMs: median(omp),
      addedPerRankMs: median(omp) - median(base),
      ratio: median(omp) / median(base),
    };
  } finally {
    await s.dispose();
    await withOmp.dispose();
    await without.dispose();
  }
}

const rows: Row[] = [];
for (const mpi of ['openmpi', 'mpich'] as const) rows.push(await cost(mpi));
const result = {
  bench: 'openmp',
  date: new Date().toISOString(),
  runs: RUNS,
  targets: { addedPerRankMs: 2 },
  rows,
};
mkdirSync('bench/results', { recursive: true });
writeFileSync('bench/results/openmp.json', `${JSON.stringify(result, null, 2)}\n`);
for (const r of rows) {
  console.log(
    `openmp ${r.mpi} ${r.ranks} ranks (${r.openmpThreadsPerRank} OpenMP threads each): stopped ${r.pausedWithoutOpenMpMs.toFixed(2)} ms with queues + stacks, ${r.pausedWithOpenMpMs.toFixed(2)} ms with OpenMP too (+${r.addedPerRankMs.toFixed(2)} ms per rank, x${r.ratio.toFixed(2)})`,
  );
}
