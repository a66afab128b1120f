// Ranks with OpenMP threads on the agent wire: the hand-written rank guard accepts
// and refuses exactly what the snapshot spec's validator does on every mutation of hybrid
// ranks (openmp, openmpError, ThreadStack.ompState and their invariants), and a hybrid rank
// travels from an agent through the hub intact while a malformed one is refused with a coded
// error naming the field.
import { type RankSnapshot, syntheticOpenMpJob } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { encodeMessage, WIRE_EVENT } from '../src/protocol/agent-protocol.js';
import { checkRanks } from '../src/protocol/agent-protocol-decode.js';
import { cleanupAfterEach, hello, rawAgent, serverFor, specAccepts, waitFor } from './helpers.js';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** A hybrid rank of each situation, its stacks cut to two frames so the mutation walk stays small. */
function hybridRanks(): RankSnapshot[] {
  const out: RankSnapshot[] = [];
  for (const scenario of ['single-recv', 'lock-deadlock', 'nested', 'taskwait'] as const) {
    const r = syntheticOpenMpJob({ ranks: 2, scenario }).ranks[0];
    if (r === undefined) throw new Error('fixture');
    out.push({
      ...r,
      threads: (r.threads ?? []).slice(0, 3).map((t) => ({ ...t, frames: t.frames.slice(0, 2) })),
    });
  }
  return out;
}

function slotsOf(v: Json): { parent: Json[] | { [k: string]: Json }; key: string | number }[] {
  const out: { parent: Json[] | { [k: string]: Json }; key: string | number }[] = [];
  const walk = (x: Json) => {
    if (Array.isArray(x)) {
      x.forEach((y, i) => {
        out.push({ parent: x, key: i });
        walk(y);
      });
    } else if (x !== null && typeof x === 'object') {
      for (const k of Object.keys(x)) {
        out.push({ parent: x, key: k });
        walk(x[k] ?? null);
      }
    }
  };
  walk(v);
  return out;
}

const REPLACEMENTS: Json[] = [
  null,
  -1,
  0,
  1.5,
  'x',
  '',
  'y'.repeat(200),
  true,
  [],
  {},
  '0x7ffc',
  '0X12',
  'explicit',
];

describe('checkRanks on hybrid ranks', () => {
  it('agrees with validateSnapshot on every mutation of the OpenMP fields and the rest', () => {
    const { openmp: _o, ...plain } = syntheticOpenMpJob({ ranks: 2, scenario: 'single-recv' }).ranks[1] ?? {};
    const error = {
      ...plain,
      threads: [],
      openmpError: { code: 'MQD_E_OMPD_DISABLED', message: 'run with OMP_DEBUG=enabled' },
    };
    const { openmpError: _e, ...none0 } = error;
    const none = { ...none0, openmp: null };
    const bases = [...hybridRanks(), error, none] as unknown as Json[];
    let cases = 0;
    let refused = 0;
    for (const base of bases) {
      expect(checkRanks([base]).ok).toBe(true);
      const count = slotsOf(base).length;
      for (let s = 0; s < count; s++) {
        const variants: ((x: Json) => void)[] = [
          ...REPLACEMENTS.map((rep) => (x: Json) => {
            const slot = slotsOf(x)[s];
            if (slot) (slot.parent as Record<string | number, Json>)[slot.key] = structuredClone(rep);
          }),
          (x) => {
            const slot = slotsOf(x)[s];
            if (!slot) return;
            if (Array.isArray(slot.parent)) slot.parent.splice(Number(slot.key), 1);
            else delete slot.parent[slot.key];
          },
        ];
        for (const mutate of variants) {
          const m = structuredClone(base);
          mutate(m);
          const mine = checkRanks([m]);
          const spec = specAccepts(m);
          cases++;
          if (!spec) refused++;
          if (mine.ok !== spec)
            throw new Error(`disagree (guard ${mine.ok}, spec ${spec}) on ${JSON.stringify(m)}`);
        }
      }
      // The invariants the schema cannot say: openmp with openmpError, an ompState that disagrees.
      const both = {
        ...(base as { [k: string]: Json }),
        openmp: null,
        openmpError: { code: 'C', message: 'm' },
      };
      expect(checkRanks([both]).ok).toBe(false);
      expect(specAccepts(both)).toBe(false);
    }
    expect(cases).toBeGreaterThan(2000);
    expect(refused).toBeGreaterThan(cases / 3);
  });

  it('names the bad OpenMP field', () => {
    const r = structuredClone(hybridRanks()[1]);
    const t = r?.openmp?.threads[0];
    if (!r || !t) throw new Error('fixture');
    t.waitId = 'lock@0x10';
    const bad = checkRanks([r]);
    expect(!bad.ok && bad.error).toMatch(/ranks\[0\]\.openmp\.threads\[0\]\.waitId: does not match/);
    const st = structuredClone(hybridRanks()[0]);
    const th = st?.threads?.[0];
    if (!st || !th) throw new Error('fixture');
    th.ompState = 'ompt_state_idle';
    const off = checkRanks([st]);
    expect(!off.ok && off.error).toMatch(
      /ranks\[0\]\.openmp: thread 20000's ompState ompt_state_idle differs/,
    );
  });
});

