// Solving the wait-for graph (built by wait-graph.ts): who can proceed, who never can, one
// minimal cycle per deadlocked component, the edges and operations behind each, and the
// collectives in progress.

import { CALL_BLOCKED, CALL_COMPUTING, CALL_POLLING } from './call-facts.js';
import { at, type Csr, csr, IntVec } from './csr.js';
import { QUEUE_OF_CODE } from './snapshot-index.js';
import {
  type CollectiveInProgress,
  DEAD_GONE,
  DEAD_NONE,
  type DeadEndWait,
  type DeadlockCycle,
  EV_CALL,
  EV_COLLECTIVE,
  EV_INFERRED,
  EV_RECV_IN_CALL,
  EV_SEND_IN_CALL,
  EVIDENCE,
  INFERRED_EVIDENCE,
  KIND_GROUP,
  KIND_SINGLE,
  type WaitAnalysis,
  type WaitEdge,
  type WaitEdgeOp,
  type WaitGraph,
  type WaitOptions,
} from './wait-types.js';

/** Solve the graph: who can proceed, who never can, and one minimal cycle per deadlocked component. */
export function analyzeWaits(g: WaitGraph, opts: WaitOptions = {}): WaitAnalysis {
  const { ix, clauseCount, cRank, cKind, cTarget, byRank } = g;
  const n = ix.n;
  const nGroups = g.groupKey.length;

  // Clauses that target a rank, and clauses that wait on a group, as CSR.
  const singleKeys = new IntVec();
  const singleVals = new IntVec();
  const groupClauseKeys = new IntVec();
  const groupClauseVals = new IntVec();
  for (let k = 0; k < clauseCount; k++) {
    if (cKind[k] === KIND_SINGLE) {
      singleKeys.push(at(cTarget, k));
      singleVals.push(k);
    } else {
      groupClauseKeys.push(at(cTarget, k));
      groupClauseVals.push(k);
    }
  }
  const waitersOf = csr(n, singleKeys, singleVals);
  const groupClauses = csr(nGroups, groupClauseKeys, groupClauseVals);
  const { released, sat, groupReleased } = solve(g, waitersOf, groupClauses, true);

  let waitingRanks = 0;
  for (let i = 0; i < n; i++) if (at(byRank.start, i + 1) > at(byRank.start, i)) waitingRanks++;
  // The same fixpoint with the unknown ranks assumed blocked: who is deadlocked only then.
  const dependsOnUnknown: number[] = [];
  if (ix.ok.includes(0) || g.groupUnknownMember.includes(1)) {
    const pessimistic = solve(g, waitersOf, groupClauses, false).released;
    for (let i = 0; i < n; i++) {
      if (ix.ok[i] === 1 && released[i] === 1 && pessimistic[i] === 0)
        dependsOnUnknown.push(at(ix.rankOf, i));
    }
  }

  // A rank that will never act again is no more deadlocked than one that returned: only the
  // ranks that wait on it are.
  const deadlocked: number[] = [];
  const finished: number[] = [];
  for (let i = 0; i < n; i++) {
    if (g.dead[i] !== DEAD_NONE) finished.push(i);
    else if (released[i] === 0) deadlocked.push(i);
  }
  const { deadEnds, deadEndTotal } = deadEndWaits(g, deadlocked, sat, opts.maxDeadEnds ?? 16);

  // Waited for, yet blocked in nothing the queues show (no p2p wait, no collective wait).
  const busy = new Uint8Array(n);
  for (let i = 0; i < g.collOps.rank.length; i++)
    if (g.collOps.wait.get(i) === 1) busy[g.collOps.rank.get(i)] = 1;
  // A rank the stacks show blocked in a call is not free, whatever its queues show.
  for (let i = 0; i < n; i++) if (g.calls.state[i] === CALL_BLOCKED) busy[i] = 1;
  const waitingOnFree = new Uint8Array(n);
  for (let k = 0; k < clauseCount; k++) {
    const t = at(cTarget, k);
    if (cKind[k] !== KIND_SINGLE || ix.ok[t] === 0 || busy[t] === 1 || t === cRank[k]) continue;
    if (at(byRank.start, t + 1) === at(byRank.start, t)) waitingOnFree[t] = 1;
  }

  const { cycles, cycleTotal, inCycleComponent } =
    deadlocked.length === 0
      ? { cycles: [], cycleTotal: 0, inCycleComponent: new Uint8Array(0) }
      : findCycles(g, deadlocked, sat, groupReleased, opts.maxCycles ?? 100);

  const rankOf = ix.rankOf;
  const toRanks = (idxs: Iterable<number>) => Array.from(idxs, (i) => at(rankOf, i));
  const unknownRanks: number[] = [];
  for (let i = 0; i < n; i++) if (ix.ok[i] === 0) unknownRanks.push(at(rankOf, i));
  let inferredClauses = 0;
  for (let k = 0; k < clauseCount; k++) if (g.cEvidence[k] === EV_INFERRED) inferredClauses++;

  return {
    rankCount: n,
    unknownRanks,
    waitingRanks,
    clauses: clauseCount,
    inferredClauses,
    unresolvedWaits: g.unresolvedWaits,
    outsideWaits: g.outsideWaits,
    outsideRanks: g.outsideRanks,
    deadlocked: toRanks(deadlocked),
    cycles,
    cycleTotal,
    blockedBehind: toRanks(deadlocked.filter((i) => inCycleComponent[i] !== 1)),
    finished: toRanks(finished),
    deadEnds,
    deadEndTotal,
    dependsOnUnknown,
    waitingOnFree: toRanks(indicesOf(waitingOnFree)),
    collectives: collectives(g),
    computing: toRanks(indicesWhere(g.calls.state, (s) => s === CALL_COMPUTING || s === CALL_POLLING)),
  };
}

