// Progress between snapshots of one job. One snapshot cannot tell a hang from a slow job;
// two can: if nothing in any queue moved, the job is stuck. Which operation of the later
// snapshot is which of the earlier one is mpi/operation.ts's rule (opIdentity, pairOperations),
// the same one the timeline's history walk and the server's hung digest use.
import { type KeyedOp, type OpChange, opKeys, pairOperations } from '../mpi/operation.js';
import { type JobSnapshot, type Operation, QUEUE_KINDS, type RankSnapshot } from '../snapshot-spec.js';
import { commKey, type OpRef } from './comm.js';

export type ProgressVerdict = 'progressing' | 'stuck' | 'idle';

export interface ProgressExample {
  readonly change: OpChange;
  /** Where the operation is: the later snapshot, or the earlier one for a disappeared operation. */
  readonly op: OpRef;
  readonly tag: number | null;
  readonly peer: number | null;
  readonly statusBefore: Operation['status'] | null;
  readonly statusAfter: Operation['status'] | null;
}

export interface ProgressStep {
  readonly from: string;
  readonly to: string;
  /** idle: nothing pending in either; stuck: something pending and nothing moved; else progressing. */
  readonly verdict: ProgressVerdict;
  readonly counts: Readonly<Record<OpChange, number>> & {
    readonly pendingBefore: number;
    readonly pendingAfter: number;
  };
  /** A few operations of each change (at most `maxExamples` per kind). */
  readonly examples: ProgressExample[];
  /** Ranks with pending operations in the later snapshot on which nothing moved. */
  readonly stuckRanks: number[];
  /** Ranks on which something moved. */
  readonly movedRanks: number;
  /** Ranks not read (state not ok) in one of the two snapshots: not compared. */
  readonly skippedRanks: number[];
}

export interface ProgressOptions {
  readonly maxExamples?: number;
}

const QUEUES = QUEUE_KINDS;

interface Seen extends KeyedOp {
  readonly ref: OpRef;
  readonly op: Operation;
}

/** A read rank's operations in queue order, each with its keys and where it is. */
function rankOps(r: RankSnapshot): Seen[] {
  const out: Seen[] = [];
  for (const c of r.communicators) {
    const key = commKey(c);
    for (const queue of QUEUES) {
      const q = c[queue];
      if (q === null) continue;
      for (let index = 0; index < q.length; index++) {
        const op = q[index];
        if (op === undefined) continue;
        const k = opKeys(r.rank, c.id, queue, op);
        out.push({
          identity: k.identity,
          progress: k.progress,
          ref: { rank: r.rank, commKey: key, commName: c.name, queue, index },
          op,
        });
      }
    }
  }
  return out;
}

export function compareSnapshots(a: JobSnapshot, b: JobSnapshot, opts: ProgressOptions = {}): ProgressStep {
  const maxExamples = opts.maxExamples ?? 5;
  const before = new Map<number, RankSnapshot>();
  for (const r of a.ranks) before.set(r.rank, r);
  const counts = { unchanged: 0, changed: 0, appeared: 0, disappeared: 0, pendingBefore: 0, pendingAfter: 0 };
  const examples: ProgressExample[] = [];
  const perKind: Record<OpChange, number> = { unchanged: 0, changed: 0, appeared: 0, disappeared: 0 };
  const example = (
    change: OpChange,
    ref: OpRef,
    op: Operation,
    sb: Operation['status'] | null,
    sa: Operation['status'] | null,
  ) => {
    counts[change]++;
    if (perKind[change]++ >= maxExamples) return;
    examples.push({ change, op: ref, tag: op.tag, peer: op.peer.global, statusBefore: sb, statusAfter: sa });
  };
  const skipped = new Set<number>();
  const stuckRanks: number[] = [];
  let movedRanks = 0;
  const compared = new Set<number>();

  for (const rb of b.ranks) {
    const ra = before.get(rb.rank);
    if (ra === undefined || ra.state.kind !== 'ok' || rb.state.kind !== 'ok') {
      skipped.add(rb.rank);
      continue;
    }
    compared.add(rb.rank);
    const old = rankOps(ra);
    const cur = rankOps(rb);
    for (const s of old) if (s.op.status === 'pending') counts.pendingBefore++;
    let moved = false;
    let pendingHere = false;
    const pairs = pairOperations(old, cur);
    cur.forEach((s, j) => {
      if (s.op.status === 'pending') {
        counts.pendingAfter++;
        pendingHere = true;
      }
      const change = pairs.change[j] ?? 'appeared';
      const was = old[pairs.earlier[j] ?? -1]?.op.status ?? null;
      if (change !== 'unchanged') moved = true;
      example(change, s.ref, s.op, was, s.op.status);
    });
    for (const i of pairs.gone) {
      const s = old[i];
      if (s === undefined) continue;
      moved = true;
      example('disappeared', s.ref, s.op, s.op.status, null);
    }
    if (moved) movedRanks++;
    else if (pendingHere) stuckRanks.push(rb.rank);
  }
  for (const ra of a.ranks) if (!compared.has(ra.rank)) skipped.add(ra.rank);

  const anyMoved = counts.changed + counts.appeared + counts.disappeared > 0;
  const verdict: ProgressVerdict =
    counts.pendingBefore === 0 && counts.pendingAfter === 0 ? 'idle' : anyMoved ? 'progressing' : 'stuck';
  return {
    from: a.takenAt,
    to: b.takenAt,
    verdict,
    counts,
    examples,
    stuckRanks,
    movedRanks,
    skippedRanks: [...skipped].sort((x, y) => x - y),
  };
}

/** Consecutive comparisons of snapshots given in time order. */
export function progressAcross(snaps: readonly JobSnapshot[], opts: ProgressOptions = {}): ProgressStep[] {
  const steps: ProgressStep[] = [];
  for (let i = 1; i < snaps.length; i++) {
    const a = snaps[i - 1];
    const b = snaps[i];
    if (a && b) steps.push(compareSnapshots(a, b, opts));
  }
  return steps;
}
