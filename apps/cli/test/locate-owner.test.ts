// Locating a job as the starter's owner, tried as an attacker: a fake starter run by uid 65534
// publishes an MPIR table that lists its own rank and a process of root. The root agent's
// locator reads the table in a child running as 65534, drops the root pid (never stopped), and
// pins the starter and the kept rank by start time; reading the table's pids for owner 65534
// refuses the root one with MQD_E_FOREIGN_PROCESS.
import { readFileSync } from 'node:fs';
import { procStartTime } from '@mqd/core';
import {
  type Attacker,
  buildAttacker,
  buildConformance,
  NOBODY,
  startProcess,
  startTarget,
  watchPid,
} from '@mqd/core/testing';
import { localHost } from '@mqd/mpir';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { locateAsOwner } from '../src/locate-as-owner.js';
import { MpirJobLocator } from '../src/real-locator.js';
import { CoreRankReader } from '../src/real-reader.js';

let a: Attacker;
let conf: ReturnType<typeof buildConformance>;
beforeAll(() => {
  expect(process.getuid?.()).toBe(0);
  a = buildAttacker();
  conf = buildConformance();
});
afterAll(() => a?.dispose());

describe("a fake starter pointing at root's process", () => {
  it('is located as its owner; the root pid is dropped, never stopped, and refused when read', async () => {
    const victim = await startTarget(conf.target, conf.dll, 0, 1); // root's, looks like rank 1
    const rank = await startProcess([a.rank, conf.dll], { env: { OMPI_COMM_WORLD_RANK: '0' } });
    const starter = await startProcess([a.starter, String(rank.pid), String(victim.pid)]);
    const watch = await watchPid(victim.pid);
    const reader = new CoreRankReader();
    try {
      const direct = await locateAsOwner(starter.pid, localHost());
      expect(direct.ok, direct.ok ? '' : direct.error.message).toBe(true);
      if (!direct.ok) return;
      expect(direct.value.credentials).toMatchObject({
        uid: NOBODY,
        euid: NOBODY,
        gid: NOBODY,
        groups: [],
        noNewPrivs: true,
      });
      expect(direct.value.job.ranks.map((r) => r.pid)).toEqual([rank.pid, victim.pid]); // what the table says
      expect(direct.value.warnings.join('\n')).toMatch(
        new RegExp(`pid ${victim.pid} runs as uid 0/0/0/0.*FOREIGN`),
      );

      const logs: string[] = [];
      const located = await new MpirJobLocator(undefined, { log: (l) => logs.push(l) }).locate(starter.pid);
      expect(located.ok).toBe(true);
      if (!located.ok) return;
      expect(located.value.uid).toBe(NOBODY);
      expect(located.value.starterStartTime).toBe(procStartTime(starter.pid));
      expect(located.value.ranks).toEqual([
        { rank: 0, pid: rank.pid, host: localHost().short, startTime: procStartTime(rank.pid) },
      ]);
      expect(logs.some((l) => l.includes(`pid ${victim.pid}`))).toBe(true);

      // Even if an aggregator handed on the table's pids as they are, owner 65534 refuses root's.
      const ranks = await reader.read(
        [
          { rank: 0, pid: rank.pid, startTime: procStartTime(rank.pid) ?? '' },
          { rank: 1, pid: victim.pid },
        ],
        { host: 'h', timeoutMs: 10_000, signal: new AbortController().signal, ownerUid: NOBODY },
      );
      const byPid = new Map(ranks.map((r) => [r.pid, r.state]));
      expect(byPid.get(victim.pid)).toMatchObject({ kind: 'error', code: 'MQD_E_FOREIGN_PROCESS' });
      expect(byPid.get(rank.pid)?.kind).toBeDefined();

      const seen = await watch.stop();
      expect(seen.samples).toBeGreaterThan(0);
      expect(seen.tracers).toEqual([]);
      expect(seen.states).not.toContain('t');
      expect(readFileSync(`/proc/${victim.pid}/status`, 'utf8')).toMatch(/^TracerPid:\s+0$/m);
    } finally {
      await reader.dispose();
      starter.kill();
      rank.kill();
      victim.kill();
    }
  });

  it('a starter that is gone or reused is refused', async () => {
    const starter = await startProcess([a.starter]);
    const pid = starter.pid;
    starter.kill();
    // wait for the exit (a condition, not a sleep)
    for (let i = 0; i < 1e6 && procStartTime(pid) !== null; i++) await new Promise((r) => setImmediate(r));
    const r = await locateAsOwner(pid, localHost());
    expect(r.ok ? '' : r.error.code).toBe('MQD_E_NO_SUCH_PID');
  });
});
