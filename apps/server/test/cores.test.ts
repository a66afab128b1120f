// Jobs read from core files (attach {coresDir}): the path checks on a real directory tree
// (allowed root, outside it, symlink escape, `..`, relative), ownership (own cores, another
// user's, root's, mixed), the agent's own re-check, and core jobs as jobs (stored, listed,
// snapshotted with `source`, never auto-snapshotted). The reader and locator are the fakes;
// the directories, files, owners and symlinks are real.
import { chownSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type JobSnapshot, validateSnapshot } from '@mqd/model';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import { loadConfig } from '../src/http/config.js';
import { createFakeReader, FAKE_CORE_MAGIC, withFakeCores } from '../src/synthetic/fakes.js';
import { AGENT_TOKEN, cleanupAfterEach, createUser, json, startServer, type TestServer } from './helpers.js';

const cleanup = cleanupAfterEach();

let base = '';
let allowed = '';
let outside = '';

/** A directory of `ranks` fake cores owned by `uid`; `bad` ranks get a file that is no core. */
function coreDir(parent: string, name: string, uid: number, ranks = 2, bad: readonly number[] = []): string {
  const dir = join(parent, name);
  mkdirSync(dir, { recursive: true });
  for (let r = 0; r < ranks; r++) {
    const p = join(dir, `rank-${r}.core`);
    writeFileSync(p, bad.includes(r) ? 'not a core' : `${FAKE_CORE_MAGIC}fake core of rank ${r}`);
    chownSync(p, uid, uid);
  }
  return dir;
}

beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error('cores.test.ts chowns files: run it as root');
  base = mkdtempSync(join(tmpdir(), 'mqd-cores-'));
  allowed = join(base, 'allowed');
  outside = join(base, 'outside');
  coreDir(allowed, 'alice-job', 1000);
  coreDir(allowed, 'bob-job', 2000);
  coreDir(allowed, 'root-job', 0);
  coreDir(allowed, 'bad-job', 1000, 3, [1]);
  coreDir(allowed, 'empty-job', 1000, 0);
  const mixed = coreDir(allowed, 'mixed-job', 1000);
  chownSync(join(mixed, 'rank-1.core'), 2000, 2000);
  coreDir(outside, 'alice-job', 1000);
  symlinkSync(join(outside, 'alice-job'), join(allowed, 'escape'));
  symlinkSync(join(allowed, 'alice-job'), join(allowed, 'inner-link'));
});
afterAll(() => {
  if (base !== '') rmSync(base, { recursive: true, force: true });
});

/** The aggregator with core roots `serverRoots` and one agent (host node0) allowing `agentRoots`. */
async function setup(serverRoots: readonly string[], agentRoots: readonly string[] = serverRoots) {
  const s = await startServer({ coreDirs: serverRoots });
  cleanup.push(() => s.close());
  const agent = startAgent({
    serverUrl: s.url,
    token: AGENT_TOKEN,
    host: 'node0',
    agentId: 'node0',
    reader: createFakeReader({ worldSize: 3 }),
    locator: withFakeCores(null),
    coreDirs: agentRoots,
  });
  cleanup.push(() => agent.dispose());
  await agent.whenConnected();
  const alice = await createUser(s.app, 'alice', 1000);
  return { s, alice };
}

const attach = (s: TestServer, who: { authorization: string }, coresDir: string, host?: string) =>
  s.app.inject({
    method: 'POST',
    url: '/api/jobs/attach',
    headers: who,
    payload: { coresDir, ...(host === undefined ? {} : { host }) },
  });

interface JobJson {
  id: string;
  uid: number;
  method: string;
  rankCount: number;
  coresDir?: string;
}

