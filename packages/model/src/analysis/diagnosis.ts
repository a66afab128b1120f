// The diagnosis in concrete facts, one line per group of ranks: which call, waiting for whom,
// with which tag, on which communicator, and the user's source line that made the call
// ("Rank 0 waits in MPI_Recv for rank 1, tag 99, on MPI_COMM_WORLD, at wrong_tag.c:36 in
// main"), and for a deadlock the cycle itself ("rank 0 waits for rank 1 (tag 99,
// wrong_tag.c:36) / rank 1 waits for rank 0 (tag 1, :47)"). Each line is a list of parts, so a
// view can make every rank, cell and frame a link and isolate every name from the job; the CLI
// prints the same parts as text.

import { type UserFrame, userFrame } from '../mpi/frames.js';
import type { RankSnapshot } from '../snapshot-spec.js';
import { jobText, ranksPhrase } from '../text.js';
import { CALL_BLOCKED, CALL_COMPUTING, CALL_NO_STACKS, CALL_POLLING, commMembers } from './call-facts.js';
import {
  basename,
  commName,
  type DiagnosisLine,
  type DiagnosisPart,
  line,
  name,
  placePart,
  placeText,
  rankLink,
  text,
} from './diagnosis-parts.js';
import { pythonCallOf } from './python-call.js';
import { compressRanks } from './ranges.js';
import type { SnapshotIndex } from './snapshot-index.js';
import {
  type DeadEndWait,
  type DeadlockCycle,
  edgeCell,
  type RankWait,
  rankWaits,
  type WaitGraph,
} from './wait-graph.js';
import { DEAD_FINAL, DEAD_GONE } from './wait-types.js';
import { whyNoMessage } from './why-no-message.js';

export type { DiagnosisLine, DiagnosisPart, FrameRef } from './diagnosis-parts.js';
export { partsText } from './diagnosis-parts.js';

export interface DiagnosisLines {
  /** The first deadlock cycle, edge by edge; null when there is none. */
  readonly cycle: DiagnosisLine | null;
  /**
   * The first wait on a rank that will never act again ("Rank 1 waits in MPI_Recv for a message
   * from rank 0, tag 5, at a.c:31; rank 0 is in MPI_Finalize (a.c:40) and will never send it."),
   * followed by why the message never came where the snapshot tells; null when there is none.
   */
  readonly deadEnd: DiagnosisLine | null;
  /** Groups of ranks with the same facts, blocked ones first, then in rank order. */
  readonly groups: DiagnosisLine[];
  /** Groups before the cut to maxGroups. */
  readonly groupTotal: number;
}

export interface DiagnosisOptions {
  readonly maxGroups?: number;
  readonly maxCycleEdges?: number;
}

/** What one rank is doing, as far as the grouping needs. */
interface RankFacts {
  readonly pos: number;
  readonly rank: number;
  /** Everything but the peers: equal keys describe the same situation. */
  readonly key: string;
  /** Positions waited for (single waits), sorted. */
  readonly targets: number[];
  readonly user: UserFrame | null;
  readonly describe: (peers: DiagnosisPart[], many: boolean) => DiagnosisPart[];
}

/** The tag a rank's wait names, or, for a send whose tag its call hides, the one its message shows at the receiver. */
function waitTag(ix: SnapshotIndex, pos: number, w: RankWait): number | null {
  if (w.op.tag !== null || w.op.queue !== 'sends' || w.target < 0) return w.op.tag;
  const keyId = ix.keyIdOf(w.op.commKey);
  const ce = ix.findComm(w.target, keyId);
  const tags = new Set<number>();
  for (const op of ce?.comm.unexpected ?? []) {
    if (ce !== undefined && ix.peerIdx(op.peer, ce) === pos && op.tag !== null) tags.add(op.tag);
  }
  return tags.size === 1 ? ([...tags][0] ?? null) : null;
}

