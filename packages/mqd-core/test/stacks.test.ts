import { closeSync, openSync, readSync } from 'node:fs';
import { findMpiCall, MAX_FRAMES_PER_THREAD, publicMpiName, validateSnapshot } from '@mqd/model';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { processState, Snapshotter, tracerPid } from '../src/index.js';
import { DebugFileRegistry } from '../src/inferior/debug-file-registry.js';
import { ProcessImage } from '../src/inferior/process-image.js';
import { stopProcess } from '../src/inferior/stopper.js';
import { Unwinder } from '../src/inferior/unwind.js';
import { buildConformance, killAllTargets, startParked, startTarget } from './conformance-kit.js';

const b = buildConformance();
const unwinder = new Unwinder();
const snapshotter = new Snapshotter();
afterEach(() => killAllTargets());
afterAll(async () => {
  unwinder.dispose();
  await snapshotter.dispose();
});

function unwindStopped(pid: number, maxFrames?: number) {
  const stop = stopProcess(pid);
  if (!stop.ok) throw new Error(stop.error.message);
  try {
    return unwinder.unwind(pid, stop.value.tids, maxFrames);
  } finally {
    stop.value.resume();
  }
}

describe('unwinding a stopped process (no MPI)', () => {
  it('unwinds every thread, main first, with functions and file:line', async () => {
    const t = await startParked(b, { MQDTEST_THREADS: '3', MQDTEST_DEPTH: '10' });
    const r = unwindStopped(t.pid);
    if ('code' in r) throw new Error(r.message);
    expect(r.threads.map((x) => x.main)).toEqual([true, false, false, false]);
    expect(r.threads[0]?.tid).toBe(t.pid);
    const main = r.threads[0];
    if (!main) throw new Error('no main thread');
    expect(main.name).toBe('mqdtest_target');
    const names = main.frames.map((f) => f.function);
    expect(names.filter((n) => n === 'mqdtest_deep')).toHaveLength(11);
    expect(names.slice(-4, -1)).toEqual([
      'main',
      '__libc_start_call_main',
      expect.stringMatching(/^__libc_start_main/),
    ]);
    const deep = main.frames.find((f) => f.function === 'mqdtest_deep');
    expect(deep?.file).toMatch(/conformance\/target\.c$/);
    expect(deep?.line).toBeGreaterThan(0);
    expect(deep?.module).toBe(b.target);
    expect([main.truncated, main.error]).toEqual([false, null]);
    for (const th of r.threads.slice(1)) {
      expect(th.frames.some((f) => f.function === 'mqdtest_thread')).toBe(true);
      expect(th.error).toBeNull();
    }
    expect(findMpiCall(r.threads)).toBeNull();
    expect(tracerPid(t.pid)).toBe(0);
  });

  it('cuts a deep stack at the cap and says so', async () => {
    const t = await startParked(b, { MQDTEST_DEPTH: '40' });
    const r = unwindStopped(t.pid, 5);
    if ('code' in r) throw new Error(r.message);
    expect(r.threads[0]?.frames).toHaveLength(5);
    expect(r.threads[0]?.truncated).toBe(true);
    const full = unwindStopped(t.pid);
    if ('code' in full) throw new Error(full.message);
    expect(full.threads[0]?.truncated).toBe(false);
    expect(full.threads[0]?.frames.length).toBeGreaterThan(44);
  });

  it('a warm unwind re-uses the Dwfl and the symbol cache and gives the same stacks', async () => {
    const t = await startParked(b, { MQDTEST_DEPTH: '3' });
    const a = unwindStopped(t.pid);
    const cached = unwinder.cachedSymbols;
    const again = unwindStopped(t.pid);
    expect(unwinder.cachedSymbols).toBe(cached);
    expect(again).toEqual(a);
  });

  it("symbolises through the files' shared DWARF (ProcessImage.dwarfAt) exactly as through the process's own Dwfl", async () => {
    // The session hands the unwinder each file's DebugFile module, so a file's DWARF is loaded
    // once per reader instead of once per rank; stacks and arguments must not change with it.
    const t = await startParked(b, { MQDTEST_THREADS: '2', MQDTEST_DEPTH: '6' });
    const image = ProcessImage.load(t.pid, new DebugFileRegistry());
    if (!image.ok) throw new Error(image.error.message);
    const asked: bigint[] = [];
    const dwarfAt = (pc: bigint) => {
      asked.push(pc);
      return image.value.dwarfAt(pc);
    };
    const own = new Unwinder();
    const shared = new Unwinder();
    const stop = stopProcess(t.pid);
    if (!stop.ok) throw new Error(stop.error.message);
    const fd = openSync(`/proc/${t.pid}/mem`, 'r');
    const word = Buffer.alloc(8);
    const read = (a: bigint) => (readSync(fd, word, 0, 8, a) === 8 ? word.readBigUInt64LE(0) : null);
    try {
      const a = own.unwind(t.pid, stop.value.tids);
      const s = shared.unwind(t.pid, stop.value.tids, MAX_FRAMES_PER_THREAD, dwarfAt);
      if ('code' in a) throw new Error(a.message);
      expect(s).toEqual(a);
      expect(a.threads[0]?.frames.filter((f) => f.function === 'mqdtest_deep')).toHaveLength(7);
      // Every pc symbolised the slow way was looked up in the shared files, the target's own among them.
      expect(asked.length).toBe(shared.cachedSymbols);
      expect(asked.some((pc) => image.value.moduleAt(pc)?.path === b.target)).toBe(true);
      // Arguments (location lists, frame base) read the same DWARF the same way.
      const ownArgs = own.frameArgs(t.pid, t.pid, 3, 'mqdtest_deep', read);
      expect(ownArgs.size).toBeGreaterThan(0);
      expect(shared.frameArgs(t.pid, t.pid, 3, 'mqdtest_deep', read, dwarfAt)).toEqual(ownArgs);
    } finally {
      closeSync(fd);
      stop.value.resume();
      own.dispose();
      shared.dispose();
    }
  });

  it('threads that are not ptrace-stopped by us give MQD_E_NO_STACKS, and stay untraced', async () => {
    const t = await startTarget(b.target, b.dll, 0, 0);
    const r = unwinder.unwind(t.pid, [t.pid]);
    expect('code' in r && r.code).toBe('MQD_E_NO_STACKS');
    expect(tracerPid(t.pid)).toBe(0);
    expect(processState(t.pid)).toMatch(/^[RS]$/);
  });

  it('a snapshot carries the stacks of the same stop; stacks: false leaves them out', async () => {
    const t = await startParked(b, { MQDTEST_THREADS: '1' });
    const { snapshot } = await snapshotter.snapshot([{ pid: t.pid, rank: 0 }], { dll: b.dll });
    const v = validateSnapshot(snapshot);
    expect(v.ok ? 'valid' : v.error.message).toBe('valid');
    const rank = snapshot.ranks[0];
    expect(rank?.state.kind).toBe('ok');
    expect(rank?.threads?.map((x) => x.main)).toEqual([true, false]);
    expect(rank?.mpiCall).toBeNull(); // in no MPI call: "computing"
    expect(rank?.stacksError).toBeUndefined();
    const off = await snapshotter.snapshot([{ pid: t.pid, rank: 0 }], { dll: b.dll, stacks: false });
    expect(off.snapshot.ranks[0]?.threads).toBeUndefined();
    expect(off.snapshot.ranks[0]?.mpiCall).toBeUndefined();
    expect(off.snapshot.ranks[0]?.state.kind).toBe('ok');
  });
});

