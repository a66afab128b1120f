// Several aggregators as a site runs them (issue 32): two `mqd serve` processes on one real
// PostgreSQL 15 (testkit startPostgres), Debian's haproxy in front (testkit startHaproxy), a
// real `mqd agent` that connects through haproxy, and a real hung MPI job (wrong_tag). The
// server paths are not about the MPI library: one build (issue 30).
//   - a snapshot asked of the instance that does not hold the agent is read through the other;
//   - kill -9 of the instance holding the agent while a snapshot is asked of the other: the
//     agent reconnects through haproxy, the snapshot finishes with every rank read, and a retry
//     with the same Idempotency-Key gets that same snapshot (stored once);
//   - PostgreSQL stopped: requests through haproxy get a coded 503 (MQD_E_STORE_UNAVAILABLE),
//     and after it is back everything resumes by itself, a new instance's forwarded snapshot too.
// Every process is started here and ended by its pid, also when a test fails.
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { normaliseHost } from '@mqd/mpir';
import { hostAgentToken } from '@mqd/server';
import {
  done,
  type FixtureJob,
  type Haproxy,
  haproxyAvailable,
  launchFixture,
  MPI_NAMES,
  mqdCommand,
  type PostgresServer,
  pending,
  postgresAvailable,
  startHaproxy,
  startPostgres,
  waitFor,
} from '@mqd/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { servedUrl } from './run-mqd.js';

const ADMIN = 'admin-token-for-the-cluster-test-0123456789';
const SECRET = 'agent-secret-for-the-cluster-test-0123456789';
const HOST = normaliseHost(hostname());
const MPI = MPI_NAMES[0];

interface Instance {
  readonly name: string;
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
}

let pg: PostgresServer | null = null;
let storeUrl = '';
let dir = '';
const children: ChildProcess[] = [];
let haproxy: Haproxy | null = null;
let job: FixtureJob | null = null;
const instances: Instance[] = [];

function track(c: ChildProcess): ChildProcess {
  children.push(c);
  return c;
}

async function startInstance(name: string): Promise<Instance> {
  const [cmd, ...args] = mqdCommand(['serve', '--no-local-agent', '--port', '0', '--host', '127.0.0.1']);
  const child = track(
    spawn(cmd as string, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        MQD_ADMIN_TOKEN: ADMIN,
        MQD_AGENT_TOKEN: SECRET,
        MQD_STORE_URL: storeUrl,
        MQD_DATA_DIR: join(dir, `data-${name}`),
      },
    }),
  );
  const url = await servedUrl(child);
  return { name, url, port: Number(new URL(url).port), child };
}

async function api<T>(
  base: string,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: T; text: string }> {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${ADMIN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await r.text();
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = null;
  }
  return { status: r.status, body: parsed as T, text };
}

interface AgentRow {
  readonly host: string;
  readonly connected: boolean;
  readonly instance?: string;
}

/** The instance id holding this node's agent, as an instance reports it (null: none yet). */
async function holderSeenBy(base: string): Promise<string | null> {
  const r = await api<{ agents: AgentRow[] }>(base, 'GET', '/api/admin/agents').catch(() => null);
  if (r === null || r.status !== 200) return null;
  return r.body.agents.find((a) => a.host === HOST && a.connected)?.instance ?? null;
}

/** An instance's own id (GET /api/health says it when several instances share the store). */
async function ownIdOf(inst: Instance): Promise<string | null> {
  const r = await api<{ instance?: string }>(inst.url, 'GET', '/api/health');
  return r.body.instance ?? null;
}

async function instanceWithId(id: string): Promise<Instance> {
  for (const inst of instances) if ((await ownIdOf(inst)) === id) return inst;
  throw new Error(`no instance has id ${id}`);
}

function kill9(c: ChildProcess): void {
  if (c.pid !== undefined && c.exitCode === null && c.signalCode === null) process.kill(c.pid, 'SIGKILL');
}