function facts(ix: SnapshotIndex, g: WaitGraph, pos: number): RankFacts {
  const r = ix.snap.ranks[pos] as RankSnapshot;
  const rank = r.rank;
  const user = userFrame(r);
  // The key is built from the raw frame (neutralised only when shown): one per rank at 16,384 ranks.
  const where = user === null ? '' : `${user.frame.file}:${user.frame.line}\u0000${user.frame.function}`;
  const at = (): DiagnosisPart[] =>
    user === null
      ? []
      : [
          text(', at '),
          { kind: 'frame', text: placeText(user), rank, frame: { tid: user.tid, index: user.index } },
          ...(user.frame.file !== null && user.frame.function !== null
            ? [text(' in '), name(user.frame.function)]
            : []),
        ];
  if (ix.ok[pos] === 0 && r.state.kind !== 'ok') {
    const code = jobText(r.state.code);
    if (g.dead[pos] === DEAD_GONE) {
      return {
        pos,
        rank,
        key: `gone\u0000${code}`,
        targets: [],
        user: null,
        describe: (_p, many) => [
          text(
            ` ${many ? 'have' : 'has'} exited (${code}): ${many ? 'they' : 'it'} will never send or receive again`,
          ),
        ],
      };
    }
    return {
      pos,
      rank,
      key: `unread\u0000${code}`,
      targets: [],
      user: null,
      describe: (_p, many) => [
        text(` could not be read (${code}): ${many ? 'they are' : 'it is'} assumed able to go on`),
      ],
    };
  }
  const st = g.calls.state[pos] ?? CALL_NO_STACKS;
  const fn = g.calls.fn[pos] ?? null;
  const waits = rankWaits(g, pos);
  const single = waits.filter((w) => !w.anyOf && w.op.evidence !== 'collective-call');
  const any = waits.find((w) => w.anyOf);
  const collective = waits.filter((w) => w.op.evidence === 'collective-call');
  const first = waits[0];
  const tags = [...new Set(single.map((w) => waitTag(ix, pos, w)).concat(any ? [any.op.tag] : []))];
  const tagText = tags.length === 1 && tags[0] !== null && tags[0] !== undefined ? `, tag ${tags[0]}` : '';
  const comm = first?.op.commName ?? null;
  const targets = [...new Set((collective.length > 0 ? collective : single).map((w) => w.target))].sort(
    (a, b) => a - b,
  );
  const verb = (many: boolean, one: string, more: string) => text(many ? more : one);
  if (st === CALL_COMPUTING || (st === CALL_NO_STACKS && waits.length === 0)) {
    const what = st === CALL_COMPUTING ? 'computing' : 'waiting in no operation the queues show';
    return {
      pos,
      rank,
      key: `free\u0000${st}\u0000${where}`,
      targets: [],
      user,
      describe: (_p, many) => [
        verb(many, ` is ${what}`, ` are ${what}`),
        ...(st === CALL_COMPUTING ? at() : []),
      ],
    };
  }
  if (st === CALL_POLLING) {
    return {
      pos,
      rank,
      key: `poll\u0000${fn}\u0000${where}`,
      targets: [],
      user,
      describe: (_p, many) => [
        verb(many, ' is in ', ' are in '),
        name(fn ?? '?'),
        text(', which returns by itself'),
        ...at(),
      ],
    };
  }
  if (g.dead[pos] === DEAD_FINAL) {
    return {
      pos,
      rank,
      key: `final\u0000${fn}\u0000${where}`,
      targets: [],
      user,
      describe: (_p, many) => [
        verb(many, ' is in ', ' are in '),
        name(fn ?? '?'),
        text(' and will never send or receive again'),
        ...at(),
      ],
    };
  }
  // A Python rank's line names the mpi4py call too (python-call.ts): "in MPI_Recv (comm.recv)".
  const pyCall = user === null || fn === null ? null : pythonCallOf(ix.snap, r, user, fn);
  const inCall = (): DiagnosisPart[] =>
    st === CALL_BLOCKED && fn !== null
      ? [text(' in '), name(fn), ...(pyCall === null ? [] : [text(' ('), name(pyCall), text(')')])]
      : [];
  const onComm = (): DiagnosisPart[] => (comm === null ? [] : [text(', on '), commName(comm)]);
  const key = [
    st,
    fn,
    collective.length > 0 ? 'coll' : any ? 'any' : single.length > 0 ? single[0]?.op.queue : 'none',
    tagText,
    comm,
    where,
  ].join('\u0000');
  let describe: RankFacts['describe'];
  if (collective.length > 0) {
    const onCollComm = (): DiagnosisPart[] => (comm === null ? [] : [text(' on '), commName(comm)]);
    describe = (_peers, many) => {
      // Every member that is not in this collective, not only the clauses' first few.
      const absent = absentMembers(ix, g, pos);
      const head = [verb(many, ' waits', ' wait'), ...inCall(), ...onCollComm(), text(' for ')];
      const peers = peerParts(ix, absent);
      if (absent.every((t) => g.dead[t] === DEAD_FINAL)) {
        const fin = jobText(g.calls.fn[absent[0] ?? -1] ?? 'MPI_Finalize');
        const one = absent.length === 1;
        return [
          ...head,
          ...peers,
          text(`, which ${one ? 'is' : 'are'} in ${fin} and will never enter it`),
          ...at(),
        ];
      }
      if (absent.every((t) => g.dead[t] === DEAD_GONE)) {
        return [...head, ...peers, text(`, which ${absent.length === 1 ? 'has' : 'have'} exited`), ...at()];
      }
      return [...head, ...peers, ...at(), text('; '), ...whereAbsent(ix, g, absent)];
    };
  } else if (any !== undefined && single.length === 0) {
    describe = (_p, many) => [
      verb(many, ' waits', ' wait'),
      ...inCall(),
      text(' for a message from any rank'),
      text(tagText),
      ...onComm(),
      ...at(),
    ];
  } else if (single.length > 0) {
    const sends = single[0]?.op.queue !== 'receives';
    describe = (peers, many) => [
      verb(many, ' waits', ' wait'),
      ...inCall(),
      text(sends ? ' to send to ' : ' for a message from '),
      ...peers,
      text(tagText),
      ...onComm(),
      ...at(),
    ];
  } else {
    describe = (_p, many) => [
      verb(many, ' is blocked', ' are blocked'),
      ...inCall(),
      text(st === CALL_BLOCKED ? ', with nothing in the queues to say on whom' : ''),
      ...at(),
    ];
  }
  return { pos, rank, key, targets, user, describe };
}

