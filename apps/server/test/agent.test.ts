import { io } from 'socket.io-client';
import { describe, expect, it } from 'vitest';
import { type AgentEvent, backoffDelay, startAgent } from '../src/agent/agent.js';
import { buildApp } from '../src/http/app.js';
import { createFakeReader } from '../src/synthetic/fakes.js';
import { startSyntheticAgents } from '../src/synthetic/synthetic-agents.js';
import { ADMIN_TOKEN, AGENT_TOKEN, cleanupAfterEach, json, startServer, waitFor } from './helpers.js';

const cleanup = cleanupAfterEach();

describe('backoff', () => {
  it('grows exponentially up to the cap, with jitter below the nominal delay', () => {
    const o = { initialMs: 100, maxMs: 1000, factor: 2, jitter: 0.5 };
    expect([0, 1, 2, 3, 4, 10].map((a) => backoffDelay(a, o, () => 0))).toEqual([
      100, 200, 400, 800, 1000, 1000,
    ]);
    expect(backoffDelay(2, o, () => 1)).toBe(200);
    expect(backoffDelay(1000, o, () => 0)).toBe(1000);
  });
});

describe('agent connection', () => {
  it('reconnects with backoff after the aggregator restarts, and keeps answering', async () => {
    const first = await startServer();
    const port = Number(new URL(first.url).port);
    const events: AgentEvent['kind'][] = [];
    const agent = startAgent({
      serverUrl: first.url,
      token: AGENT_TOKEN,
      host: 'n0',
      reader: createFakeReader({ worldSize: 1 }),
      backoff: { initialMs: 10, maxMs: 40 },
    });
    cleanup.push(() => agent.dispose());
    agent.onEvent((e) => events.push(e.kind));
    await agent.whenConnected();
    await first.close();
    await waitFor(() => !agent.connected, 'the agent to notice');
    // While nothing listens, attempts fail and are retried.
    await waitFor(() => events.filter((k) => k === 'connect-error').length >= 2, 'failed attempts');

    const second = await buildApp({
      config: {
        dataDir: ':memory:',
        agentToken: AGENT_TOKEN,
        adminToken: ADMIN_TOKEN,
        allowSharedAgentToken: true,
      },
    });
    cleanup.push(() => second.close());
    await second.listen({ port, host: '127.0.0.1' });
    await agent.whenConnected();
    expect(second.mqd.hub.hosts()).toEqual(['n0']);
    const r = await second.mqd.hub.snapshot('n0', [{ rank: 0, pid: 9 }], 1000, () => {});
    expect(r.ok && r.value.count).toBe(1);
  });

  it('keeps retrying with a wrong token, reporting MQD_E_UNAUTHENTICATED, and stops when disposed', async () => {
    const s = await startServer();
    cleanup.push(() => s.close());
    const errors: string[] = [];
    const agent = startAgent({
      serverUrl: s.url,
      token: 'wrong-token-wrong-token',
      host: 'n0',
      reader: createFakeReader({ worldSize: 1 }),
      backoff: { initialMs: 5, maxMs: 10 },
    });
    agent.onEvent((e) => {
      if (e.kind === 'connect-error') errors.push(e.error.code);
    });
    await waitFor(() => errors.length >= 3, 'three refused attempts');
    expect(new Set(errors)).toEqual(new Set(['MQD_E_UNAUTHENTICATED']));
    await agent.dispose();
    const n = s.app.mqd.hub.refusedHandshakes;
    expect(n).toBeGreaterThanOrEqual(3);
    // A disposed agent makes no more attempts: by the time a fresh agent has connected (many
    // backoff periods of the disposed one), the count of refused handshakes has not moved.
    const good = startAgent({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      host: 'n1',
      reader: createFakeReader({ worldSize: 1 }),
    });
    cleanup.push(() => good.dispose());
    await good.whenConnected();
    await waitFor(() => s.app.mqd.hub.agents()[0]?.health != null, 'a status report from the good agent');
    expect(s.app.mqd.hub.refusedHandshakes).toBe(n);
    expect(agent.connected).toBe(false);
  });

  it('refuses a second connection for a host with a live agent (MQD_E_AGENT_CONFLICT)', async () => {
    const s = await startServer();
    cleanup.push(() => s.close());
    const mk = (id: string) =>
      startAgent({
        serverUrl: s.url,
        token: AGENT_TOKEN,
        host: 'same',
        agentId: id,
        reader: createFakeReader({ worldSize: 1 }),
        backoff: { initialMs: 10_000 },
      });
    const a = mk('a');
    cleanup.push(() => a.dispose());
    await a.whenConnected();
    const b = mk('b');
    cleanup.push(() => b.dispose());
    const codes: string[] = [];
    b.onEvent((e) => {
      if (e.kind === 'connect-error') codes.push(e.error.code);
    });
    await waitFor(() => codes.length > 0, 'the second agent to be refused');
    expect(codes[0]).toBe('MQD_E_AGENT_CONFLICT');
    // The live agent keeps its host: an impostor cannot evict it.
    expect(a.connected).toBe(true);
    expect(b.connected).toBe(false);
    expect(
      s.app.mqd.hub
        .agents()
        .filter((x) => x.connected)
        .map((x) => x.agentId),
    ).toEqual(['a']);
  });
});

describe('/ui namespace', () => {
  it('refuses browsers without a login and pushes job, snapshot and agent events to the owner', async () => {
    const s = await startServer();
    cleanup.push(() => s.close());
    const anon = io(`${s.url}/ui`, { transports: ['websocket'], reconnection: false });
    cleanup.push(() => {
      anon.disconnect();
    });
    const refused = await new Promise<Error & { data?: { code?: string } }>((r) =>
      anon.once('connect_error', r),
    );
    expect(refused.data?.code).toBe('MQD_E_UNAUTHENTICATED');

    const login = await s.app.inject({ method: 'POST', url: '/api/login', payload: { token: ADMIN_TOKEN } });
    const token = json<{ sessionToken: string }>(login).sessionToken;
    const browser = io(`${s.url}/ui`, { transports: ['websocket'], reconnection: false, auth: { token } });
    cleanup.push(() => {
      browser.disconnect();
    });
    const seen: string[] = [];
    browser.onAny((event: string) => seen.push(event));
    await new Promise<void>((r) => browser.once('connect', () => r()));

    const sim = startSyntheticAgents({ serverUrl: s.url, token: AGENT_TOKEN, agents: 1, ranksPerAgent: 2 });
    cleanup.push(() => sim.dispose());
    await sim.whenConnected();
    const att = await s.app.inject({
      method: 'POST',
      url: '/api/jobs/attach',
      headers: s.admin,
      payload: { starterPid: sim.job.starterPid },
    });
    const jobId = json<{ job: { id: string } }>(att).job.id;
    await s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: s.admin });
    await waitFor(() => seen.includes('snapshot.done'), 'snapshot.done');
    await sim.dispose();
    await waitFor(() => seen.includes('agent.disconnected'), 'agent.disconnected');
    expect(seen).toEqual(
      expect.arrayContaining([
        'agent.connected',
        'job.attached',
        'snapshot.progress',
        'snapshot.done',
        'agent.disconnected',
      ]),
    );
  });
});
