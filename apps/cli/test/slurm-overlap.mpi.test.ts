// The agent a user starts inside their own Slurm job, for clusters without a
// site-wide agent: `srun --overlap --jobid JOBID --ntasks-per-node=1 mqd agent ...`, run by a
// real unprivileged user (uid 65534, setpriv) on a real one-node Slurm
// (packages/testkit/src/slurm.ts). The user's hung fixture is sbatch'ed as that user; the
// aggregator is the built `mqd serve --no-local-agent` (root, per-host agent tokens), and the
// node's token is in a 0600 file of the user's. Attaching the job by its Slurm id through the
// API must give every rank's exact queues (the golden snapshot), read by the agent running as
// the user inside the job's step; a root job on the same node must be refused by that agent
// with a coded error and never traced or stopped. `scancel` of the step ends the agent.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NOBODY, watchPid } from '@mqd/core/testing';
import type { JobSnapshot } from '@mqd/model';
import { hostAgentToken } from '@mqd/server';
import {
  descendants,
  done,
  failed,
  goldenFile,
  identify,
  isRunning,
  MPI_NAMES,
  normaliseSnapshot,
  pending,
  type SlurmCluster,
  slurmAvailable,
  startSlurm,
  waitFor,
} from '@mqd/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MQD, servedUrl } from './run-mqd.js';

const ADMIN = 'admin-token-for-the-slurm-overlap-test-0123456789';
const SECRET = 'agent-secret-for-the-slurm-overlap-test-0123456789';
const USER = { uid: NOBODY, gid: NOBODY } as const;

interface Serve {
  readonly url: string;
  readonly child: ChildProcess;
  readonly dir: string;
}

let slurm: SlurmCluster | null = null;
let serve: Serve | null = null;
/** Each user's `srun --overlap ... mqd agent` started (setpriv execs srun: srun's pids). */
const sruns: ChildProcess[] = [];
let srunLog = '';

async function startServe(): Promise<Serve> {
  const dir = mkdtempSync('/tmp/mqd-overlap-serve-');
  const child = spawn(
    process.execPath,
    [MQD, 'serve', '--no-local-agent', '--port', '0', '--host', '127.0.0.1', '--data-dir', join(dir, 'data')],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MQD_ADMIN_TOKEN: ADMIN, MQD_AGENT_TOKEN: SECRET },
    },
  );
  const url = await servedUrl(child);
  return { url, child, dir };
}

