// Every shape the agent protocol refuses, one line each: a valid message, then one field bent.
// The decoders must refuse the whole message (or, where the protocol drops an entry alone,
// drop exactly that entry and keep the rest), and accept the valid message as it was sent.
import { describe, expect, it } from 'vitest';
import { MAX_RANKS_PER_REQUEST } from '../src/protocol/agent-protocol.js';
import {
  decodeAgentMessage,
  decodeServerMessage,
  parseHandshake,
} from '../src/protocol/agent-protocol-decode.js';

// Big enough for a list one over its cap: a refusal here is for the shape, never the size.
const MAX = 1 << 26;
const bytes = (m: unknown) => Buffer.from(JSON.stringify(m));
const long = (n: number, c = 'x') => c.repeat(n);
type Patch = Record<string, unknown>;
/** `base` with `path` (dot-separated, digits index arrays) set to `value`; undefined deletes it. */
function bent(base: unknown, path: string, value: unknown): unknown {
  const copy = structuredClone(base) as Record<string, unknown>;
  const keys = path.split('.');
  let at: Record<string, unknown> = copy;
  for (const k of keys.slice(0, -1)) at = at[k] as Record<string, unknown>;
  const last = keys[keys.length - 1] as string;
  if (value === undefined) delete at[last];
  else at[last] = value;
  return copy;
}

const wireError = { code: 'MQD_E_X', message: 'm' };
const welcome = {
  type: 'welcome',
  protocol: 3,
  agentId: 'agent-1',
  maxMessageBytes: 8192,
  statusIntervalMs: 1000,
  keepaliveMs: 2000,
};
const snapshotRequest = {
  type: 'request',
  id: 1,
  method: 'snapshot',
  params: {
    ranks: [{ rank: 0, pid: 100, startTime: '123', core: '/c/r0' }],
    timeoutMs: 1000,
    ownerUid: 1000,
    allowRoot: false,
    light: true,
  },
};
const pinned = [{ rank: 0, pid: 100, startTime: '5' }];
const countersRequest = {
  type: 'request',
  id: 2,
  method: 'counters',
  params: { ranks: pinned, ownerUid: 7 },
};
const captureRequest = {
  type: 'request',
  id: 3,
  method: 'capture',
  params: { ranks: pinned, ownerUid: 7, name: 'hang-1' },
};
const locateRequest = { type: 'request', id: 4, method: 'locate', params: { starterPid: 9 } };
const refused = { type: 'refused', refId: 5, error: wireError };

const health = {
  rssBytes: 1,
  heapUsedBytes: 2,
  uptimeSeconds: 3.5,
  loadAverage1m: 0.25,
  activeRequests: 0,
  lastError: null,
};
const mpi = { library: 'openmpi', dll: '/x/libompi_dbg_msgq.so', lengthUnit: 'bytes' };
const starter = { starterPid: 40, uid: 1000, command: 'mpirun -n 2 ./a', startTime: '77' };
const discovered = {
  key: 'slurm:4711',
  kind: 'slurm',
  slurmJob: '4711',
  uid: 1000,
  command: 'srun ./a',
  startedAt: 1_700_000_000_000,
  jobName: 'ring',
  partition: 'p',
  account: 'a',
  worldSize: 2,
  watch: 'on',
  ranks: [{ rank: 0, pid: 101, startTime: '9' }],
};
const status = {
  type: 'status',
  health,
  mpi,
  jobs: [starter],
  discovered: [discovered],
  discoveryScan: { complete: true, omitted: [] },
};
const core = {
  rank: 0,
  path: '/c/r0',
  pid: 7,
  signal: 6,
  executable: '/opt/a',
  writtenAt: '2026-11-23T10:00:00.000Z',
};
const snapshotReply = {
  type: 'reply',
  id: 1,
  method: 'snapshot',
  ok: true,
  result: { count: 1, mpi, durationMicros: 5, cores: [core] },
};
const locateReply = {
  type: 'reply',
  id: 4,
  method: 'locate',
  ok: true,
  result: {
    ranks: [{ rank: 0, pid: 100, host: 'n0', startTime: '1', core: '/c/r0' }],
    method: 'mpir-proctable',
    uid: 1000,
    command: 'mpirun ./a',
    starterStartTime: '12',
    starterPid: 40,
    coresDir: '/c',
    otherNodes: ['n1'],
  },
};
const countersReply = {
  type: 'reply',
  id: 2,
  method: 'counters',
  ok: true,
  result: {
    ranks: [{ rank: 0, cpuTicks: 1, switches: 2, state: 'R' }],
    errors: [{ rank: 1, error: wireError }],
    clockTicksPerSecond: 100,
    at: 1_700_000_000_000,
  },
};
const captureReply = {
  type: 'reply',
  id: 3,
  method: 'capture',
  ok: true,
  result: {
    dir: '/c/hang-1',
    ranks: [
      { rank: 0, pid: 100, core: 'rank-0.core', bytes: 10, pausedMicros: 3, error: null },
      { rank: 1, pid: 101, core: null, bytes: 0, pausedMicros: 0, error: wireError },
    ],
  },
};
const failedReply = { type: 'reply', id: 1, method: 'locate', ok: false, error: wireError };
const chunk = { type: 'chunk', id: 1, ranks: [] };
const alive = { type: 'alive', ids: [1, 2] };
const handshake = { token: 't', protocol: 3, agentId: 'a:1', host: 'n0', version: '1.0' };

