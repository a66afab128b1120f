// Values across ranks through the server: the snapshot request's `evals` are checked at the API
// (count, length, characters: MQD_E_BAD_INPUT), travel to the agent and its reader unchanged,
// and GET /snapshots/:id/values aggregates what the ranks read (groups, min/max, outliers,
// value against rank), only for those who may see the job.
import { type RankSnapshot, valueBins, valuesOf } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import { decodeServerMessage } from '../src/protocol/agent-protocol-decode.js';
import type { RankReader, ReadOptions } from '../src/shared/seams.js';
import { createFakeLocator, createFakeReader } from '../src/synthetic/fakes.js';
import {
  AGENT_TOKEN,
  attachAsAdmin,
  bodyJson,
  cleanupAfterEach,
  createUser,
  serverFor,
  type TestServer,
} from './helpers.js';

const cleanup = cleanupAfterEach();

/**
 * A job of 8 ranks whose reader (the synthetic one, plus values) reads `step` as 42 on every
 * rank but rank 3 (41), and `name` as text; the evals each read was asked for are kept.
 */
async function jobWithValues(s: TestServer) {
  const asked: (ReadOptions['evals'] | undefined)[] = [];
  const base = createFakeReader({ worldSize: 8 });
  const reader: RankReader = {
    ...base,
    read: async (ranks, ro) => {
      asked.push(ro.evals);
      const read = await base.read(ranks, ro);
      return read.map(
        (r): RankSnapshot => ({
          ...r,
          ...(ro.evals === undefined
            ? {}
            : {
                values: ro.evals.map((e) =>
                  e.expr === 'step'
                    ? {
                        expr: e.expr,
                        frame: e.frame ?? 'main',
                        value: {
                          text: String(r.rank === 3 ? 41 : 42),
                          type: 'int',
                          number: r.rank === 3 ? 41 : 42,
                        },
                      }
                    : {
                        expr: e.expr,
                        frame: e.frame ?? 'main',
                        error: { code: 'MQD_E_EVAL_UNKNOWN_NAME', message: `no variable "${e.expr}" here` },
                      },
                ),
              }),
        }),
      );
    },
  };
  const agent = startAgent({
    serverUrl: s.url,
    token: AGENT_TOKEN,
    host: 'val-0',
    reader,
    locator: createFakeLocator({
      starterPid: 702,
      uid: 1000,
      command: 'mpirun -np 8 ./step',
      hosts: ['val-0'],
      ranksPerHost: 8,
    }),
  });
  cleanup.push(() => agent.dispose());
  await agent.whenConnected();
  const jobId = await attachAsAdmin(s, 702, 'val-0');
  return { jobId, asked };
}

const take = (s: TestServer, jobId: string, payload?: unknown) =>
  s.app.inject({
    method: 'POST',
    url: `/api/jobs/${jobId}/snapshots`,
    headers: s.admin,
    ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
  });

