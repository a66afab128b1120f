// 64 real MPI ranks on one node: a hung `ring_ssend` np=64 of Open MPI 4.1.4 and of
// MPICH 4.0.2 ch3, warm snapshots (queues and stacks in the same stop) by the default pool of
// readers (one per core) against one reader, alternated in each round; medians. On 2 cores 64
// busy-polling ranks oversubscribe the machine 32 times: every rank is reniced to 19 once it is
// blocked, so the readers (nice 0) get the cores as they would on a node with a core per rank;
// the figure is then what the reader costs, not how long the scheduler takes to run 64 spinners.
// parallel-readers.bench.ts measures the same on 64 conformance targets (no polling at all).
// A second pass holds every rank in SIGSTOP: nothing then competes with the readers and no stop
// waits for a rank to be scheduled, which is what a node with a core per rank gives (its rank
// enters the stop at once); the reader stops and reads a stopped process the same way.
// Run: npm run bench. MQD_BENCH_RUNS (default 9) rounds, MQD_BENCH_RANKS (default 64),
// MQD_BENCH_MPIS (default "openmpi,mpich").
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, setPriority } from 'node:os';
import { Snapshotter } from '@mqd/core';
import { launchFixture } from '@mqd/testkit';

const RANKS = Number(process.env['MQD_BENCH_RANKS'] ?? 64);
const RUNS = Number(process.env['MQD_BENCH_RUNS'] ?? 9);
const MPIS = (process.env['MQD_BENCH_MPIS'] ?? 'openmpi,mpich').split(',') as ('openmpi' | 'mpich')[];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;
const loadAvg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);

interface Row {
  mpi: string;
  ranks: number;
  cores: number;
  readers: number;
  coldMs: number;
  poolMs: number;
  oneReaderMs: number;
  speedup: number;
  medianStopMs: number;
  maxStopMs: number;
  /** The same rounds with every rank held in SIGSTOP. */
  quiet: { poolMs: number; oneReaderMs: number; medianStopMs: number; maxStopMs: number };
  loadAvg: { start: number[]; end: number[] };
}

async function measure(mpi: 'openmpi' | 'mpich'): Promise<Row> {
  const job = await launchFixture({ mpi, fixture: 'ring_ssend', np: RANKS });
  try {
    for (const r of job.ranks) setPriority(r.pid, 19);
    const targets = job.ranks.map((r) => ({ pid: r.pid, rank: r.rank }));
    const start = loadAvg();
    const pool = new Snapshotter();
    const one = new Snapshotter({ maxReadersPerDll: 1 });
    const t = { one: [] as number[], pool: [] as number[] };
    const stops: number[] = [];
    const quiet = { one: [] as number[], pool: [] as number[], stops: [] as number[] };
    let coldMs = 0;
    let readers = 0;
    try {
      const read = async (s: Snapshotter, into: number[] | null) => {
        const t0 = process.hrtime.bigint();
        const { snapshot } = await s.snapshot(targets, {});
        const took = ms(t0);
        if (into) into.push(took);
        const bad = snapshot.ranks.filter((r) => r.state.kind !== 'ok');
        if (bad.length > 0 || snapshot.ranks.length !== RANKS)
          throw new Error(
            `${mpi}: ${bad.length} of ${RANKS} ranks not read: ${JSON.stringify(bad[0]?.state)}`,
          );
        return { snapshot, took };
      };
      coldMs = (await read(pool, null)).took;
      await read(one, null);
      readers = pool.hostPids().length;
      for (let i = 0; i < RUNS; i++) {
        const { snapshot } = await read(pool, t.pool);
        await read(one, t.one);
        for (const r of snapshot.ranks) stops.push((r.pausedMicros ?? Number.NaN) / 1000);
      }
      for (const r of job.ranks) process.kill(r.pid, 'SIGSTOP');
      try {
        for (let i = 0; i < RUNS; i++) {
          const { snapshot } = await read(pool, quiet.pool);
          await read(one, quiet.one);
          for (const r of snapshot.ranks) quiet.stops.push((r.pausedMicros ?? Number.NaN) / 1000);
        }
      } finally {
        for (const r of job.ranks) process.kill(r.pid, 'SIGCONT');
      }
    } finally {
      await pool.dispose();
      await one.dispose();
    }
    return {
      mpi,
      ranks: RANKS,
      cores: availableParallelism(),
      readers,
      coldMs,
      poolMs: median(t.pool),
      oneReaderMs: median(t.one),
      speedup: median(t.one) / median(t.pool),
      medianStopMs: median(stops),
      maxStopMs: Math.max(...stops),
      quiet: {
        poolMs: median(quiet.pool),
        oneReaderMs: median(quiet.one),
        medianStopMs: median(quiet.stops),
        maxStopMs: Math.max(...quiet.stops),
      },
      loadAvg: { start, end: loadAvg() },
    };
  } finally {
    await job.dispose();
  }
}

const rows: Row[] = [];
for (const mpi of MPIS) {
  const row = await measure(mpi);
  rows.push(row);
  console.log(
    `many ranks: ${row.mpi} ${row.ranks} real ranks, ${row.readers} readers on ${row.cores} cores: warm ${row.poolMs.toFixed(1)} ms (one reader ${row.oneReaderMs.toFixed(1)} ms, x${row.speedup.toFixed(2)}), cold ${row.coldMs.toFixed(0)} ms, stop per rank median ${row.medianStopMs.toFixed(2)} ms (max ${row.maxStopMs.toFixed(1)}); ranks held in SIGSTOP: warm ${row.quiet.poolMs.toFixed(1)} ms (one reader ${row.quiet.oneReaderMs.toFixed(1)} ms), stop median ${row.quiet.medianStopMs.toFixed(2)} ms (max ${row.quiet.maxStopMs.toFixed(1)}); load ${row.loadAvg.start[0]}`,
  );
}
mkdirSync('bench/results', { recursive: true });
writeFileSync(
  'bench/results/many-ranks.json',
  `${JSON.stringify({ bench: 'many-ranks', date: new Date().toISOString(), runs: RUNS, targets: { poolMs: 100 }, rows }, null, 2)}\n`,
);