/** [message, path, bent value]; undefined deletes the field. */
type Case = readonly [unknown, string, unknown];

const serverRefused: Case[] = [
  [welcome, 'type', 'hello'],
  [welcome, 'protocol', -1],
  [welcome, 'protocol', 1.5],
  [welcome, 'protocol', 2 ** 31],
  [welcome, 'agentId', ''],
  [welcome, 'agentId', 'a b'],
  [welcome, 'agentId', long(65)],
  [welcome, 'maxMessageBytes', 1023],
  [welcome, 'statusIntervalMs', 9],
  [welcome, 'keepaliveMs', 9],
  [welcome, 'keepaliveMs', undefined],
  [welcome, 'extra', 1],
  [snapshotRequest, 'id', 0],
  [snapshotRequest, 'id', 2 ** 31],
  [snapshotRequest, 'id', '1'],
  [snapshotRequest, 'method', 'read'],
  [snapshotRequest, 'extra', 1],
  [snapshotRequest, 'params', null],
  [snapshotRequest, 'params.ranks', {}],
  [snapshotRequest, 'params.ranks.0.rank', -1],
  [snapshotRequest, 'params.ranks.0.rank', 2 ** 31],
  [snapshotRequest, 'params.ranks.0.pid', 0],
  [snapshotRequest, 'params.ranks.0.pid', 2 ** 30 + 1],
  [snapshotRequest, 'params.ranks.0.startTime', ''],
  [snapshotRequest, 'params.ranks.0.startTime', '12a'],
  [snapshotRequest, 'params.ranks.0.startTime', long(21, '1')],
  [snapshotRequest, 'params.ranks.0.core', 'rel/path'],
  [snapshotRequest, 'params.ranks.0.core', '/'],
  [snapshotRequest, 'params.ranks.0.core', '/a\u0000b'],
  [snapshotRequest, 'params.ranks.0.core', `/${long(4096)}`],
  [snapshotRequest, 'params.ranks.0.extra', 1],
  [
    snapshotRequest,
    'params.ranks',
    Array.from({ length: MAX_RANKS_PER_REQUEST + 1 }, (_, i) => ({ rank: i, pid: 1 })),
  ],
  [snapshotRequest, 'params.timeoutMs', 0],
  [snapshotRequest, 'params.timeoutMs', undefined],
  [snapshotRequest, 'params.ownerUid', -1],
  [snapshotRequest, 'params.ownerUid', 2 ** 32],
  [snapshotRequest, 'params.allowRoot', 'yes'],
  [snapshotRequest, 'params.light', 1],
  [snapshotRequest, 'params.extra', 1],
  [locateRequest, 'params', {}],
  [locateRequest, 'params.starterPid', 0],
  [locateRequest, 'params.slurmJob', '12'],
  [locateRequest, 'params', { slurmJob: long(33, '1') }],
  [locateRequest, 'params', { coresDir: 'rel' }],
  [locateRequest, 'params', { coresDir: '/a', slurmJob: '1' }],
  [countersRequest, 'params.ranks.0.startTime', undefined],
  [countersRequest, 'params.ranks', [...pinned, { rank: 0, pid: 101, startTime: '6' }]],
  [countersRequest, 'params.ownerUid', undefined],
  [countersRequest, 'params.ownerUid', 2 ** 32],
  [countersRequest, 'params.extra', 1],
  [captureRequest, 'params.name', ''],
  [captureRequest, 'params.name', '.hidden'],
  [captureRequest, 'params.name', 'a/b'],
  [captureRequest, 'params.name', long(201)],
  [captureRequest, 'params.name', undefined],
  [captureRequest, 'params.ranks', [...pinned, ...pinned]],
  [refused, 'refId', 0],
  [refused, 'refId', undefined],
  [refused, 'error.code', ''],
  [refused, 'error.code', long(65)],
  [refused, 'error.message', long(4097)],
  [refused, 'error.extra', 1],
  [refused, 'error', null],
];

