// Queue timeline: queue depth per rank across a job's snapshots, on a canvas (ranks down,
// snapshots across), with operations that stayed unchanged since the previous snapshot in a
// second colour, the totals over time above it, and the longest-lived operations below.
import { ensureExists, QUEUE_KINDS, type QueueKind } from '@mqd/model';
import {
  axisBottom,
  axisLeft,
  format,
  interpolateBlues,
  interpolateOranges,
  line,
  scaleLinear,
  scalePoint,
  select,
} from 'd3';
import { type MouseEvent, useEffect, useMemo, useRef, useState } from 'react';
import type { ApiError } from '../api.js';
import { cachedSnapshot, rememberSnapshot } from '../data.js';
import { demoSeries } from '../demo.js';
import {
  formatClock,
  formatCount,
  formatOpSize,
  formatPeer,
  formatTag,
  formatTime,
  plural,
} from '../format.js';
import { useBusyWhile, useElementSize } from '../hooks.js';
import { beginBusy } from '../idle.js';
import { KIND_COLOR } from '../matrix/palette.js';
import { QUEUE_LABEL } from '../snapshot-index.js';
import { ErrorBox, KindSwatch, Progress } from '../ui.js';
import type { ViewProps } from '../view-types.js';
import {
  buildTimeline,
  type ChartPoint,
  depthAt,
  type Timeline,
  type TimelineInput,
  totalsSeries,
} from './timeline.js';

/** The timeline reads at most this many of the job's latest snapshots. */
const MAX_SNAPSHOTS = 24;
const MARGIN_LEFT = 56;
const MARGIN_BOTTOM = 28;
const COLOR_STEPS = 32;
const BLUES = Array.from({ length: COLOR_STEPS }, (_, i) =>
  interpolateBlues(0.2 + (0.8 * i) / (COLOR_STEPS - 1)),
);
const ORANGES = Array.from({ length: COLOR_STEPS }, (_, i) =>
  interpolateOranges(0.3 + (0.7 * i) / (COLOR_STEPS - 1)),
);

type Loading =
  | { kind: 'loading'; done: number; total: number }
  | { kind: 'error'; error: ApiError }
  | { kind: 'ready'; inputs: TimelineInput[]; note: string | null };

function useSeries({ api, url, data }: ViewProps): Loading {
  const [state, setState] = useState<Loading>({ kind: 'loading', done: 0, total: 0 });
  const jobId = data.jobId ?? url.job;
  useEffect(() => {
    if (data.source === 'demo' && url.demo !== null) {
      setState({ kind: 'ready', inputs: demoSeries(url.demo, url.scenario), note: null });
      return;
    }
    const single: TimelineInput = { id: data.key, takenAt: data.takenAt, snapshot: data.snapshot };
    if (data.source === 'shared' || jobId === null) {
      setState({
        kind: 'ready',
        inputs: [single],
        note:
          data.source === 'shared'
            ? 'A share link freezes one snapshot: the timeline has a single column.'
            : null,
      });
      return;
    }
    const controller = new AbortController();
    const end = beginBusy();
    (async () => {
      setState({ kind: 'loading', done: 0, total: 0 });
      const list = await api.snapshots(jobId, controller.signal);
      if (controller.signal.aborted) return;
      if (!list.ok) {
        setState({ kind: 'error', error: list.error });
        return;
      }
      const latest = [...list.value].sort((a, b) => a.takenAt.localeCompare(b.takenAt)).slice(-MAX_SNAPSHOTS);
      const inputs: TimelineInput[] = [];
      let done = 0;
      setState({ kind: 'loading', done, total: latest.length });
      // One at a time: snapshots of big jobs are large, and the server reads them from disk.
      for (const entry of latest) {
        const hit =
          entry.id === data.snapshotId
            ? { takenAt: data.takenAt, snapshot: data.snapshot }
            : cachedSnapshot(entry.id);
        if (hit) inputs.push({ id: entry.id, takenAt: hit.takenAt, snapshot: hit.snapshot });
        else {
          const r = await api.snapshot(entry.id, controller.signal);
          if (controller.signal.aborted) return;
          if (!r.ok) {
            setState({ kind: 'error', error: r.error });
            return;
          }
          rememberSnapshot(r.value.id, r.value);
          inputs.push({ id: r.value.id, takenAt: r.value.takenAt, snapshot: r.value.snapshot });
        }
        done++;
        setState({ kind: 'loading', done, total: latest.length });
      }
      if (inputs.length === 0) inputs.push(single);
      const note =
        list.value.length > latest.length
          ? `Showing the latest ${latest.length} of ${list.value.length} snapshots.`
          : null;
      setState({ kind: 'ready', inputs, note });
    })().finally(end);
    return () => {
      controller.abort();
      end();
    };
  }, [api, data, jobId, url.demo, url.scenario]);
  return state;
}

