// Faults that are nobody's permission problem and no DLL's crash, injected
// by the test: a rank that became a zombie (exited, its parent does not reap it) and a reader
// killed with SIGKILL from outside MQD (what the OOM killer or an admin does). Each must reach the
// user as what it is, and the next read must work.
import { type ChildProcess, spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { processState, tracerPid } from '../src/inferior/proc.js';
import { exitKind } from '../src/reader/client.js';
import { buildConformance, snapshottersPerTest, startTarget, waitFor } from './conformance-kit.js';

const b = buildConformance();
const snapshotter = snapshottersPerTest();

const parents: ChildProcess[] = [];
afterEach(() => {
  for (const p of parents.splice(0)) p.kill('SIGKILL');
});

/**
 * A conformance target whose parent never reaps it (a shell that execs `sleep`), killed: it stays
 * a zombie until the parent goes. Resolves with its pid once /proc says Z.
 */
async function zombieTarget(): Promise<number> {
  const parent = spawn('sh', ['-c', `"$0" "$1" 0 0 & exec sleep 600`, b.target, b.dll], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  parents.push(parent);
  const pid = await new Promise<number>((resolve, reject) => {
    let out = '';
    parent.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /MQDTEST_READY pid=(\d+)/.exec(out);
      if (m?.[1]) resolve(Number(m[1]));
    });
    parent.on('exit', (code) => reject(new Error(`the target's parent exited (${code}): ${out}`)));
  });
  process.kill(pid, 'SIGKILL');
  await waitFor(() => processState(pid) === 'Z', 10_000);
  return pid;
}

describe('a rank that became a zombie', () => {
  it('is reported as MQD_E_ZOMBIE, not MQD_E_PTRACE_DENIED, by a read with and without an owner check', async () => {
    const pid = await zombieTarget();
    const s = snapshotter();
    // With the job's owner (the agent's path: the reader checks the pid first).
    const checked = await s.snapshot([{ pid, rank: 0 }], { dll: b.dll, ownerUid: 0, allowRoot: true });
    expect(checked.snapshot.ranks[0]?.state).toMatchObject({ kind: 'error', code: 'MQD_E_ZOMBIE' });
    // Without one (a command-line read): the stop itself meets the zombie.
    const stopped = await s.snapshot([{ pid, rank: 0 }], { dll: b.dll });
    expect(stopped.snapshot.ranks[0]?.state).toMatchObject({ kind: 'error', code: 'MQD_E_ZOMBIE' });
    // Without a DLL: finding the DLL name meets it first.
    const named = await s.snapshot([{ pid, rank: 0 }]);
    expect(named.snapshot.ranks[0]?.state).toMatchObject({ kind: 'error', code: 'MQD_E_ZOMBIE' });
    expect(processState(pid)).toBe('Z'); // the read never reaped or changed it
  });
});

describe('a reader killed from outside MQD', () => {
  it('SIGKILL of a busy reader: MQD_E_READER_KILLED (not MQD_E_DLL_CRASHED), and the next read works', async () => {
    const t = await startTarget(b.target, b.dll, 0, 0);
    const s = snapshotter({ rankTimeoutMs: 60_000 });
    let killed = 0;
    const { snapshot } = await s.snapshot([{ pid: t.pid, rank: 0 }], {
      dll: b.dll,
      // The reader holds the rank stopped (busy) when it says so: kill it as the OOM killer would.
      holdStoppedMs: 30_000,
      onStopped: (pid) => {
        killed = tracerPid(pid) ?? 0;
        if (killed > 0) process.kill(killed, 'SIGKILL');
      },
    });
    expect(killed).toBeGreaterThan(0);
    const state = snapshot.ranks[0]?.state;
    expect(state).toMatchObject({ kind: 'error', code: 'MQD_E_READER_KILLED' });
    if (state?.kind === 'error') expect(state.message).toMatch(/SIGKILL/);
    // The rank runs on (the kernel detached it) and a fresh reader reads it.
    await waitFor(() => tracerPid(t.pid) === 0 && processState(t.pid) !== 't', 10_000);
    const again = await s.snapshot([{ pid: t.pid, rank: 0 }], { dll: b.dll });
    expect(again.snapshot.ranks[0]?.state.kind).toBe('ok');
    expect(s.hostPids()).not.toContain(killed);
  });

  it("a DLL's own crash still reads as MQD_E_DLL_CRASHED, and the supervisor's timeout kill as MQD_E_DLL_TIMEOUT", async () => {
    const crash = await startTarget(b.target, b.dll, 1, 0);
    const loop = await startTarget(b.target, b.dll, 3, 1);
    const { snapshot } = await snapshotter({ rankTimeoutMs: 1500 }).snapshot(
      [
        { pid: crash.pid, rank: 0 },
        { pid: loop.pid, rank: 1 },
      ],
      { dll: b.dll },
    );
    expect(snapshot.ranks.map((r) => (r.state.kind === 'ok' ? 'ok' : r.state.code))).toEqual([
      'MQD_E_DLL_CRASHED',
      'MQD_E_DLL_TIMEOUT',
    ]);
  });

  it('tells fault signals (the DLL) from the others (outside)', () => {
    for (const s of ['SIGSEGV', 'SIGBUS', 'SIGABRT', 'SIGILL', 'SIGFPE'] as const)
      expect(exitKind(s)).toBe('crashed');
    for (const s of ['SIGKILL', 'SIGTERM', 'SIGINT', 'SIGHUP'] as const) expect(exitKind(s)).toBe('killed');
    expect(exitKind(null)).toBe('crashed'); // an exit code: the reader ended by itself
  });
});
