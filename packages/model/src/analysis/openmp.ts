// OpenMP inside each rank: what the rank's OpenMP threads (RankSnapshot.openmp, read
// through the runtime's own OMPD library) say about why the rank does not move. A rank that
// looks stuck in MPI_Recv may be one thread of a team inside `omp single` while its teammates
// wait at the barrier for it; a rank that looks like it computes (in no MPI call) may be a team
// deadlocked on OpenMP locks. The threads are joined with their stacks (ThreadStack.tid: the
// MPI call each one is in) and with RankSnapshot.mpiCall; ranks with the same picture are
// grouped, their ranks written as ranges.
//
// State names are the OMPD library's (`ompd_enumerate_states`; LLVM: "ompt_state_*"). Only
// their families matter here (work, barrier, lock, taskwait...); an unknown name is shown as is
// and never taken for a wait.

import { codedText } from '../errors.js';
import { isBlockingCall } from '../mpi/calls.js';
import { foldMpiName, outermostMpiFrame } from '../mpi/frames.js';
import type { Frame, JobSnapshot, OmpThread, RankSnapshot } from '../snapshot-spec.js';
import { jobText, quoteName, ranksPhrase } from '../text.js';
import { compressRanks } from './ranges.js';
import { type ThreadMode, treeThreads } from './stack-tree.js';

/** What an OpenMP state means for whether the thread can move. */
export type OmpStateKind =
  /** Runs user code (work_serial, work_parallel, work_reduction). */
  | 'work'
  /** Waits at a barrier, implicit or explicit, for the rest of its team. */
  | 'barrier'
  /** Waits for its child tasks (taskwait). */
  | 'taskwait'
  /** Waits for the tasks of a taskgroup. */
  | 'taskgroup'
  /** Waits for mutual exclusion: an OpenMP lock, a critical section, an ordered region, an atomic. */
  | 'mutex'
  /** Waits for a target device. */
  | 'target'
  /** A pool thread with no work (outside any parallel region). */
  | 'idle'
  /** Inside the runtime (overhead) or a state this analysis does not know. */
  | 'other';

const STATE_PREFIX = /^ompt?_state_/;

/** "ompt_state_wait_barrier" -> "wait_barrier": the name without the runtime's prefix. */
export function ompStateLabel(state: string): string {
  return state.replace(STATE_PREFIX, '');
}

/** What an OpenMP state means, in words for sentences ("wait at a barrier"): never the runtime's token. */
const STATE_WORDS: Readonly<Record<string, string>> = {
  work_serial: 'run serial code',
  work_parallel: 'work in a parallel region',
  work_reduction: 'work on a reduction',
  wait_barrier: 'wait at a barrier',
  wait_barrier_implicit: 'wait at an implicit barrier',
  wait_barrier_implicit_parallel: 'wait at the barrier that ends a parallel region',
  wait_barrier_implicit_workshare: 'wait at the barrier that ends a worksharing construct',
  wait_barrier_explicit: 'wait at an explicit barrier',
  wait_barrier_implementation: "wait at the runtime's own barrier",
  wait_barrier_teams: 'wait at a teams barrier',
  wait_taskwait: 'wait in taskwait',
  wait_taskgroup: 'wait at the end of a taskgroup',
  wait_mutex: 'wait for a lock',
  wait_lock: 'wait for a lock',
  wait_nest_lock: 'wait for a nested lock',
  wait_critical: 'wait to enter a critical section',
  wait_atomic: 'wait for an atomic update',
  wait_ordered: 'wait for an ordered section',
  wait_target: 'wait for a target region',
  wait_target_map: 'wait for target data to map',
  wait_target_update: 'wait for a target update',
  idle: 'are idle (between parallel regions)',
  overhead: 'run OpenMP runtime code',
  undefined: 'are in no known state',
};

/** "wait at a barrier" for "ompt_state_wait_barrier"; unknown states with their words spaced. */
export function ompStateWords(state: string): string {
  const label = ompStateLabel(state);
  return STATE_WORDS[label] ?? `are in state ${label.replace(/_/g, ' ')}`;
}

