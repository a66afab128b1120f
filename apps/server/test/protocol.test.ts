import { readFileSync } from 'node:fs';
import { type RankSnapshot, syntheticRingRank } from '@mqd/model';
import type { Socket } from 'socket.io-client';
import { describe, expect, it } from 'vitest';
import { chunkMessages } from '../src/agent/agent-messages.js';
import {
  AGENT_PROTOCOL_VERSION,
  encodeMessage,
  type ServerMessage,
  WIRE_EVENT,
} from '../src/protocol/agent-protocol.js';
import { decodeAgentMessage, decodeServerMessage } from '../src/protocol/agent-protocol-decode.js';
import { cleanupAfterEach, hello, json, rawAgent, startServer, type TestServer, waitFor } from './helpers.js';

const cleanup = cleanupAfterEach();

function connectError(s: Socket): Promise<Error & { data?: { code?: string } }> {
  return new Promise((resolve) => s.once('connect_error', resolve));
}

let srv: TestServer;
async function server(config = {}) {
  srv = await startServer(config);
  cleanup.push(() => srv.close());
  return srv;
}

/** Attaches starter 7 (whatever agent locates it) as admin and asks one snapshot of it: that reply. */
async function attachAndSnapshot(s: TestServer) {
  const att = await s.app.inject({
    method: 'POST',
    url: '/api/jobs/attach',
    headers: s.admin,
    payload: { starterPid: 7 },
  });
  expect(att.statusCode, att.body).toBe(201);
  const jobId = json<{ job: { id: string } }>(att).job.id;
  return s.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/snapshots`, headers: s.admin });
}

async function audit(s: TestServer) {
  const res = await s.app.inject({ method: 'GET', url: '/api/admin/activity', headers: s.admin });
  return json<{ entries: { action: string }[] }>(res).entries.map((e) => e.action);
}

describe('agent handshake', () => {
  it('refuses a forged or missing token with MQD_E_UNAUTHENTICATED and keeps nothing', async () => {
    const s = await server();
    for (const auth of [hello('forger', 'not-the-agent-token-at-all'), { host: 'x' }]) {
      const a = rawAgent(cleanup, s.url, auth);
      const e = await connectError(a.socket);
      expect(e.data?.code).toBe('MQD_E_UNAUTHENTICATED');
      expect(e.message).toMatch(/^MQD_E_UNAUTHENTICATED: /);
    }
    expect(s.app.mqd.hub.agents()).toEqual([]);
    expect(s.app.mqd.hub.refusedHandshakes).toBe(2);
    expect(await audit(s)).not.toContain('agent-connect');
  });

  it('refuses another protocol version and a malformed handshake with MQD_E_BAD_INPUT', async () => {
    const s = await server();
    const v2 = rawAgent(cleanup, s.url, { ...hello('n'), protocol: AGENT_PROTOCOL_VERSION + 1 });
    expect((await connectError(v2.socket)).message).toMatch(`protocol ${AGENT_PROTOCOL_VERSION + 1}`);
    const bad = rawAgent(cleanup, s.url, { ...hello('n'), agentId: 'has spaces' });
    const e = await connectError(bad.socket);
    expect(e.data?.code).toBe('MQD_E_BAD_INPUT');
    expect(e.message).toMatch(/auth\.agentId/);
    expect(s.app.mqd.hub.agents()).toEqual([]);
  });
});

describe('agent messages', () => {
  async function connected(s: TestServer, host = 'n0') {
    const a = rawAgent(cleanup, s.url, hello(host));
    await waitFor(() => a.inbox.some((m) => m.type === 'welcome'), 'welcome');
    return a;
  }
  const refusals = (a: { inbox: ServerMessage[] }) =>
    a.inbox.flatMap((m) => (m.type === 'refused' ? [m] : []));

  it('refuses oversized, non-JSON and mis-shaped messages with a coded error and stores nothing from them', async () => {
    const s = await server({ maxMessageBytes: 8192 });
    const a = await connected(s);
    const welcome = a.inbox[0];
    expect(welcome).toMatchObject({ type: 'welcome', maxMessageBytes: 8192 });
    const status = {
      type: 'status',
      health: {
        rssBytes: 1,
        heapUsedBytes: 1,
        uptimeSeconds: 1,
        loadAverage1m: 0,
        activeRequests: 0,
        lastError: null,
      },
      mpi: null,
      jobs: [{ starterPid: 10, uid: 1, command: 'x'.repeat(9000) }],
      discovered: [],
    };
    a.socket.emit(WIRE_EVENT, encodeMessage(status as never)); // too big
    a.socket.emit(WIRE_EVENT, Buffer.from('{"type":"status",')); // not JSON
    a.socket.emit(WIRE_EVENT, encodeMessage({ ...status, jobs: [], type: 'stat' } as never)); // mis-shaped
    a.socket.emit(WIRE_EVENT, JSON.stringify(status)); // a string, not one binary argument
    a.socket.emit('hello', 1); // an event agents do not send
    await waitFor(() => refusals(a).length === 5, 'five refusals');
    expect(refusals(a).every((r) => r.error.code === 'MQD_E_BAD_INPUT')).toBe(true);
    // socket.io runs onAny listeners before event handlers, so the order is not the send order.
    const messages = refusals(a).map((r) => r.error.message);
    for (const re of [
      /exceeds the 8192-byte limit/,
      /not JSON/,
      /at type: expected one of/,
      /one binary argument/,
      /unknown event 'hello'/,
    ]) {
      expect(
        messages.filter((m) => re.test(m)),
        re.source,
      ).toHaveLength(1);
    }
    // Nothing from them was kept: no status, no starters.
    const agent = s.app.mqd.hub.agents()[0];
    expect(agent).toMatchObject({ host: 'n0', health: null, jobs: [], refused: 5, messages: 0 });

    // A well-formed status is accepted on the same connection; a malformed starter in it is
    // dropped (counted and told to the agent), the others kept.
    a.socket.emit(
      WIRE_EVENT,
      encodeMessage({
        ...status,
        jobs: [
          { starterPid: -1, uid: 1, command: 'x' },
          { starterPid: 11, uid: 1, command: 'mpirun -np 2 ./ring' },
        ],
      } as never),
    );
    await waitFor(() => s.app.mqd.hub.agents()[0]?.health !== null, 'the status');
    expect(s.app.mqd.hub.agents()[0]?.jobs).toEqual([
      { starterPid: 11, uid: 1, command: 'mpirun -np 2 ./ring' },
    ]);
    await waitFor(() => refusals(a).length === 6, 'the dropped starter told');
    expect(refusals(a)[5]?.error.message).toMatch(/dropped 1 starters .*jobs\[0\]\.starterPid/);
    expect(s.app.mqd.hub.droppedEntries).toBe(1);
  });

  it('refuses chunks and replies for requests never made, and ranks that were not asked for', async () => {
    const s = await server();
    const a = await connected(s, 'h');
    const rank = syntheticRingRank(0, 100, 'h', 2, 1, 0);
    a.socket.emit(WIRE_EVENT, encodeMessage({ type: 'chunk', id: 99, ranks: [rank] }));
    a.socket.emit(
      WIRE_EVENT,
      encodeMessage({
        type: 'reply',
        id: 98,
        method: 'snapshot',
        ok: true,
        result: { count: 0, mpi: null, durationMicros: 0 },
      }),
    );
    await waitFor(() => refusals(a).length === 2, 'two refusals');
    expect(refusals(a).map((r) => r.refId)).toEqual([99, 98]);

    // Now a real request: the agent answers with one rank it was asked for and one it was not.
    const first: number[] = [];
    const answer = s.app.mqd.hub.snapshot('h', [{ rank: 0, pid: 100 }], 5000, (rs) =>
      first.push(...rs.map((r) => r.rank)),
    );
    await waitFor(() => a.inbox.some((m) => m.type === 'request'), 'the request');
    const req = a.inbox.find((m) => m.type === 'request');
    if (req?.type !== 'request') throw new Error('no request');
    const intruder = syntheticRingRank(1, 101, 'h', 2, 1, 0);
    a.socket.emit(WIRE_EVENT, encodeMessage({ type: 'chunk', id: req.id, ranks: [rank, intruder] }));
    await waitFor(() => refusals(a).length === 3, 'the intruder dropped');
    expect(refusals(a)[2]?.error.message).toMatch(/rank 1 \(pid 101\) was not asked for/);
    // Only the intruder: the rank asked for in the same chunk was kept.
    expect(first).toEqual([0]);

    const got: number[] = [];
    const pending = s.app.mqd.hub.snapshot('h', [{ rank: 0, pid: 100 }], 5000, (rs) =>
      got.push(...rs.map((r) => r.rank)),
    );
    await waitFor(() => a.inbox.filter((m) => m.type === 'request').length === 2, 'the second request');
    const req2 = a.inbox.filter((m) => m.type === 'request')[1];
    if (req2?.type !== 'request') throw new Error('no request');
    // A rank that breaks the snapshot schema (an unsigned wildcard) is dropped, and leaves
    // nothing: the open request still expects rank 0, and takes the valid copy after it.
    const broken = structuredClone(rank);
    const op = broken.communicators[0]?.receives?.[0];
    if (!op) throw new Error('fixture');
    op.peer.local = 4294967295;
    a.socket.emit(WIRE_EVENT, encodeMessage({ type: 'chunk', id: req2.id, ranks: [broken] }));
    await waitFor(() => refusals(a).length === 4, 'the invalid rank dropped');
    expect(refusals(a)[3]?.error.message).toMatch(
      /ranks\[0\]\.communicators\[0\]\.receives\[0\]\.peer\.local/,
    );
    expect(got).toEqual([]);
    a.socket.emit(WIRE_EVENT, encodeMessage({ type: 'chunk', id: req2.id, ranks: [rank] }));
    a.socket.emit(
      WIRE_EVENT,
      encodeMessage({
        type: 'reply',
        id: req2.id,
        method: 'snapshot',
        ok: true,
        result: { count: 1, mpi: null, durationMicros: 5 },
      }),
    );
    const r2 = await pending;
    expect(r2.ok).toBe(true);
    expect(got).toEqual([0]);
    a.socket.disconnect();
    const r1 = await answer;
    expect(r1.ok).toBe(false);
    if (!r1.ok) expect(r1.error.code).toBe('MQD_E_AGENT_MISSING');
  });

  it('stores no snapshot data from a refused chunk: the rank is agent-missing', async () => {
    const s = await server({ snapshotTimeoutMs: 200 });
    const a = await connected(s, 'h');
    a.socket.on(WIRE_EVENT, (data: unknown) => {
      const m = decodeServerMessage(data, Number.MAX_SAFE_INTEGER);
      if (!m.ok || m.value.type !== 'request') return;
      if (m.value.method === 'locate') {
        a.socket.emit(
          WIRE_EVENT,
          encodeMessage({
            type: 'reply',
            id: m.value.id,
            method: 'locate',
            ok: true,
            result: {
              ranks: [{ rank: 0, pid: 100, host: 'h' }],
              method: 'test',
              uid: 0,
              command: 'mpirun',
              starterStartTime: '1',
            },
          }),
        );
      } else {
        const bad = { ...syntheticRingRank(0, 100, 'h', 1, 1, 0), extra: 'field' };
        a.socket.emit(WIRE_EVENT, encodeMessage({ type: 'chunk', id: m.value.id, ranks: [bad as never] }));
        a.socket.emit(
          WIRE_EVENT,
          encodeMessage({
            type: 'reply',
            id: m.value.id,
            method: 'snapshot',
            ok: true,
            result: { count: 1, mpi: null, durationMicros: 1 },
          }),
        );
      }
    });
    const res = await attachAndSnapshot(s);
    expect(json<{ snapshot: { ok: number; missing: number } }>(res).snapshot).toMatchObject({
      ok: 0,
      missing: 1,
    });
    expect(refusals(a)).toHaveLength(1);
  });
});

describe('the fan-in stores what it checked', () => {
  const rank = (r: number) => syntheticRingRank(r, 100 + r, 'h', 3, 1, 0);
  /** A job of ranks 0-2 on host h, whose raw agent answers a snapshot with `chunks(id)`; the stored text. */
  async function storedWith(chunks: (id: number) => Buffer[]): Promise<string> {
    const s = await server();
    const a = rawAgent(cleanup, s.url, hello('h'));
    await waitFor(() => a.inbox.some((m) => m.type === 'welcome'), 'welcome');
    a.socket.on(WIRE_EVENT, (data: unknown) => {
      const m = decodeServerMessage(data, Number.MAX_SAFE_INTEGER);
      if (!m.ok || m.value.type !== 'request') return;
      const id = m.value.id;
      const reply = (method: 'locate' | 'snapshot', result: unknown) =>
        a.socket.emit(WIRE_EVENT, encodeMessage({ type: 'reply', id, method, ok: true, result } as never));
      if (m.value.method === 'locate') {
        reply('locate', {
          ranks: [0, 1, 2].map((r) => ({ rank: r, pid: 100 + r, host: 'h' })),
          method: 'test',
          uid: 0,
          command: 'mpirun',
          starterStartTime: '1',
        });
        return;
      }
      for (const c of chunks(id)) a.socket.emit(WIRE_EVENT, c);
      reply('snapshot', { count: 3, mpi: null, durationMicros: 1 });
    });
    const res = await attachAndSnapshot(s);
    expect(res.statusCode, res.body).toBe(201);
    const text = await s.app.mqd.snapshots.json(json<{ snapshot: { id: string } }>(res).snapshot.id);
    if (text === null) throw new Error('not stored');
    return text;
  }
  const ranksOf = (text: string) => (JSON.parse(text) as { ranks: RankSnapshot[] }).ranks;

  it('a chunk whose bytes hold more than its ranks array is stored from its checked ranks', async () => {
    // Rank 0 as an agent sends it; ranks 1 and 2 behind a first "ranks" array the aggregator
    // never checks (JSON.parse keeps the last one). Stored as received, the snapshot's own ranks
    // array would end there, and its last "ranks" key would hold ranks 1 and 2 only.
    const text = await storedWith((id) => [
      encodeMessage({ type: 'chunk', id, ranks: [rank(0)] }),
      Buffer.from(
        `{"type":"chunk","id":${id},"ranks":[{"injected":1}],"ranks":[${JSON.stringify(rank(1))},${JSON.stringify(rank(2))}]}`,
      ),
    ]);
    expect(text).not.toContain('injected');
    expect(ranksOf(text)).toEqual([rank(0), rank(1), rank(2)]);
  });

  it('ranks kept as sent get their JSON again when a later chunk is out of order', async () => {
    // Rank 0 as sent (with spaces the stored text must not keep once the runs are given up), then
    // ranks 2 and 1 in the wrong order: no run, so the whole JSON is made at the end.
    const spaced = (id: number) =>
      Buffer.from(`{"type":"chunk","id":${id},"ranks":[ ${JSON.stringify(rank(0), null, 1)} ]}`);
    const outOfOrder = await storedWith((id) => [
      spaced(id),
      encodeMessage({ type: 'chunk', id, ranks: [rank(2), rank(1)] }),
    ]);
    expect(ranksOf(outOfOrder)).toEqual([rank(0), rank(1), rank(2)]);
    expect(outOfOrder).toBe(JSON.stringify(JSON.parse(outOfOrder)));
  });
});

describe('codec', () => {
  it('round-trips every message type and names the first bad field', () => {
    const rank = syntheticRingRank(3, 7, 'h', 8, 1, 0);
    const msgs = [
      { type: 'chunk', id: 1, ranks: [rank] },
      { type: 'alive', ids: [4, 9] },
      {
        type: 'reply',
        id: 2,
        method: 'snapshot',
        ok: true,
        result: { count: 1, mpi: null, durationMicros: 3 },
      },
      {
        type: 'reply',
        id: 3,
        method: 'locate',
        ok: false,
        error: { code: 'MQD_E_NOT_STARTER', message: 'no' },
      },
    ] as const;
    for (const m of msgs) {
      const r = decodeAgentMessage(encodeMessage(m as never), 1 << 20);
      // A chunk also carries its ranks' text as sent (tested below).
      const { ranksText: _, ...value } = (r.ok ? r.value : {}) as { ranksText?: Buffer };
      expect(value).toEqual(m);
    }
    const bad = decodeAgentMessage(
      Buffer.from(JSON.stringify({ type: 'reply', id: 0, method: 'snapshot', ok: true })),
      1 << 20,
    );
    expect(!bad.ok && bad.error.error.message).toMatch(/at id: expected an integer/);
    const alive = decodeAgentMessage(Buffer.from(JSON.stringify({ type: 'alive', ids: [3, 0] })), 1 << 20);
    expect(!alive.ok && alive.error.error.message).toMatch(/at ids\[1\]: expected an integer/);
    const extra = decodeServerMessage(
      encodeMessage({ type: 'request', id: 1, method: 'locate', params: { starterPid: 5, x: 1 } } as never),
      1 << 20,
    );
    expect(!extra.ok && extra.error.error.message).toMatch(/params\.x: unknown field/);
  });

  it("carries the hang watch's light read flag on a snapshot request and refuses a non-boolean", () => {
    const request = (light: unknown) =>
      decodeServerMessage(
        encodeMessage({
          type: 'request',
          id: 1,
          method: 'snapshot',
          params: { ranks: [{ rank: 0, pid: 100 }], timeoutMs: 1000, ownerUid: 1000, light },
        } as never),
        1 << 20,
      );
    const light = request(true);
    expect(light.ok && light.value.type === 'request' && light.value.params).toMatchObject({ light: true });
    const bad = request('yes');
    expect(!bad.ok && bad.error.error.message).toMatch(/params\.light: expected a boolean/);
  });

  it('carries a real MPICH ch4 rank: per-entry units and the DLL field gaps; refuses a made-up unit', () => {
    // A rank of the golden ch4 snapshot (real MPICH 4.0.2 ch4:ofi job): its unexpected entries
    // count bytes (Operation.lengthUnit) and its DLL needed renamed fields (dll.renamedFields).
    const golden = JSON.parse(
      readFileSync(
        new URL('../../../fixtures/golden/mpichch4/wrong_tag.snapshot.json', import.meta.url),
        'utf8',
      ),
    ) as { ranks: RankSnapshot[] };
    const first = golden.ranks[0];
    if (!first) throw new Error('golden has no rank 0');
    // The golden normaliser drops the DLL's field lists; a live ch4 rank carries these.
    const rank: RankSnapshot = {
      ...first,
      dll: {
        path: first.dll?.path ?? '/x/libtvmpich.so',
        version: first.dll?.version ?? '',
        renamedFields: [
          'MPIDIG_req_t.rank -> MPIDIG_req_t.u.recv.source',
          'MPIDI_Devreq_t.am -> MPIDI_Devreq_t.ch4.am',
        ],
        missingFields: ['MPIDIG_req_t.nothing'],
      },
    };
    const units = rank.communicators.flatMap((c) => (c.unexpected ?? []).map((o) => o.lengthUnit));
    expect(units.length).toBeGreaterThan(0);
    expect(units.every((u) => u === 'bytes')).toBe(true);
    expect(rank.dll?.renamedFields?.length ?? 0).toBeGreaterThan(0);
    const msg = { type: 'chunk', id: 1, ranks: [rank] } as const;
    const r = decodeAgentMessage(encodeMessage(msg as never), 1 << 22);
    expect(r.ok ? 'ok' : r.error.error.message).toBe('ok');
    const bent = structuredClone(rank);
    const op = bent.communicators.flatMap((c) => c.unexpected ?? [])[0];
    if (!op) throw new Error('no unexpected entry');
    (op as { lengthUnit: string }).lengthUnit = 'furlongs';
    const bad = decodeAgentMessage(
      encodeMessage({ type: 'chunk', id: 1, ranks: [rank, { ...bent, rank: 1 }] } as never),
      1 << 22,
    );
    // The bent rank is dropped, the other one kept.
    if (!bad.ok || bad.value.type !== 'chunk') throw new Error('the chunk was refused whole');
    expect(bad.value.ranks).toEqual([rank]);
    expect(bad.value.dropped).toEqual([
      { why: expect.stringMatching(/^ranks\[1\].*lengthUnit/), rank: 1, pid: rank.pid },
    ]);
  });

  it('locates by starter pid or by Slurm job id, never both, and only a well-formed id', () => {
    const decode = (params: object) =>
      decodeServerMessage(
        encodeMessage({ type: 'request', id: 1, method: 'locate', params } as never),
        1 << 20,
      );
    for (const params of [
      { slurmJob: '1234' },
      { slurmJob: '1234.0' },
      { slurmJob: '7.batch' },
      { starterPid: 9 },
    ]) {
      const r = decode(params);
      expect(r.ok && r.value).toEqual({ type: 'request', id: 1, method: 'locate', params });
    }
    for (const params of [{ slurmJob: '12;rm -rf /' }, { slurmJob: '' }, { slurmJob: '1.2.3' }, {}]) {
      const r = decode(params);
      expect(r.ok, JSON.stringify(params)).toBe(false);
    }
    const both = decode({ starterPid: 9, slurmJob: '12' });
    expect(!both.ok && both.error.error.message).toMatch(/exactly one of starterPid, slurmJob and coresDir/);
  });

  it('carries core jobs: a core directory to locate, core paths to read, the cores read in the reply', () => {
    const request = (method: string, params: object) =>
      decodeServerMessage(encodeMessage({ type: 'request', id: 1, method, params } as never), 1 << 20);
    const dir = request('locate', { coresDir: '/var/crash/job' });
    expect(dir.ok && dir.value).toEqual({
      type: 'request',
      id: 1,
      method: 'locate',
      params: { coresDir: '/var/crash/job' },
    });
    for (const coresDir of ['var/crash', '', '/', 'x'.repeat(5000)]) {
      expect(request('locate', { coresDir }).ok, coresDir.slice(0, 20)).toBe(false);
    }
    expect(request('locate', { coresDir: '/a', starterPid: 3 }).ok).toBe(false);
    const ranks = [{ rank: 0, pid: 7, core: '/var/crash/job/rank-0.core' }];
    const snap = request('snapshot', { ranks, timeoutMs: 100, ownerUid: 1000 });
    expect(snap.ok && snap.value.type === 'request' && snap.value.params).toMatchObject({ ranks });
    expect(
      request('snapshot', { ranks: [{ rank: 0, pid: 7, core: 'rank-0.core' }], timeoutMs: 100 }).ok,
    ).toBe(false);

    const reply = (result: object) =>
      decodeAgentMessage(
        encodeMessage({ type: 'reply', id: 2, method: 'snapshot', ok: true, result } as never),
        1 << 20,
      );
    const core = {
      rank: 0,
      path: '/var/crash/job/rank-0.core',
      pid: 7,
      signal: 6,
      executable: '/opt/ring',
      writtenAt: '2026-11-23T10:00:00.000Z',
    };
    const good = reply({ count: 1, mpi: null, durationMicros: 5, cores: [core] });
    expect(good.ok && good.value.type === 'reply' && good.value.ok && good.value.result).toMatchObject({
      cores: [core],
    });
    for (const bad of [
      { ...core, signal: -1 },
      { ...core, writtenAt: 'yesterday' },
      { ...core, extra: 1 },
    ]) {
      expect(reply({ count: 1, mpi: null, durationMicros: 5, cores: [bad] }).ok).toBe(false);
    }
  });

  it("keeps a chunk's ranks as the agent sent them only when those bytes are exactly the checked ranks", () => {
    const a = syntheticRingRank(0, 100, 'h', 2, 1, 0);
    const b = syntheticRingRank(1, 101, 'h', 2, 1, 0);
    const comm = b.communicators[0];
    if (comm === undefined) throw new Error('fixture');
    // Brackets, braces, commas, quotes and backslashes inside a string are not structure.
    comm.name = 'w\\"]},{"rank":9,"x":[\\';
    const A = JSON.stringify(a);
    const B = JSON.stringify(b);
    const chunk = (text: string | Buffer) => {
      const r = decodeAgentMessage(typeof text === 'string' ? Buffer.from(text) : text, 1 << 20);
      if (!r.ok || r.value.type !== 'chunk') throw new Error(`not a chunk: ${JSON.stringify(r)}`);
      return r.value;
    };
    // As chunkMessages lays it out: the text is the two ranks' JSON, a comma between.
    const [sent] = [...chunkMessages(5, [a, b], 'h', 1 << 20)];
    if (sent === undefined) throw new Error('no chunk');
    const m = chunk(sent);
    expect(m.ranks).toEqual([a, b]);
    expect(m.ranksText?.toString()).toBe(`${A},${B}`);
    // Whitespace between and inside the elements is kept as sent; it is still exactly a and b.
    const spaced = chunk(`{"type":"chunk","id":5,"ranks":[ ${A} ,\n${JSON.stringify(b, null, 1)} ]}`);
    expect(JSON.parse(`[${spaced.ranksText}]`)).toEqual([a, b]);
    // "ranks" twice: JSON.parse keeps the last array, but the bytes after the prefix hold the first
    // as well. Storing them would put unchecked JSON, and a second "ranks" key, into the snapshot.
    for (const hostile of [
      `{"type":"chunk","id":5,"ranks":[{"injected":1}],"ranks":[${A},${B}]}`,
      `{"type":"chunk","id":5,"ranks":[{"injected":1}],"id":5,"ranks":[${A},${B}]}`,
    ]) {
      const h = chunk(hostile);
      expect(h.ranks).toEqual([a, b]);
      expect(h.ranksText).toBeUndefined();
    }
    // Any other layout (key order, the id written otherwise, a space before the end): the ranks
    // are taken, and their JSON made again.
    for (const other of [
      `{"id":5,"type":"chunk","ranks":[${A}]}`,
      `{"type":"chunk","id":5.0,"ranks":[${A}]}`,
      `{"type":"chunk","id":5,"ranks":[${A}] }`,
    ]) {
      const o = chunk(other);
      expect(o.ranks).toEqual([a]);
      expect(o.ranksText).toBeUndefined();
    }
    // A rank the spec refuses is dropped, and none of the chunk's text is kept.
    const dropped = chunk(`{"type":"chunk","id":5,"ranks":[${A},${JSON.stringify({ ...b, extra: 1 })}]}`);
    expect(dropped.ranks).toEqual([a]);
    expect(dropped.dropped).toHaveLength(1);
    expect(dropped.ranksText).toBeUndefined();
  });

  it('splits an answer into chunks that each fit the message limit', () => {
    const ranks = Array.from({ length: 40 }, (_, i) => syntheticRingRank(i, 100 + i, 'h', 40, 1, 0));
    const limit = 8192;
    const chunks = [...chunkMessages(5, ranks, 'h', limit)];
    expect(chunks.length).toBeGreaterThan(1);
    const back = chunks.flatMap((c) => {
      expect(c.byteLength).toBeLessThanOrEqual(limit);
      const m = decodeAgentMessage(c, limit);
      if (!m.ok || m.value.type !== 'chunk') throw new Error('bad chunk');
      return m.value.ranks;
    });
    expect(back).toEqual(ranks);
    // A rank bigger than the limit on its own becomes an error rank instead of a refused chunk.
    const [only] = [...chunkMessages(6, ranks.slice(0, 1), 'h', 600)];
    const m = decodeAgentMessage(only, 600);
    expect(m.ok && m.value.type === 'chunk' && m.value.ranks[0]?.state).toMatchObject({
      kind: 'error',
      code: 'MQD_E_READ_BUDGET',
    });
  });
});
