// The hang watch's routes as the client decodes them (GET /api/fleet, GET and POST
// /api/admin/watch), against bodies typed by the API spec and malformed ones, and the /ui event
// `fleet.changed` that makes the Fleet view reload.
import { type ApiWatchPolicy, DEFAULT_WATCH_POLICY } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { createApi } from '../src/api.js';
import { decodeLiveEvent } from '../src/live-events.js';
import { fleetJob } from './fleet-fixtures.js';

function fetchOf(status: number, body: unknown) {
  const calls: { url: string; method: string; body: unknown }[] = [];
  const impl = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    calls.push({
      url: String(input),
      method: init?.method ?? 'GET',
      body: typeof init?.body === 'string' ? JSON.parse(init.body) : null,
    });
    return new Response(JSON.stringify(body), { status });
  };
  return { calls, api: createApi({ fetch: impl as typeof fetch }) };
}

const policy: ApiWatchPolicy = { ...DEFAULT_WATCH_POLICY, enabled: true, periodSeconds: 2, users: ['alice'] };

describe('hang watch routes', () => {
  it('decodes the fleet: the policy, the page of jobs and their total', async () => {
    const body = {
      policy,
      jobs: [fleetJob(), fleetJob({ key: 'slurm:2', endedAt: '2026-11-27T03:40:00.000Z' })],
      total: 2,
      offset: 0,
    };
    const { api, calls } = fetchOf(200, body);
    const r = await api.fleet();
    expect(r.ok && r.value).toEqual(body);
    // A page is asked for by limit and offset, the limit kept within what the server allows.
    await api.fleet(undefined, { limit: 50, offset: 100 });
    await api.fleet(undefined, { limit: 100_000, offset: -3 });
    expect(calls.map((c) => `${c.method} ${c.url}`)).toEqual([
      'GET /api/fleet',
      'GET /api/fleet?limit=50&offset=100',
      'GET /api/fleet?limit=500&offset=0',
    ]);
    // A reply without its total is not the spec's.
    const old = await fetchOf(200, { policy, jobs: [] }).api.fleet();
    expect(!old.ok && old.error.code).toBe('MQD_E_BAD_RESPONSE');
  });

  it('refuses a fleet job with a state the spec does not have, naming the field', async () => {
    const r = await fetchOf(200, {
      policy,
      jobs: [{ ...fleetJob(), state: 'stuck' }],
      total: 1,
      offset: 0,
    }).api.fleet();
    expect(!r.ok && r.error.code).toBe('MQD_E_BAD_RESPONSE');
    expect(!r.ok && r.error.message).toContain('/jobs/0/state');
  });

  it('posts exactly the policy and reads back what the server applies', async () => {
    const { api, calls } = fetchOf(200, policy);
    const r = await api.setWatchPolicy({ ...policy, extra: 1 } as ApiWatchPolicy);
    expect(r.ok && r.value).toEqual(policy);
    expect(calls).toEqual([{ url: '/api/admin/watch', method: 'POST', body: policy }]);
    const got = await fetchOf(200, policy).api.watchPolicy();
    expect(got.ok && got.value).toEqual(policy);
  });

  it("shows the server's refusal of a policy as its coded error with its message", async () => {
    const { api } = fetchOf(400, {
      statusCode: 400,
      code: 'MQD_E_BAD_INPUT',
      message: 'MQD_E_BAD_INPUT: body/periodSeconds must be >= 1',
    });
    const r = await api.setWatchPolicy(policy);
    expect(!r.ok && r.error.code).toBe('MQD_E_BAD_INPUT');
    expect(!r.ok && r.error.message).toContain('body/periodSeconds must be >= 1');
  });

  it('decodes fleet.changed, and drops a malformed one', () => {
    expect(decodeLiveEvent('fleet.changed', { at: '2026-11-27T03:12:00.000Z' })).toEqual({
      type: 'fleet.changed',
      at: '2026-11-27T03:12:00.000Z',
    });
    expect(decodeLiveEvent('fleet.changed', { when: 'now' })).toBeNull();
  });
});
