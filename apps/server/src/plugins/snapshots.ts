// Reading stored snapshots (only the owner of their job, or an admin), exporting them as a
// file, and sharing them read-only through an unguessable link that expires.
import { randomBytes } from 'node:crypto';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { PluginOpts, Services } from '../app.js';
import { fail, metaJson } from '../http.js';
import { idParams, SnapshotMetaJson } from '../schemas.js';
import type { SnapshotMeta, User } from '../types.js';
import { currentUser, rateLimited, security } from './common.js';
import { jobFor } from './jobs.js';

const errorRef = { $ref: 'ApiError#' } as const;
const errs = { 401: errorRef, 403: errorRef, 404: errorRef };

function snapshotFor(s: Services, user: User, id: string): SnapshotMeta {
  const meta = s.store.snapshotMeta(id) ?? fail('MQD_E_NOT_FOUND', `no snapshot ${id}`);
  jobFor(s, user, meta.jobId);
  return meta;
}

async function storedJson(s: Services, meta: SnapshotMeta): Promise<string> {
  return (await s.snapshots.json(meta.id)) ?? fail('MQD_E_NOT_FOUND', `snapshot ${meta.id} was removed`);
}

const sendJson = (reply: FastifyReply, text: string) =>
  reply.type('application/json; charset=utf-8').send(text);

export const snapshotsPlugin: FastifyPluginAsync<PluginOpts> = async (app, { s }) => {
  app.get<{ Params: { id: string } }>(
    '/snapshots/:id',
    {
      schema: {
        tags: ['snapshots'],
        summary: 'A stored snapshot with its summary',
        security,
        params: idParams,
        response: {
          200: {
            type: 'object',
            required: ['meta', 'snapshot'],
            properties: { meta: SnapshotMetaJson, snapshot: { $ref: 'JobSnapshot#' } },
          },
          ...errs,
        },
      },
    },
    async (req, reply) => {
      const meta = snapshotFor(s, currentUser(req), req.params.id);
      const json = await storedJson(s, meta);
      // Sent as stored, not re-serialised (see /shared/:id).
      return sendJson(reply, `{"meta":${JSON.stringify(metaJson(meta))},"snapshot":${json}}`);
    },
  );

  app.get<{ Params: { id: string } }>(
    '/snapshots/:id/export',
    {
      schema: {
        tags: ['snapshots'],
        summary: 'The snapshot as a JSON file (the packages/model snapshot format)',
        security,
        params: idParams,
        response: { 200: { $ref: 'JobSnapshot#' }, ...errs },
      },
    },
    async (req, reply) => {
      const meta = snapshotFor(s, currentUser(req), req.params.id);
      const name = `mqd-${meta.jobId}-${new Date(meta.takenAt).toISOString().replace(/[:.]/g, '-')}.json`;
      reply.header('content-disposition', `attachment; filename="${name}"`);
      const accepts = String(req.headers['accept-encoding'] ?? '');
      const gz = /\bgzip\b/.test(accepts) ? s.store.snapshotData(meta.id) : null;
      if (gz !== null) {
        // The store already holds the gzip of exactly this JSON.
        reply.header('content-encoding', 'gzip').header('vary', 'accept-encoding');
        return reply.type('application/json; charset=utf-8').send(gz);
      }
      return sendJson(reply, await storedJson(s, meta));
    },
  );
};

export const sharesPlugin: FastifyPluginAsync<PluginOpts> = async (app, opts) => {
  const { s } = opts;
  app.post<{ Params: { id: string }; Body: { expiresInSeconds?: number } }>(
    '/snapshots/:id/share',
    {
      config: rateLimited(opts),
      // The body is optional; validate an absent one as {}.
      preValidation: async (req) => {
        req.body ??= {};
      },
      schema: {
        tags: ['shares'],
        summary: 'A read-only link to this snapshot that works without login until it expires',
        security,
        params: idParams,
        body: {
          type: 'object',
          additionalProperties: false,
          properties: {
            expiresInSeconds: { type: 'integer', minimum: 1, maximum: s.config.maxShareTtlSeconds },
          },
        },
        response: {
          201: {
            type: 'object',
            required: ['id', 'url', 'apiUrl', 'expiresAt'],
            properties: {
              id: { type: 'string' },
              url: { type: 'string', description: 'the dashboard page of the frozen snapshot (/s/<id>)' },
              apiUrl: { type: 'string', description: 'the same snapshot as JSON (/api/shared/<id>)' },
              expiresAt: { type: 'string' },
            },
          },
          400: errorRef,
          429: errorRef,
          ...errs,
        },
      },
    },
    async (req, reply) => {
      const user = currentUser(req);
      const meta = snapshotFor(s, user, req.params.id);
      // 144 random bits: a share link is a bearer secret, it must not be guessable.
      const id = randomBytes(18).toString('base64url');
      const now = s.clock();
      const expiresAt = now + (req.body.expiresInSeconds ?? s.config.shareTtlSeconds) * 1000;
      s.store.insertShare(
        { id, snapshotId: meta.id, createdBy: user.name, createdAt: now, expiresAt },
        {
          who: user.name,
          action: 'share',
          jobId: meta.jobId,
          snapshotId: meta.id,
          detail: `expires ${new Date(expiresAt).toISOString()}`,
        },
      );
      const base = s.config.publicUrl ?? `${req.protocol}://${req.host}`;
      // `url` is the dashboard page that opens the frozen snapshot read-only; `apiUrl` its JSON.
      return reply.code(201).send({
        id,
        url: `${base.replace(/\/$/, '')}/s/${id}`,
        apiUrl: `${base.replace(/\/$/, '')}/api/shared/${id}`,
        expiresAt: new Date(expiresAt).toISOString(),
      });
    },
  );

  const ShareJson = {
    type: 'object',
    required: ['id', 'snapshotId', 'createdBy', 'createdAt', 'expiresAt'],
    properties: {
      id: { type: 'string' },
      snapshotId: { type: 'string' },
      createdBy: { type: 'string' },
      createdAt: { type: 'string' },
      expiresAt: { type: 'string' },
    },
  } as const;

  app.get(
    '/shares',
    {
      schema: {
        tags: ['shares'],
        summary: 'The live share links this user created (every live link for admins)',
        security,
        response: {
          200: {
            type: 'object',
            required: ['shares'],
            properties: { shares: { type: 'array', items: ShareJson } },
          },
          ...errs,
        },
      },
    },
    async (req) => {
      const user = currentUser(req);
      const list = s.store.liveShares(user.admin ? null : user.name);
      return {
        shares: list.map((x) => ({
          ...x,
          createdAt: new Date(x.createdAt).toISOString(),
          expiresAt: new Date(x.expiresAt).toISOString(),
        })),
      };
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/shares/:id',
    {
      schema: {
        tags: ['shares'],
        summary: 'Revoke a share link: it stops working at once',
        security,
        params: idParams,
        response: { 204: { type: 'null' }, ...errs },
      },
    },
    async (req, reply) => {
      const user = currentUser(req);
      const share = s.store.liveShare(req.params.id) ?? fail('MQD_E_NOT_FOUND', 'no such live share link');
      // Only its creator (or an admin) revokes a link; others learn nothing about it.
      if (!user.admin && share.createdBy !== user.name) fail('MQD_E_NOT_FOUND', 'no such live share link');
      s.store.revokeShare(share.id, {
        who: user.name,
        action: 'share',
        snapshotId: share.snapshotId,
        detail: `revoked ${share.id}`,
      });
      return reply.code(204).send();
    },
  );
};
