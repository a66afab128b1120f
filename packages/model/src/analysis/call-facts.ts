// The stacks' side of the hang analysis, over a SnapshotIndex: which MPI call each rank is in,
// on which communicator, and the collectives whose members are not all in the same call
// (a collective mismatch: "ranks 0-2 in MPI_Barrier on MPI_COMM_WORLD, rank 3 in
// MPI_Allreduce"). Ranks whose stacks were not read (mpiCall absent) are left to the queues.

import { type CallKind, callKind, isWorldCollective } from '../mpi/calls.js';
import { foldMpiName, userFrame } from '../mpi/frames.js';
import { isWorld, isWorldLike } from '../mpi/world.js';
import { jobText, quoteName, ranksPhrase } from '../text.js';
import { compressRanks } from './ranges.js';
import type { SnapshotIndex } from './snapshot-index.js';

export const CALL_NO_STACKS = 0;
export const CALL_COMPUTING = 1;
/** In an MPI call that returns by itself (Test*, Iprobe, Isend...). */
export const CALL_POLLING = 2;
export const CALL_BLOCKED = 3;

export interface CallFacts {
  /** Per rank position, one of CALL_*. */
  readonly state: Uint8Array;
  /** Per position: the call's name, PMPI_ folded (null when not in a call or not read). */
  readonly fn: (string | null)[];
  readonly kind: (CallKind | null)[];
  /** Per position: index in ix.comms of the call's communicator, -1 when unknown. */
  readonly commIdx: Int32Array;
  /** Per position: key id of the call's communicator (MPI_COMM_WORLD's for MPI_Finalize), -1 when unknown. */
  readonly keyId: Int32Array;
  /** Some rank's stacks were read. */
  readonly any: boolean;
}

export function callFacts(ix: SnapshotIndex): CallFacts {
  const n = ix.n;
  const state = new Uint8Array(n);
  const fn: (string | null)[] = new Array(n).fill(null);
  const kind: (CallKind | null)[] = new Array(n).fill(null);
  const commIdx = new Int32Array(n).fill(-1);
  const keyId = new Int32Array(n).fill(-1);
  let any = false;
  for (let i = 0; i < n; i++) {
    const r = ix.snap.ranks[i];
    if (r === undefined || r.mpiCall === undefined) continue;
    any = true;
    const c = r.mpiCall;
    if (c === null) {
      state[i] = CALL_COMPUTING;
      continue;
    }
    const name = foldMpiName(c.function);
    const k = callKind(name);
    fn[i] = name;
    kind[i] = k;
    state[i] = k === 'nonblocking' ? CALL_POLLING : CALL_BLOCKED;
    const start = ix.commStart[i] ?? 0;
    const end = ix.commStart[i + 1] ?? 0;
    const id = c.args?.communicator ?? null;
    for (let ci = start; ci < end; ci++) {
      const ce = ix.comms[ci];
      if (ce === undefined) continue;
      const match = isWorldCollective(name) ? isWorld(ce.comm) : id !== null && ce.comm.id === id;
      if (match) {
        commIdx[i] = ci;
        keyId[i] = ce.keyId;
        break;
      }
    }
  }
  return { state, fn, kind, commIdx, keyId, any };
}

/** Rank positions that are members of the communicator with this key (those the snapshot has). */
export function commMembers(ix: SnapshotIndex, keyId: number): Int32Array {
  const rep = ix.comms.find((c) => c.keyId === keyId);
  if (rep === undefined) return new Int32Array(0);
  const c = rep.comm;
  if (isWorldLike(c, ix.worldSize)) {
    return Int32Array.from({ length: ix.n }, (_, i) => i);
  }
  const out: number[] = [];
  if (c.group !== null) {
    for (const w of c.group) {
      const idx = ix.idxOf(w);
      if (idx >= 0) out.push(idx);
    }
  } else {
    for (const ce of ix.comms) if (ce.keyId === keyId && out.at(-1) !== ce.rankIdx) out.push(ce.rankIdx);
  }
  return Int32Array.from(out).sort();
}

