// Benchmark of explainSnapshot at 16,384 ranks. Run: `npx tsx packages/model/bench/analysis.bench.ts`
// from the repository root. Each case is timed as the median of several runs after warm-up,
// next to a baseline measured in the same process on the same snapshot (a JSON round trip,
// the least any consumer of a snapshot pays), so the result is a ratio as well as
// milliseconds and survives a slower or busier machine. Results go to bench/results/analysis.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  explainSnapshot,
  type JobSnapshot,
  syntheticCollectiveHang,
  syntheticProgressingPair,
  syntheticRingDeadlock,
  syntheticWrongTagHang,
  validateSnapshot,
} from '../src/index.js';

const RANKS = Number(process.env['MQD_BENCH_RANKS'] ?? 16_384);
const WARMUP = 3;
const RUNS = 9;
const TARGET_MS = 200;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
}

/**
 * Median times of `fn` and `baseline`, run alternately so that both see the same machine
 * load (the host is shared): the ratio stays meaningful when the milliseconds do not.
 */
function timePair(fn: () => unknown, baseline: () => unknown): { ms: number; baselineMs: number } {
  for (let i = 0; i < WARMUP; i++) {
    fn();
    baseline();
  }
  const runs: number[] = [];
  const base: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    let t0 = performance.now();
    fn();
    runs.push(performance.now() - t0);
    t0 = performance.now();
    baseline();
    base.push(performance.now() - t0);
  }
  return { ms: median(runs), baselineMs: median(base) };
}

interface Case {
  readonly name: string;
  /** Made only when the case runs, so one case's snapshots do not weigh on the next's GC. */
  readonly make: () => { snap: JobSnapshot; previous: JobSnapshot[] };
  readonly expect: string;
}

const one = (snap: JobSnapshot) => ({ snap, previous: [] });
const cases: Case[] = [
  {
    name: 'ring-deadlock-openmpi',
    make: () => one(syntheticRingDeadlock({ ranks: RANKS, seed: 1 })),
    expect: 'deadlock',
  },
  {
    name: 'ring-deadlock-mpich',
    make: () => one(syntheticRingDeadlock({ ranks: RANKS, seed: 2, style: 'mpich' })),
    expect: 'deadlock',
  },
  {
    name: 'wrong-tag-openmpi',
    make: () => one(syntheticWrongTagHang({ ranks: RANKS, seed: 3 })),
    expect: 'deadlock',
  },
  {
    name: 'collective-hang-mpich',
    make: () => one(syntheticCollectiveHang({ ranks: RANKS, seed: 4 })),
    expect: 'collective-hang',
  },
  {
    name: 'progressing-pair-openmpi',
    make: () => {
      const [before, after] = syntheticProgressingPair({ ranks: RANKS, seed: 7 });
      return { snap: after, previous: [before] };
    },
    expect: 'progressing',
  },
];

const results = cases.map((c) => {
  const { snap, previous } = c.make();
  const valid = validateSnapshot(snap);
  if (!valid.ok) throw new Error(`${c.name}: synthetic snapshot is invalid: ${valid.error.message}`);
  const e = explainSnapshot(snap, previous);
  if (e.verdict !== c.expect) throw new Error(`${c.name}: verdict ${e.verdict}, expected ${c.expect}`);
  const { ms, baselineMs } = timePair(
    () => explainSnapshot(snap, previous),
    () => JSON.parse(JSON.stringify(snap)),
  );
  const r = {
    name: c.name,
    ranks: snap.ranks.length,
    verdict: e.verdict,
    medianMs: Number(ms.toFixed(2)),
    baselineJsonRoundTripMs: Number(baselineMs.toFixed(2)),
    ratio: Number((ms / baselineMs).toFixed(3)),
    withinTarget: ms < TARGET_MS,
  };
  console.log(
    `analysis ${r.name}: ${r.ranks} ranks, explainSnapshot ${r.medianMs} ms (median of ${RUNS}), JSON round trip ${r.baselineJsonRoundTripMs} ms, ratio ${r.ratio}, target < ${TARGET_MS} ms: ${r.withinTarget ? 'ok' : 'MISSED'}`,
  );
  return r;
});

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const out = join(root, 'bench', 'results', 'analysis.json');
mkdirSync(dirname(out), { recursive: true });
writeFileSync(
  out,
  `${JSON.stringify(
    {
      benchmark: 'model/analysis explainSnapshot',
      date: new Date().toISOString(),
      node: process.version,
      runs: RUNS,
      warmup: WARMUP,
      targetMs: TARGET_MS,
      results,
      pass: results.every((r) => r.withinTarget),
    },
    null,
    2,
  )}\n`,
);
console.log(`analysis: results in ${out}`);
if (!results.every((r) => r.withinTarget)) process.exitCode = 1;
