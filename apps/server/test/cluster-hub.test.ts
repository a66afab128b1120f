// ClusterHub's wire between instances on a bus whose delivery order the test decides (the
// postgres adapter's NOTIFYs may overtake each other): a snapshot's reply that arrives before the
// rank chunks it counts waits for them, every rank is passed on once, and the result is the
// holder's. Two ClusterHubs, each over a fake local hub; no PostgreSQL here (cluster.test.ts has it).
import { ok, type RankSnapshot, syntheticRingRank } from '@mqd/model';
import type { Namespace } from 'socket.io';
import { afterEach, describe, expect, it } from 'vitest';
import { ClusterHub } from '../src/cluster/cluster-hub.js';
import type { AgentHub } from '../src/hub.js';

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

/** A local hub holding `hosts` whose snapshot answers in two chunks of two ranks. */
function fakeLocal(hosts: string[]): AgentHub {
  const agents = hosts.map((host) => ({ host, agentId: host, connected: true }));
  return {
    isConnected: (h: string) => hosts.includes(h),
    agents: () => agents,
    seenStarters: () => [],
    discovered: () => [],
    close: () => undefined,
    snapshot: async (_h: string, _t: unknown, _ms: number, onRanks: (r: RankSnapshot[]) => void) => {
      onRanks(RANKS.slice(0, 2));
      onRanks(RANKS.slice(2));
      return ok({ mpi: { name: 'fake', version: '1' } });
    },
  } as unknown as AgentHub;
}

const hubs: ClusterHub[] = [];
afterEach(() => {
  for (const h of hubs.splice(0)) h.close();
});

/**
 * Instance a asks for a snapshot of node-b, whose agent is on instance b: both hubs on one bus,
 * their states delivered (a learns that b holds node-b), the call queued.
 */
function askAcross() {
  const b = bus();
  const a = new ClusterHub(fakeLocal([]), b.nsp('a'), { instance: 'a', stateIntervalMs: 60_000 });
  const holder = new ClusterHub(fakeLocal(['node-b']), b.nsp('b'), {
    instance: 'b',
    stateIntervalMs: 60_000,
  });
  hubs.push(a, holder);
  b.flush();
  const got: number[] = [];
  const asked = a.snapshot('node-b', [], 5000, (ranks) => got.push(...ranks.map((r) => r.rank)));
  return { b, got, asked };
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

  it('chunks first, then the reply: settles at the reply, nothing passed twice', async () => {
    const { b, got, asked } = askAcross();
    b.flush();
    await new Promise((r) => setImmediate(r));
    expect(b.flush()).toEqual(['mqd:ranks', 'mqd:ranks', 'mqd:reply']);
    expect((await asked).ok).toBe(true);
    expect(got).toEqual([0, 1, 2, 3]);
  });
});
