// Matrix benchmark page (bench.html): renders the message matrix of a synthetic job generated
// in the page (16,384 ranks unless ?ranks= says otherwise), then drives a scripted pan/zoom and
// times every frame. Results land on window.__mqdBench for the Playwright benchmark, and in
// the page as text. Parameters: ranks, seed, frames, width, height.
// With ?mode=menu it times the communicator menu instead (window.__mqdMenuBench): the real
// MatrixView is mounted on each synthetic scenario's snapshot, already in memory (the moment the
// data has arrived), until its communicator menu holds every entry and a frame has passed (the
// page can take the click). Baseline in the same run: a JSON round trip of the same snapshot.
// Parameters: ranks, runs.

import {
  buildEdges,
  haloCulprit,
  type JobSnapshot,
  syntheticCollectiveHang,
  syntheticHaloJob,
  syntheticRingDeadlock,
  syntheticStacksJob,
  syntheticWrongTagHang,
} from '@mqd/model';
import { createElement } from 'react';
import { createRoot } from 'react-dom/client';
import { createApi } from './api.js';
import { localSnapshot } from './data.js';
import { beginBusy, initIdle } from './idle.js';
import { NO_FILTER } from './matrix/edges.js';
import { MatrixView } from './matrix/MatrixView.js';
import { createPyramidClient } from './matrix/pyramid-client.js';
import { MatrixRenderer, type ZoomState } from './matrix/renderer.js';
import { DEFAULT_STATE } from './url-state.js';

export interface BenchResult {
  readonly done: boolean;
  readonly error: string | null;
  readonly ranks: number;
  readonly operations: number;
  readonly canvas: { width: number; height: number; dpr: number };
  /** Generating the synthetic snapshot (stands in for the download; not part of render time). */
  readonly generateMs: number;
  /** Snapshot -> edge table (main thread). */
  readonly edgesMs: number;
  /** Aggregation pyramid, wall time including the worker round trip. */
  readonly pyramidMs: number;
  /** From the start of the edge table to the first frame on screen. */
  readonly firstRenderMs: number;
  /** Re-aggregation for a filter change (receives only). */
  readonly filterMs: number;
  readonly frames: number;
  /** Time spent drawing one frame (performance.now around the draw). */
  readonly drawMedianMs: number;
  readonly drawP95Ms: number;
  readonly drawMaxMs: number;
  /** Interval between consecutive animation frames during the pan/zoom script. */
  readonly frameIntervalMedianMs: number;
  readonly frameIntervalP95Ms: number;
  /** Block sizes (ranks per cell side) the script went through. */
  readonly blockSizes: number[];
}

export interface MenuBenchRow {
  readonly scenario: string;
  readonly ranks: number;
  /** Communicators in the snapshot as commKey tells them apart (one per rank's MPI_COMM_SELF). */
  readonly distinctComms: number;
  /** Entries of the menu (without "All communicators"). */
  readonly entries: number;
  readonly selfEntries: number;
  readonly texts: string[];
  /** Per run: data in memory -> MatrixView mounted -> menu complete -> next frame. */
  readonly usableMedianMs: number;
  readonly usableMaxMs: number;
  /** Baseline: JSON.parse(JSON.stringify(snapshot)), median. */
  readonly jsonRoundTripMedianMs: number;
}

export interface MenuBenchResult {
  readonly done: boolean;
  readonly error: string | null;
  readonly runs: number;
  readonly rows: MenuBenchRow[];
}

declare global {
  interface Window {
    __mqdBench?: BenchResult;
    __mqdMenuBench?: MenuBenchResult;
  }
}

function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const at = Math.min(sorted.length - 1, Math.max(0, Math.round(q * (sorted.length - 1))));
  return sorted[at] ?? Number.NaN;
}

const nextFrame = () => new Promise<number>((resolve) => requestAnimationFrame(resolve));
const round = (n: number) => Math.round(n * 100) / 100;

