// The wait-for graph of one snapshot and the deadlocks in it.
//
// Model (AND-OR): every pending blocking-relevant operation of a rank is a clause the rank
// needs satisfied before it can go on; the rank's clauses are AND-ed (we cannot tell Waitall
// from Waitany, and AND is what a blocking call sequence means). A clause is satisfied when
// one of its members can proceed: a send's member is its receiver, a receive's its sender, a
// wildcard receive's every other member of its communicator (OR). Collective-internal
// traffic (negative tags, the library's own communicators) is not a p2p wait: it is reported
// as a collective in progress. Ranks whose queues were not read are unknowns and are assumed
// able to proceed, so a deadlock reported here holds whatever those ranks are doing.
//
// Scale: 16,384 ranks with a few clauses each. Clauses live in flat arrays with CSR indexes
// (Int32Array); a wildcard over a communicator is one clause on a group, never one edge per
// member, so a world of ANY_SOURCE receives stays linear.

import { isWorldLike, PEER_ANY, PEER_UNKNOWN, peerGlobalRank } from '../mpi/world.js';
import type { QueueKind } from '../snapshot-spec.js';
import {
  CALL_BLOCKED,
  CALL_COMPUTING,
  CALL_NO_STACKS,
  CALL_POLLING,
  type CallFacts,
  callFacts,
  commMembers,
} from './call-facts.js';
import { isCollectiveInternal, type OpRef } from './comm.js';
import { at, type Csr, csr, IntVec } from './csr.js';
import { type CommEntry, QUEUE_CODE, QUEUE_OF_CODE, type SnapshotIndex } from './snapshot-index.js';

/**
 * Why an edge exists: the waiting rank's own operation, an unexpected message at the target,
 * or (from the stacks) the blocking call the rank is in: its arguments name the peer (`call`),
 * it is in a collective the target has not entered (`collective-call`), or it is in a blocking
 * send whose queue entry the library already shows as done (`send-in-call`, Open MPI's
 * eager-synchronous MPI_Ssend: the data left, the acknowledgement never came).
 */
export type EdgeEvidence =
  | 'send'
  | 'receive'
  | 'wildcard-receive'
  | 'inferred-from-unexpected'
  | 'call'
  | 'collective-call'
  | 'send-in-call'
  | 'receive-in-call';
const EVIDENCE: readonly EdgeEvidence[] = [
  'send',
  'receive',
  'wildcard-receive',
  'inferred-from-unexpected',
  'call',
  'collective-call',
  'send-in-call',
  'receive-in-call',
];
const EV_SEND = 0;
const EV_RECV = 1;
const EV_ANY = 2;
const EV_INFERRED = 3;
const EV_CALL = 4;
const EV_COLLECTIVE = 5;
const EV_SEND_IN_CALL = 6;
const EV_RECV_IN_CALL = 7;
/** Evidence that rests on inference, not on a pending operation or a call's own arguments. */
const INFERRED_EVIDENCE: ReadonlySet<EdgeEvidence> = new Set([
  'inferred-from-unexpected',
  'send-in-call',
  'receive-in-call',
]);

/** A collective waiter gets clauses on at most this many absent members (keeps it linear). */
const MAX_COLLECTIVE_CLAUSES = 16;

export interface WaitEdgeOp extends OpRef {
  readonly evidence: EdgeEvidence;
  readonly tag: number | null;
  /** For edges from the stacks: the MPI call the waiting rank is in (index is -1 when no queue entry backs it). */
  readonly call?: string;
}

/** `from` cannot proceed until `to` does something; `ops` are the queue entries that say so. */
export interface WaitEdge {
  readonly from: number;
  readonly to: number;
  readonly ops: WaitEdgeOp[];
  /** Every op is an inference (an unexpected message whose sender's send queue is invisible). */
  readonly inferred: boolean;
}

