// Queue timeline: queue depth per rank across a job's snapshots on a real time axis (ranks
// down, snapshots at their times across, so a pause is a gap), operations unchanged since their
// rank's previous read in a second colour, ranks and snapshots that were not read hatched (never
// drawn as empty), the totals over time above it with failed snapshots as gaps, a headline of
// what the series says, and the longest-lived operations below.
import {
  ensureExists,
  type JobSnapshot,
  notReadNote,
  notReadReason,
  QUEUE_KINDS,
  QUEUE_LABEL,
  type QueueKind,
  type RankSnapshot,
  rankNotReadText,
  SnapshotId,
  snapshotReadStatus,
} from '@mqd/model';
import {
  axisBottom,
  axisLeft,
  format,
  interpolateGreys,
  interpolateReds,
  line,
  scaleLinear,
  select,
} from 'd3';
import { type KeyboardEvent, type MouseEvent, useEffect, useMemo, useRef, useState } from 'react';
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
import { HATCH_BG, HATCH_LINE, hatchPattern, KIND_COLOR } from '../matrix/palette.js';
import { ErrorBox, Progress } from '../ui.js';
import type { ViewProps } from '../view-types.js';
import {
  buildTimeline,
  type ChartPoint,
  depthAt,
  RANK_NOT_READ,
  rankTicks,
  type Timeline,
  timeLayout,
  totalsSeries,
  unreadableKinds,
} from './timeline.js';
import { useSeries } from './use-series.js';

const MARGIN_LEFT = 64;
/** Room above the plots for the "not read" labels of snapshots. */
const MARGIN_TOP = 16;
const MARGIN_BOTTOM = 40;
const MARGIN_RIGHT = 16;
const COLOR_STEPS = 32;
/** Queued operations: greys, so no colour of the queue kinds (the totals chart's lines) means two things. */
const GREYS = Array.from({ length: COLOR_STEPS }, (_, i) =>
  interpolateGreys(0.25 + (0.6 * i) / (COLOR_STEPS - 1)),
);
/** Some operation unchanged since its rank's previous read: reds, the colour of "stuck". */
const REDS = Array.from({ length: COLOR_STEPS }, (_, i) =>
  interpolateReds(0.35 + (0.6 * i) / (COLOR_STEPS - 1)),
);
const EMPTY_CELL = '#f3f4f6';
/** Least CSS px between two "not read" labels above the plots. */
const NOTE_LABEL_PX = 56;
/** At most this many snapshots are named in the not-read notes. */
const MAX_NOTES = 5;

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
      setTimeline(buildTimeline(series.inputs, series.run));
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
  const last = timeline ? timeline.ids.length - 1 : 0;
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
          <p className="timeline-headline" data-testid="timeline-headline">
            {timeline.headline}
          </p>
          <NotReadNotes timeline={timeline} />
          <TotalsChart timeline={timeline} kind={url.tkind} />
          <Heatmap
            timeline={timeline}
            kind={url.tkind}
            current={url.snap}
            onRank={(rank) => setUrl({ view: 'rank', rank })}
            onSnapshot={(id) => setUrl({ snap: SnapshotId(id), view: 'matrix', cell: null, zoom: null })}
          />
          <section className="longest">
            <h3>
              Unchanged the longest{' '}
              <span className="muted">
                {timeline.longestTotal === 0
                  ? timeline.ids.length < 2
                    ? '(needs two snapshots or more)'
                    : '(nothing persisted: the job is moving)'
                  : `${plural(timeline.longestTotal, 'operation')} unchanged since an earlier snapshot (snapshots in which a rank was not read do not break the run)`}
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
                    <th>Unchanged since</th>
                    <th title="Snapshots of the run in which the rank was read">Reads</th>
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
                      <td data-testid="unchanged-since">{formatTime(timeline.times[p.since] ?? null)}</td>
                      <td>
                        {p.snapshots}
                        {p.lastRead < last && (
                          <span className="muted">
                            {' '}
                            (not read since {formatClock(timeline.times[p.lastRead] ?? '')})
                          </span>
                        )}
                      </td>
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

/**
 * "10:05:03: 4 ranks not read: no agent answered (MQD_E_AGENT_MISSING)", one line per run of
 * consecutive snapshots with the same note (a rank that stays unread is named once).
 */