const absentCache = new WeakMap<WaitGraph, Map<string, number[]>>();

/**
 * Positions of the members of the communicator of the collective the rank at `pos` is in that
 * are not in that collective (blocked in the same call on it), in rank order: all of them, where
 * the wait clauses name only the first few.
 */
function absentMembers(ix: SnapshotIndex, g: WaitGraph, pos: number): number[] {
  const keyId = g.calls.keyId[pos] ?? -1;
  const fn = g.calls.fn[pos] ?? '';
  let cache = absentCache.get(g);
  if (cache === undefined) {
    cache = new Map();
    absentCache.set(g, cache);
  }
  const key = `${keyId}\u0000${fn}`;
  let out = cache.get(key);
  if (out === undefined) {
    out = [];
    for (const m of commMembers(ix, keyId)) {
      const same =
        g.calls.keyId[m] === keyId &&
        g.calls.kind[m] === 'collective' &&
        g.calls.state[m] === CALL_BLOCKED &&
        g.calls.fn[m] === fn;
      if (!same) out.push(m);
    }
    cache.set(key, out);
  }
  return out;
}

/** Where groups of absent members are listed by name, at most; the rest are counted. */
const MAX_WHERE_GROUPS = 3;

/**
 * "rank 3 never entered it: it is in MPI_Recv at a.c:12", "ranks 0-16382 never entered it:
 * they are computing (in no MPI call) at a.c:50": where the members a collective waits for are.
 */
function whereAbsent(ix: SnapshotIndex, g: WaitGraph, absent: readonly number[]): DiagnosisPart[] {
  const groups = new Map<string, { ranks: number[]; say: (many: boolean) => DiagnosisPart[] }>();
  for (const t of absent) {
    const r = ix.snap.ranks[t];
    const u = r === undefined ? null : userFrame(r);
    const place = u === null ? null : placeText(u);
    const atPlace = (): DiagnosisPart[] =>
      u === null || r === undefined
        ? []
        : [
            text(' at '),
            { kind: 'frame', text: placeText(u), rank: r.rank, frame: { tid: u.tid, index: u.index } },
          ];
    const st = g.calls.state[t] ?? CALL_NO_STACKS;
    const fn = g.calls.fn[t] ?? null;
    let key: string;
    let say: (many: boolean) => DiagnosisPart[];
    if (g.dead[t] === DEAD_GONE) {
      key = 'gone';
      say = (many) => [text(many ? ' have exited' : ' has exited')];
    } else if (ix.ok[t] === 0 && st === CALL_NO_STACKS) {
      key = 'unread';
      say = () => [text(' could not be read')];
    } else if (st === CALL_COMPUTING) {
      key = `computing\u0000${place}`;
      say = (many) => [
        text(many ? ' are computing (in no MPI call)' : ' is computing (in no MPI call)'),
        ...atPlace(),
      ];
    } else if (fn !== null) {
      key = `call\u0000${fn}\u0000${place}`;
      say = (many) => [text(many ? ' are in ' : ' is in '), name(fn), ...atPlace()];
    } else {
      key = 'unknown';
      say = (many) => [text(many ? ' have no stacks read' : ' has no stacks read')];
    }
    const e = groups.get(key);
    if (e) e.ranks.push(t);
    else groups.set(key, { ranks: [t], say });
  }
  const all = absent.map((t) => ix.rankOf[t] ?? 0);
  const many = all.length > 1;
  const whoAll = whoParts(ix, all);
  // Without stacks the snapshot cannot say that a rank never entered it, only that it is not seen in it.
  const seen = [...groups.keys()].some((k) => k !== 'unknown' && k !== 'unread');
  const out: DiagnosisPart[] = [...whoAll, text(seen ? ' never entered it: ' : ' not seen in it: ')];
  const list = [...groups.values()];
  if (list.length === 1 && list[0] !== undefined) {
    out.push(text(many ? 'they' : 'it'), ...list[0].say(many));
    return out;
  }
  list.slice(0, MAX_WHERE_GROUPS).forEach((grp, i) => {
    if (i > 0) out.push(text(', '));
    const ranks = grp.ranks.map((t) => ix.rankOf[t] ?? 0);
    out.push(...whoParts(ix, ranks), ...grp.say(ranks.length > 1));
  });
  const rest = list.length - MAX_WHERE_GROUPS;
  if (rest > 0) out.push(text(`, and ${rest} more places`));
  return out;
}