export interface DeadlockCycle {
  /** World ranks in wait order: ranks[i] waits for ranks[i+1], the last for the first. */
  readonly ranks: number[];
  readonly edges: WaitEdge[];
  /** Ranks in the strongly connected set this cycle was taken from (other cycles may run through it). */
  readonly componentSize: number;
  /** No edge of the cycle rests on inference alone. */
  readonly certain: boolean;
}

export interface CollectiveInProgress {
  readonly commKey: string;
  readonly commName: string;
  readonly commSize: number;
  /** World ranks with collective-internal traffic on this communicator. */
  readonly ranks: number[];
  /** Ranks others wait for inside the collective that show no collective traffic themselves: likely late. */
  readonly waitingFor: number[];
  /**
   * Participants that those late ranks wait for in p2p: a cycle through the collective (the
   * late rank waits for a participant, which waits inside the collective for the late rank).
   */
  readonly lateWaitOn: number[];
}

export interface WaitAnalysis {
  readonly rankCount: number;
  /** World ranks whose queues were not read (state not ok): unknowns, assumed able to proceed. */
  readonly unknownRanks: number[];
  /** Ranks with at least one pending p2p wait. */
  readonly waitingRanks: number;
  /** Number of p2p wait clauses (an edge, or a wildcard over a communicator). */
  readonly clauses: number;
  readonly inferredClauses: number;
  /** Pending p2p operations whose peer cannot be resolved (counted as able to proceed). */
  readonly unresolvedWaits: number;
  /** World ranks that can never proceed. */
  readonly deadlocked: number[];
  readonly cycles: DeadlockCycle[];
  /** Cycles found before the output limit cut the list. */
  readonly cycleTotal: number;
  /** Deadlocked ranks in no cycle: they wait on ranks that are (or on nobody at all). */
  readonly blockedBehind: number[];
  /** Ranks that can proceed only if the unknown ranks can: deadlocked if those are blocked too. */
  readonly dependsOnUnknown: number[];
  /** Ranks that waiting ranks wait for directly but that are not blocked themselves. */
  readonly waitingOnFree: number[];
  readonly collectives: CollectiveInProgress[];
  /** Ranks whose stacks put them in no MPI call, or in one that returns by itself: they can proceed. */
  readonly computing: number[];
}

export interface WaitOptions {
  /** At most this many cycles in the result (default 100); cycleTotal still counts all. */
  readonly maxCycles?: number;
}

export const KIND_SINGLE = 0;
const KIND_GROUP = 1;

/** Clauses and collective traffic of one snapshot, before any solving. */
export interface WaitGraph {
  readonly ix: SnapshotIndex;
  readonly clauseCount: number;
  /** Per clause: waiting rank position, kind, target position or group id, and the op that justifies it. */
  readonly cRank: Int32Array;
  readonly cKind: Uint8Array;
  readonly cTarget: Int32Array;
  readonly cComm: Int32Array;
  readonly cQueue: Uint8Array;
  readonly cIndex: Int32Array;
  readonly cEvidence: Uint8Array;
  /** Clauses of each rank position. */
  readonly byRank: Csr;
  /** Wildcard groups: the communicator key of each, its members, and whether an unknown rank may be one. */
  readonly groupKey: Int32Array;
  readonly groupMembers: Csr;
  readonly groupUnknownMember: Uint8Array;
  /** Groups each rank position belongs to (inverse of groupMembers). */
  readonly groupsOf: Csr;
  readonly unresolvedWaits: number;
  /** The stacks' facts (mpiCall per rank). */
  readonly calls: CallFacts;
  /** Collective-internal operations: communicator key, rank, target, and 1 for a wait (0 for an arrival). */
  readonly collOps: {
    readonly keyId: IntVec;
    readonly rank: IntVec;
    readonly target: IntVec;
    readonly wait: IntVec;
  };
}