function NotReadNotes({ timeline }: { timeline: Timeline }) {
  const runs: { from: number; to: number; text: string; failed: boolean }[] = [];
  timeline.status.forEach((s, i) => {
    const text = notReadNote(s);
    if (text === null) return;
    const failed = s.kind === 'failed';
    const prev = runs.at(-1);
    if (prev && prev.to === i - 1 && prev.text === text && prev.failed === failed) prev.to = i;
    else runs.push({ from: i, to: i, text, failed });
  });
  if (runs.length === 0) return null;
  const shown = runs.slice(-MAX_NOTES);
  const when = (r: { from: number; to: number }) =>
    r.from === r.to
      ? formatClock(timeline.times[r.from] ?? '')
      : `${formatClock(timeline.times[r.from] ?? '')} to ${formatClock(timeline.times[r.to] ?? '')} (${r.to - r.from + 1} snapshots)`;
  return (
    <ul className="not-read-notes" data-testid="timeline-not-read" aria-label="Snapshots with ranks not read">
      {shown.map((r) => (
        <li key={timeline.ids[r.from] ?? r.from}>
          <Hatch /> {when(r)}
          {r.failed ? ' (no rank read, drawn as a gap)' : ''}: {r.text}
        </li>
      ))}
      {runs.length > shown.length && (
        <li className="muted">
          and {plural(runs.length - shown.length, 'earlier run')} of snapshots with ranks not read
        </li>
      )}
    </ul>
  );
}

/** The legend's mark for "not read": the same diagonal hatching as the plots. */
function Hatch() {
  return <span className="swatch hatch" aria-hidden="true" />;
}

function LineSwatch({ color, dashed }: { color: string; dashed?: boolean }) {
  return (
    <svg className="line-swatch" width="22" height="10" aria-hidden="true">
      <line
        x1="1"
        x2="21"
        y1="5"
        y2="5"
        stroke={color}
        strokeWidth="2"
        strokeDasharray={dashed ? '4 3' : undefined}
      />
    </svg>
  );
}

function clockOf(d: Date | number): string {
  return formatClock(new Date(d).toISOString());
}

/** The indices of the snapshots whose "not read" label fits (at least NOTE_LABEL_PX apart). */
function labelledSnapshots(timeline: Timeline, xOf: (s: number) => number): number[] {
  const out: number[] = [];
  let lastX = Number.NEGATIVE_INFINITY;
  timeline.status.forEach((s, i) => {
    if (s.kind === 'read') return;
    const x = xOf(i);
    if (x - lastX < NOTE_LABEL_PX) return;
    out.push(i);
    lastX = x;
  });
  return out;
}

