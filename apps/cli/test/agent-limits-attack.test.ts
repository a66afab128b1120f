// Agent limits, replayed by a real unprivileged user: uid 65534 (setpriv) starts processes
// named mpirun (a copy of /bin/sleep) with a 5,000-character command line and five with ~1.9 MB
// ones (ARG_MAX is 2 MB). Before, the first made every status of the node's agent fail
// validation (new jobs stopped appearing) and the five pushed the status over the message cap
// (the agent reconnected every ~5 s). Now the agent (the real locator listing /proc) cuts each
// command line to MAX_COMMAND_CHARS with a visible "…" and lists only what fits the cap: every
// status is accepted, root's own starter still appears, and the agent stays connected.
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { NOBODY } from '@mqd/core/testing';
import { CLIP_MARK } from '@mqd/model';
import {
  type AgentEvent,
  type AgentHandle,
  createFakeReader,
  hostAgentToken,
  loadConfig,
  MAX_COMMAND_CHARS,
  type Served,
  serve,
  startAgent,
} from '@mqd/server';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MpirJobLocator } from '../src/real-locator.js';

const ADMIN = 'agent-limits-attack-admin-token-0123456789';
const HOST = 'attacked-node';

let dir = '';
const children: ChildProcess[] = [];
const cleanup: (() => Promise<void>)[] = [];

/** Resolves once `cond` holds (polled), or rejects naming `what` after `timeoutMs`. */
async function until(cond: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const commOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
};

/** A process named mpirun with these arguments, as uid 65534 unless asRoot; resolves once it runs as mpirun. */
async function mpirun(args: readonly string[], asRoot = false): Promise<number> {
  const exe = join(dir, 'mpirun');
  const argv = asRoot
    ? [exe, ...args]
    : ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', exe, ...args];
  const child = spawn(argv[0] ?? 'false', argv.slice(1), { stdio: 'ignore', env: { PATH: '/usr/bin:/bin' } });
  children.push(child);
  const pid = child.pid ?? -1;
  await until(() => commOf(pid) === 'mpirun' || child.exitCode !== null, `pid ${pid} to run as mpirun`);
  if (child.exitCode !== null) throw new Error(`mpirun ${args[0]} exited with ${child.exitCode}`);
  return pid;
}

beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error('agent-limits-attack.test.ts needs root (setpriv)');
  dir = mkdtempSync('/tmp/mqd-mpirun-');
  chmodSync(dir, 0o755);
  copyFileSync('/bin/sleep', join(dir, 'mpirun'));
  chmodSync(join(dir, 'mpirun'), 0o755);
});
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()?.();
});
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

/** The aggregator (no local agent) and this node's agent with the real starter listing. */
async function aggregatorAndAgent(maxMessageBytes?: number) {
  const cfg = loadConfig({
    env: {},
    argv: [],
    overrides: {
      port: 0,
      host: '127.0.0.1',
      dataDir: ':memory:',
      adminToken: ADMIN,
      ...(maxMessageBytes !== undefined ? { maxMessageBytes } : {}),
    },
  });
  if (!cfg.ok) throw new Error(cfg.error.message);
  const served: Served = await serve({ config: cfg.value, reader: null, print: () => {}, logger: false });
  cleanup.push(() => served.close());
  const events: AgentEvent[] = [];
  const log: string[] = [];
  const agent: AgentHandle = startAgent({
    serverUrl: served.url,
    token: hostAgentToken(served.agentToken, HOST),
    host: HOST,
    reader: createFakeReader({ worldSize: 1 }),
    locator: new MpirJobLocator(HOST),
    statusIntervalMs: 200,
    log: (l) => log.push(l),
  });
  cleanup.push(() => agent.dispose());
  agent.onEvent((e) => events.push(e));
  await agent.whenConnected();
  const hubAgent = () => served.app.mqd.hub.agents().find((a) => a.host === HOST);
  return { served, agent, events, log, hubAgent };
}

describe('processes named mpirun with huge command lines, as uid 65534', () => {
  const long5000 = ['600', '0'.repeat(5000)];
  // 19 arguments of 100,000 characters (each under MAX_ARG_STRLEN, 128 KiB): ~1.9 MB.
  const huge = ['600', ...Array.from({ length: 19 }, () => '0'.repeat(100_000))];
  let legit = 0;
  const attackers: number[] = [];

  beforeAll(async () => {
    legit = await mpirun(['601'], true);
    attackers.push(await mpirun(long5000));
    for (let i = 0; i < 5; i++) attackers.push(await mpirun(huge));
    // The attack is real: the kernel holds the whole command lines.
    for (const pid of attackers.slice(1)) {
      expect(readFileSync(`/proc/${pid}/cmdline`).byteLength).toBeGreaterThan(1_900_000);
    }
  });

  it('every status is accepted, the starters are listed cut with a visible mark, the agent stays connected', async () => {
    const { served, agent, events, hubAgent } = await aggregatorAndAgent();
    // Several status rounds (200 ms apart) on one connection.
    await until(() => (hubAgent()?.messages ?? 0) >= 5, 'five status messages accepted');
    expect(agent.connected).toBe(true);
    expect(events.filter((e) => e.kind === 'disconnect' || e.kind === 'connect-error')).toEqual([]);
    expect(events.filter((e) => e.kind === 'refused')).toEqual([]);
    expect(hubAgent()?.refused).toBe(0);
    expect(served.app.mqd.hub.droppedEntries).toBe(0);

    // What a viewer sees: GET /api/jobs lists root's starter as it is, the attacker's cut.
    const res = await served.app.inject({
      method: 'GET',
      url: '/api/jobs',
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(res.statusCode, res.body).toBe(200);
    const starters = (res.json() as { starters: { starterPid: number; uid: number; command: string }[] })
      .starters;
    const byPid = new Map(starters.map((s) => [s.starterPid, s]));
    expect(byPid.get(legit)).toMatchObject({ uid: 0, command: `${join(dir, 'mpirun')} 601` });
    for (const pid of attackers) {
      const s = byPid.get(pid);
      expect(s?.uid, `attacker ${pid} listed`).toBe(NOBODY);
      expect(s?.command.length).toBeLessThanOrEqual(MAX_COMMAND_CHARS);
      expect(s?.command.endsWith(CLIP_MARK)).toBe(true);
      expect(s?.command.startsWith(`${join(dir, 'mpirun')} 600 000`)).toBe(true);
    }
  });

  it('under a small message cap the agent lists what fits, and still never reconnects', async () => {
    // 16 KiB holds about three 4,096-character starters: the rest are left out, said in the log.
    const { agent, events, log, hubAgent } = await aggregatorAndAgent(16 * 1024);
    await until(() => (hubAgent()?.messages ?? 0) >= 5, 'five status messages accepted');
    expect(agent.connected).toBe(true);
    expect(events.filter((e) => e.kind === 'disconnect' || e.kind === 'connect-error')).toEqual([]);
    expect(hubAgent()?.refused).toBe(0);
    const listed = hubAgent()?.jobs ?? [];
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.length).toBeLessThan(attackers.length + 1);
    expect(log.some((l) => /MPI starters left out of the status .*16384-byte message limit/.test(l))).toBe(
      true,
    );
  });
});
