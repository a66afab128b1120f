// Jobs: list, attach (locate through the agent on the starter's node), snapshot, history.
// A user sees and snapshots only jobs of their own uid; admins see every job.
import { JobId, MqdException } from '@mqd/model';
import type { FastifyPluginAsync } from 'fastify';
import type { PluginOpts, Services } from '../app.js';
import { mayAccess } from '../auth.js';
import { newId } from '../fanout.js';
import { fail, jobJson, metaJson } from '../http.js';
import { idParams, JobJson, SnapshotMetaJson, StarterJson } from '../schemas.js';
import type { JobRecord, User } from '../types.js';
import { currentUser, rateLimited, security } from './common.js';

const errorRef = { $ref: 'ApiError#' } as const;
const errs = { 400: errorRef, 401: errorRef, 403: errorRef, 404: errorRef, 429: errorRef, 503: errorRef };

/** The job, if it exists and this user may see it; otherwise the request ends with a coded error. */
export function jobFor(s: Services, user: User, id: string): JobRecord {
  const job = s.store.job(id) ?? fail('MQD_E_NOT_FOUND', `no job ${id}`);
  if (!mayAccess(user, job.uid)) fail('MQD_E_FORBIDDEN', `job ${id} belongs to uid ${job.uid}`);
  return job;
}

