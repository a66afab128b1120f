// The exploits end to end, as a real unprivileged user against a real `mqd serve` run
// as root (the built CLI in a child process, its own in-process agent): user 65534 runs a
// process that looks like a rank and names its own library in MPIR_dll_name, plus a fake
// starter whose MPIR table also lists a root process; then, from a process of its own uid, it
// logs in with its token, attaches that starter and takes a snapshot. The library's constructor
// must run as 65534 (never root), root's process must never be stopped or traced, and a
// malformed cookie must leave the server answering.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type Attacker,
  buildAttacker,
  NOBODY,
  type Started,
  startProcess,
  watchPid,
} from '@mqd/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MQD, servedUrl } from './run-mqd.js';

const ADMIN = 'attack-test-admin-token-0123456789abcdef';

interface Server {
  readonly url: string;
  readonly child: ChildProcess;
  readonly dir: string;
}

async function startServe(): Promise<Server> {
  const dir = mkdtempSync('/tmp/mqd-attack-data-');
  const child = spawn(
    process.execPath,
    [MQD, 'serve', '--port', '0', '--host', '127.0.0.1', '--data-dir', join(dir, 'data')],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, MQD_ADMIN_TOKEN: ADMIN } },
  );
  const url = await servedUrl(child);
  return { url, child, dir };
}

/** Runs a request script as uid 65534 (setpriv): the attacker's own HTTP client. */
function asAttacker(script: string, args: readonly string[]): unknown {
  const dir = mkdtempSync('/tmp/mqd-attack-client-');
  try {
    const file = join(dir, 'client.mjs');
    writeFileSync(file, script);
    chmodSync(dir, 0o755);
    chmodSync(file, 0o644);
    const out = execFileSync(
      'setpriv',
      [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', process.execPath, file, ...args],
      {
        encoding: 'utf8',
        env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: '/tmp' },
        timeout: 120_000,
      },
    );
    return JSON.parse(out.trim().split('\n').pop() ?? 'null');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const CLIENT = `
const [url, token, starterPid] = process.argv.slice(2);
const auth = { authorization: 'Bearer ' + token, 'content-type': 'application/json' };
const me = await (await fetch(url + '/api/jobs', { headers: auth })).status;
const attach = await fetch(url + '/api/jobs/attach', { method: 'POST', headers: auth, body: JSON.stringify({ starterPid: Number(starterPid) }) });
const attached = await attach.json();
let snap = null, snapStatus = null;
if (attach.status === 201) {
  const r = await fetch(url + '/api/jobs/' + attached.job.id + '/snapshots', { method: 'POST', headers: { authorization: auth.authorization } });
  snapStatus = r.status;
  const made = await r.json();
  if (r.status === 201) snap = await (await fetch(url + '/api/snapshots/' + made.snapshot.id, { headers: { authorization: auth.authorization } })).json();
}
const badCookie = await fetch(url + '/api/jobs', { headers: { cookie: 'mqd_session=%' } });
const badBody = await badCookie.json();
const health = (await fetch(url + '/api/health')).status;
console.log(JSON.stringify({ uid: process.getuid(), me, attachStatus: attach.status, attached, snapStatus, snap, badCookie: badCookie.status, badCode: badBody.code, health }));
`;

let a: Attacker;
let server: Server | null = null;
const started: Started[] = [];
let victim: ChildProcess | null = null;

beforeAll(async () => {
  expect(process.getuid?.()).toBe(0);
  expect(existsSync(MQD)).toBe(true);
  a = buildAttacker();
  server = await startServe();
});
afterAll(() => {
  for (const s of started) s.kill();
  victim?.kill('SIGKILL');
  server?.child.kill('SIGTERM');
  if (server) rmSync(server.dir, { recursive: true, force: true });
  a?.dispose();
});

describe('a real mqd serve as root, attacked by uid 65534 through the API', () => {
  it("never runs the user's library as root, never stops root's process, survives a malformed cookie", async () => {
    if (!server) throw new Error('no server');
    const created = await fetch(`${server.url}/api/admin/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'mallory', uid: NOBODY }),
    });
    expect(created.status).toBe(201);
    const { token } = (await created.json()) as { token: string };

    victim = spawn('sleep', ['600'], { stdio: 'ignore' }); // root's process
    const victimPid = victim.pid ?? -1;
    const rank = await startProcess([a.rank, a.evil], { env: { OMPI_COMM_WORLD_RANK: '0' } });
    started.push(rank);
    const starter = await startProcess([a.starter, String(rank.pid), String(victimPid)]);
    started.push(starter);
    const watch = await watchPid(victimPid);

    const r = asAttacker(CLIENT, [server.url, token, String(starter.pid)]) as {
      uid: number;
      me: number;
      attachStatus: number;
      attached: { job?: { uid: number; rankCount: number } };
      snapStatus: number | null;
      snap: { snapshot?: { ranks: { pid: number; state: { kind: string; code?: string } }[] } };
      badCookie: number;
      badCode: string;
      health: number;
    };
    const seen = await watch.stop();

    expect(r.uid).toBe(NOBODY);
    expect(r.me).toBe(200);
    expect(r.attachStatus, JSON.stringify(r.attached)).toBe(201);
    // The job is the attacker's, and root's pid from the forged table is not one of its ranks.
    expect(r.attached.job?.uid).toBe(NOBODY);
    expect(r.attached.job?.rankCount).toBe(1);
    expect(r.snapStatus).toBe(201);
    const ranks = r.snap.snapshot?.ranks ?? [];
    expect(ranks.map((x) => x.pid)).toEqual([rank.pid]);
    // The attacker's library ran only with the attacker's rights.
    const evil = existsSync(a.out) ? readFileSync(a.out, 'utf8') : '';
    expect(evil).toMatch(/euid=65534/);
    expect(evil).not.toMatch(/euid=0\b/);
    // Root's process was never traced or stopped.
    expect(seen.samples).toBeGreaterThan(0);
    expect(seen.tracers).toEqual([]);
    expect(seen.states).not.toContain('t');
    // A malformed cookie is a coded 401, and the server keeps answering.
    expect(r.badCookie).toBe(401);
    expect(r.badCode).toBe('MQD_E_UNAUTHENTICATED');
    expect(r.health).toBe(200);
    expect(server.child.exitCode).toBeNull();
  });
});
