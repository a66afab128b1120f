// ClusterHub's wire between instances on a bus whose delivery order the test decides (the
// postgres adapter's NOTIFYs may overtake each other): a snapshot's reply that arrives before the
// rank chunks it counts waits for them, every rank is passed on once, and the result is the
// holder's. Two ClusterHubs, each over a fake local hub; no PostgreSQL here (cluster.test.ts has it).
import { crc32 } from 'node:zlib';
import { checkRank, ok, type RankSnapshot, syntheticRingRank } from '@mqd/model';
import type { Namespace } from 'socket.io';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ClusterHub } from '../src/cluster/cluster-hub.js';
import { clusterMessageSender } from '../src/cluster/cluster-wire.js';
import { inflatePart } from '../src/hub/gzip-splice.js';
import type { AgentHub, OnRanks } from '../src/hub/hub.js';
import { type FoldedRanks, rankFold } from '../src/hub/rank-fold.js';

type Handler = (m: unknown) => void;

/** A broadcast bus: each instance's namespace; messages queue until flushed in a chosen order. */
function bus() {
  const handlers = new Map<string, Map<string, Handler>>();
  const queue: { from: string; event: string; m: unknown }[] = [];
  const nsp = (self: string) =>
    ({
      use: () => undefined,
      on: (event: string, fn: Handler) => {
        const h = handlers.get(self) ?? new Map<string, Handler>();
        handlers.set(self, h);
        h.set(event, fn);
      },
      serverSideEmit: (event: string, m: unknown) => {
        queue.push({ from: self, event, m });
      },
    }) as unknown as Namespace;
  /** Delivers the queued messages (to every instance but the sender), reordered by `order`. */
  const flush = (order: (q: typeof queue) => typeof queue = (q) => q) => {
    const batch = order(queue.splice(0));
    for (const x of batch) for (const [inst, h] of handlers) if (inst !== x.from) h.get(x.event)?.(x.m);
    return batch.map((x) => x.event);
  };
  return { nsp, flush, queue };
}

const RANKS = [0, 1, 2, 3].map((r) => syntheticRingRank(r, 100 + r, 'node-b', 4, 1, 0));
const SENT_TEXT = Buffer.from(
  RANKS.slice(2)
    .map((r) => JSON.stringify(r, null, 1))
    .join(' ,'),
);

/** Two chunks of two ranks; the second as its agent sent it (the local hub passes the checked text on). */
function twoChunks(onRanks: OnRanks): void {
  onRanks(RANKS.slice(0, 2));
  onRanks(RANKS.slice(2), SENT_TEXT);
}

/** What a fake local hub was told: its `elsewhere` lookup, and the hosts it dropped. */
interface FakeLocalSeen {
  elsewhere: ((host: string) => string | null) | null;
  readonly dropped: { host: string; code: string }[];
}

/**
 * A local hub holding `hosts` (connected at `connectedAt`) whose snapshot answers in two chunks
 * of two ranks; `seen` records what the cluster hub asks of it.
 */
function fakeLocal(
  hosts: string[],
  connectedAt = 1000,
  seen: FakeLocalSeen = { elsewhere: null, dropped: [] },
  answer: (onRanks: OnRanks) => void = twoChunks,
): AgentHub {
  const agents = hosts.map((host) => ({ host, agentId: host, connected: true, connectedAt }));
  return {
    setElsewhere: (fn: (host: string) => string | null) => {
      seen.elsewhere = fn;
    },
    dropAgent: (host: string, e: { code: string }) => {
      seen.dropped.push({ host, code: e.code });
      const i = hosts.indexOf(host);
      if (i >= 0) hosts.splice(i, 1);
      return i >= 0;
    },
    isConnected: (h: string) => hosts.includes(h),
    agents: () => agents.filter((a) => hosts.includes(a.host)),
    seenStarters: () => [],
    discovered: () => [],
    discoveryScans: () => [],
    close: () => undefined,
    snapshot: async (_h: string, _t: unknown, _ms: number, onRanks: OnRanks) => {
      answer(onRanks);
      return ok({ mpi: { name: 'fake', version: '1' } });
    },
  } as unknown as AgentHub;
}

const hubs: ClusterHub[] = [];

/** The call message queued on the bus (its id names the call). */
function ensureCall(m: unknown): { id: string } {
  if (typeof m !== 'object' || m === null || typeof (m as { id?: unknown }).id !== 'string') {
    throw new Error('no call was queued');
  }
  return m as { id: string };
}
afterEach(() => {
  for (const h of hubs.splice(0)) h.close();
});

/**
 * Instance a asks for a snapshot of node-b, whose agent is on instance b: both hubs on one bus,
 * their states delivered (a learns that b holds node-b), the call queued.
 */
