// The agent protocol's hand-written rank guard must accept and refuse exactly what the
// snapshot spec's validator does: every leaf and object of realistic ranks is mutated in the
// ways a broken or hostile agent could, and both must agree on each mutation.
import { type RankSnapshot, syntheticRingRank } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { checkRanks } from '../src/protocol/agent-protocol-decode.js';
import { specAccepts } from './helpers.js';

const mpichRank: RankSnapshot = {
  rank: 3,
  pid: 4242,
  host: 'n1',
  state: { kind: 'ok' },
  pausedMicros: 0,
  communicators: [
    {
      id: '0x7f00aa',
      name: '',
      size: 2,
      localRank: 1,
      group: [2, 3],
      sends: null,
      receives: [
        {
          status: 'matched',
          peer: { local: null, global: null },
          tag: null,
          length: 0,
          actual: { peer: { local: 0, global: 2 }, tag: -5, length: null },
          // Five lines: the most the spec allows, so one more must be refused.
          extraText: ['a', 'b', 'c', 'd', 'e'],
          buffer: '0x0',
          systemBuffer: true,
        },
      ],
      unexpected: [],
      unavailable: { sends: { code: 'MQD_E_QUEUE_UNSUPPORTED', message: '' } },
    },
  ],
};
const errorRank: RankSnapshot = {
  rank: 0,
  pid: 1,
  host: '',
  state: { kind: 'no-queues', code: 'MQD_E_NO_QUEUES', message: 'x' },
  pausedMicros: null,
  communicators: [],
};

/** A rank with stacks: two threads (one inlined frame, one unwind error), an MPI call with args. */
const stackRank: RankSnapshot = {
  ...errorRank,
  rank: 7,
  pid: 4300,
  state: { kind: 'ok' },
  pausedMicros: 12,
  threads: [
    {
      tid: 4300,
      name: 'ring',
      main: true,
      frames: [
        { pc: '0x7f01', function: 'inl', module: '/lib/x.so', file: 'a.c', line: 3, inlined: true },
        { pc: '0x7f01', function: 'PMPI_Ssend', module: '/lib/x.so', file: null, line: null, inlined: false },
      ],
      truncated: false,
      error: null,
    },
    {
      tid: 4301,
      name: null,
      main: false,
      frames: [],
      truncated: true,
      error: { code: 'MQD_E_NO_STACKS', message: 'm' },
    },
  ],
  mpiCall: {
    function: 'MPI_Ssend',
    tid: 4300,
    args: { peer: { local: 1, global: 1 }, tag: 4, communicator: '0', count: 2 },
  },
};
const stacksErrorRank: RankSnapshot = {
  ...errorRank,
  rank: 8,
  stacksError: { code: 'MQD_E_NO_STACKS', message: 'x' },
  mpiCall: { function: 'MPI_Recv', tid: 1, args: null },
};

/** The fields the reader added later: the rank's DLL and its log, world, lengthUnknown. */
const dllRank: RankSnapshot = {
  ...mpichRank,
  rank: 9,
  communicators: mpichRank.communicators.map((c) => ({
    ...c,
    world: false,
    remoteGroup: [4, 5, 6],
    receives: (c.receives ?? []).map((o) => ({ ...o, lengthUnknown: true as const })),
  })),
  dll: { path: '/usr/lib/libompi_dbg_msgq.so', version: 'Open MPI 4.1' },
  dllLog: ['setup', 'walk'],
};

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Every container in the value, with a way to change one of its slots. */
function* slots(
  v: Json,
  path = '$',
): Generator<{ path: string; parent: Json[] | { [k: string]: Json }; key: string | number }> {
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      yield { path: `${path}[${i}]`, parent: v, key: i };
      yield* slots(v[i] ?? null, `${path}[${i}]`);
    }
  } else if (v !== null && typeof v === 'object') {
    for (const k of Object.keys(v)) {
      yield { path: `${path}.${k}`, parent: v, key: k };
      yield* slots(v[k] ?? null, `${path}.${k}`);
    }
  }
}

const REPLACEMENTS: Json[] = [
  null,
  -1,
  0,
  1.5,
  2147483648,
  -2147483649,
  'x',
  '',
  'y'.repeat(70),
  'z'.repeat(5000),
  true,
  [],
  [1, 2],
  {},
  { kind: 'ok' },
  '0x7ffc',
  '0X12',
  'pending',
  'agent-missing',
];

describe('checkRanks', () => {
  it('agrees with validateSnapshot on every mutation of realistic ranks', () => {
    const bases: Json[] = [
      syntheticRingRank(5, 105, 'n0', 16, 3, 1) as unknown as Json,
      mpichRank as unknown as Json,
      errorRank as unknown as Json,
      stackRank as unknown as Json,
      stacksErrorRank as unknown as Json,
      dllRank as unknown as Json,
    ];
    let cases = 0;
    let refused = 0;
    for (const base of bases) {
      expect(checkRanks([base]).ok).toBe(true);
      const count = [...slots(base)].length;
      for (let s = 0; s < count; s++) {
        const variants: ((x: Json) => void)[] = [
          ...REPLACEMENTS.map((rep) => (x: Json) => setSlot(x, s, structuredClone(rep))),
          (x) => deleteSlot(x, s),
          (x) => addField(x, s),
        ];
        for (const mutate of variants) {
          const m = structuredClone(base);
          mutate(m);
          const mine = checkRanks([m]);
          const spec = specAccepts(m);
          cases++;
          if (!spec) refused++;
          if (mine.ok !== spec) {
            throw new Error(`disagree (guard ${mine.ok}, spec ${spec}) on ${JSON.stringify(m)}`);
          }
        }
      }
    }
    expect(cases).toBeGreaterThan(1000);
    expect(refused).toBeGreaterThan(cases / 2);
  });

  it('refuses a rank twice in one chunk, and names the field', () => {
    const r = syntheticRingRank(1, 2, 'h', 4, 1, 0);
    const twice = checkRanks([r, r]);
    expect(!twice.ok && twice.error).toMatch(/ranks\[1\]\.rank: rank 1 appears twice/);
    const bad = structuredClone(r);
    const op = bad.communicators[0]?.sends?.[0];
    if (!op) throw new Error('fixture');
    op.buffer = '0xZZ';
    const named = checkRanks([bad]);
    expect(!named.ok && named.error).toMatch(/ranks\[0\]\.communicators\[0\]\.sends\[0\]\.buffer/);
  });
});

function nth(x: Json, n: number) {
  let i = 0;
  for (const s of slots(x)) if (i++ === n) return s;
  throw new Error('no slot');
}
function setSlot(x: Json, n: number, v: Json): void {
  const s = nth(x, n);
  (s.parent as Record<string | number, Json>)[s.key] = v;
}
function deleteSlot(x: Json, n: number): void {
  const s = nth(x, n);
  if (Array.isArray(s.parent)) s.parent.splice(Number(s.key), 1);
  else delete s.parent[s.key];
}
function addField(x: Json, n: number): void {
  const s = nth(x, n);
  const v = (s.parent as Record<string | number, Json>)[s.key];
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) v['extra'] = 1;
  else if (Array.isArray(v)) v.push(v[0] ?? 1);
}