/** "rank 3" (a link) or "ranks 0-16382" (a range). */
function whoParts(ix: SnapshotIndex, ranks: readonly number[]): DiagnosisPart[] {
  if (ranks.length === 1) return [rankLink(ix, ranks[0] ?? 0, `rank ${ranks[0] ?? 0}`)];
  const r = compressRanks([...ranks]);
  return [{ kind: 'ranks', text: ranksPhrase(r), ranks: r }];
}

/** Peers as links: "rank 1", "ranks 1, 2 and 3" (each a link), or a range for many. */
function peerParts(ix: SnapshotIndex, targets: readonly number[]): DiagnosisPart[] {
  const ranks = targets.map((t) => ix.rankOf[t] ?? 0);
  if (ranks.length > 4) {
    const r = compressRanks(ranks);
    return [{ kind: 'ranks', text: ranksPhrase(r), ranks: r }];
  }
  const out: DiagnosisPart[] = [text(ranks.length === 1 ? 'rank ' : 'ranks ')];
  ranks.forEach((r, i) => {
    if (i > 0) out.push(text(i === ranks.length - 1 ? ' and ' : ', '));
    out.push(rankLink(ix, r, String(r)));
  });
  return out;
}

/** "the next rank", "rank r+2", "the previous rank and the next rank": peers at the same offsets from each rank r of a group. */
function offsetParts(ix: SnapshotIndex, f: RankFacts): DiagnosisPart[] {
  const n = ix.n;
  const offs = f.targets.map((t) => {
    const d = (((t - f.pos) % n) + n) % n;
    return d > n / 2 ? d - n : d;
  });
  const words = offs.map((d) =>
    d === 1 ? 'the next rank' : d === -1 ? 'the previous rank' : `rank r${d > 0 ? '+' : ''}${d}`,
  );
  return [text(words.join(' and '))];
}

function capitalFirst(parts: DiagnosisPart[]): DiagnosisPart[] {
  const [head, ...rest] = parts;
  if (head === undefined || head.kind === 'name') return parts;
  return [{ ...head, text: head.text.charAt(0).toUpperCase() + head.text.slice(1) }, ...rest];
}

function groupLine(ix: SnapshotIndex, members: RankFacts[], peers: DiagnosisPart[]): DiagnosisLine {
  const ranks = members.map((m) => m.rank);
  const first = members[0] as RankFacts;
  const many = members.length > 1;
  const who: DiagnosisPart = many
    ? { kind: 'ranks', text: ranksPhrase(compressRanks(ranks)), ranks: compressRanks(ranks) }
    : rankLink(ix, first.rank, `rank ${first.rank}`);
  return line(ranks, capitalFirst([who, ...first.describe(peers, many)]));
}

/** Blocked first (a call or a wait), then ranks that can go on, then unread ones. */
function weight(f: RankFacts): number {
  return f.key.startsWith('unread') ? 2 : f.key.startsWith('free') || f.key.startsWith('poll') ? 1 : 0;
}

