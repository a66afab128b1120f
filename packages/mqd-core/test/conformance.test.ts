// The debugger side of MQD against our own conformance DLL and MPI-like target: every
// callback, every failure path, the debug-info lookups, and the guarantees (a crashing or
// looping DLL costs one rank of one snapshot; no rank is ever left stopped).
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type JobSnapshot, type RankSnapshot, validateSnapshot } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { DebugFileRegistry, processState, readElfInfo, tracerPid } from '../src/index.js';
import { BASIC_CALLBACKS, IMAGE_CALLBACKS, PROCESS_CALLBACKS } from '../src/mqs/mqs-spec.js';
import { OneStopReader } from '../src/rank-read/one-stop.js';
import {
  buildConformance,
  buildIdPath,
  holdStopped,
  snapshottersPerTest,
  startTarget,
  strippedCopy,
  type Target,
  waitFor,
} from './conformance-kit.js';

const b = buildConformance();
const work = mkdtempSync(join(tmpdir(), 'mqd-conf-'));
const snapshotter = snapshottersPerTest();

const rankOf = (s: JobSnapshot, r: number): RankSnapshot => {
  const x = s.ranks.find((y) => y.rank === r);
  if (!x) throw new Error(`rank ${r} missing`);
  return x;
};

/** Running, not traced: what every target must be after any snapshot, whatever happened. */
async function expectRunningFree(t: Target): Promise<void> {
  // The kernel detaches when the tracer dies, which follows the kill: wait on the condition.
  await waitFor(() => tracerPid(t.pid) === 0, 10_000);
  expect(tracerPid(t.pid)).toBe(0);
  expect(processState(t.pid)).toMatch(/^[RS]$/);
}

