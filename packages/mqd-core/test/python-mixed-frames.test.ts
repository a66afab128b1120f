// One stack per CPython thread (model mixedFrames, threadUserFrame, the stack tree): the Python
// frames in place of the evaluation-loop frames they belong to, split at entry frames, the
// interpreter's glue and mpi4py's wrappers left out. Synthetic stacks shaped like a real one
// (python-frames.mpi.test.ts reads real ones), with a C extension calling back into Python so
// two runs of the evaluation loop are on one stack.
import {
  buildStackTree,
  type Frame,
  formatStackTree,
  type JobSnapshot,
  mixedFrames,
  type PythonFrame,
  pythonCallOf,
  type RankSnapshot,
  SNAPSHOT_SCHEMA_VERSION,
  type ThreadStack,
  threadUserFrame,
  validateSnapshot,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';

const PY = '/usr/bin/python3.11';
const MPI4PY = '/usr/lib/python3/dist-packages/mpi4py/MPI.cpython-311-x86_64-linux-gnu.so';
const c = (fn: string | null, module: string, pc = 0x1000): Frame => ({
  pc: `0x${pc.toString(16)}`,
  function: fn,
  module,
  file: null,
  line: null,
  inlined: false,
});
const p = (fn: string, line: number, entry = false): PythonFrame => ({
  function: fn,
  file: '/job/ring.py',
  line,
  entry,
});

/** MPI_Recv from `step` (ring.py:12), called through a C extension's callback from `main` and the module. */
function thread(): ThreadStack {
  return {
    tid: 10,
    name: 'python3',
    main: true,
    frames: [
      c('__sched_yield', '/usr/lib/x86_64-linux-gnu/libc.so.6'),
      c('PMPI_Recv', '/opt/mpi/lib/libmpi.so.40'),
      c(null, MPI4PY),
      c(null, MPI4PY),
      c('PyObject_Vectorcall', PY),
      c('_PyEval_EvalFrameDefault', PY),
      c('_PyFunction_Vectorcall', PY),
      c('ext_callback', '/job/libext.so'),
      c('_PyEval_EvalFrameDefault', PY),
      c('PyEval_EvalCode', PY),
      c('Py_RunMain', PY),
      c('__libc_start_main', '/usr/lib/x86_64-linux-gnu/libc.so.6'),
      c('_start', PY),
    ],
    truncated: false,
    error: null,
    python: {
      frames: [p('step', 12), p('on_event', 30, true), p('main', 40), p('<module>', 44, true)],
      truncated: false,
    },
  };
}

describe('a CPython thread as one stack', () => {
  it('puts each run of Python frames in place of its evaluation-loop frame and drops the glue', () => {
    const m = mixedFrames(thread());
    expect(m.frames.map((f) => f.function)).toEqual([
      '__sched_yield',
      'PMPI_Recv',
      'step',
      'on_event',
      'ext_callback',
      'main',
      '<module>',
      '__libc_start_main',
    ]);
    // Each frame points at the C frame it stands for: the Python ones at their evaluation loop.
    expect(m.at).toEqual([0, 1, 5, 5, 7, 8, 8, 11]);
    expect(m.python).toEqual([false, false, true, true, false, true, true, false]);
  });

  it("the user's frame is the innermost Python frame, at its evaluation loop's index", () => {
    const u = threadUserFrame(thread());
    expect(u).toEqual({
      tid: 10,
      index: 5,
      frame: { pc: '0x0', function: 'step', module: null, file: '/job/ring.py', line: 12, inlined: false },
    });
  });

  it('a thread without Python frames keeps its frames; old snapshots (no python field) still open', () => {
    const t = thread();
    const { python: _, ...old } = t;
    expect(mixedFrames(old).frames).toEqual(old.frames);
    const rank: RankSnapshot = {
      rank: 0,
      pid: 100,
      host: 'h',
      state: { kind: 'ok' },
      pausedMicros: 10,
      communicators: [],
      threads: [old],
      mpiCall: { function: 'MPI_Recv', tid: 10, args: null },
    };
    const snap: JobSnapshot = {
      schemaVersion: SNAPSHOT_SCHEMA_VERSION,
      takenAt: '2026-01-01T00:00:00.000Z',
      durationMicros: 1,
      mpi: { library: 'openmpi', dll: null, lengthUnit: 'bytes' },
      ranks: [rank, { ...rank, rank: 1, pid: 101, threads: [t], python: { version: '3.11.2', error: null } }],
    };
    const v = validateSnapshot(snap);
    expect(v.ok ? 'valid' : v.error.message).toBe('valid');
    // By line: rank 1's Python frames are nodes of their own, right above the MPI call.
    const text = formatStackTree(buildStackTree(snap, { by: 'line' }));
    expect(text).toContain('[1] step at ring.py:12\n');
    expect(text).toMatch(/\[1\] step at ring\.py:12\n\s+\[1\] PMPI_Recv/);
    // The interpreter's frames are rank 0's only (its thread has no Python frames to show instead).
    const glue = text.split('\n').filter((l) => /_PyEval|PyObject_|Py_RunMain|\?\?/.test(l));
    expect(glue.length).toBeGreaterThan(0);
    expect(glue.filter((l) => !l.trim().startsWith('[0] '))).toEqual([]);
  });
});

describe('the mpi4py call a Python line makes (pythonCallOf)', () => {
  const snapWith = (lineText: string): { snap: JobSnapshot; r: RankSnapshot } => {
    const r: RankSnapshot = {
      rank: 0,
      pid: 100,
      host: 'h',
      state: { kind: 'ok' },
      pausedMicros: 10,
      communicators: [],
      threads: [thread()],
      sources: [{ file: '/job/ring.py', line: 12, first: 11, lines: ['def step(comm):', lineText, ''] }],
    };
    const snap: JobSnapshot = {
      schemaVersion: SNAPSHOT_SCHEMA_VERSION,
      takenAt: '2026-01-01T00:00:00.000Z',
      durationMicros: 1,
      mpi: { library: 'openmpi', dll: null, lengthUnit: 'bytes' },
      ranks: [r],
    };
    return { snap, r };
  };
  const callOn = (lineText: string, fn: string) => {
    const { snap, r } = snapWith(lineText);
    const u = threadUserFrame(r.threads?.[0] as ThreadStack);
    if (u === null) throw new Error('no user frame');
    return pythonCallOf(snap, r, u, fn);
  };

  it('names the method whose name is the MPI call, with its receiver', () => {
    expect(callOn('    x = comm.recv(buf, source=left, tag=compute(7))', 'MPI_Recv')).toBe('comm.recv');
    expect(callOn('    MPI.COMM_WORLD.Ssend([a, MPI.INT], dest=1)', 'MPI_Ssend')).toBe(
      'MPI.COMM_WORLD.Ssend',
    );
    // mpi4py's pickling recv probes first: a rank in MPI_Mprobe is in comm.recv.
    expect(callOn('    return comm.recv(source=0)', 'MPI_Mprobe')).toBe('comm.recv');
  });

  it('names nothing when the line makes no such call', () => {
    expect(callOn('    helper.wait(comm)', 'MPI_Recv')).toBeNull();
    expect(callOn('    comm.send(x, dest=1)', 'MPI_Recv')).toBeNull();
  });
});
