// The value reader on a stopped process without MPI (our conformance target, parked MQDTEST_DEPTH
// calls deep): a parameter of the innermost frame of a function, a static, a parameter of main,
// read in the stop and compared with gdb's `print` on the same process; an unknown name and an
// unknown frame coded; every native block the reader allocated freed by its dispose.
import { execFileSync } from 'node:child_process';
import { MAX_FRAMES_PER_THREAD } from '@mqd/model';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DebugFileRegistry } from '../src/inferior/debug-file-registry.js';
import { InferiorMemory } from '../src/inferior/memory.js';
import { ProcessImage } from '../src/inferior/process-image.js';
import { stopProcess } from '../src/inferior/stopper.js';
import { Unwinder } from '../src/inferior/unwind.js';
import { nativeAllocations } from '../src/native/alloc.js';
import { ValueReader } from '../src/values/read.js';
import { buildConformance, killAllTargets, startParked } from './conformance-kit.js';

const b = buildConformance();
const unwinder = new Unwinder();
afterEach(() => killAllTargets());
afterAll(() => unwinder.dispose());

const READS = [
  { expr: 'n', frame: 'mqdtest_deep' },
  { expr: 'mqdtest_forever' },
  { expr: 'argc', frame: 'main' },
  { expr: '(long)argc', frame: 'main' },
  { expr: '*argv[0]', frame: 'main' },
] as const;

describe('reading values in a stop (no MPI)', () => {
  it('reads parameters and statics as gdb prints them, codes the failures, frees its blocks', async () => {
    const t = await startParked(b, { MQDTEST_DEPTH: '3' });
    const image = ProcessImage.load(t.pid, new DebugFileRegistry());
    if (!image.ok) throw new Error(image.error.message);
    const before = nativeAllocations().owned;
    const reader = new ValueReader();
    const stop = stopProcess(t.pid);
    if (!stop.ok) throw new Error(stop.error.message);
    let values: ReturnType<ValueReader['read']>;
    try {
      const stacks = unwinder.unwind(t.pid, stop.value.tids, MAX_FRAMES_PER_THREAD, image.value.dwarfAt);
      if ('code' in stacks) throw new Error(stacks.message);
      const mem = new InferiorMemory(t.pid, 1 << 20);
      values = reader.read(
        [...READS, { expr: 'no_such_name' }, { expr: 'n', frame: 'no_such_function' }, { expr: 'n +' }],
        {
          pid: t.pid,
          image: image.value,
          mem: { bytes: (a, n) => mem.readBytes(a, n) },
          threads: stacks.threads,
          unwinder,
        },
      );
    } finally {
      stop.value.resume();
      reader.dispose();
    }
    expect(nativeAllocations().owned).toBe(before);
    const commands = ['set width 0', 'thread 1'];
    for (const r of READS)
      commands.push(`frame function ${'frame' in r ? r.frame : 'mqdtest_deep'}`, `print ${r.expr}`);
    const out = execFileSync(
      'gdb',
      ['-batch', '-nx', '-p', String(t.pid), ...commands.flatMap((c) => ['-ex', c])],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 60_000,
      },
    );
    const theirs = out
      .split('\n')
      .map((l) => /^\$\d+ = (.*)$/.exec(l)?.[1])
      .filter((x) => x !== undefined);
    expect(values.slice(0, READS.length).map((v) => v.value?.text ?? v.error?.message)).toEqual(theirs);
    expect(theirs.slice(0, 2)).toEqual(['0', '1']);
    expect(theirs).toHaveLength(READS.length);
    expect(values[0]).toMatchObject({ frame: 'mqdtest_deep', value: { type: 'int', number: 0 } });
    expect(values.slice(READS.length).map((v) => v.error?.code)).toEqual([
      'MQD_E_EVAL_UNKNOWN_NAME',
      'MQD_E_EVAL_FRAME',
      'MQD_E_EVAL_SYNTAX',
    ]);
  });
});
