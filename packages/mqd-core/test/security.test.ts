// Privilege separation, tried as an attacker would: a real unprivileged user (uid 65534 via
// setpriv) runs processes that look like ranks and name their own library, or point the reader
// at root's processes, and a root Snapshotter reads them. Whatever the reader does to a target
// runs as the target's owner; foreign, root and reused pids are never stopped.
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { procStartTime } from '../src/inferior/proc.js';
import { checkDllPolicy } from '../src/policy/dll-policy.js';
import { ReaderClient } from '../src/reader/client.js';
import { Snapshotter } from '../src/snapshotter.js';
import { buildConformance, startTarget } from './conformance-kit.js';
import { type Attacker, buildAttacker, NOBODY, startProcess, watchPid } from './security-kit.js';

let a: Attacker;
let conf: ReturnType<typeof buildConformance>;
beforeAll(() => {
  expect(process.getuid?.()).toBe(0); // these tests are about a root agent
  a = buildAttacker();
  conf = buildConformance();
});
afterAll(() => a?.dispose());

function statusOf(pid: number): { uids: string; groups: string; noNewPrivs: string } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  return {
    uids: /^Uid:\s+(.*)$/m.exec(s)?.[1]?.trim().replace(/\s+/g, ' ') ?? '',
    groups: /^Groups:[ \t]*(.*)$/m.exec(s)?.[1]?.trim() ?? '',
    noNewPrivs: /^NoNewPrivs:\s+(\d)/m.exec(s)?.[1] ?? '',
  };
}

describe('local root: a user names their own library in MPIR_dll_name', () => {
  it('its constructor runs as the user, never as root, and the snapshot ends with a coded error', async () => {
    rmSync(a.out, { force: true });
    const rank = await startProcess([a.rank, a.evil], { env: { OMPI_COMM_WORLD_RANK: '0' } });
    const s = new Snapshotter();
    try {
      const { snapshot } = await s.snapshot([{ pid: rank.pid }], { ownerUid: NOBODY });
      const r = snapshot.ranks[0];
      expect(snapshot.ranks).toHaveLength(1);
      expect(r?.state.kind).toBe('error');
      expect(r?.state.kind === 'error' ? r.state.code : '').toMatch(/^MQD_E_[A-Z_]+$/);
      // The library was loaded (the constructor ran) by a reader that is the user.
      expect(existsSync(a.out)).toBe(true);
      const lines = readFileSync(a.out, 'utf8').trim().split('\n');
      expect(lines.length).toBeGreaterThan(0);
      for (const l of lines) expect(l).toBe(`euid=${NOBODY} uid=${NOBODY}`);
      // The reader child: uid 65534 everywhere, no supplementary groups, NO_NEW_PRIVS.
      const readers = s.readerCredentials();
      expect(readers.length).toBeGreaterThan(0);
      for (const c of readers) {
        expect(c).toMatchObject({ uid: NOBODY, euid: NOBODY, gid: NOBODY, groups: [], noNewPrivs: true });
        expect(statusOf(c.pid)).toEqual({
          uids: `${NOBODY} ${NOBODY} ${NOBODY} ${NOBODY}`,
          groups: '',
          noNewPrivs: '1',
        });
      }
    } finally {
      await s.dispose();
      rank.kill();
    }
  });

  it('without ownerUid the reader still takes the rank owner (65534), not root', async () => {
    rmSync(a.out, { force: true });
    const rank = await startProcess([a.rank, a.evil], { env: { OMPI_COMM_WORLD_RANK: '0' } });
    const s = new Snapshotter();
    try {
      await s.snapshot([{ pid: rank.pid }]);
      expect(readFileSync(a.out, 'utf8').trim()).toBe(`euid=${NOBODY} uid=${NOBODY}`);
    } finally {
      await s.dispose();
      rank.kill();
    }
  });
});

