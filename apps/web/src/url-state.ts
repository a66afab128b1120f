// Everything that decides what the dashboard shows lives in the URL, so a link reproduces it:
// the path picks live data (/) or a frozen share (/s/<id>); search params hold the rest.
// Defaults are left out of the URL. Unknown or malformed values fall back to the default
// (a hand-edited link still opens), and formatUrl(parseUrl(x)) is stable.
import { JobId, QUEUE_KINDS, type QueueKind, SnapshotId } from '@mqd/model';
import { ANY_PEER, type CellRange, type ValueMode, type ZoomState } from './matrix-types.js';

// `fleet` is the hang watch's view of every discovered job (admins: also agents and activity);
// it needs no snapshot.
export const VIEWS = ['jobs', 'matrix', 'timeline', 'order', 'rank', 'stacks', 'fleet', 'values'] as const;
export type View = (typeof VIEWS)[number];

export interface UrlState {
  readonly view: View;
  /** Share id from /s/<id>: the views are read-only and show that frozen snapshot. */
  readonly share: string | null;
  readonly job: JobId | null;
  readonly snap: SnapshotId | null;
  /** Matrix: value shown per cell. */
  readonly value: ValueMode;
  /** Matrix filter: communicator key (see commKey), tag, queue kinds. */
  readonly comm: string | null;
  readonly tag: number | null;
  readonly kinds: readonly QueueKind[];
  /**
   * Ranks selected in the stacks view, as ranges ("0-2,5"); the matrix shows only operations
   * to or from them.
   */
  readonly ranks: string | null;
  /** Stacks view: function-name search, every thread instead of main threads, selected node. */
  readonly sq: string | null;
  readonly threads: 'main' | 'all';
  readonly snode: number | null;
  /** Stacks view: user frames by `line` (default) or merged by `function`; show the MPI runtime's own threads. */
  readonly sby: 'line' | 'function';
  readonly srt: boolean;
  /** Matrix: selected cell or block (rows x cols), ANY_PEER for a strip. */
  readonly cell: CellRange | null;
  /** Matrix zoom: k, and the translation as a fraction of the matrix side (viewport-independent). */
  readonly zoom: ZoomState | null;
  /** Rank and matching-order views: world rank, and the communicator id within that rank. */
  readonly rank: number | null;
  readonly rcomm: string | null;
  /** Rank view: the selected frame, "tid:depth" (depth 0 = innermost), e.g. the user's line a diagnosis names. */
  readonly frame: string | null;
  /** Timeline: which queue kind's depth is drawn. */
  readonly tkind: QueueKind | 'all';
  /** Fleet view: order of the jobs, `state` (hung first, the default) or `since` (longest in its state first). */
  readonly fsort: FleetSort;
  /** Jobs and Fleet views: the search box (program, user, job id, node). */
  readonly jq: string | null;
  /** Jobs view: poll the job list. */
  readonly auto: boolean;
  /**
   * Values view: the expressions to read across ranks (URL `ev=EXPR` or `ev=EXPR@FRAME`,
   * repeated, in request order; the progress counter, at most one, as `evp=` in its place).
   */
  readonly ev: readonly EvalAsk[];
  /** Development: show a synthetic job of this many ranks instead of the server's. */
  readonly demo: number | null;
  /** Which synthetic job the demo shows (see demo.ts). */
  readonly scenario: DemoScenario;
}

/** An expression the Values view reads on every rank, in the frame of `frame` (else the innermost user frame). */
export interface EvalAsk {
  readonly expr: string;
  readonly frame: string | null;
  /** The progress counter (EvalRequest.progress): the diagnosis names the ranks with its smallest number. */
  readonly progress?: true;
}
/** As the server takes them (api-spec.ts ApiEvalRequest): at most 8, printable ASCII, capped. */
export const MAX_URL_EVALS = 8;
const EVAL_TEXT = /^[ -~]{1,256}$/;
const FRAME_TEXT = /^[ -~]{1,1024}$/;