describe('the MPI call on a stack', () => {
  const frame = (fn: string | null) => ({
    pc: '0x1',
    function: fn,
    module: null,
    file: null,
    line: null,
    inlined: false,
  });
  const thread = (tid: number, main: boolean, fns: (string | null)[]) => ({
    tid,
    name: null,
    main,
    frames: fns.map(frame),
    truncated: false,
    error: null,
  });

  it('folds PMPI_ to MPI_ and ignores internal names', () => {
    expect(publicMpiName('PMPI_Ssend')).toBe('MPI_Ssend');
    expect(publicMpiName('MPI_Barrier')).toBe('MPI_Barrier');
    expect(publicMpiName('MPIR_Barrier_impl')).toBeNull();
    expect(publicMpiName('MPID_Progress_wait')).toBeNull();
    expect(publicMpiName('mca_pml_ob1_send')).toBeNull();
    expect(publicMpiName(null)).toBeNull();
  });

  it('takes the outermost public frame, the main thread first', () => {
    const other = thread(11, false, ['poll', 'PMPI_Recv', 'worker']);
    const main = thread(10, true, [
      'sched_yield',
      'MPIR_Wait',
      'PMPI_Wait',
      'MPI_Waitall_wrapper',
      'MPI_Sendrecv',
      'main',
    ]);
    expect(findMpiCall([other, main])).toEqual({ function: 'MPI_Sendrecv', tid: 10, frameIndex: 4 });
    const idle = thread(10, true, ['pthread_join', 'main']);
    expect(findMpiCall([idle, other])).toEqual({ function: 'MPI_Recv', tid: 11, frameIndex: 1 });
    expect(findMpiCall([idle])).toBeNull();
  });
});

describe('findMpiCall', () => {
  const frame = (fn: string, module: string) => ({
    pc: '0x1',
    function: fn,
    module,
    file: null,
    line: null,
    inlined: false,
  });
  const thread = (frames: ReturnType<typeof frame>[]) => ({
    tid: 7,
    main: true,
    name: null,
    frames,
    truncated: false,
    error: null,
  });
  it("takes MPICH's internal_X for MPI_X when PMPI_X left no frame (a tail call), only in the MPI library", () => {
    const lib = '/opt/mpich/lib/libmpi.so.12';
    const tail = thread([
      frame('MPIR_Waitall', lib),
      frame('internal_Waitall', lib),
      frame('main', '/a.out'),
    ]);
    expect(findMpiCall([tail] as never)).toEqual({ function: 'MPI_Waitall', tid: 7, frameIndex: 1 });
    // PMPI_X present: it is the outermost, as before.
    const both = thread([frame('internal_Recv', lib), frame('PMPI_Recv', lib), frame('main', '/a.out')]);
    expect(findMpiCall([both] as never)?.function).toBe('MPI_Recv');
    expect(findMpiCall([both] as never)?.frameIndex).toBe(1);
    // A user's own internal_Foo is not an MPI call.
    const user = thread([frame('internal_Compute', '/home/u/a.out'), frame('main', '/home/u/a.out')]);
    expect(findMpiCall([user] as never)).toBeNull();
  });
});
