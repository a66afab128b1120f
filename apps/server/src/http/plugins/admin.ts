// Admin pages: agents, the audit trail, hung jobs, and user accounts. Admins only.
import { MqdException, API_ROUTES as R } from '@mqd/model';
import type { FastifyPluginAsync } from 'fastify';
import { agentJson, auditJson, fail, hungJson, userJson } from '../http.js';
import { routeOf } from '../schemas.js';
import { currentUser, type PluginOpts, typed } from './common.js';

export const adminPlugin: FastifyPluginAsync<PluginOpts> = async (fastify, { s }) => {
  const app = typed(fastify);
  app.addHook('onRequest', async (req) => {
    const user = currentUser(req);
    if (!user.admin) fail('MQD_E_FORBIDDEN', `${user.name} is not an admin`);
  });

  app.route({
    ...routeOf(R.agents),
    handler: async () => ({
      agents: s.hub.agents().map(agentJson),
      refusedMessages: s.hub.refusedMessages,
      refusedHandshakes: s.hub.refusedHandshakes,
    }),
  });

  app.route({
    ...routeOf(R.activity),
    handler: async (req) => ({
      entries: (await s.store.activity(req.query.limit, req.query.before)).map(auditJson),
    }),
  });

  app.route({
    ...routeOf(R.hung),
    handler: async (req) => {
      const n = req.query.snapshots ?? s.config.hungSnapshots;
      const verdicts = await s.watcher.verdictsByJob(null);
      const hung = await s.snapshots.hung(n, null, (j) => verdicts.get(j.id) ?? null);
      return { snapshots: n, jobs: hung.map(hungJson) };
    },
  });

  app.route({
    ...routeOf(R.createUser),
    handler: async (req, reply) => {
      const made = await s.auth.createUser(req.body.name, req.body.uid, req.body.admin ?? false);
      if (!made.ok) throw new MqdException(made.error);
      const { user, token } = made.value;
      // An existing user's open sockets joined rooms under their old uid and rights.
      await s.uiSessions.recheck();
      await s.store.audit({
        who: currentUser(req).name,
        action: 'user-create',
        detail: `${user.name} uid ${user.uid}`,
      });
      return reply.code(201).send({ user: userJson(user), token });
    },
  });

  app.route({
    ...routeOf(R.revokeToken),
    handler: async (req, reply) => {
      const who = currentUser(req).name;
      const done = await s.store.revokeToken(req.params.name, {
        who,
        action: 'user-create',
        detail: `revoked the login token of ${req.params.name}`,
      });
      if (!done) fail('MQD_E_NOT_FOUND', `no user ${req.params.name}`);
      // Their open /ui sockets would otherwise keep receiving events on the revoked login.
      await s.uiSessions.recheck();
      return reply.code(204).send(null);
    },
  });
};
