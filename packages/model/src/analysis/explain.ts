// The one answer a user wants from a hung job: what is wrong, who is involved, and why we
// think so. explainSnapshot combines the wait-for graph, near misses, rank classes and (with
// earlier snapshots) progress into one JSON-able object the CLI prints and the dashboard shows.
import { assertUnreachable } from '../assert.js';
import type { JobSnapshot, MpiLibrary, QueueKind, RankState } from '../snapshot-spec.js';
import { jobText, ranksPhrase as ranksText } from '../text.js';
import {
  CALL_BLOCKED,
  type CallGroup,
  type CollectiveMismatch,
  callGroups,
  commPhrase,
  describeCallGroup,
  findCollectiveMismatches,
} from './call-facts.js';
import type { PeerMode, RankClass } from './classes.js';
import { rankClasses } from './classes.js';
import { type DiagnosisLines, diagnosisLines } from './diagnosis.js';
import type { NearMiss, NearMissResult } from './near-miss.js';
import { findNearMisses } from './near-miss.js';
import { analyzeOpenMp, type OpenMpSummary } from './openmp.js';
import { type ProgressStep, progressAcross } from './progress.js';
import { compressRanks } from './ranges.js';
import { SnapshotIndex } from './snapshot-index.js';
import {
  analyzeWaits,
  buildWaitGraph,
  type DeadlockCycle,
  type EdgeEvidence,
  KIND_SINGLE,
  type WaitAnalysis,
} from './wait-graph.js';

/**
 * `openmp-hang`: some rank can never proceed because of OpenMP alone (its threads wait for
 * locks no running thread can release, and none is in an MPI call), while MPI shows no deadlock.
 */
export type Verdict =
  | 'deadlock'
  | 'collective-hang'
  | 'openmp-hang'
  | 'stuck'
  | 'progressing'
  | 'idle'
  | 'unknown';

export interface CollectiveSummary {
  readonly commKey: string;
  readonly commName: string;
  readonly commSize: number;
  readonly rankCount: number;
  /** Ranks with collective-internal traffic pending, as ranges. */
  readonly ranks: string;
  /** Ranks waited for inside the collective that show no collective traffic themselves. */
  readonly waitingFor: string;
  /** Participants those late ranks wait for in p2p: a cycle through the collective. */
  readonly lateWaitOn: string;
}

/**
 * Stable codes of the analysis's limits, so views pick the ones they need without reading the
 * sentence (which may change):
 * - `stacks-missing`: some readable ranks have no stacks; their wait comes from the queues alone.
 * - `sends-hidden`: some send queues cannot be read; senders' waits are inferred.
 * - `mpich-blocking-sends`: MPICH lists only nonblocking sends; blocking ones are inferred.
 * - `receives-hidden`: some posted-receive queues cannot be read.
 * - `unexpected-hidden`: some unexpected queues cannot be read; near misses use the send queues.
 * - `peers-unmapped`: pending operations whose peer cannot be mapped to a world rank.
 * - `openmpi-collectives-hidden`: Open MPI shows no collective-internal traffic.
 * - `openmp-unavailable`: some ranks' OpenMP threads could not be read (RankSnapshot.openmpError).
 */
export const LIMIT_CODES = [
  'stacks-missing',
  'sends-hidden',
  'mpich-blocking-sends',
  'receives-hidden',
  'unexpected-hidden',
  'peers-unmapped',
  'openmpi-collectives-hidden',
  'openmp-unavailable',
] as const;
export type LimitCode = (typeof LIMIT_CODES)[number];

/** One limit of the analysis: a stable code and a sentence for people. */
export interface Limit {
  readonly code: LimitCode;
  readonly text: string;
}

/** The limits that say a message could be queued where no one can see it (matching, near misses). */
export const MATCHING_LIMIT_CODES: readonly LimitCode[] = [
  'sends-hidden',
  'mpich-blocking-sends',
  'unexpected-hidden',
];