describe("other users' processes are refused and never stopped", () => {
  async function readWatched(pid: number, opts: Parameters<Snapshotter['snapshot']>[1]) {
    const watch = await watchPid(pid);
    const s = new Snapshotter();
    const stopped: number[] = [];
    try {
      const { snapshot } = await s.snapshot([{ pid, rank: 0 }], {
        dll: conf.dll, // a DLL that reads the target: a broken control would stop it
        holdStoppedMs: 300, // and hold it stopped long enough for the watcher to see
        onStopped: (p) => stopped.push(p),
        ...opts,
      });
      return { snapshot, stopped, seen: await watch.stop() };
    } finally {
      await s.dispose();
    }
  }

  it("root's process, job owner 65534: MQD_E_FOREIGN_PROCESS, never stopped or traced", async () => {
    const t = await startTarget(conf.target, conf.dll, 0, 0);
    try {
      const { snapshot, stopped, seen } = await readWatched(t.pid, { ownerUid: NOBODY });
      expect(snapshot.ranks[0]?.state).toMatchObject({ kind: 'error', code: 'MQD_E_FOREIGN_PROCESS' });
      expect(stopped).toEqual([]);
      expect(seen.samples).toBeGreaterThan(0);
      expect(seen.tracers).toEqual([]);
      expect(seen.states).not.toContain('t');
      expect(seen.states).not.toContain('T');
    } finally {
      t.kill();
    }
  });

  it('uid 0 ranks: MQD_E_ROOT_PROCESS unless allowRoot (then read, and the watcher sees the stop)', async () => {
    const t = await startTarget(conf.target, conf.dll, 0, 0);
    try {
      const refused = await readWatched(t.pid, { ownerUid: 0 });
      expect(refused.snapshot.ranks[0]?.state).toMatchObject({ kind: 'error', code: 'MQD_E_ROOT_PROCESS' });
      expect(refused.stopped).toEqual([]);
      expect(refused.seen.tracers).toEqual([]);
      expect(refused.seen.states).not.toContain('t');
      // The control: allowed, the same watcher catches the stop (so it would catch a broken check).
      const allowed = await readWatched(t.pid, { ownerUid: 0, allowRoot: true });
      expect(allowed.snapshot.ranks[0]?.state).toEqual({ kind: 'ok' });
      expect(allowed.stopped).toEqual([t.pid]);
      expect(allowed.seen.states).toContain('t');
      expect(allowed.seen.tracers.length).toBeGreaterThan(0);
    } finally {
      t.kill();
    }
  });

  it('the reader checks again before the stop: a target the agent did not vet is refused in the child', async () => {
    const t = await startTarget(conf.target, conf.dll, 0, 0);
    const h = new ReaderClient(conf.dll);
    try {
      const run = await h.snapshot(
        [{ pid: t.pid, rank: 0, host: 'h', ownerUid: NOBODY, allowRoot: false }],
        [t.pid],
      );
      expect(run.ranks[0]?.state).toMatchObject({ kind: 'error', code: 'MQD_E_FOREIGN_PROCESS' });
    } finally {
      await h.dispose();
      t.kill();
    }
  });

  it('a reader running as 65534 cannot stop a root process even if asked (the kernel refuses)', async () => {
    const t = await startTarget(conf.target, conf.dll, 0, 0);
    const watch = await watchPid(t.pid);
    const h = new ReaderClient(conf.dll, {}, { uid: NOBODY, gid: NOBODY, switched: true });
    try {
      const run = await h.snapshot([{ pid: t.pid, rank: 0, host: 'h' }], [t.pid]);
      expect(run.ranks[0]?.state).toMatchObject({ kind: 'error', code: 'MQD_E_PTRACE_DENIED' });
      expect(h.credentials).toMatchObject({ uid: NOBODY, euid: NOBODY, groups: [], noNewPrivs: true });
      const seen = await watch.stop();
      expect(seen.tracers).toEqual([]);
      expect(seen.states).not.toContain('t');
    } finally {
      await h.dispose();
      t.kill();
    }
  });
});

describe('pid reuse', () => {
  it('a target whose start time differs from the located one: MQD_E_PID_REUSED, not stopped', async () => {
    const t = await startTarget(conf.target, conf.dll, 0, 0);
    const watch = await watchPid(t.pid);
    const s = new Snapshotter();
    const stopped: number[] = [];
    try {
      const real = procStartTime(t.pid);
      expect(real).toMatch(/^\d+$/);
      const stale = String(Number(real) - 1);
      const { snapshot } = await s.snapshot([{ pid: t.pid, rank: 0, startTime: stale }], {
        dll: conf.dll,
        allowRoot: true,
        holdStoppedMs: 300,
        onStopped: (p) => stopped.push(p),
      });
      expect(snapshot.ranks[0]?.state).toMatchObject({ kind: 'error', code: 'MQD_E_PID_REUSED' });
      expect(stopped).toEqual([]);
      const seen = await watch.stop();
      expect(seen.tracers).toEqual([]);
      expect(seen.states).not.toContain('t');
      // The control: the right start time reads it.
      const again = await s.snapshot([{ pid: t.pid, rank: 0, startTime: real ?? '' }], {
        dll: conf.dll,
        allowRoot: true,
      });
      expect(again.snapshot.ranks[0]?.state).toEqual({ kind: 'ok' });
    } finally {
      await s.dispose();
      t.kill();
    }
  });
});