function TotalsChart({ timeline, kind }: { timeline: Timeline; kind: QueueKind | 'all' }) {
  const [ref, size] = useElementSize<HTMLDivElement>();
  const svgRef = useRef<SVGSVGElement | null>(null);
  const height = 150;
  const kinds = useMemo(() => (kind === 'all' ? QUEUE_KINDS : [kind]), [kind]);
  useEffect(() => {
    const svg = svgRef.current;
    if (!svg || size.width === 0) return;
    const w = Math.max(1, size.width - MARGIN_LEFT - MARGIN_RIGHT);
    const layout = timeLayout(timeline.millis, w);
    const series = kinds.map((k) => ({ k, ...totalsSeries(timeline, k) }));
    let max = 1;
    for (const { totals } of series) for (const p of totals) max = Math.max(max, p.value ?? 0);
    const bottom = height - MARGIN_BOTTOM + 6;
    const y = scaleLinear().domain([0, max]).nice().range([bottom, MARGIN_TOP]);
    const xOf = (s: number) =>
      ensureExists(layout.x(timeline.millis[s] ?? Number.NaN), `timeline x position of snapshot ${s}`);
    const root = select(svg);
    root.selectAll(':not(title)').remove();
    const defs = root.append('defs');
    const pattern = defs
      .append('pattern')
      .attr('id', 'timeline-hatch')
      .attr('width', 6)
      .attr('height', 6)
      .attr('patternUnits', 'userSpaceOnUse')
      .attr('patternTransform', 'rotate(45)');
    pattern.append('rect').attr('width', 6).attr('height', 6).attr('fill', HATCH_BG);
    pattern
      .append('line')
      .attr('x1', 0)
      .attr('y1', 0)
      .attr('x2', 0)
      .attr('y2', 6)
      .attr('stroke', HATCH_LINE)
      .attr('stroke-width', 2);
    const g = root.append('g').attr('transform', `translate(${MARGIN_LEFT},0)`);
    // Snapshots in which no rank was read: a hatched band with a label, the lines break there.
    const band = Math.max(layout.column, 6);
    timeline.status.forEach((s, i) => {
      if (s.kind !== 'failed') return;
      g.append('rect')
        .attr('x', xOf(i) - band / 2)
        .attr('y', MARGIN_TOP)
        .attr('width', band)
        .attr('height', bottom - MARGIN_TOP)
        .attr('fill', 'url(#timeline-hatch)')
        .attr('data-failed-snapshot', timeline.ids[i] ?? '')
        .append('title')
        .text(`${clockOf(timeline.millis[i] ?? 0)}: ${notReadNote(s) ?? 'not read'}`);
    });
    for (const i of labelledSnapshots(timeline, xOf)) {
      const s = timeline.status[i];
      g.append('text')
        .attr('class', 'not-read-label')
        .attr('x', xOf(i))
        .attr('y', MARGIN_TOP - 4)
        .attr('text-anchor', 'middle')
        .text(s?.kind === 'failed' ? 'not read' : `${formatCount(s?.notRead ?? 0)} not read`);
    }
    g.append('g')
      .call(axisLeft(y).ticks(4).tickFormat(format('~s')))
      .call((a) => a.selectAll('.tick text').attr('class', 'tick-label'));
    g.append('g')
      .attr('transform', `translate(0,${bottom})`)
      .call(
        axisBottom(layout.x)
          .tickValues(layout.ticks)
          .tickFormat((d) => clockOf(d as Date)),
      );
    g.append('text')
      .attr('class', 'axis-title')
      .attr('transform', `translate(${-MARGIN_LEFT + 12},${(bottom + MARGIN_TOP) / 2}) rotate(-90)`)
      .attr('text-anchor', 'middle')
      .text('operations');
    g.append('text')
      .attr('class', 'axis-title')
      .attr('x', w)
      .attr('y', height - 2)
      .attr('text-anchor', 'end')
      .text('time the snapshot was taken');
    const path = line<ChartPoint>()
      .defined((p) => p.value !== null)
      .x((p) => xOf(p.snapshot))
      .y((p) => y(p.value ?? 0));
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
        if (p.value === null) continue;
        const partial = timeline.status[p.snapshot]?.kind === 'partial';
        // A partial snapshot's total counts the ranks that were read: a floor, drawn hollow.
        g.append('circle')
          .attr('cx', xOf(p.snapshot))
          .attr('cy', y(p.value))
          .attr('r', partial ? 4 : 3)
          .attr('fill', partial ? '#fff' : color)
          .attr('stroke', color)
          .attr('stroke-width', partial ? 2 : 0)
          .append('title')
          .text(
            `${clockOf(timeline.millis[p.snapshot] ?? 0)}: ${formatCount(p.value)} ${QUEUE_LABEL[k]}${
              partial
                ? ` (${notReadNote(timeline.status[p.snapshot] ?? snapshotReadStatus({ ranks: [] }))})`
                : ''
            }`,
          );
      }
    }
  }, [timeline, kinds, size.width]);
  const anyPartial = timeline.status.some((s) => s.kind === 'partial');
  const anyFailed = timeline.status.some((s) => s.kind === 'failed');
  return (
    <div className="totals" ref={ref}>
      <p className="legend chart-legend" data-testid="totals-legend">
        {kinds.map((k) => (
          <span key={k}>
            <LineSwatch color={KIND_COLOR[k]} /> {QUEUE_LABEL[k]}
          </span>
        ))}
        <span>
          <LineSwatch color="#4b5563" dashed /> of those, unchanged since the rank's previous read
        </span>
        {anyPartial && (
          <span>
            <svg className="line-swatch" width="12" height="12" aria-hidden="true">
              <circle cx="6" cy="6" r="4" fill="#fff" stroke="#4b5563" strokeWidth="2" />
            </svg>{' '}
            some ranks not read (a floor)
          </span>
        )}
        {anyFailed && (
          <span>
            <Hatch /> no rank read: a gap
          </span>
        )}
        {unreadableKinds(timeline).map((k) => (
          <span key={`unreadable-${k}`} data-testid="totals-not-readable">
            <span className="not-readable-mark" aria-hidden="true">
              ∅
            </span>{' '}
            {QUEUE_LABEL[k]}: not readable (the MPI library cannot show it), drawn as a gap, not 0
          </span>
        ))}
      </p>
      <svg
        ref={svgRef}
        width={size.width}
        height={height}
        role="img"
        aria-label="Total queue depth over time"
      >
        <title>
          Total queue depth over time; dashed: operations unchanged since the rank's previous read
        </title>
      </svg>
    </div>
  );
}