/** Where a set of ranks is: in one call (on one communicator), computing, or unknown. */
export interface CallGroup {
  /** "MPI_Barrier", or null for computing / not read. */
  readonly call: string | null;
  /** computing: in no MPI call; unread: queues or stacks not read; exited: the process is gone; else in `call`. */
  readonly where: 'call' | 'computing' | 'unread' | 'exited';
  readonly blocking: boolean;
  /** Name of the call's communicator ("" unnamed); null when it could not be matched. */
  readonly commName: string | null;
  readonly ranks: string;
  readonly rankCount: number;
  /** The root argument every member of the group gave (a rooted collective whose roots differ), else absent. */
  readonly root?: number;
  /**
   * The arguments every member of the group gave, where members of one collective disagree on
   * them ("4 × 4 B", "MPI_SUM", "count or datatype not readable"), else absent.
   */
  readonly args?: string;
  /** "b.c:17": the source line of the group's first rank, where the mismatch shows it; else absent. */
  readonly place?: string;
}

/** "ranks 0-2 in MPI_Barrier on MPI_COMM_WORLD", "rank 3 computing". */
export function describeCallGroup(g: CallGroup, withComm = true): string {
  const who = ranksPhrase(g.ranks);
  const at = g.place === undefined ? '' : ` (${g.place})`;
  if (g.where === 'computing') return `${who} computing (in no MPI call)${at}`;
  if (g.where === 'unread') return `${who} with no stacks`;
  if (g.where === 'exited') return `${who} exited${at}`;
  if (g.root !== undefined) return `${who} in ${jobText(g.call ?? '?')} with root ${g.root}${at}`;
  if (g.args !== undefined) return `${who} in ${jobText(g.call ?? '?')} with ${g.args}${at}`;
  if (callKind(g.call ?? '') === 'final') return `${who} in ${jobText(g.call ?? '?')}${at}`;
  const comm =
    !withComm || g.commName === null
      ? g.blocking && callKind(g.call ?? '') === 'collective'
        ? ' on an unknown communicator'
        : ''
      : ` on ${commPhrase(g.commName)}`;
  return `${who} in ${jobText(g.call ?? '?')}${comm}${at}`;
}

/** Collectives with a root argument that every member must give alike. */
export const ROOTED_COLLECTIVES: ReadonlySet<string> = new Set([
  'MPI_Bcast',
  'MPI_Reduce',
  'MPI_Gather',
  'MPI_Gatherv',
  'MPI_Scatter',
  'MPI_Scatterv',
]);

/** "b.c:17" for the user frame of the rank at this position, or undefined without one. */
function placeOf(ix: SnapshotIndex, pos: number): string | undefined {
  const r = ix.snap.ranks[pos];
  const u = r === undefined ? null : userFrame(r);
  if (u === null || u.frame.file === null) return undefined;
  const file = u.frame.file.slice(u.frame.file.lastIndexOf('/') + 1);
  return `${jobText(file)}${u.frame.line === null ? '' : `:${u.frame.line}`}`;
}

/** A communicator's name in a sentence: quoted when it is not one plain token, or "an unnamed communicator". */
export function commPhrase(name: string): string {
  return name === '' ? 'an unnamed communicator' : quoteName(name);
}