export function diagnosisLines(
  ix: SnapshotIndex,
  g: WaitGraph,
  cycles: readonly DeadlockCycle[],
  opts: DiagnosisOptions = {},
  deadEnds: readonly DeadEndWait[] = [],
): DiagnosisLines {
  const maxGroups = opts.maxGroups ?? 12;
  const byKey = new Map<string, RankFacts[]>();
  for (let pos = 0; pos < ix.n; pos++) {
    const f = facts(ix, g, pos);
    const e = byKey.get(f.key);
    if (e) e.push(f);
    else byKey.set(f.key, [f]);
  }
  // Lines are built for the groups shown only: a 16,384-rank job can have thousands of groups.
  const groups: { w: number; first: number; build: () => DiagnosisLine }[] = [];
  const add = (members: RankFacts[], peers: (f: RankFacts) => DiagnosisPart[]) => {
    const f = members[0] as RankFacts;
    groups.push({ w: weight(f), first: f.rank, build: () => groupLine(ix, members, peers(f)) });
  };
  const absPeers = (f: RankFacts) => peerParts(ix, f.targets);
  for (const members of byKey.values()) {
    const first = members[0] as RankFacts;
    const abs = (f: RankFacts) => f.targets.join(',');
    if (first.targets.length === 0 || members.every((m) => abs(m) === abs(first))) {
      add(members, absPeers);
      continue;
    }
    const off = (f: RankFacts) => f.targets.map((t) => (((t - f.pos) % ix.n) + ix.n) % ix.n).join(',');
    if (members.every((m) => off(m) === off(first))) {
      add(members, (f) => offsetParts(ix, f));
      continue;
    }
    const sub = new Map<string, RankFacts[]>();
    for (const m of members) {
      const e = sub.get(abs(m));
      if (e) e.push(m);
      else sub.set(abs(m), [m]);
    }
    for (const s of sub.values()) add(s, absPeers);
  }
  // In rank order, as a person reads a job: rank 0's story first.
  groups.sort((a, b) => a.w - b.w || a.first - b.first);
  const c = cycles[0];
  const d = deadEnds[0];
  return {
    cycle: c === undefined ? null : cycleLine(ix, g, c, opts.maxCycleEdges ?? 8),
    deadEnd: d === undefined ? null : deadEndLine(ix, g, d, deadEnds.length),
    groups: groups.slice(0, maxGroups).map((x) => x.build()),
    groupTotal: groups.length,
  };
}

/**
 * One rank's line, as its group's line says it for that rank alone ("Rank 0 waits in MPI_Recv
 * for a message from rank 1, tag 99, on MPI_COMM_WORLD, at wrong_tag.c:36 in main"): the rank
 * view's first sentence. Null when the rank is not in the snapshot.
 */
export function rankDiagnosisLine(ix: SnapshotIndex, g: WaitGraph, rank: number): DiagnosisLine | null {
  const pos = ix.idxOf(rank);
  if (pos < 0 || ix.snap.ranks[pos] === undefined) return null;
  const f = facts(ix, g, pos);
  return groupLine(ix, [f], peerParts(ix, f.targets));
}

/** "Cycle: rank 0 waits for rank 1 (tag 99, wrong_tag.c:36) / rank 1 waits for rank 0 (tag 1, :47)". */
function cycleLine(ix: SnapshotIndex, g: WaitGraph, c: DeadlockCycle, maxEdges: number): DiagnosisLine {
  const parts: DiagnosisPart[] = [text('Cycle: ')];
  let lastFile: string | null = null;
  const shown = c.edges.length <= maxEdges ? c.edges : c.edges.slice(0, maxEdges - 1);
  shown.forEach((e, i) => {
    if (i > 0) parts.push(text(' / '));
    const pos = ix.idxOf(e.from);
    const r = ix.snap.ranks[pos];
    const u = r === undefined ? null : userFrame(r);
    parts.push(rankLink(ix, e.from, `rank ${e.from}`));
    const coll = e.ops.length > 0 && e.ops.every((o) => o.evidence === 'collective-call');
    const call = coll ? (g.calls.fn[pos] ?? null) : null;
    parts.push(text(call === null ? ' waits for ' : ' waits in '));
    if (call !== null) parts.push(name(call), text(' for '));
    // A receive from MPI_ANY_SOURCE waits for any other member: the cycle goes on through one of them.
    const any = e.ops.length > 0 && e.ops.every((o) => o.evidence === 'wildcard-receive');
    const others = any ? anySourcePeers(ix, pos, e.ops[0]?.commKey ?? '') : [];
    if (others.length > 1) parts.push(text('any of '), ...whoParts(ix, others));
    else parts.push(rankLink(ix, e.to, `rank ${e.to}`));
    const details: DiagnosisPart[] = [];
    const op = e.ops[0];
    const w =
      op === undefined
        ? undefined
        : rankWaits(g, pos).find((x) => x.op.index === op.index && x.op.queue === op.queue);
    const tag = w === undefined ? (op?.tag ?? null) : waitTag(ix, pos, w);
    const cell = edgeCell(e);
    if (tag !== null && !coll) {
      details.push(
        cell === null
          ? text(`tag ${tag}`)
          : { kind: 'cell', text: `tag ${tag}`, row: cell.row, col: cell.col },
      );
    }
    if (u !== null) {
      if (details.length > 0) details.push(text(', '));
      const file = u.frame.file === null ? null : basename(u.frame.file);
      const label =
        file !== null && file === lastFile && u.frame.line !== null ? `:${u.frame.line}` : placeText(u);
      lastFile = file;
      details.push({ kind: 'frame', text: label, rank: e.from, frame: { tid: u.tid, index: u.index } });
    }
    if (details.length > 0) parts.push(text(' ('), ...details, text(')'));
  });
  if (shown.length < c.edges.length) parts.push(text(` / and ${c.edges.length - shown.length} more waits`));
  return line(c.ranks, parts);
}

