// The hang watch over real agents: the AgentHub is the watcher's WatchAgents as it is, and
// synthetic agents on two nodes (socket.io, the agent protocol, fakes.ts' discovery and
// reader) report one job; a round reads its counters on both nodes, stops it once through the
// ordinary snapshot path, stores that first snapshot, and the job ends when the agents stop
// reporting it. The rounds are run by the test (no timer fires by itself).
import { describe, expect, it } from 'vitest';
import { startSyntheticAgents } from '../src/synthetic/synthetic-agents.js';
import type { Timers } from '../src/watch/watcher.js';
import { AGENT_TOKEN, bodyJson, cleanupAfterEach, startServer, waitFor } from './helpers.js';

const cleanup = cleanupAfterEach();

const noTimers: Timers = { setTimeout: () => 0, clearTimeout: () => undefined };

describe('the hang watch over real agents', () => {
  it('samples a job two agents discovered and ends it when they stop reporting it', async () => {
    const s = await startServer(
      { watchEnabled: true, watchPeriodSeconds: 60 },
      { watchTimers: noTimers, slurm: null },
    );
    cleanup.push(() => s.close());
    const sim = startSyntheticAgents({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      agents: 2,
      ranksPerAgent: 2,
      uid: 1000,
      starterPid: 777,
      hostPrefix: 'wa-',
      discovery: true,
      statusIntervalMs: 50,
    });
    cleanup.push(() => sim.dispose());
    await sim.whenConnected();
    const hub = s.app.mqd.hub;
    await waitFor(() => hub.discovered().length === 2, 'both agents reporting the job');

    await s.app.mqd.watcher.tick();
    const fleet = async () => {
      const res = await s.app.inject({ method: 'GET', url: '/api/fleet', headers: s.admin });
      expect(res.statusCode).toBe(200);
      return bodyJson(res) as { jobs: Record<string, unknown>[] };
    };
    const [job, ...others] = (await fleet()).jobs;
    expect(others).toEqual([]);
    expect(job).toMatchObject({ nodes: ['wa-0', 'wa-1'], rankCount: 4, uid: 1000, watch: 'on', samples: 1 });
    // Counters from each node's agent, one stop through the snapshot path, the first one stored.
    expect(sim.discoveries.map((d) => d.calls.counters)).toEqual([1, 1]);
    const snapshotId = String(job?.['snapshotId']);
    const snap = await s.app.inject({ method: 'GET', url: `/api/snapshots/${snapshotId}`, headers: s.admin });
    expect(snap.statusCode).toBe(200);
    const body = bodyJson(snap) as {
      snapshot: { ranks: { rank: number; host: string; state: { kind: string } }[] };
    };
    expect(body.snapshot.ranks.map((r) => `${r.rank}@${r.host}:${r.state.kind}`)).toEqual([
      '0@wa-0:ok',
      '1@wa-0:ok',
      '2@wa-1:ok',
      '3@wa-1:ok',
    ]);

    // The job ends: the agents' next reports no longer list it.
    for (const d of sim.discoveries) d.jobs = [];
    await waitFor(() => hub.discovered().length === 0, 'the agents reporting no job');
    await s.app.mqd.watcher.tick();
    const [ended] = (await fleet()).jobs;
    expect(ended?.['endedAt']).not.toBeNull();
    expect(ended?.['snapshotId']).toBe(snapshotId);
    expect((await s.app.mqd.store.job(String(ended?.['jobId'])))?.endedAt).not.toBeNull();
  });
});
