// /metrics: Prometheus text format, checked with an independent parser
// (parse-prometheus-text-format, from npm), after real work: synthetic agents answer a
// snapshot in which some ranks fail, so every family has something to count. Who may scrape:
// the metrics token or an admin; a user or nobody gets a coded refusal.

import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterEach, describe, expect, it } from 'vitest';
import { startSyntheticAgents } from '../src/synthetic/synthetic-agents.js';
import { AGENT_TOKEN, createUser, json, startServer, type TestServer, waitFor } from './helpers.js';

const METRICS_TOKEN = 'metrics-token-for-tests-0123456789';

interface Family {
  name: string;
  type: string;
  metrics: Array<{
    value?: string;
    labels?: Record<string, string>;
    buckets?: Record<string, string>;
    count?: string;
  }>;
}

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanup.length > 0) await cleanup.pop()?.();
});

async function server(): Promise<TestServer> {
  const s = await startServer({ metricsToken: METRICS_TOKEN });
  cleanup.push(() => s.close());
  return s;
}

async function scrape(
  s: TestServer,
  authorization?: string,
): Promise<{ status: number; body: string; type: string }> {
  const res = await s.app.inject({
    method: 'GET',
    url: '/metrics',
    headers: authorization === undefined ? {} : { authorization },
  });
  return { status: res.statusCode, body: res.body, type: String(res.headers['content-type']) };
}

const family = (fams: Family[], name: string) => {
  const f = fams.find((x) => x.name === name);
  if (!f) throw new Error(`no family ${name}`);
  return f;
};
const value = (fams: Family[], name: string, labels: Record<string, string> = {}) =>
  Number(
    family(fams, name).metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
      ?.value,
  );

describe('/metrics', () => {
  it('counts jobs, agents, snapshots, their duration and rank failures by reason', async () => {
    const s = await server();
    const sim = startSyntheticAgents({ serverUrl: s.url, token: AGENT_TOKEN, agents: 2, ranksPerAgent: 3 });
    cleanup.push(() => sim.dispose());
    await sim.whenConnected();
    await waitFor(() => s.app.mqd.hub.seenStarters().length === 1, 'the starter report');
    const attach = await s.app.inject({
      method: 'POST',
      url: '/api/jobs/attach',
      headers: s.admin,
      payload: { starterPid: sim.job.starterPid },
    });
    expect(attach.statusCode, attach.body).toBe(201);
    const jobId = json<{ job: { id: string } }>(attach).job.id;
    // One snapshot with every agent, then one with an agent gone: its 3 ranks are agent-missing.
    for (let i = 0; i < 2; i++) {
      if (i === 1) {
        await sim.agents[1]?.dispose();
        await waitFor(() => s.app.mqd.hub.agents().filter((a) => a.connected).length === 1, 'agent 1 gone');
      }
      const r = await s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: s.admin });
      expect(r.statusCode, r.body).toBe(201);
    }

    const got = await scrape(s, `Bearer ${METRICS_TOKEN}`);
    expect(got.status).toBe(200);
    expect(got.type).toMatch(/^text\/plain; version=0\.0\.4/);
    const fams = parsePrometheusTextFormat(got.body) as Family[];
    expect(fams.map((f) => [f.name, f.type])).toEqual(
      expect.arrayContaining([
        ['mqd_snapshots_total', 'COUNTER'],
        ['mqd_snapshot_duration_seconds', 'HISTOGRAM'],
        ['mqd_ranks_read_total', 'COUNTER'],
        ['mqd_ranks_failed_total', 'COUNTER'],
        ['mqd_jobs', 'GAUGE'],
        ['mqd_jobs_looking_hung', 'GAUGE'],
        ['mqd_agents_connected', 'GAUGE'],
        ['mqd_snapshots_stored', 'GAUGE'],
        ['mqd_store_bytes', 'GAUGE'],
      ]),
    );
    expect(value(fams, 'mqd_snapshots_total', { outcome: 'ok' })).toBe(1);
    expect(value(fams, 'mqd_snapshots_total', { outcome: 'partial' })).toBe(1);
    expect(value(fams, 'mqd_ranks_read_total')).toBe(6 + 3);
    expect(value(fams, 'mqd_ranks_failed_total', { code: 'MQD_E_AGENT_MISSING' })).toBe(3);
    const hist = family(fams, 'mqd_snapshot_duration_seconds').metrics[0];
    expect(Number(hist?.count)).toBe(2);
    expect(Number(hist?.buckets?.['+Inf'])).toBe(2);
    expect(value(fams, 'mqd_jobs', { state: 'live' })).toBe(1);
    expect(value(fams, 'mqd_agents_connected')).toBe(1);
    expect(value(fams, 'mqd_snapshots_stored')).toBe(2);
  });

  it('answers the metrics token and admins; refuses users and anonymous scrapes with a code', async () => {
    const s = await server();
    expect((await scrape(s, s.admin.authorization)).status).toBe(200);
    const none = await scrape(s);
    expect(none.status).toBe(401);
    expect(JSON.parse(none.body).code).toBe('MQD_E_UNAUTHENTICATED');
    const wrong = await scrape(s, 'Bearer not-the-metrics-token');
    expect(wrong.status).toBe(401);
    const alice = await createUser(s.app, 'alice', 1000);
    const user = await scrape(s, alice.authorization);
    expect(user.status).toBe(403);
    expect(JSON.parse(user.body).code).toBe('MQD_E_FORBIDDEN');
  });
});
