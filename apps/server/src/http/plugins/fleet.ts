// The hang watch's routes: GET /api/fleet (every discovered job with its watch state; admins
// see all, users their own uid's; a page at a time, rate limited per user: with a thousand
// jobs an unbounded list made every request, and everyone else's, wait) and the admins' watch policy (GET/POST /api/admin/watch,
// kept in the store, audited). Registered beside the authed routes with the same login check.
import { MqdException, API_ROUTES as R } from '@mqd/model';
import type { FastifyPluginAsync } from 'fastify';
import { KeyedLock } from '../../shared/lock.js';
import { fail } from '../http.js';
import { routeOf } from '../schemas.js';
import { currentUser, type PluginOpts, typed } from './common.js';

export const fleetPlugin: FastifyPluginAsync<PluginOpts> = async (fastify, { s }) => {
  const app = typed(fastify);
  app.addHook('onRequest', async (req) => {
    const r = await s.auth.fromHeaders(req.headers, req.socket.remoteAddress);
    if (!r.ok) throw new MqdException(r.error);
    req.user = r.value;
  });
  // Policy changes one at a time: the store and the watcher end with the same (the last) one.
  const policyLock = new KeyedLock();
  const admin = (req: Parameters<typeof currentUser>[0]) => {
    const user = currentUser(req);
    if (!user.admin) fail('MQD_E_FORBIDDEN', `${user.name} is not an admin`);
    return user;
  };

  app.route({
    ...routeOf(R.fleet),
    // Per user (the limiter's key after the login hook); a dashboard reloads on fleet.changed.
    config: { rateLimit: { max: s.config.fleetRateLimitMax, timeWindow: s.config.rateLimitWindowMs } },
    handler: async (req) => {
      const { limit, offset, q } = req.query;
      const page = await s.watcher.fleet(currentUser(req), {
        limit,
        offset,
        ...(q === undefined ? {} : { q }),
      });
      return { policy: s.watcher.currentPolicy(), jobs: page.jobs, total: page.total, offset };
    },
  });

  app.route({
    ...routeOf(R.watchPolicy),
    handler: async (req) => {
      admin(req);
      return s.watcher.currentPolicy();
    },
  });

  app.route({
    ...routeOf(R.setWatchPolicy),
    handler: async (req) => {
      const user = admin(req);
      const p = req.body;
      // Cores are written into the agents' core directories: without one there is nowhere.
      if (p.captureCores === true && s.config.coreDirs.length === 0) {
        fail(
          'MQD_E_BAD_INPUT',
          'captureCores needs a core directory: start mqd serve (and the agents) with --core-dir DIR, or leave captureCores off',
        );
      }
      return policyLock.run('policy', async () => {
        await s.store.setWatchPolicy(p, {
          who: user.name,
          action: 'watch-policy',
          detail: (
            `${p.enabled ? 'on' : 'off'}, every ${p.periodSeconds} s, budget ${p.stopBudgetMsPerRankHour} ms/rank/h, ` +
            `hung after ${p.hungAfterSamples}; users [${p.users.join(',')}] partitions [${p.partitions.join(',')}] ` +
            `accounts [${p.accounts.join(',')}]` +
            (p.programs === undefined ? '' : ` programs [${p.programs.join(',')}]`)
          ).slice(0, 1000),
        });
        await s.watcher.setPolicy(p);
        return s.watcher.currentPolicy();
      });
    },
  });
};