function groupPositions(ix: SnapshotIndex, f: CallFacts, positions: Iterable<number>): CallGroup[] {
  const groups = new Map<string, { g: Omit<CallGroup, 'ranks' | 'rankCount'>; ranks: number[] }>();
  for (const i of positions) {
    const st = f.state[i] ?? CALL_NO_STACKS;
    const ok = ix.ok[i] === 1;
    let g: Omit<CallGroup, 'ranks' | 'rankCount'>;
    const state = ix.snap.ranks[i]?.state;
    if (state !== undefined && state.kind !== 'ok' && isGoneCode(state.code)) {
      g = { call: null, where: 'exited', blocking: false, commName: null };
    } else if (
      st === CALL_NO_STACKS ||
      (!ok && st !== CALL_COMPUTING && st !== CALL_BLOCKED && st !== CALL_POLLING)
    ) {
      g = { call: null, where: 'unread', blocking: false, commName: null };
    } else if (st === CALL_COMPUTING) g = { call: null, where: 'computing', blocking: false, commName: null };
    else {
      const ce = ix.comms[f.commIdx[i] ?? -1];
      const k = f.kind[i];
      const commName = ce === undefined ? null : ce.comm.name;
      g = { call: f.fn[i] ?? null, where: 'call', blocking: k !== 'nonblocking', commName };
    }
    const key = `${g.where}\u0000${g.call}\u0000${g.commName === null ? '\u0001' : g.commName}`;
    const e = groups.get(key);
    const rank = ix.rankOf[i] ?? 0;
    if (e) e.ranks.push(rank);
    else groups.set(key, { g, ranks: [rank] });
  }
  return [...groups.values()]
    .map(({ g, ranks }) => ({ ...g, ranks: compressRanks(ranks), rankCount: ranks.length }))
    .sort((a, b) => b.rankCount - a.rankCount || firstRank(a.ranks) - firstRank(b.ranks));
}

function firstRank(ranges: string): number {
  return Number.parseInt(ranges, 10) || 0;
}

/** Ranks grouped by the MPI call they are in (every rank; empty when no stacks were read). */
export function callGroups(ix: SnapshotIndex, f: CallFacts): CallGroup[] {
  if (!f.any) return [];
  return groupPositions(
    ix,
    f,
    Array.from({ length: ix.n }, (_, i) => i),
  );
}

export interface CollectiveMismatch {
  readonly commKey: string;
  /** The communicator's name, or null when the collectives' communicator is unknown. */
  readonly commName: string | null;
  /** Where the communicator's members are, largest group first. */
  readonly groups: CallGroup[];
  /** "ranks 0-2 in MPI_Barrier on MPI_COMM_WORLD, rank 3 in MPI_Allreduce on MPI_COMM_WORLD". */
  readonly text: string;
  /**
   * Every member is in the same collective, and what they disagree on: its root, its type
   * signature (count × type size) or its operation. Absent when they are in different calls.
   */
  readonly differs?: 'root' | 'signature' | 'operation';
}

/**
 * Communicators some of whose members are inside a blocking collective on it while others are
 * inside a different collective, in another call, or computing: they can never meet. Members
 * whose stacks were not read are listed but prove nothing either way. When no rank's
 * collective communicator could be matched (no call arguments), the job's ranks are compared
 * as if the collectives were on MPI_COMM_WORLD, named "an unknown communicator".
 */
