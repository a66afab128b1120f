// Reading stored snapshots (only the owner of their job, or an admin), exporting them as a
// file, and sharing them read-only through an unguessable link that expires.
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import { type ApiSnapshotWithMeta, OVERVIEW_MEDIA_TYPE, API_ROUTES as R, shareBody } from '@mqd/model';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { canSee } from '../../auth/auth.js';
import { spliceGzip } from '../../hub/gzip-splice.js';
import type { ShareRecord, SnapshotMeta, User } from '../../shared/types.js';
import { fail, metaJson, shareJson } from '../http.js';
import { routeOf } from '../schemas.js';
import { currentUser, type PluginOpts, rateLimited, type Services, typed } from './common.js';
import { jobFor } from './jobs.js';

async function snapshotFor(s: Services, user: User, id: string): Promise<SnapshotMeta> {
  const meta = (await s.store.snapshotMeta(id)) ?? (await notStored(s, user, id));
  await jobFor(s, user, meta.jobId);
  return meta;
}

/**
 * Ends a request for a snapshot not stored: one retention removed names its job, and where its
 * newest snapshot opens, to those who may see the job; any other is just not there.
 */
async function notStored(s: Services, user: User, id: string): Promise<never> {
  const jobId = await s.store.removedSnapshotJob(id);
  const job = jobId === null ? null : await s.store.job(jobId);
  if (job === null || !canSee(user, job)) return fail('MQD_E_NOT_FOUND', `no snapshot ${id}`);
  return fail(
    'MQD_E_NOT_FOUND',
    `snapshot ${id} of job ${job.id} was removed by retention; the job's newest snapshot opens at /?view=matrix&job=${encodeURIComponent(job.id)}`,
  );
}

async function storedJson(s: Services, meta: SnapshotMeta): Promise<string> {
  return (await s.snapshots.json(meta.id)) ?? fail('MQD_E_NOT_FOUND', `snapshot ${meta.id} was removed`);
}

/**
 * A reply whose body is already JSON text: the stored snapshot goes out as is, since parsing and
 * re-serialising a 16k-rank snapshot would cost more than the rest of the request. `meta` is
 * typed by the spec; the snapshot text is what validateSnapshot accepted when it was stored.
 */
export const sendJson = (reply: FastifyReply, text: string) =>
  reply.type('application/json; charset=utf-8').send(text);

/** The text around the stored snapshot in `{"meta": ..., "snapshot": <stored text>, ...extra}`. */
function envelope(meta: SnapshotMeta, extra: Record<string, string>): { head: string; tail: string } {
  const m: ApiSnapshotWithMeta['meta'] = metaJson(meta);
  const tail = Object.entries(extra)
    .map(([k, v]) => `,${JSON.stringify(k)}:${JSON.stringify(v)}`)
    .join('');
  return { head: `{"meta":${JSON.stringify(m)},"snapshot":`, tail: `${tail}}` };
}

/** `{"meta": ..., "snapshot": <stored text>, ...extra}` of ApiSnapshotWithMeta. */
export function withMetaJson(
  meta: SnapshotMeta,
  snapshotJson: string,
  extra: Record<string, string> = {},
): string {
  const { head, tail } = envelope(meta, extra);
  return `${head}${snapshotJson}${tail}`;
}

const acceptsGzip = (req: FastifyRequest) => /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));

/**
 * Replies with a stored snapshot in its envelope (withMetaJson). A client that accepts gzip gets
 * the stored gzip spliced into the envelope (gzip-splice.ts): nothing is inflated or deflated
 * here, and the page inflates natively. Otherwise, or for a snapshot stored before splicing
 * existed, the JSON text (inflated once, cached by the fan-out).
 */
export async function sendSnapshot(
  s: Services,
  req: FastifyRequest,
  reply: FastifyReply,
  meta: SnapshotMeta,
  extra: Record<string, string> = {},
): Promise<FastifyReply> {
  reply.header('vary', 'accept-encoding');
  const stored = acceptsGzip(req) ? await s.store.snapshotData(meta.id) : null;
  if (stored !== null) {
    const { head, tail } = envelope(meta, extra);
    const gz = spliceGzip(Buffer.from(head), stored, meta.bytes, Buffer.from(tail));
    if (gz !== null)
      return reply.header('content-encoding', 'gzip').type('application/json; charset=utf-8').send(gz);
  }
  return sendJson(reply, withMetaJson(meta, await storedJson(s, meta), extra));
}

/**
 * Replies with a snapshot's overview (overviews.ts; made now if it was not yet): as stored,
 * gzipped, to a client that accepts gzip, else inflated.
 */
export async function sendOverview(
  s: Services,
  req: FastifyRequest,
  reply: FastifyReply,
  meta: SnapshotMeta,
): Promise<FastifyReply> {
  const gz =
    (await s.overviews.get(meta.id, meta.ranks)) ??
    fail('MQD_E_NOT_FOUND', `snapshot ${meta.id} was removed`);
  reply.header('vary', 'accept-encoding').type(OVERVIEW_MEDIA_TYPE);
  if (acceptsGzip(req)) return reply.header('content-encoding', 'gzip').send(gz);
  return reply.send(await gunzipAsync(gz));
}

