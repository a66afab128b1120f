// What the rank view leads with: the rank's blocking call as one sentence,
// the diagnosis's own line for that rank (diagnosis.ts rankDiagnosisLine), and the source
// around the user's frame. Also the one rule for which frames get a source excerpt, used by the
// reader that reads them (packages/mqd-core/src/reader/source-excerpts.ts) and by the views that
// look them up.

import { threadUserFrame } from '../mpi/frames.js';
import type { Communicator, JobSnapshot, RankSnapshot, SourceExcerpt } from '../snapshot-spec.js';
import { jobText } from '../text.js';
import { isInternalComm } from './comm.js';
import { type DiagnosisLine, rankDiagnosisLine } from './diagnosis.js';
import { SnapshotIndex } from './snapshot-index.js';
import { buildWaitGraph, rankWaits, type WaitGraph } from './wait-graph.js';

const graphs = new WeakMap<JobSnapshot, { readonly ix: SnapshotIndex; readonly g: WaitGraph }>();

function graphOf(snap: JobSnapshot): { readonly ix: SnapshotIndex; readonly g: WaitGraph } {
  let e = graphs.get(snap);
  if (e === undefined) {
    const ix = new SnapshotIndex(snap);
    e = { ix, g: buildWaitGraph(ix) };
    graphs.set(snap, e);
  }
  return e;
}

/** Whom a rank's MPI call is with: a world rank or any, and its tag; each null when unknown. */
export interface CallPeer {
  /** A receive or probe waits for a message `from`; a send goes `to`. */
  readonly direction: 'from' | 'to';
  /** World rank, 'any' for MPI_ANY_SOURCE, null when unknown. */
  readonly peer: number | 'any' | null;
  /** null when unknown (a call's null tag is MPI_ANY_TAG or unreadable: not said). */
  readonly tag: number | null;
  /** Where the facts come from: the call's own arguments or the rank's queues. */
  readonly from: 'call' | 'queues';
}

const RECEIVING = /recv|probe/i;
const SENDING = /send/i;

/**
 * The peer and tag of the rank's point-to-point MPI call ("MPI_Recv from rank 1, tag 5"): the
 * call's arguments when they were read, else the rank's one wait in the queues (as its
 * sentence says it); null for a call with no peer (a collective, a wait on requests) or when
 * neither tells.
 */
export function callPeer(snap: JobSnapshot, rank: number): CallPeer | null {
  const r = snap.ranks.find((x) => x.rank === rank);
  const call = r?.mpiCall;
  if (r === undefined || call === undefined || call === null) return null;
  const fn = call.function;
  const direction = RECEIVING.test(fn) ? 'from' : SENDING.test(fn) ? 'to' : null;
  if (direction === null) return null;
  const a = call.args;
  if (a?.peer) {
    const any = a.peer.local === null && a.peer.global === null;
    return { direction, peer: any ? 'any' : a.peer.global, tag: a.tag, from: 'call' };
  }
  const { ix, g } = graphOf(snap);
  const pos = ix.idxOf(rank);
  if (pos < 0) return null;
  const waits = rankWaits(g, pos).filter((w) => w.op.evidence !== 'collective-call');
  const targets = new Set(waits.map((w) => (w.anyOf ? -1 : w.target)));
  const tags = new Set(waits.map((w) => w.op.tag));
  const [target] = targets;
  if (targets.size !== 1 || target === undefined) return null;
  const [tag] = tags;
  return {
    direction,
    peer: target < 0 ? 'any' : (ix.rankOf[target] ?? null),
    tag: a?.tag ?? (tags.size === 1 && tag !== undefined ? tag : null),
    from: 'queues',
  };
}

/**
 * The rank's sentence ("Rank 0 waits in MPI_Recv for a message from rank 1, tag 99, on
 * MPI_COMM_WORLD, at wrong_tag.c:36 in main"), as linkable parts. The peer and tag come from
 * the rank's queues when the call's arguments could not be read. The snapshot's index and
 * wait graph are built once per snapshot, whichever rank is asked for.
 */
export function rankSentence(snap: JobSnapshot, rank: number): DiagnosisLine | null {
  const e = graphOf(snap);
  return rankDiagnosisLine(e.ix, e.g, rank);
}