const agentRefused: Case[] = [
  [status, 'type', 'state'],
  [status, 'extra', 1],
  [status, 'health', null],
  [status, 'health.rssBytes', -1],
  [status, 'health.heapUsedBytes', '1'],
  [status, 'health.uptimeSeconds', undefined],
  [status, 'health.activeRequests', 1.5],
  [status, 'health.lastError', { code: '', message: 'm' }],
  [status, 'health.extra', 1],
  [status, 'mpi.library', 'lam'],
  [status, 'mpi.dll', long(4097)],
  [status, 'mpi.lengthUnit', 'bits'],
  [status, 'mpi.extra', 1],
  [status, 'jobs', Array.from({ length: 1025 }, () => starter)],
  [status, 'jobs', undefined],
  [status, 'discovered', undefined],
  [status, 'discovered', Array.from({ length: 1025 }, () => discovered)],
  [chunk, 'id', 0],
  [chunk, 'ranks', {}],
  [chunk, 'ranks', undefined],
  [chunk, 'extra', 1],
  [alive, 'ids', [1, 0]],
  [alive, 'ids', Array.from({ length: 4097 }, (_, i) => i + 1)],
  [alive, 'extra', 1],
  [snapshotReply, 'id', 0],
  [snapshotReply, 'method', 'read'],
  [snapshotReply, 'ok', 'yes'],
  [snapshotReply, 'error', wireError],
  [snapshotReply, 'result', undefined],
  [snapshotReply, 'result.count', -1],
  [snapshotReply, 'result.count', MAX_RANKS_PER_REQUEST + 1],
  [snapshotReply, 'result.durationMicros', 1.5],
  [snapshotReply, 'result.mpi', undefined],
  [snapshotReply, 'result.extra', 1],
  [snapshotReply, 'result.cores.0.rank', 2 ** 31],
  [snapshotReply, 'result.cores.0.pid', 0],
  [snapshotReply, 'result.cores.0.signal', 256],
  [snapshotReply, 'result.cores.0.path', long(4097)],
  [snapshotReply, 'result.cores.0.writtenAt', 'yesterday'],
  [snapshotReply, 'result.cores.0.writtenAt', '2026-11-23T10:00:00+01:00'],
  [snapshotReply, 'result.cores.0.extra', 1],
  [failedReply, 'result', {}],
  [failedReply, 'error', undefined],
  [failedReply, 'error.message', 7],
  [locateReply, 'result.ranks.0.host', ''],
  [locateReply, 'result.ranks.0.host', long(256)],
  [locateReply, 'result.ranks.0.core', 'rel'],
  [locateReply, 'result.ranks', [locateReply.result.ranks[0], locateReply.result.ranks[0]]],
  [locateReply, 'result.method', ''],
  [locateReply, 'result.method', long(65)],
  [locateReply, 'result.uid', 2 ** 32],
  [locateReply, 'result.command', long(4097)],
  [locateReply, 'result.starterStartTime', undefined],
  [locateReply, 'result.starterPid', 0],
  [locateReply, 'result.coresDir', 'c'],
  [locateReply, 'result.otherNodes', ['']],
  [locateReply, 'result.extra', 1],
  [countersReply, 'result.ranks.0.cpuTicks', -1],
  [countersReply, 'result.ranks.0.switches', 0.5],
  [countersReply, 'result.ranks.0.state', 'RR'],
  [countersReply, 'result.ranks.0.state', '1'],
  [countersReply, 'result.errors.0.rank', 0],
  [countersReply, 'result.errors.0.error', null],
  [countersReply, 'result.clockTicksPerSecond', 0],
  [countersReply, 'result.clockTicksPerSecond', 1_000_001],
  [countersReply, 'result.at', -1],
  [countersReply, 'result.extra', 1],
  [captureReply, 'result.dir', 'rel'],
  [captureReply, 'result.ranks.0.core', '../x'],
  [captureReply, 'result.ranks.0.core', ''],
  [captureReply, 'result.ranks.0.core', null],
  [captureReply, 'result.ranks.1.error', null],
  [captureReply, 'result.ranks.0.error', wireError],
  [captureReply, 'result.ranks.1.rank', 0],
  [captureReply, 'result.ranks.0.bytes', -1],
  [captureReply, 'result.ranks.0.pausedMicros', 1.5],
  [captureReply, 'result.ranks.0.extra', 1],
];