const gunzipAsync = promisify(gunzip);

export const snapshotsPlugin: FastifyPluginAsync<PluginOpts> = async (fastify, { s }) => {
  const app = typed(fastify);
  app.route({
    ...routeOf(R.snapshot),
    handler: async (req, reply) => {
      const meta = await snapshotFor(s, currentUser(req), req.params.id);
      return sendSnapshot(s, req, reply as FastifyReply, meta);
    },
  });

  app.route({
    ...routeOf(R.snapshotOverview),
    handler: async (req, reply) => {
      const meta = await snapshotFor(s, currentUser(req), req.params.id);
      return sendOverview(s, req, reply as FastifyReply, meta);
    },
  });

  app.route({
    ...routeOf(R.exportSnapshot),
    handler: async (req, reply) => {
      const meta = await snapshotFor(s, currentUser(req), req.params.id);
      const name = `mqd-${meta.jobId}-${new Date(meta.takenAt).toISOString().replace(/[:.]/g, '-')}.json`;
      reply.header('content-disposition', `attachment; filename="${name}"`);
      const accepts = String(req.headers['accept-encoding'] ?? '');
      const gz = /\bgzip\b/.test(accepts) ? await s.store.snapshotData(meta.id) : null;
      if (gz !== null) {
        // The store already holds the gzip of exactly this JSON.
        reply.header('content-encoding', 'gzip').header('vary', 'accept-encoding');
        return (reply as FastifyReply).type('application/json; charset=utf-8').send(gz);
      }
      return sendJson(reply, await storedJson(s, meta));
    },
  });
};

export const sharesPlugin: FastifyPluginAsync<PluginOpts> = async (fastify, opts) => {
  const app = typed(fastify);
  const { s } = opts;
  app.route({
    ...routeOf(R.share, { body: shareBody(s.config.maxShareTtlSeconds) }),
    config: rateLimited(opts),
    // The body is optional; validate an absent one as {}.
    preValidation: async (req) => {
      req.body ??= {};
    },
    handler: async (req, reply) => {
      const user = currentUser(req);
      const meta = await snapshotFor(s, user, req.params.id);
      // 144 random bits: a share link is a bearer secret, it must not be guessable.
      const id = randomBytes(18).toString('base64url');
      const now = s.clock();
      const expiresAt = now + (req.body.expiresInSeconds ?? s.config.shareTtlSeconds) * 1000;
      await s.store.insertShare(
        { id, snapshotId: meta.id, createdBy: user.name, createdAt: now, expiresAt },
        {
          who: user.name,
          action: 'share',
          jobId: meta.jobId,
          snapshotId: meta.id,
          detail: `expires ${new Date(expiresAt).toISOString()}`,
        },
      );
      const base = (s.config.publicUrl ?? `${req.protocol}://${req.host}`).replace(/\/$/, '');
      // `url` is the dashboard page that opens the frozen snapshot read-only; `apiUrl` its JSON.
      return reply.code(201).send({
        id,
        url: `${base}/s/${id}`,
        apiUrl: `${base}/api/shared/${id}`,
        expiresAt: new Date(expiresAt).toISOString(),
      });
    },
  });

  app.route({
    ...routeOf(R.shares),
    handler: async (req) => {
      const user = currentUser(req);
      return {
        shares: (await s.store.liveShares(user.admin ? null : { name: user.name, uid: user.uid })).map(
          shareJson,
        ),
      };
    },
  });

  app.route({
    ...routeOf(R.revokeShare),
    handler: async (req, reply) => {
      const user = currentUser(req);
      const share =
        (await s.store.liveShare(req.params.id)) ?? fail('MQD_E_NOT_FOUND', 'no such live share link');
      // Its creator, the owner of the job of a system-made link, or an admin revokes a link;
      // others learn nothing about it.
      if (!(await mayRevoke(s, user, share))) fail('MQD_E_NOT_FOUND', 'no such live share link');
      await s.store.revokeShare(share.id, {
        who: user.name,
        action: 'share',
        snapshotId: share.snapshotId,
        detail: `revoked ${share.id}`,
      });
      return reply.code(204).send(null);
    },
  });
};

/**
 * Who may revoke (and list) a share link: an admin; its maker, for a user's link (by name); for a
 * system-made one (the hang watch's, `madeBy`), whoever sees its snapshot's job (canSee: the
 * job's uid, never uid 0 but for admins), never by a name, so no user named like the system
 * acts as it.
 */
async function mayRevoke(s: Services, user: User, share: ShareRecord): Promise<boolean> {
  if (user.admin) return true;
  if (share.madeBy === undefined) return share.createdBy === user.name;
  const meta = await s.store.snapshotMeta(share.snapshotId);
  const job = meta === null ? null : await s.store.job(meta.jobId);
  return job !== null && canSee(user, job);
}