export interface Explanation {
  readonly verdict: Verdict;
  /** One paragraph for a human. */
  readonly summary: string;
  /**
   * The verdict as the summary names it ("Deadlock", "Collective hang on MPI_COMM_WORLD",
   * "No deadlock"), and the rest of that first statement: the summary begins with
   * `${headline}: ${lead}`, so a view can show the two apart without repeating the verdict.
   * Both "" when the summary has no statement of the verdict.
   */
  readonly headline: string;
  readonly lead: string;
  readonly takenAt: string;
  readonly library: MpiLibrary;
  readonly rankCount: number;
  /** Some ranks could not be read: the verdict covers the others only. */
  readonly partial: boolean;
  readonly partialReasons: string[];
  /** What the MPI library cannot show, and how the analysis works around it. */
  readonly limits: Limit[];
  readonly waits: {
    readonly waitingRanks: number;
    readonly clauses: number;
    readonly inferredClauses: number;
    readonly unresolvedWaits: number;
    /** Ranks waited for that are not blocked in a visible operation. */
    readonly waitingOnFree: string;
  };
  readonly deadlock: {
    readonly count: number;
    readonly ranks: string;
    readonly cycles: DeadlockCycle[];
    readonly cycleTotal: number;
    readonly blockedBehind: string;
  } | null;
  /** Ranks that would be deadlocked if the unread ranks are blocked too (empty when none are unread). */
  readonly dependsOnUnknown: string;
  readonly collectives: CollectiveSummary[];
  readonly nearMisses: NearMiss[];
  readonly nearMissTotal: number;
  readonly classes: RankClass[];
  readonly classTotal: number;
  /** How the class shapes write peers: offsets from the rank, or local ranks (see classes.ts). */
  readonly classPeers: PeerMode;
  readonly outliers: string;
  /** Consecutive comparisons, oldest first, the last one ending at this snapshot. */
  readonly progress: ProgressStep[];
  /**
   * Where the stacks put the ranks: one group per MPI call (and communicator), computing, or
   * without stacks; largest first. Empty when no rank's stacks were read.
   */
  readonly calls: CallGroup[];
  /** Communicators whose members are in different collectives, or some in one and others elsewhere. */
  readonly collectiveMismatches: CollectiveMismatch[];
  /** Ranks the stacks show in no MPI call or in one that returns by itself: they can proceed. */
  readonly computing: string;
  /**
   * The ranks' OpenMP threads (openmp.ts analyzeOpenMp): groups of ranks with the same picture,
   * OpenMP deadlocks, ranks whose team waits on a thread in MPI. readRanks 0 and no lines when
   * no rank's OpenMP runtime was read.
   */
  readonly openmp: OpenMpSummary;
  /** Ranks waiting in MPI directly for a rank whose OpenMP threads can never proceed, as ranges. */
  readonly behindOpenMp: string;
  /**
   * The facts per group of ranks (call, peer, tag, communicator, the user's source line) and
   * the first cycle edge by edge, as linkable parts (diagnosis.ts).
   */
  readonly diagnosis: DiagnosisLines;
}

export interface ExplainOptions {
  readonly maxCycles?: number;
  readonly maxNearMisses?: number;
  readonly maxClasses?: number;
  readonly maxExamples?: number;
}

/**
 * Explain one snapshot; `previous` are earlier snapshots of the same job in time order, used
 * to tell a stuck job from a progressing one.
 */