export function ompStateKind(state: string): OmpStateKind {
  const s = ompStateLabel(state);
  if (s.startsWith('work_')) return 'work';
  if (s.startsWith('wait_barrier')) return 'barrier';
  if (s === 'wait_taskwait') return 'taskwait';
  if (s === 'wait_taskgroup') return 'taskgroup';
  if (
    s === 'wait_lock' ||
    s === 'wait_nest_lock' ||
    s === 'wait_mutex' ||
    s === 'wait_critical' ||
    s === 'wait_atomic' ||
    s === 'wait_ordered'
  )
    return 'mutex';
  if (s.startsWith('wait_target')) return 'target';
  if (s === 'idle') return 'idle';
  return 'other';
}

/** What the thread waits for in a mutual-exclusion state, in words ("lock", "critical section"). */
function mutexNoun(state: string): string {
  switch (ompStateLabel(state)) {
    case 'wait_critical':
      return 'critical section';
    case 'wait_ordered':
      return 'ordered region';
    case 'wait_atomic':
      return 'atomic';
    default:
      return 'lock';
  }
}

/** One OpenMP thread with what its stack adds: the MPI call it is inside, whether it is the main thread. */
export interface OmpThreadFacts extends OmpThread {
  /** The state without the runtime's prefix ("wait_barrier"). */
  readonly label: string;
  /** From the state; `taskwait` also for a working thread whose stack is in __kmpc_omp_taskwait (LLVM 16 sets no wait state there). */
  readonly kind: OmpStateKind;
  /** The public MPI call the thread is inside (PMPI_ folded), from its stack or the rank's mpiCall; null when none. */
  readonly mpiCall: string | null;
  /** That call blocks until peers act (mpi/calls.ts isBlockingCall). */
  readonly mpiBlocking: boolean;
  /** The process's main thread; null when its stack was not read. */
  readonly main: boolean | null;
}

/** Threads waiting for the same lock (or critical section...), by its wait id. */
export interface OmpLockWait {
  /** The wait id the runtime gives (the lock's address), or null when it gave none. */
  readonly waitId: string | null;
  /** "lock", "critical section", "ordered region", "atomic". */
  readonly noun: string;
  /** Linux thread ids of the waiters. */
  readonly tids: number[];
}

/**
 * Why the rank's OpenMP threads do not move:
 * - `mpi`: a thread is in a blocking MPI call and every other thread waits (barrier, taskwait,
 *   lock...) or is idle: the whole rank waits on that call.
 * - `openmp`: no thread works or is in an MPI call, and some wait for a lock (critical section,
 *   ordered region): nothing in the rank can release it, an OpenMP deadlock.
 * - `none`: some thread works (or the picture says nothing either way).
 */
export type OmpBlock = 'mpi' | 'openmp' | 'none';

export interface RankOpenMp {
  readonly rank: number;
  readonly runtime: string;
  readonly version: string;
  /** The runtime's threads, by tid, each with its stack's facts. */
  readonly threads: OmpThreadFacts[];
  /** The threads inside an MPI call. */
  readonly inMpi: OmpThreadFacts[];
  /** The rank's mpiCall is made by a thread the OpenMP runtime does not list (its tid), else null. */
  readonly mpiOutsideOpenMp: { readonly tid: number; readonly call: string } | null;
  /** Threads waiting for locks, grouped by wait id (first waiter's tid order). */
  readonly locks: OmpLockWait[];
  readonly block: OmpBlock;
  /** The picture in words, without the rank ("thread 0 in MPI_Recv inside a parallel region (team of 4), 3 threads wait_barrier"). */
  readonly text: string;
}

/** The outermost MPI call frame of a stack (innermost first), folded; null when none. */
function stackMpiCall(frames: readonly Frame[]): string | null {
  return outermostMpiFrame(frames, 'innermost-first')?.function ?? null;
}

