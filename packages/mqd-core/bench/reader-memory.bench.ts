// Memory of the reader over many snapshots: a serve-like loop, one Snapshotter taking
// warm snapshots (stacks on, as `mqd serve` does) of a real hung 4-rank ring_ssend, both MPIs.
// RSS of this process and of its reader children (/proc/PID/status VmRSS) is sampled at
// snapshots 1, 250, 500, 750, 1,000, 2,000 and 4,000; the target is growth <= 3 MB from 250 to
// 1,000. The baseline in the same run is the growth over the first 250 (set-up, caches, JIT),
// which is allowed. The run goes on to 4,000 because a polling rank's main thread reaches rarer
// pcs late (a library's DWARF first needed at snapshot ~1,700 was a step of ~9 MB per rank
// until the unwinder read each file's DWARF once).
// A second pass reads 32 polling Open MPI ranks with one reader, 800 snapshots: each rank stops
// at other pcs of its progress loop, so what a reader keeps per rank shows as growth from
// snapshot 100 to 800 (target: <= 3 MB, the same bound).
// Run: npm run bench. MQD_BENCH_SNAPSHOTS changes the 4,000, MQD_BENCH_MANY_RANKS the 32.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { Snapshotter } from '@mqd/core';
import { launchFixture } from '@mqd/testkit';

const N = Number(process.env['MQD_BENCH_SNAPSHOTS'] ?? 4000);
const MARKS = [1, 250, 500, 750, 1000, 2000, 4000].filter((m) => m <= N);
if (!MARKS.includes(N)) MARKS.push(N);
const MANY_RANKS = Number(process.env['MQD_BENCH_MANY_RANKS'] ?? 32);
const MANY_SNAPSHOTS = 800;
type Mpi = 'openmpi' | 'mpich';

function rssKb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

interface Sample {
  snapshot: number;
  selfKb: number;
  readersKb: number;
  totalKb: number;
}

/** `snapshots` warm snapshots of a hung ring_ssend of `np` ranks, RSS sampled at `marks`. */
async function run(
  mpi: Mpi,
  np: number,
  snapshots: number,
  marks: readonly number[],
  opts: { maxReadersPerDll?: number; renice?: boolean },
) {
  const job = await launchFixture({ mpi, fixture: 'ring_ssend', np });
  if (opts.renice) for (const r of job.ranks) setPriority(r.pid, 19);
  const s = new Snapshotter(
    opts.maxReadersPerDll !== undefined ? { maxReadersPerDll: opts.maxReadersPerDll } : {},
  );
  const samples: Sample[] = [];
  const t0 = process.hrtime.bigint();
  try {
    const targets = job.ranks.map((r) => ({ pid: r.pid, rank: r.rank }));
    for (let i = 1; i <= snapshots; i++) {
      const { snapshot } = await s.snapshot(targets);
      if (snapshot.ranks.some((r) => r.state.kind !== 'ok'))
        throw new Error(`${mpi} snapshot ${i}: ${JSON.stringify(snapshot.ranks.map((r) => r.state))}`);
      if (marks.includes(i)) {
        const selfKb = rssKb(process.pid);
        const readersKb = s.hostPids().reduce((a, p) => a + rssKb(p), 0);
        samples.push({ snapshot: i, selfKb, readersKb, totalKb: selfKb + readersKb });
      }
    }
  } finally {
    await s.dispose();
    await job.dispose();
  }
  const at = (n: number) => samples.find((x) => x.snapshot === n);
  const growth = (from: number, to: number, key: 'totalKb' | 'readersKb') => {
    const a = at(from);
    const b = at(to);
    return a && b ? b[key] - a[key] : Number.NaN;
  };
  return { samples, seconds: Number(process.hrtime.bigint() - t0) / 1e9, growth };
}

async function measure(mpi: Mpi) {
  const { samples, seconds, growth } = await run(mpi, 4, N, MARKS, {});
  const to = Math.min(1000, N);
  const growthKb = growth(250, to, 'totalKb');
  return {
    mpi,
    snapshots: N,
    seconds,
    samples,
    warmupGrowthKb: growth(1, 250, 'totalKb'),
    growthKb,
    growthPerSnapshotBytes: (growthKb * 1024) / (to - 250),
    readerGrowthKb: growth(250, to, 'readersKb'),
    /** From snapshot 1,000 to the last: what the target's window does not see. */
    longGrowthKb: growth(to, N, 'totalKb'),
    longReaderGrowthKb: growth(to, N, 'readersKb'),
  };
}

async function measureMany() {
  const marks = [1, 100, 200, 400, 600, MANY_SNAPSHOTS];
  const { samples, seconds, growth } = await run('openmpi', MANY_RANKS, MANY_SNAPSHOTS, marks, {
    maxReadersPerDll: 1,
    renice: true,
  });
  return {
    mpi: 'openmpi' as const,
    ranks: MANY_RANKS,
    snapshots: MANY_SNAPSHOTS,
    seconds,
    samples,
    readerGrowthKb: growth(100, MANY_SNAPSHOTS, 'readersKb'),
  };
}

const rows = [];
for (const mpi of ['openmpi', 'mpich'] as const) rows.push(await measure(mpi));
const many = await measureMany();
const result = {
  bench: 'reader-memory',
  date: new Date().toISOString(),
  targets: { growthKb: 3 * 1024 },
  rows,
  many,
};
mkdirSync('bench/results', { recursive: true });
writeFileSync('bench/results/reader-memory.json', `${JSON.stringify(result, null, 2)}\n`);
const mb = (kb: number) => (kb / 1024).toFixed(2);
for (const r of rows) {
  console.log(
    `reader memory ${r.mpi}: RSS (agent + readers) ${r.samples.map((x) => `${x.snapshot}:${(x.totalKb / 1024).toFixed(1)}MB`).join(' ')}; growth 250->1000 ${mb(r.growthKb)} MB (${r.growthPerSnapshotBytes.toFixed(0)} B/snapshot; readers ${mb(r.readerGrowthKb)} MB); 1000->${N} ${mb(r.longGrowthKb)} MB (readers ${mb(r.longReaderGrowthKb)} MB); first 250: +${(r.warmupGrowthKb / 1024).toFixed(1)} MB; ${r.seconds.toFixed(0)} s`,
  );
}
console.log(
  `reader memory openmpi ${many.ranks} polling ranks, one reader: reader RSS ${many.samples.map((x) => `${x.snapshot}:${(x.readersKb / 1024).toFixed(1)}MB`).join(' ')}; growth 100->${many.snapshots} ${mb(many.readerGrowthKb)} MB; ${many.seconds.toFixed(0)} s`,
);
