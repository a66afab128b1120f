// A failed stop never leaves a thread traced or stopped, and a rank with more threads than a
// snapshot lists is read with its first MAX_THREADS_PER_RANK. Real processes through the real
// reader (forked as the job's owner, uid 65534 via setpriv, where the agent would): a thread in
// vfork() whose child stopped itself (state D in wait_for_vfork_done), a thread reading from a
// FUSE server that does not answer (a stalled NFS/Lustre stand-in: state D once interrupted),
// a thread whose credentials the reader may not trace (EPERM part-way through seizing), and
// 5,000 parked threads. Each test checks every thread of the program in /proc afterwards
// (TracerPid 0, State not t) and that the stalled threads make progress once let go.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MAX_THREADS_PER_RANK, validateSnapshot } from '@mqd/model';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { BUILD, buildConformance, snapshottersPerTest, waitFor } from './conformance-kit.js';
import { NOBODY } from './security-kit.js';

const b = buildConformance();
const snapshotter = snapshottersPerTest();
const SRC = fileURLToPath(new URL('../native/stall', import.meta.url));
const work = mkdtempSync('/tmp/mqd-stall-');
chmodSync(work, 0o755);
const cc = (args: string[]) => execFileSync('cc', ['-g', '-O0', '-Wall', ...args], { stdio: 'pipe' });
const target = join(work, 'stall_target');
cc([
  '-o',
  target,
  join(SRC, 'stall_target.c'),
  `-L${BUILD}`,
  '-lmpi_mqdtest',
  `-Wl,-rpath,${BUILD}`,
  '-lpthread',
]);
const fuseServer = join(work, 'fuse_stall');
cc(['-o', fuseServer, join(SRC, 'fuse_stall.c')]);
const mnt = join(work, 'mnt');
mkdirSync(mnt);
chmodSync(mnt, 0o755);

/** A process of the test, its output kept, ended by pid after each test. */
interface Proc {
  readonly child: ChildProcess;
  readonly pid: number;
  out(): string;
}
const started: Proc[] = [];
let mounted = false;