/** A place in a source file, as a frame's line table names it. */
export interface SourcePlace {
  readonly file: string;
  readonly line: number;
}

/**
 * The places a rank's excerpts are read for: the innermost user frame (userFrame's rule) of
 * each thread that has a file and a line, each file:line once, the main thread's first.
 */
export function sourcePlaces(r: RankSnapshot): SourcePlace[] {
  const ts = [...(r.threads ?? [])].sort((a, b) => Number(b.main) - Number(a.main));
  const seen = new Set<string>();
  const out: SourcePlace[] = [];
  for (const t of ts) {
    const u = threadUserFrame(t);
    const { file, line } = u?.frame ?? { file: null, line: null };
    if (file === null || line === null || line < 1) continue;
    const key = placeKey(file, line);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ file, line });
  }
  return out;
}

const placeKey = (file: string, line: number) => `${line}\u0000${file}`;

const byHost = new WeakMap<JobSnapshot, Map<string, SourceExcerpt>>();

/**
 * The excerpt around `file:line` for rank `r`: its own, else the one an earlier rank of the same
 * host carries (a read gives each host's file:line once); null when none was read.
 */
export function sourceExcerptFor(
  snap: JobSnapshot,
  r: RankSnapshot,
  place: SourcePlace,
): SourceExcerpt | null {
  const own = r.sources?.find((s) => s.line === place.line && s.file === place.file);
  if (own !== undefined) return own;
  let m = byHost.get(snap);
  if (m === undefined) {
    m = new Map();
    for (const x of snap.ranks) {
      for (const s of x.sources ?? []) {
        const k = `${x.host}\u0000${placeKey(s.file, s.line)}`;
        if (!m.has(k)) m.set(k, s);
      }
    }
    byHost.set(snap, m);
  }
  return m.get(`${r.host}\u0000${placeKey(place.file, place.line)}`) ?? null;
}

/** One line of an excerpt as a view shows it. */
export interface ExcerptLine {
  readonly no: number;
  /** Tabs expanded; invisible and direction-changing characters written out as \uXXXX (jobText). */
  readonly text: string;
  /** The frame's own line. */
  readonly current: boolean;
}

const TAB = 8;

function expandTabs(s: string): string {
  if (!s.includes('\t')) return s;
  let out = '';
  for (const c of s) out += c === '\t' ? ' '.repeat(TAB - (out.length % TAB)) : c;
  return out;
}

/**
 * An excerpt's lines ready to show as text: a source line is the job's text like any name
 * from it, so a right-to-left override in a comment shows as `\u202E` instead of reordering
 * the line around it (Trojan Source).
 */
export function excerptLines(e: SourceExcerpt): ExcerptLine[] {
  if (!('lines' in e)) return [];
  return e.lines.map((t, i) => ({
    no: e.first + i,
    text: jobText(expandTabs(t), Number.MAX_SAFE_INTEGER),
    current: e.first + i === e.line,
  }));
}

/**
 * Names the libraries give the communicators they make for themselves or at start-up: MPICH's
 * DLL calls its internal collective twins and node communicators "--unnamed--", MPICH keeps
 * MPI_ICOMM_WORLD; every process has MPI_COMM_SELF.
 */
const QUIET_NAMES = new Set(['MPI_COMM_SELF', 'MPI_ICOMM_WORLD', '--unnamed--', '']);

const hasOps = (c: Communicator) =>
  (c.sends?.length ?? 0) + (c.receives?.length ?? 0) + (c.unexpected?.length ?? 0) > 0;

/**
 * A rank's communicators as its view lists them: the ones that matter first (the world, any with
 * a queued operation, the call's own), and apart, to fold, the library's own (isInternalComm)
 * and MPI_COMM_SELF, MPI_ICOMM_WORLD and unnamed ones with nothing queued.
 */
export function rankComms(r: RankSnapshot): { shown: Communicator[]; folded: Communicator[] } {
  const callComm = r.mpiCall?.args?.communicator ?? null;
  const shown: Communicator[] = [];
  const folded: Communicator[] = [];
  for (const c of r.communicators) {
    const quiet =
      c.world !== true && c.id !== callComm && (isInternalComm(c) || (QUIET_NAMES.has(c.name) && !hasOps(c)));
    (quiet ? folded : shown).push(c);
  }
  return { shown, folded };
}
