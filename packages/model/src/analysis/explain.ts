// The one answer a user wants from a hung job: what is wrong, who is involved, and why we
// think so. explainSnapshot combines the wait-for graph, near misses, rank classes and (with
// earlier snapshots) progress into one JSON-able object the CLI prints and the dashboard shows.
// Its shape is explain-types.ts; its words (summary, formatExplanation) are explain-text.ts.
import { codedText } from '../errors.js';
import { LIBRARY_FACTS } from '../mpi/library.js';
import { type JobSnapshot, QUEUE_KINDS, type QueueKind, type RankState } from '../snapshot-spec.js';
import { jobText, ranksPhrase as ranksText } from '../text.js';
import { CALL_BLOCKED, callGroups, findCollectiveMismatches, ROOTED_COLLECTIVES } from './call-facts.js';
import { rankClasses } from './classes.js';
import { diagnosisLines } from './diagnosis.js';
import { summarize } from './explain-text.js';
import type {
  CollectiveSummary,
  ExplainOptions,
  Explanation,
  Limit,
  LimitCode,
  Verdict,
} from './explain-types.js';
import type { NearMissResult } from './near-miss.js';
import { findNearMisses } from './near-miss.js';
import { analyzeOpenMp, type OpenMpSummary } from './openmp.js';
import { progressAcross } from './progress.js';
import { type ProgressCounter, progressCounter } from './progress-counter.js';
import { compressRanks } from './ranges.js';
import { type SendCycle, sendCycle } from './send-cycle.js';
import { SnapshotIndex } from './snapshot-index.js';
import { analyzeWaits, buildWaitGraph, isGoneCode, KIND_SINGLE, type WaitAnalysis } from './wait-graph.js';
import { DEAD_NONE, type DeadlockCycle } from './wait-types.js';

export { formatExplanation } from './explain-text.js';
export * from './explain-types.js';

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
  // A rank in MPI_Finalize waits for nothing the job still owes it.
  const blockedLive = graph.calls.state.some((s, i) => s === CALL_BLOCKED && graph.dead[i] === DEAD_NONE);
  const anythingPending =
    waits.clauses > 0 ||
    waits.unresolvedWaits > 0 ||
    waits.outsideWaits > 0 ||
    waits.collectives.length > 0 ||
    blockedLive ||
    hasPending(snap);
  const completing = completingCollective(ix, graph);
  const rootsUnread: number[] = [];
  for (let i = 0; i < ix.n; i++) {
    const args = ix.snap.ranks[i]?.mpiCall?.args;
    if (graph.calls.state[i] !== CALL_BLOCKED || !ROOTED_COLLECTIVES.has(graph.calls.fn[i] ?? '')) continue;
    if (args?.root === undefined || args.root === null) rootsUnread.push(ix.rankOf[i] ?? 0);
  }
  const allBlocked = blockedLive && completing.length === 0 && everyRankBlocked(ix, graph);
  // A cycle of point-to-point waits is the cause of any collective that waits on its ranks.
  const p2pCycle = waits.cycles.some((c) =>
    c.edges.every((x) => x.ops.some((o) => o.evidence !== 'collective-call')),
  );
  const readable = waits.rankCount - waits.unknownRanks.length;
  const openmp = analyzeOpenMp(snap);
  const behindOpenMp = waitersOn(graph, ix, openmp.deadlockedRanks);
  const ompHeld = new Set(openmp.deadlockedRanks);

  let verdict: Verdict;
  if (readable === 0) verdict = 'unknown';
  else if (p2pCycle) verdict = 'deadlock';
  else if (mismatches.length > 0) verdict = 'collective-hang';
  else if (waits.deadlocked.length > 0) verdict = 'deadlock';
  // An OpenMP deadlock is certain in one snapshot: no thread of the rank runs to release it.
  else if (openmp.deadlockedRanks.length > 0) verdict = 'openmp-hang';
  else if (last !== undefined) {
    if (last.verdict === 'stuck') verdict = collectives.length > 0 ? 'collective-hang' : 'stuck';
    else verdict = last.verdict;
  } else if (collectives.length > 0) verdict = 'collective-hang';
  else if (!anythingPending) verdict = 'idle';
  // The last resort: no rule proves the hang, but no rank can act to end it either.
  else if (allBlocked) verdict = 'stuck';
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
      outsideWaits: waits.outsideWaits,
      outsideRanks: compressRanks(waits.outsideRanks),
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
            deadEnds: waits.deadEnds,
            deadEndTotal: waits.deadEndTotal,
          },
    finished: compressRanks(waits.finished),
    allBlocked,
    completing: compressRanks(completing),
    rootsUnread: compressRanks(rootsUnread),
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
    diagnosis: diagnosisLines(ix, graph, waits.cycles, {}, waits.deadEnds),
    // Absent rather than null when there is none: the explanation's other readers need not know it.
    ...sendCycleOf(ix, waits.cycles[0]),
    ...progressCounterOf(snap),
  };
  return { ...base, ...summarize(base, waits) };
}