function start(argv: readonly string[], asNobody: boolean): Proc {
  const [cmd, ...args] = asNobody
    ? ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', ...argv]
    : argv;
  const child = spawn(cmd ?? 'false', args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let text = '';
  child.stdout?.on('data', (d: Buffer) => {
    text += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    text += d.toString();
  });
  const p: Proc = { child, pid: child.pid ?? -1, out: () => text };
  started.push(p);
  return p;
}

/** The first match of `re` in `p`'s output, once it is there. */
async function line(p: Proc, re: RegExp): Promise<RegExpExecArray> {
  await waitFor(() => re.test(p.out()) || p.child.exitCode !== null, 20_000);
  const m = re.exec(p.out());
  if (!m) throw new Error(`${re} never came; the process said: ${p.out()}`);
  return m;
}

afterEach(() => {
  for (const p of started.splice(0)) {
    // setpriv execs the program: the pid is the program's.
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  }
  if (mounted) {
    // The server is gone: the connection is aborted and the mount only has to be taken away.
    execFileSync('umount', ['-l', mnt]);
    mounted = false;
  }
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface ThreadFacts {
  readonly tid: number;
  readonly state: string;
  readonly tracer: number;
  readonly wchan: string;
}

function threadsOf(pid: number): ThreadFacts[] {
  const facts: ThreadFacts[] = [];
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const status = readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8');
      facts.push({
        tid: Number(t),
        state: /^State:\s+(\S)/m.exec(status)?.[1] ?? '?',
        tracer: Number(/^TracerPid:\s+(\d+)/m.exec(status)?.[1] ?? -1),
        wchan: readFileSync(`/proc/${pid}/task/${t}/wchan`, 'utf8').trim(),
      });
    } catch {
      // the thread exited between the listing and the read
    }
  }
  return facts;
}

/** No thread of `pid` is traced or in a tracing stop. */
const free = (pid: number) => threadsOf(pid).every((t) => t.tracer === 0 && t.state !== 't');
const heldBy = (pid: number) =>
  threadsOf(pid)
    .filter((t) => t.tracer !== 0 || t.state === 't')
    .map((t) => `${t.tid} ${t.state} tracer ${t.tracer}`);

describe('a stop that cannot complete', () => {
  it('a thread in vfork() and one in a stalled FUSE read: MQD_E_STOP_FAILED naming both, nothing left traced, the program runs on', async () => {
    const fuse = start([fuseServer, mnt], false);
    await line(fuse, /FUSE_READY/);
    mounted = true;
    const t = start([target, b.dll, 'vfork', `read:${join(mnt, 'stall')}`], true);
    const pid = Number((await line(t, /STALL_READY pid=(\d+)/))[1]);
    const vforkChild = Number((await line(t, /VFORK_CHILD pid=(\d+)/))[1]);
    await line(fuse, /FUSE_READ/);
    // Both threads are in their waits before the read starts.
    // (The kernel may have inlined wait_for_vfork_done into kernel_clone.)
    const VFORK_WAIT = /^(wait_for_vfork_done|kernel_clone)$/;
    const inWait = (w: RegExp) => threadsOf(pid).find((x) => w.test(x.wchan));
    await waitFor(() => inWait(VFORK_WAIT)?.state === 'D', 10_000);
    await waitFor(() => inWait(/^request_wait_answer$/) !== undefined, 10_000);
    const vfork = inWait(VFORK_WAIT);
    const readTid = inWait(/^request_wait_answer$/)?.tid;

    const s = snapshotter({ stopTimeoutMs: 500 });
    const { snapshot } = await s.snapshot([{ pid, rank: 0 }], { dll: b.dll, ownerUid: NOBODY });
    const state = snapshot.ranks[0]?.state;
    expect(state).toMatchObject({ kind: 'error', code: 'MQD_E_STOP_FAILED' });
    // The reader that traced them ended: the kernel let them go, nothing waits in a tracing stop.
    await waitFor(() => free(pid), 10_000);

    // Let go of the waits: each thread leaves it and runs on (with the reader still their
    // tracer it would enter a tracing stop here and never say so).
    process.kill(vforkChild, 'SIGCONT');
    await line(t, /VFORK_DONE/);
    fuse.child.stdin?.write('answer\n');
    await line(t, /READ_DONE n=8/);
    expect(heldBy(pid)).toEqual([]);
    // Which threads and why, and what to do.
    const message = state?.kind === 'error' ? state.message : '';
    expect(message).toContain(`thread ${vfork?.tid} (state D, in the kernel at ${vfork?.wchan}`);
    expect(message).toContain(`thread ${readTid} (state D, in the kernel at request_wait_answer`);
    expect(message).toMatch(/let go when the reader process ends/);
    expect(message).toMatch(/take the snapshot again once it has left it/);

    // The same snapshotter reads the rank now (a fresh reader; the whole stop works).
    const again = await s.snapshot([{ pid, rank: 0 }], { dll: b.dll, ownerUid: NOBODY });
    expect(again.snapshot.ranks[0]?.state.kind).toBe('ok');
    expect(heldBy(pid)).toEqual([]);
  });

  it('EPERM part-way through seizing, one seized thread in vfork(): MQD_E_PTRACE_DENIED, nothing left traced, the program runs on', async () => {
    // Started as root; every thread but the last drops to 65534 on its own (raw setresuid: only
    // the calling thread's credentials), so the reader (as 65534) seizes the main thread, a
    // parked one and the one in vfork(), then meets a thread it may not trace.
    const t = start([target, b.dll, 'threads:1', 'vfork', 'rootthread'], false);
    const pid = Number((await line(t, /STALL_READY pid=(\d+)/))[1]);
    const vforkChild = Number((await line(t, /VFORK_CHILD pid=(\d+)/))[1]);
    await waitFor(() => threadsOf(pid).some((x) => x.state === 'D'), 10_000);
    const s = snapshotter();
    const { snapshot } = await s.snapshot([{ pid, rank: 0 }], { dll: b.dll, ownerUid: NOBODY });
    const state = snapshot.ranks[0]?.state;
    expect(state).toMatchObject({ kind: 'error', code: 'MQD_E_PTRACE_DENIED' });
    await waitFor(() => free(pid), 10_000);
    process.kill(vforkChild, 'SIGCONT');
    await line(t, /VFORK_DONE/);
    expect(heldBy(pid)).toEqual([]);
  });
});

describe('a capture whose stop cannot complete', () => {
  it('the rank in vfork() and the ranks after it: coded errors, the reader ends, the next capture works', async () => {
    const stalled = start([target, b.dll, 'vfork'], true);
    const a = Number((await line(stalled, /STALL_READY pid=(\d+)/))[1]);
    const vforkChild = Number((await line(stalled, /VFORK_CHILD pid=(\d+)/))[1]);
    await waitFor(() => threadsOf(a).some((x) => x.state === 'D'), 10_000);
    const other = start([target, b.dll, 'threads:1'], true);
    const c = Number((await line(other, /STALL_READY pid=(\d+)/))[1]);
    const dir = mkdtempSync('/tmp/mqd-stall-cores-');
    chmodSync(dir, 0o777);
    try {
      const s = snapshotter({ stopTimeoutMs: 500 });
      const ranks = [
        { pid: a, rank: 0 },
        { pid: c, rank: 1 },
      ];
      const first = await s.capture(ranks, dir, { ownerUid: NOBODY });
      expect(first.captured[0]).toMatchObject({ rank: 0, error: { code: 'MQD_E_STOP_FAILED' } });
      // Not read by a reader that still traces another rank's thread: it says so.
      expect(first.captured[1]).toMatchObject({ rank: 1, error: { code: 'MQD_E_STOP_FAILED' } });
      expect(JSON.stringify(first.captured[1])).toMatch(/capture this rank again/);
      await waitFor(() => free(a), 10_000);
      const second = await s.capture([{ pid: c, rank: 1 }], dir, { ownerUid: NOBODY });
      expect(second.captured[0]).toMatchObject({ rank: 1, core: 'rank-1.core' });
      process.kill(vforkChild, 'SIGCONT');
      await line(stalled, /VFORK_DONE/);
      expect(heldBy(a)).toEqual([]);
      expect(heldBy(c)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a stop whose threads stop or end in other ways', () => {
  const allIn = (pid: number, state: string) =>
    threadsOf(pid).every((x) => x.tracer === 0 && x.state === state);

  it('a rank its owner stopped (SIGSTOP, state T) is read and left stopped by its owner, not traced; SIGCONT runs it', async () => {
    const t = start([target, b.dll, 'threads:2'], false);
    const pid = Number((await line(t, /STALL_READY pid=(\d+)/))[1]);
    process.kill(pid, 'SIGSTOP');
    await waitFor(() => allIn(pid, 'T'), 10_000);
    const { snapshot } = await snapshotter().snapshot([{ pid, rank: 0 }], { dll: b.dll });
    expect(snapshot.ranks[0]?.state.kind).toBe('ok');
    // Each thread reported a group-stop, not the interrupt: detached without a signal, it stays in it.
    expect(threadsOf(pid).map((x) => `${x.state} ${x.tracer}`)).toEqual(['T 0', 'T 0', 'T 0']);
    process.kill(pid, 'SIGCONT');
    await waitFor(() => allIn(pid, 'S'), 10_000);
  });

  it('a SIGSTOP sent while the rank is held is delivered after the resume: T by its owner, never t', async () => {
    const t = start([target, b.dll, 'threads:2'], false);
    const pid = Number((await line(t, /STALL_READY pid=(\d+)/))[1]);
    const { snapshot } = await snapshotter().snapshot([{ pid, rank: 0 }], {
      dll: b.dll,
      holdStoppedMs: 200,
      onStopped: (p) => process.kill(p, 'SIGSTOP'),
    });
    expect(snapshot.ranks[0]?.state.kind).toBe('ok');
    await waitFor(() => allIn(pid, 'T'), 10_000);
    process.kill(pid, 'SIGCONT');
    await waitFor(() => allIn(pid, 'S'), 10_000);
  });

  it("a rank killed while it is held: the reader takes its threads' exits, so its parent reaps it while the reader lives on", async () => {
    const t = start([target, b.dll, 'threads:2'], false);
    const pid = Number((await line(t, /STALL_READY pid=(\d+)/))[1]);
    const s = snapshotter();
    await s.snapshot([{ pid, rank: 0 }], {
      dll: b.dll,
      holdStoppedMs: 200,
      onStopped: (p) => process.kill(p, 'SIGKILL'),
    });
    // A traced thread's exit goes to its tracer first: unless the reader waits for it, the
    // process stays a zombie its parent cannot reap for as long as the reader lives.
    await waitFor(() => t.child.signalCode !== null, 10_000);
    expect(t.child.signalCode).toBe('SIGKILL');
  });
});

describe('a rank with more threads than a snapshot lists', () => {
  it(`5,000 threads: the first ${MAX_THREADS_PER_RANK} unwound (main first), the rest counted as MQD_E_THREAD_LIMIT`, async () => {
    const t = start([target, b.dll, 'threads:5000'], false);
    const pid = Number((await line(t, /STALL_READY pid=(\d+)/))[1]);
    const s = snapshotter();
    const { snapshot } = await s.snapshot([{ pid, rank: 0 }], { dll: b.dll });
    const rank = snapshot.ranks[0];
    expect(rank?.state.kind).toBe('ok');
    expect(rank?.threads).toHaveLength(MAX_THREADS_PER_RANK);
    expect(rank?.threads?.[0]).toMatchObject({ tid: pid, main: true });
    const tids = rank?.threads?.map((x) => x.tid) ?? [];
    expect(tids.slice(1)).toEqual([...tids.slice(1)].sort((x, y) => x - y));
    expect(rank?.threadLimit).toMatchObject({
      code: 'MQD_E_THREAD_LIMIT',
      omitted: 5001 - MAX_THREADS_PER_RANK,
    });
    expect(rank?.threadLimit?.message).toMatch(
      /^MQD_E_THREAD_LIMIT: 5001 threads: the stacks of the first 4096/,
    );
    expect(validateSnapshot(snapshot).ok).toBe(true);
    expect(heldBy(pid)).toEqual([]);
    console.log(`5,001 threads: stopped ${rank?.pausedMicros} us, snapshot ${snapshot.durationMicros} us`);
  });
});