const cleanup = cleanupAfterEach();

describe('a hybrid rank through the hub', () => {
  it('arrives intact; a malformed one is refused with MQD_E_BAD_INPUT and the rank stays unanswered', async () => {
    const s = await serverFor(cleanup);
    const { socket, inbox } = rawAgent(cleanup, s.url, hello('h'));
    await waitFor(() => inbox.some((m) => m.type === 'welcome'), 'welcome');
    const requests = () => inbox.flatMap((m) => (m.type === 'request' ? [m] : []));
    const refusals = () => inbox.flatMap((m) => (m.type === 'refused' ? [m] : []));

    const job = syntheticOpenMpJob({ ranks: 2, scenario: 'taskwait' });
    const rank = { ...job.ranks[0], host: 'h' } as RankSnapshot;
    const got: RankSnapshot[] = [];
    const answer = s.app.mqd.hub.snapshot('h', [{ rank: 0, pid: rank.pid }], 5000, (rs) => got.push(...rs));
    await waitFor(() => requests().length === 1, 'the request');
    const id = requests()[0]?.id ?? 0;

    const broken = structuredClone(rank);
    const task = broken.openmp?.threads[2]?.task;
    if (!task) throw new Error('fixture');
    (task as { kind: string }).kind = 'detached';
    socket.emit(WIRE_EVENT, encodeMessage({ type: 'chunk', id, ranks: [broken] }));
    await waitFor(() => refusals().length === 1, 'the malformed rank refused');
    expect(refusals()[0]?.refId).toBe(id);
    expect(refusals()[0]?.error.code).toBe('MQD_E_BAD_INPUT');
    expect(refusals()[0]?.error.message).toMatch(
      /ranks\[0\]\.openmp\.threads\[2\]\.task\.kind: expected one of/,
    );

    socket.emit(WIRE_EVENT, encodeMessage({ type: 'chunk', id, ranks: [rank] }));
    socket.emit(
      WIRE_EVENT,
      encodeMessage({
        type: 'reply',
        id,
        method: 'snapshot',
        ok: true,
        result: { count: 1, mpi: null, durationMicros: 3 },
      }),
    );
    const r = await answer;
    expect(r.ok).toBe(true);
    expect(got).toHaveLength(1);
    expect(got[0]?.openmp).toEqual(rank.openmp);
    expect(got[0]?.threads?.map((t) => t.ompState ?? null)).toEqual(
      rank.threads?.map((t) => t.ompState ?? null),
    );
    expect(refusals()).toHaveLength(1);
  });
});
