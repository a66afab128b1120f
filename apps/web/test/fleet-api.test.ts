// The admin routes' decoders, against payloads shaped as apps/server serialises them
// (schemas.ts: UserJson, AgentJson, AuditJson, HungJson) and against malformed ones.
import { describe, expect, it } from 'vitest';
import { createApi, decodeActivity, decodeAgents, decodeHung, decodeMe } from '../src/api.js';

function fetchOf(status: number, body: unknown) {
  const urls: string[] = [];
  const impl = async (input: RequestInfo | URL): Promise<Response> => {
    urls.push(String(input));
    return new Response(JSON.stringify(body), { status });
  };
  return { urls, fetch: impl as typeof fetch };
}

const connected = {
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
const gone = {
  ...connected,
  agentId: 'a-77',
  host: 'node02',
  connected: false,
  disconnectedAt: '2026-03-01T10:03:00.000Z',
  health: null,
  mpi: { library: 'mpich', dll: null, lengthUnit: 'bytes' },
  jobs: [],
};

describe('admin decoders', () => {
  it('decodes /api/me, with or without a uid', async () => {
    expect(decodeMe({ user: { name: 'admin', uid: null, admin: true } })).toEqual({
      name: 'admin',
      uid: null,
      admin: true,
    });
    const f = fetchOf(200, { user: { name: 'ann', uid: 1000, admin: false } });
    const r = await createApi({ fetch: f.fetch }).me();
    expect(r.ok && r.value).toEqual({ name: 'ann', uid: 1000, admin: false });
    expect(f.urls).toEqual(['/api/me']);
  });

  it('refuses a /api/me without the admin flag, naming the field', async () => {
    const r = await createApi({ fetch: fetchOf(200, { user: { name: 'ann', uid: 1000 } }).fetch }).me();
    expect(!r.ok && r.error.code).toBe('MQD_E_BAD_RESPONSE');
    expect(!r.ok && r.error.message).toContain('me.user.admin');
    expect(() => decodeMe({ name: 'ann', uid: 1, admin: true })).toThrow('me.user');
  });

  it('decodes agents: health, MPI and seen jobs; absent health fields and null parts stay null', () => {
    const partial = { ...connected, agentId: 'a-3', health: { rssBytes: 1024 } };
    const out = decodeAgents({
      agents: [connected, gone, partial],
      refusedMessages: 2,
      refusedHandshakes: 1,
    });
    expect(out.refusedMessages).toBe(2);
    expect(out.refusedHandshakes).toBe(1);
    const [a, b, c] = out.agents;
    expect(a).toEqual({
      ...connected,
      health: { ...connected.health, lastError: 'MQD_E_DLL_LOAD: cannot load libompi_dbg_msgq.so' },
    });
    expect(b?.connected).toBe(false);
    expect(b?.health).toBeNull();
    expect(b?.mpi?.dll).toBeNull();
    expect(c?.health).toEqual({
      rssBytes: 1024,
      heapUsedBytes: null,
      uptimeSeconds: null,
      loadAverage1m: null,
      activeRequests: null,
      lastError: null,
    });
  });

  it('refuses malformed agents, naming the field', () => {
    const bad = (agent: unknown, field: string) =>
      expect(() => decodeAgents({ agents: [agent], refusedMessages: 0, refusedHandshakes: 0 })).toThrow(
        field,
      );
    bad({ ...connected, connected: 'yes' }, 'body.agents[0].connected');
    bad({ ...connected, lastSeenAt: 'yesterday' }, 'body.agents[0].lastSeenAt');
    bad({ ...connected, messages: -1 }, 'body.agents[0].messages');
    bad(
      { ...connected, jobs: [{ starterPid: 'x', uid: 0, command: '' }] },
      'body.agents[0].jobs[0].starterPid',
    );
    bad({ ...connected, jobs: undefined }, 'body.agents[0].jobs');
    bad({ ...connected, health: { rssBytes: 'big' } }, 'body.agents[0].health.rssBytes');
    expect(() => decodeAgents([connected])).toThrow('expected an object');
    expect(() => decodeAgents({ agents: [], refusedMessages: 0 })).toThrow('refusedHandshakes');
  });

  it('decodes the audit trail with and without a job, and asks for a bounded page', async () => {
    const entries = [
      {
        id: 9,
        at: '2026-03-01T10:06:00.000Z',
        who: 'admin',
        action: 'snapshot',
        jobId: 'j1',
        snapshotId: 's4',
        detail: '4 ranks',
      },
      {
        id: 8,
        at: '2026-03-01T10:00:00.000Z',
        who: 'agent',
        action: 'agent-connect',
        jobId: null,
        snapshotId: null,
        detail: 'a-1f3c',
      },
    ];
    const f = fetchOf(200, { entries });
    const r = await createApi({ fetch: f.fetch }).activity(5000);
    expect(r.ok && r.value).toEqual(entries);
    expect(f.urls).toEqual(['/api/admin/activity?limit=1000']);
    expect(() => decodeActivity({ entries: [{ ...entries[0], at: 'soon' }] })).toThrow('body.entries[0].at');
    expect(() => decodeActivity({ entries: [{ ...entries[0], who: 7 }] })).toThrow('body.entries[0].who');
    expect(() => decodeActivity(entries)).toThrow('expected an object');
  });

  it('decodes hung jobs and refuses a body without its list', () => {
    const job = {
      jobId: 'j1',
      since: '2026-03-01T10:00:00.000Z',
      snapshots: 3,
      digest: 'ab12',
      pendingSends: 4,
      pendingReceives: 4,
      unexpected: 0,
      lastSnapshotId: 's4',
    };
    expect(decodeHung({ snapshots: 3, jobs: [job] })).toEqual({ snapshots: 3, jobs: [job] });
    expect(decodeHung({ snapshots: 3, jobs: [] }).jobs).toEqual([]);
    expect(() => decodeHung({ snapshots: 3 })).toThrow('body.jobs');
    expect(() => decodeHung({ snapshots: 3, jobs: [{ ...job, lastSnapshotId: '' }] })).toThrow(
      'body.jobs[0].lastSnapshotId',
    );
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