beforeAll(async () => {
  if (!postgresAvailable())
    throw new Error('MQD_E_PROVISION: postgresql-15 is missing; run scripts/provision.sh');
  if (!haproxyAvailable()) throw new Error('MQD_E_PROVISION: haproxy is missing; run scripts/provision.sh');
  dir = mkdtempSync('/tmp/mqd-cluster-');
  pg = await startPostgres();
  storeUrl = pg.url;
  instances.push(await startInstance('a'), await startInstance('b'));
  haproxy = await startHaproxy(instances.map((i) => ({ name: i.name, port: i.port })));
  if (MPI === undefined) throw new Error('MQD_E_PROVISION: no MPI build; run scripts/provision.sh');
  job = await launchFixture({ mpi: MPI, fixture: 'wrong_tag', np: 4 });
  const tokenFile = join(dir, 'agent.token');
  writeFileSync(tokenFile, hostAgentToken(SECRET, HOST), { mode: 0o600 });
  chmodSync(tokenFile, 0o600);
  const [cmd, ...args] = mqdCommand(['agent', '--server', haproxy.url, '--token-file', tokenFile]);
  track(spawn(cmd as string, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
}, 180_000);

afterAll(async () => {
  for (const c of children) kill9(c);
  await haproxy?.stop();
  await job?.dispose();
  await pg?.stop();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe.runIf(postgresAvailable() && haproxyAvailable())(`${MPI}: two aggregators behind haproxy`, () => {
  it('reads through the other instance, survives kill -9 of the agent’s instance, and PostgreSQL going away', async () => {
    const lb = haproxy?.url ?? '';
    // The agent is connected to one of the two, through haproxy; both know which.
    const holderId = await waitFor(
      async () => {
        const h = await holderSeenBy(lb);
        return h === null ? pending('the agent is not connected yet') : done(h);
      },
      { timeoutMs: 60_000, what: 'the agent connected through haproxy' },
    );
    const holder = await instanceWithId(holderId);
    const other = instances.find((i) => i !== holder) as Instance;

    const att = await api<{ job: { id: string; rankCount: number } }>(lb, 'POST', '/api/jobs/attach', {
      host: HOST,
      starterPid: job?.starterPid,
    });
    expect(att.status, att.text).toBe(201);
    expect(att.body.job.rankCount).toBe(4);
    const jobId = att.body.job.id;

    // Asked of the instance without the agent: read through the holder, every rank ok.
    const first = await api<{ snapshot: { id: string; ok: number } }>(
      other.url,
      'POST',
      `/api/jobs/${jobId}/snapshots`,
    );
    expect(first.status, first.text).toBe(201);
    expect(first.body.snapshot.ok).toBe(4);

    // kill -9 of the holder while the other instance is asked for a snapshot.
    const key = `cluster-test-${process.pid}-1`;
    const asked = api<{ snapshot: { id: string; ok: number; missing: number } }>(
      other.url,
      'POST',
      `/api/jobs/${jobId}/snapshots`,
      undefined,
      { 'idempotency-key': key },
    );
    kill9(holder.child);
    const second = await asked;
    expect(second.status, second.text).toBe(201);
    expect(second.body.snapshot).toMatchObject({ ok: 4, missing: 0 });
    // The agent is now on the surviving instance (it reconnected through haproxy).
    expect(await holderSeenBy(other.url)).toBe(await ownIdOf(other));
    // The same key again: the same snapshot, not a second one.
    const again = await api<{ snapshot: { id: string } }>(
      other.url,
      'POST',
      `/api/jobs/${jobId}/snapshots`,
      undefined,
      {
        'idempotency-key': key,
      },
    );
    expect(again.body.snapshot.id).toBe(second.body.snapshot.id);
    const history = await api<{ snapshots: { id: string }[] }>(lb, 'GET', `/api/jobs/${jobId}/snapshots`);
    expect(history.body.snapshots.map((x) => x.id).sort()).toEqual(
      [first.body.snapshot.id, second.body.snapshot.id].sort(),
    );

    // A new instance (asked directly, not through haproxy) reads through the survivor.
    const fresh = await startInstance('c');
    instances.push(fresh);
    await waitFor(async () => ((await holderSeenBy(fresh.url)) === null ? pending() : done(true)), {
      timeoutMs: 30_000,
      what: 'the new instance to learn where the agent is',
    });

    // PostgreSQL goes away: a coded 503 through haproxy, then everything resumes by itself.
    await pg?.down();
    const during = await api<{ code: string; message: string }>(lb, 'GET', '/api/jobs');
    expect(during.status, during.text).toBe(503);
    expect(during.body.code).toBe('MQD_E_STORE_UNAVAILABLE');
    // The database's address (a socket path here, a host at a site) is not told to clients.
    expect(during.text).not.toContain(pg?.dir ?? 'x');
    await pg?.up();
    await waitFor(async () => ((await api(lb, 'GET', '/api/jobs')).status === 200 ? done(true) : pending()), {
      timeoutMs: 60_000,
      what: 'requests to work again after PostgreSQL came back',
    });
    // The instances speak again through the database: the new one reads through the survivor.
    const third = await waitFor(
      async () => {
        const r = await api<{ snapshot: { id: string; ok: number } }>(
          fresh.url,
          'POST',
          `/api/jobs/${jobId}/snapshots`,
        );
        return r.status === 201 && r.body.snapshot.ok === 4
          ? done(r)
          : pending(`${r.status} ${r.text.slice(0, 200)}`);
      },
      { timeoutMs: 60_000, what: 'a forwarded snapshot after PostgreSQL came back' },
    );
    expect(third.body.snapshot.ok).toBe(4);
  });
});
