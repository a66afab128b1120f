// The dashboard's security controls: a failed snapshot ends every viewer's progress with the coded
// message (snapshot.failed), a snapshot request whose answer is lost is asked again with the
// same Idempotency-Key (never a second snapshot), and a ?token= login switches users only when
// the person confirmed it.
import { type ApiSnapshotMeta, IDEMPOTENCY_KEY_HEADER, JobId, SnapshotId } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { createApi, retryPauseMs, SNAPSHOT_RETRY_MS, SNAPSHOT_TRIES } from '../src/api.js';
import { decodeLiveEvent, SNAPSHOT_IDLE, snapshotReducer } from '../src/live-events.js';

const J = JobId('j1');

describe('snapshot.failed', () => {
  it('decodes the coded failure and ends a busy progress bar with it', () => {
    const e = decodeLiveEvent('snapshot.failed', {
      jobId: 'j1',
      code: 'MQD_E_TOO_LARGE',
      message: 'MQD_E_TOO_LARGE: the snapshot of job j1 is 90 bytes, over the budget of 64: raise the budget',
      requestKey: 'click-0001-aaaa',
    });
    expect(e).toEqual({
      type: 'snapshot.failed',
      jobId: J,
      error: {
        status: 0,
        code: 'MQD_E_TOO_LARGE',
        message:
          'MQD_E_TOO_LARGE: the snapshot of job j1 is 90 bytes, over the budget of 64: raise the budget',
      },
      requestKey: 'click-0001-aaaa',
    });
    expect(decodeLiveEvent('snapshot.failed', { jobId: 'j1', code: 'MQD_E_INTERNAL' })).toBeNull();
    if (e === null || e.type !== 'snapshot.failed') throw new Error('not decoded');
    const busy = snapshotReducer(SNAPSHOT_IDLE, { type: 'start', job: J });
    expect(snapshotReducer(busy, { type: 'failed', job: J, error: e.error })).toEqual({
      kind: 'error',
      job: J,
      error: e.error,
    });
  });
});

const meta: ApiSnapshotMeta = {
  id: SnapshotId('s1'),
  jobId: J,
  takenAt: '2026-01-01T00:00:00.000Z',
  durationMicros: 1200,
  createdBy: 'alice',
  partial: false,
  ranks: 1,
  ok: 1,
  errors: 0,
  missing: 0,
  missingRanks: [],
  pendingSends: 0,
  pendingReceives: 0,
  unexpected: 0,
  digest: 'ab'.repeat(32),
  bytes: 10,
  storedBytes: 10,
};

describe('snapshot requests', () => {
  it('retries a lost answer with the same key, and sends a fresh key per request', async () => {
    const keys: string[] = [];
    let lose = 2; // the first two answers are lost on the way (the server stored the snapshot)
    const fetchImpl = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
      const url = String(input);
      if (init?.method === 'POST') {
        keys.push(new Headers(init.headers).get(IDEMPOTENCY_KEY_HEADER) ?? '');
        if (lose-- > 0) throw new TypeError('fetch failed');
        return new Response(JSON.stringify({ snapshot: meta }), { status: 201 });
      }
      expect(url).toBe('/api/snapshots/s1');
      return new Response('{}', { status: 404 });
    };
    let n = 0;
    const pauses: number[] = [];
    const api = createApi({
      fetch: fetchImpl as typeof fetch,
      newRequestKey: () => `key-${++n}-abcdef`,
      retryPauseMs: (k) => {
        pauses.push(k);
        return 0;
      },
    });
    const r = await api.takeSnapshot(J);
    // The snapshot read back is not found here: what matters is how the POSTs went.
    expect(r.ok).toBe(false);
    expect(keys).toEqual(['key-1-abcdef', 'key-1-abcdef', 'key-1-abcdef']);
    expect(SNAPSHOT_TRIES).toBe(3);
    // A pause before each retry, none before the first try.
    expect(pauses).toEqual([1, 2]);
    await api.takeSnapshot(J);
    expect(keys.at(-1)).toBe('key-2-abcdef');

    // A coded refusal is an answer, not a lost one: no retry.
    keys.length = 0;
    const refusing = createApi({
      fetch: (async (_input: RequestInfo | URL, init?: RequestInit) => {
        keys.push(new Headers(init?.headers).get(IDEMPOTENCY_KEY_HEADER) ?? '');
        return new Response(
          JSON.stringify({ statusCode: 413, code: 'MQD_E_TOO_LARGE', message: 'MQD_E_TOO_LARGE: too big' }),
          { status: 413 },
        );
      }) as typeof fetch,
    });
    const refused = await refusing.takeSnapshot(J);
    expect(refused.ok ? null : refused.error.code).toBe('MQD_E_TOO_LARGE');
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe('login from a ?token= link', () => {
  it('asks the server to switch users only when told to (a confirmed switch)', async () => {
    const bodies: unknown[] = [];
    const api = createApi({
      fetch: (async (_input: RequestInfo | URL, init?: RequestInit) => {
        bodies.push(JSON.parse(String(init?.body)));
        return new Response(
          JSON.stringify({
            statusCode: 409,
            code: 'MQD_E_SESSION_CONFLICT',
            message:
              "MQD_E_SESSION_CONFLICT: this browser is signed in as 'admin' and the token is 'mallory''s",
          }),
          { status: 409 },
        );
      }) as typeof fetch,
    });
    const r = await api.login('tok-123');
    expect(r.ok ? null : r.error.code).toBe('MQD_E_SESSION_CONFLICT');
    await api.login('tok-123', true);
    expect(bodies).toEqual([{ token: 'tok-123' }, { token: 'tok-123', switchUser: true }]);
  });
});

describe('the pause before a snapshot retry', () => {
  it('doubles per retry and is jittered within [d/2, d]', () => {
    expect(retryPauseMs(1, () => 0)).toBe(SNAPSHOT_RETRY_MS);
    expect(retryPauseMs(1, () => 1)).toBe(SNAPSHOT_RETRY_MS / 2);
    expect(retryPauseMs(2, () => 0)).toBe(2 * SNAPSHOT_RETRY_MS);
    expect(retryPauseMs(3, () => 0.5)).toBe(3 * SNAPSHOT_RETRY_MS);
  });
});