/** `EXPR` or `EXPR@FRAME` (`@` is no operator in C, C++ or Fortran); null when it is not a valid ask. */
export function parseEvalParam(s: string): EvalAsk | null {
  const at = s.lastIndexOf('@');
  const expr = (at < 0 ? s : s.slice(0, at)).trim();
  const frame = at < 0 ? null : s.slice(at + 1).trim() || null;
  if (!EVAL_TEXT.test(expr) || expr.includes('@')) return null;
  if (frame !== null && !FRAME_TEXT.test(frame)) return null;
  return { expr, frame };
}

export function evalParam(e: EvalAsk): string {
  return e.frame === null ? e.expr : `${e.expr}@${e.frame}`;
}

/** The asks with the one at `at` the progress counter and no other; `at` null: none is. */
export function withProgressAt(asks: readonly EvalAsk[], at: number | null): EvalAsk[] {
  return asks.map((a, i) =>
    i === at ? { expr: a.expr, frame: a.frame, progress: true } : { expr: a.expr, frame: a.frame },
  );
}

/** The URL key of an ask: `evp` for the progress counter, `ev` for the others. */
export function evalKey(e: EvalAsk): 'ev' | 'evp' {
  return e.progress === true ? 'evp' : 'ev';
}

/** `ev` and `evp` in the order the URL gives them; a second `evp` reads as a plain `ev`. */
function parseEvals(q: URLSearchParams): readonly EvalAsk[] {
  const out: EvalAsk[] = [];
  let counter = false;
  for (const [key, s] of q) {
    if (key !== 'ev' && key !== 'evp') continue;
    const e = parseEvalParam(s);
    if (e === null || out.length >= MAX_URL_EVALS) continue;
    if (key === 'evp' && !counter) {
      counter = true;
      out.push({ ...e, progress: true });
    } else out.push(e);
  }
  return out;
}

export const FLEET_SORTS = ['state', 'since'] as const;
export type FleetSort = (typeof FLEET_SORTS)[number];

export const DEMO_SCENARIOS = [
  'halo',
  'ring',
  'wrong-tag',
  'collective',
  'stacks',
  'stacks-mismatch',
] as const;
export type DemoScenario = (typeof DEMO_SCENARIOS)[number];

export const DEFAULT_STATE: UrlState = {
  view: 'jobs',
  share: null,
  job: null,
  snap: null,
  value: 'count',
  comm: null,
  tag: null,
  kinds: QUEUE_KINDS,
  ranks: null,
  sq: null,
  threads: 'main',
  snode: null,
  sby: 'line',
  srt: false,
  cell: null,
  zoom: null,
  rank: null,
  rcomm: null,
  frame: null,
  tkind: 'all',
  fsort: 'state',
  jq: null,
  auto: false,
  ev: [],
  demo: null,
  scenario: 'halo',
};

const SHARE_PATH = /^\/s\/([A-Za-z0-9_-]{1,128})\/?$/;
const INT = /^-?\d{1,10}$/;
const MAX_DEMO_RANKS = 1 << 20;
const FRAME = /^\d{1,10}:\d{1,4}$/;
const RANGES = /^\d{1,10}(?:-\d{1,10})?(?:,\d{1,10}(?:-\d{1,10})?)*$/;

function ranges(s: string | null): string | null {
  return s !== null && s.length <= 8192 && RANGES.test(s) ? s : null;
}

function oneFrame(s: string | null): string | null {
  return s !== null && FRAME.test(s) ? s : null;
}

/** The frame a rank view selects ("tid:depth"), as a URL value. */
export function frameParam(f: { readonly tid: number; readonly index: number }): string {
  return `${f.tid}:${f.index}`;
}

/** The selected frame of the URL state, or null. */
export function parseFrameParam(s: string | null): { tid: number; index: number } | null {
  if (s === null || !FRAME.test(s)) return null;
  const [tid, index] = s.split(':').map(Number);
  return tid === undefined || index === undefined ? null : { tid, index };
}

function int(s: string | null, min: number, max: number): number | null {
  if (s === null || !INT.test(s)) return null;
  const n = Number(s);
  return n >= min && n <= max ? n : null;
}

function oneOf<T extends string>(s: string | null, options: readonly T[]): T | null {
  return s !== null && (options as readonly string[]).includes(s) ? (s as T) : null;
}