describe('conformance DLL: the data', () => {
  it('reads every communicator and queue exactly, wildcards decoded, MPI_COMM_NULL hidden', async () => {
    const t0 = await startTarget(b.target, b.dll, 0, 0);
    const t2 = await startTarget(b.target, b.dll, 0, 2);
    const { snapshot } = await snapshotter().snapshot([
      { pid: t2.pid, rank: 2 },
      { pid: t0.pid, rank: 0 },
    ]);
    expect(validateSnapshot(snapshot).ok).toBe(true);
    expect(snapshot.mpi.dll).toBe(b.dll); // found through MPIR_dll_name in the process
    expect(snapshot.ranks.map((r) => r.rank)).toEqual([0, 2]);
    const r2 = rankOf(snapshot, 2);
    expect(r2.state).toEqual({ kind: 'ok' });
    expect(r2.pausedMicros).toBeGreaterThan(0);
    expect(r2.communicators.map((c) => c.name)).toEqual(['MPI_COMM_WORLD', 'mqd_named']);
    const [world, named] = r2.communicators;
    expect(world).toMatchObject({ id: '0', size: 4, localRank: 2, group: null, unavailable: {} });
    expect(world?.sends).toEqual([
      {
        status: 'pending',
        peer: { local: 3, global: 3 },
        tag: 42,
        length: 4,
        actual: null,
        // The DLL's lines in their places: [1] is empty, [2] is not.
        extraText: ['mqdtest send', '', 'line three'],
        buffer: expect.stringMatching(/^0x[0-9a-f]+$/),
        systemBuffer: false,
      },
    ]);
    expect(world?.receives?.map((o) => [o.status, o.peer.local, o.peer.global, o.tag, o.length])).toEqual([
      ['pending', null, null, null, 16],
      ['matched', 2, 2, 7, 8],
    ]);
    expect(world?.receives?.[1]?.actual).toEqual({ peer: { local: 2, global: 2 }, tag: 7, length: 8 });
    expect(world?.unexpected?.map((o) => [o.peer.local, o.tag, o.length])).toEqual([[3, 9, 12]]);
    expect(named).toMatchObject({ id: '5', size: 2, localRank: 1, group: [3, 1] });
    expect(named?.receives?.map((o) => [o.peer.local, o.peer.global, o.tag, o.length])).toEqual([
      [0, 3, 11, 32],
    ]);
    expect(rankOf(snapshot, 0).communicators[0]?.sends?.[0]?.peer).toEqual({ local: 1, global: 1 });
    await expectRunningFree(t0);
    await expectRunningFree(t2);
  });

  it('calls every callback of the interface, and error strings go both ways', async () => {
    const ok = await startTarget(b.target, b.dll, 0, 1);
    const bad = await startTarget(b.target, b.dll, 5, 3);
    const s = OneStopReader.open(b.dll, {
      registry: new DebugFileRegistry(),
      readBudgetBytes: 1 << 20,
      stopTimeoutMs: 2000,
    });
    if (!s.ok) throw new Error(s.error.message);
    const good = s.value.snapshotRank({ pid: ok.pid, rank: 1, host: 'h' });
    expect(good.state.kind).toBe('ok');
    const broken = s.value.snapshotRank({ pid: bad.pid, rank: 3, host: 'h' });
    s.value.close();
    const native = new Set(['malloc', 'free']); // libc's own, never a JS round trip
    for (const cb of [...BASIC_CALLBACKS, ...IMAGE_CALLBACKS, ...PROCESS_CALLBACKS]) {
      if (native.has(cb)) continue;
      expect([cb, s.value.session.callbackCounts[cb] ?? 0]).not.toEqual([cb, 0]);
    }
    expect(s.value.session.dprints).toContain('mqdtest: image has queues');
    // A walk that breaks off keeps what it read and says so, with the DLL's text for the debugger's code.
    expect(broken.state).toMatchObject({ kind: 'error', code: 'MQD_E_DLL_ERROR' });
    if (broken.state.kind !== 'ok')
      expect(broken.state.message).toMatch(
        /broke off after 2 entries: mqs_next_operation returned 1 \(debugger: no information .*\); debugger: a read of target memory failed \(unmapped\), the first at 0x10/,
      );
    expect(broken.communicators[0]?.receives).toHaveLength(2);
    await expectRunningFree(ok);
    await expectRunningFree(bad);
  });

  it('reports a queue the library cannot show as unsupported, never as empty', async () => {
    const t = await startTarget(b.target, b.dll, 7, 0);
    const { snapshot } = await snapshotter().snapshot([{ pid: t.pid, rank: 0 }]);
    const world = rankOf(snapshot, 0).communicators[0];
    expect(world?.unexpected).toBeNull();
    expect(world?.unavailable.unexpected?.code).toBe('MQD_E_QUEUE_UNSUPPORTED');
    expect(world?.sends).toHaveLength(1);
  });

  it('reports a process without queues as no-queues', async () => {
    const t = await startTarget(b.target, b.dll, 6, 0);
    const { snapshot } = await snapshotter().snapshot([{ pid: t.pid, rank: 0 }]);
    expect(rankOf(snapshot, 0).state).toMatchObject({ kind: 'no-queues', code: 'MQD_E_NO_QUEUES' });
  });
});

