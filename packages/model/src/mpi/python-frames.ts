// A CPython thread's stack as its user reads it: the Python frames (ThreadStack.python) in place
// of the evaluation-loop C frames they belong to, the interpreter's other C frames (its calls,
// its start-up) and mpi4py's Cython wrappers left out, so the Python line that made an MPI call
// sits right above the call (`step` at ring.py:12 › MPI_Recv).
import type { Frame, PythonFrame, ThreadStack } from '../snapshot-spec.js';

/** The C function of one run of CPython's evaluation loop. */
export const PYTHON_EVAL_FUNCTION = '_PyEval_EvalFrameDefault';
/** The interpreter's own file: `python3.11` (static) or `libpython3.11.so.1.0`. */
const PYTHON_MODULE = /(?:^|\/)(?:lib)?python\d\.\d+[a-z]*(?:\.so[.\d]*)?$/;
/** mpi4py's extension module (`mpi4py/MPI.cpython-311-x86_64-linux-gnu.so`): Cython wrappers of the MPI calls. */
const MPI4PY_MODULE = /(?:^|\/)mpi4py\/MPI\.[^/]*\.so$/;

/** A Python frame as a Frame: its function, file and line, no module and no pc. */
export function pythonFrameAsFrame(p: PythonFrame): Frame {
  return { pc: '0x0', function: p.function, module: null, file: p.file, line: p.line, inlined: false };
}

/** The frames of a thread with its Python frames in place, and for each the index in ThreadStack.frames it stands at. */
export interface MixedFrames {
  readonly frames: readonly Frame[];
  /** frames[i] is ThreadStack.frames[at[i]] or one of the Python frames of that evaluation-loop frame. */
  readonly at: readonly number[];
  /** frames[i] is a Python frame. */
  readonly python: readonly boolean[];
}

const cache = new WeakMap<ThreadStack, MixedFrames>();

/**
 * The thread's frames, innermost first, with its Python frames in place: each evaluation-loop
 * frame gives way to the Python frames of its run (up to and including the next entry frame,
 * PythonFrame.entry), and the interpreter's and mpi4py's other C frames are left out. A thread
 * without Python frames keeps its frames as they are.
 */
export function mixedFrames(t: ThreadStack): MixedFrames {
  const hit = cache.get(t);
  if (hit) return hit;
  const py = t.python?.frames ?? [];
  let out: MixedFrames;
  if (py.length === 0 || !t.frames.some((f) => f.function === PYTHON_EVAL_FUNCTION)) {
    out = { frames: t.frames, at: t.frames.map((_, i) => i), python: t.frames.map(() => false) };
  } else {
    const frames: Frame[] = [];
    const at: number[] = [];
    const python: boolean[] = [];
    let next = 0;
    t.frames.forEach((f, i) => {
      if (f.function === PYTHON_EVAL_FUNCTION) {
        while (next < py.length) {
          const p = py[next++];
          if (p === undefined) break;
          frames.push(pythonFrameAsFrame(p));
          at.push(i);
          python.push(true);
          if (p.entry) break;
        }
        return;
      }
      const mod = f.module ?? '';
      if (PYTHON_MODULE.test(mod) || MPI4PY_MODULE.test(mod)) return;
      frames.push(f);
      at.push(i);
      python.push(false);
    });
    out = { frames, at, python };
  }
  cache.set(t, out);
  return out;
}
