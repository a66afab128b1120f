// Deep queues: one rank holding 20,000 posted receives and 20,000 unexpected
// messages (fixtures/mpi/deep_queues.c, np=2) against a 3-rank ring_ssend snapshot in the same
// run, both MPIs. Run: npm run bench (builds first; the reader runs from dist/ as in production).
// Figures, medians over MQD_BENCH_RUNS rounds (default 5), the two jobs alive side by side and
// read alternately:
// - cold: the first snapshot in a fresh Snapshotter (what `mqd snapshot` pays): reader and DLL
//   host start, DLL load, symbol and type indexing, the read, the transfer, the assembly;
// - warm: the next snapshots of the same Snapshotter;
// - deepStopMs: how long the deep rank was stopped (pausedMicros) in warm snapshots;
// - usPerOp: that stop divided by the operations read from it;
// - per operation: native fetch_data calls, callbacks into JavaScript, process_vm_readv calls.
// The reader sends a rank's operations as columns (src/reader/wire.ts); the same figures with
// the old object wire (ReaderClientOptions.wire 'objects', the RankSnapshot structured-cloned) are
// measured in the same rounds (`objects`), so the two compare on the same machine load.
// A quick run: MQD_BENCH_RUNS=2 node --import tsx packages/mqd-core/bench/deep-queues.bench.ts,
// after `npm run build -w @mqd/model -w @mqd/core` (the agent and the reader run from dist/).
import { mkdirSync, writeFileSync } from 'node:fs';
import { type ReaderClientOptions, type SnapshotResult, Snapshotter } from '@mqd/core';
import type { JobSnapshot } from '@mqd/model';
import { type FixtureJob, launchFixture } from '@mqd/testkit';

const RUNS = Number(process.env['MQD_BENCH_RUNS'] ?? 5);
const WARM = 3;
const DEPTH = 20_000;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;
type Mpi = 'openmpi' | 'mpich';

/** Operations read from the deep rank; throws unless they are exactly the fixture's. */
function deepOps(mpi: Mpi, snap: JobSnapshot): number {
  const r0 = snap.ranks.find((r) => r.rank === 0);
  const world = r0?.communicators?.find((c) => c.name === 'MPI_COMM_WORLD');
  const recv = world?.receives?.length ?? -1;
  const unexp = world?.unexpected?.length ?? null; // Open MPI's DLL cannot show it (null)
  const wantUnexp = mpi === 'mpich' ? DEPTH : null;
  if (r0?.state.kind !== 'ok' || recv !== DEPTH || unexp !== wantUnexp)
    throw new Error(
      `${mpi}: deep rank read ${recv} receives, ${unexp} unexpected (${JSON.stringify(r0?.state)})`,
    );
  return recv + (unexp ?? 0);
}

function targetsOf(job: FixtureJob) {
  return job.ranks.map((r) => ({ pid: r.pid, rank: r.rank }));
}

async function timed(s: Snapshotter, job: FixtureJob): Promise<{ ms: number; res: SnapshotResult }> {
  const t0 = process.hrtime.bigint();
  const res = await s.snapshot(targetsOf(job));
  return { ms: ms(t0), res };
}

interface Row {
  mpi: Mpi;
  deepOps: number;
  ringColdMs: number;
  deepColdMs: number;
  coldRatio: number;
  ringWarmMs: number;
  deepWarmMs: number;
  warmRatio: number;
  deepStopMs: number;
  deepStopMaxMs: number;
  usPerOp: number;
  fetchesPerOp: number;
  jsCallbacksPerOp: number;
  syscallsPerOp: number;
  /** The same run with the object wire (wire 'objects'): the baseline of src/reader/wire.ts. */
  objects: {
    ringColdMs: number;
    deepColdMs: number;
    coldRatio: number;
    ringWarmMs: number;
    deepWarmMs: number;
  };
}

const OBJECTS: ReaderClientOptions = { wire: 'objects' };