export function explainSnapshot(
  snap: JobSnapshot,
  previous: readonly JobSnapshot[] = [],
  opts: ExplainOptions = {},
): Explanation {
  const ix = new SnapshotIndex(snap);
  const graph = buildWaitGraph(ix);
  const waits = analyzeWaits(graph, opts.maxCycles === undefined ? {} : { maxCycles: opts.maxCycles });
  const near = findNearMisses(ix, opts.maxNearMisses === undefined ? {} : { limit: opts.maxNearMisses });
  const classes = rankClasses(snap, opts.maxClasses === undefined ? {} : { maxClasses: opts.maxClasses });
  const progress =
    previous.length === 0
      ? []
      : progressAcross(
          [...previous, snap],
          opts.maxExamples === undefined ? {} : { maxExamples: opts.maxExamples },
        );
  const last = progress.at(-1);
  const collectives: CollectiveSummary[] = waits.collectives.map((c) => ({
    commKey: c.commKey,
    commName: c.commName,
    commSize: c.commSize,
    rankCount: c.ranks.length,
    ranks: compressRanks(c.ranks),
    waitingFor: compressRanks(c.waitingFor),
    lateWaitOn: compressRanks(c.lateWaitOn),
  }));
  const calls = callGroups(ix, graph.calls);
  const mismatches = findCollectiveMismatches(ix, graph.calls);
  const anythingPending =
    waits.clauses > 0 ||
    waits.unresolvedWaits > 0 ||
    waits.collectives.length > 0 ||
    graph.calls.state.includes(CALL_BLOCKED) ||
    hasPending(snap);
  const readable = waits.rankCount - waits.unknownRanks.length;
  const openmp = analyzeOpenMp(snap);
  const behindOpenMp = waitersOn(graph, ix, openmp.deadlockedRanks);
  const ompHeld = new Set(openmp.deadlockedRanks);

  let verdict: Verdict;
  if (readable === 0) verdict = 'unknown';
  else if (mismatches.length > 0) verdict = 'collective-hang';
  else if (waits.deadlocked.length > 0) verdict = 'deadlock';
  // An OpenMP deadlock is certain in one snapshot: no thread of the rank runs to release it.
  else if (openmp.deadlockedRanks.length > 0) verdict = 'openmp-hang';
  else if (last !== undefined) {
    if (last.verdict === 'stuck') verdict = collectives.length > 0 ? 'collective-hang' : 'stuck';
    else verdict = last.verdict;
  } else if (collectives.length > 0) verdict = 'collective-hang';
  else if (!anythingPending) verdict = 'idle';
  else verdict = 'unknown';

  const partialReasons = unknownReasons(snap);
  for (const step of progress) {
    if (step.skippedRanks.length > 0) {
      partialReasons.push(
        `${ranksText(compressRanks(step.skippedRanks))} could not be read in both snapshots ${step.from} and ${step.to}: progress ignores them`,
      );
    }
  }
  const base = {
    verdict,
    takenAt: snap.takenAt,
    library: snap.mpi.library,
    rankCount: snap.ranks.length,
    partial: partialReasons.length > 0,
    partialReasons,
    limits: limits(snap, waits, verdict, graph.calls.any, openmp),
    waits: {
      waitingRanks: waits.waitingRanks,
      clauses: waits.clauses,
      inferredClauses: waits.inferredClauses,
      unresolvedWaits: waits.unresolvedWaits,
      // A rank OpenMP holds is blocked, though in no operation the queues show.
      waitingOnFree: compressRanks(waits.waitingOnFree.filter((r) => !ompHeld.has(r))),
    },
    deadlock:
      waits.deadlocked.length === 0
        ? null
        : {
            count: waits.deadlocked.length,
            ranks: compressRanks(waits.deadlocked),
            cycles: waits.cycles,
            cycleTotal: waits.cycleTotal,
            blockedBehind: compressRanks(waits.blockedBehind),
          },
    dependsOnUnknown: compressRanks(waits.dependsOnUnknown),
    collectives,
    nearMisses: near.items,
    nearMissTotal: near.total,
    classes: classes.classes,
    classTotal: classes.classTotal,
    classPeers: classes.peers,
    outliers: classes.outliers,
    progress,
    calls,
    collectiveMismatches: mismatches,
    computing: compressRanks(waits.computing),
    openmp,
    behindOpenMp: compressRanks(behindOpenMp),
    diagnosis: diagnosisLines(ix, graph, waits.cycles),
  };
  return { ...base, ...summarize(base, waits) };
}

/** The wait-for analysis alone: deadlocked ranks, their cycles, collectives in progress. */
export function findDeadlocks(snap: JobSnapshot, opts: { readonly maxCycles?: number } = {}): WaitAnalysis {
  return analyzeWaits(buildWaitGraph(new SnapshotIndex(snap)), opts);
}

/** Near misses alone (see near-miss.ts). */
export function nearMisses(snap: JobSnapshot, opts: { readonly limit?: number } = {}): NearMissResult {
  return findNearMisses(new SnapshotIndex(snap), opts);
}

/**
 * Ranks with a wait-for clause on one of these ranks (a receive from it, a send to it, a
 * collective it has not entered): they wait in MPI for a rank OpenMP holds.
 */
function waitersOn(
  graph: ReturnType<typeof buildWaitGraph>,
  ix: SnapshotIndex,
  ranks: readonly number[],
): number[] {
  if (ranks.length === 0) return [];
  const held = new Set<number>();
  for (const r of ranks) held.add(ix.idxOf(r));
  const out = new Set<number>();
  for (let k = 0; k < graph.clauseCount; k++) {
    // A clause on one rank; the other kinds name a wildcard group.
    if (graph.cKind[k] !== KIND_SINGLE) continue;
    const t = graph.cTarget[k] ?? -1;
    const w = graph.cRank[k] ?? -1;
    if (held.has(t) && !held.has(w)) out.add(ix.rankOf[w] ?? 0);
  }
  return [...out];
}

function hasPending(snap: JobSnapshot): boolean {
  for (const r of snap.ranks) {
    if (r.state.kind !== 'ok') continue;
    for (const c of r.communicators) {
      for (const q of [c.sends, c.receives]) if (q?.some((op) => op.status === 'pending')) return true;
    }
  }
  return false;
}