/** The deadlocked ranks' unsatisfied waits on a single rank that will never act again. */
function deadEndWaits(
  g: WaitGraph,
  deadlocked: readonly number[],
  sat: Uint8Array,
  max: number,
): { deadEnds: DeadEndWait[]; deadEndTotal: number } {
  const deadEnds: DeadEndWait[] = [];
  let deadEndTotal = 0;
  for (const w of deadlocked) {
    const targets = new Set<number>();
    const end = at(g.byRank.start, w + 1);
    for (let p = at(g.byRank.start, w); p < end; p++) {
      const k = at(g.byRank.items, p);
      const t = at(g.cTarget, k);
      if (sat[k] === 1 || g.cKind[k] !== KIND_SINGLE || g.dead[t] === DEAD_NONE) continue;
      targets.add(t);
    }
    for (const t of targets) {
      deadEndTotal++;
      if (deadEnds.length >= max) continue;
      const e = edgeBetween(g, w, t, sat);
      deadEnds.push({
        from: e.from,
        to: e.to,
        ops: e.ops,
        reason: g.dead[t] === DEAD_GONE ? 'gone' : 'final',
      });
    }
  }
  return { deadEnds, deadEndTotal };
}

function* indicesWhere(xs: Uint8Array, pred: (x: number) => boolean): Iterable<number> {
  for (let i = 0; i < xs.length; i++) if (pred(at(xs, i))) yield i;
}

/**
 * Releasability fixpoint (unit propagation), linear in clauses plus group memberships: a rank
 * is released when each of its clauses has a released member. `unknownReleasable` decides
 * what unread ranks (and members the snapshot lacks) count as.
 */
function solve(
  g: WaitGraph,
  waitersOf: Csr,
  groupClauses: Csr,
  unknownReleasable: boolean,
): { released: Uint8Array; sat: Uint8Array; groupReleased: Uint8Array } {
  const { ix, clauseCount, cRank, byRank, groupsOf } = g;
  const n = ix.n;
  const nGroups = g.groupKey.length;
  const released = new Uint8Array(n);
  const remaining = new Int32Array(n);
  const sat = new Uint8Array(clauseCount);
  const groupReleased = new Uint8Array(nGroups);
  const queue = new Int32Array(n);
  let head = 0;
  let tail = 0;
  const release = (r: number) => {
    if (released[r] === 1) return;
    released[r] = 1;
    queue[tail++] = r;
  };
  const satisfy = (k: number) => {
    if (sat[k] === 1) return;
    sat[k] = 1;
    const w = at(cRank, k);
    const left = at(remaining, w) - 1;
    remaining[w] = left;
    if (left === 0) release(w);
  };
  const releaseGroup = (gid: number) => {
    if (groupReleased[gid] === 1) return;
    groupReleased[gid] = 1;
    const end = at(groupClauses.start, gid + 1);
    for (let p = at(groupClauses.start, gid); p < end; p++) satisfy(at(groupClauses.items, p));
  };
  for (let i = 0; i < n; i++) {
    const count = at(byRank.start, i + 1) - at(byRank.start, i);
    remaining[i] = count;
    if (g.dead[i] !== DEAD_NONE) continue;
    if (ix.ok[i] === 0 ? unknownReleasable : count === 0) release(i);
  }
  if (unknownReleasable) {
    for (let gid = 0; gid < nGroups; gid++) if (g.groupUnknownMember[gid] === 1) releaseGroup(gid);
  }
  while (head < tail) {
    const r = at(queue, head++);
    const wEnd = at(waitersOf.start, r + 1);
    for (let p = at(waitersOf.start, r); p < wEnd; p++) satisfy(at(waitersOf.items, p));
    const gEnd = at(groupsOf.start, r + 1);
    for (let p = at(groupsOf.start, r); p < gEnd; p++) releaseGroup(at(groupsOf.items, p));
  }
  return { released, sat, groupReleased };
}

