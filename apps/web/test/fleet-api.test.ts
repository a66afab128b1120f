// The admin routes as the client decodes them, against bodies typed by the API spec (what
// apps/server sends: packages/model api-spec.ts) and against malformed ones.
import { type ApiAgent, type ApiAuditEntry, type ApiHungJob, JobId, SnapshotId } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { createApi } from '../src/api.js';

function fetchOf(status: number, body: unknown) {
  const urls: string[] = [];
  const impl = async (input: RequestInfo | URL): Promise<Response> => {
    urls.push(String(input));
    return new Response(JSON.stringify(body), { status });
  };
  return { urls, fetch: impl as typeof fetch };
}

const api200 = (body: unknown) => {
  const f = fetchOf(200, body);
  return { urls: f.urls, api: createApi({ fetch: f.fetch }) };
};

const connected: ApiAgent = {
  agentId: 'a-1f3c',
  host: 'node01',
  version: '0.1.0',
  connected: true,
  connectedAt: '2026-03-01T10:00:00.000Z',
  lastSeenAt: '2026-03-01T10:05:00.000Z',
  disconnectedAt: null,
  health: {
    rssBytes: 73_400_320,
    heapUsedBytes: 20_000_000,
    uptimeSeconds: 300.5,
    loadAverage1m: 0.42,
    activeRequests: 0,
    lastError: { code: 'MQD_E_DLL_LOAD', message: 'cannot load libompi_dbg_msgq.so' },
  },
  mpi: { library: 'openmpi', dll: '/usr/lib/openmpi/libompi_dbg_msgq.so', lengthUnit: 'bytes' },
  jobs: [{ starterPid: 4242, uid: 1000, command: 'mpirun -n 4 ./ring' }],
  messages: 12,
  refused: 0,
  pending: 1,
};
const gone: ApiAgent = {
  ...connected,
  agentId: 'a-77',
  host: 'node02',
  connected: false,
  disconnectedAt: '2026-03-01T10:03:00.000Z',
  health: null,
  mpi: { library: 'mpich', dll: null, lengthUnit: 'bytes' },
  jobs: [],
};

describe('admin routes', () => {
  it('decodes /api/me, with or without a uid', async () => {
    for (const user of [
      { name: 'admin', uid: null, admin: true },
      { name: 'ann', uid: 1000, admin: false },
    ]) {
      const { api, urls } = api200({ user });
      const r = await api.me();
      expect(r.ok && r.value).toEqual(user);
      expect(urls).toEqual(['/api/me']);
    }
  });

  it('refuses a /api/me without the admin flag, or not wrapped in {user}, naming the field', async () => {
    const r = await api200({ user: { name: 'ann', uid: 1000 } }).api.me();
    expect(!r.ok && r.error.code).toBe('MQD_E_BAD_RESPONSE');
    expect(!r.ok && r.error.message).toContain('/user/admin');
    const flat = await api200({ name: 'ann', uid: 1, admin: true }).api.me();
    expect(!flat.ok && flat.error.message).toContain('/user');
  });

  it('decodes agents: health, MPI and seen jobs; null parts stay null', async () => {
    const body = { agents: [connected, gone], refusedMessages: 2, refusedHandshakes: 1 };
    const { api, urls } = api200(body);
    const r = await api.agents();
    expect(r.ok && r.value).toEqual(body);
    expect(urls).toEqual(['/api/admin/agents']);
  });

  it('refuses malformed agents, naming the field', async () => {
    for (const [agent, field] of [
      [{ ...connected, connected: 'yes' }, '/agents/0/connected'],
      [{ ...connected, connectedAt: 'yesterday' }, '/agents/0/connectedAt'],
      [{ ...connected, health: { ...connected.health, rssBytes: '70M' } }, '/agents/0/health'],
      [{ ...connected, jobs: [{ starterPid: -1, uid: 0, command: 'x' }] }, '/agents/0/jobs/0/starterPid'],
      [{ ...connected, mpi: { library: 'lam', dll: null, lengthUnit: 'bytes' } }, '/agents/0/mpi'],
    ] as const) {
      const r = await api200({ agents: [agent], refusedMessages: 0, refusedHandshakes: 0 }).api.agents();
      expect(!r.ok && r.error.code, field).toBe('MQD_E_BAD_RESPONSE');
      expect(!r.ok && r.error.message, field).toContain(field);
    }
    const bare = await api200([connected]).api.agents();
    expect(!bare.ok && bare.error.code).toBe('MQD_E_BAD_RESPONSE');
    const short = await api200({ agents: [], refusedMessages: 0 }).api.agents();
    expect(!short.ok && short.error.message).toContain('refusedHandshakes');
  });

  it('decodes the audit trail with and without a job, and asks for a bounded page', async () => {
    const entries: ApiAuditEntry[] = [
      {
        id: 42,
        at: '2026-03-01T10:04:00.000Z',
        who: 'ann',
        action: 'snapshot',
        jobId: JobId('j-9'),
        snapshotId: SnapshotId('s-3'),
        detail: '4 ranks',
      },
      {
        id: 41,
        at: '2026-03-01T10:00:00.000Z',
        who: 'agent:node01',
        action: 'agent-connect',
        jobId: null,
        snapshotId: null,
        detail: 'a-1f3c',
      },
    ];
    const { api, urls } = api200({ entries });
    const r = await api.activity(5000);
    expect(r.ok && r.value).toEqual(entries);
    expect(urls).toEqual(['/api/admin/activity?limit=1000']);
    for (const [bad, field] of [
      [{ entries: [{ ...entries[0], at: 'soon' }] }, '/entries/0/at'],
      [{ entries: [{ ...entries[0], who: 7 }] }, '/entries/0/who'],
      [entries, '/'],
    ] as const) {
      const b = await api200(bad).api.activity(10);
      expect(!b.ok && b.error.message, field).toContain(field);
    }
  });

  it('decodes hung jobs and refuses a body without its list', async () => {
    const job: ApiHungJob = {
      jobId: JobId('j-9'),
      since: '2026-03-01T10:00:00.000Z',
      snapshots: 3,
      digest: 'ab12',
      pendingSends: 2,
      pendingReceives: 2,
      unexpected: 0,
      lastSnapshotId: SnapshotId('s-3'),
    };
    const r = await api200({ snapshots: 3, jobs: [job] }).api.hung();
    expect(r.ok && r.value).toEqual({ snapshots: 3, jobs: [job] });
    const none = await api200({ snapshots: 3 }).api.hung();
    expect(!none.ok && none.error.message).toContain('/jobs');
    const empty = await api200({ snapshots: 3, jobs: [{ ...job, lastSnapshotId: '' }] }).api.hung();
    expect(!empty.ok && empty.error.message).toContain('/jobs/0/lastSnapshotId');
  });

  it("passes the server's 403 for a non-admin through as a coded error", async () => {
    const api = createApi({
      fetch: fetchOf(403, { statusCode: 403, code: 'MQD_E_FORBIDDEN', message: 'ann is not an admin' }).fetch,
    });
    for (const r of [await api.agents(), await api.hung(), await api.activity(10)]) {
      expect(!r.ok && r.error.status).toBe(403);
      expect(!r.ok && r.error.code).toBe('MQD_E_FORBIDDEN');
    }
  });
});