export function buildWaitGraph(ix: SnapshotIndex): WaitGraph {
  const { n, ok, comms } = ix;
  const library = ix.snap.mpi.library;
  const cRank = new IntVec();
  const cKind = new IntVec();
  const cTarget = new IntVec();
  const cComm = new IntVec();
  const cQueue = new IntVec();
  const cIndex = new IntVec();
  const cEvidence = new IntVec();
  const groupOfKey = new Map<number, number>();
  const groupKeys = new IntVec();
  const groupRepComm = new IntVec();
  const collOps = { keyId: new IntVec(), rank: new IntVec(), target: new IntVec(), wait: new IntVec() };
  let unresolved = 0;
  const calls = callFacts(ix);
  // Ranks whose wait the stacks decide: computing or polling ranks wait for nothing, and a
  // blocking call whose peer (or collective) is known replaces what the queues suggest.
  const fromStacks = new Uint8Array(n);
  // The peer a blocking p2p call's arguments name (a rank position, or a wildcard group): the
  // queue entry for the same wait is kept as the evidence (it names the operation); the call
  // itself becomes the evidence only where no pending entry shows that wait.
  const callKind = new Uint8Array(n);
  const callTarget = new Int32Array(n);
  const callComm = new Int32Array(n);
  const callQueue = new Uint8Array(n);
  const covered = new Uint8Array(n);

  const add = (
    rank: number,
    kind: number,
    target: number,
    commIdx: number,
    q: QueueKind,
    i: number,
    ev: number,
  ) => {
    cRank.push(rank);
    cKind.push(kind);
    cTarget.push(target);
    cComm.push(commIdx);
    cQueue.push(QUEUE_CODE[q]);
    cIndex.push(i);
    cEvidence.push(ev);
  };

  const groupFor = (ce: CommEntry, ci: number): number => {
    let g = groupOfKey.get(ce.keyId);
    if (g === undefined) {
      g = groupKeys.length;
      groupOfKey.set(ce.keyId, g);
      groupKeys.push(ce.keyId);
      groupRepComm.push(ci);
    }
    return g;
  };

  if (calls.any) {
    const inCollective = collectiveSets(ix, calls);
    for (let i = 0; i < n; i++) {
      const st = calls.state[i] ?? CALL_NO_STACKS;
      if (st === CALL_COMPUTING || st === CALL_POLLING) {
        fromStacks[i] = 1;
        continue;
      }
      if (st !== CALL_BLOCKED || ok[i] === 0) continue;
      const kind = calls.kind[i];
      const ci = at(calls.commIdx, i);
      const ce = comms[ci];
      if (kind === 'collective') {
        const keyId = at(calls.keyId, i);
        const set = inCollective.get(keyId);
        if (set === undefined || ce === undefined) continue;
        fromStacks[i] = 1;
        // Waits for the members that are not in the same collective (AND; the first few).
        for (const m of set.absent(calls.fn[i] ?? '')) {
          if (m !== i) add(i, KIND_SINGLE, m, ci, 'receives', -1, EV_COLLECTIVE);
        }
        continue;
      }
      if (kind !== 'send' && kind !== 'receive') continue;
      const args = ix.snap.ranks[i]?.mpiCall?.args ?? null;
      if (args === null || args.peer === null) continue;
      const q: QueueKind = kind === 'send' ? 'sends' : 'receives';
      if (args.peer.local === null && args.peer.global === null) {
        if (kind !== 'receive' || ce === undefined) continue;
        fromStacks[i] = 1;
        callKind[i] = 1 + KIND_GROUP;
        callTarget[i] = groupFor(ce, ci);
        callComm[i] = ci;
        callQueue[i] = q === 'sends' ? 0 : 1;
        continue;
      }
      const rank = ix.snap.ranks[i];
      const world =
        ce !== undefined
          ? peerGlobalRank(args.peer, ce.comm, ce.rank, ix.worldSize)
          : args.peer.global !== null && args.peer.global >= 0
            ? args.peer.global
            : null;
      const target = world === null ? -1 : ix.idxOf(world);
      if (target < 0 || rank === undefined) continue;
      fromStacks[i] = 1;
      callKind[i] = 1 + KIND_SINGLE;
      callTarget[i] = target;
      callComm[i] = ci;
      callQueue[i] = q === 'sends' ? 0 : 1;
    }
  }

  for (let ci = 0; ci < comms.length; ci++) {
    const ce = comms[ci];
    if (ce === undefined || ok[ce.rankIdx] === 0) continue;
    const c = ce.comm;
    const decided = fromStacks[ce.rankIdx] === 1;
    for (const q of ['sends', 'receives'] as const) {
      const queue = c[q];
      if (queue === null) continue;
      for (let i = 0; i < queue.length; i++) {
        const op = queue[i];
        if (op === undefined || op.status !== 'pending') continue;
        const peer = ix.peerIdx(op.peer, ce);
        if (decided) {
          // Only the entry of the wait the call shows (same peer, or the same wildcard group).
          const ck = at(callKind, ce.rankIdx);
          if (ck === 0 || isCollectiveInternal(op, ce.internal)) continue;
          const t = at(callTarget, ce.rankIdx);
          if (ck === 1 + KIND_SINGLE && peer === t) {
            add(ce.rankIdx, KIND_SINGLE, peer, ci, q, i, q === 'sends' ? EV_SEND : EV_RECV);
            covered[ce.rankIdx] = 1;
          } else if (
            ck === 1 + KIND_GROUP &&
            peer === PEER_ANY &&
            q === 'receives' &&
            groupFor(ce, ci) === t
          ) {
            add(ce.rankIdx, KIND_GROUP, t, ci, q, i, EV_ANY);
            covered[ce.rankIdx] = 1;
          }
          continue;
        }
        if (isCollectiveInternal(op, ce.internal)) {
          collOps.keyId.push(ce.keyId);
          collOps.rank.push(ce.rankIdx);
          collOps.target.push(peer);
          collOps.wait.push(1);
          continue;
        }
        if (peer === PEER_ANY && q === 'receives') {
          add(ce.rankIdx, KIND_GROUP, groupFor(ce, ci), ci, q, i, EV_ANY);
        } else if (peer < 0) {
          unresolved++;
        } else {
          add(ce.rankIdx, KIND_SINGLE, peer, ci, q, i, q === 'sends' ? EV_SEND : EV_RECV);
        }
      }
    }
    const unexpected = c.unexpected;
    if (unexpected === null) continue;
    for (let i = 0; i < unexpected.length; i++) {
      const op = unexpected[i];
      if (op === undefined) continue;
      const sender = ix.peerIdx(op.peer, ce);
      if (isCollectiveInternal(op, ce.internal)) {
        // Collective traffic that arrived: evidence its sender takes part, not a wait.
        collOps.keyId.push(ce.keyId);
        collOps.rank.push(sender);
        collOps.target.push(PEER_UNKNOWN);
        collOps.wait.push(0);
        continue;
      }
      // Not filtered on status: an unexpected message is unmatched by definition, and its data
      // having arrived ("complete", as MPICH reports it) does not free a synchronous sender,
      // which waits for the match (MPI_Ssend's eager-sync message is exactly this).
      if (sender < 0 || ok[sender] === 0 || fromStacks[sender] === 1) continue;
      if (senderMayBeBlocked(ix, sender, ce, op.tag, library)) {
        add(sender, KIND_SINGLE, ce.rankIdx, ci, 'unexpected', i, EV_INFERRED);
      }
    }
  }

  for (let i = 0; i < n; i++) {
    const ck = at(callKind, i);
    if (ck === 0 || covered[i] === 1) continue;
    const q: QueueKind = callQueue[i] === 0 ? 'sends' : 'receives';
    add(i, ck - 1, at(callTarget, i), at(callComm, i), q, -1, EV_CALL);
  }

  // A rank the stacks show blocked in a send or a receive whose queues show nothing pending:
  // its last operation of that kind that the library lists as matched or complete is the one
  // it is in. Open MPI reports an eager-synchronous MPI_Ssend complete while the sender waits
  // for the acknowledgement, and (with MPI_THREAD_MULTIPLE) a receive posted by another thread
  // as complete while that thread still waits in MPI_Recv for a message nobody sends.
  if (calls.any) {
    const pendingClauses = new Int32Array(n);
    for (let k = 0; k < cRank.length; k++) {
      const r = cRank.get(k);
      pendingClauses[r] = at(pendingClauses, r) + 1;
    }
    for (let i = 0; i < n; i++) {
      const kind = calls.kind[i];
      if (calls.state[i] !== CALL_BLOCKED || (kind !== 'send' && kind !== 'receive') || fromStacks[i] === 1)
        continue;
      if (ok[i] === 0 || at(pendingClauses, i) > 0) continue;
      const q = kind === 'send' ? 'sends' : 'receives';
      let best: { ci: number; index: number; peer: number } | null = null;
      const end = at(ix.commStart, i + 1);
      for (let ci = at(ix.commStart, i); ci < end; ci++) {
        const ce = comms[ci];
        const ops = ce?.comm[q];
        if (ce === undefined || ce.internal || ops === null || ops === undefined) continue;
        if (calls.commIdx[i] !== -1 && calls.commIdx[i] !== ci) continue;
        for (let j = 0; j < ops.length; j++) {
          const op = ops[j];
          if (op === undefined || op.status === 'pending' || isCollectiveInternal(op, ce.internal)) continue;
          const peer = ix.peerIdx(op.peer, ce);
          if (peer >= 0 || (peer === PEER_ANY && q === 'receives')) best = { ci, index: j, peer };
        }
      }
      if (best === null) continue;
      const bc = comms[best.ci];
      if (q === 'sends') add(i, KIND_SINGLE, best.peer, best.ci, q, best.index, EV_SEND_IN_CALL);
      else if (best.peer === PEER_ANY && bc !== undefined) {
        add(i, KIND_GROUP, groupFor(bc, best.ci), best.ci, q, best.index, EV_RECV_IN_CALL);
      } else add(i, KIND_SINGLE, best.peer, best.ci, q, best.index, EV_RECV_IN_CALL);
    }
  }

  const clauseCount = cRank.length;
  const rankIdxs = new IntVec();
  for (let k = 0; k < clauseCount; k++) rankIdxs.push(k);
  const byRank = csr(n, cRank, rankIdxs);

  // Wildcard group membership, only for communicators that have a wildcard wait.
  const nGroups = groupKeys.length;
  const memberKeys = new IntVec();
  const memberVals = new IntVec();
  const groupUnknownMember = new Uint8Array(nGroups);
  const anyUnknownRank = ok.includes(0);
  const listingGroups: number[] = [];
  for (let g = 0; g < nGroups; g++) {
    const rep = comms[groupRepComm.get(g)];
    if (rep === undefined) continue;
    const c = rep.comm;
    if (isWorldLike(c, ix.worldSize)) {
      for (let i = 0; i < n; i++) {
        memberKeys.push(g);
        memberVals.push(i);
      }
      if (c.size > n) groupUnknownMember[g] = 1;
    } else if (c.group !== null) {
      for (const world of c.group) {
        const idx = ix.idxOf(world);
        if (idx < 0) groupUnknownMember[g] = 1;
        else {
          memberKeys.push(g);
          memberVals.push(idx);
        }
      }
    } else {
      listingGroups.push(g);
      if (anyUnknownRank) groupUnknownMember[g] = 1;
    }
  }
  if (listingGroups.length > 0) {
    // Without a group, the members are the ranks that list the communicator.
    const want = new Map<number, number>();
    for (const g of listingGroups) want.set(groupKeys.get(g), g);
    const seen = new Int32Array(n).fill(-1);
    const counts = new Int32Array(nGroups);
    for (const ce of comms) {
      const g = want.get(ce.keyId);
      if (g === undefined || seen[ce.rankIdx] === g) continue;
      seen[ce.rankIdx] = g;
      counts[g] = at(counts, g) + 1;
      memberKeys.push(g);
      memberVals.push(ce.rankIdx);
    }
    for (const g of listingGroups) {
      const rep = comms[groupRepComm.get(g)];
      if (rep && at(counts, g) < rep.comm.size) groupUnknownMember[g] = 1;
    }
  }
  const groupMembers = csr(nGroups, memberKeys, memberVals);
  const groupsOf = csr(n, memberVals, memberKeys);

  return {
    ix,
    clauseCount,
    cRank: cRank.data.slice(0, clauseCount),
    cKind: Uint8Array.from(cKind.data.subarray(0, clauseCount)),
    cTarget: cTarget.data.slice(0, clauseCount),
    cComm: cComm.data.slice(0, clauseCount),
    cQueue: Uint8Array.from(cQueue.data.subarray(0, clauseCount)),
    cIndex: cIndex.data.slice(0, clauseCount),
    cEvidence: Uint8Array.from(cEvidence.data.subarray(0, clauseCount)),
    byRank,
    groupKey: groupKeys.data.slice(0, nGroups),
    groupMembers,
    groupUnknownMember,
    groupsOf,
    unresolvedWaits: unresolved,
    calls,
    collOps,
  };
}