export const jobsPlugin: FastifyPluginAsync<PluginOpts> = async (app, opts) => {
  const { s } = opts;
  const toJson = (job: JobRecord) =>
    jobJson(
      job,
      (h) => s.hub.isConnected(h),
      s.store.snapshots(job.id, s.config.hungSnapshots),
      s.config.hungSnapshots,
    );

  app.get(
    '/jobs',
    {
      schema: {
        tags: ['jobs'],
        summary: 'Attached jobs, and starters the agents see that nobody attached yet',
        security,
        response: {
          200: {
            type: 'object',
            required: ['jobs', 'starters'],
            properties: {
              jobs: { type: 'array', items: JobJson },
              starters: { type: 'array', items: StarterJson },
            },
          },
          401: errorRef,
        },
      },
    },
    async (req) => {
      const user = currentUser(req);
      const jobs = user.admin ? s.store.jobs(null) : user.uid === null ? [] : s.store.jobs(user.uid);
      const starters = s.hub
        .seenStarters()
        .filter(
          (x) =>
            mayAccess(user, x.starter.uid) &&
            s.store.findJob(x.host, x.starter.starterPid, x.starter.startTime ?? null) === null,
        )
        .map((x) => ({ host: x.host, ...x.starter }));
      return { jobs: jobs.map(toJson), starters };
    },
  );

  app.post<{ Body: { host?: string; starterPid: number } }>(
    '/jobs/attach',
    {
      config: rateLimited(opts),
      schema: {
        tags: ['jobs'],
        summary: 'Attach to a job by its starter pid, through the agent on the starter node',
        description:
          'Without host, the only connected agent is used, or the one agent that reports this starter pid.',
        security,
        body: {
          type: 'object',
          required: ['starterPid'],
          additionalProperties: false,
          properties: {
            host: { type: 'string', minLength: 1, maxLength: 255 },
            starterPid: { type: 'integer', minimum: 1, maximum: 0x3fffffff },
          },
        },
        response: {
          201: { type: 'object', required: ['job'], properties: { job: JobJson } },
          ...errs,
          422: errorRef,
        },
      },
    },
    async (req, reply) => {
      const user = currentUser(req);
      const pid = req.body.starterPid;
      let host = req.body.host;
      if (host === undefined) {
        const hosts = s.hub.hosts();
        const seen = s.hub.seenStarters().filter((x) => x.starter.starterPid === pid);
        if (hosts.length === 0) fail('MQD_E_AGENT_MISSING', 'no agent is connected');
        host = hosts.length === 1 ? hosts[0] : seen.length === 1 ? seen[0]?.host : undefined;
        if (host === undefined) {
          fail(
            'MQD_E_BAD_INPUT',
            `${hosts.length} agents are connected and ${seen.length} of them report starter pid ${pid}: pass host`,
          );
        }
      } else if (!s.hub.isConnected(host)) {
        fail('MQD_E_AGENT_MISSING', `no agent is connected for host ${host}`);
      }
      const located = await s.hub.locate(host, pid, s.config.snapshotTimeoutMs);
      if (!located.ok) throw new MqdException(located.error);
      const found = located.value;
      // Check ownership before anything is stored: a refused attach leaves no job behind.
      if (!mayAccess(user, found.uid)) {
        fail('MQD_E_FORBIDDEN', `starter ${pid} on ${host} belongs to uid ${found.uid}`);
      }
      if (found.ranks.length === 0) fail('MQD_E_NO_RANKS', `starter ${pid} on ${host} has no ranks`);
      // Identity is (host, pid, start time): an old job on this pid with another start time had
      // a starter that is gone, so it ends; this attach makes a new job with its own uid.
      s.store.endReusedJobs(host, pid, found.starterStartTime, s.clock());
      const existing = s.store.findJob(host, pid, found.starterStartTime);
      if (existing && existing.uid !== found.uid) {
        fail('MQD_E_PID_REUSED', `starter ${pid} on ${host} changed owner; attach it again later`);
      }
      const job: JobRecord = {
        id: existing?.id ?? JobId(newId()),
        host,
        starterPid: pid,
        starterStartTime: found.starterStartTime,
        uid: found.uid,
        command: found.command,
        method: found.method,
        ranks: [...found.ranks].sort((a, b) => a.rank - b.rank),
        createdAt: existing?.createdAt ?? s.clock(),
        createdBy: existing?.createdBy ?? user.name,
        endedAt: null,
      };
      const hosts = new Set(job.ranks.map((r) => r.host)).size;
      s.store.saveJob(job, {
        who: user.name,
        action: 'attach',
        jobId: job.id,
        detail: `starter ${pid} on ${host}: ${job.ranks.length} ranks on ${hosts} hosts (${job.method})`,
      });
      const json = toJson(job);
      s.ui.toJob(job.uid, 'job.attached', json);
      return reply.code(201).send({ job: json });
    },
  );

  app.get<{ Params: { id: string } }>(
    '/jobs/:id',
    {
      schema: {
        tags: ['jobs'],
        summary: 'One job',
        security,
        params: idParams,
        response: { 200: { type: 'object', required: ['job'], properties: { job: JobJson } }, ...errs },
      },
    },
    async (req) => ({ job: toJson(jobFor(s, currentUser(req), req.params.id)) }),
  );

  app.post<{ Params: { id: string } }>(
    '/jobs/:id/snapshots',
    {
      config: rateLimited(opts),
      schema: {
        tags: ['jobs'],
        summary: "Snapshot every rank of the job through each host's agent, merge and store",
        description:
          'Ranks whose agent is gone or too slow are in the snapshot in state agent-missing; `partial` says so.',
        security,
        params: idParams,
        response: {
          201: { type: 'object', required: ['snapshot'], properties: { snapshot: SnapshotMetaJson } },
          ...errs,
          410: errorRef,
        },
      },
    },
    async (req, reply) => {
      const user = currentUser(req);
      const job = jobFor(s, user, req.params.id);
      if (job.endedAt !== null) fail('MQD_E_JOB_ENDED', `job ${job.id} ended`);
      const r = await s.snapshots.take(job, user.name);
      if (!r.ok) throw new MqdException(r.error);
      return reply.code(201).send({ snapshot: metaJson(r.value) });
    },
  );

  app.get<{ Params: { id: string }; Querystring: { limit: number } }>(
    '/jobs/:id/snapshots',
    {
      schema: {
        tags: ['jobs'],
        summary: 'Snapshot history of a job, newest first',
        security,
        params: idParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
        },
        response: {
          200: {
            type: 'object',
            required: ['snapshots'],
            properties: { snapshots: { type: 'array', items: SnapshotMetaJson } },
          },
          ...errs,
        },
      },
    },
    async (req) => {
      const job = jobFor(s, currentUser(req), req.params.id);
      return { snapshots: s.store.snapshots(job.id, req.query.limit).map(metaJson) };
    },
  );
};
