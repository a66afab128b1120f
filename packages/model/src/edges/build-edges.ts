// Fills the matrix's edge table (edge-table.ts) from a snapshot: one walk over every queue. The
// dashboard builds it for a snapshot it holds; the server builds it once per stored snapshot for
// its overview (overview.ts), which the dashboard draws before the whole snapshot has arrived.
import { commKey } from '../analysis/comm.js';
import { compressRanks } from '../analysis/ranges.js';
import { isWildcardPeer, peerGlobalRank, worldSizeOf } from '../mpi/world.js';
import { type Communicator, type JobSnapshot, type Operation, opLengthUnit } from '../snapshot-spec.js';
import {
  ANY_PEER,
  type CommSummary,
  type EdgeTable,
  KIND_COUNT,
  KIND_RECEIVES,
  KIND_SENDS,
  KIND_UNEXPECTED,
  type KindUnit,
  matrixCommKey,
} from './edge-table.js';

/** A communicator as people read it: its name, or its id and size when it has none. */
export function commLabel(comm: Communicator): string {
  return comm.name !== '' ? comm.name : `(unnamed ${comm.id}, size ${comm.size})`;
}
interface CommAcc {
  key: string;
  label: string;
  ops: number;
  name: string;
  size: number;
  group: readonly number[] | null;
  /** World ranks of the processes that reported it (the members when there is no group). */
  seen: number[];
  family: boolean;
}

export function buildEdges(snapshot: JobSnapshot): EdgeTable {
  let n = 0;
  for (const r of snapshot.ranks) {
    for (const c of r.communicators)
      n += (c.sends?.length ?? 0) + (c.receives?.length ?? 0) + (c.unexpected?.length ?? 0);
  }
  const src = new Int32Array(n);
  const dst = new Int32Array(n);
  const kind = new Uint8Array(n);
  const size = new Float64Array(n);
  const tag = new Int32Array(n);
  const tagAny = new Uint8Array(n);
  const comm = new Uint32Array(n);
  const peerUnknown = new Uint8Array(n);
  const owner = new Int32Array(n);
  const commPos = new Uint32Array(n);
  const opPos = new Uint32Array(n);
  const commIndex = new Map<string, number>();
  const accs: CommAcc[] = [];
  const worldSize = worldSizeOf(snapshot);
  // MPI_ANY_SOURCE and an unresolvable peer share the strip (ANY_PEER); peerUnknown keeps them apart.
  const peer = (op: Operation, c: Communicator, self: number) =>
    isWildcardPeer(op.peer) ? ANY_PEER : (peerGlobalRank(op.peer, c, self, worldSize) ?? ANY_PEER);

  const kindUnit: KindUnit[] = Array.from({ length: KIND_COUNT }, () => null);
  let e = 0;
  const put = (
    op: Operation,
    k: number,
    s: number,
    d: number,
    ci: number,
    ri: number,
    cp: number,
    qp: number,
  ) => {
    src[e] = s;
    dst[e] = d;
    kind[e] = k;
    size[e] = op.length;
    const unit = opLengthUnit(op, snapshot.mpi.lengthUnit);
    const was = kindUnit[k] ?? null;
    if (was !== unit) kindUnit[k] = was === null ? unit : 'mixed';
    if (op.tag === null) tagAny[e] = 1;
    else tag[e] = op.tag;
    comm[e] = ci;
    if ((s === ANY_PEER || d === ANY_PEER) && !isWildcardPeer(op.peer)) peerUnknown[e] = 1;
    owner[e] = ri;
    commPos[e] = cp;
    opPos[e] = qp;
    e++;
  };
  snapshot.ranks.forEach((r, ri) => {
    r.communicators.forEach((c, cp) => {
      const own = commKey(c);
      const key = matrixCommKey(own);
      let ci = commIndex.get(key);
      if (ci === undefined) {
        ci = accs.length;
        commIndex.set(key, ci);
        accs.push({
          key,
          label: commLabel(c),
          ops: 0,
          name: c.name,
          size: c.size,
          group: c.group,
          seen: [],
          family: key !== own,
        });
      }
      const summary = accs[ci];
      summary?.seen.push(r.rank);
      const before = e;
      c.sends?.forEach((op, qp) => {
        put(op, KIND_SENDS, r.rank, peer(op, c, r.rank), ci, ri, cp, qp);
      });
      c.receives?.forEach((op, qp) => {
        put(op, KIND_RECEIVES, peer(op, c, r.rank), r.rank, ci, ri, cp, qp);
      });
      c.unexpected?.forEach((op, qp) => {
        put(op, KIND_UNEXPECTED, peer(op, c, r.rank), r.rank, ci, ri, cp, qp);
      });
      if (summary) summary.ops += e - before;
    });
  });
  accs.sort((a, b) => b.ops - a.ops || a.label.localeCompare(b.label));
  const comms = accs.map(
    (a): CommSummary => ({
      memberCount: a.key.endsWith('#world')
        ? a.size
        : (!a.family && a.group !== null ? a.group : a.seen).length,
      key: a.key,
      label: a.label,
      ops: a.ops,
      name: a.name,
      size: a.size,
      // MPI_COMM_WORLD is every rank by definition, read or not.
      members: a.key.endsWith('#world')
        ? a.size <= 1
          ? '0'
          : `0-${a.size - 1}`
        : compressRanks(!a.family && a.group !== null ? a.group : a.seen),
    }),
  );
  // Re-number after sorting so index 0 is the busiest communicator.
  const remap = new Uint32Array(comms.length);
  comms.forEach((c, i) => {
    remap[commIndex.get(c.key) ?? 0] = i;
  });
  for (let i = 0; i < n; i++) comm[i] = remap[comm[i] ?? 0] ?? 0;
  return {
    worldSize,
    length: n,
    src,
    dst,
    kind,
    size,
    tag,
    tagAny,
    comm,
    peerUnknown,
    owner,
    commPos,
    opPos,
    comms,
    kindUnit,
  };
}

/**
 * Fills `t`'s position columns (owner, commPos, opPos) from `snapshot`, in buildEdges' order
 * (ranks, their communicators, then sends, receives, unexpected): for a table that came without
 * them (a decoded overview, whose snapshot arrived since). False, with nothing written past the
 * table, when the snapshot does not hold exactly `t.length` operations: not its snapshot.
 */
export function fillEdgePositions(snapshot: JobSnapshot, t: EdgeTable): boolean {
  let e = 0;
  for (let ri = 0; ri < snapshot.ranks.length; ri++) {
    const comms = snapshot.ranks[ri]?.communicators ?? [];
    for (let cp = 0; cp < comms.length; cp++) {
      const c = comms[cp];
      for (const q of [c?.sends, c?.receives, c?.unexpected]) {
        for (let qp = 0; qp < (q?.length ?? 0); qp++) {
          if (e >= t.length) return false;
          t.owner[e] = ri;
          t.commPos[e] = cp;
          t.opPos[e] = qp;
          e++;
        }
      }
    }
  }
  return e === t.length;
}
