// Stacks from the core of a REAL hung rank: one rank of `collective_mismatch` under
// Open MPI and MPICH is unwound live (stopped, unwound, resumed), then dumped with Debian's gdb
// (`gcore`); the core's main thread must be in the same MPI call as the live unwind, with the
// same frames from that call outwards and the same arguments read from the core's memory.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ThreadStack } from '@mqd/model';
import { findMpiCall, type MpiFrame, publicMpiName } from '@mqd/model';
import { MPI_NAMES } from '@mqd/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { readCoreBytes, readCoreInfo } from '../src/inferior/core-file.js';
import { stopProcess } from '../src/inferior/stopper.js';
import { Unwinder } from '../src/inferior/unwind.js';
import { fixtureRig } from './fixture-rig.js';

const rig = fixtureRig();
const unwinder = new Unwinder();
const dir = mkdtempSync(join(tmpdir(), 'mqd-stacks-core-mpi-'));
afterAll(() => {
  unwinder.dispose();
  rmSync(dir, { recursive: true, force: true });
});

function threadsOf(r: ReturnType<Unwinder['unwind']>): ThreadStack[] {
  if ('code' in r) throw new Error(r.message);
  return r.threads;
}

/** The MPI call, its thread and its physical frame index (inlined frames share their caller's). */
function callOf(threads: readonly ThreadStack[]): { call: MpiFrame; thread: ThreadStack; physical: number } {
  const call = findMpiCall(threads);
  const thread = threads.find((t) => t.tid === call?.tid);
  if (!call || !thread) throw new Error(`no MPI call in ${JSON.stringify(threads.map((t) => t.frames))}`);
  let physical = 0;
  for (let i = 0; i < call.frameIndex; i++) if (!thread.frames[i]?.inlined) physical++;
  return { call, thread, physical };
}

/** From the outermost public MPI frame outwards: what cannot move while the rank is blocked. */
const outwards = (t: ThreadStack, at: number) =>
  t.frames.slice(at).map((f) => [f.function?.replace(/@.*$/, '') ?? null, f.pc, f.inlined]);

describe.each(MPI_NAMES)('%s: stacks from the core of a hung rank', (mpi) => {
  it('collective_mismatch rank 0: the core shows the live MPI call, frames and arguments', async () => {
    const job = await rig.launch({ mpi, fixture: 'collective_mismatch', np: 4 });
    const rank = job.ranks[0];
    if (!rank) throw new Error('no rank 0');
    const stop = stopProcess(rank.pid);
    if (!stop.ok) throw new Error(stop.error.message);
    let live: ThreadStack[];
    let liveArgs: Map<string, bigint>;
    const memFd = openSync(`/proc/${rank.pid}/mem`, 'r');
    try {
      live = threadsOf(unwinder.unwind(rank.pid, stop.value.tids));
      const { call, physical } = callOf(live);
      const buf = Buffer.alloc(8);
      liveArgs = unwinder.frameArgs(rank.pid, call.tid, physical, call.function, (a) =>
        readSync(memFd, buf, 0, 8, a) === 8 ? buf.readBigUInt64LE(0) : null,
      );
    } finally {
      closeSync(memFd);
      stop.value.resume();
    }
    unwinder.drop(rank.pid);

    const core = join(dir, `${mpi}-rank0.core`);
    execFileSync('gdb', ['-batch', '-nx', '-p', String(rank.pid), '-ex', `gcore ${core}`], {
      stdio: 'pipe',
      timeout: 90_000,
    });
    const key = -1 - MPI_NAMES.indexOf(mpi);
    try {
      const fromCore = threadsOf(unwinder.unwindCore(key, core));
      expect(fromCore.map((t) => [t.tid, t.main])).toEqual(live.map((t) => [t.tid, t.main]));
      const l = callOf(live);
      const c = callOf(fromCore);
      expect(l.call.function).toBe('MPI_Barrier');
      expect([c.call.function, c.call.tid, c.thread.main]).toEqual([l.call.function, rank.pid, true]);
      expect(fromCore[0]?.frames.some((f) => publicMpiName(f.function) === 'MPI_Barrier')).toBe(true);
      // The innermost frames are a polling loop and move between the two samples; the MPI call
      // and its callers do not.
      expect(outwards(c.thread, c.call.frameIndex)).toEqual(outwards(l.thread, l.call.frameIndex));
      // The call's arguments, read from the core's own memory (core-file.ts).
      expect([...liveArgs.keys()]).toContain('comm'); // both MPIs keep it readable (README)
      const info = readCoreInfo(core);
      if (!info.ok) throw new Error(info.error.message);
      const fd = openSync(core, 'r');
      try {
        const args = unwinder.frameArgs(key, c.call.tid, c.physical, c.call.function, (a) => {
          const b = readCoreBytes(info.value, fd, a, 8);
          return b ? Buffer.from(b).readBigUInt64LE(0) : null;
        });
        expect(args).toEqual(liveArgs);
      } finally {
        closeSync(fd);
      }
    } finally {
      unwinder.drop(key);
      rmSync(core, { force: true });
    }
  });
});