function askAcross(fold = false, answer = twoChunks) {
  const b = bus();
  const a = new ClusterHub(fakeLocal([]), b.nsp('a'), { instance: 'a', stateIntervalMs: 60_000 });
  const holder = new ClusterHub(fakeLocal(['node-b'], 1000, undefined, answer), b.nsp('b'), {
    instance: 'b',
    stateIntervalMs: 60_000,
  });
  hubs.push(a, holder);
  b.flush();
  const got: number[] = [];
  const texts: (string | undefined)[] = [];
  const folded: FoldedRanks[] = [];
  const asked = a.snapshot(
    'node-b',
    [],
    5000,
    (ranks, text) => {
      got.push(...ranks.map((r) => r.rank));
      texts.push(text?.toString());
    },
    {},
    fold ? { level: 6, onFolded: (c) => folded.push(c) } : undefined,
  );
  return { b, got, texts, folded, asked, holder };
}

describe('a forwarded snapshot across instances', () => {
  it('a reply that overtakes its chunks waits for them; every rank once, the holder’s result', async () => {
    const { b, got, asked } = askAcross();
    expect(b.flush()).toEqual(['mqd:call']);
    // b ran the read: two chunks, then the reply; deliver the reply first.
    await new Promise((r) => setImmediate(r));
    const order = b.flush((q) => [
      ...q.filter((x) => x.event === 'mqd:reply'),
      ...q.filter((x) => x.event !== 'mqd:reply'),
    ]);
    expect(order).toEqual(['mqd:reply', 'mqd:ranks', 'mqd:ranks']);
    const r = await asked;
    expect(r.ok).toBe(true);
    expect(got.sort()).toEqual([0, 1, 2, 3]);
  });

  it('chunks and a reply for the call from another instance than its holder are ignored', async () => {
    // An instance of the cluster (sealed, so authenticated) still speaks only for itself: it
    // cannot answer a call that went to another one.
    const { b, got, asked } = askAcross();
    const { id } = ensureCall(b.queue.find((x) => x.event === 'mqd:call')?.m);
    b.flush();
    await new Promise((r) => setImmediate(r));
    b.queue.unshift(
      { from: 'c', event: 'mqd:ranks', m: { id, from: 'c', to: 'a', ranks: [RANKS[3]] } },
      {
        from: 'c',
        event: 'mqd:reply',
        m: { id, from: 'c', to: 'a', result: ok({ mpi: { name: 'c' } }), chunks: 1 },
      },
    );
    b.flush();
    const r = await asked;
    expect(r.ok && r.value.mpi).toEqual({ name: 'fake', version: '1' });
    expect(got.sort()).toEqual([0, 1, 2, 3]);
  });

  it('a chunk with a rank the snapshot spec refuses is not passed on', async () => {
    const bad = { ...RANKS[0], rank: -1 } as RankSnapshot;
    expect(checkRank(bad)).not.toBeNull();
    const { b, got, asked } = askAcross(false, (onRanks) => {
      onRanks([bad, ...RANKS.slice(1, 2)]);
      onRanks(RANKS.slice(2), SENT_TEXT);
    });
    b.flush();
    await new Promise((r) => setImmediate(r));
    expect(b.flush()).toEqual(['mqd:ranks', 'mqd:ranks', 'mqd:reply']);
    expect((await asked).ok).toBe(true);
    expect(got.sort()).toEqual([2, 3]);
  });

  it('names the sender of each message as the adapter checks it against the sealing instance', () => {
    expect(clusterMessageSender(['mqd:state', { instance: 'a', from: 'b' }])).toBe('a');
    expect(clusterMessageSender(['mqd:call', { from: 'b' }])).toBe('b');
    expect(clusterMessageSender(['mqd:reply', {}])).toBeNull();
    expect(clusterMessageSender('mqd:call')).toBeNull();
  });

  it('chunks first, then the reply: settles at the reply, nothing passed twice', async () => {
    const { b, got, texts, asked } = askAcross();
    b.flush();
    await new Promise((r) => setImmediate(r));
    expect(b.flush()).toEqual(['mqd:ranks', 'mqd:ranks', 'mqd:reply']);
    expect((await asked).ok).toBe(true);
    expect(got).toEqual([0, 1, 2, 3]);
    // A chunk the holder had as sent crosses as those bytes, and reaches the asker's fan-in so.
    expect(texts).toEqual([undefined, SENT_TEXT.toString()]);
  });
});