/** The rank's entry in a snapshot (ranks are sorted by rank), or undefined. */
function rankIn(snap: JobSnapshot | undefined, rank: number): RankSnapshot | undefined {
  const ranks = snap?.ranks ?? [];
  let lo = 0;
  let hi = ranks.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const r = ranks[mid];
    if (!r) return undefined;
    if (r.rank === rank) return r;
    if (r.rank < rank) lo = mid + 1;
    else hi = mid - 1;
  }
  return undefined;
}

/** The tooltip lines for ranks r0..r1 not read in snapshot s. */
function notReadLines(timeline: Timeline, s: number, r0: number, r1: number): string[] {
  const snap = timeline.snapshots[s];
  const unread: RankSnapshot[] = [];
  for (let r = r0; r <= r1; r++) {
    if (timeline.readState[s * timeline.worldSize + r] !== RANK_NOT_READ) continue;
    const entry = rankIn(snap, r);
    if (entry) unread.push(entry);
  }
  const first = unread[0];
  if (!first) return [];
  if (r1 === r0) return [rankNotReadText(first) ?? ''];
  const status = snapshotReadStatus({ ranks: unread });
  return [
    `${formatCount(unread.length)} of ${formatCount(r1 - r0 + 1)} ranks not read: ${status.groups.map(notReadReason).join('; ')}`,
  ];
}

