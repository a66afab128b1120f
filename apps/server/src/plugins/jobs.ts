// Jobs: list, attach (locate through the agent on the starter's node), snapshot, history.
// A user sees and snapshots only jobs of their own uid; admins see every job.
import { JobId, MqdException, API_ROUTES as R, type UiEventPayload } from '@mqd/model';
import type { FastifyPluginAsync } from 'fastify';
import type { LocateTarget } from '../agent-protocol.js';
import { mayAccess } from '../auth.js';
import { newId } from '../fanout.js';
import { fail, jobJson, metaJson } from '../http.js';
import { routeOf } from '../schemas.js';
import type { JobRecord, User } from '../types.js';
import { currentUser, type PluginOpts, rateLimited, type Services, typed } from './common.js';

/** The job, if it exists and this user may see it; otherwise the request ends with a coded error. */
export function jobFor(s: Services, user: User, id: string): JobRecord {
  const job = s.store.job(id) ?? fail('MQD_E_NOT_FOUND', `no job ${id}`);
  if (!mayAccess(user, job.uid)) fail('MQD_E_FORBIDDEN', `job ${id} belongs to uid ${job.uid}`);
  return job;
}

export const jobsPlugin: FastifyPluginAsync<PluginOpts> = async (fastify, opts) => {
  const app = typed(fastify);
  const { s } = opts;
  const toJson = (job: JobRecord) =>
    jobJson(
      job,
      (h) => s.hub.isConnected(h),
      s.store.snapshots(job.id, s.config.hungSnapshots),
      s.config.hungSnapshots,
    );

  app.route({
    ...routeOf(R.jobs),
    handler: async (req) => {
      const user = currentUser(req);
      const jobs = user.admin ? s.store.jobs(null) : user.uid === null ? [] : s.store.jobs(user.uid);
      const starters = s.hub
        .seenStarters()
        .filter(
          (x) =>
            mayAccess(user, x.starter.uid) &&
            s.store.findJob(x.host, x.starter.starterPid, x.starter.startTime ?? null) === null,
        )
        .map((x) => ({
          host: x.host,
          starterPid: x.starter.starterPid,
          uid: x.starter.uid,
          command: x.starter.command,
        }));
      return { jobs: jobs.map(toJson), starters };
    },
  });

  app.route({
    ...routeOf(R.attach),
    config: rateLimited(opts),
    handler: async (req, reply) => {
      const user = currentUser(req);
      const body = req.body;
      const target: LocateTarget =
        'slurmJob' in body ? { slurmJob: body.slurmJob } : { starterPid: body.starterPid };
      const what = 'slurmJob' in target ? `Slurm job ${target.slurmJob}` : `starter ${target.starterPid}`;
      let host = body.host;
      if (host === undefined) {
        const hosts = s.hub.hosts();
        const seen =
          'starterPid' in target
            ? s.hub.seenStarters().filter((x) => x.starter.starterPid === target.starterPid)
            : [];
        if (hosts.length === 0) fail('MQD_E_AGENT_MISSING', 'no agent is connected');
        host = hosts.length === 1 ? hosts[0] : seen.length === 1 ? seen[0]?.host : undefined;
        if (host === undefined) {
          fail(
            'MQD_E_BAD_INPUT',
            'starterPid' in target
              ? `${hosts.length} agents are connected and ${seen.length} of them report starter pid ${target.starterPid}: pass host`
              : `${hosts.length} agents are connected: pass host (the Slurm job's batch host)`,
          );
        }
      } else if (!s.hub.isConnected(host)) {
        fail('MQD_E_AGENT_MISSING', `no agent is connected for host ${host}`);
      }
      const located = await s.hub.locate(host, target, s.config.snapshotTimeoutMs);
      if (!located.ok) throw new MqdException(located.error);
      const found = located.value;
      // Check ownership before anything is stored: a refused attach leaves no job behind.
      if (!mayAccess(user, found.uid)) {
        fail('MQD_E_FORBIDDEN', `${what} on ${host} belongs to uid ${found.uid}`);
      }
      if (found.ranks.length === 0) fail('MQD_E_NO_RANKS', `${what} on ${host} has no ranks`);
      const pid =
        'starterPid' in target
          ? target.starterPid
          : (found.starterPid ??
            fail('MQD_E_NO_RANKS', `${what} on ${host}: the agent named no process for it`));
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
        detail: `${'slurmJob' in target ? `${what} (pid ${pid})` : what} on ${host}: ${job.ranks.length} ranks on ${hosts} hosts (${job.method})`,
      });
      const json = toJson(job);
      s.ui.toJob(job.uid, 'job.attached', json satisfies UiEventPayload<'job.attached'>);
      return reply.code(201).send({ job: json });
    },
  });

  app.route({
    ...routeOf(R.job),
    handler: async (req) => ({ job: toJson(jobFor(s, currentUser(req), req.params.id)) }),
  });

  app.route({
    ...routeOf(R.takeSnapshot),
    config: rateLimited(opts),
    handler: async (req, reply) => {
      const user = currentUser(req);
      const job = jobFor(s, user, req.params.id);
      if (job.endedAt !== null) fail('MQD_E_JOB_ENDED', `job ${job.id} ended`);
      const r = await s.snapshots.take(job, user.name);
      if (!r.ok) throw new MqdException(r.error);
      return reply.code(201).send({ snapshot: metaJson(r.value) });
    },
  });

  app.route({
    ...routeOf(R.jobSnapshots),
    handler: async (req) => {
      const job = jobFor(s, currentUser(req), req.params.id);
      return { snapshots: s.store.snapshots(job.id, req.query.limit).map(metaJson) };
    },
  });
};