describe('values across ranks through the server', () => {
  it('refuses too many, too long and non-printable expressions with MQD_E_BAD_INPUT, reading nothing', async () => {
    const s = await serverFor(cleanup);
    const { jobId, asked } = await jobWithValues(s);
    const bad = [
      { evals: Array.from({ length: 9 }, (_, i) => ({ expr: `a${i}` })) },
      { evals: [{ expr: 'x'.repeat(257) }] },
      { evals: [{ expr: 'a\nb' }] },
      { evals: [{ expr: 'höhe' }] },
      { evals: [{ expr: '' }] },
      { evals: [{ expr: 'step', frame: 'main\u0000' }] },
      { evals: 'step' },
    ];
    for (const payload of bad) {
      const res = await take(s, jobId, payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect((bodyJson(res) as { code: string }).code).toBe('MQD_E_BAD_INPUT');
    }
    expect(asked, 'no read was made for a refused request').toEqual([]);
    // Without a body the request is what it always was.
    expect((await take(s, jobId)).statusCode).toBe(201);
    expect(asked).toEqual([undefined]);
  });

  it('carries the expressions to the reader and aggregates what the ranks read', async () => {
    const s = await serverFor(cleanup);
    const { jobId, asked } = await jobWithValues(s);
    const evals = [{ expr: 'step', frame: 'main' }, { expr: 'nosuch' }];
    const res = await take(s, jobId, { evals });
    expect(res.statusCode, res.body).toBe(201);
    expect(asked).toEqual([evals]);
    const id = (bodyJson(res) as { snapshot: { id: string } }).snapshot.id;
    const got = await s.app.inject({ method: 'GET', url: `/api/snapshots/${id}/values`, headers: s.admin });
    expect(got.statusCode, got.body).toBe(200);
    const { values } = bodyJson(got) as { values: ReturnType<typeof valuesOf> };
    expect(values.map((v) => v.expr)).toEqual(['step', 'nosuch']);
    const [step, nosuch] = values;
    expect(step?.outliers).toEqual([{ rank: 3, text: '41' }]);
    expect(step?.others).toBe('42');
    expect(step?.groups.map((g) => [g.text, g.ranks, g.count])).toEqual([
      ['42', '0-2,4-7', 7],
      ['41', '3', 1],
    ]);
    expect(step?.min).toEqual({ value: 41, ranks: '3' });
    expect(step?.max).toEqual({ value: 42, ranks: '0-2,4-7' });
    expect(step?.bins.map((b) => [b.lo, b.min])).toEqual([
      [0, 42],
      [1, 42],
      [2, 42],
      [3, 41],
      [4, 42],
      [5, 42],
      [6, 42],
      [7, 42],
    ]);
    expect(nosuch?.groups[0]?.code).toBe('MQD_E_EVAL_UNKNOWN_NAME');
    expect(nosuch?.bins).toEqual([]);

    // Another user may not read the job's values.
    const other = await createUser(s.app, 'eve', 2000);
    const denied = await s.app.inject({ method: 'GET', url: `/api/snapshots/${id}/values`, headers: other });
    expect(denied.statusCode).toBe(403);
    expect((bodyJson(denied) as { code: string }).code).toBe('MQD_E_FORBIDDEN');
  });
});

describe("the agent's edge", () => {
  const request = (evals: unknown) =>
    Buffer.from(
      JSON.stringify({
        type: 'request',
        id: 1,
        method: 'snapshot',
        params: { ranks: [{ rank: 0, pid: 100 }], timeoutMs: 1000, ownerUid: 1000, evals },
      }),
    );

  it('takes up to 8 printable expressions and refuses the rest with MQD_E_BAD_INPUT', () => {
    const good = decodeServerMessage(request([{ expr: 'st->prog->step', frame: 'solve' }]), 1 << 20);
    expect(good.ok).toBe(true);
    for (const evals of [
      Array.from({ length: 9 }, (_, i) => ({ expr: `a${i}` })),
      [{ expr: 'x'.repeat(257) }],
      [{ expr: 'a\u0007' }],
      [{ expr: 'step', frame: 'f\u00e9' }],
      [{ expr: 'step', call: 'system' }],
    ]) {
      const r = decodeServerMessage(request(evals), 1 << 20);
      expect(r.ok, JSON.stringify(evals)).toBe(false);
      if (!r.ok) expect(r.error.error.code).toBe('MQD_E_BAD_INPUT');
    }
  });
});

describe('valuesOf (the aggregation)', () => {
  const rank = (r: number, n: number | null, text = String(n)): RankSnapshot =>
    ({
      rank: r,
      pid: 100 + r,
      host: 'h',
      state: { kind: 'ok' },
      values: [
        n === null
          ? { expr: 'p->k', frame: null, error: { code: 'MQD_E_EVAL_MEMORY', message: 'cannot read 0x0' } }
          : { expr: 'p->k', frame: null, value: { text, type: 'int', number: n } },
      ],
    }) as unknown as RankSnapshot;

  it('sends 100,000 ranks as bounded groups and bins, the one rank behind first', () => {
    const ranks = Array.from({ length: 100_000 }, (_, r) => rank(r, r === 77_777 ? 6 : 7));
    const [v] = valuesOf({ ranks });
    expect(v?.outliers).toEqual([{ rank: 77_777, text: '6' }]);
    expect(v?.others).toBe('7');
    expect(v?.bins.length).toBeLessThanOrEqual(128);
    expect(v?.bins.find((b) => b.lo <= 77_777 && 77_777 <= b.hi)?.min).toBe(6);
    expect(JSON.stringify(v).length).toBeLessThan(20_000);
  });

  it('keeps at most 32 groups, cuts long rank lists, and says a failure by its code', () => {
    const ranks = Array.from({ length: 1000 }, (_, r) => rank(r, r % 2 === 0 ? r : null));
    const [v] = valuesOf({ ranks });
    expect(v?.groups.length).toBe(32);
    expect(v?.groupsOmitted).toBe(501 - 32);
    expect(v?.groups[0]?.code).toBe('MQD_E_EVAL_MEMORY');
    expect(v?.groups[0]?.ranks.length).toBeLessThanOrEqual(200);
    expect(v?.groups[0]?.ranks.endsWith('…')).toBe(true);
    expect(v?.min).toEqual({ value: 0, ranks: '0' });
    expect(v?.max).toEqual({ value: 998, ranks: '998' });
    // Bins without a number read say so (null), never 0.
    expect(valueBins(ranks.slice(1, 2), 0, 'p->k')).toEqual([]);
  });
});
