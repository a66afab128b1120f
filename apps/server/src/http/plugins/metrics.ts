// GET /metrics: the aggregator's state in Prometheus text format, for the admins' Prometheus.
// Who may scrape: a bearer with the metrics token (--metrics-token / MQD_METRICS_TOKEN, so a
// Prometheus server needs no admin rights), or an admin (token or session). Jobs and users are
// counted, except in mqd_job_state: each live discovered job's hang-watch state with
// its job id, user and partition, which is what the admins' hang alert needs.

import { statSync } from 'node:fs';
import { join } from 'node:path';
import { MqdException, mqdError, WATCH_STATES } from '@mqd/model';
import type { FastifyPluginAsync } from 'fastify';
import { hashToken } from '../../auth/auth.js';
import { tokenMatches } from '../../hub/hub.js';
import { Gauge, type MetricsRegistry, PROMETHEUS_CONTENT_TYPE } from '../../shared/metrics.js';
import type { PluginOpts } from './common.js';

export interface MetricsPluginOpts extends PluginOpts {
  readonly registry: MetricsRegistry;
}

/** Gauges read at scrape time from the store, the hub and the snapshot service. */
export function addServiceGauges(reg: MetricsRegistry, { s }: PluginOpts): void {
  reg.add(
    new Gauge(
      'mqd_jobs',
      'Jobs the aggregator knows, by state: live and ended (store jobs), and the live discovered jobs by hang-watch state (progressing, computing, waiting, hung, unknown).',
      async () => {
        let live = 0;
        let ended = 0;
        const [jobs, states] = await Promise.all([s.store.jobs(null), s.watcher.jobStates()]);
        for (const j of jobs) {
          if (j.endedAt === null) live++;
          else ended++;
        }
        const byState = new Map<string, number>(WATCH_STATES.map((x) => [x, 0]));
        for (const j of states) byState.set(j.state, (byState.get(j.state) ?? 0) + 1);
        return [
          [{ state: 'live' }, live],
          [{ state: 'ended' }, ended],
          ...[...byState].map(([state, n]) => [{ state }, n] as const),
        ];
      },
    ),
  );
  reg.add(
    new Gauge(
      'mqd_jobs_looking_hung',
      "Live jobs in state hung by the model's rule (the hang watch's verdict, else --hung-snapshots equal snapshots with every rank read and operations pending).",
      async () => {
        const verdicts = await s.watcher.verdictsByJob(null);
        return (await s.snapshots.hung(s.config.hungSnapshots, null, (j) => verdicts.get(j.id) ?? null))
          .length;
      },
    ),
  );
  reg.add(
    new Gauge(
      'mqd_agents_connected',
      'Agents connected now.',
      () => s.hub.agents().filter((a) => a.connected).length,
    ),
  );
  reg.add(new Gauge('mqd_snapshots_stored', 'Snapshots in the store.', () => s.store.countSnapshots()));
  reg.add(
    new Gauge(
      'mqd_store_bytes',
      'Size of the SQLite store on disk (database and write-ahead log; 0 with PostgreSQL).',
      () => {
        if (s.config.dataDir === ':memory:' || s.store.dialect !== 'sqlite') return 0;
        let total = 0;
        for (const f of ['mqd.sqlite', 'mqd.sqlite-wal']) {
          try {
            total += statSync(join(s.config.dataDir, f)).size;
          } catch {
            // no WAL yet
          }
        }
        return total;
      },
    ),
  );
}

export const metricsPlugin: FastifyPluginAsync<MetricsPluginOpts> = async (app, { s, registry }) => {
  const metricsDigest =
    s.config.metricsToken === null ? null : Buffer.from(hashToken(s.config.metricsToken), 'hex');
  // The hub's constant-time token check (both sides hashed), the one agents get too.
  app.get('/metrics', { schema: { hide: true } }, async (req, reply) => {
    const auth = req.headers.authorization;
    const bearer = typeof auth === 'string' && auth.startsWith('Bearer ') ? auth.slice(7).trim() : null;
    const byToken = metricsDigest !== null && tokenMatches(bearer, metricsDigest);
    if (!byToken) {
      const user = await s.auth.fromHeaders(req.headers, req.socket.remoteAddress);
      if (!user.ok) throw new MqdException(user.error);
      if (!user.value.admin) {
        throw new MqdException(
          mqdError(
            'MQD_E_FORBIDDEN',
            `${user.value.name} may not read /metrics: use the metrics token or an admin's`,
          ),
        );
      }
    }
    reply.header('content-type', PROMETHEUS_CONTENT_TYPE);
    reply.header('cache-control', 'no-store');
    return await registry.render();
  });
};