interface CollectiveSet {
  /** The first MAX_COLLECTIVE_CLAUSES members not in collective `fn` on this communicator (one scan per call name). */
  absent(fn: string): readonly number[];
}

/** Per communicator key that some rank is in a collective on: its members and who is in which call. */
function collectiveSets(ix: SnapshotIndex, calls: CallFacts): Map<number, CollectiveSet> {
  const out = new Map<number, CollectiveSet>();
  for (let i = 0; i < ix.n; i++) {
    if (calls.state[i] !== CALL_BLOCKED || calls.kind[i] !== 'collective') continue;
    const keyId = at(calls.keyId, i);
    if (keyId < 0 || out.has(keyId)) continue;
    const members = commMembers(ix, keyId);
    const byFn = new Map<string, number[]>();
    out.set(keyId, {
      absent: (fn) => {
        let list = byFn.get(fn);
        if (list === undefined) {
          list = [];
          for (let p = 0; p < members.length && list.length < MAX_COLLECTIVE_CLAUSES; p++) {
            const m = at(members, p);
            const same =
              calls.keyId[m] === keyId &&
              calls.kind[m] === 'collective' &&
              calls.state[m] === CALL_BLOCKED &&
              calls.fn[m] === fn;
            if (!same) list.push(m);
          }
          byFn.set(fn, list);
        }
        return list;
      },
    });
  }
  return out;
}

