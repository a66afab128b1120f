// A frozen agent (SIGSTOP) must not make the user wait the whole 32 s deadline with no
// progress. Agents now say `alive` every keepaliveMs while they work, and the hub fails a request
// whose agent says nothing for its silence deadline with MQD_E_AGENT_SILENT; the other nodes'
// ranks still arrive. The agent here is a real process (agent-child.ts), really stopped.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import { hostAgentToken } from '../src/hub/hub.js';
import { createFakeLocator, createFakeReader } from '../src/synthetic/fakes.js';
import { AGENT_TOKEN, attachAsAdmin, cleanupAfterEach, json, startServer, waitFor } from './helpers.js';

const CHILD = fileURLToPath(new URL('./agent-child.ts', import.meta.url));
const SILENCE_MS = 5000;
const TIMEOUT_MS = 30_000;

const cleanup = cleanupAfterEach();

/** The agent of host `frozen` in its own process; its reads take readMs. */
function childAgent(url: string, readMs: number) {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      '--conditions=source',
      '--import',
      'tsx',
      CHILD,
      url,
      hostAgentToken(AGENT_TOKEN, 'frozen'),
      'frozen',
      String(readMs),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  cleanup.push(() => {
    // Always resumed before it is ended, whatever the test did to it.
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  });
  return { child, output: () => out };
}

/** An aggregator, an in-process agent for host `healthy` (the starter's), and the job over both hosts. */
async function twoNodeJob() {
  const s = await startServer({ agentSilenceMs: SILENCE_MS, snapshotTimeoutMs: TIMEOUT_MS });
  cleanup.push(() => s.close());
  const healthy = startAgent({
    serverUrl: s.url,
    token: AGENT_TOKEN,
    host: 'healthy',
    reader: createFakeReader({ worldSize: 2 }),
    locator: createFakeLocator({
      starterPid: 4242,
      uid: 1000,
      command: 'mpirun -np 2 ./ring',
      hosts: ['healthy', 'frozen'],
      ranksPerHost: 1,
    }),
  });
  cleanup.push(() => healthy.dispose());
  await healthy.whenConnected();
  return s;
}

interface Snap {
  snapshot: { id: string };
}

describe('a frozen agent', () => {
  it('SIGSTOPped mid-read: its ranks fail with MQD_E_AGENT_SILENT within the silence deadline, the others arrive', async () => {
    const s = await twoNodeJob();
    const a = childAgent(s.url, 600_000);
    await waitFor(() => a.output().includes('CONNECTED'), 'the child agent', 30_000);
    await waitFor(() => s.app.mqd.hub.isConnected('frozen'), 'the hub to see it');
    const jobId = await attachAsAdmin(s);
    const started = performance.now();
    const answer = s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: s.admin });
    await waitFor(() => a.output().includes('READING'), 'the read to start', 10_000);
    const pid = a.child.pid ?? -1;
    process.kill(pid, 'SIGSTOP');
    const stoppedAt = performance.now();
    try {
      const res = await answer;
      const waited = performance.now() - stoppedAt;
      expect(res.statusCode, res.body).toBe(201);
      const id = json<Snap>(res).snapshot.id;
      const got = await s.app.inject({ method: 'GET', url: `/api/snapshots/${id}`, headers: s.admin });
      const ranks = json<{
        snapshot: { ranks: { host: string; state: { kind: string; code?: string; message?: string } }[] };
      }>(got).snapshot.ranks;
      expect(ranks.find((r) => r.host === 'healthy')?.state).toEqual({ kind: 'ok' });
      const frozen = ranks.find((r) => r.host === 'frozen')?.state;
      expect(frozen?.code).toBe('MQD_E_AGENT_SILENT');
      expect(frozen?.message).toMatch(
        /the agent on frozen stopped answering for \d+\.\d s .*\(frozen or overloaded\)/,
      );
      // Within the silence deadline (checked every quarter of it) of the agent's last word,
      // far from the 30 s overall deadline.
      expect(waited).toBeLessThan(SILENCE_MS * 1.25 + 1000);
      expect(performance.now() - started).toBeLessThan(TIMEOUT_MS / 2);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  });

  it('a slow agent that keeps saying alive is waited for past the silence deadline', async () => {
    const s = await twoNodeJob();
    // Each read takes 1.6 silence deadlines: only the keepalives keep the request open.
    const a = childAgent(s.url, SILENCE_MS * 1.6);
    await waitFor(() => a.output().includes('CONNECTED'), 'the child agent', 30_000);
    await waitFor(() => s.app.mqd.hub.isConnected('frozen'), 'the hub to see it');
    const jobId = await attachAsAdmin(s);
    const res = await s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: s.admin });
    expect(res.statusCode, res.body).toBe(201);
    expect(json<{ snapshot: { ok: number; missing: number } }>(res).snapshot).toMatchObject({
      ok: 2,
      missing: 0,
    });
  });
});
