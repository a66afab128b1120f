// Jobs: list (every live job, hung first; ended ones a page at a time; searched here), attach (locate through the agent on the starter's node), snapshot, history.
// A user sees and snapshots only jobs of their own uid; admins see every job.
import {
  type ApiJob,
  IDEMPOTENCY_KEY_HEADER,
  JobId,
  type JobStateWatch,
  jobLabel,
  jobStateRank,
  MqdException,
  API_ROUTES as R,
  type UiEventPayload,
} from '@mqd/model';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { resolveCoreDir } from '../../agent/core-dirs.js';
import { canSee } from '../../auth/auth.js';
import { newId, STATE_HISTORY } from '../../fanout/fanout.js';
import type { LocateTarget } from '../../protocol/agent-protocol.js';
import type { JobRecord, SnapshotMeta, User } from '../../shared/types.js';
import { userNames } from '../../watch/user-names.js';
import { fail, jobJson, metaJson } from '../http.js';
import { routeOf } from '../schemas.js';
import { currentUser, type PluginOpts, rateLimited, type Services, typed } from './common.js';

/** The search box's words, lower case. */
const searchWords = (q: string): string[] =>
  q
    .toLowerCase()
    .split(/\s+/)
    .filter((w) => w !== '');

/** Does the job hold every word in its program, command, user, uid, job id or a node? */
function matches(job: JobRecord, user: string | null, words: readonly string[]): boolean {
  const hay = [
    jobLabel(job.command).program,
    job.command,
    user ?? '',
    `uid ${job.uid}`,
    job.id,
    job.host,
    ...new Set(job.ranks.map((r) => r.host)),
  ]
    .join('\n')
    .toLowerCase();
  return words.every((w) => hay.includes(w));
}

/** The job, if it exists and this user may see it; otherwise the request ends with a coded error. */
export async function jobFor(s: Services, user: User, id: string): Promise<JobRecord> {
  const job = (await s.store.job(id)) ?? fail('MQD_E_NOT_FOUND', `no job ${id}`);
  if (!canSee(user, job)) fail('MQD_E_FORBIDDEN', `job ${id} belongs to uid ${job.uid}`);
  return job;
}

export const jobsPlugin: FastifyPluginAsync<PluginOpts> = async (fastify, opts) => {
  const app = typed(fastify);
  const { s } = opts;
  // The model's one rule (jobStateOf) over the job's snapshots, the hang watch's verdict first.
  const toJsonWith = (
    job: JobRecord,
    recent: readonly SnapshotMeta[],
    verdict: JobStateWatch | null,
    user: string | null,
  ): ApiJob => ({
    ...jobJson(job, (h) => s.hub.isConnected(h), recent, s.config.hungSnapshots, verdict),
    user,
  });
  const toJson = async (job: JobRecord) =>
    toJsonWith(
      job,
      // An ended job is ended whatever its snapshots say: its newest one is enough.
      await s.store.snapshots(job.id, job.endedAt === null ? STATE_HISTORY : 1),
      // Looked up by this job's id only: every live verdict is read, none is shown but its own.
      (await s.watcher.verdictsByJob(null)).get(job.id) ?? null,
      (await userNames(s.store, [job.uid])).get(job.uid) ?? null,
    );

  app.route({
    ...routeOf(R.jobs),
    handler: async (req) => {
      const user = currentUser(req);
      const { endedLimit, endedOffset = 0, q = '' } = req.query;
      // The rule of the single-job routes (canSee), not a uid match: a user mapped to uid 0
      // lists none of root's jobs.
      const all = (
        user.admin ? await s.store.jobs(null) : user.uid === null ? [] : await s.store.jobs(user.uid)
      ).filter((j) => canSee(user, j));
      const names = await userNames(
        s.store,
        all.map((j) => j.uid),
      );
      const words = searchWords(q);
      const shown = words.length === 0 ? all : all.filter((j) => matches(j, names.get(j.uid) ?? null, words));
      const live = shown.filter((j) => j.endedAt === null);
      const endedAll = shown
        .filter((j) => j.endedAt !== null)
        .sort(
          (a, b) =>
            (b.endedAt ?? 0) - (a.endedAt ?? 0) || b.createdAt - a.createdAt || a.id.localeCompare(b.id),
        );
      const ended =
        endedLimit === undefined ? endedAll : endedAll.slice(endedOffset, endedOffset + endedLimit);
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
      const verdicts = await s.watcher.verdictsByJob(user.admin ? null : user.uid);
      // Each job's state from its recent snapshots, read in two queries (live, ended) for all.
      const recentLive = await s.store.snapshotsOfJobs(
        live.map((j) => j.id),
        STATE_HISTORY,
      );
      const recentEnded = await s.store.snapshotsOfJobs(
        ended.map((j) => j.id),
        1,
      );
      const json = (j: JobRecord) =>
        toJsonWith(
          j,
          (j.endedAt === null ? recentLive : recentEnded).get(j.id) ?? [],
          verdicts.get(j.id) ?? null,
          names.get(j.uid) ?? null,
        );
      const since = (j: ApiJob) => (j.since ? Date.parse(j.since) : Number.POSITIVE_INFINITY);
      const liveJson = live
        .map(json)
        .sort(
          (a, b) =>
            jobStateRank(a.state) - jobStateRank(b.state) || since(a) - since(b) || a.id.localeCompare(b.id),
        );
      return {
        jobs: [...liveJson, ...ended.map(json)],
        starters,
        ...(endedLimit === undefined ? {} : { endedTotal: endedAll.length, endedOffset }),
      };
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
      const r = await s.snapshots.take(job, user.name, request, req.body?.evals);
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