export function findCollectiveMismatches(ix: SnapshotIndex, f: CallFacts): CollectiveMismatch[] {
  if (!f.any) return [];
  const keys = new Set<number>();
  let unknownComm = false;
  for (let i = 0; i < ix.n; i++) {
    if (f.kind[i] !== 'collective') continue;
    const k = f.keyId[i] ?? -1;
    if (k >= 0) keys.add(k);
    else unknownComm = true;
  }
  const out: CollectiveMismatch[] = [];
  const check = (members: Int32Array, commKey: string, commName: string | null) => {
    const groups = groupPositions(ix, f, members);
    // A member in the same call whose communicator argument could not be matched is most
    // likely in the same collective: it neither proves nor disproves a mismatch.
    const here = new Set(groups.filter((g) => g.commName !== null).map((g) => g.call));
    const known = groups.filter(
      (g) => g.where !== 'unread' && !(commName !== null && g.commName === null && here.has(g.call)),
    );
    const collectiveHere = known.some((g) => g.blocking && callKind(g.call ?? '') === 'collective');
    if (!collectiveHere) return;
    if (known.length < 2) {
      const byRoot = rootMismatch(ix, f, members);
      if (byRoot !== null) {
        out.push({ commKey, commName, groups: byRoot, text: withText(byRoot), differs: 'root' });
        return;
      }
      const byArgs = argsMismatch(ix, f, members);
      if (byArgs !== null) out.push({ commKey, commName, ...byArgs, text: withText(byArgs.groups) });
      return;
    }
    // Where the ranks that are not in the collective are: their line, not only their call.
    const placed = groups.map((g) => {
      if (
        g.where === 'unread' ||
        g.where === 'exited' ||
        (g.blocking && callKind(g.call ?? '') === 'collective')
      )
        return g;
      const first = ix.idxOf(Number.parseInt(g.ranks, 10));
      const place = first < 0 ? undefined : placeOf(ix, first);
      return place === undefined ? g : { ...g, place };
    });
    out.push({ commKey, commName, groups: placed, text: placed.map((g) => describeCallGroup(g)).join(', ') });
  };
  for (const k of keys) {
    const rep = ix.comms.find((c) => c.keyId === k);
    check(commMembers(ix, k), ix.keys[k] ?? '', rep?.comm.name ?? null);
  }
  if (keys.size === 0 && unknownComm) {
    check(
      Int32Array.from({ length: ix.n }, (_, i) => i),
      '',
      null,
    );
  }
  return out.sort((a, b) => (b.groups[0]?.rankCount ?? 0) - (a.groups[0]?.rankCount ?? 0));
}

/**
 * Members all in the same rooted collective whose root arguments differ: groups by root, the
 * largest first (each with the line of its first rank). Null when the call has no root, a root
 * is unreadable on every member, or they agree.
 */
function rootMismatch(ix: SnapshotIndex, f: CallFacts, members: Int32Array): CallGroup[] | null {
  const byRoot = new Map<number, number[]>();
  let call: string | null = null;
  for (const m of members) {
    const fn = f.fn[m] ?? null;
    if (fn === null || f.state[m] !== CALL_BLOCKED || !ROOTED_COLLECTIVES.has(fn)) return null;
    call = fn;
    const root = ix.snap.ranks[m]?.mpiCall?.args?.root;
    if (root === undefined || root === null) continue;
    const e = byRoot.get(root);
    const rank = ix.rankOf[m] ?? 0;
    if (e) e.push(rank);
    else byRoot.set(root, [rank]);
  }
  if (byRoot.size < 2 || call === null) return null;
  const ce = ix.comms[f.commIdx[members[0] ?? -1] ?? -1];
  return [...byRoot]
    .map(([root, ranks]) => ({ root, ranks }))
    .sort((a, b) => b.ranks.length - a.ranks.length || (a.ranks[0] ?? 0) - (b.ranks[0] ?? 0))
    .map(({ root, ranks }) => {
      const place = placeOf(ix, ix.idxOf(ranks[0] ?? 0));
      return {
        call,
        where: 'call' as const,
        blocking: true,
        commName: ce === undefined ? null : ce.comm.name,
        ranks: compressRanks(ranks),
        rankCount: ranks.length,
        root,
        ...(place === undefined ? {} : { place }),
      };
    });
}

/**
 * "ranks 0-2 in MPI_Reduce with root 0 (b.c:17), rank 3 with root 1 (b.c:19)", "ranks 0-2 in
 * MPI_Allreduce with 4 × 4 B (b.c:17), rank 3 with 8 × 4 B (b.c:17)".
 */
function withText(groups: readonly CallGroup[]): string {
  return groups
    .map((g, i) => {
      const who = ranksPhrase(g.ranks);
      const at = g.place === undefined ? '' : ` (${g.place})`;
      const what = g.root === undefined ? g.args : `root ${g.root}`;
      return i === 0 ? describeCallGroup(g) : `${who} with ${what}${at}`;
    })
    .join(', ');
}