function* indicesOf(flags: Uint8Array): Iterable<number> {
  for (let i = 0; i < flags.length; i++) if (flags[i] === 1) yield i;
}

/**
 * "Minimal" here: for each strongly connected component of the deadlocked ranks (found with
 * an iterative Tarjan, so a 16,384-rank ring costs no recursion), the shortest elementary
 * cycle through the component's lowest rank (one BFS). A ring gives exactly the ring; a
 * component with many cycles gives one short one plus its size. Enumerating every elementary
 * cycle is exponential and would bury the answer. Deadlocked ranks outside any cyclic
 * component only wait on one (blockedBehind).
 *
 * A wildcard clause means "any member but me". In the SCC graph a group waited on by two or
 * more ranks becomes one node (waiter -> group -> members): with two waiters, the group node's
 * reachability equals the real one. A group with a single waiter gets direct edges instead, so
 * "waiter -> group -> waiter" never fakes a cycle.
 */
function findCycles(
  g: WaitGraph,
  deadlocked: readonly number[],
  sat: Uint8Array,
  groupReleased: Uint8Array,
  maxCycles: number,
): { cycles: DeadlockCycle[]; cycleTotal: number; inCycleComponent: Uint8Array } {
  const { ix, cRank, cKind, cTarget, byRank, groupMembers } = g;
  const n = ix.n;
  const nGroups = g.groupKey.length;

  // Groups still unreleased: count their distinct waiters.
  const waiterCount = new Int32Array(nGroups);
  const lastWaiter = new Int32Array(nGroups).fill(-1);
  for (let k = 0; k < g.clauseCount; k++) {
    if (sat[k] === 1 || cKind[k] !== KIND_GROUP) continue;
    const gid = at(cTarget, k);
    if (lastWaiter[gid] !== cRank[k]) {
      lastWaiter[gid] = at(cRank, k);
      waiterCount[gid] = at(waiterCount, gid) + 1;
    }
  }
  const groupNode = new Int32Array(nGroups).fill(-1);
  let nodes = n;
  for (let gid = 0; gid < nGroups; gid++) {
    if (groupReleased[gid] === 0 && at(waiterCount, gid) >= 2) groupNode[gid] = nodes++;
  }

  // Adjacency of unsatisfied clauses (the reasons each rank is stuck) as CSR, two passes.
  const deg = new Int32Array(nodes + 1);
  const eachEdge = (emit: (from: number, to: number) => void) => {
    for (const w of deadlocked) {
      const end = at(byRank.start, w + 1);
      for (let p = at(byRank.start, w); p < end; p++) {
        const k = at(byRank.items, p);
        if (sat[k] === 1) continue;
        const t = at(cTarget, k);
        if (cKind[k] === KIND_SINGLE) emit(w, t);
        else if (at(groupNode, t) >= 0) emit(w, at(groupNode, t));
        else {
          const mEnd = at(groupMembers.start, t + 1);
          for (let q = at(groupMembers.start, t); q < mEnd; q++) {
            const m = at(groupMembers.items, q);
            if (m !== w) emit(w, m);
          }
        }
      }
    }
    for (let gid = 0; gid < nGroups; gid++) {
      const node = at(groupNode, gid);
      if (node < 0) continue;
      const mEnd = at(groupMembers.start, gid + 1);
      for (let q = at(groupMembers.start, gid); q < mEnd; q++) emit(node, at(groupMembers.items, q));
    }
  };
  eachEdge((from) => {
    deg[from + 1] = at(deg, from + 1) + 1;
  });
  for (let v = 0; v < nodes; v++) deg[v + 1] = at(deg, v + 1) + at(deg, v);
  const adjStart = deg;
  const adj = new Int32Array(at(adjStart, nodes));
  const fill = adjStart.slice(0, nodes);
  eachEdge((from, to) => {
    const slot = at(fill, from);
    adj[slot] = to;
    fill[from] = slot + 1;
  });

  // Iterative Tarjan over the deadlocked ranks (group nodes are reached through them).
  const index = new Int32Array(nodes).fill(-1);
  const low = new Int32Array(nodes);
  const onStack = new Uint8Array(nodes);
  const stack = new Int32Array(nodes);
  const callNode = new Int32Array(nodes);
  const callEdge = new Int32Array(nodes);
  const comp = new Int32Array(nodes).fill(-1);
  let sp = 0;
  let csp = 0;
  let counter = 0;
  let compCount = 0;
  const enter = (v: number) => {
    index[v] = counter;
    low[v] = counter++;
    stack[sp++] = v;
    onStack[v] = 1;
    callNode[csp] = v;
    callEdge[csp++] = at(adjStart, v);
  };
  for (const root of deadlocked) {
    if (index[root] !== -1) continue;
    enter(root);
    while (csp > 0) {
      const v = at(callNode, csp - 1);
      const p = at(callEdge, csp - 1);
      if (p < at(adjStart, v + 1)) {
        callEdge[csp - 1] = p + 1;
        const w = at(adj, p);
        if (index[w] === -1) enter(w);
        else if (onStack[w] === 1) low[v] = Math.min(at(low, v), at(index, w));
        continue;
      }
      csp--;
      if (low[v] === index[v]) {
        let w: number;
        do {
          w = at(stack, --sp);
          onStack[w] = 0;
          comp[w] = compCount;
        } while (w !== v);
        compCount++;
      }
      if (csp > 0) {
        const u = at(callNode, csp - 1);
        low[u] = Math.min(at(low, u), at(low, v));
      }
    }
  }

  // Components with a cycle: two or more ranks, or one rank waiting on itself.
  const compRanks = new Int32Array(compCount);
  const compMin = new Int32Array(compCount).fill(-1);
  for (const w of deadlocked) {
    const c = at(comp, w);
    compRanks[c] = at(compRanks, c) + 1;
    if (compMin[c] === -1) compMin[c] = w; // deadlocked is ascending
  }
  const selfLoop = new Uint8Array(compCount);
  for (const w of deadlocked) {
    const end = at(adjStart, w + 1);
    for (let p = at(adjStart, w); p < end; p++) if (adj[p] === w) selfLoop[at(comp, w)] = 1;
  }
  const inCycleComponent = new Uint8Array(n);
  const starts: number[] = [];
  for (let c = 0; c < compCount; c++) {
    if (at(compRanks, c) >= 2 || selfLoop[c] === 1) starts.push(at(compMin, c));
  }
  for (const w of deadlocked) {
    const c = at(comp, w);
    if (at(compRanks, c) >= 2 || selfLoop[c] === 1) inCycleComponent[w] = 1;
  }
  starts.sort((a, b) => a - b);

  // Shortest cycle through each start: BFS over ranks, expanding a wildcard group lazily.
  // A group first entered from rank p reaches every member but p; a later entry from another
  // rank adds p. So each group is scanned once per BFS, and paths never use "me -> me".
  const stamp = new Int32Array(n).fill(-1);
  const parent = new Int32Array(n);
  const bfs = new Int32Array(n);
  const gStamp = new Int32Array(nGroups).fill(-1);
  const gFirst = new Int32Array(nGroups);
  const gSecond = new Uint8Array(nGroups);
  const cycles: DeadlockCycle[] = [];
  let cycleTotal = 0;
  for (let si = 0; si < starts.length; si++) {
    const s = at(starts, si);
    const sComp = at(comp, s);
    let qh = 0;
    let qt = 0;
    stamp[s] = si;
    bfs[qt++] = s;
    let closer = -1;
    const visit = (m: number, from: number): boolean => {
      if (m === s) {
        closer = from;
        return true;
      }
      if (stamp[m] !== si && comp[m] === sComp) {
        stamp[m] = si;
        parent[m] = from;
        bfs[qt++] = m;
      }
      return false;
    };
    search: while (qh < qt) {
      const u = at(bfs, qh++);
      const end = at(byRank.start, u + 1);
      for (let p = at(byRank.start, u); p < end; p++) {
        const k = at(byRank.items, p);
        if (sat[k] === 1) continue;
        const t = at(cTarget, k);
        if (cKind[k] === KIND_SINGLE) {
          if (visit(t, u)) break search;
          continue;
        }
        if (gStamp[t] !== si) {
          gStamp[t] = si;
          gFirst[t] = u;
          gSecond[t] = 0;
          const mEnd = at(groupMembers.start, t + 1);
          for (let q = at(groupMembers.start, t); q < mEnd; q++) {
            const m = at(groupMembers.items, q);
            if (m !== u && visit(m, u)) break search;
          }
        } else if (gSecond[t] === 0 && gFirst[t] !== u) {
          gSecond[t] = 1;
          if (visit(at(gFirst, t), u)) break search;
        }
      }
    }
    if (closer < 0) continue; // cannot happen for a cyclic component; kept safe
    cycleTotal++;
    if (cycles.length >= maxCycles) continue;
    const path: number[] = [];
    for (let v = closer; v !== s; v = parent[v] ?? s) path.push(v);
    path.push(s);
    path.reverse();
    cycles.push(describeCycle(g, path, sat, at(compRanks, sComp)));
  }
  return { cycles, cycleTotal, inCycleComponent };
}

