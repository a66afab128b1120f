// Admin pages: agents, the audit trail, hung jobs, and user accounts. Admins only.
import type { FastifyPluginAsync } from 'fastify';
import type { PluginOpts } from '../app.js';
import { agentJson, auditJson, fail, hungJson, userJson } from '../http.js';
import { AgentJson, AuditJson, HungJson, UserJson } from '../schemas.js';
import { currentUser, security } from './common.js';

const errorRef = { $ref: 'ApiError#' } as const;
const errs = { 401: errorRef, 403: errorRef };

export const adminPlugin: FastifyPluginAsync<PluginOpts> = async (app, { s }) => {
  app.addHook('onRequest', async (req) => {
    const user = currentUser(req);
    if (!user.admin) fail('MQD_E_FORBIDDEN', `${user.name} is not an admin`);
  });

  app.get(
    '/agents',
    {
      schema: {
        tags: ['admin'],
        summary: 'Connected and recently disconnected agents, with their health',
        security,
        response: {
          200: {
            type: 'object',
            required: ['agents', 'refusedMessages', 'refusedHandshakes'],
            properties: {
              agents: { type: 'array', items: AgentJson },
              refusedMessages: { type: 'integer' },
              refusedHandshakes: { type: 'integer' },
            },
          },
          ...errs,
        },
      },
    },
    async () => ({
      agents: s.hub.agents().map(agentJson),
      refusedMessages: s.hub.refusedMessages,
      refusedHandshakes: s.hub.refusedHandshakes,
    }),
  );

  app.get<{ Querystring: { limit: number; before?: number } }>(
    '/activity',
    {
      schema: {
        tags: ['admin'],
        summary: 'The audit trail, newest first (page back with before=<id>)',
        security,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
            before: { type: 'integer', minimum: 1 },
          },
        },
        response: {
          200: {
            type: 'object',
            required: ['entries'],
            properties: { entries: { type: 'array', items: AuditJson } },
          },
          ...errs,
        },
      },
    },
    async (req) => ({ entries: s.store.activity(req.query.limit, req.query.before).map(auditJson) }),
  );

  app.get<{ Querystring: { snapshots?: number } }>(
    '/hung',
    {
      schema: {
        tags: ['admin'],
        summary: 'Jobs whose queues did not change over their last N snapshots',
        security,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { snapshots: { type: 'integer', minimum: 2, maximum: 1000 } },
        },
        response: {
          200: {
            type: 'object',
            required: ['snapshots', 'jobs'],
            properties: { snapshots: { type: 'integer' }, jobs: { type: 'array', items: HungJson } },
          },
          ...errs,
        },
      },
    },
    async (req) => {
      const n = req.query.snapshots ?? s.config.hungSnapshots;
      return { snapshots: n, jobs: s.snapshots.hung(n, null).map(hungJson) };
    },
  );

  app.post<{ Body: { name: string; uid: number | null; admin?: boolean } }>(
    '/users',
    {
      schema: {
        tags: ['admin'],
        summary: 'Create a user (or give an existing one a new token); the token is shown once',
        security,
        body: {
          type: 'object',
          required: ['name', 'uid'],
          additionalProperties: false,
          properties: {
            name: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._@-]+$' },
            uid: { anyOf: [{ type: 'integer', minimum: 0, maximum: 0xffffffff }, { type: 'null' }] },
            admin: { type: 'boolean', default: false },
          },
        },
        response: {
          201: {
            type: 'object',
            required: ['user', 'token'],
            properties: { user: UserJson, token: { type: 'string' } },
          },
          400: errorRef,
          ...errs,
        },
      },
    },
    async (req, reply) => {
      const { user, token } = s.auth.createUser(req.body.name, req.body.uid, req.body.admin ?? false);
      s.store.audit({
        who: currentUser(req).name,
        action: 'user-create',
        detail: `${user.name} uid ${user.uid}`,
      });
      return reply.code(201).send({ user: userJson(user), token });
    },
  );

  app.delete<{ Params: { name: string } }>(
    '/users/:name/token',
    {
      schema: {
        tags: ['admin'],
        summary: "Revoke a user's login token; their sessions end at once",
        security,
        params: {
          type: 'object',
          required: ['name'],
          properties: {
            name: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._@-]+$' },
          },
        },
        response: { 204: { type: 'null' }, ...errs },
      },
    },
    async (req, reply) => {
      const who = currentUser(req).name;
      const done = s.store.revokeToken(req.params.name, {
        who,
        action: 'user-create',
        detail: `revoked the login token of ${req.params.name}`,
      });
      if (!done) fail('MQD_E_NOT_FOUND', `no user ${req.params.name}`);
      return reply.code(204).send();
    },
  );
};
