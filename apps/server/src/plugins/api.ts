// /api: public routes, then everything that needs a logged-in user behind one hook.

import { MqdException } from '@mqd/model';
import type { FastifyPluginAsync } from 'fastify';
import { AGENT_PROTOCOL_VERSION } from '../agent-protocol.js';
import type { PluginOpts } from '../app.js';
import { SESSION_COOKIE } from '../auth.js';
import { SERVER_VERSION } from '../config.js';
import { fail, metaJson, userJson } from '../http.js';
import { idParams, SnapshotMetaJson, UserJson } from '../schemas.js';
import { adminPlugin } from './admin.js';
import { currentUser, rateLimited, security } from './common.js';
import { jobsPlugin } from './jobs.js';
import { sharesPlugin, snapshotsPlugin } from './snapshots.js';

const errorRef = { $ref: 'ApiError#' } as const;

const publicPlugin: FastifyPluginAsync<PluginOpts> = async (app, opts) => {
  const { s } = opts;
  app.get(
    '/health',
    {
      schema: {
        tags: ['public'],
        summary: 'Liveness, versions and the number of connected agents',
        response: {
          200: {
            type: 'object',
            required: ['status', 'version', 'protocol', 'schemaVersion', 'agents'],
            properties: {
              status: { type: 'string', enum: ['ok'] },
              version: { type: 'string' },
              protocol: { type: 'integer', description: 'agent protocol version' },
              schemaVersion: { type: 'integer', description: 'store schema version' },
              agents: { type: 'integer' },
            },
          },
        },
      },
    },
    async () => ({
      status: 'ok' as const,
      version: SERVER_VERSION,
      protocol: AGENT_PROTOCOL_VERSION,
      schemaVersion: s.store.schemaVersion(),
      agents: s.hub.hosts().length,
    }),
  );

  app.get(
    '/openapi.json',
    {
      schema: {
        hide: true,
        summary: 'This API as an OpenAPI 3 document',
        response: { 200: { type: 'object', additionalProperties: true } },
      },
    },
    async () => app.swagger(),
  );

  app.post<{ Body: { token: string } }>(
    '/login',
    {
      config: rateLimited(opts),
      schema: {
        tags: ['public'],
        summary: 'Exchange a login token for a session (cookie, and bearer token in the body)',
        body: {
          type: 'object',
          required: ['token'],
          additionalProperties: false,
          properties: { token: { type: 'string', minLength: 1, maxLength: 512 } },
        },
        response: {
          200: {
            type: 'object',
            required: ['user', 'sessionToken', 'expiresAt'],
            properties: { user: UserJson, sessionToken: { type: 'string' }, expiresAt: { type: 'string' } },
          },
          400: errorRef,
          401: errorRef,
          429: errorRef,
        },
      },
    },
    async (req, reply) => {
      const r = s.auth.login(req.body.token);
      if (!r.ok) throw new MqdException(r.error);
      s.store.audit({ who: r.value.user.name, action: 'login' });
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
  );

  app.post(
    '/logout',
    {
      schema: {
        tags: ['public'],
        summary: 'End the session of this cookie or bearer token',
        response: { 200: { type: 'object', required: ['ok'], properties: { ok: { type: 'boolean' } } } },
      },
    },
    async (req, reply) => {
      s.auth.logout(req.headers);
      reply.header('set-cookie', `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`);
      return { ok: true };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/shared/:id',
    {
      // Share links are public: limit per address, and the decoded JSON is cached (fanout.ts).
      config: rateLimited(opts),
      schema: {
        tags: ['public'],
        summary: 'A shared snapshot, read-only, without login, until the link expires',
        params: idParams,
        response: {
          200: {
            type: 'object',
            required: ['meta', 'snapshot', 'expiresAt'],
            properties: {
              meta: SnapshotMetaJson,
              snapshot: { $ref: 'JobSnapshot#' },
              expiresAt: { type: 'string' },
            },
          },
          404: errorRef,
        },
      },
    },
    async (req, reply) => {
      const share = s.store.liveShare(req.params.id);
      const meta = share && s.store.snapshotMeta(share.snapshotId);
      const json = meta ? await s.snapshots.json(meta.id) : null;
      if (!share || !meta || json === null) {
        return fail('MQD_E_NOT_FOUND', 'this share link does not exist or has expired');
      }
      // The stored JSON goes out as is: parsing and re-serialising a 16k-rank snapshot would
      // cost more than the rest of the request.
      return reply
        .type('application/json; charset=utf-8')
        .send(
          `{"meta":${JSON.stringify(metaJson(meta))},"snapshot":${json},"expiresAt":"${new Date(share.expiresAt).toISOString()}"}`,
        );
    },
  );
};

const authedPlugin: FastifyPluginAsync<PluginOpts> = async (app, opts) => {
  const { s } = opts;
  app.addHook('onRequest', async (req) => {
    const r = s.auth.fromHeaders(req.headers, req.socket.remoteAddress);
    if (!r.ok) throw new MqdException(r.error);
    req.user = r.value;
  });
  app.get(
    '/me',
    {
      schema: {
        tags: ['users'],
        summary: 'The logged-in user',
        security,
        response: {
          200: { type: 'object', required: ['user'], properties: { user: UserJson } },
          401: errorRef,
        },
      },
    },
    async (req) => ({ user: userJson(currentUser(req)) }),
  );
  // Children get { s } only: passing opts on would pass the parent's prefix on too.
  await app.register(jobsPlugin, { s });
  await app.register(snapshotsPlugin, { s });
  await app.register(sharesPlugin, { s });
  await app.register(adminPlugin, { s, prefix: '/admin' });
};

export const apiPlugin: FastifyPluginAsync<PluginOpts> = async (app, opts) => {
  await app.register(publicPlugin, { s: opts.s });
  await app.register(authedPlugin, { s: opts.s });
};