function sendCycleOf(ix: SnapshotIndex, c: DeadlockCycle | undefined): { sendCycle?: SendCycle } {
  const s = c === undefined ? null : sendCycle(ix, c);
  return s === null ? {} : { sendCycle: s };
}

function progressCounterOf(snap: JobSnapshot): { progressCounter?: ProgressCounter } {
  const p = progressCounter(snap.ranks);
  return p === null ? {} : { progressCounter: p };
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

/**
 * Every rank was read (or is gone) and its stacks put it in a blocking MPI call (or in
 * MPI_Finalize): no rank computes or polls, so none can act to end the waits.
 */
function everyRankBlocked(ix: SnapshotIndex, graph: ReturnType<typeof buildWaitGraph>): boolean {
  for (let i = 0; i < ix.n; i++) {
    if (graph.dead[i] !== DEAD_NONE) continue;
    if (ix.ok[i] === 0 || graph.calls.state[i] !== CALL_BLOCKED) return false;
  }
  return true;
}

/**
 * Ranks in a blocking collective that every member of its communicator has entered (no wait
 * clause on an absent member): the collective can complete, so they are not stuck.
 */
function completingCollective(ix: SnapshotIndex, graph: ReturnType<typeof buildWaitGraph>): number[] {
  const out: number[] = [];
  for (let i = 0; i < ix.n; i++) {
    if (graph.calls.state[i] !== CALL_BLOCKED || graph.calls.kind[i] !== 'collective') continue;
    const start = graph.byRank.start[i] ?? 0;
    if ((graph.byRank.start[i + 1] ?? 0) !== start) continue;
    // A rooted collective whose root could not be read may be one whose roots differ.
    const fn = graph.calls.fn[i] ?? '';
    const root = ix.snap.ranks[i]?.mpiCall?.args?.root;
    if (ROOTED_COLLECTIVES.has(fn) && (root === undefined || root === null)) continue;
    out.push(ix.rankOf[i] ?? 0);
  }
  return out;
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
  return [...byCode].map(([code, e]) =>
    isGoneCode(code)
      ? `${ranksText(compressRanks(e.ranks))} ${e.ranks.length === 1 ? 'has' : 'have'} exited (${jobText(codedText({ code, message: e.message }), 512)}): ${e.ranks.length === 1 ? 'it' : 'they'} will never send or receive again`
      : `${ranksText(compressRanks(e.ranks))} could not be read (${NOT_READ_WORDS[e.kind]}, ${jobText(codedText({ code, message: e.message }), 512)}): assumed able to proceed, so a deadlock that needs ${e.ranks.length === 1 ? 'it' : 'them'} blocked is not reported`,
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
    for (const kind of QUEUE_KINDS) {
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
  } else if (LIBRARY_FACTS[snap.mpi.library].sendQueueOmitsBlockingSends) {
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
  if (waits.outsideWaits > 0) {
    add(
      'peers-outside',
      `${waits.outsideWaits === 1 ? '1 pending operation waits' : `${waits.outsideWaits} pending operations wait`} for ${ranksText(compressRanks(waits.outsideRanks))}, not in this snapshot (assumed satisfiable, like a rank not read)`,
    );
  }
  if (
    LIBRARY_FACTS[snap.mpi.library].hidesCollectiveTraffic &&
    !stacks &&
    verdict !== 'deadlock' &&
    waits.collectives.length === 0
  ) {
    add(
      'openmpi-collectives-hidden',
      "Open MPI's DLL hides collective-internal traffic: ranks inside a collective show nothing pending",
    );
  }
  return out;
}
