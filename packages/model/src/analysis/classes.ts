// Equivalence classes of ranks, as STAT does for stacks: at 16,384 ranks nobody reads 16,384
// queue lists, but "16,383 ranks look alike, rank 5 does not" is read at a glance. The shape
// of a rank is its queues relative to itself: peers as offsets in their communicator, so every
// rank of a ring has the same shape however far round it sits. Patterns around a fixed rank
// (everyone waiting for the root of a collective) are the opposite case: there, absolute peers
// make the classes. Both are tried and the one with fewer classes is kept (`peers` says which).

import {
  type Communicator,
  type JobSnapshot,
  type Operation,
  QUEUE_KINDS,
  type QueueKind,
  type RankSnapshot,
} from '../snapshot-spec.js';
import { jobText, quoteName } from '../text.js';
import { fewOutliers } from './outliers.js';
import { compressRanks } from './ranges.js';

export interface RankClass {
  readonly size: number;
  /** Member ranks as ranges ("0-15,17,20-31"). */
  readonly ranks: string;
  /** The lowest member, to look at as the example. */
  readonly example: number;
  /** One line per operation: queue, communicator, peer offset, tag, length, status. */
  readonly shape: string[];
}

/** relative: peers as offsets from the rank ("+1"); absolute: as local ranks ("=0"). */
export type PeerMode = 'relative' | 'absolute';

export interface RankClasses {
  readonly peers: PeerMode;
  /** Largest first; at most `maxClasses`. */
  readonly classes: RankClass[];
  readonly classTotal: number;
  /**
   * Ranks whose shape is shared by at most 1% of the job (at least one rank) and less than the
   * largest class, when they are few (outliers.ts fewOutliers); "" otherwise.
   */
  readonly outliers: string;
}

export interface ClassOptions {
  readonly maxClasses?: number;
}

const QUEUES = QUEUE_KINDS;

function peerToken(c: Communicator, local: number, mode: PeerMode): number {
  if (mode === 'absolute') return local;
  const size = Math.max(c.size, 1);
  return (((local - c.localRank) % size) + size) % size;
}

function opShape(queue: QueueKind, c: Communicator, op: Operation, mode: PeerMode): string {
  const l = op.peer.local;
  const peer = l === null ? 'any' : `${mode === 'relative' ? '+' : '='}${peerToken(c, l, mode)}`;
  const name = c.name === '' ? '(unnamed)' : quoteName(c.name);
  return `${queue} ${name}/${c.size} peer ${peer} tag ${op.tag ?? 'any'} len ${op.length} ${op.status}`;
}

/** The shape of one rank; equal strings mean equal shapes. */
export function rankShape(r: RankSnapshot, mode: PeerMode = 'relative'): string[] {
  if (r.state.kind !== 'ok') return [`state ${r.state.kind} ${jobText(r.state.code)}`];
  const lines: string[] = [];
  for (const c of r.communicators) {
    for (const queue of QUEUES) {
      const q = c[queue];
      if (q === null) continue;
      for (const op of q) lines.push(opShape(queue, c, op, mode));
    }
  }
  return lines;
}

const STATUS_CODE = { pending: 0, matched: 1, complete: 2 } as const;

/**
 * The shape as numbers (queue, communicator name id, size, peer offset, tag, length, status per
 * operation) appended to `out`: grouping 16,384 ranks by numbers is several times cheaper than
 * by text, and the text is made only for the classes that are shown.
 */
class Codes {
  data = new Float64Array(1024);
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const next = new Float64Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.length++] = v;
  }
}

function intern(names: Map<string, number>, s: string): number {
  let id = names.get(s);
  if (id === undefined) {
    id = names.size;
    names.set(s, id);
  }
  return id;
}

function shapeCode(r: RankSnapshot, mode: PeerMode, names: Map<string, number>, out: Codes): void {
  if (r.state.kind !== 'ok') {
    out.push(-1);
    out.push(intern(names, r.state.kind));
    out.push(intern(names, r.state.code));
    return;
  }
  for (const c of r.communicators) {
    let nameId = -1;
    for (let qi = 0; qi < QUEUES.length; qi++) {
      const q = c[QUEUES[qi] ?? 'sends'];
      if (q === null) continue;
      for (let i = 0; i < q.length; i++) {
        const op = q[i];
        if (op === undefined) continue;
        if (nameId < 0) nameId = intern(names, c.name);
        const l = op.peer.local;
        out.push(qi);
        out.push(nameId);
        out.push(c.size);
        out.push(l === null ? -1 : peerToken(c, l, mode));
        out.push(op.tag === null ? 0 : 1);
        out.push(op.tag ?? 0);
        out.push(op.length);
        out.push(STATUS_CODE[op.status]);
      }
    }
  }
}

function hashRange(xs: Float64Array, from: number, to: number): number {
  let h = 0x811c9dc5 ^ (to - from);
  for (let i = from; i < to; i++) h = Math.imul(h ^ ((xs[i] ?? 0) | 0), 0x01000193);
  return h >>> 0;
}

function sameRange(xs: Float64Array, a0: number, a1: number, b0: number, b1: number): boolean {
  if (a1 - a0 !== b1 - b0) return false;
  for (let i = 0; i < a1 - a0; i++) if (xs[a0 + i] !== xs[b0 + i]) return false;
  return true;
}

function classify(snap: JobSnapshot, mode: PeerMode): { first: number; members: number[] }[] {
  const n = snap.ranks.length;
  const names = new Map<string, number>();
  const out = new Codes();
  const start = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) {
    const r = snap.ranks[i];
    if (r) shapeCode(r, mode, names, out);
    start[i + 1] = out.length;
  }
  const codes = out.data;
  // Hash buckets, then exact comparison with each class's first member: no false merges.
  const buckets = new Map<number, number[]>();
  const classes: { first: number; members: number[] }[] = [];
  for (let i = 0; i < n; i++) {
    const a0 = start[i] ?? 0;
    const a1 = start[i + 1] ?? 0;
    const h = hashRange(codes, a0, a1);
    let bucket = buckets.get(h);
    if (bucket === undefined) {
      bucket = [];
      buckets.set(h, bucket);
    }
    let found: { first: number; members: number[] } | undefined;
    for (const c of bucket) {
      const cls = classes[c];
      if (cls && sameRange(codes, start[cls.first] ?? 0, start[cls.first + 1] ?? 0, a0, a1)) {
        found = cls;
        break;
      }
    }
    const rank = snap.ranks[i]?.rank ?? 0;
    if (found) found.members.push(rank);
    else {
      bucket.push(classes.length);
      classes.push({ first: i, members: [rank] });
    }
  }
  return classes.sort((a, b) => b.members.length - a.members.length || a.first - b.first);
}

export function rankClasses(snap: JobSnapshot, opts: ClassOptions = {}): RankClasses {
  const n = snap.ranks.length;
  let peers: PeerMode = 'relative';
  let classes = classify(snap, peers);
  if (classes.length > 1) {
    const absolute = classify(snap, 'absolute');
    if (absolute.length < classes.length) {
      peers = 'absolute';
      classes = absolute;
    }
  }
  const outliers = fewOutliers(classes, n);
  return {
    peers,
    classes: classes.slice(0, opts.maxClasses ?? 50).map((c) => {
      const first = snap.ranks[c.first];
      const shape = first ? rankShape(first, peers) : [];
      return {
        size: c.members.length,
        ranks: compressRanks(c.members),
        example: first?.rank ?? 0,
        shape: shape.length === 0 ? ['(nothing in any queue)'] : shape,
      };
    }),
    classTotal: classes.length,
    outliers: compressRanks(outliers),
  };
}