/** World ranks of the members of a communicator but the one at `pos`: who can answer its MPI_ANY_SOURCE receive. */
function anySourcePeers(ix: SnapshotIndex, pos: number, commKey: string): number[] {
  const keyId = commKey === '' ? -1 : ix.keyIdOf(commKey);
  if (keyId < 0) return [];
  const out: number[] = [];
  for (const m of commMembers(ix, keyId)) if (m !== pos) out.push(ix.rankOf[m] ?? 0);
  return out;
}

/**
 * "Rank 1 waits in MPI_Recv for a message from rank 0, tag 5, at a.c:31; rank 0 is in
 * MPI_Finalize (a.c:40) and will never send it." and, where the snapshot tells, why the message
 * never came.
 */
function deadEndLine(ix: SnapshotIndex, g: WaitGraph, d: DeadEndWait, shown: number): DiagnosisLine {
  const from = ix.idxOf(d.from);
  const to = ix.idxOf(d.to);
  // The wait on that rank itself, before a wildcard one it could also satisfy.
  const op = d.ops.find((o) => o.evidence !== 'wildcard-receive') ?? d.ops[0];
  const coll = d.ops.length > 0 && d.ops.every((o) => o.evidence === 'collective-call');
  const receiving = op?.queue === 'receives' && !coll;
  const fn = g.calls.fn[from] ?? null;
  const parts: DiagnosisPart[] = [rankLink(ix, d.from, `Rank ${d.from}`), text(' waits')];
  if (fn !== null) parts.push(text(' in '), name(fn));
  parts.push(text(coll ? ' for ' : receiving ? ' for a message from ' : ' to send to '));
  parts.push(rankLink(ix, d.to, `rank ${d.to}`));
  const w =
    op === undefined
      ? undefined
      : rankWaits(g, from).find((x) => x.op.index === op.index && x.op.queue === op.queue && x.target === to);
  const tag = coll ? null : w === undefined ? (op?.tag ?? null) : waitTag(ix, from, w);
  if (tag !== null) parts.push(text(`, tag ${tag}`));
  const here = placePart(ix, d.from);
  if (here !== null) parts.push(text(', at '), here);
  parts.push(text('; '), rankLink(ix, d.to, `rank ${d.to}`));
  const what = coll ? 'enter it' : receiving ? 'send it' : 'receive it';
  if (g.dead[to] === DEAD_FINAL) {
    const there = placePart(ix, d.to);
    parts.push(text(' is in '), name(g.calls.fn[to] ?? 'MPI_Finalize'));
    if (there !== null) parts.push(text(' ('), there, text(')'));
    parts.push(text(` and will never ${what}.`));
  } else {
    const st = ix.snap.ranks[to]?.state;
    const code = st === undefined || st.kind === 'ok' ? '' : ` (${jobText(st.code)})`;
    parts.push(text(` has exited${code} and will never ${what}.`));
  }
  if (receiving && op !== undefined && w !== undefined) parts.push(...whyNoMessage(ix, from, to, w, tag));
  if (shown > 1)
    parts.push(
      text(
        ` ${shown - 1 === 1 ? 'One more wait is' : `${shown - 1} more waits are`} on ranks that will never act again.`,
      ),
    );
  return line([d.from], parts);
}