/**
 * An unexpected message at R from S says S sent; if S's send queue cannot show that send
 * (null, or MPICH's, which omits blocking sends), S may still be blocked in it (synchronous
 * or rendezvous), so S waits for R. A send S's queue does show gives a direct edge instead.
 */
function senderMayBeBlocked(
  ix: SnapshotIndex,
  sender: number,
  at: CommEntry,
  tag: number | null,
  library: string,
): boolean {
  const sc = ix.findComm(sender, at.keyId);
  if (sc === undefined || sc.comm.sends === null) return true;
  if (library !== 'mpich') return false;
  for (const op of sc.comm.sends) {
    if (op.status === 'pending' && op.tag === tag && ix.peerIdx(op.peer, sc) === at.rankIdx) return false;
  }
  return true;
}

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

  const deadlocked: number[] = [];
  for (let i = 0; i < n; i++) if (released[i] === 0) deadlocked.push(i);

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
    deadlocked: toRanks(deadlocked),
    cycles,
    cycleTotal,
    blockedBehind: toRanks(deadlocked.filter((i) => inCycleComponent[i] !== 1)),
    dependsOnUnknown,
    waitingOnFree: toRanks(indicesOf(waitingOnFree)),
    collectives: collectives(g),
    computing: toRanks(indicesWhere(g.calls.state, (s) => s === CALL_COMPUTING || s === CALL_POLLING)),
  };
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
