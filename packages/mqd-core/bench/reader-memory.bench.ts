// Memory of the reader over many snapshots (issue 12): a serve-like loop, one Snapshotter taking
// 1,000 warm snapshots (stacks on, as `mqd serve` does) of a real hung 4-rank ring_ssend, both
// MPIs. RSS of this process and of its reader children (/proc/PID/status VmRSS) is sampled at
// snapshots 1, 250, 500, 750 and 1,000; the target is growth <= 3 MB from 250 to 1,000. The
// baseline in the same run is the growth over the first 250 (set-up, caches, JIT), which is
// allowed. Run: npm run bench. MQD_BENCH_SNAPSHOTS changes the 1,000.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Snapshotter } from '@mqd/core';
import { launchFixture } from '@mqd/testkit';

const N = Number(process.env['MQD_BENCH_SNAPSHOTS'] ?? 1000);
const MARKS = [1, Math.round(N / 4), Math.round(N / 2), Math.round((3 * N) / 4), N];
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

async function measure(mpi: Mpi) {
  const job = await launchFixture({ mpi, fixture: 'ring_ssend', np: 4 });
  const s = new Snapshotter();
  const samples: Sample[] = [];
  const t0 = process.hrtime.bigint();
  try {
    const targets = job.ranks.map((r) => ({ pid: r.pid, rank: r.rank }));
    for (let i = 1; i <= N; i++) {
      const { snapshot } = await s.snapshot(targets);
      if (snapshot.ranks.some((r) => r.state.kind !== 'ok'))
        throw new Error(`${mpi} snapshot ${i}: ${JSON.stringify(snapshot.ranks.map((r) => r.state))}`);
      if (MARKS.includes(i)) {
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
  const q = at(MARKS[1] ?? 0);
  const last = at(N);
  const first = at(1);
  const growthKb = q && last ? last.totalKb - q.totalKb : Number.NaN;
  return {
    mpi,
    snapshots: N,
    seconds: Number(process.hrtime.bigint() - t0) / 1e9,
    samples,
    warmupGrowthKb: first && q ? q.totalKb - first.totalKb : Number.NaN,
    growthKb,
    growthPerSnapshotBytes: (growthKb * 1024) / (N - (MARKS[1] ?? 0)),
    readerGrowthKb: q && last ? last.readersKb - q.readersKb : Number.NaN,
  };
}

const rows = [];
for (const mpi of ['openmpi', 'mpich'] as const) rows.push(await measure(mpi));
const result = {
  bench: 'reader-memory',
  date: new Date().toISOString(),
  targets: { growthKb: 3 * 1024 },
  rows,
};
mkdirSync('bench/results', { recursive: true });
writeFileSync('bench/results/reader-memory.json', `${JSON.stringify(result, null, 2)}\n`);
for (const r of rows) {
  console.log(
    `reader memory ${r.mpi}: RSS (agent + readers) ${r.samples.map((x) => `${x.snapshot}:${(x.totalKb / 1024).toFixed(1)}MB`).join(' ')}; growth ${MARKS[1]}->${N} ${(r.growthKb / 1024).toFixed(2)} MB (${r.growthPerSnapshotBytes.toFixed(0)} B/snapshot; readers ${(r.readerGrowthKb / 1024).toFixed(2)} MB); first ${MARKS[1]}: +${(r.warmupGrowthKb / 1024).toFixed(1)} MB; ${r.seconds.toFixed(0)} s`,
  );
}