/** Collectives whose members all give one count and datatype (a type signature); the reductions an operation too. */
export const SIGNED_COLLECTIVES: ReadonlySet<string> = new Set([
  'MPI_Bcast',
  'MPI_Reduce',
  'MPI_Allreduce',
  'MPI_Scan',
  'MPI_Exscan',
]);
const REDUCTIONS: ReadonlySet<string> = new Set(['MPI_Reduce', 'MPI_Allreduce', 'MPI_Scan', 'MPI_Exscan']);

/** The arguments that did not read: said, never guessed. */
const NOT_READABLE = 'count or datatype not readable';

/**
 * Members all in the same collective with a count and datatype (and, for a reduction, an
 * operation) whose type signatures differ (count × type size, in bytes) or whose operations
 * differ: groups by what they gave, the largest first, each with the line of its first rank.
 * A member whose count or type size did not read is its own group ("not readable"): it proves
 * nothing either way. Null when they agree as far as they read, or the call has no signature.
 */
function argsMismatch(
  ix: SnapshotIndex,
  f: CallFacts,
  members: Int32Array,
): { groups: CallGroup[]; differs: 'signature' | 'operation' } | null {
  let call: string | null = null;
  const bytes = new Set<number>();
  const ops = new Set<string>();
  const per: { rank: number; sig: string | null; op: string | null }[] = [];
  for (const m of members) {
    const fn = f.fn[m] ?? null;
    if (fn === null || f.state[m] !== CALL_BLOCKED || !SIGNED_COLLECTIVES.has(fn)) return null;
    if (call !== null && call !== fn) return null;
    call = fn;
    const a = ix.snap.ranks[m]?.mpiCall?.args;
    const count = a?.count ?? null;
    const size = a?.typeSize ?? null;
    const sig = count === null || size === null ? null : `${count} × ${size} B`;
    if (count !== null && size !== null) bytes.add(count * size);
    const op = REDUCTIONS.has(fn) ? (a?.op ?? null) : null;
    if (op !== null) ops.add(op);
    per.push({ rank: ix.rankOf[m] ?? 0, sig, op });
  }
  if (call === null) return null;
  const differs = bytes.size >= 2 ? 'signature' : ops.size >= 2 ? 'operation' : null;
  if (differs === null) return null;
  const label = (p: (typeof per)[number]): string => {
    const sig = p.sig ?? NOT_READABLE;
    if (differs === 'signature') return sig;
    return p.op === null ? 'an operation not readable' : jobText(p.op);
  };
  const byArgs = new Map<string, number[]>();
  for (const p of per) {
    const k = label(p);
    const e = byArgs.get(k);
    if (e) e.push(p.rank);
    else byArgs.set(k, [p.rank]);
  }
  const ce = ix.comms[f.commIdx[members[0] ?? -1] ?? -1];
  const unread = (k: string) => k === NOT_READABLE || k === 'an operation not readable';
  const groups = [...byArgs]
    .sort(
      ([ka, a], [kb, b]) =>
        Number(unread(ka)) - Number(unread(kb)) || b.length - a.length || (a[0] ?? 0) - (b[0] ?? 0),
    )
    .map(([args, ranks]) => {
      const place = placeOf(ix, ix.idxOf(ranks[0] ?? 0));
      return {
        call: call as string,
        where: 'call' as const,
        blocking: true,
        commName: ce === undefined ? null : ce.comm.name,
        ranks: compressRanks(ranks),
        rankCount: ranks.length,
        args,
        ...(place === undefined ? {} : { place }),
      };
    });
  return { groups, differs };
}

/**
 * Codes of a rank the reader found gone (its pid no longer exists, it exited during the read,
 * or it is a zombie): a process that has ended will never send or receive again.
 */
const GONE_CODES: ReadonlySet<string> = new Set(['MQD_E_NO_SUCH_PID', 'MQD_E_PID_EXITED', 'MQD_E_ZOMBIE']);

/** The reader's code for a rank says its process has ended. */
export function isGoneCode(code: string): boolean {
  return GONE_CODES.has(code);
}