function describeCycle(g: WaitGraph, path: readonly number[], sat: Uint8Array, componentSize: number) {
  const edges: WaitEdge[] = [];
  for (let i = 0; i < path.length; i++) {
    const from = at(path, i);
    const to = at(path, (i + 1) % path.length);
    edges.push(edgeBetween(g, from, to, sat));
  }
  const ranks = path.map((i) => at(g.ix.rankOf, i));
  return { ranks, edges, componentSize, certain: edges.every((e) => !e.inferred) };
}

/** Every unsatisfied clause of `from` that `to` could satisfy, with the operations behind it. */
function edgeBetween(g: WaitGraph, from: number, to: number, sat: Uint8Array): WaitEdge {
  const { ix, byRank, cKind, cTarget, groupsOf } = g;
  const ops: WaitEdgeOp[] = [];
  const end = at(byRank.start, from + 1);
  for (let p = at(byRank.start, from); p < end; p++) {
    const k = at(byRank.items, p);
    if (sat[k] === 1) continue;
    const t = at(cTarget, k);
    let hit = false;
    if (cKind[k] === KIND_SINGLE) hit = t === to;
    else if (to !== from) {
      const gEnd = at(groupsOf.start, to + 1);
      for (let q = at(groupsOf.start, to); q < gEnd && !hit; q++) hit = groupsOf.items[q] === t;
    }
    if (hit) ops.push(clauseOp(g, k));
  }
  return {
    from: at(ix.rankOf, from),
    to: at(ix.rankOf, to),
    ops,
    inferred: ops.every((o) => INFERRED_EVIDENCE.has(o.evidence)),
  };
}