/** A rank's OpenMP threads joined with its stacks and classified; null when it has no OpenMP data. */
export function rankOpenMp(r: RankSnapshot): RankOpenMp | null {
  const omp = r.openmp;
  if (omp === undefined || omp === null) return null;
  const stacks = new Map((r.threads ?? []).map((t) => [t.tid, t]));
  const call = r.mpiCall ?? null;
  const threads: OmpThreadFacts[] = [...omp.threads]
    .sort((a, b) => a.tid - b.tid)
    .map((t) => {
      const st = stacks.get(t.tid);
      let mpi = st === undefined ? null : stackMpiCall(st.frames);
      if (mpi === null && call !== null && call.tid === t.tid) mpi = foldMpiName(call.function);
      // LLVM 16 leaves a thread in taskwait in work_parallel: only its stack tells it waits.
      const kind = ompStateKind(t.state);
      const inTaskwait =
        kind === 'work' && st?.frames.some((f) => f.function?.startsWith('__kmpc_omp_taskwait')) === true;
      return {
        ...t,
        label: ompStateLabel(t.state),
        kind: inTaskwait ? 'taskwait' : kind,
        mpiCall: mpi,
        mpiBlocking: mpi !== null && isBlockingCall(mpi),
        main: st === undefined ? null : st.main,
      };
    });
  const inMpi = threads.filter((t) => t.mpiCall !== null);
  const known = new Set(threads.map((t) => t.tid));
  const mpiOutsideOpenMp =
    call !== null && !known.has(call.tid) ? { tid: call.tid, call: foldMpiName(call.function) } : null;

  const lockMap = new Map<string, OmpLockWait>();
  for (const t of threads) {
    if (t.kind !== 'mutex' || t.mpiCall !== null) continue;
    const noun = mutexNoun(t.state);
    const key = `${noun}\u0000${t.waitId ?? ''}`;
    const e = lockMap.get(key);
    if (e) e.tids.push(t.tid);
    else lockMap.set(key, { waitId: t.waitId, noun, tids: [t.tid] });
  }
  const locks = [...lockMap.values()];

  const waits = (k: OmpStateKind) =>
    k === 'barrier' || k === 'taskwait' || k === 'taskgroup' || k === 'mutex' || k === 'idle';
  let block: OmpBlock = 'none';
  const blockingMpi =
    inMpi.some((t) => t.mpiBlocking) || (mpiOutsideOpenMp !== null && isBlockingCall(mpiOutsideOpenMp.call));
  const rest = threads.filter((t) => t.mpiCall === null);
  if (
    blockingMpi &&
    inMpi.every((t) => t.mpiBlocking) &&
    rest.every((t) => waits(t.kind)) &&
    rest.some((t) => t.kind !== 'idle')
  )
    block = 'mpi';
  else if (
    inMpi.length === 0 &&
    mpiOutsideOpenMp === null &&
    threads.length > 0 &&
    threads.every((t) => waits(t.kind)) &&
    threads.some((t) => t.kind === 'mutex')
  )
    block = 'openmp';

  const base = {
    rank: r.rank,
    runtime: omp.runtime,
    version: omp.version,
    threads,
    inMpi,
    mpiOutsideOpenMp,
    locks,
    block,
  };
  return { ...base, text: describeRank(base, true) };
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** "thread 2" (its OpenMP thread number), or "a thread" when the runtime did not say. */
function who(t: OmpThreadFacts): string {
  return t.threadNum === null ? 'a thread' : `thread ${t.threadNum}`;
}

/** Where a thread runs: its task and the parallel region around it. */
function where(t: OmpThreadFacts): string {
  const p = t.parallel;
  const region =
    p === null || p.level === 0
      ? 'outside any parallel region'
      : p.level === 1
        ? `a parallel region (team of ${p.teamSize})`
        : `a level ${p.level} parallel region inside level ${p.level - 1} (team of ${p.teamSize})`;
  const task = t.task;
  if (task?.kind === 'explicit') {
    const fn = task.function === null ? '' : ` (${quoteName(task.function)})`;
    return p === null || p.level === 0 ? `an explicit task${fn}` : `an explicit task${fn} in ${region}`;
  }
  if (task?.kind === 'target') return `a target task in ${region}`;
  if (p === null || p.level === 0) return 'the initial task, outside any parallel region';
  return region;
}

function joinAnd(xs: readonly string[]): string {
  if (xs.length <= 1) return xs[0] ?? '';
  return `${xs.slice(0, -1).join(', ')} and ${xs.at(-1)}`;
}

type RankParts = Omit<RankOpenMp, 'text'>;

/** The rank's picture in words; `addresses` = name lock addresses (not when grouping ranks). */
function describeRank(r: RankParts, addresses: boolean): string {
  const parts: string[] = [];
  if (r.threads.length === 0) return 'the OpenMP runtime lists no threads';
  for (const t of r.inMpi) parts.push(`${who(t)} in ${jobText(t.mpiCall ?? '')} inside ${where(t)}`);
  if (r.mpiOutsideOpenMp !== null) {
    parts.push(
      `a thread the OpenMP runtime does not list${addresses ? ` (tid ${r.mpiOutsideOpenMp.tid})` : ''} in ${jobText(r.mpiOutsideOpenMp.call)}`,
    );
  }
  // Lock waiters, then the other threads counted by state.
  const lockWaiters = r.locks.reduce((n, l) => n + l.tids.length, 0);
  if (r.locks.length > 0) {
    const nouns = new Set(r.locks.map((l) => l.noun));
    const noun = nouns.size === 1 ? (r.locks[0]?.noun ?? 'lock') : 'lock';
    const ids = r.locks.map((l) => l.waitId ?? 'unknown');
    const named = addresses ? ` ${joinAnd(ids)}` : '';
    if (r.block === 'openmp') {
      parts.push(
        r.locks.length > 1
          ? `${plural(lockWaiters, 'thread')} deadlocked on OpenMP ${noun}s${named} (each waits for a ${noun} another holds)`
          : `${plural(lockWaiters, 'thread')} wait for OpenMP ${noun}${named}, which no running thread can release`,
      );
    } else if (r.locks.length === 1) {
      parts.push(`${plural(lockWaiters, 'thread')} wait for OpenMP ${noun}${named}`);
    } else {
      parts.push(`${plural(lockWaiters, 'thread')} wait for ${r.locks.length} OpenMP ${noun}s${named}`);
    }
  }
  const taskInMpi = r.inMpi.some((t) => t.task?.kind === 'explicit');
  const counts = new Map<string, number>();
  const taskwaits: OmpThreadFacts[] = [];
  for (const t of r.threads) {
    if (t.mpiCall !== null || (t.kind === 'mutex' && r.locks.length > 0)) continue;
    if (t.kind === 'taskwait') taskwaits.push(t);
    else counts.set(t.label, (counts.get(t.label) ?? 0) + 1);
  }
  for (const t of taskwaits) {
    parts.push(
      taskInMpi
        ? `${who(t)} waits in taskwait for its child tasks (the task in MPI among them)`
        : `${who(t)} waits in taskwait`,
    );
  }
  const byCount = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  for (const [label, n] of byCount) parts.push(`${plural(n, 'thread')} ${ompStateWords(label)}`);
  if (r.block === 'openmp') parts.push('no MPI call pending');
  return parts.join(', ');
}

/** Ranks with the same OpenMP picture. */
export interface OpenMpGroup {
  readonly ranks: string;
  readonly rankCount: number;
  readonly block: OmpBlock;
  /** "ranks 0-1: thread 0 in MPI_Recv inside a parallel region (team of 4), 3 threads wait_barrier". */
  readonly text: string;
}

/** Ranks whose OpenMP state could not be read, by error code. */
export interface OpenMpUnavailable {
  readonly code: string;
  /** The first such rank's message (codes repeat the same hint). */
  readonly message: string;
  readonly ranks: string;
  readonly rankCount: number;
  /** "OpenMP state unavailable on ranks 0-3: MQD_E_OMPD_DISABLED: ...". */
  readonly text: string;
}

export interface OpenMpSummary {
  /** Ranks whose OpenMP runtime was read. */
  readonly readRanks: number;
  /** Largest group first, at most maxGroups of them. */
  readonly groups: OpenMpGroup[];
  readonly groupTotal: number;
  readonly unavailable: OpenMpUnavailable[];
  /** Ranks read with no OpenMP runtime (openmp null), as ranges; "" when none. */
  readonly noRuntime: string;
  /** Ranks whose OpenMP threads can never proceed (block `openmp`), as ranges. */
  readonly deadlocked: string;
  readonly deadlockedRanks: number[];
  /** Ranks whose whole team waits on a thread in a blocking MPI call (block `mpi`), as ranges. */
  readonly waitOnMpi: string;
  /** The summary in lines for views and the CLI: the groups, ranks without a runtime, the unavailable. */
  readonly lines: string[];
}

export interface OpenMpOptions {
  /** At most this many groups (default 12); groupTotal still counts all. */
  readonly maxGroups?: number;
}

/** The OpenMP picture of every rank, grouped across ranks. Ranks never read for OpenMP are left out. */
export function analyzeOpenMp(snap: JobSnapshot, opts: OpenMpOptions = {}): OpenMpSummary {
  const groups = new Map<string, { block: OmpBlock; ranks: number[]; first: RankOpenMp }>();
  const errors = new Map<string, { error: NonNullable<RankSnapshot['openmpError']>; ranks: number[] }>();
  const noRuntime: number[] = [];
  const deadlocked: number[] = [];
  const waitOnMpi: number[] = [];
  let readRanks = 0;
  for (const r of snap.ranks) {
    if (r.openmpError !== undefined) {
      const e = errors.get(r.openmpError.code);
      if (e) e.ranks.push(r.rank);
      else errors.set(r.openmpError.code, { error: r.openmpError, ranks: [r.rank] });
    }
    if (r.openmp === null) noRuntime.push(r.rank);
    const o = rankOpenMp(r);
    if (o === null) continue;
    readRanks++;
    if (o.block === 'openmp') deadlocked.push(r.rank);
    else if (o.block === 'mpi') waitOnMpi.push(r.rank);
    const key = `${o.block}\u0000${describeRank(o, false)}`;
    const g = groups.get(key);
    if (g) g.ranks.push(r.rank);
    else groups.set(key, { block: o.block, ranks: [r.rank], first: o });
  }
  const all = [...groups.values()]
    .map((g) => {
      const ranks = compressRanks(g.ranks);
      const body = g.ranks.length === 1 ? g.first.text : describeRank(g.first, false);
      return { ranks, rankCount: g.ranks.length, block: g.block, text: `${ranksPhrase(ranks)}: ${body}` };
    })
    .sort((a, b) => b.rankCount - a.rankCount || firstRank(a.ranks) - firstRank(b.ranks));
  const shown = all.slice(0, opts.maxGroups ?? 12);
  const unavailable = [...errors.values()].map(({ error, ranks }) => {
    const r = compressRanks(ranks);
    const message = jobText(codedText(error), 512);
    return {
      code: error.code,
      message: error.message,
      ranks: r,
      rankCount: ranks.length,
      text: `OpenMP state unavailable on ${ranksPhrase(r)}: ${message}`,
    };
  });
  const lines = shown.map((g) => g.text);
  if (all.length > shown.length) lines.push(`${all.length - shown.length} more groups of ranks`);
  const none = compressRanks(noRuntime);
  if (none !== '' && (readRanks > 0 || unavailable.length > 0))
    lines.push(`${ranksPhrase(none)}: no OpenMP runtime`);
  for (const u of unavailable) lines.push(u.text);
  return {
    readRanks,
    groups: shown,
    groupTotal: all.length,
    unavailable,
    noRuntime: none,
    deadlocked: compressRanks(deadlocked),
    deadlockedRanks: deadlocked,
    waitOnMpi: compressRanks(waitOnMpi),
    lines,
  };
}

function firstRank(ranges: string): number {
  return Number.parseInt(ranges, 10) || 0;
}

/** Threads of one OpenMP state through a stack frame (ompStatesThrough). */
export interface OmpStateCount {
  /** The state without the runtime's prefix ("wait_barrier"); "" for threads with no ompState. */
  readonly label: string;
  readonly count: number;
}

/**
 * The OpenMP states of the threads whose stack passes through a frame of the merged stack tree:
 * `path` is the node's function names, outermost first (StackNode parents up to the root); only
 * the threads the tree used (`mode`) count. Threads without an ompState are counted under "".
 * Most threads first. Empty when no thread passes through or none carries an ompState.
 */
export function ompStatesThrough(
  snap: JobSnapshot,
  path: readonly string[],
  mode: ThreadMode,
): OmpStateCount[] {
  const counts = new Map<string, number>();
  let any = false;
  for (const r of snap.ranks) {
    for (const t of treeThreads(r, mode)) {
      const n = t.frames.length;
      if (n < path.length) continue;
      let same = true;
      for (let i = 0; i < path.length && same; i++) {
        same = (t.frames[n - 1 - i]?.function ?? '??') === path[i];
      }
      if (!same) continue;
      const label = t.ompState === undefined ? '' : ompStateLabel(t.ompState);
      if (label !== '') any = true;
      counts.set(label, (counts.get(label) ?? 0) + 1);
    }
  }
  if (!any) return [];
  return [...counts]
    .map(([label, count]) => ({ label, count }))
    .sort((a, b) => b.count - a.count || (a.label < b.label ? -1 : 1));
}