describe('DLL policy root-owned', () => {
  it("refuses the user's own DLL before any reader loads it", async () => {
    rmSync(a.out, { force: true });
    const rank = await startProcess([a.rank, a.evil], { env: { OMPI_COMM_WORLD_RANK: '0' } });
    const s = new Snapshotter({ dllPolicy: 'root-owned' });
    try {
      const { snapshot } = await s.snapshot([{ pid: rank.pid }], { ownerUid: NOBODY });
      expect(snapshot.ranks[0]?.state).toMatchObject({ kind: 'error', code: 'MQD_E_DLL_POLICY' });
      expect(existsSync(a.out)).toBe(false);
    } finally {
      await s.dispose();
      rank.kill();
    }
  });

  it('refuses a root-owned DLL in a group-writable directory or group-writable itself; accepts a clean one', async () => {
    const { mkdtempSync, copyFileSync, chmodSync } = await import('node:fs');
    const dir = mkdtempSync('/run/mqd-policy-');
    try {
      const dll = `${dir}/libmqdtest_dll.so`;
      copyFileSync(conf.dll, dll);
      chmodSync(dll, 0o644);
      chmodSync(dir, 0o775);
      const gw = checkDllPolicy(dll, 'root-owned');
      expect(gw.ok ? '' : gw.error.code).toBe('MQD_E_DLL_POLICY');
      expect(gw.ok ? '' : gw.error.message).toContain(`directory ${dir}`);
      chmodSync(dir, 0o755);
      expect(checkDllPolicy(dll, 'root-owned').ok).toBe(true);
      chmodSync(dll, 0o664);
      const file = checkDllPolicy(dll, 'root-owned');
      expect(file.ok ? '' : file.error.message).toContain(`DLL ${dll}`);
      // Through the Snapshotter, on a real target naming the group-writable file.
      const t = await startTarget(conf.target, dll, 0, 0);
      const s = new Snapshotter();
      try {
        const { snapshot } = await s.snapshot([{ pid: t.pid, rank: 0 }], {
          dllPolicy: 'root-owned',
          allowRoot: true,
        });
        expect(snapshot.ranks[0]?.state).toMatchObject({ kind: 'error', code: 'MQD_E_DLL_POLICY' });
        chmodSync(dll, 0o644);
        const ok = await s.snapshot([{ pid: t.pid, rank: 0 }], { dllPolicy: 'root-owned', allowRoot: true });
        expect(ok.snapshot.ranks[0]?.state).toEqual({ kind: 'ok' });
      } finally {
        await s.dispose();
        t.kill();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('core files', () => {
  it("a user's core that names their own library: root reads it, the library runs as the user", async () => {
    rmSync(a.out, { force: true });
    const rank = await startProcess([a.rank, a.evil], { env: { OMPI_COMM_WORLD_RANK: '0' } });
    const dir = mkdtempSync('/tmp/mqd-core-attack-');
    chownSync(dir, NOBODY, NOBODY);
    const s = new Snapshotter();
    try {
      // The capture is written by a reader that is the rank's owner: the core is the user's file.
      const { captured } = await s.capture([{ pid: rank.pid }], dir, { ownerUid: NOBODY });
      expect(captured).toHaveLength(1);
      const core = join(dir, 'rank-0.core');
      expect(statSync(core).uid).toBe(NOBODY);
      rank.kill();
      const { snapshot } = await s.snapshotCores([{ path: core }]);
      expect(snapshot.ranks[0]?.state.kind).toBe('error');
      expect(snapshot.ranks[0]?.state.kind === 'error' ? snapshot.ranks[0].state.code : '').toMatch(
        /^MQD_E_/,
      );
      // The library named in the core was loaded (its constructor ran) only by a reader that is the user.
      const lines = readFileSync(a.out, 'utf8').trim().split('\n');
      expect(lines.length).toBeGreaterThan(0);
      for (const l of lines) expect(l).toBe(`euid=${NOBODY} uid=${NOBODY}`);
    } finally {
      await s.dispose();
      rank.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("capturing root's process for job owner 65534: refused, no core written, never stopped", async () => {
    const t = await startTarget(conf.target, conf.dll, 0, 0);
    const dir = mkdtempSync('/tmp/mqd-core-attack-');
    const watch = await watchPid(t.pid);
    const s = new Snapshotter();
    try {
      const { captured } = await s.capture([{ pid: t.pid, rank: 0 }], dir, { ownerUid: NOBODY });
      expect(captured[0]).toMatchObject({ error: { code: 'MQD_E_FOREIGN_PROCESS' } });
      const seen = await watch.stop();
      expect(seen.tracers).toEqual([]);
      expect(seen.states).not.toContain('t');
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      await s.dispose();
      t.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
