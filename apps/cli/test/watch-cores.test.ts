// The agent's half of the hang watch's cores against a real unprivileged
// owner (uid 65534 via setpriv): `mqd serve`'s in-process agent, asked through the hub's
// `capture` request, writes the directory, the core and the manifest as that owner under its
// --core-dir (root writes nothing there), refuses a request that names another owner, refuses
// a reused pid, and lets the rank go. The rank is the attacker kit's fake MPI process.
import { chmodSync, lstatSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { procStartTime } from '@mqd/core';
import { type Attacker, buildAttacker, NOBODY, type Started, startProcess } from '@mqd/core/testing';
import { loadConfig } from '@mqd/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalServe, serveWithLocalAgent } from '../src/local-serve.js';

let a: Attacker;
let local: LocalServe | null = null;
let rank: Started | null = null;
let root = '';

beforeAll(async () => {
  expect(process.getuid?.()).toBe(0); // the agent runs as root, the job as uid 65534
  a = buildAttacker();
  // Root's 0755 directory: the owner cannot create in it, so root makes the capture directory
  // for them (createForOwner) and gives it to them; everything in it is then the owner's.
  root = mkdtempSync('/tmp/mqd-watch-cores-unit-');
  chmodSync(root, 0o755);
  const cfg = loadConfig({
    env: {},
    argv: ['--core-dir', root],
    overrides: {
      port: 0,
      host: '127.0.0.1',
      dataDir: ':memory:',
      adminToken: 'admin-token-for-the-watch-cores-unit-0123',
    },
  });
  if (!cfg.ok) throw new Error(cfg.error.message);
  local = await serveWithLocalAgent(cfg.value);
  rank = await startProcess([a.rank, '/nonexistent/libmqs.so'], { env: { OMPI_COMM_WORLD_RANK: '0' } });
});
afterAll(async () => {
  rank?.kill();
  await local?.close();
  a?.dispose();
  if (root !== '') rmSync(root, { recursive: true, force: true });
});

const tracerOf = (pid: number): number =>
  Number(/^TracerPid:\s*(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? -1);

function capture(ownerUid: number, name: string, startTime?: string) {
  const served = local?.served;
  const pid = rank?.pid ?? -1;
  if (!served?.agent) throw new Error('no agent');
  return served.app.mqd.hub.capture(
    served.agent.host,
    { ranks: [{ rank: 0, pid, startTime: startTime ?? procStartTime(pid) ?? '0' }], ownerUid, name },
    60_000,
  );
}

describe("the agent's capture request, against uid 65534", () => {
  it("writes the directory, the core and the manifest as the job's owner, and lets the rank go", async () => {
    const r = await capture(NOBODY, 'watch-starter-x-1');
    if (!r.ok) throw new Error(r.error.message);
    const dir = join(realpathSync(root), 'watch-starter-x-1');
    expect(r.value.dir).toBe(dir);
    expect(r.value.ranks.map((x) => [x.rank, x.pid, x.core, x.error])).toEqual([
      [0, rank?.pid, 'rank-0.core', null],
    ]);
    expect(readdirSync(dir).sort()).toEqual(['manifest.json', 'rank-0.core']);
    for (const p of [dir, join(dir, 'manifest.json'), join(dir, 'rank-0.core')]) {
      const st = lstatSync(p);
      expect([p, st.uid, st.gid, st.isSymbolicLink()]).toEqual([p, NOBODY, NOBODY, false]);
    }
    expect(lstatSync(join(dir, 'rank-0.core')).size).toBe(r.value.ranks[0]?.bytes);
    // Its stop is reported (the watcher counts it against the rank's stop budget).
    expect(r.value.ranks[0]?.pausedMicros).toBeGreaterThan(0);
    const m = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as { ranks: { core: string }[] };
    expect(m.ranks.map((x) => x.core)).toEqual(['rank-0.core']);
    expect(tracerOf(rank?.pid ?? -1)).toBe(0);
  });

  it('refuses a request that names another owner, and creates nothing', async () => {
    const r = await capture(1000, 'watch-starter-x-2');
    expect(r.ok ? r.value : r.error.code).toBe('MQD_E_NO_RANKS');
    expect(readdirSync(root)).not.toContain('watch-starter-x-2');
  });

  it('refuses a pid whose start time is not the one discovered (a reused pid), writing no core', async () => {
    const r = await capture(NOBODY, 'watch-starter-x-3', '1');
    if (!r.ok) throw new Error(r.error.message);
    expect(r.value.ranks.map((x) => [x.core, x.error?.code])).toEqual([[null, 'MQD_E_PID_REUSED']]);
    expect(readdirSync(join(root, 'watch-starter-x-3'))).toEqual(['manifest.json']);
    expect(tracerOf(rank?.pid ?? -1)).toBe(0);
  });
});