async function run(): Promise<BenchResult> {
  const q = new URLSearchParams(location.search);
  const num = (k: string, d: number) => {
    const v = Number(q.get(k));
    return Number.isFinite(v) && v > 0 ? Math.floor(v) : d;
  };
  const ranks = num('ranks', 16384);
  const seed = num('seed', 1);
  const frames = num('frames', 120);
  const width = num('width', 1200);
  const height = num('height', 800);
  const canvas = document.getElementById('matrix');
  if (!(canvas instanceof HTMLCanvasElement)) throw new Error('bench.html has no #matrix canvas');
  const dpr = window.devicePixelRatio || 1;

  let t = performance.now();
  const snapshot = syntheticHaloJob({ ranks, seed });
  const generateMs = performance.now() - t;

  const start = performance.now();
  const edges = buildEdges(snapshot);
  const edgesMs = performance.now() - start;

  t = performance.now();
  const client = createPyramidClient(edges);
  const { pyramid } = await client.build(NO_FILTER);
  const pyramidMs = performance.now() - t;

  const renderer = new MatrixRenderer(canvas);
  renderer.resize(width, height, dpr);
  renderer.setPyramid(pyramid);
  await new Promise<void>((resolve) => renderer.afterNextDraw(resolve));
  const firstRenderMs = performance.now() - start;

  // Scripted pan/zoom: zoom towards the culprit rank down to single-rank cells, pan across
  // the stuck band, zoom back out. Each frame draws synchronously and is timed.
  const g = renderer.geometry();
  const maxK = Math.max(1, 24 / g.unit);
  const focus = haloCulprit(ranks) * g.unit;
  const zoomAt = (k: number, fx: number, fy: number): ZoomState => ({
    k,
    x: Math.min(0, Math.max(g.areaWidth - g.side * k, g.areaWidth / 2 - fx * k)),
    y: Math.min(0, Math.max(g.areaHeight - g.side * k, g.areaHeight / 2 - fy * k)),
  });
  const script: ZoomState[] = [];
  const third = Math.max(1, Math.floor(frames / 3));
  for (let i = 0; i < third; i++) script.push(zoomAt(maxK ** (i / (third - 1 || 1)), focus, focus));
  for (let i = 0; i < third; i++)
    script.push(zoomAt(maxK, focus - (g.side * 0.02 * i) / third, focus + (g.side * 0.01 * i) / third));
  for (let i = script.length; i < frames; i++) {
    const f = (frames - 1 - i) / Math.max(1, frames - 1 - 2 * third);
    script.push(zoomAt(Math.max(1, maxK ** f), focus, focus));
  }
  const draws: number[] = [];
  const intervals: number[] = [];
  const blockSizes = new Set<number>();
  let last = await nextFrame();
  for (const z of script) {
    const now = await nextFrame();
    intervals.push(now - last);
    last = now;
    renderer.setZoom(z, false);
    draws.push(renderer.drawNow());
    blockSizes.add(renderer.currentLevel()?.blockSize ?? 0);
  }

  t = performance.now();
  await client.build({ ...NO_FILTER, kinds: ['receives'] });
  const filterMs = performance.now() - t;
  client.dispose();

  return {
    done: true,
    error: null,
    ranks,
    operations: edges.length,
    canvas: { width, height, dpr },
    generateMs: round(generateMs),
    edgesMs: round(edgesMs),
    pyramidMs: round(pyramidMs),
    firstRenderMs: round(firstRenderMs),
    filterMs: round(filterMs),
    frames: draws.length,
    drawMedianMs: round(quantile(draws, 0.5)),
    drawP95Ms: round(quantile(draws, 0.95)),
    drawMaxMs: round(Math.max(...draws)),
    frameIntervalMedianMs: round(quantile(intervals, 0.5)),
    frameIntervalP95Ms: round(quantile(intervals, 0.95)),
    blockSizes: [...blockSizes].sort((a, b) => b - a),
  };
}

const SCENARIOS: readonly [string, (ranks: number) => JobSnapshot][] = [
  ['halo', (ranks) => syntheticHaloJob({ ranks, seed: 1 })],
  ['ring', (ranks) => syntheticRingDeadlock({ ranks, style: 'openmpi' })],
  ['wrong-tag', (ranks) => syntheticWrongTagHang({ ranks, style: 'mpich' })],
  ['collective', (ranks) => syntheticCollectiveHang({ ranks: Math.max(3, ranks) })],
  ['stacks', (ranks) => syntheticStacksJob({ ranks, scenario: 'mixed' })],
];

function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const m = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[m] ?? 0) : ((sorted[m - 1] ?? 0) + (sorted[m] ?? 0)) / 2;
}

