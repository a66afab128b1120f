// What unwinding every thread in the same stop costs (target: < 2 ms per rank for one thread
// of ~20 frames; 64 ranks on one node in < 500 ms warm).
// Run: npm run bench (or: node --conditions=source --import tsx packages/mqd-core/bench/stacks.bench.ts).
// Baseline in the same run, on the same ranks, with the same warm Snapshotter: snapshots taken
// alternately with stacks: false and stacks: true. `paused` is how long each rank was stopped
// (RankSnapshot.pausedMicros), so the difference is what the unwinding adds to the stop.
import { mkdirSync, writeFileSync } from 'node:fs';
import { Snapshotter } from '@mqd/core';
import type { JobSnapshot } from '@mqd/model';
import { launchFixture } from '@mqd/testkit';

const RUNS = Number(process.env['MQD_BENCH_RUNS'] ?? 15);
const MANY = Number(process.env['MQD_BENCH_MANY_RANKS'] ?? 16);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

interface StopRow {
  mpi: string;
  ranks: number;
  mainThreadFrames: number;
  threadsPerRank: number;
  pausedNoStacksMs: number;
  pausedStacksMs: number;
  addedPerRankMs: number;
  ratio: number;
  coldStacksSnapshotMs: number;
}

interface ManyRow {
  mpi: string;
  ranks: number;
  warmNoStacksMs: number;
  warmStacksMs: number;
  ratio: number;
}

const pausedOf = (s: JobSnapshot) => s.ranks.map((r) => (r.pausedMicros ?? 0) / 1000);

async function stopCost(mpi: 'openmpi' | 'mpich'): Promise<StopRow> {
  const job = await launchFixture({ mpi, fixture: 'ring_ssend', np: 4 });
  const s = new Snapshotter();
  try {
    const targets = job.ranks.map((r) => ({ pid: r.pid, rank: r.rank }));
    await s.snapshot(targets, { stacks: false }); // host, DLL and queue setup warm
    let t0 = process.hrtime.bigint();
    const first = await s.snapshot(targets, { stacks: true }); // Dwfl report + symbolisation cold
    const coldStacksSnapshotMs = ms(t0);
    const off: number[] = [];
    const on: number[] = [];
    let sample: JobSnapshot = first.snapshot;
    for (let i = 0; i < RUNS; i++) {
      off.push(...pausedOf((await s.snapshot(targets, { stacks: false })).snapshot));
      t0 = process.hrtime.bigint();
      sample = (await s.snapshot(targets, { stacks: true })).snapshot;
      on.push(...pausedOf(sample));
    }
    const bad = sample.ranks.find((r) => !r.threads || r.stacksError);
    if (bad) throw new Error(`${mpi}: rank ${bad.rank} has no stacks: ${JSON.stringify(bad.stacksError)}`);
    const main = sample.ranks[0]?.threads?.find((t) => t.main);
    return {
      mpi,
      ranks: targets.length,
      mainThreadFrames: main?.frames.length ?? 0,
      threadsPerRank: sample.ranks[0]?.threads?.length ?? 0,
      pausedNoStacksMs: median(off),
      pausedStacksMs: median(on),
      addedPerRankMs: median(on) - median(off),
      ratio: median(on) / median(off),
      coldStacksSnapshotMs,
    };
  } finally {
    await s.dispose();
    await job.dispose();
  }
}

async function manyRanks(mpi: 'openmpi' | 'mpich'): Promise<ManyRow> {
  const job = await launchFixture({ mpi, fixture: 'collective_two', np: MANY, timeoutMs: 180_000 });
  const s = new Snapshotter();
  try {
    const targets = job.ranks.map((r) => ({ pid: r.pid, rank: r.rank }));
    await s.snapshot(targets, { stacks: true }); // cold
    const off: number[] = [];
    const on: number[] = [];
    for (let i = 0; i < Math.max(3, Math.floor(RUNS / 3)); i++) {
      let t0 = process.hrtime.bigint();
      await s.snapshot(targets, { stacks: false });
      off.push(ms(t0));
      t0 = process.hrtime.bigint();
      const snap = await s.snapshot(targets, { stacks: true });
      on.push(ms(t0));
      if (snap.snapshot.ranks.some((r) => !r.threads)) throw new Error(`${mpi}: a rank without stacks`);
    }
    return {
      mpi,
      ranks: targets.length,
      warmNoStacksMs: median(off),
      warmStacksMs: median(on),
      ratio: median(on) / median(off),
    };
  } finally {
    await s.dispose();
    await job.dispose();
  }
}

const stop: StopRow[] = [];
const many: ManyRow[] = [];
for (const mpi of ['openmpi', 'mpich'] as const) {
  stop.push(await stopCost(mpi));
  many.push(await manyRanks(mpi));
}
const result = {
  bench: 'stacks',
  date: new Date().toISOString(),
  runs: RUNS,
  targets: { addedPerRankMs: 2, manyRanksWarmMsAt64: 500 },
  stop,
  many,
};
mkdirSync('bench/results', { recursive: true });
writeFileSync('bench/results/stacks-unwind.json', `${JSON.stringify(result, null, 2)}\n`);
for (const r of stop) {
  console.log(
    `stacks ${r.mpi} ${r.ranks} ranks (${r.threadsPerRank} threads, ${r.mainThreadFrames} main-thread frames): stopped ${r.pausedNoStacksMs.toFixed(2)} ms without stacks, ${r.pausedStacksMs.toFixed(2)} ms with (+${r.addedPerRankMs.toFixed(2)} ms per rank, x${r.ratio.toFixed(2)}); first snapshot with stacks ${r.coldStacksSnapshotMs.toFixed(0)} ms`,
  );
}
for (const r of many) {
  console.log(
    `stacks ${r.mpi} ${r.ranks} ranks warm: ${r.warmStacksMs.toFixed(1)} ms with stacks, ${r.warmNoStacksMs.toFixed(1)} ms without (x${r.ratio.toFixed(2)})`,
  );
}