async function api<T>(method: 'GET' | 'POST', path: string, token: string, body?: unknown) {
  const r = await fetch(`${serve?.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await r.text();
  return { status: r.status, body: JSON.parse(text) as T, text };
}

interface AgentRow {
  readonly host: string;
  readonly connected: boolean;
}

const connectedHosts = async () =>
  (await api<{ agents: AgentRow[] }>('GET', '/api/admin/agents', ADMIN)).body.agents
    .filter((a) => a.connected)
    .map((a) => a.host);

/** The processes of Slurm job `jobId` on this node, as `scontrol listpids` gives them. */
function jobPids(s: SlurmCluster, jobId: number): Array<{ pid: number; step: string }> {
  return s
    .run('scontrol', ['listpids', String(jobId)])
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length >= 3 && /^\d+$/.test(f[0] ?? ''))
    .map((f) => ({ pid: Number(f[0]), step: f[2] ?? '' }));
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

function realUid(pid: number): number {
  return Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? -1);
}

beforeAll(async () => {
  if (process.getuid?.() !== 0)
    throw new Error('slurm-overlap.mpi.test.ts needs root (setpriv, chown, Slurm)');
  if (!slurmAvailable()) throw new Error('MQD_E_PROVISION: Slurm is not installed; run scripts/provision.sh');
  if (!existsSync(join(MQD, '../../dist/main.js')))
    throw new Error(`${MQD}: the CLI is not built; run npm run build`);
  slurm = await startSlurm();
  serve = await startServe();
}, 90_000);

afterAll(async () => {
  // srun first (its step ends with it), then every job and step daemon of the cluster by pid.
  for (const c of sruns) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await slurm?.dispose();
  if (serve) {
    serve.child.kill('SIGKILL');
    rmSync(serve.dir, { recursive: true, force: true });
  }
}, 60_000);

/** The user's login token (made once: a user name is unique). */
let userToken: string | null = null;
async function loginOfUser(): Promise<string> {
  if (userToken !== null) return userToken;
  const created = await api<{ token: string }>('POST', '/api/admin/users', ADMIN, {
    name: 'nobody',
    uid: NOBODY,
  });
  expect(created.status, created.text).toBe(201);
  userToken = created.body.token;
  return userToken;
}

// The user's agent in a step of their job, its credentials and its refusal of root's job are
// Slurm's and MQD's, not the MPI library's: one build. Each MPI's starter under Slurm
// is slurm.mpi.test.ts's and slurm-multinode.mpi.test.ts's.
describe('mqd agent started by the user with srun --overlap inside their job', () => {
  it.each(MPI_NAMES.slice(0, 1))(
    "%s: reads the user's ranks as the user, refuses root's job, ends with its step",
    async (mpi) => {
      const s = slurm as SlurmCluster;
      const sv = serve as Serve;
      srunLog = '';
      const job = await s.submitFixture({ mpi, fixture: 'wrong_tag', user: USER });
      expect(job.ranks.map((r) => realUid(r.pid))).toEqual([NOBODY, NOBODY, NOBODY, NOBODY]);

      // The node's agent token, in a file of the user's that nobody else may read.
      const as = s.asUser(USER);
      const tokenFile = join(as.home, 'agent.token');
      writeFileSync(tokenFile, `${hostAgentToken(SECRET, s.node)}\n`, { mode: 0o600 });
      chownSync(tokenFile, USER.uid, USER.gid);
      chmodSync(tokenFile, 0o600);

      const [setpriv, ...prefix] = as.argv;
      const srun = spawn(
        setpriv ?? 'setpriv',
        [
          ...prefix,
          'srun',
          '--overlap',
          '--jobid',
          String(job.jobId),
          '--ntasks-per-node=1',
          process.execPath,
          MQD,
          'agent',
          '--server',
          sv.url,
          '--token-file',
          tokenFile,
        ],
        { env: as.env, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      sruns.push(srun);
      const collect = (d: Buffer) => {
        srunLog = (srunLog + d.toString()).slice(-4000);
      };
      srun.stdout?.on('data', collect);
      srun.stderr?.on('data', collect);

      await waitFor(
        async () => {
          if (srun.exitCode !== null || srun.signalCode !== null) return failed(`srun ended: ${srunLog}`);
          return (await connectedHosts()).includes(s.node) ? done(true) : pending('agent not connected');
        },
        { timeoutMs: 60_000, what: `the user's agent for ${s.node} connected` },
      );
      // The agent is a task of a new step of the user's job, running as the user.
      const agentRow = await waitFor(
        () => {
          const row = jobPids(s, job.jobId).find((p) => / agent --server /.test(cmdline(p.pid)));
          return row ? done(row) : pending('agent not in scontrol listpids yet');
        },
        { timeoutMs: 20_000, what: 'the agent among the job processes' },
      );
      expect(agentRow.step).not.toBe('batch');
      expect(realUid(agentRow.pid)).toBe(NOBODY);
      const agentProc = identify(agentRow.pid);
      if (agentProc === undefined) throw new Error(`agent pid ${agentRow.pid} vanished`);

      // The user attaches their job by its Slurm id with their own login token.
      const userToken = await loginOfUser();
      const attach = await api<{ job: { id: string; uid: number; rankCount: number; method: string } }>(
        'POST',
        '/api/jobs/attach',
        userToken,
        { slurmJob: String(job.jobId) },
      );
      expect(attach.status, attach.text).toBe(201);
      expect(attach.body.job.uid).toBe(NOBODY);
      expect(attach.body.job.method).toBe('slurm');
      // Exactly the fixture's ranks: the agent's own step (SLURM_PROCID=0) is not one of them.
      expect(attach.body.job.rankCount).toBe(job.ranks.length);

      const taken = await api<{ snapshot: { id: string } }>(
        'POST',
        `/api/jobs/${attach.body.job.id}/snapshots`,
        userToken,
      );
      expect(taken.status, taken.text).toBe(201);
      const got = await api<{ snapshot: JobSnapshot }>(
        'GET',
        `/api/snapshots/${taken.body.snapshot.id}`,
        userToken,
      );
      expect(got.status, got.text).toBe(200);
      const snap = normaliseSnapshot(got.body.snapshot);
      const golden = JSON.parse(
        readFileSync(goldenFile(mpi, 'wrong_tag', 'snapshot.json'), 'utf8'),
      ) as JobSnapshot;
      expect(snap.ranks.map((r) => r.state.kind)).toEqual(['ok', 'ok', 'ok', 'ok']);
      expect(got.body.snapshot.ranks.map((r) => [r.rank, r.pid])).toEqual(
        job.ranks.map((r) => [r.rank, r.pid]),
      );
      expect(snap.ranks.map((r) => [r.rank, r.communicators])).toEqual(
        golden.ranks.map((r) => [r.rank, r.communicators]),
      );
      // Everything the agent started to read them (its reader child) runs as the user too.
      const helpers = descendants(agentRow.pid);
      expect(helpers.length).toBeGreaterThan(0);
      expect(helpers.map((p) => realUid(p.pid))).toEqual(helpers.map(() => NOBODY));

      // A root job on the same node: the user's agent must not read it, even for an admin.
      const rootJob = await s.submitFixture({ mpi, fixture: 'wrong_tag' });
      const victim = rootJob.ranks[0]?.pid ?? -1;
      expect(realUid(victim)).toBe(0);
      const starter = jobPids(s, rootJob.jobId).find((p) => /\/(mpiexec|mpirun) /.test(cmdline(p.pid)));
      if (starter === undefined)
        throw new Error(`no starter among the processes of Slurm job ${rootJob.jobId}`);
      const watch = await watchPid(victim);
      let seen: Awaited<ReturnType<typeof watch.stop>>;
      let foreign: Awaited<ReturnType<typeof api<{ code: string; message: string }>>>;
      let foreignStarter: typeof foreign;
      try {
        foreign = await api('POST', '/api/jobs/attach', ADMIN, { slurmJob: String(rootJob.jobId) });
        foreignStarter = await api('POST', '/api/jobs/attach', ADMIN, {
          starterPid: starter.pid,
          host: s.node,
        });
      } finally {
        seen = await watch.stop();
      }
      // The agent answered with a refusal: 502 (a failure on its node), nothing stored.
      expect([foreign.status, foreign.body.code], foreign.text).toEqual([502, 'MQD_E_FOREIGN_PROCESS']);
      expect(foreign.body.message).toMatch(
        new RegExp(`Slurm job ${rootJob.jobId} belongs to uid 0, but this agent runs as uid ${NOBODY}`),
      );
      expect([foreignStarter.status, foreignStarter.body.code], foreignStarter.text).toEqual([
        502,
        'MQD_E_FOREIGN_PROCESS',
      ]);
      const listed = await api<{ jobs: Array<{ uid: number }> }>('GET', '/api/jobs', ADMIN);
      expect(listed.body.jobs.filter((j) => j.uid !== NOBODY)).toEqual([]);
      expect(seen.samples).toBeGreaterThan(0);
      expect(seen.tracers).toEqual([]);
      expect(seen.states).not.toContain('t');

      // scancel of the agent's step ends the agent (and srun); the aggregator sees it leave.
      execFileSync(setpriv ?? 'setpriv', [...prefix, 'scancel', `${job.jobId}.${agentRow.step}`], {
        env: as.env,
      });
      await waitFor(
        async () =>
          isRunning(agentProc) || (await connectedHosts()).includes(s.node)
            ? pending('agent still running or connected')
            : done(true),
        { timeoutMs: 30_000, what: 'the agent gone with its step' },
      );
      await waitFor(
        () => (srun.exitCode !== null || srun.signalCode !== null ? done(true) : pending('srun')),
        {
          timeoutMs: 30_000,
          what: 'srun ended',
        },
      );
      // The user's job itself is untouched by the end of the agent's step.
      expect(job.ranks.every((r) => existsSync(`/proc/${r.pid}`))).toBe(true);
      s.run('scancel', ['--signal=KILL', String(job.jobId)]);
      s.run('scancel', ['--signal=KILL', String(rootJob.jobId)]);
    },
    240_000,
  );

  it("the user's agent reader refuses a root rank even when the aggregator names uid 0 (admin)", async () => {
    // What the agent does with a snapshot request for root's rank: the built reader, run as the
    // user as the agent is, with the owner and allowRoot an admin's request carries.
    const victim = spawn('sleep', ['600'], { stdio: 'ignore' });
    const dir = mkdtempSync('/tmp/mqd-overlap-reader-');
    try {
      const victimPid = victim.pid ?? -1;
      const script = join(dir, 'read.mjs');
      const reader = new URL('../dist/real-reader.js', `file://${MQD}`).href;
      writeFileSync(
        script,
        `const { CoreRankReader } = await import(${JSON.stringify(reader)});
const r = new CoreRankReader();
const ranks = await r.read([{ rank: 0, pid: ${victimPid} }], { host: 'n', timeoutMs: 20000, signal: new AbortController().signal, ownerUid: 0, allowRoot: true });
await r.dispose();
console.log(JSON.stringify({ uid: process.getuid(), ranks }));
`,
      );
      chmodSync(dir, 0o755);
      chmodSync(script, 0o644);
      const as = (slurm as SlurmCluster).asUser(USER);
      const [setpriv, ...prefix] = as.argv;
      const watch = await watchPid(victimPid);
      let out: string;
      let seen: Awaited<ReturnType<typeof watch.stop>>;
      try {
        out = execFileSync(setpriv ?? 'setpriv', [...prefix, process.execPath, script], {
          env: as.env,
          encoding: 'utf8',
          timeout: 60_000,
        });
      } finally {
        seen = await watch.stop();
      }
      const r = JSON.parse(out.trim().split('\n').pop() ?? 'null') as {
        uid: number;
        ranks: Array<{ pid: number; state: { kind: string; code?: string; message?: string } }>;
      };
      expect(r.uid).toBe(NOBODY);
      expect(r.ranks.map((x) => [x.pid, x.state.kind, x.state.code])).toEqual([
        [victimPid, 'error', 'MQD_E_FOREIGN_PROCESS'],
      ]);
      expect(r.ranks[0]?.state.message).toMatch(/this agent runs as uid 65534/);
      expect(seen.samples).toBeGreaterThan(0);
      expect(seen.tracers).toEqual([]);
      expect(seen.states).not.toContain('t');
    } finally {
      victim.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
