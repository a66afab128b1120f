import {
  API_ROUTES,
  type ApiSnapshotMeta,
  decodeErrorBody,
  decodeResponse,
  decodeUiEvent,
  isUiEventName,
  JobId,
  SnapshotId,
  syntheticRingDeadlock,
  UI_EVENT_NAMES,
  UI_EVENTS,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';

const meta: ApiSnapshotMeta = {
  id: SnapshotId('s1'),
  jobId: JobId('j1'),
  takenAt: '2026-01-01T00:00:00.000Z',
  durationMicros: 10,
  createdBy: 'alice',
  partial: false,
  ranks: 4,
  ok: 4,
  errors: 0,
  missing: 0,
  missingRanks: [],
  pendingSends: 4,
  pendingReceives: 4,
  unexpected: 0,
  digest: 'ab'.repeat(32),
  bytes: 100,
  storedBytes: 50,
};

describe('API_ROUTES', () => {
  const routes = Object.entries(API_ROUTES);

  it('has one entry per method and URL', () => {
    const keys = routes.map(([, r]) => `${r.method} ${r.url}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it("declares exactly the URL's path parameters", () => {
    for (const [name, r] of routes) {
      const inUrl = [...r.url.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]).sort();
      const declared = 'params' in r ? Object.keys(r.params.properties).sort() : [];
      expect(declared, name).toEqual(inUrl);
    }
  });

  it('documents 401 on every route behind the login, and a null body for 204', () => {
    for (const [name, r] of routes) {
      if (r.auth !== 'public') expect(r.errors, name).toContain(401);
      if (r.status === 204) expect(r.response.type, name).toBe('null');
    }
  });
});

describe('decodeResponse', () => {
  it('accepts what the server sends and names the first wrong field otherwise', () => {
    const good = decodeResponse('jobSnapshots', { snapshots: [meta] });
    expect(good.ok && good.value.snapshots[0]?.ranks).toBe(4);
    // The shape the dashboard once read: a nested summary instead of the flat counts.
    const nested = decodeResponse('jobSnapshots', {
      snapshots: [{ id: 's1', takenAt: meta.takenAt, summary: { ranks: 4 } }],
    });
    expect(!nested.ok && nested.error.code).toBe('MQD_E_BAD_INPUT');
    expect(!nested.ok && nested.error.message).toMatch(/GET \/api\/jobs\/:id\/snapshots .*\/snapshots\/0\//);
    const badTime = decodeResponse('jobSnapshots', { snapshots: [{ ...meta, takenAt: 'yesterday' }] });
    expect(!badTime.ok && badTime.error.message).toContain('/snapshots/0/takenAt');
  });

  it('checks the snapshot inside a reply with the snapshot format and its invariants', () => {
    const snapshot = syntheticRingDeadlock({ ranks: 4, seed: 1 });
    expect(decodeResponse('snapshot', { meta, snapshot }).ok).toBe(true);
    expect(decodeResponse('exportSnapshot', snapshot).ok).toBe(true);
    const wrongVersion = decodeResponse('snapshot', { meta, snapshot: { ...snapshot, schemaVersion: 2 } });
    expect(!wrongVersion.ok && wrongVersion.error.message).toContain('.snapshot');
    // An invariant the schema cannot say: ranks sorted and unique.
    const twice = { ...snapshot, ranks: [...snapshot.ranks, ...snapshot.ranks.slice(0, 1)] };
    const dup = decodeResponse('shared', { meta, snapshot: twice, expiresAt: meta.takenAt });
    expect(!dup.ok && dup.error.message).toMatch(/appears twice|not sorted/);
  });

  it('reads coded error bodies and nothing else as errors', () => {
    const e = { statusCode: 404, code: 'MQD_E_NOT_FOUND', message: 'MQD_E_NOT_FOUND: no job x: check' };
    expect(decodeErrorBody(e)).toEqual(e);
    expect(decodeErrorBody({ code: 'MQD_E_NOT_FOUND', message: 'x' })).toBeNull();
    expect(decodeErrorBody('<html>')).toBeNull();
  });
});

describe('/ui events', () => {
  it('names exactly the events of UI_EVENTS', () => {
    expect([...UI_EVENT_NAMES].sort()).toEqual(Object.keys(UI_EVENTS).sort());
    expect(isUiEventName('snapshot.done')).toBe(true);
    expect(isUiEventName('toString')).toBe(false);
  });

  it('decodes payloads and refuses progress beyond the expected count', () => {
    const p = decodeUiEvent('snapshot.progress', { jobId: 'j1', received: 2, expected: 4 });
    expect(p.ok && p.value).toEqual({ jobId: 'j1', received: 2, expected: 4 });
    expect(decodeUiEvent('snapshot.progress', { jobId: 'j1', received: 5, expected: 4 }).ok).toBe(false);
    expect(decodeUiEvent('snapshot.done', { jobId: 7, snapshotId: 's', partial: false }).ok).toBe(false);
    expect(decodeUiEvent('agent.disconnected', { host: 'n1', agentId: 'a', reason: 'gone' }).ok).toBe(true);
  });
});