/** Status entries the protocol drops alone: [path, value, the dropped entry's path]. */
const statusDropped: readonly (readonly [string, unknown, string])[] = [
  ['jobs.0.starterPid', 0, 'jobs[0].starterPid'],
  ['jobs.0.uid', -1, 'jobs[0].uid'],
  ['jobs.0.command', long(4097), 'jobs[0].command'],
  ['jobs.0.startTime', 'x', 'jobs[0].startTime'],
  ['jobs.0.extra', 1, 'jobs[0].extra'],
  ['discovered.0.kind', 'pbs', 'discovered[0].kind'],
  ['discovered.0.key', 'slurm:1', 'discovered[0].key'],
  ['discovered.0.key', long(321), 'discovered[0].key'],
  ['discovered.0.starterPid', 5, 'discovered[0].starterPid'],
  ['discovered.0.slurmJob', undefined, 'discovered[0].key'],
  ['discovered.0.startedAt', -1, 'discovered[0].startedAt'],
  ['discovered.0.partition', long(129), 'discovered[0].partition'],
  ['discovered.0.account', 5, 'discovered[0].account'],
  ['discovered.0.worldSize', 0, 'discovered[0].worldSize'],
  ['discovered.0.worldSize', 2 ** 31 + 1, 'discovered[0].worldSize'],
  ['discovered.0.ranks.0.pid', 0, 'discovered[0].ranks[0].pid'],
  [
    'discovered.0.ranks',
    Array.from({ length: MAX_RANKS_PER_REQUEST + 1 }, (_, i) => ({ rank: i, pid: 1, startTime: '1' })),
    'discovered[0].ranks',
  ],
  ['discoveryScan.complete', 'yes', 'discoveryScan.complete'],
  ['discoveryScan.omitted', [{ uid: 1, jobs: 0 }], 'discoveryScan.omitted[0].jobs'],
  [
    'discoveryScan.omitted',
    [
      { uid: 1, jobs: 1 },
      { uid: 1, jobs: 2 },
    ],
    'discoveryScan.omitted[1].uid',
  ],
  [
    'discoveryScan.omitted',
    Array.from({ length: 1025 }, (_, i) => ({ uid: i, jobs: 1 })),
    'discoveryScan.omitted',
  ],
  ['discoveryScan.extra', 1, 'discoveryScan.extra'],
];

const starterDiscovered = {
  key: 'starter:n0:40:77',
  kind: 'starter',
  starterPid: 40,
  starterStartTime: '77',
  uid: 1000,
  command: 'mpirun ./a',
  startedAt: 1,
  watch: 'off',
  ranks: pinned,
};
const starterDropped: readonly (readonly [string, unknown])[] = [
  ['key', 'starter:n0:41:77'],
  ['key', 'starter:n0:40:78'],
  ['key', `starter:${long(256)}:40:77`],
  ['key', 'slurm:40'],
  ['slurmJob', '4'],
  ['starterStartTime', undefined],
  ['starterPid', undefined],
];

