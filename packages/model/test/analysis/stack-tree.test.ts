// The stack tree as the Stacks view reads it: user frames by function and
// line, straight chains as one row, the frames inside an MPI call folded, the runtime's own
// threads hidden, and outliers judged on the user's frames and the MPI call only. Real recorded
// snapshots (fixtures/golden) where the point is what MPI really shows; hand-built stacks
// where a case must be spelt out exactly.
import {
  buildStackTree,
  type Frame,
  formatStackTree,
  isRuntimeThread,
  type JobSnapshot,
  type StackTree,
  searchStackTree,
  stackNodePlace,
  stackRows,
  syntheticStacksJob,
  type ThreadStack,
  validateSnapshot,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { GOLDEN_MPIS, golden } from '../golden.js';
import { ompiJob } from './fixtures.js';

const LIBC = '/usr/lib/x86_64-linux-gnu/libc.so.6';
const LIBMPI = '/opt/openmpi/lib/libmpi.so.40';
const LIBOPAL = '/opt/openmpi/lib/libopen-pal.so.40';
const LIBMPICH = '/opt/mpich/lib/libmpi.so.12';
const LIBGOMP = '/usr/lib/x86_64-linux-gnu/libgomp.so.1';
const APP = '/home/u/app';

interface F {
  readonly fn: string | null;
  readonly module?: string;
  readonly file?: string;
  readonly line?: number;
}

function moduleOf(fn: string | null): string {
  if (fn === null) return APP;
  if (/^(P?MPI_|ompi_|mca_)/.test(fn)) return LIBMPI;
  if (fn.startsWith('opal_')) return LIBOPAL;
  if (fn.startsWith('_') || ['clone3', 'start_thread', 'poll', 'epoll_wait'].includes(fn)) return LIBC;
  return APP;
}

function frame(f: F): Frame {
  const module = f.module ?? moduleOf(f.fn);
  return {
    pc: '0x401000',
    function: f.fn,
    module,
    file: f.file ?? (module === APP ? '/home/u/src/app.c' : null),
    line: f.line ?? (module === APP ? 10 : null),
    inlined: false,
  };
}

/** A thread from its path, outermost first (strings are frames with default places). */
function thread(tid: number, path: (string | F)[], main = true): ThreadStack {
  const frames = path.map((p) => frame(typeof p === 'string' ? { fn: p } : p)).reverse();
  return { tid, name: 'app', main, frames, truncated: false, error: null };
}

const BASE = ['_start', '__libc_start_main', '__libc_start_call_main'];

/** A job of n ranks whose threads come from `f` (pids are 1000 + rank). */
function job(n: number, f: (r: number, pid: number) => ThreadStack[]): JobSnapshot {
  const snap = ompiJob(n, () => ({}));
  return { ...snap, ranks: snap.ranks.map((r) => ({ ...r, threads: f(r.rank, r.pid), mpiCall: null })) };
}

const fnOf = (t: StackTree, id: number) => t.nodes[id]?.function;
const rowText = (t: StackTree, rows: ReturnType<typeof stackRows>) =>
  rows.map(
    (r) =>
      `${'  '.repeat(r.level - 1)}${r.nodes.map((id) => fnOf(t, id)).join(' › ')}${r.expandable ? (r.expanded ? ' ▾' : ' ▸') : ''}`,
  );

describe('stack tree by function and line', () => {
  it.each(GOLDEN_MPIS)('%s wrong_tag: two stacks, main at wrong_tag.c:36 and :47, one by function', (mpi) => {
    const snap = golden(mpi, 'wrong_tag');
    const others = `1-${snap.ranks.length - 1}`;
    const byLine = buildStackTree(snap, { by: 'line' });
    expect(byLine.by).toBe('line');
    expect(byLine.stackTotal).toBe(2);
    const mains = byLine.nodes.filter((n) => n.function === 'main');
    expect(mains.map((n) => [stackNodePlace(n), n.ranks, n.kind])).toEqual([
      ['wrong_tag.c:36', '0', 'user'],
      ['wrong_tag.c:47', others, 'user'],
    ]);
    // Each main calls the MPI receive: the call has a row of its own, kind mpi-call.
    for (const m of mains) {
      const call = byLine.nodes[m.children[0] ?? -1];
      expect(call?.kind).toBe('mpi-call');
      expect(call?.function).toMatch(/^P?MPI_Recv$/);
      // The library's own line is no part of its identity, and no place is shown for it.
      expect(call?.line).toBeNull();
    }
    expect(byLine.stacks.map((s) => [s.ranks, s.frames.at(-2)])).toEqual([
      [others, 'main'],
      ['0', 'main'],
    ]);
    // Rank 0 waits for a tag the others never send: by line it stands apart, but 1 of 4 ranks
    // is a quarter of the job, not an outlier.
    expect(byLine.outliers).toBe('');
    expect(searchStackTree(byLine, 'wrong_tag.c:47').matches.size).toBe(1);
    expect(formatStackTree(byLine)).toContain('main at wrong_tag.c:36');

    const byFunction = buildStackTree(snap);
    expect(byFunction.by).toBe('function');
    expect(byFunction.stackTotal).toBe(1);
    expect(byFunction.outliers).toBe('');
    expect(byFunction.nodes.filter((n) => n.function === 'main').map((n) => [n.ranks, n.line])).toEqual([
      [`0-${snap.ranks.length - 1}`, null],
    ]);
  });

  it('lines inside the library never split a node', () => {
    const snap = job(2, (r, pid) => [
      thread(pid, [...BASE, 'main', { fn: 'PMPI_Recv', file: '/src/ompi/precv.c', line: 80 + r }]),
    ]);
    const t = buildStackTree(snap, { by: 'line' });
    expect(t.nodes.filter((n) => n.function === 'PMPI_Recv').map((n) => n.ranks)).toEqual(['0-1']);
    expect(t.classTotal).toBe(1);
    expect(t.stackTotal).toBe(1);
  });
});

describe('rows: chains and folding', () => {
  const snap = job(4, (r, pid) => [
    thread(pid, [
      ...BASE,
      'main',
      'solve',
      ...(r < 3
        ? ['MPI_Barrier', 'ompi_coll_base_barrier', 'opal_progress']
        : ['MPI_Allreduce', 'ompi_coll_base_allreduce', 'opal_progress']),
    ]),
  ]);
  const t = buildStackTree(snap, { by: 'line' });

  it('shows a straight chain as one row, the MPI calls folded, their library frames under them', () => {
    const rows = stackRows(t);
    expect(rowText(t, rows)).toEqual([
      '_start › __libc_start_main › __libc_start_call_main › main › solve ▾',
      '  MPI_Barrier ▸',
      '  MPI_Allreduce ▸',
    ]);
    const barrier = rows[1];
    expect(barrier).toMatchObject({ level: 2, parentRow: 0, posInSet: 1, setSize: 2, foldedByDefault: true });
    expect(t.nodes[barrier?.node ?? -1]).toMatchObject({ kind: 'mpi-call', ranks: '0-2', rankCount: 3 });
    expect(rows[0]).toMatchObject({ chainLength: 5, level: 1, setSize: 1 });
  });

  it('opens a folded call when toggled or on a search path, inside frames chained too', () => {
    const barrier = t.nodes.find((n) => n.function === 'MPI_Barrier')?.id ?? -1;
    expect(rowText(t, stackRows(t, { toggled: new Set([barrier]) }))).toEqual([
      '_start › __libc_start_main › __libc_start_call_main › main › solve ▾',
      '  MPI_Barrier ▾',
      '    ompi_coll_base_barrier › opal_progress',
      '  MPI_Allreduce ▸',
    ]);
    const found = searchStackTree(t, 'allreduce');
    const rows = stackRows(t, { open: found.onPath });
    expect(rowText(t, rows).at(-1)).toBe('    ompi_coll_base_allreduce › opal_progress');
    // Closing the chain row hides everything under it.
    const solve = t.nodes.find((n) => n.function === 'solve')?.id ?? -1;
    expect(rowText(t, stackRows(t, { toggled: new Set([solve]) }))).toEqual([
      '_start › __libc_start_main › __libc_start_call_main › main › solve ▸',
    ]);
  });

  it('opens a chain into a row per frame, and shows no chains when asked', () => {
    const head = t.roots[0] ?? -1;
    const rows = stackRows(t, { unchained: new Set([head]) });
    expect(rowText(t, rows)).toEqual([
      '_start ▾',
      '  __libc_start_main ▾',
      '    __libc_start_call_main ▾',
      '      main ▾',
      '        solve ▾',
      '          MPI_Barrier ▸',
      '          MPI_Allreduce ▸',
    ]);
    expect(rows.map((r) => r.parentRow)).toEqual([-1, 0, 1, 2, 3, 4, 4]);
    expect(rows.every((r) => r.chainHead === head || r.level === 6)).toBe(true);
    expect(stackRows(t, { chains: false }).map((r) => r.nodes.length)).toEqual([1, 1, 1, 1, 1, 1, 1]);
  });

  it('ends a chain at a search match or the selected node, so the row shows that frame', () => {
    const main = t.nodes.find((n) => n.function === 'main')?.id ?? -1;
    expect(rowText(t, stackRows(t, { breakAt: new Set([main]) })).slice(0, 2)).toEqual([
      '_start › __libc_start_main › __libc_start_call_main › main ▾',
      '  solve ▾',
    ]);
  });

  it('breaks a chain where threads end or the rank set changes', () => {
    const s = job(2, (r, pid) => [thread(pid, r === 0 ? [...BASE, 'main'] : [...BASE, 'main', 'work'])]);
    const tt = buildStackTree(s);
    expect(rowText(tt, stackRows(tt))).toEqual([
      '_start › __libc_start_main › __libc_start_call_main › main ▾',
      '  work',
    ]);
  });
});

describe('MPI frames', () => {
  it("recognises MPICH 4's internal_X as the MPI call (folded, the stack cut there)", () => {
    const snap = job(2, (r, pid) => [
      thread(pid, [
        ...BASE,
        'main',
        { fn: 'internal_Waitall', module: LIBMPICH },
        { fn: 'MPIR_Waitall', module: LIBMPICH },
        { fn: r === 0 ? 'MPIDI_progress_test' : 'MPIDI_OFI_progress', module: LIBMPICH },
      ]),
    ]);
    const t = buildStackTree(snap, { by: 'line' });
    const call = t.nodes.find((n) => n.function === 'internal_Waitall');
    expect(call?.kind).toBe('mpi-call');
    expect(t.nodes.find((n) => n.function === 'MPIR_Waitall')?.kind).toBe('mpi-inside');
    expect(t.classTotal).toBe(2);
    expect(t.stackTotal).toBe(1);
    expect(t.stacks[0]?.frames.at(-1)).toBe('internal_Waitall');
    expect(rowText(t, stackRows(t))).toEqual([
      '_start › __libc_start_main › __libc_start_call_main › main ▾',
      '  internal_Waitall ▸',
    ]);
    // A user's function of the same name is no MPI call.
    const own = buildStackTree(job(1, (_r, pid) => [thread(pid, [...BASE, 'main', 'internal_Step'])]));
    expect(own.nodes.find((n) => n.function === 'internal_Step')?.kind).not.toBe('mpi-call');
  });
});

describe('outliers on the user frames', () => {
  it('a transient progress frame inside the MPI call makes no outlier', () => {
    const snap = job(200, (r, pid) => [
      thread(pid, [
        ...BASE,
        'main',
        'MPI_Recv',
        'mca_pml_ob1_recv',
        ...(r === 7 ? ['opal_progress', 'mca_btl_vader_component_progress'] : ['ompi_request_default_wait']),
      ]),
    ]);
    const t = buildStackTree(snap, { by: 'line' });
    expect(t.classTotal).toBe(2);
    expect(t.stackTotal).toBe(1);
    expect(t.stacks[0]).toMatchObject({ ranks: '0-199', rankCount: 200 });
    expect(t.outliers).toBe('');
  });

  it('a rank elsewhere in the user code is one', () => {
    const snap = job(200, (r, pid) => [
      thread(pid, [
        ...BASE,
        'main',
        ...(r === 7 ? [{ fn: 'write_checkpoint' }] : ['MPI_Barrier', 'ompi_coll']),
      ]),
    ]);
    expect(buildStackTree(snap).outliers).toBe('7');
    // The same call from another line: by line an outlier, by function not.
    const line = job(200, (r, pid) => [
      thread(pid, [...BASE, { fn: 'main', line: r === 7 ? 20 : 10 }, 'MPI_Barrier', 'ompi_coll']),
    ]);
    expect(buildStackTree(line, { by: 'line' }).outliers).toBe('7');
    expect(buildStackTree(line).outliers).toBe('');
  });
});

describe('runtime threads', () => {
  const progress = (pid: number) =>
    thread(pid, ['clone3', 'start_thread', { fn: 'progress_engine', module: LIBOPAL }, 'epoll_wait'], false);
  const ucx = (pid: number) =>
    thread(
      pid,
      [
        'clone3',
        'start_thread',
        { fn: 'ucs_async_thread_func', module: '/opt/ucx/lib/libucs.so.0' },
        'epoll_wait',
      ],
      false,
    );
  const omp = (pid: number) =>
    thread(
      pid,
      [
        'clone3',
        'start_thread',
        { fn: 'gomp_thread_start', module: LIBGOMP },
        { fn: 'do_wait', module: LIBGOMP },
      ],
      false,
    );
  const snap = job(4, (r, pid) => [
    thread(pid, [...BASE, 'main', 'MPI_Barrier']),
    progress(pid + 1),
    ...(r === 0 ? [ucx(pid + 2), omp(pid + 3)] : []),
  ]);

  it("knows the runtime's service threads from the user's", () => {
    expect(isRuntimeThread(progress(5))).toBe(true);
    expect(isRuntimeThread(ucx(5))).toBe(true);
    // A thread of the user's own, or OpenMP's workers, are not the runtime's.
    expect(isRuntimeThread(omp(5))).toBe(false);
    expect(isRuntimeThread(thread(5, ['clone3', 'start_thread', 'reader_loop', 'poll'], false))).toBe(false);
    // Nor is a main thread, nor a thread in an MPI call.
    expect(isRuntimeThread(thread(5, ['clone3', 'start_thread', 'progress_engine', 'poll']))).toBe(false);
    expect(isRuntimeThread(thread(5, ['clone3', 'start_thread', 'PMPI_Recv'], false))).toBe(false);
  });

  it('hides them with threads "all" when asked, and counts them either way', () => {
    expect(validateSnapshot(snap).ok).toBe(true);
    const shown = buildStackTree(snap, { threads: 'all', by: 'line' });
    expect(shown).toMatchObject({
      runtimeThreads: 5,
      runtimeThreadRanks: '0-3',
      runtimeThreadsHidden: false,
    });
    expect(shown.threadCount).toBe(10);
    const hidden = buildStackTree(snap, { threads: 'all', by: 'line', hideRuntimeThreads: true });
    expect(hidden).toMatchObject({
      runtimeThreads: 5,
      runtimeThreadRanks: '0-3',
      runtimeThreadsHidden: true,
    });
    expect(hidden.threadCount).toBe(5);
    expect(
      hidden.nodes.some((n) => n.function === 'progress_engine' || n.function === 'ucs_async_thread_func'),
    ).toBe(false);
    // The OpenMP worker stays; per node, threads and ranks are counted apart.
    const start = hidden.nodes.find((n) => n.function === 'start_thread');
    expect(start).toMatchObject({ ranks: '0', rankCount: 1, threadCount: 1 });
    const root = hidden.nodes[hidden.roots[0] ?? -1];
    expect(root).toMatchObject({ function: '_start', rankCount: 4, threadCount: 4 });
    // Main threads only: nothing to hide, nothing counted.
    expect(buildStackTree(snap, { hideRuntimeThreads: true })).toMatchObject({
      runtimeThreads: 0,
      runtimeThreadsHidden: false,
      threadCount: 4,
    });
  });

  it('the synthetic job: one progress thread per 8 ranks, hidden', () => {
    const s = syntheticStacksJob({ ranks: 64, seed: 1 });
    const t = buildStackTree(s, { threads: 'all', by: 'line', hideRuntimeThreads: true });
    expect(t.runtimeThreads).toBe(8);
    expect(t.threadCount).toBe(64);
  });
});
