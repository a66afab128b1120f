// The warm path: a warm 4-rank snapshot through the API against its floor, a direct
// resolved read of the same queues in this process, in the same run, both MPIs.
// Run: npm run bench (builds first; the reader runs from dist/ as in production).
// - api: `Snapshotter.snapshot` of the 4 ranks of ring_ssend, warm (same Snapshotter), queues
//   only (stacks: false) and with stacks (the default);
// - floor: a OneStopReader in this process, already set up for the 4 pids, stopping and reading
//   each rank in turn (no reader child, no IPC, no /proc checks, no assembly);
// - stop: each rank's pausedMicros in the api snapshots (queues only).
// MQD_BENCH_RUNS rounds (default 30), alternating api and floor; medians.
import { mkdirSync, writeFileSync } from 'node:fs';
import { DebugFileRegistry, OneStopReader, Snapshotter } from '@mqd/core';
import { launchFixture, queueDll } from '@mqd/testkit';

const RUNS = Number(process.env['MQD_BENCH_RUNS'] ?? 30);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;
type Mpi = 'openmpi' | 'mpich';

interface Row {
  mpi: Mpi;
  ranks: number;
  floorMs: number;
  apiMs: number;
  ratio: number;
  apiWithStacksMs: number;
  medianStopMs: number;
  maxStopMs: number;
}

async function measure(mpi: Mpi): Promise<Row> {
  const job = await launchFixture({ mpi, fixture: 'ring_ssend', np: 4 });
  const s = new Snapshotter();
  const direct = OneStopReader.open(queueDll(mpi), {
    registry: new DebugFileRegistry(),
    readBudgetBytes: 64 << 20,
    stopTimeoutMs: 2000,
  });
  try {
    if (!direct.ok) throw new Error(direct.error.message);
    const targets = job.ranks.map((r) => ({ pid: r.pid, rank: r.rank }));
    const floorTargets = job.ranks.map((r) => ({ pid: r.pid, rank: r.rank, host: 'h' }));
    // Warm both: set-up, indexes, JIT.
    for (let i = 0; i < 3; i++) {
      await s.snapshot(targets, { stacks: false });
      await s.snapshot(targets);
      for (const t of floorTargets) direct.value.snapshotRank(t, { stacks: false });
    }
    const floor: number[] = [];
    const api: number[] = [];
    const apiStacks: number[] = [];
    const stops: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      let t0 = process.hrtime.bigint();
      for (const t of floorTargets) {
        const r = direct.value.snapshotRank(t, { stacks: false });
        if (r.state.kind !== 'ok') throw new Error(`${mpi} floor: ${JSON.stringify(r.state)}`);
      }
      floor.push(ms(t0));
      t0 = process.hrtime.bigint();
      const res = await s.snapshot(targets, { stacks: false });
      api.push(ms(t0));
      for (const r of res.snapshot.ranks) {
        if (r.state.kind !== 'ok') throw new Error(`${mpi} api: ${JSON.stringify(r.state)}`);
        stops.push((r.pausedMicros ?? Number.NaN) / 1000);
      }
      t0 = process.hrtime.bigint();
      await s.snapshot(targets);
      apiStacks.push(ms(t0));
    }
    return {
      mpi,
      ranks: targets.length,
      floorMs: median(floor),
      apiMs: median(api),
      ratio: median(api) / median(floor),
      apiWithStacksMs: median(apiStacks),
      medianStopMs: median(stops),
      maxStopMs: Math.max(...stops),
    };
  } finally {
    if (direct.ok) direct.value.close();
    await s.dispose();
    await job.dispose();
  }
}

const rows: Row[] = [];
for (const mpi of ['openmpi', 'mpich'] as const) rows.push(await measure(mpi));
const result = {
  bench: 'warm-path',
  date: new Date().toISOString(),
  runs: RUNS,
  targets: { ratio: 3, medianStopMs: 1 },
  rows,
};
mkdirSync('bench/results', { recursive: true });
writeFileSync('bench/results/warm-path.json', `${JSON.stringify(result, null, 2)}\n`);
for (const r of rows) {
  console.log(
    `warm path ${r.mpi} ${r.ranks} ranks: api ${r.apiMs.toFixed(2)} ms (with stacks ${r.apiWithStacksMs.toFixed(2)} ms) vs floor ${r.floorMs.toFixed(2)} ms (x${r.ratio.toFixed(2)}); stop per rank median ${r.medianStopMs.toFixed(3)} ms, max ${r.maxStopMs.toFixed(2)} ms`,
  );
}
