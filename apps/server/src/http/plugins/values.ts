// Values across ranks: each expression a snapshot read (RankSnapshot.values), aggregated here
// (valuesOf of packages/model) so the dashboard gets groups, min/max, outliers and a binned
// value-against-rank series, never every rank's value. Only those who may see the snapshot's
// job read it (as for the snapshot).
import { type ApiValueSummary, type JobSnapshot, API_ROUTES as R, valuesOf } from '@mqd/model';
import type { FastifyPluginAsync } from 'fastify';
import { fail } from '../http.js';
import { routeOf } from '../schemas.js';
import { currentUser, type PluginOpts, typed } from './common.js';
import { jobFor } from './jobs.js';

/** Summaries of recently asked snapshots (stored snapshots never change), newest last. */
const CACHE_ENTRIES = 32;

export const valuesPlugin: FastifyPluginAsync<PluginOpts> = async (fastify, opts) => {
  const app = typed(fastify);
  const { s } = opts;
  const cache = new Map<string, ApiValueSummary[]>();
  app.route({
    ...routeOf(R.snapshotValues),
    handler: async (req) => {
      const id = req.params.id;
      const meta = (await s.store.snapshotMeta(id)) ?? fail('MQD_E_NOT_FOUND', `no snapshot ${id}`);
      await jobFor(s, currentUser(req), meta.jobId);
      const hit = cache.get(id);
      if (hit !== undefined) return { values: hit };
      const text = (await s.snapshots.json(id)) ?? fail('MQD_E_NOT_FOUND', `snapshot ${id} was removed`);
      const values = valuesOf(JSON.parse(text) as JobSnapshot);
      cache.set(id, values);
      for (const k of cache.keys()) {
        if (cache.size <= CACHE_ENTRIES) break;
        cache.delete(k);
      }
      return { values };
    },
  });
};