export function TimelineView(props: ViewProps) {
  const { url, setUrl, data } = props;
  const series = useSeries(props);
  const [timeline, setTimeline] = useState<Timeline | null>(null);
  useEffect(() => {
    if (series.kind !== 'ready') return;
    setTimeline(null);
    const end = beginBusy();
    // After the progress text has painted: building reads every operation of every snapshot.
    const timer = setTimeout(() => {
      setTimeline(buildTimeline(series.inputs));
      end();
    }, 0);
    return () => {
      clearTimeout(timer);
      end();
    };
  }, [series]);

  // Busy from the first commit until the timeline exists (loading errors end it too).
  useBusyWhile(series.kind !== 'error' && timeline === null);
  const unit = data.snapshot.mpi.lengthUnit;
  return (
    <div className="timeline-view">
      <div className="toolbar">
        <fieldset className="segmented" aria-label="Queue">
          {(['all', ...QUEUE_KINDS] as const).map((k) => (
            <button
              key={k}
              type="button"
              aria-pressed={url.tkind === k}
              onClick={() => setUrl({ tkind: k }, 'replace')}
            >
              {k === 'all' ? 'All queues' : QUEUE_LABEL[k]}
            </button>
          ))}
        </fieldset>
        <span className="legend">
          <KindSwatch color={BLUES[20] ?? '#36c'} /> queued <KindSwatch color={ORANGES[20] ?? '#e80'} /> some
          unchanged since the previous snapshot
        </span>
        {series.kind === 'ready' && series.note && <span className="muted">{series.note}</span>}
      </div>
      {series.kind === 'loading' && (
        <Progress
          what={
            series.total === 0
              ? 'Listing snapshots…'
              : `Loading snapshot ${series.done + 1} of ${series.total}…`
          }
        />
      )}
      {series.kind === 'error' && <ErrorBox error={series.error} />}
      {series.kind === 'ready' && !timeline && <Progress what="Comparing snapshots…" />}
      {timeline && (
        <>
          <TotalsChart timeline={timeline} kind={url.tkind} />
          <Heatmap timeline={timeline} kind={url.tkind} onRank={(rank) => setUrl({ view: 'rank', rank })} />
          <section className="longest">
            <h3>
              Unchanged the longest{' '}
              <span className="muted">
                {timeline.longestTotal === 0
                  ? timeline.ids.length < 2
                    ? '(needs two snapshots or more)'
                    : '(nothing persisted: the job is moving)'
                  : `${plural(timeline.longestTotal, 'operation')} unchanged since an earlier snapshot`}
              </span>
            </h3>
            {timeline.longest.length > 0 && (
              <table className="ops compact" data-testid="persistent-ops">
                <thead>
                  <tr>
                    <th>Rank</th>
                    <th>Queue</th>
                    <th>Comm.</th>
                    <th>Peer</th>
                    <th>Tag</th>
                    <th>Size</th>
                    <th>Since</th>
                    <th>Snapshots</th>
                  </tr>
                </thead>
                <tbody>
                  {timeline.longest.slice(0, 50).map((p) => (
                    <tr
                      key={`${p.rank}:${p.commId}:${p.kind}:${p.op.buffer}:${p.op.tag}:${p.op.peer.local}`}
                      className="clickable"
                      onClick={() => setUrl({ view: 'order', rank: p.rank, rcomm: p.commId })}
                    >
                      <td>{p.rank}</td>
                      <td>{QUEUE_LABEL[p.kind]}</td>
                      <td>{p.commName || `(unnamed ${p.commId})`}</td>
                      <td>{formatPeer(p.op, p.op.peer.global)}</td>
                      <td>{formatTag(p.op.tag)}</td>
                      <td>{formatOpSize(p.op, unit)}</td>
                      <td>{formatTime(timeline.times[p.since] ?? null)}</td>
                      <td>{p.snapshots}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </section>
        </>
      )}
    </div>
  );
}

function TotalsChart({ timeline, kind }: { timeline: Timeline; kind: QueueKind | 'all' }) {
  const [ref, size] = useElementSize<HTMLDivElement>();
  const svgRef = useRef<SVGSVGElement | null>(null);
  const height = 120;
  useEffect(() => {
    const svg = svgRef.current;
    if (!svg || size.width === 0) return;
    const w = size.width - MARGIN_LEFT - 16;
    const x = scalePoint<number>()
      .domain(timeline.ids.map((_, i) => i))
      .range([0, w])
      .padding(0.5);
    const kinds = kind === 'all' ? QUEUE_KINDS : [kind];
    const series = kinds.map((k) => ({ k, ...totalsSeries(timeline, k) }));
    let max = 1;
    for (const { totals } of series) for (const p of totals) max = Math.max(max, p.value);
    const y = scaleLinear()
      .domain([0, max])
      .nice()
      .range([height - 22, 6]);
    // Every snapshot is in the domain: a point without a position is a bug, not the left edge.
    const xOf = (s: number) => ensureExists(x(s), `timeline x position of snapshot ${s}`);
    const root = select(svg);
    root.selectAll('*').remove();
    const g = root.append('g').attr('transform', `translate(${MARGIN_LEFT},0)`);
    g.append('g').call(axisLeft(y).ticks(4).tickFormat(format('~s')));
    g.append('g')
      .attr('transform', `translate(0,${height - 22})`)
      .call(axisBottom(x).tickFormat((i) => formatClock(timeline.times[i] ?? '')));
    const path = line<ChartPoint>()
      .x((p) => xOf(p.snapshot))
      .y((p) => y(p.value));
    for (const { k, totals, persisted } of series) {
      const color = KIND_COLOR[k];
      g.append('path')
        .attr('d', path(totals) ?? '')
        .attr('fill', 'none')
        .attr('stroke', color)
        .attr('stroke-width', 2)
        .attr('data-series', `totals-${k}`);
      g.append('path')
        .attr('d', path(persisted) ?? '')
        .attr('fill', 'none')
        .attr('stroke', color)
        .attr('stroke-width', 1.5)
        .attr('stroke-dasharray', '4 3')
        .attr('data-series', `persisted-${k}`);
      for (const p of totals) {
        g.append('circle')
          .attr('cx', xOf(p.snapshot))
          .attr('cy', y(p.value))
          .attr('r', 3)
          .attr('fill', color);
      }
    }
  }, [timeline, kind, size.width]);
  return (
    <div className="totals" ref={ref}>
      <svg
        ref={svgRef}
        width={size.width}
        height={height}
        role="img"
        aria-label="Total queue depth over time"
      >
        <title>Total queue depth over time; dashed: operations unchanged since the previous snapshot</title>
      </svg>
    </div>
  );
}

function Heatmap({
  timeline,
  kind,
  onRank,
}: {
  timeline: Timeline;
  kind: QueueKind | 'all';
  onRank: (rank: number) => void;
}) {
  const [ref, size] = useElementSize<HTMLDivElement>();
  const canvasRef = useRef<HTMLCanvasElement | null>(null);
  const axisRef = useRef<SVGGElement | null>(null);
  const xAxisRef = useRef<SVGGElement | null>(null);
  const tipRef = useRef<HTMLDivElement | null>(null);
  const n = timeline.worldSize;
  const cols = timeline.ids.length;
  const width = Math.max(0, Math.floor(size.width - MARGIN_LEFT));
  const height = Math.max(0, Math.floor(size.height - MARGIN_BOTTOM));

  // Row groups: one pixel row per group of ranks when there are more ranks than pixels.
  const rows = Math.max(1, Math.min(n, height));
  const groups = useMemo(() => {
    const depth = new Uint32Array(rows * cols);
    const persisted = new Uint32Array(rows * cols);
    let max = 0;
    for (let s = 0; s < cols; s++) {
      for (let r = 0; r < n; r++) {
        const g = Math.floor((r * rows) / n);
        const d = depthAt(timeline, timeline.depth, s, r, kind);
        const p = depthAt(timeline, timeline.persisted, s, r, kind);
        const o = g * cols + s;
        if (d > (depth[o] ?? 0)) depth[o] = d;
        if (p > (persisted[o] ?? 0)) persisted[o] = p;
        if (d > max) max = d;
      }
    }
    return { depth, persisted, max };
  }, [timeline, kind, rows, cols, n]);

  useEffect(() => {
    const canvas = canvasRef.current;
    if (!canvas || width === 0 || height === 0) return;
    const end = beginBusy();
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    const ctx = canvas.getContext('2d');
    if (!ctx) {
      end();
      return;
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = '#f3f4f6';
    ctx.fillRect(0, 0, width, height);
    const colW = width / cols;
    const rowH = height / rows;
    const logMax = Math.log1p(groups.max);
    for (let g = 0; g < rows; g++) {
      for (let s = 0; s < cols; s++) {
        const d = groups.depth[g * cols + s] ?? 0;
        if (d === 0) continue;
        const step = Math.min(COLOR_STEPS - 1, Math.round((Math.log1p(d) / logMax) * (COLOR_STEPS - 1)));
        ctx.fillStyle = ((groups.persisted[g * cols + s] ?? 0) > 0 ? ORANGES : BLUES)[step] ?? '#000';
        ctx.fillRect(s * colW + 1, g * rowH, colW - 2, Math.max(rowH, 1 / dpr));
      }
    }
    const y = scaleLinear().domain([0, n]).range([0, height]);
    if (axisRef.current)
      select(axisRef.current).call(
        axisLeft(y)
          .ticks(Math.max(2, Math.floor(height / 40)))
          .tickFormat(format('d')),
      );
    const x = scalePoint<number>()
      .domain(timeline.ids.map((_, i) => i))
      .range([0, width])
      .padding(0.5);
    if (xAxisRef.current) {
      const every = Math.max(1, Math.ceil(cols / Math.max(1, Math.floor(width / 80))));
      select(xAxisRef.current).call(
        axisBottom(x)
          .tickValues(timeline.ids.map((_, i) => i).filter((i) => i % every === 0))
          .tickFormat((i) => formatClock(timeline.times[i] ?? '')),
      );
    }
    end();
  }, [groups, width, height, rows, cols, n, timeline]);

  const locate = (e: MouseEvent<HTMLCanvasElement>) => {
    const box = e.currentTarget.getBoundingClientRect();
    const s = Math.floor(((e.clientX - box.left) / box.width) * cols);
    const g = Math.floor(((e.clientY - box.top) / box.height) * rows);
    if (s < 0 || s >= cols || g < 0 || g >= rows) return null;
    const r0 = Math.ceil((g * n) / rows);
    const r1 = Math.max(r0, Math.ceil(((g + 1) * n) / rows) - 1);
    return { s, g, r0, r1 };
  };

  return (
    <div className="heatmap" ref={ref}>
      <svg className="axes" width={size.width} height={size.height} aria-hidden="true">
        <g ref={axisRef} transform={`translate(${MARGIN_LEFT - 2},0)`} />
        <g ref={xAxisRef} transform={`translate(${MARGIN_LEFT},${height + 2})`} />
      </svg>
      <canvas
        ref={canvasRef}
        data-testid="timeline-canvas"
        style={{ left: MARGIN_LEFT, top: 0 }}
        onMouseMove={(e) => {
          const tip = tipRef.current;
          const at = locate(e);
          if (!tip) return;
          if (!at) {
            tip.hidden = true;
            return;
          }
          const d = groups.depth[at.g * cols + at.s] ?? 0;
          const p = groups.persisted[at.g * cols + at.s] ?? 0;
          const ranks = at.r1 > at.r0 ? `ranks ${at.r0}–${at.r1} (largest)` : `rank ${at.r0}`;
          tip.textContent = `${formatTime(timeline.times[at.s] ?? null)}\n${ranks}\n${
            kind === 'all' ? 'queued' : QUEUE_LABEL[kind]
          }: ${formatCount(d)}\nunchanged since previous: ${at.s === 0 ? '— (first snapshot)' : formatCount(p)}`;
          tip.hidden = false;
          const box = ref.current?.getBoundingClientRect();
          if (box)
            tip.style.transform = `translate(${Math.min(e.clientX - box.left + 12, box.width - 220)}px, ${e.clientY - box.top + 12}px)`;
        }}
        onMouseLeave={() => {
          if (tipRef.current) tipRef.current.hidden = true;
        }}
        onClick={(e) => {
          const at = locate(e);
          if (at) onRank(at.r0);
        }}
      />
      <div className="tooltip" ref={tipRef} hidden role="tooltip" />
    </div>
  );
}