/** One wait of a rank: on one rank (a position) or on any member of a wildcard group. */
export interface RankWait {
  /** Position of the rank waited for; -1 for a wildcard over a group. */
  readonly target: number;
  /** For a wildcard: the other positions that could satisfy it (the group's members). */
  readonly anyOf: boolean;
  readonly op: WaitEdgeOp;
}

/** Every wait clause of the rank at this position, in the order they were found. */
export function rankWaits(g: WaitGraph, pos: number): RankWait[] {
  const out: RankWait[] = [];
  const end = at(g.byRank.start, pos + 1);
  for (let p = at(g.byRank.start, pos); p < end; p++) {
    const k = at(g.byRank.items, p);
    const single = g.cKind[k] === KIND_SINGLE;
    out.push({ target: single ? at(g.cTarget, k) : -1, anyOf: !single, op: clauseOp(g, k) });
  }
  return out;
}

/**
 * The matrix cell (sender row, receiver column) of a wait edge: a rank waiting in a send (or
 * inferred to, from an unexpected message) is the sender; a rank waiting in a receive is the
 * receiver of the message it waits for. Null for a wait inside a collective (no message).
 */
export function edgeCell(edge: WaitEdge): { row: number; col: number } | null {
  if (edge.ops.length > 0 && edge.ops.every((o) => o.evidence === 'collective-call')) return null;
  const viaReceive = edge.ops.length > 0 && edge.ops.every((o) => o.queue === 'receives');
  return viaReceive ? { row: edge.to, col: edge.from } : { row: edge.from, col: edge.to };
}