/** Why a rank has no queues, in words (RankState kinds other than ok). */
const NOT_READ_WORDS: Record<Exclude<RankState['kind'], 'ok'>, string> = {
  error: 'reading it failed',
  'no-queues': 'its MPI library shows no queues',
  'agent-missing': 'no agent reported it',
};

function unknownReasons(snap: JobSnapshot): string[] {
  const byCode = new Map<
    string,
    { ranks: number[]; kind: Exclude<RankState['kind'], 'ok'>; message: string }
  >();
  for (const r of snap.ranks) {
    if (r.state.kind === 'ok') continue;
    const e = byCode.get(r.state.code);
    if (e) e.ranks.push(r.rank);
    else byCode.set(r.state.code, { ranks: [r.rank], kind: r.state.kind, message: r.state.message });
  }
  return [...byCode].map(
    ([code, e]) =>
      `${ranksText(compressRanks(e.ranks))} could not be read (${NOT_READ_WORDS[e.kind]}, ${jobText(code)}: ${jobText(e.message, 512)}): assumed able to proceed, so a deadlock that needs ${e.ranks.length === 1 ? 'it' : 'them'} blocked is not reported`,
  );
}

function limits(
  snap: JobSnapshot,
  waits: WaitAnalysis,
  verdict: Verdict,
  stacks: boolean,
  openmp: OpenMpSummary,
): Limit[] {
  const out: Limit[] = [];
  const add = (code: LimitCode, text: string) => out.push({ code, text });
  if (openmp.unavailable.length > 0)
    add('openmp-unavailable', openmp.unavailable.map((u) => u.text).join('; '));
  if (stacks) {
    const without = snap.ranks
      .filter((r) => r.state.kind === 'ok' && r.mpiCall === undefined)
      .map((r) => r.rank);
    if (without.length > 0) {
      add(
        'stacks-missing',
        `stacks were not read on ${ranksText(compressRanks(without))}: where ${without.length === 1 ? 'it waits' : 'they wait'} comes from the queues alone`,
      );
    }
  }
  const hidden: Record<QueueKind, { ranks: number; code: string }> = {
    sends: { ranks: 0, code: '' },
    receives: { ranks: 0, code: '' },
    unexpected: { ranks: 0, code: '' },
  };
  for (const r of snap.ranks) {
    if (r.state.kind !== 'ok') continue;
    for (const kind of ['sends', 'receives', 'unexpected'] as const) {
      const c = r.communicators.find((x) => x[kind] === null);
      if (c === undefined) continue;
      hidden[kind].ranks++;
      if (hidden[kind].code === '') hidden[kind].code = c.unavailable[kind]?.code ?? '';
    }
  }
  const why = (k: QueueKind) =>
    `${hidden[k].ranks} ranks${hidden[k].code ? ` (${jobText(hidden[k].code)})` : ''}`;
  if (hidden.sends.ranks > 0) {
    add(
      'sends-hidden',
      `send queues are not visible on ${why('sends')}: a sender's wait is inferred from the unexpected message it left at the receiver`,
    );
  } else if (snap.mpi.library === 'mpich') {
    add(
      'mpich-blocking-sends',
      "MPICH's send queue lists only nonblocking sends: blocking sends are inferred from unexpected messages",
    );
  }
  if (hidden.receives.ranks > 0)
    add('receives-hidden', `posted receives are not visible on ${why('receives')}`);
  if (hidden.unexpected.ranks > 0) {
    add(
      'unexpected-hidden',
      `unexpected messages are not visible on ${why('unexpected')}: a message that arrived but matches no receive cannot be seen; near misses are found from the senders' queues`,
    );
  }
  if (waits.unresolvedWaits > 0) {
    add(
      'peers-unmapped',
      `${waits.unresolvedWaits} pending operations name a peer that cannot be mapped to a world rank (no group for their communicator); they are assumed satisfiable`,
    );
  }
  if (snap.mpi.library === 'openmpi' && !stacks && verdict !== 'deadlock' && waits.collectives.length === 0) {
    add(
      'openmpi-collectives-hidden',
      "Open MPI's DLL hides collective-internal traffic: ranks inside a collective show nothing pending",
    );
  }
  return out;
}

const ARROW = ' -> ';

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function cyclePath(ranks: readonly number[]): string {
  const first = ranks[0] ?? 0;
  if (ranks.length <= 8) return [...ranks, first].join(ARROW);
  return [...ranks.slice(0, 3), '...', ...ranks.slice(-2), first].join(ARROW);
}