function Heatmap({
  timeline,
  kind,
  current,
  onRank,
  onSnapshot,
}: {
  timeline: Timeline;
  kind: QueueKind | 'all';
  /** The snapshot the page shows: the arrow keys start from it. */
  current: string | null;
  onRank: (rank: number) => void;
  /** Opens one snapshot (Enter on the picked one). */
  onSnapshot: (id: string) => void;
}) {
  // The snapshot the arrow keys picked; null until a key moves.
  const [picked, setPicked] = useState<number | null>(null);
  const [ref, size] = useElementSize<HTMLDivElement>();
  const canvasRef = useRef<HTMLCanvasElement | null>(null);
  const axisRef = useRef<SVGGElement | null>(null);
  const xAxisRef = useRef<SVGGElement | null>(null);
  const labelsRef = useRef<SVGGElement | null>(null);
  const tipRef = useRef<HTMLDivElement | null>(null);
  const n = timeline.worldSize;
  const cols = timeline.ids.length;
  const width = Math.max(0, Math.floor(size.width - MARGIN_LEFT - MARGIN_RIGHT));
  const height = Math.max(0, Math.floor(size.height - MARGIN_BOTTOM - MARGIN_TOP));
  const layout = useMemo(() => timeLayout(timeline.millis, Math.max(1, width)), [timeline, width]);

  // Row groups: one pixel row per group of ranks when there are more ranks than pixels.
  const rows = Math.max(1, Math.min(n, height));
  const groups = useMemo(() => {
    const depth = new Uint32Array(rows * cols);
    const persisted = new Uint32Array(rows * cols);
    const notRead = new Uint32Array(rows * cols);
    let max = 0;
    for (let s = 0; s < cols; s++) {
      for (let r = 0; r < n; r++) {
        const g = Math.floor((r * rows) / n);
        const o = g * cols + s;
        if (timeline.readState[s * n + r] === RANK_NOT_READ) notRead[o] = (notRead[o] ?? 0) + 1;
        const d = depthAt(timeline, timeline.depth, s, r, kind);
        const p = depthAt(timeline, timeline.persisted, s, r, kind);
        if (d > (depth[o] ?? 0)) depth[o] = d;
        if (p > (persisted[o] ?? 0)) persisted[o] = p;
        if (d > max) max = d;
      }
    }
    return { depth, persisted, notRead, max };
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
    // Between snapshots no time was sampled: white, unlike a read snapshot's empty cells.
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, width, height);
    const hatch = hatchPattern(ctx);
    const colW = layout.column;
    const rowH = height / rows;
    const logMax = Math.log1p(groups.max);
    const cellH = Math.max(rowH, 1 / dpr);
    for (let s = 0; s < cols; s++) {
      const x0 = (layout.x(timeline.millis[s] ?? 0) ?? 0) - colW / 2;
      const inset = colW > 6 ? 1 : 0;
      ctx.fillStyle = EMPTY_CELL;
      ctx.fillRect(x0 + inset, 0, colW - 2 * inset, height);
      for (let g = 0; g < rows; g++) {
        const o = g * cols + s;
        const d = groups.depth[o] ?? 0;
        if (d > 0) {
          const step = Math.min(COLOR_STEPS - 1, Math.round((Math.log1p(d) / logMax) * (COLOR_STEPS - 1)));
          ctx.fillStyle = ((groups.persisted[o] ?? 0) > 0 ? REDS : GREYS)[step] ?? '#000';
          ctx.fillRect(x0 + inset, g * rowH, colW - 2 * inset, cellH);
        }
        // Not read is unknown, not empty: hatched over whatever the group's read ranks show.
        if ((groups.notRead[o] ?? 0) > 0 && hatch) {
          ctx.fillStyle = hatch;
          ctx.fillRect(x0 + inset, g * rowH, colW - 2 * inset, cellH);
        }
      }
    }
    // One row per rank: ticks at the rows' centres; grouped rows: at the ranks' edges.
    const y = scaleLinear()
      .domain(rows === n ? [-0.5, n - 0.5] : [0, n])
      .range([0, height]);
    if (axisRef.current)
      select(axisRef.current).call(axisLeft(y).tickValues(rankTicks(n, height)).tickFormat(format('d')));
    if (xAxisRef.current)
      select(xAxisRef.current).call(
        axisBottom(layout.x)
          .tickValues(layout.ticks)
          .tickFormat((d) => clockOf(d as Date)),
      );
    if (labelsRef.current) {
      const sel = select(labelsRef.current);
      sel.selectAll('*').remove();
      for (const i of labelledSnapshots(timeline, (s) => layout.x(timeline.millis[s] ?? 0) ?? 0)) {
        const st = timeline.status[i];
        sel
          .append('text')
          .attr('class', 'not-read-label')
          .attr('x', layout.x(timeline.millis[i] ?? 0) ?? 0)
          .attr('y', -4)
          .attr('text-anchor', 'middle')
          .text(st?.kind === 'failed' ? 'not read' : `${formatCount(st?.notRead ?? 0)} not read`);
      }
    }
    end();
  }, [groups, width, height, rows, cols, n, timeline, layout]);

  const locate = (e: MouseEvent<HTMLCanvasElement>) => {
    const box = e.currentTarget.getBoundingClientRect();
    const px = e.clientX - box.left;
    let s = -1;
    let best = Number.POSITIVE_INFINITY;
    for (let i = 0; i < cols; i++) {
      const d = Math.abs((layout.x(timeline.millis[i] ?? 0) ?? 0) - px);
      if (d < best) {
        best = d;
        s = i;
      }
    }
    const g = Math.floor(((e.clientY - box.top) / box.height) * rows);
    if (s < 0 || best > Math.max(layout.column / 2, 3) || g < 0 || g >= rows) return null;
    const r0 = Math.ceil((g * n) / rows);
    const r1 = Math.max(r0, Math.ceil(((g + 1) * n) / rows) - 1);
    return { s, g, r0, r1 };
  };

  const from = picked ?? Math.max(0, current === null ? cols - 1 : timeline.ids.indexOf(current));
  const pickedText = (s: number) =>
    `Snapshot ${formatCount(s + 1)} of ${formatCount(cols)}, taken ${formatTime(timeline.times[s] ?? null)}`;
  const onKey = (e: KeyboardEvent<HTMLCanvasElement>) => {
    const step: Record<string, number> = { ArrowLeft: -1, ArrowUp: -1, ArrowRight: 1, ArrowDown: 1 };
    let to: number | null = null;
    if (e.key in step) to = from + (step[e.key] ?? 0);
    else if (e.key === 'Home') to = 0;
    else if (e.key === 'End') to = cols - 1;
    else if (e.key === 'Enter') {
      const id = timeline.ids[from];
      if (id !== undefined) onSnapshot(id);
    } else return;
    e.preventDefault();
    if (to !== null) setPicked(Math.min(cols - 1, Math.max(0, to)));
  };

  return (
    <div className="heatmap-block">
      <p className="legend chart-legend" data-testid="heatmap-legend">
        <span>
          <span
            className="swatch ramp"
            style={{ background: `linear-gradient(90deg, ${GREYS[4]}, ${GREYS[31]})` }}
          />{' '}
          queued (darker = more)
        </span>
        <span>
          <span
            className="swatch ramp"
            style={{ background: `linear-gradient(90deg, ${REDS[4]}, ${REDS[31]})` }}
          />{' '}
          some unchanged since the rank's previous read
        </span>
        <span>
          <Hatch /> not read (reason in the tooltip)
        </span>
      </p>
      <div className="heatmap" ref={ref}>
        <svg className="axes" width={size.width} height={size.height} aria-hidden="true">
          <g ref={axisRef} transform={`translate(${MARGIN_LEFT - 2},${MARGIN_TOP})`} />
          <g ref={xAxisRef} transform={`translate(${MARGIN_LEFT},${MARGIN_TOP + height + 2})`} />
          <g ref={labelsRef} transform={`translate(${MARGIN_LEFT},${MARGIN_TOP})`} />
          <text
            className="axis-title"
            transform={`translate(12,${MARGIN_TOP + height / 2}) rotate(-90)`}
            textAnchor="middle"
          >
            world rank
          </text>
          <text className="axis-title" x={MARGIN_LEFT + width} y={size.height - 4} textAnchor="end">
            time the snapshot was taken
          </text>
        </svg>
        <canvas
          ref={canvasRef}
          data-testid="timeline-canvas"
          style={{ left: MARGIN_LEFT, top: MARGIN_TOP }}
          role="slider"
          tabIndex={0}
          aria-label="Queue depth per rank and snapshot: the arrow keys pick a snapshot, Enter opens it"
          aria-valuemin={1}
          aria-valuemax={Math.max(1, cols)}
          aria-valuenow={from + 1}
          aria-valuetext={pickedText(from)}
          onKeyDown={onKey}
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
            const lines = [formatTime(timeline.times[at.s] ?? null), ranks];
            const unread = notReadLines(timeline, at.s, at.r0, at.r1);
            const allUnread = at.r0 === at.r1 && unread.length > 0;
            if (!allUnread) {
              lines.push(`${kind === 'all' ? 'queued' : QUEUE_LABEL[kind]}: ${formatCount(d)}`);
              lines.push(
                `unchanged since the rank's previous read: ${at.s === 0 ? '— (first snapshot)' : formatCount(p)}`,
              );
            }
            lines.push(...unread);
            tip.textContent = lines.join('\n');
            tip.hidden = false;
            const box = ref.current?.getBoundingClientRect();
            if (box)
              tip.style.transform = `translate(${Math.min(e.clientX - box.left + 12, box.width - 260)}px, ${e.clientY - box.top + 12}px)`;
          }}
          onMouseLeave={() => {
            if (tipRef.current) tipRef.current.hidden = true;
          }}
          onClick={(e) => {
            const at = locate(e);
            if (at) onRank(at.r0);
          }}
        />
        <div className="tooltip" ref={tipRef} hidden role="tooltip" data-testid="timeline-tooltip" />
      </div>
      <p className="muted timeline-picked" data-testid="timeline-picked" aria-live="polite">
        {picked === null
          ? 'Click a rank to open it; with the chart focused, the arrow keys pick a snapshot and Enter opens it.'
          : `${pickedText(picked)}: Enter opens it.`}
      </p>
    </div>
  );
}