describe('core directory path checks', () => {
  it('opens a directory inside an allowed root, as the owner of its cores', async () => {
    const { s, alice } = await setup([allowed]);
    const res = await attach(s, alice, join(allowed, 'alice-job'));
    expect(res.statusCode, res.body).toBe(201);
    const { job } = json<{ job: JobJson }>(res);
    expect(job).toMatchObject({
      uid: 1000,
      method: 'cores',
      rankCount: 2,
      coresDir: join(allowed, 'alice-job'),
    });
    // A symlink that stays inside the root is the directory it points to: the same job.
    const again = await attach(s, alice, join(allowed, 'inner-link'));
    expect(again.statusCode, again.body).toBe(201);
    expect(json<{ job: JobJson }>(again).job.id).toBe(job.id);
  });

  it('refuses a directory outside the roots, naming the setting that allows directories', async () => {
    const { s, alice } = await setup([allowed]);
    const res = await attach(s, alice, join(outside, 'alice-job'));
    expect(res.statusCode).toBe(403);
    expect(json(res)).toMatchObject({ code: 'MQD_E_CORE_DIR_FORBIDDEN' });
    expect(json<{ message: string }>(res).message).toMatch(/--core-dir/);
  });

  it('refuses a symlink inside a root that leads out of it', async () => {
    const { s, alice } = await setup([allowed]);
    const res = await attach(s, alice, join(allowed, 'escape'));
    expect(res.statusCode).toBe(403);
    expect(json(res)).toMatchObject({ code: 'MQD_E_CORE_DIR_FORBIDDEN' });
  });

  it("refuses '..' and relative paths before looking at the disk", async () => {
    const { s, alice } = await setup([allowed]);
    for (const dir of [`${allowed}/../outside/alice-job`, `${allowed}/alice-job/..`, 'allowed/alice-job']) {
      const res = await attach(s, alice, dir);
      expect(res.statusCode, dir).toBe(400);
      expect(json(res)).toMatchObject({ code: 'MQD_E_BAD_INPUT' });
    }
  });

  it('refuses every directory when no root is configured', async () => {
    const { s, alice } = await setup([]);
    const res = await attach(s, alice, join(allowed, 'alice-job'));
    expect(res.statusCode).toBe(403);
    expect(json<{ message: string }>(res).message).toMatch(/MQD_CORE_DIRS/);
  });

  it('answers 404 for a directory that does not exist', async () => {
    const { s, alice } = await setup([allowed]);
    const res = await attach(s, alice, join(allowed, 'no-such-job'));
    expect(res.statusCode).toBe(404);
    expect(json(res)).toMatchObject({ code: 'MQD_E_NOT_FOUND' });
  });

  it('does not tell whether a path outside the roots exists (root resolves it)', async () => {
    const { s, alice } = await setup([allowed]);
    // One directory root can see and the user cannot, one that does not exist: the same answer.
    for (const dir of [join(outside, 'alice-job'), join(outside, 'no-such-job')]) {
      const res = await attach(s, alice, dir);
      expect(res.statusCode, dir).toBe(403);
      expect(json(res)).toMatchObject({ code: 'MQD_E_CORE_DIR_FORBIDDEN' });
    }
  });

  it('the agent re-checks against its own roots, whatever the aggregator allowed', async () => {
    const { s, alice } = await setup([base], [join(allowed, 'bob-job')]);
    const res = await attach(s, alice, join(allowed, 'alice-job'));
    expect(res.statusCode).toBe(403);
    expect(json(res)).toMatchObject({ code: 'MQD_E_CORE_DIR_FORBIDDEN' });
    expect(json<{ message: string }>(res).message).toMatch(/not inside a directory the admin allows/);
  });
});

describe('core directory ownership', () => {
  it("refuses another user's cores to a non-admin, and opens them for an admin as that user's job", async () => {
    const { s, alice } = await setup([allowed]);
    const res = await attach(s, alice, join(allowed, 'bob-job'));
    expect(res.statusCode).toBe(403);
    expect(json(res)).toMatchObject({ code: 'MQD_E_FORBIDDEN' });
    const ok = await attach(s, s.admin, join(allowed, 'bob-job'));
    expect(ok.statusCode, ok.body).toBe(201);
    expect(json<{ job: JobJson }>(ok).job.uid).toBe(2000);
    // alice still does not see bob's job.
    const list = json<{ jobs: JobJson[] }>(await s.app.inject({ url: '/api/jobs', headers: alice }));
    expect(list.jobs.map((j) => j.uid)).not.toContain(2000);
  });

  it("keeps root's cores for admins", async () => {
    const { s, alice } = await setup([allowed]);
    const res = await attach(s, alice, join(allowed, 'root-job'));
    expect(res.statusCode).toBe(403);
    expect(json<{ message: string }>(res).message).toMatch(/belong to root/);
    const ok = await attach(s, s.admin, join(allowed, 'root-job'));
    expect(ok.statusCode, ok.body).toBe(201);
    const snap = await s.app.inject({
      method: 'POST',
      url: `/api/jobs/${json<{ job: JobJson }>(ok).job.id}/snapshots`,
      headers: s.admin,
    });
    expect(snap.statusCode, snap.body).toBe(201);
    expect(json<{ snapshot: { ok: number } }>(snap).snapshot.ok).toBe(2);
  });

  it('refuses a directory whose cores belong to several users', async () => {
    const { s } = await setup([allowed]);
    const res = await attach(s, s.admin, join(allowed, 'mixed-job'));
    expect(res.statusCode).toBe(400);
    expect(json<{ message: string }>(res).message).toMatch(/uids 1000 and 2000/);
  });

  it("refuses a job whose cores the locator read as another uid's than the paths now say (swapped in and back)", async () => {
    // The real locator reads each core's headers (its command line) through one descriptor and
    // returns that file's owner; a core swapped for root's while it read, and back before the
    // agent's own check by path, shows as this disagreement (docs/root-paths.md).
    const s = await startServer({ coreDirs: [allowed] });
    cleanup.push(() => s.close());
    const base = withFakeCores(null);
    const agent = startAgent({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      host: 'node0',
      agentId: 'node0',
      reader: createFakeReader({ worldSize: 3 }),
      locator: {
        ...base,
        async locateCores(dir: string) {
          const r = await base.locateCores?.(dir);
          if (!r?.ok) throw new Error('the fake locator found no cores');
          return { ok: true, value: { ...r.value, uid: 0, command: "2 core files of root's secret" } };
        },
      },
      coreDirs: [allowed],
    });
    cleanup.push(() => agent.dispose());
    await agent.whenConnected();
    const alice = await createUser(s.app, 'alice', 1000);
    const res = await attach(s, alice, join(allowed, 'alice-job'));
    expect(res.statusCode, res.body).toBe(422);
    expect(json(res)).toMatchObject({ code: 'MQD_E_CORE_INVALID' });
    expect(json<{ message: string }>(res).message).toMatch(
      /changed owner while they were located \(uid 0, now uid 1000\)/,
    );
    expect(res.body).not.toContain('secret');
    const jobs = await s.app.inject({ url: '/api/jobs', headers: s.admin });
    expect(jobs.body).not.toContain('alice-job');
  });

  it('names a directory without cores', async () => {
    const { s, alice } = await setup([allowed]);
    const res = await attach(s, alice, join(allowed, 'empty-job'));
    expect(res.statusCode).toBe(422);
    expect(json(res)).toMatchObject({ code: 'MQD_E_CORE_NO_RANK' });
  });
});

