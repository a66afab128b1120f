// /api: public routes, then everything that needs a logged-in user behind one hook. Every
// route's method, URL, schema and types come from API_ROUTES (packages/model api-spec.ts).

import { MqdException, API_ROUTES as R } from '@mqd/model';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { SESSION_COOKIE } from '../../auth/auth.js';
import { AGENT_PROTOCOL_VERSION } from '../../protocol/agent-protocol.js';
import { SERVER_VERSION } from '../config.js';
import { fail, userJson } from '../http.js';
import { routeOf } from '../schemas.js';
import { adminPlugin } from './admin.js';
import { currentUser, type PluginOpts, rateLimited, type Services, typed } from './common.js';
import { jobsPlugin } from './jobs.js';
import { sendOverview, sendSnapshot, sharesPlugin, snapshotsPlugin } from './snapshots.js';
import { valuesPlugin } from './values.js';

const publicPlugin: FastifyPluginAsync<PluginOpts> = async (fastify, opts) => {
  const app = typed(fastify);
  const { s } = opts;
  app.route({
    ...routeOf(R.health),
    handler: async () => ({
      status: 'ok' as const,
      version: SERVER_VERSION,
      protocol: AGENT_PROTOCOL_VERSION,
      schemaVersion: await s.store.schemaVersion(),
      agents: s.hub.hosts().length,
      // Several instances on one PostgreSQL store: which one answered.
      ...(s.store.dialect === 'postgres' ? { instance: s.instance } : {}),
    }),
  });

  app.route({
    ...routeOf(R.openapi),
    // The document is built by @fastify/swagger; its own shape is OpenAPI's, not ours.
    schema: {
      ...routeOf(R.openapi).schema,
      response: { 200: { type: 'object', additionalProperties: true } },
    },
    handler: async () => app.swagger(),
  });

  app.route({
    ...routeOf(R.login),
    config: rateLimited(opts),
    handler: async (req, reply) => {
      const r = await s.auth.login(req.body.token, req.headers, req.body.switchUser ?? false);
      if (!r.ok) throw new MqdException(r.error);
      // A switch ended the browser's previous session: its sockets go with it.
      if (req.body.switchUser) await s.uiSessions.recheck();
      await s.store.audit({ who: r.value.user.name, action: 'login' });
      reply.header(
        'set-cookie',
        `${SESSION_COOKIE}=${r.value.session}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${s.config.sessionTtlSeconds}${s.config.tlsCert !== null ? '; Secure' : ''}`,
      );
      return {
        user: userJson(r.value.user),
        sessionToken: r.value.session,
        expiresAt: new Date(r.value.expiresAt).toISOString(),
      };
    },
  });

  app.route({
    ...routeOf(R.logout),
    handler: async (req, reply) => {
      await s.auth.logout(req.headers);
      await s.uiSessions.recheck();
      reply.header('set-cookie', `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`);
      return { ok: true };
    },
  });

  app.route({
    ...routeOf(R.shared),
    // Share links are public: limit per address, and the decoded JSON is cached (fanout.ts).
    config: rateLimited(opts),
    handler: async (req, reply) => {
      const { share, meta } = await liveShared(s, req.params.id);
      return sendSnapshot(s, req, reply as FastifyReply, meta, {
        expiresAt: new Date(share.expiresAt).toISOString(),
      });
    },
  });

  app.route({
    ...routeOf(R.sharedOverview),
    config: rateLimited(opts),
    handler: async (req, reply) => {
      const { meta } = await liveShared(s, req.params.id);
      return sendOverview(s, req, reply as FastifyReply, meta);
    },
  });
};

/** A live share link and its snapshot's meta; MQD_E_NOT_FOUND when either is gone. */
async function liveShared(s: Services, id: string) {
  const share = await s.store.liveShare(id);
  const meta = share && (await s.store.snapshotMeta(share.snapshotId));
  if (!share || !meta) return fail('MQD_E_NOT_FOUND', 'this share link does not exist or has expired');
  return { share, meta };
}

const authedPlugin: FastifyPluginAsync<PluginOpts> = async (fastify, opts) => {
  const app = typed(fastify);
  const { s } = opts;
  app.addHook('onRequest', async (req) => {
    const r = await s.auth.fromHeaders(req.headers, req.socket.remoteAddress);
    if (!r.ok) throw new MqdException(r.error);
    req.user = r.value;
  });
  app.route({
    ...routeOf(R.me),
    handler: async (req) => ({ user: userJson(currentUser(req)) }),
  });
  // Children get { s } only: routes carry their full URL (under /api) from the spec.
  await app.register(jobsPlugin, { s });
  await app.register(snapshotsPlugin, { s });
  await app.register(sharesPlugin, { s });
  await app.register(valuesPlugin, { s });
  await app.register(adminPlugin, { s });
};

export const apiPlugin: FastifyPluginAsync<PluginOpts> = async (app, opts) => {
  await app.register(publicPlugin, { s: opts.s });
  await app.register(authedPlugin, { s: opts.s });
};
