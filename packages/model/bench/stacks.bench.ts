// Benchmark of the merged call-prefix tree (buildStackTree) and of explainSnapshot with stacks,
// at 16,384 ranks with ~20 distinct stacks. Run: `node --import tsx packages/model/bench/stacks.bench.ts`
// from the repository root. Each case is the median of several runs after warm-up, next to a
// baseline measured alternately in the same process on the same snapshot: a JSON round trip
// (the least any consumer pays), and for the tree also a naive merge that builds every rank's
// path as one string key per frame prefix (what the interned, class-first merge replaces).
// Results go to bench/results/stacks-tree.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  buildStackTree,
  explainSnapshot,
  type JobSnapshot,
  syntheticStacksJob,
  treeThreads,
  validateSnapshot,
} from '../src/index.js';

const RANKS = Number(process.env['MQD_BENCH_RANKS'] ?? 16_384);
const WARMUP = 3;
const RUNS = 9;
const TARGET_MS = 100;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
}

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

/** The obvious merge: a map from "f1;f2;...;fk" prefix strings to rank lists. */
function naiveMerge(snap: JobSnapshot): number {
  const nodes = new Map<string, number[]>();
  for (const r of snap.ranks) {
    for (const t of treeThreads(r, 'main')) {
      let key = '';
      for (let i = t.frames.length - 1; i >= 0; i--) {
        const f = t.frames[i];
        key += `;${f?.function ?? '??'}@${f?.module ?? ''}`;
        const list = nodes.get(key);
        if (list) list.push(r.rank);
        else nodes.set(key, [r.rank]);
      }
    }
  }
  return nodes.size;
}

const results: Record<string, unknown>[] = [];
for (const scenario of ['mixed', 'collective-mismatch', 'ssend-ring'] as const) {
  const snap = syntheticStacksJob({ ranks: RANKS, seed: 1, scenario });
  const v = validateSnapshot(snap);
  if (!v.ok) throw new Error(`${scenario}: invalid synthetic snapshot: ${v.error.message}`);
  const tree = buildStackTree(snap);
  const naiveNodes = naiveMerge(snap);
  if (naiveNodes !== tree.nodes.length)
    throw new Error(`${scenario}: naive merge has ${naiveNodes} nodes, tree ${tree.nodes.length}`);
  const treeTime = timePair(
    () => buildStackTree(snap),
    () => naiveMerge(snap),
  );
  const json = timePair(
    () => buildStackTree(snap),
    () => JSON.parse(JSON.stringify(snap)),
  );
  const explain = timePair(
    () => explainSnapshot(snap),
    () => JSON.parse(JSON.stringify(snap)),
  );
  const verdict = explainSnapshot(snap).verdict;
  const r = {
    scenario,
    ranks: RANKS,
    distinctStacks: tree.classTotal,
    nodes: tree.nodes.length,
    verdict,
    buildStackTreeMs: Number(treeTime.ms.toFixed(2)),
    baselineNaiveMergeMs: Number(treeTime.baselineMs.toFixed(2)),
    baselineJsonRoundTripMs: Number(json.baselineMs.toFixed(2)),
    ratioToJson: Number((json.ms / json.baselineMs).toFixed(3)),
    explainSnapshotMs: Number(explain.ms.toFixed(2)),
    withinTarget: treeTime.ms < TARGET_MS,
  };
  console.log(
    `stacks ${scenario}: ${RANKS} ranks, ${r.distinctStacks} stacks, ${r.nodes} nodes: buildStackTree ${r.buildStackTreeMs} ms (naive ${r.baselineNaiveMergeMs} ms, JSON round trip ${r.baselineJsonRoundTripMs} ms), explainSnapshot ${r.explainSnapshotMs} ms (${verdict}); target < ${TARGET_MS} ms: ${r.withinTarget ? 'ok' : 'MISSED'}`,
  );
  results.push(r);
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const out = join(root, 'bench', 'results', 'stacks-tree.json');
mkdirSync(dirname(out), { recursive: true });
const pass = results.every((r) => r['withinTarget'] === true);
writeFileSync(
  out,
  `${JSON.stringify({ benchmark: 'model buildStackTree + explainSnapshot with stacks', date: new Date().toISOString(), node: process.version, runs: RUNS, warmup: WARMUP, targetMs: TARGET_MS, results, pass }, null, 2)}\n`,
);
console.log(`stacks: results in ${out}`);
if (!pass) process.exitCode = 1;