function nonEmpty(s: string | null, max = 256): string | null {
  return s !== null && s.length > 0 && s.length <= max ? s : null;
}

function parseKinds(s: string | null): readonly QueueKind[] {
  if (s === null) return QUEUE_KINDS;
  const picked = new Set(s.split(','));
  const kinds = QUEUE_KINDS.filter((k) => picked.has(k));
  return kinds.length > 0 ? kinds : QUEUE_KINDS;
}

function parseCell(s: string | null): CellRange | null {
  if (s === null) return null;
  const parts = s.split(',');
  if (parts.length !== 3) return null;
  const row = int(parts[0] ?? null, ANY_PEER, 0x7fffffff);
  const col = int(parts[1] ?? null, ANY_PEER, 0x7fffffff);
  const size = int(parts[2] ?? null, 1, 1 << 30);
  if (row === null || col === null || size === null) return null;
  if (row === ANY_PEER && col === ANY_PEER) return null;
  return { row, col, size };
}

function parseZoom(s: string | null): ZoomState | null {
  if (s === null) return null;
  const parts = s.split(',').map(Number);
  const [k, x, y] = parts;
  if (parts.length !== 3 || k === undefined || x === undefined || y === undefined) return null;
  if (![k, x, y].every(Number.isFinite) || k < 1 || k > 1e7) return null;
  return { k, x, y };
}

export function parseUrl(pathname: string, search: string): UrlState {
  const q = new URLSearchParams(search);
  const shareMatch = SHARE_PATH.exec(pathname);
  const share = shareMatch?.[1] ?? null;
  const job = nonEmpty(q.get('job'));
  const snap = nonEmpty(q.get('snap'));
  const demo = int(q.get('demo'), 1, MAX_DEMO_RANKS);
  const fallbackView: View = share !== null || demo !== null ? 'matrix' : 'jobs';
  return {
    view: oneOf(q.get('view'), VIEWS) ?? fallbackView,
    share,
    job: job === null ? null : JobId(job),
    snap: snap === null ? null : SnapshotId(snap),
    value: oneOf(q.get('value'), ['count', 'bytes'] as const) ?? 'count',
    comm: nonEmpty(q.get('comm')),
    tag: int(q.get('tag'), -2147483648, 2147483647),
    kinds: parseKinds(q.get('kinds')),
    ranks: ranges(q.get('ranks')),
    sq: nonEmpty(q.get('sq'), 128),
    threads: q.get('threads') === 'all' ? 'all' : 'main',
    snode: int(q.get('snode'), 0, 1 << 24),
    sby: q.get('sby') === 'function' ? 'function' : 'line',
    srt: q.get('srt') === '1',
    cell: parseCell(q.get('cell')),
    zoom: parseZoom(q.get('z')),
    rank: int(q.get('rank'), 0, 0x7fffffff),
    rcomm: nonEmpty(q.get('rcomm')),
    frame: oneFrame(q.get('frame')),
    tkind: oneOf(q.get('tkind'), ['all', ...QUEUE_KINDS] as const) ?? 'all',
    fsort: oneOf(q.get('fsort'), FLEET_SORTS) ?? 'state',
    jq: nonEmpty(q.get('jq')),
    auto: q.get('auto') === '1',
    ev: parseEvals(q),
    demo,
    scenario: oneOf(q.get('scenario'), DEMO_SCENARIOS) ?? 'halo',
  };
}

/** Zoom numbers short enough for a URL, precise enough to land on the same cells. */
function num(n: number): string {
  return String(Number(n.toPrecision(6)));
}

