// Jobs: list, attach (locate through the agent on the starter's node), snapshot, history.
// A user sees and snapshots only jobs of their own uid; admins see every job.
import {
  IDEMPOTENCY_KEY_HEADER,
  JobId,
  MqdException,
  API_ROUTES as R,
  type UiEventPayload,
} from '@mqd/model';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { resolveCoreDir } from '../../agent/core-dirs.js';
import { canSee } from '../../auth/auth.js';
import { newId } from '../../fanout/fanout.js';
import type { LocateTarget } from '../../protocol/agent-protocol.js';
import type { JobRecord, User } from '../../shared/types.js';
import { fail, jobJson, metaJson } from '../http.js';
import { routeOf } from '../schemas.js';
import { currentUser, type PluginOpts, rateLimited, type Services, typed } from './common.js';

/** The job, if it exists and this user may see it; otherwise the request ends with a coded error. */
export async function jobFor(s: Services, user: User, id: string): Promise<JobRecord> {
  const job = (await s.store.job(id)) ?? fail('MQD_E_NOT_FOUND', `no job ${id}`);
  if (!canSee(user, job)) fail('MQD_E_FORBIDDEN', `job ${id} belongs to uid ${job.uid}`);
  return job;
}

export const jobsPlugin: FastifyPluginAsync<PluginOpts> = async (fastify, opts) => {
  const app = typed(fastify);
  const { s } = opts;
  const toJson = async (job: JobRecord) =>
    jobJson(
      job,
      (h) => s.hub.isConnected(h),
      await s.store.snapshots(job.id, s.config.hungSnapshots),
      s.config.hungSnapshots,
    );

  app.route({
    ...routeOf(R.jobs),
    handler: async (req) => {
      const user = currentUser(req);
      // The rule of the single-job routes (canSee), not a uid match: a user mapped to uid 0
      // lists none of root's jobs.
      const jobs = (
        user.admin ? await s.store.jobs(null) : user.uid === null ? [] : await s.store.jobs(user.uid)
      ).filter((j) => canSee(user, j));
      const visible = s.hub.seenStarters().filter((x) => canSee(user, x.starter));
      const attached = await Promise.all(
        visible.map((x) => s.store.findJob(x.host, x.starter.starterPid, x.starter.startTime ?? null)),
      );
      const starters = visible
        .filter((_, i) => attached[i] === null)
        .map((x) => ({
          host: x.host,
          starterPid: x.starter.starterPid,
          uid: x.starter.uid,
          command: x.starter.command,
        }));
      return { jobs: await Promise.all(jobs.map(toJson)), starters };
    },
  });

  /**
   * A directory of core files as a job: allowed root (checked here, and again by the agent on
   * its node), one owner for all cores, that owner's or an admin's request; the job is the
   * directory's (re-attaching it finds the same job).
   */
  const attachCores = async (user: User, dir: string, given: string | undefined, reply: FastifyReply) => {
    // Checked on this node first when the directory is here (the agent of the aggregator's own
    // node, or a shared file system); the agent checks against its own roots in any case.
    const here = resolveCoreDir(dir, s.config.coreDirs);
    if (!here.ok && (here.error.code !== 'MQD_E_NOT_FOUND' || given === undefined)) {
      throw new MqdException(here.error);
    }
    const hosts = s.hub.hosts();
    let host = given;
    if (host === undefined) {
      if (hosts.length === 0) fail('MQD_E_AGENT_MISSING', 'no agent is connected');
      host =
        hosts.length === 1
          ? hosts[0]
          : fail(
              'MQD_E_BAD_INPUT',
              `${hosts.length} agents are connected: pass host (the node that holds ${dir})`,
            );
    } else if (!s.hub.isConnected(host)) {
      fail('MQD_E_AGENT_MISSING', `no agent is connected for host ${host}`);
    }
    if (host === undefined) return fail('MQD_E_AGENT_MISSING', 'no agent is connected');
    const located = await s.hub.locate(
      host,
      { coresDir: here.ok ? here.value : dir },
      s.config.snapshotTimeoutMs,
    );
    if (!located.ok) throw new MqdException(located.error);
    const found = located.value;
    const coresDir = found.coresDir ?? fail('MQD_E_INTERNAL', `the agent on ${host} named no core directory`);
    if (!canSee(user, found)) {
      fail(
        'MQD_E_FORBIDDEN',
        found.uid === 0
          ? `the cores in ${dir} on ${host} belong to root: only an admin may open them`
          : `the cores in ${dir} on ${host} belong to uid ${found.uid}`,
      );
    }
    if (found.ranks.length === 0) fail('MQD_E_NO_RANKS', `${dir} on ${host} holds no core`);
    if (found.ranks.some((r) => r.core === undefined || r.host !== host)) {
      fail('MQD_E_INTERNAL', `the agent on ${host} answered ranks without their core file`);
    }
    const ranks = [...found.ranks].sort((a, b) => a.rank - b.rank);
    // The job of this directory already attached keeps its id, starter and creation: found,
    // checked and saved in one store transaction (attachJob), so two attaches make one job.
    const saved = await s.store.attachJob(
      {
        id: JobId(newId()),
        host,
        starterPid: found.starterPid ?? ranks[0]?.pid ?? 1,
        starterStartTime: found.starterStartTime,
        uid: found.uid,
        command: found.command,
        method: found.method,
        ranks,
        createdAt: s.clock(),
        createdBy: user.name,
        endedAt: null,
        coresDir,
      },
      {
        who: user.name,
        action: 'attach',
        detail: `cores in ${coresDir} on ${host}: ${ranks.length} ranks (${found.method})`,
      },
    );
    if (!saved.ok) {
      fail(
        'MQD_E_FORBIDDEN',
        `the cores in ${coresDir} on ${host} changed owner; attach them again as that user`,
      );
    }
    const job = saved.job;
    const json = await toJson(job);
    s.ui.toJob(job.uid, 'job.attached', json satisfies UiEventPayload<'job.attached'>);
    return reply.code(201).send({ job: json });
  };

  app.route({
    ...routeOf(R.attach),
    config: rateLimited(opts),
    handler: async (req, reply) => {
      const user = currentUser(req);
      const body = req.body;
      const target: LocateTarget =
        'slurmJob' in body
          ? { slurmJob: body.slurmJob }
          : 'coresDir' in body
            ? { coresDir: body.coresDir }
            : { starterPid: body.starterPid };
      if ('coresDir' in target) return attachCores(user, target.coresDir, body.host, reply);
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
      if (!canSee(user, found)) {
        fail('MQD_E_FORBIDDEN', `${what} on ${host} belongs to uid ${found.uid}`);
      }
      // A Slurm job on several nodes: each other node's agent locates that node's ranks of it.
      const batchHost = host;
      const elsewhere = await Promise.all(
        ('slurmJob' in target ? (found.otherNodes ?? []) : []).map(async (node) => {
          if (!s.hub.isConnected(node)) {
            fail(
              'MQD_E_AGENT_MISSING',
              `${what} runs on ${node} too (its agent on ${batchHost} says so) and no agent is connected for ${node}`,
            );
          }
          const r = await s.hub.locate(node, target, s.config.snapshotTimeoutMs);
          if (!r.ok) {
            // An allocated node where the job runs nothing (yet) holds none of its ranks.
            if (r.error.code === 'MQD_E_NO_RANKS') return [];
            throw new MqdException({
              code: r.error.code,
              message: r.error.message.replace(/^(\w+): /, `$1: on ${node}: `),
            });
          }
          if (r.value.uid !== found.uid) {
            fail(
              'MQD_E_BAD_INPUT',
              `${what} belongs to uid ${found.uid} on ${batchHost} but to uid ${r.value.uid} on ${node}`,
            );
          }
          // Each node's agent answers for its own node only (the snapshot fans out by host).
          const stray = r.value.ranks.find((x) => x.host !== node);
          if (stray !== undefined) {
            fail('MQD_E_INTERNAL', `the agent on ${node} answered rank ${stray.rank} as on ${stray.host}`);
          }
          return r.value.ranks;
        }),
      );
      const allRanks = [...found.ranks, ...elsewhere.flat()];
      const seenRanks = new Set<number>();
      for (const r of allRanks) {
        if (seenRanks.has(r.rank)) fail('MQD_E_BAD_INPUT', `${what}: rank ${r.rank} was found on two nodes`);
        seenRanks.add(r.rank);
      }
      if (allRanks.length === 0) fail('MQD_E_NO_RANKS', `${what} on ${host} has no ranks`);
      const pid =
        'starterPid' in target
          ? target.starterPid
          : (found.starterPid ??
            fail('MQD_E_NO_RANKS', `${what} on ${host}: the agent named no process for it`));
      // Identity is (host, pid, start time): an old job on this pid with another start time had
      // a starter that is gone, so it ends; this attach makes a new job with its own uid, or
      // updates the job of this very starter. All in one store transaction (attachJob): two
      // attaches of one starter at once make one job.
      const sorted = allRanks.sort((a, b) => a.rank - b.rank);
      const hosts = new Set(sorted.map((r) => r.host)).size;
      const saved = await s.store.attachJob(
        {
          id: JobId(newId()),
          host,
          starterPid: pid,
          starterStartTime: found.starterStartTime,
          uid: found.uid,
          command: found.command,
          method: found.method,
          ranks: sorted,
          createdAt: s.clock(),
          createdBy: user.name,
          endedAt: null,
        },
        {
          who: user.name,
          action: 'attach',
          detail: `${'slurmJob' in target ? `${what} (pid ${pid})` : what} on ${host}: ${sorted.length} ranks on ${hosts} hosts (${found.method})`,
        },
      );
      if (!saved.ok) {
        fail('MQD_E_PID_REUSED', `starter ${pid} on ${host} changed owner; attach it again later`);
      }
      const job = saved.job;
      const json = await toJson(job);
      s.ui.toJob(job.uid, 'job.attached', json satisfies UiEventPayload<'job.attached'>);
      return reply.code(201).send({ job: json });
    },
  });

  app.route({
    ...routeOf(R.job),
    handler: async (req) => ({ job: await toJson(await jobFor(s, currentUser(req), req.params.id)) }),
  });

  app.route({
    ...routeOf(R.takeSnapshot),
    config: rateLimited(opts),
    handler: async (req, reply) => {
      const user = currentUser(req);
      const job = await jobFor(s, user, req.params.id);
      const key = req.headers[IDEMPOTENCY_KEY_HEADER];
      const request = key === undefined ? undefined : { userId: user.id, key };
      // A retry of a stored snapshot gets it even if that snapshot found the job ended.
      const replayed = request === undefined ? null : await s.snapshots.replay(job, request);
      if (replayed !== null) {
        if (!replayed.ok) throw new MqdException(replayed.error);
        return reply.code(201).send({ snapshot: metaJson(replayed.value) });
      }
      if (job.endedAt !== null) fail('MQD_E_JOB_ENDED', `job ${job.id} ended`);
      const r = await s.snapshots.take(job, user.name, request);
      if (!r.ok) throw new MqdException(r.error);
      return reply.code(201).send({ snapshot: metaJson(r.value) });
    },
  });

  app.route({
    ...routeOf(R.jobSnapshots),
    handler: async (req) => {
      const job = await jobFor(s, currentUser(req), req.params.id);
      return { snapshots: (await s.store.snapshots(job.id, req.query.limit)).map(metaJson) };
    },
  });
};