describe('the agent protocol refuses each malformed shape', () => {
  it('accepts each valid message as sent', () => {
    for (const m of [welcome, snapshotRequest, countersRequest, captureRequest, locateRequest, refused]) {
      const r = decodeServerMessage(bytes(m), MAX);
      expect(r.ok && r.value, JSON.stringify(r)).toEqual(m);
    }
    for (const m of [
      status,
      chunk,
      alive,
      snapshotReply,
      locateReply,
      countersReply,
      captureReply,
      failedReply,
    ]) {
      const r = decodeAgentMessage(bytes(m), MAX);
      const { ranksText: _, ...value } = (r.ok ? r.value : {}) as { ranksText?: Buffer };
      expect(value, JSON.stringify(r)).toEqual(m);
    }
    const starterStatus = { ...status, discovered: [starterDiscovered] };
    expect(decodeAgentMessage(bytes(starterStatus), MAX)).toEqual({ ok: true, value: starterStatus });
    expect(parseHandshake(handshake)).toEqual({ ok: true, value: handshake });
  });

  it('refuses every bent aggregator message with MQD_E_BAD_INPUT', () => {
    for (const [m, path, v] of serverRefused) {
      const r = decodeServerMessage(bytes(bent(m, path, v)), MAX);
      expect(r.ok, `${(m as { type: string }).type} ${path}`).toBe(false);
      if (!r.ok) expect(r.error.error.code).toBe('MQD_E_BAD_INPUT');
    }
  });

  it('refuses every bent agent message with MQD_E_BAD_INPUT, naming the request when it can', () => {
    for (const [m, path, v] of agentRefused) {
      const r = decodeAgentMessage(bytes(bent(m, path, v)), MAX);
      expect(r.ok, `${(m as { type: string }).type} ${path}`).toBe(false);
      if (!r.ok) expect(r.error.error.code).toBe('MQD_E_BAD_INPUT');
    }
    const late = decodeAgentMessage(bytes(bent(countersReply, 'result.at', -1)), MAX);
    expect(!late.ok && late.error.refId).toBe(2);
    const noId = decodeAgentMessage(bytes(bent(countersReply, 'id', -2)), MAX);
    expect(!noId.ok && noId.error.refId).toBe(null);
    for (const raw of ['[]', 'null', '7', '"status"', '{', '{"type":"status"']) {
      expect(decodeAgentMessage(Buffer.from(raw), MAX).ok, raw).toBe(false);
      expect(decodeServerMessage(Buffer.from(raw), MAX).ok, raw).toBe(false);
    }
  });

  it("drops a status's malformed entry alone and says where", () => {
    for (const [path, v, where] of statusDropped) {
      const r = decodeAgentMessage(bytes(bent(status, path, v)), MAX);
      if (!r.ok || r.value.type !== 'status') throw new Error(`${path}: refused whole`);
      expect(
        r.value.dropped?.map((d) => d.why.replace(/: .*/s, '')),
        path,
      ).toEqual([where]);
      if (path.startsWith('jobs')) expect(r.value.jobs).toEqual([]);
      if (path.startsWith('discovered')) expect(r.value.discovered).toEqual([]);
      // A status that lost an entry of its scan or its list is incomplete.
      if (!path.startsWith('jobs')) expect(r.value.discoveryScan).toEqual({ complete: false, omitted: [] });
    }
    for (const [path, v] of starterDropped) {
      const r = decodeAgentMessage(bytes({ ...status, discovered: [bent(starterDiscovered, path, v)] }), MAX);
      if (!r.ok || r.value.type !== 'status') throw new Error(`${path}: refused whole`);
      expect(r.value.discovered, path).toEqual([]);
      expect(r.value.dropped, path).toHaveLength(1);
    }
  });

  it('refuses every bent handshake', () => {
    const cases: readonly (readonly [string, unknown])[] = [
      ['token', long(513)],
      ['token', 5],
      ['protocol', -1],
      ['protocol', '3'],
      ['agentId', ''],
      ['agentId', 'a/b'],
      ['agentId', long(65)],
      ['host', ''],
      ['host', long(256)],
      ['version', long(65)],
      ['version', undefined],
      ['extra', 1],
    ];
    for (const [path, v] of cases) {
      const r = parseHandshake(bent(handshake, path, v) as Patch);
      expect(r.ok, path).toBe(false);
      if (!r.ok) expect(r.error.message, path).toContain(`auth.${path}`);
    }
    expect(parseHandshake(null).ok).toBe(false);
  });
});