async function runMenu(): Promise<MenuBenchResult> {
  const q = new URLSearchParams(location.search);
  const ranks = Math.max(1, Math.floor(Number(q.get('ranks')) || 16384));
  const runs = Math.max(1, Math.floor(Number(q.get('runs')) || 3));
  const stage = document.getElementById('stage');
  if (!stage) throw new Error('bench.html has no #stage');
  stage.replaceChildren();
  const api = createApi();
  const rows: MenuBenchRow[] = [];
  for (const [scenario, generate] of SCENARIOS) {
    const base = generate(ranks);
    const distinct = new Set<string>();
    for (const r of base.ranks)
      for (const c of r.communicators) distinct.add(`${c.name}#${c.size}#${c.group?.join(',') ?? '?'}`);
    const usable: number[] = [];
    const json: number[] = [];
    let texts: string[] = [];
    // One warm-up run (code paths compiled), then `runs` timed ones.
    for (let i = 0; i <= runs; i++) {
      // A fresh object each run: no cache keyed by the snapshot helps.
      const snapshot: JobSnapshot = { ...base, ranks: base.ranks.slice() };
      const host = document.createElement('div');
      host.style.cssText = 'position:relative;width:1200px;height:800px;display:flex';
      stage.append(host);
      const root = createRoot(host);
      const t = performance.now();
      root.render(
        createElement(MatrixView, {
          api,
          url: { ...DEFAULT_STATE, view: 'matrix' as const },
          setUrl: () => undefined,
          data: localSnapshot(`menu-bench:${scenario}:${i}`, snapshot, true),
        }),
      );
      let select: HTMLSelectElement | null = null;
      for (let f = 0; f < 1200; f++) {
        select = host.querySelector('select[aria-label="Communicator"]');
        if (select && select.options.length > 1) break;
        await nextFrame();
      }
      if (!select || select.options.length <= 1)
        throw new Error(`${scenario}: the communicator menu never filled`);
      await nextFrame();
      const ms = performance.now() - t;
      texts = Array.from(select.options, (o) => o.text).slice(1);
      root.unmount();
      host.remove();
      const j = performance.now();
      JSON.parse(JSON.stringify(snapshot));
      const jsonMs = performance.now() - j;
      if (i > 0) {
        usable.push(ms);
        json.push(jsonMs);
      }
    }
    rows.push({
      scenario,
      ranks,
      distinctComms: distinct.size,
      entries: texts.length,
      selfEntries: texts.filter((x) => x.startsWith('MPI_COMM_SELF')).length,
      texts: texts.slice(0, 10),
      usableMedianMs: round(median(usable)),
      usableMaxMs: round(Math.max(...usable)),
      jsonRoundTripMedianMs: round(median(json)),
    });
  }
  return { done: true, error: null, runs, rows };
}

initIdle();
const end = beginBusy();
const out = document.getElementById('result');
if (new URLSearchParams(location.search).get('mode') === 'menu') {
  runMenu()
    .then((r) => {
      window.__mqdMenuBench = r;
      if (out) out.textContent = JSON.stringify(r, null, 2);
    })
    .catch((e: unknown) => {
      const message = e instanceof Error ? `${e.message}\n${e.stack ?? ''}` : String(e);
      window.__mqdMenuBench = { done: true, error: message, runs: 0, rows: [] };
      if (out) out.textContent = `benchmark failed: ${message}`;
    })
    .finally(end);
} else
  run()
    .then((r) => {
      window.__mqdBench = r;
      if (out) out.textContent = JSON.stringify(r, null, 2);
    })
    .catch((e: unknown) => {
      const message = e instanceof Error ? `${e.message}\n${e.stack ?? ''}` : String(e);
      window.__mqdBench = {
        done: true,
        error: message,
        ranks: 0,
        operations: 0,
        canvas: { width: 0, height: 0, dpr: 0 },
        generateMs: 0,
        edgesMs: 0,
        pyramidMs: 0,
        firstRenderMs: 0,
        filterMs: 0,
        frames: 0,
        drawMedianMs: 0,
        drawP95Ms: 0,
        drawMaxMs: 0,
        frameIntervalMedianMs: 0,
        frameIntervalP95Ms: 0,
        blockSizes: [],
      };
      if (out) out.textContent = `benchmark failed: ${message}`;
    })
    .finally(end);