describe('conformance DLL: a misbehaving DLL costs one rank of one snapshot', () => {
  it('survives a segfault and an abort, keeps the other ranks, restarts the host', async () => {
    const ts = [
      await startTarget(b.target, b.dll, 0, 0),
      await startTarget(b.target, b.dll, 1, 1),
      await startTarget(b.target, b.dll, 2, 2),
      await startTarget(b.target, b.dll, 0, 3),
    ];
    const s = snapshotter();
    const { snapshot, stats } = await s.snapshot(ts.map((t, rank) => ({ pid: t.pid, rank })));
    expect(snapshot.ranks.map((r) => (r.state.kind === 'ok' ? 'ok' : r.state.code))).toEqual([
      'ok',
      'MQD_E_DLL_CRASHED',
      'MQD_E_DLL_CRASHED',
      'ok',
    ]);
    const crashed = rankOf(snapshot, 1).state;
    if (crashed.kind !== 'ok') expect(crashed.message).toMatch(/SIGSEGV/);
    const aborted = rankOf(snapshot, 2).state;
    if (aborted.kind !== 'ok') expect(aborted.message).toMatch(/SIGABRT/);
    expect(stats.restarts).toBe(2);
    for (const t of ts) await expectRunningFree(t);
    // The next snapshot works with a fresh host.
    const again = await s.snapshot([{ pid: ts[0]?.pid ?? 0, rank: 0 }]);
    expect(rankOf(again.snapshot, 0).state.kind).toBe('ok');
  });

  it('kills a looping DLL after the rank timeout', async () => {
    const t = await startTarget(b.target, b.dll, 3, 0);
    const { snapshot } = await snapshotter({ rankTimeoutMs: 1500 }).snapshot([{ pid: t.pid, rank: 0 }]);
    expect(rankOf(snapshot, 0).state).toMatchObject({ kind: 'error', code: 'MQD_E_DLL_TIMEOUT' });
    await expectRunningFree(t);
  });

  it('cuts a cyclic list with the read budget', async () => {
    const t = await startTarget(b.target, b.dll, 4, 0);
    const { snapshot } = await snapshotter({ readBudgetBytes: 1 << 16 }).snapshot([{ pid: t.pid, rank: 0 }]);
    expect(rankOf(snapshot, 0).state).toMatchObject({ kind: 'error', code: 'MQD_E_READ_BUDGET' });
    await expectRunningFree(t);
  });

  it('lets the rank run on when the agent is kill -9ed while the rank is stopped', async () => {
    const t = await startTarget(b.target, b.dll, 0, 0);
    const { child, line } = await holdStopped(b.dll, t.pid);
    expect(line).toMatch(new RegExp(`^STOPPED ${t.pid}`));
    // Stopped right now, traced by the reader.
    expect(processState(t.pid)).toBe('t');
    expect(tracerPid(t.pid)).toBeGreaterThan(0);
    child.kill('SIGKILL');
    await expectRunningFree(t);
  });

  it('reports a process that exits during the read', async () => {
    const t = await startTarget(b.target, b.dll, 0, 0);
    const s = snapshotter();
    const { snapshot } = await s.snapshot([{ pid: t.pid, rank: 0 }], {
      holdStoppedMs: 300,
      onStopped: () => t.kill(),
    });
    expect(rankOf(snapshot, 0).state).toMatchObject({ kind: 'error', code: 'MQD_E_PID_EXITED' });
  });
});

describe('bad input gets a coded error that says what to do', () => {
  it('refuses a non-ELF, a wrong-architecture and a wrong-level DLL, and a missing one', async () => {
    const t = await startTarget(b.target, b.dll, 0, 0);
    const text = join(work, 'not-a-dll.so');
    writeFileSync(text, 'hello\n');
    const arm = join(work, 'arm.so');
    const bytes = readFileSync(b.dll);
    bytes.writeUInt16LE(183, 18); // e_machine = AArch64
    writeFileSync(arm, bytes);
    const cases: [string, string][] = [
      [text, 'MQD_E_DLL_NOT_ELF'],
      [arm, 'MQD_E_DLL_WRONG_ARCH'],
      [b.dll.replace('libmqdtest_dll.so', 'libmqdtest_dll_v3.so'), 'MQD_E_DLL_INCOMPATIBLE'],
      [join(work, 'missing.so'), 'MQD_E_DLL_NOT_FOUND'],
    ];
    for (const [dll, code] of cases) {
      const { snapshot } = await snapshotter().snapshot([{ pid: t.pid, rank: 0 }], { dll });
      const st = rankOf(snapshot, 0).state;
      expect([dll, st.kind === 'ok' ? 'ok' : st.code]).toEqual([dll, code]);
      if (st.kind !== 'ok') expect(st.message).toMatch(new RegExp(`^${code}: .+: .+`));
    }
    await expectRunningFree(t);
  });

  it('says the user may not read a process of another user (non-root)', async () => {
    const t = await startTarget(b.target, b.dll, 0, 0);
    const script = join(import.meta.dirname, 'snapshot-once.ts');
    const r = spawnSync(
      'setpriv',
      [
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        process.execPath,
        '--conditions=source',
        '--import',
        'tsx',
        script,
        '-',
        String(t.pid),
      ],
      { encoding: 'utf8', cwd: process.cwd(), env: { ...process.env, HOME: tmpdir() } },
    );
    expect(r.status, r.stderr).toBe(0);
    const states = JSON.parse(r.stdout.trim().split('\n').pop() ?? '[]') as {
      kind: string;
      code?: string;
      message?: string;
    }[];
    expect(states).toHaveLength(1);
    expect(states[0]?.code).toBe('MQD_E_PTRACE_DENIED');
    expect(states[0]?.message).toMatch(/run as the job owner/);
    await expectRunningFree(t);
  });

  it('says which pid does not exist and which is not an MPI process', async () => {
    const sleeper = spawn('sleep', ['30']);
    try {
      const { snapshot } = await snapshotter().snapshot([
        { pid: 0x3ffffff0, rank: 0 },
        { pid: sleeper.pid ?? 0, rank: 1 },
      ]);
      expect(snapshot.ranks.map((r) => (r.state.kind === 'ok' ? 'ok' : r.state.code))).toEqual([
        'MQD_E_NO_SUCH_PID',
        'MQD_E_NOT_MPI',
      ]);
    } finally {
      sleeper.kill('SIGKILL');
    }
  });
});

