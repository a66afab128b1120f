// The agent protocol's check is no looser than the snapshot spec (1,040-character
// dll.missingFields entries where the spec allows 512), so a snapshot was stored with 201 and then
// refused by the decoder the dashboard and share links use. The guard is now the spec's own
// validator (checkRank); here every text limit the spec exports, and its list caps, are tried at
// the limit and one past it: what the guard accepts the web's decoder accepts, and one past the
// limit is refused by the guard naming the field (the hub answers it with MQD_E_BAD_INPUT).
import {
  decodeResponse,
  MAX_CODE_CHARS,
  MAX_DLL_FIELDS,
  MAX_FRAMES_PER_THREAD,
  MAX_HOST_CHARS,
  MAX_MESSAGE_CHARS,
  MAX_MISSING_FIELD_CHARS,
  MAX_PATH_CHARS,
  MAX_RENAMED_FIELD_CHARS,
  MAX_VERSION_CHARS,
  type RankSnapshot,
  syntheticRingRank,
  validateSnapshot,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import { rankBudget } from '../src/agent/agent-messages.js';
import { encodeMessage } from '../src/protocol/agent-protocol.js';
import { checkRanks, decodeAgentMessage } from '../src/protocol/agent-protocol-decode.js';
import type { RankReader, RankTarget } from '../src/shared/seams.js';
import { createFakeLocator, createFakeReader } from '../src/synthetic/fakes.js';
import { AGENT_TOKEN, attachAsAdmin, cleanupAfterEach, json, startServer } from './helpers.js';

const cleanup = cleanupAfterEach();

const base = (): RankSnapshot => ({
  ...syntheticRingRank(0, 100, 'n0', 2, 1, 0),
  dll: { path: '/usr/lib/libompi_dbg_msgq.so', version: 'Open MPI 4.1.4' },
  threads: [
    {
      tid: 100,
      name: 'ring',
      main: true,
      frames: [{ pc: '0x1', function: 'main', module: null, file: null, line: null, inlined: false }],
      truncated: false,
      error: null,
    },
  ],
});

type Rank = { -readonly [K in keyof RankSnapshot]: RankSnapshot[K] };

/** Each limit the spec exports, and how a rank reaches exactly `n` of it. */
const LIMITS: readonly { name: string; field: RegExp; limit: number; set: (r: Rank, n: number) => void }[] = [
  {
    name: 'dll.missingFields entry (MAX_MISSING_FIELD_CHARS)',
    field: /dll\.missingFields\[0\]/,
    limit: MAX_MISSING_FIELD_CHARS,
    set: (r, n) => {
      r.dll = { path: '/x.so', version: 'v', missingFields: ['m'.repeat(n)] };
    },
  },
  {
    name: 'dll.renamedFields entry (MAX_RENAMED_FIELD_CHARS)',
    field: /dll\.renamedFields\[0\]/,
    limit: MAX_RENAMED_FIELD_CHARS,
    set: (r, n) => {
      r.dll = { path: '/x.so', version: 'v', renamedFields: ['r'.repeat(n)] };
    },
  },
  {
    name: 'dll.missingFields entries (MAX_DLL_FIELDS)',
    field: /dll\.missingFields/,
    limit: MAX_DLL_FIELDS,
    set: (r, n) => {
      r.dll = { path: '/x.so', version: 'v', missingFields: Array.from({ length: n }, (_, i) => `t.f${i}`) };
    },
  },
  {
    name: 'dll.path (MAX_PATH_CHARS)',
    field: /dll\.path/,
    limit: MAX_PATH_CHARS,
    set: (r, n) => {
      r.dll = { path: `/${'p'.repeat(n - 1)}`, version: 'v' };
    },
  },
  {
    name: 'dll.version (MAX_VERSION_CHARS)',
    field: /dll\.version/,
    limit: MAX_VERSION_CHARS,
    set: (r, n) => {
      r.dll = { path: '/x.so', version: 'v'.repeat(n) };
    },
  },
  {
    name: 'host (MAX_HOST_CHARS)',
    field: /\.host/,
    limit: MAX_HOST_CHARS,
    set: (r, n) => {
      r.host = 'h'.repeat(n);
    },
  },
  {
    name: 'state.message (MAX_MESSAGE_CHARS)',
    field: /state\.message/,
    limit: MAX_MESSAGE_CHARS,
    set: (r, n) => {
      r.state = { kind: 'error', code: 'MQD_E_INTERNAL', message: 'x'.repeat(n) };
    },
  },
  {
    name: 'state.code (MAX_CODE_CHARS)',
    field: /state\.code/,
    limit: MAX_CODE_CHARS,
    set: (r, n) => {
      r.state = { kind: 'error', code: 'C'.repeat(n), message: '' };
    },
  },
  {
    name: 'a module path in a frame (MAX_PATH_CHARS)',
    field: /threads\[0\]\.frames\[0\]\.module/,
    limit: MAX_PATH_CHARS,
    set: (r, n) => {
      const t = r.threads?.[0];
      const f = t?.frames[0];
      if (!t || !f) throw new Error('fixture');
      r.threads = [{ ...t, frames: [{ ...f, module: 'm'.repeat(n) }] }];
    },
  },
  {
    name: 'frames per thread (MAX_FRAMES_PER_THREAD)',
    field: /threads\[0\]\.frames/,
    limit: MAX_FRAMES_PER_THREAD,
    set: (r, n) => {
      const t = r.threads?.[0];
      const f = t?.frames[0];
      if (!t || !f) throw new Error('fixture');
      r.threads = [{ ...t, frames: Array.from({ length: n }, () => f) }];
    },
  },
];

/** The decoder the dashboard and share links use on a stored snapshot holding `rank`. */
const webDecodes = (rank: RankSnapshot) =>
  validateSnapshot({
    schemaVersion: 1,
    takenAt: '2026-11-26T00:00:00Z',
    durationMicros: 0,
    mpi: { library: 'openmpi', dll: null, lengthUnit: 'bytes' },
    ranks: [rank],
  });

describe('the agent guard at each limit of the snapshot spec', () => {
  for (const l of LIMITS) {
    it(`${l.name}: accepted at ${l.limit} by guard and decoder; ${l.limit + 1} refused by the guard`, () => {
      const at = base() as Rank;
      l.set(at, l.limit);
      const guardAt = checkRanks([at]);
      expect(guardAt.ok ? 'ok' : guardAt.error).toBe('ok');
      const decoded = webDecodes(at);
      expect(decoded.ok ? 'ok' : decoded.error.message).toBe('ok');

      const over = base() as Rank;
      l.set(over, l.limit + 1);
      const guardOver = checkRanks([over]);
      expect(guardOver.ok).toBe(false);
      if (!guardOver.ok) expect(guardOver.error).toMatch(l.field);
      expect(webDecodes(over).ok).toBe(false);
      // On the wire: that rank is dropped from its chunk (the hub tells the agent, MQD_E_BAD_INPUT).
      const chunk = decodeAgentMessage(encodeMessage({ type: 'chunk', id: 1, ranks: [over] }), 1 << 24);
      expect(chunk.ok && chunk.value.type === 'chunk' && chunk.value.ranks).toEqual([]);
      expect(chunk.ok && chunk.value.dropped?.[0]?.why).toMatch(l.field);
    });
  }
});

describe("the issue's snapshot that could not be opened", () => {
  it('a 1,040-character missingFields entry becomes a coded error rank, and the stored snapshot opens in the web decoder', async () => {
    const s = await startServer();
    cleanup.push(() => s.close());
    // A reader that returns the rank: rank 0 with a DLL field name past the spec's limit.
    const reader: RankReader = {
      mpi: null,
      async read(ranks: readonly RankTarget[], o) {
        return ranks.map((t) => {
          const r = { ...syntheticRingRank(t.rank, t.pid, o.host, 2, 1, 0) } as Rank;
          if (t.rank === 0) r.dll = { path: '/x.so', version: 'v', missingFields: ['f'.repeat(1040)] };
          return r;
        });
      },
    };
    const agent = startAgent({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      host: 'n0',
      reader,
      locator: createFakeLocator({
        starterPid: 4242,
        uid: 1000,
        command: 'mpirun',
        hosts: ['n0'],
        ranksPerHost: 2,
      }),
    });
    cleanup.push(() => agent.dispose());
    await agent.whenConnected();
    const jobId = await attachAsAdmin(s);
    const snap = await s.app.inject({
      method: 'POST',
      url: `/api/jobs/${jobId}/snapshots`,
      headers: s.admin,
    });
    expect(snap.statusCode, snap.body).toBe(201);
    const id = json<{ snapshot: { id: string } }>(snap).snapshot.id;
    const got = await s.app.inject({ method: 'GET', url: `/api/snapshots/${id}`, headers: s.admin });
    expect(got.statusCode).toBe(200);
    const decoded = decodeResponse('snapshot', got.json());
    expect(decoded.ok ? 'ok' : decoded.error.message).toBe('ok');
    if (!decoded.ok) return;
    const [r0, r1] = decoded.value.snapshot.ranks;
    expect(r0?.state).toMatchObject({ kind: 'error', code: 'MQD_E_INTERNAL' });
    expect(r0?.state.kind === 'error' && r0.state.message).toMatch(
      /invalid snapshot at .*dll\.missingFields\[0\]/,
    );
    expect(r1?.state).toEqual({ kind: 'ok' });
  });
});

describe("the reader's walk budget", () => {
  it("is what fits one chunk of the aggregator's message cap: the agent passes it with every read", async () => {
    const s = await startServer({ maxMessageBytes: 65_536 });
    cleanup.push(() => s.close());
    const seen: (number | undefined)[] = [];
    const reader: RankReader = {
      mpi: null,
      async read(ranks: readonly RankTarget[], o) {
        seen.push(o.maxRankBytes);
        return ranks.map((t) => syntheticRingRank(t.rank, t.pid, o.host, 1, 1, 0));
      },
    };
    const agent = startAgent({ serverUrl: s.url, token: AGENT_TOKEN, host: 'n0', reader });
    cleanup.push(() => agent.dispose());
    await agent.whenConnected();
    const r = await s.app.mqd.hub.snapshot('n0', [{ rank: 0, pid: 9 }], 5000, () => {});
    expect(r.ok).toBe(true);
    expect(seen).toEqual([rankBudget(65_536)]);
    // A rank of exactly that many bytes fits one chunk: nothing the reader accepts is refused later.
    expect(rankBudget(65_536)).toBe(65_536 - '{"type":"chunk","id":2147483647,"ranks":[]}'.length);
  });
});

describe('an answer over the message cap', () => {
  it('a located job too big for one message is refused with MQD_E_TOO_LARGE; the agent stays connected', async () => {
    const s = await startServer({ maxMessageBytes: 16 * 1024 });
    cleanup.push(() => s.close());
    // A starter whose table lists 2,000 ranks on 200-character host names (~500 KB of reply).
    const locator = createFakeLocator({
      starterPid: 4242,
      uid: 1000,
      command: 'mpirun',
      hosts: Array.from({ length: 2000 }, (_, i) => `${'n'.repeat(200)}${i}`),
      ranksPerHost: 1,
    });
    const events: string[] = [];
    const agent = startAgent({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      host: 'n0',
      reader: createFakeReader({ worldSize: 1 }),
      locator,
    });
    cleanup.push(() => agent.dispose());
    agent.onEvent((e) => events.push(e.kind));
    await agent.whenConnected();
    const r = await s.app.mqd.hub.locate('n0', 4242, 5000);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error.code).toBe('MQD_E_TOO_LARGE');
      expect(r.error.message).toMatch(/over the aggregator's 16384-byte limit/);
    }
    expect(agent.connected).toBe(true);
    expect(events).not.toContain('disconnect');
    // The same connection still answers.
    const again = await s.app.mqd.hub.snapshot('n0', [{ rank: 0, pid: 9 }], 5000, () => {});
    expect(again.ok).toBe(true);
  });
});