async function measure(mpi: Mpi): Promise<Row> {
  const ring = await launchFixture({ mpi, fixture: 'ring_ssend', np: 3 });
  let deep: FixtureJob | null = null;
  try {
    deep = await launchFixture({ mpi, fixture: 'deep_queues', np: 2, timeoutMs: 180_000 });
    const c = { ring: [] as number[], deep: [] as number[] };
    const w = { ring: [] as number[], deep: [] as number[] };
    const o = {
      ringCold: [] as number[],
      deepCold: [] as number[],
      ringWarm: [] as number[],
      deepWarm: [] as number[],
    };
    const stop: number[] = [];
    const perOp = { fetches: [] as number[], js: [] as number[], sys: [] as number[] };
    let ops = 0;
    for (let i = 0; i < RUNS; i++) {
      const sr = new Snapshotter();
      const sd = new Snapshotter();
      const or = new Snapshotter(OBJECTS);
      const od = new Snapshotter(OBJECTS);
      try {
        c.ring.push((await timed(sr, ring)).ms);
        const first = await timed(sd, deep);
        ops = deepOps(mpi, first.res.snapshot);
        c.deep.push(first.ms);
        o.ringCold.push((await timed(or, ring)).ms);
        const firstObjects = await timed(od, deep);
        deepOps(mpi, firstObjects.res.snapshot);
        o.deepCold.push(firstObjects.ms);
        let prev = first.res.stats.host;
        for (let k = 0; k < WARM; k++) {
          w.ring.push((await timed(sr, ring)).ms);
          o.ringWarm.push((await timed(or, ring)).ms);
          const objects = await timed(od, deep);
          deepOps(mpi, objects.res.snapshot);
          o.deepWarm.push(objects.ms);
          const again = await timed(sd, deep);
          deepOps(mpi, again.res.snapshot);
          w.deep.push(again.ms);
          const r0 = again.res.snapshot.ranks.find((r) => r.rank === 0);
          stop.push((r0?.pausedMicros ?? Number.NaN) / 1000);
          const h = again.res.stats.host;
          if (h && prev) {
            // Host counters are cumulative; both ranks of the job count (rank 1 adds a handful).
            perOp.fetches.push((h.fetches - prev.fetches) / ops);
            perOp.js.push((h.jsCallbacks - prev.jsCallbacks) / ops);
            perOp.sys.push((h.readSyscalls - prev.readSyscalls) / ops);
          }
          prev = h;
        }
      } finally {
        await sr.dispose();
        await sd.dispose();
        await or.dispose();
        await od.dispose();
      }
    }
    const deepStopMs = median(stop);
    return {
      mpi,
      deepOps: ops,
      ringColdMs: median(c.ring),
      deepColdMs: median(c.deep),
      coldRatio: median(c.deep) / median(c.ring),
      ringWarmMs: median(w.ring),
      deepWarmMs: median(w.deep),
      warmRatio: median(w.deep) / median(w.ring),
      deepStopMs,
      deepStopMaxMs: Math.max(...stop),
      usPerOp: (deepStopMs * 1000) / ops,
      fetchesPerOp: median(perOp.fetches),
      jsCallbacksPerOp: median(perOp.js),
      syscallsPerOp: median(perOp.sys),
      objects: {
        ringColdMs: median(o.ringCold),
        deepColdMs: median(o.deepCold),
        coldRatio: median(o.deepCold) / median(o.ringCold),
        ringWarmMs: median(o.ringWarm),
        deepWarmMs: median(o.deepWarm),
      },
    };
  } finally {
    await deep?.dispose();
    await ring.dispose();
  }
}

const rows: Row[] = [];
for (const mpi of ['openmpi', 'mpich'] as const) rows.push(await measure(mpi));
const result = {
  bench: 'deep-queues',
  date: new Date().toISOString(),
  runs: RUNS,
  warmPerRun: WARM,
  depth: { postedReceives: DEPTH, unexpected: DEPTH, np: 2 },
  baseline: 'ring_ssend np=3, same Snapshotter kind, read alternately in the same run',
  targets: { coldRatio: 2, deepStopMs: 300, usPerOp: 5 },
  rows,
};
mkdirSync('bench/results', { recursive: true });
writeFileSync('bench/results/deep-queues.json', `${JSON.stringify(result, null, 2)}\n`);
for (const r of rows) {
  console.log(
    `deep queues ${r.mpi} (${r.deepOps} ops on one rank): cold ${r.deepColdMs.toFixed(0)} ms vs 3-rank ring ${r.ringColdMs.toFixed(0)} ms (x${r.coldRatio.toFixed(2)}); warm ${r.deepWarmMs.toFixed(0)} vs ${r.ringWarmMs.toFixed(1)} ms; deep rank stopped ${r.deepStopMs.toFixed(1)} ms (max ${r.deepStopMaxMs.toFixed(1)}), ${r.usPerOp.toFixed(2)} us/op; per op: ${r.fetchesPerOp.toFixed(1)} fetch_data, ${r.jsCallbacksPerOp.toFixed(3)} JS callbacks, ${r.syscallsPerOp.toFixed(3)} syscalls`,
  );
  const b = r.objects;
  console.log(
    `  same run, object wire: cold ${b.deepColdMs.toFixed(0)} ms vs ring ${b.ringColdMs.toFixed(0)} ms (x${b.coldRatio.toFixed(2)}); warm ${b.deepWarmMs.toFixed(0)} vs ${b.ringWarmMs.toFixed(1)} ms`,
  );
}