function clauseOp(g: WaitGraph, k: number): WaitEdgeOp {
  const queue = QUEUE_OF_CODE[at(g.cQueue, k)] ?? 'sends';
  const index = at(g.cIndex, k);
  const ev = at(g.cEvidence, k);
  if (ev === EV_CALL || ev === EV_COLLECTIVE || ev === EV_SEND_IN_CALL || ev === EV_RECV_IN_CALL) {
    const pos = at(g.cRank, k);
    const ce = g.ix.comms[at(g.cComm, k)];
    const mpiCall = g.ix.snap.ranks[pos]?.mpiCall;
    return {
      rank: at(g.ix.rankOf, pos),
      commKey: ce?.key ?? '',
      commName: ce?.comm.name ?? '',
      queue,
      index,
      evidence: EVIDENCE[ev] ?? 'call',
      tag: index >= 0 ? (ce?.comm[queue]?.[index]?.tag ?? null) : (mpiCall?.args?.tag ?? null),
      call: g.calls.fn[pos] ?? mpiCall?.function ?? '?',
    };
  }
  const ce = g.ix.comms[at(g.cComm, k)];
  if (ce === undefined) throw new Error(`clause ${k} names a communicator that is not indexed`);
  // A literal of one fixed shape: at 16,384 edges this is the hot allocation.
  return {
    rank: ce.rank,
    commKey: ce.key,
    commName: ce.comm.name,
    queue,
    index,
    evidence: EVIDENCE[at(g.cEvidence, k)] ?? 'send',
    tag: ce.comm[queue]?.[index]?.tag ?? null,
  };
}

/** Collective-internal traffic grouped by communicator, with the ranks others wait for there. */
export function collectives(g: WaitGraph): CollectiveInProgress[] {
  const { ix, collOps, byRank, cKind, cTarget } = g;
  if (collOps.rank.length === 0) return [];
  const byKey = new Map<number, { part: Uint8Array; targets: number[] }>();
  for (let i = 0; i < collOps.rank.length; i++) {
    const keyId = collOps.keyId.get(i);
    let e = byKey.get(keyId);
    if (e === undefined) {
      e = { part: new Uint8Array(ix.n), targets: [] };
      byKey.set(keyId, e);
    }
    const r = collOps.rank.get(i);
    if (r >= 0) e.part[r] = 1;
    const t = collOps.target.get(i);
    if (t >= 0 && collOps.wait.get(i) === 1) e.targets.push(t);
  }
  const out: CollectiveInProgress[] = [];
  for (const [keyId, e] of byKey) {
    const ranks: number[] = [];
    for (let i = 0; i < ix.n; i++) if (e.part[i] === 1) ranks.push(at(ix.rankOf, i));
    const late = new Set<number>();
    for (const t of e.targets) if (e.part[t] === 0) late.add(t);
    // A late rank blocked in p2p on a participant closes a cycle through the collective.
    const lateWaitOn = new Set<number>();
    for (const l of late) {
      const end = at(byRank.start, l + 1);
      for (let p = at(byRank.start, l); p < end; p++) {
        const k = at(byRank.items, p);
        const t = at(cTarget, k);
        if (cKind[k] === KIND_SINGLE && e.part[t] === 1) lateWaitOn.add(at(ix.rankOf, t));
      }
    }
    const rep = ix.comms.find((c) => c.keyId === keyId);
    out.push({
      commKey: ix.keys[keyId] ?? '',
      commName: rep?.comm.name ?? '',
      commSize: rep?.comm.size ?? 0,
      ranks,
      waitingFor: [...late].map((i) => at(ix.rankOf, i)).sort((a, b) => a - b),
      lateWaitOn: [...lateWaitOn].sort((a, b) => a - b),
    });
  }
  // Code-unit order, not locale order: the same on every machine.
  return out.sort(
    (a, b) => b.ranks.length - a.ranks.length || (a.commKey < b.commKey ? -1 : a.commKey > b.commKey ? 1 : 0),
  );
}
