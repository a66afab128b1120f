// Progress between snapshots of one job. One snapshot cannot tell a hang from a slow job;
// two can: if nothing in any queue moved, the job is stuck. An operation is recognised across
// snapshots by what does not change while it waits (rank, communicator key, queue, peer, tag,
// length, buffer, and Open MPI's request address when the library prints it); its status may.
import type { JobSnapshot, Operation, QueueKind, RankSnapshot } from '../snapshot-spec.js';
import { commKey, type OpRef, requestAddress } from './comm.js';

export type OpChange = 'unchanged' | 'changed' | 'appeared' | 'disappeared';
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

const QUEUES: readonly QueueKind[] = ['sends', 'receives', 'unexpected'];

/** The identity of an operation across snapshots (everything but its status). */
export function opIdentity(rank: number, key: string, queue: QueueKind, op: Operation): string {
  const req = requestAddress(op) ?? '';
  return `${rank}\u0001${key}\u0001${queue}\u0001${op.peer.local}\u0001${op.peer.global}\u0001${op.tag}\u0001${op.length}\u0001${op.buffer}\u0001${req}`;
}

interface Seen {
  readonly rank: number;
  readonly ref: OpRef;
  readonly op: Operation;
  used: boolean;
}

function eachOp(r: RankSnapshot, visit: (key: string, ref: OpRef, op: Operation) => void): void {
  for (const c of r.communicators) {
    const key = commKey(c);
    for (const queue of QUEUES) {
      const q = c[queue];
      if (q === null) continue;
      for (let index = 0; index < q.length; index++) {
        const op = q[index];
        if (op === undefined) continue;
        visit(key, { rank: r.rank, commKey: key, commName: c.name, queue, index }, op);
      }
    }
  }
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
    // Multiset per identity: equal operations (the same buffer posted twice) pair up in order.
    const old = new Map<string, Seen[]>();
    eachOp(ra, (key, ref, op) => {
      if (op.status === 'pending') counts.pendingBefore++;
      const id = opIdentity(ra.rank, key, ref.queue, op);
      const list = old.get(id);
      const seen = { rank: ra.rank, ref, op, used: false };
      if (list) list.push(seen);
      else old.set(id, [seen]);
    });
    let moved = false;
    let pendingHere = false;
    eachOp(rb, (key, ref, op) => {
      if (op.status === 'pending') {
        counts.pendingAfter++;
        pendingHere = true;
      }
      const match = old.get(opIdentity(rb.rank, key, ref.queue, op))?.find((s) => !s.used);
      if (match === undefined) {
        moved = true;
        example('appeared', ref, op, null, op.status);
        return;
      }
      match.used = true;
      if (match.op.status === op.status) example('unchanged', ref, op, op.status, op.status);
      else {
        moved = true;
        example('changed', ref, op, match.op.status, op.status);
      }
    });
    for (const list of old.values()) {
      for (const s of list) {
        if (s.used) continue;
        moved = true;
        example('disappeared', s.ref, s.op, s.op.status, null);
      }
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