/** Each kind of evidence in words, singular and plural. */
const EVIDENCE_WORDS: Record<EdgeEvidence, [string, string]> = {
  send: ['pending send', 'pending sends'],
  receive: ['pending receive', 'pending receives'],
  'wildcard-receive': ['receive from any rank', 'receives from any rank'],
  'inferred-from-unexpected': [
    'send inferred from an unexpected message',
    'sends inferred from unexpected messages',
  ],
  call: ['blocking call', 'blocking calls'],
  'collective-call': ['collective', 'collectives'],
  'send-in-call': ['send still waiting for its match', 'sends still waiting for their match'],
  'receive-in-call': ['receive still waiting in its call', 'receives still waiting in their call'],
};

/** "2 pending receives", "4 blocking calls": what the cycle's waits rest on. */
function evidenceCounts(c: DeadlockCycle): string {
  const counts = new Map<EdgeEvidence, number>();
  for (const e of c.edges)
    for (const op of e.ops) counts.set(op.evidence, (counts.get(op.evidence) ?? 0) + 1);
  return [...counts].map(([k, v]) => `${v} ${EVIDENCE_WORDS[k][v === 1 ? 0 : 1]}`).join(', ');
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

function describeNearMiss(m: NearMiss): string {
  const c = m.candidates[0];
  if (c === undefined) return '';
  const what = m.kind === 'receive' ? 'receive' : 'send';
  const peer = m.peer === null ? (m.kind === 'receive' ? 'any source' : 'an unknown rank') : `rank ${m.peer}`;
  const dir = m.kind === 'receive' ? 'from' : 'to';
  const other =
    c.op.queue === 'unexpected'
      ? `an unexpected message from rank ${c.peer ?? '?'} (tag ${c.tag ?? 'any'}, ${commPhrase(c.op.commName)})`
      : c.op.queue === 'sends'
        ? `rank ${c.op.rank}'s send (tag ${c.tag ?? 'any'}, ${commPhrase(c.op.commName)})`
        : `rank ${c.op.rank}'s receive from ${c.peer === null ? 'any source' : `rank ${c.peer}`} (tag ${c.tag ?? 'any'}, ${commPhrase(c.op.commName)})`;
  const diff = c.wouldMatch ? 'would match but is still pending' : `differs in ${c.differs.join(', ')}`;
  return `rank ${m.op.rank}'s ${what} ${dir} ${peer} (tag ${m.tag ?? 'any'}, ${commPhrase(m.op.commName)}) vs ${other}: ${diff}`;
}

type Summary = Pick<Explanation, 'summary' | 'headline' | 'lead'>;

function summarize(e: Omit<Explanation, keyof Summary>, w: WaitAnalysis): Summary {
  const parts: string[] = [];
  let headline = '';
  let lead = '';
  /** The verdict's statement: first in the summary, kept apart for views. */
  const head = (label: string, rest: string) => {
    headline = label;
    lead = rest;
    parts.push(`${label}: ${rest}`);
  };
  const last = e.progress.at(-1);
  switch (e.verdict) {
    case 'deadlock': {
      const d = e.deadlock;
      if (d === null) break;
      head('Deadlock', `${d.count} of ${e.rankCount} ranks can never proceed.`);
      const c = d.cycles[0];
      if (c !== undefined) {
        const more = d.cycleTotal > 1 ? ` (${d.cycleTotal} cycles; the first)` : '';
        const comp =
          c.componentSize > c.ranks.length ? `, among ${c.componentSize} mutually waiting ranks` : '';
        parts.push(
          `Cycle of ${plural(c.ranks.length, 'rank')}${more}: ${cyclePath(c.ranks)} (${evidenceCounts(c)}${comp}).`,
        );
        if (!c.certain) {
          parts.push(
            c.edges.some((x) => x.ops.some((o) => o.evidence === 'send-in-call'))
              ? 'Part of it rests on ranks blocked in a send the library already lists as done (an eager synchronous send waiting for its acknowledgement), so it is likely rather than certain.'
              : c.edges.some((x) => x.ops.some((o) => o.evidence === 'receive-in-call'))
                ? 'Part of it rests on ranks blocked in a receive the library already lists as done (its stacks show the thread still waiting in the call), so it is likely rather than certain.'
                : 'Part of it is inferred from unexpected messages whose senders cannot show their send queues, so it is likely rather than certain.',
          );
        }
      }
      if (d.cycles.length === 0) {
        parts.push('No cycle: they wait for ANY_SOURCE on communicators where no other rank could answer.');
      } else if (d.blockedBehind !== '') {
        parts.push(`Also blocked, waiting on the cycle: ${ranksText(d.blockedBehind)}.`);
      }
      break;
    }
    case 'collective-hang': {
      const mm = e.collectiveMismatches[0];
      if (mm !== undefined) {
        const on = mm.commName === null ? '' : ` on ${commPhrase(mm.commName)}`;
        const allBlocked = mm.groups.every((g) => g.where !== 'call' || g.blocking);
        const settled = mm.groups.every((g) => g.where === 'unread' || (g.where === 'call' && g.blocking));
        head(
          `Collective hang${on}`,
          settled
            ? `${mm.text}; they can never meet.`
            : `${mm.text}; the collective cannot complete until the others enter it.`,
        );
        if (!(settled && allBlocked) && last === undefined) {
          parts.push('Ranks outside MPI may still get there: take another snapshot to confirm.');
        }
        if (e.collectiveMismatches.length > 1) {
          parts.push(
            `Also: ${e.collectiveMismatches
              .slice(1, 4)
              .map((x) => x.text)
              .join('; ')}.`,
          );
        }
        const d = e.deadlock?.cycles[0];
        if (d?.edges.some((x) => x.ops.some((o) => o.evidence !== 'collective-call'))) {
          parts.push(`The waits close a cycle through the collective: ${cyclePath(d.ranks)}.`);
        }
        break;
      }
      const c = e.collectives[0];
      if (c === undefined) break;
      const name = c.commName === '' ? 'an unnamed library communicator' : commPhrase(c.commName);
      head(
        'Collective hang',
        `${plural(c.rankCount, 'rank')} of ${c.commSize} (${c.ranks}) have collective traffic pending on ${name}.`,
      );
      if (c.waitingFor !== '') {
        parts.push(
          `They wait for ${ranksText(c.waitingFor)}, which show${/[-,]/.test(c.waitingFor) ? '' : 's'} no collective traffic: likely not in the collective (blocked elsewhere or computing).`,
        );
      }
      if (c.lateWaitOn !== '') {
        parts.push(
          `Those in turn wait in point-to-point operations for ${ranksText(c.lateWaitOn)}, inside the collective: a cycle through the collective.`,
        );
      }
      if (last === undefined)
        parts.push('One snapshot cannot show that it does not move: take another to confirm.');
      else parts.push(`Nothing moved between ${last.from} and ${last.to}.`);
      break;
    }
    case 'openmp-hang': {
      const o = e.openmp;
      const n = o.deadlockedRanks.length;
      head(
        'OpenMP deadlock',
        `${n} of ${e.rankCount} ranks can never proceed: on ${ranksText(o.deadlocked)} every OpenMP thread waits (for a lock, at a barrier, for tasks), none runs and none is in an MPI call, so nothing can release ${n === 1 ? 'it' : 'them'}.`,
      );
      const stuck = o.groups.filter((g) => g.block === 'openmp').map((g) => g.text);
      if (stuck.length > 0) parts.push(`${capitalize(stuck.slice(0, 3).join('; '))}.`);
      if (e.behindOpenMp !== '') {
        const one = !/[-,]/.test(e.behindOpenMp);
        parts.push(
          `${capitalize(ranksText(e.behindOpenMp))} ${one ? 'waits' : 'wait'} in MPI for ${n === 1 ? 'it' : 'them'}: blocked behind the OpenMP deadlock.`,
        );
      }
      break;
    }
    case 'stuck': {
      if (last === undefined) break;
      head(
        'Stuck',
        `${plural(last.counts.pendingAfter, 'operation')} pending and nothing moved between ${last.from} and ${last.to}.`,
      );
      break;
    }
    case 'progressing': {
      if (last === undefined) break;
      const k = last.counts;
      head(
        'Progressing',
        `between ${last.from} and ${last.to}, ${k.appeared} operations appeared, ${k.disappeared} disappeared and ${k.changed} changed status, on ${plural(last.movedRanks, 'rank')}.`,
      );
      if (last.stuckRanks.length > 0) {
        parts.push(`Nothing moved on ${ranksText(compressRanks(last.stuckRanks))}, which still wait.`);
      }
      break;
    }
    case 'idle':
      head(
        'Idle',
        last === undefined
          ? 'no rank waits in a visible MPI operation (computing, finished, or blocked where the queues cannot show it).'
          : `nothing pending in the snapshots of ${last.from} and ${last.to}.`,
      );
      break;
    case 'unknown':
      if (w.rankCount - w.unknownRanks.length === 0) head('Unknown', 'no rank could be read.');
      else {
        head(
          `No deadlock${e.partial ? ' among the readable ranks' : ''}`,
          `${plural(w.waitingRanks, 'rank')} wait, but every wait can still be satisfied.`,
        );
        parts.push('One snapshot cannot tell a hang from a slow job: take another to compare.');
      }
      break;
    default:
      assertUnreachable(e.verdict);
  }
  if (e.openmp.lines.length > 0) {
    const o = e.openmp;
    const lines =
      e.verdict === 'openmp-hang'
        ? o.groups.filter((g) => g.block !== 'openmp').map((g) => g.text)
        : o.groups.map((g) => g.text);
    if (lines.length > 0) {
      const more = o.groupTotal > 4 ? `; ${o.groupTotal - Math.min(4, lines.length)} more groups` : '';
      parts.push(`OpenMP threads: ${lines.slice(0, 4).join('; ')}${more}.`);
    }
    if (o.waitOnMpi !== '') {
      const one = !/[-,]/.test(o.waitOnMpi);
      parts.push(
        `On ${ranksText(o.waitOnMpi)} the other OpenMP threads wait (at a barrier, in taskwait, for a lock) for the thread in the MPI call: ${one ? 'the rank is' : 'the ranks are'} held by that call, not by OpenMP.`,
      );
    }
    if (e.verdict !== 'openmp-hang' && o.deadlocked !== '') {
      parts.push(
        `OpenMP deadlock on ${ranksText(o.deadlocked)} as well: no thread there runs or is in an MPI call${e.behindOpenMp === '' ? '' : `; ${ranksText(e.behindOpenMp)} wait in MPI for ${/[-,]/.test(o.deadlocked) ? 'them' : 'it'}`}.`,
      );
    }
  }
  if (e.calls.length > 0 && e.verdict !== 'collective-hang') {
    const shown = e.calls.slice(0, 4).map((g) => describeCallGroup(g));
    const more = e.calls.length > 4 ? `; ${e.calls.length - 4} more groups` : '';
    parts.push(`Stacks: ${shown.join('; ')}${more}.`);
  }
  if (e.dependsOnUnknown !== '') {
    parts.push(`If the unread ranks are blocked, ${ranksText(e.dependsOnUnknown)} would be deadlocked too.`);
  }
  if (e.verdict !== 'idle' && e.waits.waitingOnFree !== '') {
    const one = !/[-,]/.test(e.waits.waitingOnFree);
    parts.push(
      `Waits lead to ${ranksText(e.waits.waitingOnFree)}, which ${one ? 'is' : 'are'} not blocked in any visible operation (computing, or blocked where the queues cannot show it).`,
    );
  }
  const m = e.nearMisses[0];
  if (m !== undefined) {
    parts.push(
      `Near miss${e.nearMissTotal > 1 ? ` (1 of ${e.nearMissTotal})` : ''}: ${describeNearMiss(m)}.`,
    );
  }
  const big = e.classes[0];
  if (big !== undefined && e.rankCount > 1) {
    parts.push(
      e.classTotal === 1
        ? `All ${e.rankCount} ranks have the same queue shape.`
        : `Ranks fall into ${e.classTotal} queue shapes; the largest has ${plural(big.size, 'rank')} (${ranksText(big.ranks)})${e.outliers ? `; outliers: ${ranksText(e.outliers)}` : ''}.`,
    );
  }
  if (e.partial) parts.push(`Partial: ${e.partialReasons.join('; ')}.`);
  return { summary: parts.join(' '), headline, lead };
}

const MAX_EDGES_SHOWN = 6;

/** Plain text for the CLI: the summary first, then the details, each list cut short. */
export function formatExplanation(e: Explanation): string {
  const out: string[] = [];
  out.push(
    `verdict: ${e.verdict}${e.partial ? ' (partial)' : ''}  [${e.rankCount} ranks, ${e.library}, ${e.takenAt}]`,
  );
  out.push(e.summary);
  if (e.diagnosis.cycle !== null || e.diagnosis.groups.length > 0) {
    out.push('where the ranks are:');
    if (e.diagnosis.cycle !== null) out.push(`  ${e.diagnosis.cycle.text}`);
    for (const g of e.diagnosis.groups) out.push(`  ${g.text}`);
    if (e.diagnosis.groupTotal > e.diagnosis.groups.length)
      out.push(`  ... ${e.diagnosis.groupTotal - e.diagnosis.groups.length} more groups`);
  }
  for (const r of e.partialReasons) out.push(`partial: ${r}`);
  for (const l of e.limits) out.push(`limit: ${l.text}`);
  if (e.deadlock) {
    out.push(`deadlocked ranks (${e.deadlock.count}): ${e.deadlock.ranks}`);
    e.deadlock.cycles.forEach((c, i) => {
      out.push(
        `cycle ${i + 1}: ${plural(c.ranks.length, 'rank')}${c.certain ? '' : ' (partly inferred)'}: ${cyclePath(c.ranks)}`,
      );
      for (const edge of c.edges.slice(0, MAX_EDGES_SHOWN)) {
        const ops = edge.ops
          .map((o) =>
            o.call === undefined
              ? `${o.evidence} ${commPhrase(o.commName)} ${o.queue}[${o.index}]@${o.rank} tag ${o.tag ?? 'any'}`
              : // A call's tag comes from its frame: null there is MPI_ANY_TAG or unreadable
                // (MPICH keeps a blocking call's tag only as an entry value), so say "?"; a
                // collective has none.
                `${o.evidence} ${jobText(o.call)}@${o.rank}${o.index >= 0 ? ` (${commPhrase(o.commName)} ${o.queue}[${o.index}])` : ''}${o.evidence === 'collective-call' ? '' : ` tag ${o.tag ?? '?'}`}`,
          )
          .join('; ');
        out.push(`  ${edge.from} -> ${edge.to}: ${ops}`);
      }
      if (c.edges.length > MAX_EDGES_SHOWN) out.push(`  ... ${c.edges.length - MAX_EDGES_SHOWN} more edges`);
    });
    if (e.deadlock.cycleTotal > e.deadlock.cycles.length) {
      out.push(`... ${e.deadlock.cycleTotal - e.deadlock.cycles.length} more cycles`);
    }
    if (e.deadlock.blockedBehind) out.push(`blocked behind the cycles: ${e.deadlock.blockedBehind}`);
  }
  if (e.dependsOnUnknown) out.push(`deadlocked if the unread ranks are blocked: ${e.dependsOnUnknown}`);
  for (const c of e.collectives) {
    out.push(
      `collective in progress on ${commPhrase(c.commName)}/${c.commSize}: ranks ${c.ranks}${c.waitingFor ? `; waiting for ${c.waitingFor}` : ''}${c.lateWaitOn ? `, which wait in p2p for ${c.lateWaitOn}` : ''}`,
    );
  }
  for (const m of e.collectiveMismatches) {
    out.push(
      `collective mismatch on ${m.commName === null ? 'an unknown communicator' : commPhrase(m.commName)}:`,
    );
    for (const g of m.groups) out.push(`  ${describeCallGroup(g)}`);
  }
  if (e.calls.length > 0) {
    out.push(`in MPI calls (stacks, ${plural(e.calls.length, 'group')}):`);
    for (const g of e.calls.slice(0, 8)) out.push(`  ${describeCallGroup(g)}`);
    if (e.calls.length > 8) out.push(`  ... ${e.calls.length - 8} more groups`);
  }
  if (e.openmp.lines.length > 0) {
    out.push('openmp:');
    for (const l of e.openmp.lines) out.push(`  ${l}`);
    if (e.behindOpenMp) out.push(`  waiting in MPI for the OpenMP deadlock: ${e.behindOpenMp}`);
  }
  if (e.nearMissTotal > 0) {
    out.push(`near misses (${e.nearMissTotal}):`);
    for (const m of e.nearMisses.slice(0, 5)) {
      out.push(`  ${describeNearMiss(m)}`);
      for (const note of m.notes) out.push(`    note: ${note}`);
    }
    if (e.nearMissTotal > 5) out.push(`  ... ${e.nearMissTotal - 5} more`);
  }
  out.push(
    `queue shapes (${e.classTotal}, peers ${e.classPeers === 'relative' ? 'as +offset' : 'as =local rank'}):`,
  );
  for (const c of e.classes.slice(0, 5)) {
    out.push(
      `  ${plural(c.size, 'rank')} [${c.ranks}]: ${c.shape.slice(0, 3).join('; ')}${c.shape.length > 3 ? '; ...' : ''}`,
    );
  }
  if (e.classTotal > 5) out.push(`  ... ${e.classTotal - 5} more shapes`);
  if (e.outliers) out.push(`outliers: ${e.outliers}`);
  for (const p of e.progress) {
    const k = p.counts;
    out.push(
      `progress ${p.from} -> ${p.to}: ${p.verdict} (unchanged ${k.unchanged}, changed ${k.changed}, appeared ${k.appeared}, disappeared ${k.disappeared})`,
    );
  }
  return out.join('\n');
}