describe('a forwarded snapshot to be stored: chunks folded where they arrived', () => {
  /** Whether a queued message is a reply, or a batch of folded chunks holding one. */
  const replies = (x: { event: string; m: unknown }) =>
    x.event === 'mqd:reply' ||
    (x.event === 'mqd:folded' && (x.m as { items: object[] }).items.some((i) => 'reply' in i));

  /** Delivers what the holder sends once it has sent its reply (its chunks are deflated first). */
  async function untilReplied(b: ReturnType<typeof bus>): Promise<string[]> {
    await vi.waitFor(() => expect(b.queue.some(replies)).toBe(true), { timeout: 5000, interval: 5 });
    return b.flush();
  }

  it('a chunk kept as sent crosses as its folds and deflated bytes; one without its text as ranks', async () => {
    const { b, got, texts, folded, asked } = askAcross(true);
    expect(b.flush()).toEqual(['mqd:call']);
    // The plain chunk at once; the folded one after its deflate, then the reply that counts both,
    // in one batch.
    await vi.waitFor(() => expect(b.queue.some(replies)).toBe(true), { timeout: 5000, interval: 5 });
    const batch = b.queue.find((x) => x.event === 'mqd:folded')?.m as { items: object[] };
    expect(batch.items.map((i) => Object.keys(i).sort().join())).toEqual(['chunk,id', 'reply']);
    expect(b.flush()).toEqual(['mqd:ranks', 'mqd:folded']);
    expect((await asked).ok).toBe(true);
    expect(got).toEqual([0, 1]);
    expect(texts).toEqual([undefined]);
    expect(folded).toHaveLength(1);
    const [chunk] = folded;
    expect(chunk?.folds).toEqual(RANKS.slice(2).map(rankFold));
    // The bytes are the agent's as sent (whitespace and all), with their CRC and length.
    expect(chunk && inflatePart(chunk.part).toString()).toBe(SENT_TEXT.toString());
    expect(chunk?.part).toMatchObject({ length: SENT_TEXT.length, crc: crc32(SENT_TEXT) >>> 0 });
  });

  it('the calls of one fan-out share batches: two hosts’ folded chunks and replies cross in one message', async () => {
    // A fan-out asks for each host on its own: one message per call put 500 hosts' chunks in 500
    // messages through the adapter's pool (seconds of queueing at 100,000 ranks).
    const b = bus();
    const a = new ClusterHub(fakeLocal([]), b.nsp('a'), { instance: 'a', stateIntervalMs: 60_000 });
    const texts = ['node-b', 'node-c'].map((h) =>
      Buffer.from(RANKS.map((r) => JSON.stringify({ ...r, host: h })).join(',')),
    );
    const holder = new ClusterHub(
      fakeLocal(['node-b', 'node-c'], 1000, undefined, (onRanks) => {
        const text = texts.shift() as Buffer;
        onRanks(JSON.parse(`[${text.toString()}]`), text);
      }),
      b.nsp('b'),
      { instance: 'b', stateIntervalMs: 60_000 },
    );
    hubs.push(a, holder);
    b.flush();
    const folded: FoldedRanks[] = [];
    const fold = { level: 6, onFolded: (c: FoldedRanks) => folded.push(c) };
    const asked = ['node-b', 'node-c'].map((h) => a.snapshot(h, [], 5000, () => {}, {}, fold));
    expect(b.flush()).toEqual(['mqd:call', 'mqd:call']);
    await vi.waitFor(
      () => expect(b.queue.flatMap((x) => (x.m as { items?: object[] }).items ?? []).length).toBe(4),
      { timeout: 5000, interval: 5 },
    );
    expect(b.flush()).toEqual(['mqd:folded']);
    for (const r of await Promise.all(asked)) expect(r.ok).toBe(true);
    expect(folded.map((c) => inflatePart(c.part).toString().includes('node-c')).sort()).toEqual([
      false,
      true,
    ]);
    expect(a.chunksIn.folded).toBe(2);
    // Everything sent, the holder keeps no batch for that asker (a restarted asker is a new one).
    expect((holder as unknown as { outboxes: Map<string, unknown> }).outboxes.size).toBe(0);
  });

  it('a reply in a batch that overtakes the batch with its chunk waits for it', async () => {
    const { b, folded, asked } = askAcross(true);
    b.flush();
    await vi.waitFor(() => expect(b.queue.some(replies)).toBe(true), { timeout: 5000, interval: 5 });
    // Split the batch in two (its chunk, then the reply) and deliver the reply's first.
    const sent = b.queue.splice(0);
    const batch = sent.find((x) => x.event === 'mqd:folded')?.m as {
      from: string;
      to: string;
      items: object[];
    };
    const { from, to, items } = batch;
    b.queue.push(...sent.filter((x) => x.event !== 'mqd:folded'));
    b.queue.push({
      from: 'b',
      event: 'mqd:folded',
      m: { from, to, items: items.filter((i) => 'reply' in i) },
    });
    b.flush();
    let settled = false;
    void asked.then(() => {
      settled = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(settled, 'the reply waits for the chunk it counts').toBe(false);
    b.queue.push({
      from: 'b',
      event: 'mqd:folded',
      m: { from, to, items: items.filter((i) => !('reply' in i)) },
    });
    b.flush();
    expect((await asked).ok).toBe(true);
    expect(folded).toHaveLength(1);
  });

  it('a folded chunk with ranks passed on already: only the new ranks go on, from its bytes', async () => {
    // Rank 1 arrives twice (as after a retry on another instance): plainly, then in a kept chunk.
    const overlap = Buffer.from(
      RANKS.slice(1)
        .map((r) => JSON.stringify(r))
        .join(','),
    );
    const { b, got, folded, asked } = askAcross(true, (onRanks) => {
      onRanks(RANKS.slice(0, 2));
      onRanks(RANKS.slice(1), overlap);
    });
    b.flush();
    await untilReplied(b);
    expect((await asked).ok).toBe(true);
    expect(folded).toEqual([]);
    expect(got).toEqual([0, 1, 2, 3]);
  });

  it('the holder is serving a snapshot to be stored while it reads it, and says when it starts; not for a read', async () => {
    // What the holder's overviews made ahead yield to (app.ts): a fan-in read here for another
    // instance shares this machine's cores as one gathered here does.
    for (const fold of [true, false]) {
      let during: boolean | null = null;
      let started = 0;
      const x = askAcross(fold, (onRanks) => {
        during = x.holder.servingSnapshot;
        twoChunks(onRanks);
      });
      x.holder.onServingSnapshot(() => started++);
      expect(x.holder.servingSnapshot).toBe(false);
      x.b.flush();
      await untilReplied(x.b);
      expect((await x.asked).ok).toBe(true);
      expect({ fold, during, started }).toEqual({ fold, during: fold, started: fold ? 1 : 0 });
      expect(x.holder.servingSnapshot).toBe(false);
    }
  });

  it('a snapshot that is only read (the hang watch) asks for none: its chunks cross as sent', async () => {
    const { b, texts, folded, asked } = askAcross(false);
    b.flush();
    await untilReplied(b);
    expect((await asked).ok).toBe(true);
    expect(folded).toEqual([]);
    expect(texts).toEqual([undefined, SENT_TEXT.toString()]);
  });
});

describe('one agent per host across instances', () => {
  it('B refuses a host A holds (elsewhere), and stops doing so once A has missed its states', async () => {
    const b = bus();
    const seenB: FakeLocalSeen = { elsewhere: null, dropped: [] };
    const a = new ClusterHub(fakeLocal(['node-a']), b.nsp('a'), { instance: 'a', stateIntervalMs: 40 });
    const hb = new ClusterHub(fakeLocal([], 1000, seenB), b.nsp('b'), { instance: 'b', stateIntervalMs: 40 });
    hubs.push(a, hb);
    b.flush();
    expect(seenB.elsewhere?.('node-a')).toBe('a');
    expect(seenB.elsewhere?.('node-x')).toBeNull();
    // A goes silent (its states are never delivered again): after 1.5 intervals B takes the
    // host's agent, before A's expiry at 3 intervals.
    a.close();
    b.queue.splice(0);
    await vi.waitFor(() => expect(seenB.elsewhere?.('node-a')).toBeNull(), { timeout: 5000, interval: 10 });
  });

  /**
   * Instances a and b both holding node-x, connected at `atA` and `atB`, their states crossed:
   * what each of them dropped.
   */
  function raced(atA: number, atB: number) {
    const b = bus();
    const seenA: FakeLocalSeen = { elsewhere: null, dropped: [] };
    const seenB: FakeLocalSeen = { elsewhere: null, dropped: [] };
    for (const [name, at, seen] of [
      ['a', atA, seenA],
      ['b', atB, seenB],
    ] as const) {
      hubs.push(
        new ClusterHub(fakeLocal(['node-x'], at, seen), b.nsp(name), {
          instance: name,
          stateIntervalMs: 60_000,
        }),
      );
    }
    b.flush();
    return { a: seenA.dropped, b: seenB.dropped };
  }
  const CONFLICT = [{ host: 'node-x', code: 'MQD_E_AGENT_CONFLICT' }];

  it('two connections that raced: the older keeps the host, on both instances’ reading', () => {
    // B's connection is the older one: A drops its own, B keeps.
    expect(raced(2000, 1000)).toEqual({ a: CONFLICT, b: [] });
    expect(raced(1000, 2000)).toEqual({ a: [], b: CONFLICT });
  });

  it('a tie in connection time goes to the smaller instance id', () => {
    expect(raced(1000, 1000)).toEqual({ a: [], b: CONFLICT });
  });
});