describe('debug info is found as gdb finds it', () => {
  const withDebugPath = async (path: string, target: string, dll: string) => {
    const before = process.env['MQD_DEBUGINFO_PATH'];
    process.env['MQD_DEBUGINFO_PATH'] = path;
    try {
      const t = await startTarget(target, dll, 0, 0);
      return (await snapshotter().snapshot([{ pid: t.pid, rank: 0 }])).snapshot;
    } finally {
      if (before === undefined) delete process.env['MQD_DEBUGINFO_PATH'];
      else process.env['MQD_DEBUGINFO_PATH'] = before;
    }
  };
  const stripExe = (exe: string) => spawnSyncOk('strip', ['--strip-debug', exe]);

  it('without any debug info, says which package to install', async () => {
    const c = strippedCopy(join(work, 'nodebug'), b);
    stripExe(c.target);
    rmSync(c.debug); // libdw would also find <file>.debug next to the file
    const s = await withDebugPath(`:.debug:${join(work, 'empty-root')}`, c.target, b.dll);
    expect(rankOf(s, 0).state).toMatchObject({ kind: 'no-queues', code: 'MQD_E_NO_DEBUG_INFO' });
  });

  it('by build-id under a debug root', async () => {
    const c = strippedCopy(join(work, 'buildid'), b);
    stripExe(c.target);
    const info = readElfInfo(c.lib);
    if (!info.ok || !info.value.buildId) throw new Error('no build-id');
    const root = join(work, 'buildid-root');
    mkdirp(join(buildIdPath(root, info.value.buildId), '..'));
    copyFileSync(c.debug, buildIdPath(root, info.value.buildId));
    const s = await withDebugPath(`:.debug:${root}`, c.target, b.dll);
    expect(rankOf(s, 0).state).toEqual({ kind: 'ok' });
    expect(rankOf(s, 0).communicators[0]?.sends).toHaveLength(1);
  });

  it('by .gnu_debuglink next to the file', async () => {
    const dir = join(work, 'debuglink');
    const c = strippedCopy(dir, b);
    stripExe(c.target);
    spawnSyncOk('objcopy', ['--add-gnu-debuglink=libmpi_mqdtest.so.debug', 'libmpi_mqdtest.so'], dir);
    const s = await withDebugPath(`:.debug:${join(work, 'empty-root')}`, c.target, b.dll);
    expect(rankOf(s, 0).state).toEqual({ kind: 'ok' });
  });

  it('through a dwz alt file (types moved into the multifile)', async () => {
    const dir = join(work, 'dwz');
    const c = strippedCopy(dir, b);
    const exeDebug = join(dir, 'exe.debug');
    spawnSyncOk('objcopy', ['--only-keep-debug', c.target, exeDebug]);
    stripExe(c.target);
    const common = join(dir, 'common.debug');
    spawnSyncOk('dwz', ['-m', common, '-M', common, c.debug, exeDebug]);
    expect(readFileSync(c.debug).includes(Buffer.from('.gnu_debugaltlink'))).toBe(true);
    const root = join(work, 'dwz-root');
    for (const [file, elf] of [
      [c.debug, c.lib],
      [exeDebug, c.target],
    ] as const) {
      const info = readElfInfo(elf);
      if (!info.ok || !info.value.buildId) throw new Error('no build-id');
      mkdirp(join(buildIdPath(root, info.value.buildId), '..'));
      copyFileSync(file, buildIdPath(root, info.value.buildId));
    }
    const s = await withDebugPath(`:.debug:${root}`, c.target, b.dll);
    expect(rankOf(s, 0).state).toEqual({ kind: 'ok' });
    expect(rankOf(s, 0).communicators[1]?.group).toEqual([3, 1]);
  });
});

import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';

function spawnSyncOk(cmd: string, args: string[], cwd?: string): void {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr}`);
}
function mkdirp(p: string): void {
  mkdirSync(p, { recursive: true });
}
