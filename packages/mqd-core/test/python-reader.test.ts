// The CPython frame reader on real interpreters without MPI: each sleeps three calls deep in
// fixtures/python/sleep_nested.py, and its frames (function, file, line) are read the way a
// rank's are, stopped, through the process's memory. Debian's python3 (a static interpreter
// without debug info: the offsets table), pyenv's 3.11 (libpython with DWARF: the layout from
// it, and the table checked against it) where installed, and a 3.12 the reader does not know.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { done, markerLine, PYTHON, PYTHON_FIXTURES, pending, waitFor } from '@mqd/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { DebugFileRegistry } from '../src/inferior/debug-file-registry.js';
import { InferiorMemory } from '../src/inferior/memory.js';
import { ProcessImage } from '../src/inferior/process-image.js';
import { stopProcess } from '../src/inferior/stopper.js';
import { rankMemory } from '../src/mqs/libraries/library.js';
import { DWARF_FIELDS, PYTHON_311 } from '../src/python/layout.js';
import { isPythonPath, type PythonRead, readPython } from '../src/python/read.js';

const SCRIPT = join(PYTHON_FIXTURES, 'sleep_nested.py');
const PYENV_311 = '/root/.pyenv/versions/3.11.7';
const PYENV_312 = '/root/.pyenv/versions/3.12.1/bin/python3.12';
const PYENV_310 = '/root/.pyenv/versions/3.10.13/bin/python3.10';
const pyenv311 = join(PYENV_311, 'bin/python3.11');

let child: ChildProcess | null = null;
afterEach(() => {
  if (child?.pid !== undefined && child.exitCode === null) child.kill('SIGKILL');
  child = null;
});

/** Starts `python` on the script and resolves with its pid once it printed its READY line. */
function startSleeper(python: string): Promise<number> {
  const c = spawn(python, [SCRIPT], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: '/usr/bin:/bin' } });
  child = c;
  return new Promise((resolve, reject) => {
    let out = '';
    c.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /MQD_PY_READY pid=(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    c.once('exit', (code) => reject(new Error(`${python} exited (${code}) before its READY line: ${out}`)));
  });
}

/** Waits until the main thread sleeps in the kernel (state S), not still between calls. */
async function untilSleeping(pid: number, exe?: string): Promise<void> {
  await waitFor(
    () => {
      if (exe !== undefined && readlinkSync(`/proc/${pid}/exe`) !== exe) return pending('not exec-ed yet');
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      return state === 'S' ? done(true) : pending(`state ${state}`);
    },
    { timeoutMs: 10_000, what: `pid ${pid} to sleep` },
  );
}

function readStopped(pid: number): { read: PythonRead | null; image: ProcessImage } {
  const image = ProcessImage.load(pid, new DebugFileRegistry());
  if (!image.ok) throw new Error(image.error.message);
  const stop = stopProcess(pid);
  if (!stop.ok) throw new Error(stop.error.message);
  try {
    const mem = new InferiorMemory(pid, 1 << 20);
    const rm = rankMemory(image.value, (a, l) => mem.readBytes(a, l));
    return { read: readPython(image.value, rm, stop.value.tids, 256), image: image.value };
  } finally {
    stop.value.resume();
  }
}

const expected = () => [
  `Waiter.wait@sleep_nested.py:${markerLine('sleep_nested', 'sleep')}`,
  `outer.<locals>.inner@sleep_nested.py:${markerLine('sleep_nested', 'inner')}`,
  `outer@sleep_nested.py:${markerLine('sleep_nested', 'outer')}`,
  `<module>@sleep_nested.py:${markerLine('sleep_nested', 'module')}`,
];

function framesOf(read: PythonRead | null, pid: number): string[] {
  const t = read?.threads.get(pid);
  return (t?.frames ?? []).map((f) => `${f.function}@${f.file.split('/').pop()}:${f.line}`);
}

describe('CPython frames of a sleeping interpreter', () => {
  it("Debian's python3 3.11 (no debug info): the offsets table gives every frame at its line", async () => {
    const pid = await startSleeper(PYTHON);
    await untilSleeping(pid);
    const { read } = readStopped(pid);
    expect(read?.version).toMatch(/^3\.11\.\d+$/);
    expect(read?.error).toBeNull();
    expect(framesOf(read, pid)).toEqual(expected());
    const t = read?.threads.get(pid);
    expect(t?.truncated).toBe(false);
    expect(t?.frames[0]?.file).toBe(SCRIPT);
    // Python-to-Python calls run in one evaluation loop in 3.11: only the module's frame is an entry.
    expect(t?.frames.map((f) => f.entry)).toEqual([false, false, false, true]);
  });

  it.skipIf(!existsSync(pyenv311))(
    "pyenv's 3.11 (libpython with DWARF): the layout from DWARF, equal to the table, and the same frames",
    async () => {
      const pid = await startSleeper(pyenv311);
      await untilSleeping(pid);
      const { read, image } = readStopped(pid);
      expect(read?.error).toBeNull();
      expect(framesOf(read, pid)).toEqual(expected());
      const lib = image.modules.find((m) => m.path.endsWith('libpython3.11.so.1.0'));
      if (!lib) throw new Error('pyenv 3.11 maps no libpython3.11.so.1.0');
      expect(isPythonPath(lib.path)).toBe(true);
      expect(lib.file.hasDwarf()).toBe(true);
      const f = lib.file;
      const offset = (type: string, field: string): number => {
        const t = f.findType(type);
        return t ? f.fieldOffset(t, field) : -1;
      };
      for (const [key, type, field] of DWARF_FIELDS) {
        // PyInterpreterState.threads.head: the nested struct's offset plus the member's.
        const off =
          key === 'interpThreadsHead' ? offset('_is', 'threads') + offset(type, field) : offset(type, field);
        expect(off, `${type}.${field} in ${lib.path}'s DWARF`).toBe(PYTHON_311[key]);
      }
    },
  );

  it.skipIf(!existsSync(PYENV_312))(
    'a CPython 3.12: MQD_E_PYTHON_UNSUPPORTED with its version, no frames',
    async () => {
      const pid = await startSleeper(PYENV_312);
      await untilSleeping(pid);
      const { read } = readStopped(pid);
      expect(read?.version).toBe('3.12.1');
      expect(read?.error?.code).toBe('MQD_E_PYTHON_UNSUPPORTED');
      expect(read?.error?.message).toContain('CPython 3.12.1');
      expect(read?.threads.size).toBe(0);
    },
  );

  it.skipIf(!existsSync(PYENV_310))(
    'a CPython 3.10 (no Py_Version): MQD_E_PYTHON_UNSUPPORTED naming 3.10',
    async () => {
      const pid = await startSleeper(PYENV_310);
      await untilSleeping(pid);
      const { read } = readStopped(pid);
      expect(read?.version).toBe('3.10');
      expect(read?.error?.code).toBe('MQD_E_PYTHON_UNSUPPORTED');
      expect(read?.error?.message).toContain('is CPython 3.10 (no Py_Version)');
      expect(read?.threads.size).toBe(0);
    },
  );

  it('a process that maps no CPython reads as null', async () => {
    const c = spawn('/bin/sleep', ['600'], { stdio: 'ignore' });
    child = c;
    const pid = c.pid ?? 0;
    await untilSleeping(pid, '/usr/bin/sleep');
    expect(readStopped(pid).read).toBeNull();
  });
});