export function formatUrl(s: UrlState): { pathname: string; search: string } {
  const q = new URLSearchParams();
  const fallbackView: View = s.share !== null || s.demo !== null ? 'matrix' : 'jobs';
  if (s.view !== fallbackView) q.set('view', s.view);
  if (s.demo !== null) q.set('demo', String(s.demo));
  if (s.scenario !== 'halo') q.set('scenario', s.scenario);
  if (s.job !== null) q.set('job', s.job);
  if (s.snap !== null) q.set('snap', s.snap);
  if (s.value !== 'count') q.set('value', s.value);
  if (s.comm !== null) q.set('comm', s.comm);
  if (s.tag !== null) q.set('tag', String(s.tag));
  if (s.kinds.length !== QUEUE_KINDS.length) q.set('kinds', s.kinds.join(','));
  if (s.ranks !== null) q.set('ranks', s.ranks);
  if (s.sq !== null) q.set('sq', s.sq);
  if (s.threads !== 'main') q.set('threads', s.threads);
  if (s.snode !== null) q.set('snode', String(s.snode));
  if (s.sby !== 'line') q.set('sby', s.sby);
  if (s.srt) q.set('srt', '1');
  if (s.cell !== null) q.set('cell', `${s.cell.row},${s.cell.col},${s.cell.size}`);
  if (s.zoom !== null) q.set('z', `${num(s.zoom.k)},${num(s.zoom.x)},${num(s.zoom.y)}`);
  if (s.rank !== null) q.set('rank', String(s.rank));
  if (s.rcomm !== null) q.set('rcomm', s.rcomm);
  if (s.frame !== null) q.set('frame', s.frame);
  if (s.tkind !== 'all') q.set('tkind', s.tkind);
  if (s.fsort !== 'state') q.set('fsort', s.fsort);
  if (s.jq !== null) q.set('jq', s.jq);
  if (s.auto) q.set('auto', '1');
  for (const e of s.ev) q.append(evalKey(e), evalParam(e));
  const search = q.toString();
  return { pathname: s.share !== null ? `/s/${s.share}` : '/', search: search === '' ? '' : `?${search}` };
}

export function urlOf(s: UrlState): string {
  const { pathname, search } = formatUrl(s);
  return `${pathname}${search}`;
}

/**
 * The state a share link carries: the view it was made from with its filters, selection and
 * zoom, on the frozen snapshot `shareId`. What only the live page has stays behind: the job and
 * snapshot ids (the share is the snapshot), polling, the demo; the jobs and fleet views, which a
 * share does not have, open the matrix.
 */
export function shareStateOf(s: UrlState, shareId: string): UrlState {
  return {
    ...s,
    view: viewNeedsSnapshot(s.view) ? s.view : 'matrix',
    share: shareId,
    job: null,
    snap: null,
    fsort: DEFAULT_STATE.fsort,
    jq: null,
    auto: false,
    demo: null,
    scenario: DEFAULT_STATE.scenario,
  };
}

/**
 * The address to hand out for a share: the server's `/s/<id>` path (`sharePath`, resolved
 * against `origin`) with the search params of `shareStateOf`, so the link opens the same picture.
 */
export function shareLinkOf(
  s: UrlState,
  share: { readonly id: string; readonly url: string },
  origin: string,
): string {
  const link = new URL(share.url, origin);
  link.search = formatUrl(shareStateOf(s, share.id)).search;
  return link.href;
}

/** Keyboard shortcuts that switch views (Esc clears the selection; see App). */
export const VIEW_KEYS: Readonly<Record<string, View>> = {
  j: 'jobs',
  m: 'matrix',
  t: 'timeline',
  o: 'order',
  r: 'rank',
  s: 'stacks',
  f: 'fleet',
  e: 'values',
};

/** Views that show one snapshot (everything but the jobs list and the fleet). */
export function viewNeedsSnapshot(view: View): boolean {
  return view !== 'jobs' && view !== 'fleet';
}

/**
 * The job whose latest snapshot a live link should open: it names a job (`job=`) and a view of
 * one snapshot but no `snap=`. Null when the link says which snapshot, or shows none.
 */
export function jobNeedingLatest(s: UrlState): JobId | null {
  if (s.share !== null || s.demo !== null || s.snap !== null || !viewNeedsSnapshot(s.view)) return null;
  return s.job;
}

/** The most recent of a job's snapshots by time taken, or null; a tie goes to the first listed (the server lists newest first). */
export function latestSnapshot<T extends { readonly id: SnapshotId; readonly takenAt: string }>(
  list: readonly T[],
): T | null {
  let best: T | null = null;
  for (const e of list) if (best === null || e.takenAt > best.takenAt) best = e;
  return best;
}
