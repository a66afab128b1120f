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
//
// This file builds the graph (buildWaitGraph); wait-solve.ts solves it (analyzeWaits, cycles,
// collectives); wait-types.ts holds the shapes both use.

import { LIBRARY_FACTS } from '../mpi/library.js';
import { isWorldLike, PEER_ANY, PEER_UNKNOWN, peerGlobalRank } from '../mpi/world.js';
import type { MpiLibrary, QueueKind } from '../snapshot-spec.js';
import {
  CALL_BLOCKED,
  CALL_COMPUTING,
  CALL_NO_STACKS,
  CALL_POLLING,
  type CallFacts,
  callFacts,
  commMembers,
  isGoneCode,
} from './call-facts.js';
import { isCollectiveInternal } from './comm.js';
import { at, csr, IntVec } from './csr.js';
import { type CommEntry, QUEUE_CODE, type SnapshotIndex } from './snapshot-index.js';
import {
  DEAD_FINAL,
  DEAD_GONE,
  EV_ANY,
  EV_CALL,
  EV_COLLECTIVE,
  EV_INFERRED,
  EV_RECV,
  EV_RECV_IN_CALL,
  EV_SEND,
  EV_SEND_IN_CALL,
  KIND_GROUP,
  KIND_SINGLE,
  MAX_COLLECTIVE_CLAUSES,
  type WaitGraph,
} from './wait-types.js';

export { isGoneCode } from './call-facts.js';
export { analyzeWaits, collectives, edgeCell, type RankWait, rankWaits } from './wait-solve.js';
export {
  type CollectiveInProgress,
  type DeadEndWait,
  type DeadlockCycle,
  type EdgeEvidence,
  KIND_SINGLE,
  type WaitAnalysis,
  type WaitEdge,
  type WaitEdgeOp,
  type WaitGraph,
  type WaitOptions,
} from './wait-types.js';

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
  let outside = 0;
  const outsideRanks = new Set<number>();
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
  const dead = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const st = ix.snap.ranks[i]?.state;
    if (st !== undefined && st.kind !== 'ok' && isGoneCode(st.code)) dead[i] = DEAD_GONE;
  }

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
      if (kind === 'final') {
        // Whatever MPI_Finalize waits for inside, this rank's own sends and receives are over.
        fromStacks[i] = 1;
        dead[i] = DEAD_FINAL;
        continue;
      }
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
          // A rank of the world the snapshot does not hold is known, not unresolved.
          const world = ix.peerRank(op.peer, ce);
          if (world >= 0) {
            outside++;
            outsideRanks.add(world);
          } else unresolved++;
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
    outsideWaits: outside,
    outsideRanks: [...outsideRanks].sort((a, b) => a - b),
    calls,
    dead,
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
 * (null, or one that omits blocking sends: LIBRARY_FACTS), S may still be blocked in it (synchronous
 * or rendezvous), so S waits for R. A send S's queue does show gives a direct edge instead.
 */
function senderMayBeBlocked(
  ix: SnapshotIndex,
  sender: number,
  at: CommEntry,
  tag: number | null,
  library: MpiLibrary,
): boolean {
  const sc = ix.findComm(sender, at.keyId);
  if (sc === undefined || sc.comm.sends === null) return true;
  if (!LIBRARY_FACTS[library].sendQueueOmitsBlockingSends) return false;
  for (const op of sc.comm.sends) {
    if (op.status === 'pending' && op.tag === tag && ix.peerIdx(op.peer, sc) === at.rankIdx) return false;
  }
  return true;
}
