// MQD's stacks against gdb's, on the same frozen state (Debian's gdb as the independent oracle).
// One gdb session attaches to a real hung rank, prints its main thread's backtrace and writes
// a core (`gcore`) before it detaches; MQD unwinds that core. So both read the very same
// registers and memory, and every frame from the MPI library's innermost one out to `main`
// must be the same function in the same order: each level of inlining included (MPICH ch4
// holds a probe's polling loop five functions deep in PMPI_Mprobe, four of them inlined).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { ThreadStack } from '@mqd/model';
import { fixtureBinary, MPI_LABELS, mpiMatrix, mpiPrefix } from '@mqd/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { Unwinder } from '../src/inferior/unwind.js';
import { fixtureRig } from './fixture-rig.js';

const rig = fixtureRig();
const unwinder = new Unwinder();
const dir = mkdtempSync(join(tmpdir(), 'mqd-stacks-gdb-'));
afterAll(() => {
  unwinder.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * A function name as both sides print it: no symbol version (`@GLIBC_2.2.5`), no GCC clone
 * suffix (`.constprop.0`, `.isra.0`, `.part.0`, `.cold`; gdb names a clone by its DWARF name).
 */
const comparable = (name: string | null): string | null =>
  name === null || name === '??'
    ? null
    : name.replace(/@.*$/, '').replace(/(\.(constprop|isra|part|cold|lto_priv)(\.\d+)?)+$/, '');

/** A frame as both sides give it: the function and the source line (null where there is none). */
type Named = readonly [string | null, number | null];

/** gdb's `bt`, innermost first (frame numbers as gdb gives them; a repeated number once). */
function gdbFrames(output: string): Named[] {
  const byNumber = new Map<number, Named>();
  for (const line of output.split('\n')) {
    const m = /^#(\d+)\s+(?:0x[0-9a-f]+ in )?(\S+) \(.*?\)(?: at \S+:(\d+))?/.exec(line);
    if (m?.[1] === undefined || m[2] === undefined) continue;
    byNumber.set(Number(m[1]), [comparable(m[2]), m[3] === undefined ? null : Number(m[3])]);
  }
  const out: Named[] = [];
  for (let i = 0; byNumber.has(i); i++) out.push(byNumber.get(i) ?? [null, null]);
  return out;
}

describe('gdb backtrace parsing', () => {
  it('reads the frames of a bt, inlined and physical, once each', () => {
    const bt = [
      '#0  0x00007f91233244d7 in MPIDI_POSIX_eager_recv_begin (...) at posix_eager_impl.h:26',
      '#0  0x00007f91233244d7 in MPIDI_POSIX_eager_recv_begin (...) at posix_eager_impl.h:26',
      '#1  MPIDI_POSIX_progress_recv (...) at posix_progress.h:28',
      '#2  0x00007f37b837d5d0 in ?? () from /lib/x86_64-linux-gnu/libfabric.so.1',
      '#3  0x00007f37b7d23db4 in MPIDI_NM_progress.constprop.0 (...) at ofi_progress.h:95',
      '#4  0x000055f52231f30d in main (...) at probe_wait.c:17',
    ].join('\n');
    expect(gdbFrames(bt)).toEqual([
      ['MPIDI_POSIX_eager_recv_begin', 26],
      ['MPIDI_POSIX_progress_recv', 28],
      [null, null],
      ['MPIDI_NM_progress', 95],
      ['main', 17],
    ]);
    expect(comparable('__pthread_mutex_lock@GLIBC_2.2.5')).toBe('__pthread_mutex_lock');
  });
});

/** The hung calls compared: a probe's polling loop and a blocked synchronous send. */
const CASES = [
  { fixture: 'probe_wait', call: 'MPI_Mprobe' },
  { fixture: 'ring_ssend', call: 'MPI_Ssend' },
] as const;

describe.each(mpiMatrix())('%s: stacks equal gdb on the same state', (mpi) => {
  it.each(CASES)(
    '$fixture rank 0: every frame and line from the MPI library out to main, each inline level included',
    async ({ fixture, call }) => {
      const job = await rig.launch({ mpi, fixture, np: 2 });
      const rank = job.ranks[0];
      if (!rank) throw new Error('no rank 0');
      const core = join(dir, `${mpi}-${fixture}.core`);
      const key = -100 - mpiMatrix().indexOf(mpi);
      try {
        const commands = ['set width 0', 'set print frame-arguments none', 'thread 1', 'bt', `gcore ${core}`];
        const bt = execFileSync(
          'gdb',
          ['-batch', '-nx', '-p', String(rank.pid), ...commands.flatMap((c) => ['-ex', c])],
          {
            encoding: 'utf8',
            stdio: ['ignore', 'pipe', 'pipe'],
            timeout: 90_000,
          },
        );
        const theirs = gdbFrames(bt);
        const r = unwinder.unwindCore(key, core);
        if ('code' in r) throw new Error(r.message);
        const main: ThreadStack | undefined = r.threads.find((t) => t.main);
        if (!main) throw new Error('no main thread in the core');
        // Ours from the innermost frame the MPI build or the fixture holds (a module is named by
        // its soname or, for the executable, its path), out to main.
        const built = new Set(
          readdirSync(join(mpiPrefix(mpi), 'lib'), { recursive: true }).map((f) => basename(String(f))),
        );
        const exe = fixtureBinary(mpi, fixture);
        const first = main.frames.findIndex((f) => f.module === exe || built.has(f.module ?? ''));
        const last = main.frames.findIndex((f) => f.function === 'main');
        const ours: Named[] = main.frames.slice(first, last + 1).map((f) => [comparable(f.function), f.line]);
        const show = (xs: readonly Named[]) => xs.map(([f, l]) => `${f}:${l}`).join(' < ');
        const where = `${MPI_LABELS[mpi]} ${fixture}: gdb ${show(theirs)}; MQD ${show(main.frames.map((f) => [f.function, f.line]))}`;
        expect([where, first >= 0 && last > first]).toEqual([where, true]);
        const from = theirs.findIndex(([f]) => f === ours[0]?.[0]);
        const toMain = theirs.findIndex(([f]) => f === 'main');
        expect([where, theirs.slice(from, toMain + 1)]).toEqual([where, ours]);
        // The chain holds the call's public frame and (every library inlines something on the
        // way to it) at least one inlined frame of the MPI library.
        expect(
          ours.some(([f]) => f?.endsWith(call)),
          where,
        ).toBe(true);
        expect(
          main.frames.slice(first, last).some((f) => f.inlined),
          where,
        ).toBe(true);
      } finally {
        unwinder.drop(key);
        rmSync(core, { force: true });
      }
    },
  );
});
