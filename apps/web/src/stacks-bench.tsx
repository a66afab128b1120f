// Stacks view benchmark page (stacks-bench.html): a synthetic job with stacks (16,384 ranks,
// ~20 distinct stacks, unless ?ranks= says otherwise) is generated in the page, then the real
// StacksView is mounted on it and timed until its tree is on screen (merge + React render +
// the frame that shows it). The baseline, in the same page and run, is a JSON round trip of the
// same snapshot: the least any consumer of a downloaded snapshot pays. Results land on
// window.__mqdStacksBench. Parameters: ranks, seed, runs.
import { type JobSnapshot, syntheticStacksJob } from '@mqd/model';
import { flushSync } from 'react-dom';
import { createRoot, type Root } from 'react-dom/client';
import { createApi } from './api.js';
import { localSnapshot } from './data.js';
import { initIdle } from './idle.js';
import { StacksView } from './stacks/StacksView.js';
import { computeStackTree } from './stacks/stack-tree.js';
import { DEFAULT_STATE } from './url-state.js';
import './styles.css';

export interface StacksBenchResult {
  readonly done: boolean;
  readonly error: string | null;
  readonly ranks: number;
  readonly distinctStacks: number;
  readonly nodes: number;
  readonly generateMs: number;
  /** Per run: mount of a fresh StacksView on a fresh snapshot object until the tree's frame is drawn. */
  readonly renderMedianMs: number;
  readonly renderMaxMs: number;
  /** The merge alone (buildStackTree), median. */
  readonly mergeMedianMs: number;
  /** Baseline: JSON.parse(JSON.stringify(snapshot)), median. */
  readonly jsonRoundTripMedianMs: number;
  readonly runs: number;
}

declare global {
  interface Window {
    __mqdStacksBench?: StacksBenchResult;
  }
}

const nextFrame = () => new Promise<number>((resolve) => requestAnimationFrame(resolve));
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};
const round = (n: number) => Math.round(n * 100) / 100;

async function waitFor(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 600 && !cond(); i++) await nextFrame();
  if (!cond()) throw new Error('the stacks tree never appeared');
}

async function run(): Promise<StacksBenchResult> {
  const q = new URLSearchParams(location.search);
  const num = (k: string, d: number) => {
    const v = Number(q.get(k));
    return Number.isFinite(v) && v > 0 ? Math.floor(v) : d;
  };
  const ranks = num('ranks', 16384);
  const seed = num('seed', 1);
  const runs = num('runs', 7);
  const rootEl = document.getElementById('root');
  if (!rootEl) throw new Error('stacks-bench.html has no #root');
  let t = performance.now();
  const base = syntheticStacksJob({ ranks, seed });
  const generateMs = performance.now() - t;
  const api = createApi();
  const render: number[] = [];
  const merge: number[] = [];
  const json: number[] = [];
  let nodes = 0;
  let distinct = 0;
  for (let i = 0; i < runs + 1; i++) {
    // A fresh object each run, so no cache of a previous run helps.
    const snapshot: JobSnapshot = { ...base, ranks: base.ranks.slice() };
    const data = localSnapshot(`bench:${i}`, snapshot, true);
    const url = { ...DEFAULT_STATE, view: 'stacks' as const };
    let root: Root | null = null;
    t = performance.now();
    root = createRoot(rootEl);
    flushSync(() => root?.render(<StacksView api={api} url={url} setUrl={() => {}} data={data} />));
    await waitFor(() => document.querySelectorAll('[data-testid="stack-node"]').length > 0);
    await nextFrame();
    const ms = performance.now() - t;
    nodes = document.querySelectorAll('[data-testid="stack-node"]').length;
    root.unmount();
    const fresh: JobSnapshot = { ...base, ranks: base.ranks.slice() };
    t = performance.now();
    const tree = computeStackTree(fresh, 'main');
    const mergeMs = performance.now() - t;
    if (!('failed' in tree)) distinct = tree.stackTotal;
    t = performance.now();
    JSON.parse(JSON.stringify(base));
    const jsonMs = performance.now() - t;
    if (i === 0) continue; // warm-up
    render.push(ms);
    merge.push(mergeMs);
    json.push(jsonMs);
  }
  return {
    done: true,
    error: null,
    ranks,
    distinctStacks: distinct,
    nodes,
    generateMs: round(generateMs),
    renderMedianMs: round(median(render)),
    renderMaxMs: round(Math.max(...render)),
    mergeMedianMs: round(median(merge)),
    jsonRoundTripMedianMs: round(median(json)),
    runs,
  };
}

initIdle();
const out = document.getElementById('result');
run().then(
  (r) => {
    window.__mqdStacksBench = r;
    if (out) out.textContent = JSON.stringify(r, null, 2);
  },
  (e: unknown) => {
    const message = e instanceof Error ? e.message : String(e);
    window.__mqdStacksBench = {
      done: true,
      error: message,
      ranks: 0,
      distinctStacks: 0,
      nodes: 0,
      generateMs: 0,
      renderMedianMs: 0,
      renderMaxMs: 0,
      mergeMedianMs: 0,
      jsonRoundTripMedianMs: 0,
      runs: 0,
    };
    if (out) out.textContent = `error: ${message}`;
  },
);