describe('a job of cores', () => {
  it('is stored and listed, snapshots carry their cores, and bad cores get their coded error', async () => {
    const { s, alice } = await setup([allowed]);
    const res = await attach(s, alice, join(allowed, 'bad-job'));
    expect(res.statusCode, res.body).toBe(201);
    const id = json<{ job: JobJson }>(res).job.id;
    const list = json<{ jobs: JobJson[] }>(await s.app.inject({ url: '/api/jobs', headers: alice }));
    expect(list.jobs.find((j) => j.id === id)?.coresDir).toBe(join(allowed, 'bad-job'));

    const digests: string[] = [];
    for (let i = 0; i < 2; i++) {
      const snap = await s.app.inject({ method: 'POST', url: `/api/jobs/${id}/snapshots`, headers: alice });
      expect(snap.statusCode, snap.body).toBe(201);
      const meta = json<{ snapshot: { id: string; digest: string; ok: number; errors: number } }>(
        snap,
      ).snapshot;
      expect(meta).toMatchObject({ ok: 2, errors: 1 });
      digests.push(meta.digest);
      const full = await s.app.inject({ url: `/api/snapshots/${meta.id}/export`, headers: alice });
      const snapshot = json<JobSnapshot>(full);
      expect(validateSnapshot(snapshot).ok).toBe(true);
      expect(snapshot.source?.kind).toBe('core');
      expect(snapshot.source?.cores.map((c) => c.rank)).toEqual([0, 2]);
      expect(snapshot.source?.cores[0]?.path).toBe(join(allowed, 'bad-job', 'rank-0.core'));
      const bad = snapshot.ranks.find((r) => r.rank === 1);
      expect(bad?.state).toMatchObject({ kind: 'error', code: 'MQD_E_CORE_INVALID' });
    }
    // A core does not move: every snapshot of it is the same.
    expect(digests[1]).toBe(digests[0]);

    // The periodic loop leaves core jobs alone, and they never end.
    const before = json<{ snapshots: unknown[] }>(
      await s.app.inject({ url: `/api/jobs/${id}/snapshots`, headers: alice }),
    ).snapshots.length;
    expect(await s.app.mqd.snapshots.autoTick()).toBe(0);
    const after = json<{ snapshots: unknown[] }>(
      await s.app.inject({ url: `/api/jobs/${id}/snapshots`, headers: alice }),
    ).snapshots.length;
    expect(after).toBe(before);
    const job = json<{ job: { endedAt: string | null } }>(
      await s.app.inject({ url: `/api/jobs/${id}`, headers: alice }),
    ).job;
    expect(job.endedAt).toBeNull();
  });
});

describe('--core-dir and MQD_CORE_DIRS', () => {
  it('adds up repeated flags, splits the variable on colons, and refuses relative or .. paths', () => {
    const flags = loadConfig({ argv: ['--core-dir', '/a', '--core-dir', '/b/c'] });
    expect(flags.ok && flags.value.coreDirs).toEqual(['/a', '/b/c']);
    const env = loadConfig({ env: { MQD_CORE_DIRS: '/x:/y' } });
    expect(env.ok && env.value.coreDirs).toEqual(['/x', '/y']);
    const both = loadConfig({ env: { MQD_CORE_DIRS: '/x' }, argv: ['--core-dir', '/a'] });
    expect(both.ok && both.value.coreDirs).toEqual(['/a']);
    for (const argv of [
      ['--core-dir', 'rel'],
      ['--core-dir', '/a/../b'],
    ]) {
      const r = loadConfig({ argv });
      expect(!r.ok && r.error.code).toBe('MQD_E_USAGE');
    }
    expect(loadConfig({}).ok && loadConfig({}).ok).toBe(true);
  });
});
