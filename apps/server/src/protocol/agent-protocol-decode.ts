// The agent protocol's decoders (the messages and their limits are in agent-protocol.ts):
// validation at the edge, both ends.
//
// Hand-written guards: the envelopes are small, and a guard names the path of the first bad
// field. Each guard's field list is a record over its type's keys (`fields<T>`), so a field
// added to a message fails to compile until its guard reads it, as the reader's wire columns
// do (packages/mqd-core/src/reader/wire.ts). Limits of the spec's fields come from the snapshot
// spec (its MAX_*_CHARS constants, or its schema's own bounds and enumerations), never a second
// copy here. Ranks are checked by the spec's own validator (checkRanks, below).
import {
  type CoreFileSource,
  CoreFileSource as CoreFileSourceSpec,
  checkRank,
  type DiscoveredJob,
  type DiscoveredRank,
  type DiscoveryOmitted,
  ensureExists,
  err,
  LengthUnit,
  MAX_CODE_CHARS,
  MAX_CORES_DIR_CHARS,
  MAX_HOST_CHARS,
  MAX_MESSAGE_CHARS,
  MAX_PATH_CHARS,
  MpiLibrary,
  mqdError,
  ok,
  type RankCounters,
  type RankSnapshot,
  RankSnapshot as RankSnapshotSpec,
  type Result,
  SLURM_JOB_RE,
} from '@mqd/model';
import type {
  CapturedRank,
  CaptureParams,
  CaptureResult,
  CounterError,
  CountersParams,
  CountersResult,
  LocatedJob,
  LocatedRank,
  MpiInfo,
  RankTarget,
  SeenStarter,
} from '../shared/seams.js';
import {
  type AgentHandshake,
  type AgentHealth,
  type AgentMessage,
  CAPTURE_NAME_RE,
  type DecodedAgentMessage,
  type DiscoveryScanInfo,
  type Dropped,
  type DroppedEntry,
  type LocateTarget,
  MAX_ALIVE_IDS,
  MAX_COMMAND_CHARS,
  MAX_DISCOVERED_JOBS,
  MAX_DISCOVERED_KEY_CHARS,
  MAX_DISCOVERY_OMITTED,
  MAX_METHOD_CHARS,
  MAX_OTHER_NODES,
  MAX_RANKS_PER_REQUEST,
  MAX_REQUEST_ID,
  MAX_SEEN_JOBS,
  MAX_SLURM_NAME_CHARS,
  type Refusal,
  type ReplyMessage,
  type ServerMessage,
  type SnapshotParams,
  type SnapshotResult,
  type WireError,
} from './agent-protocol.js';

/** Every key of every variant of a union (keyof a union is only the keys all variants share). */
type AllKeys<T> = T extends unknown ? keyof T : never;
/**
 * The fields an object of type T may have: written as a record over T's keys, so a field
 * missing here (or one T does not have) is a compile error.
 */
const fields = <T>(f: Record<AllKeys<T>, true>): readonly string[] => Object.keys(f);

// Bounds the snapshot spec owns, read from its schema so there is one number.
/** The largest rank number (RankSnapshot.rank). */
const MAX_RANK = ensureExists(RankSnapshotSpec.properties.rank.maximum, 'RankSnapshot.rank.maximum');
/** CoreFileSource.writtenAt, an ISO 8601 time. */
const MAX_WRITTEN_AT_CHARS = ensureExists(
  CoreFileSourceSpec.properties.writtenAt.maxLength,
  'CoreFileSource.writtenAt.maxLength',
);
const LIBRARIES = MpiLibrary.anyOf.map((l) => l.const);
const LENGTH_UNITS = LengthUnit.anyOf.map((l) => l.const);

class Invalid extends Error {}
type Obj = Record<string, unknown>;

function fail(path: string, what: string): never {
  throw new Invalid(`${path}: ${what}`);
}
function obj(v: unknown, path: string, keys: readonly string[]): Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) fail(path, 'expected an object');
  for (const k of Object.keys(v)) if (!keys.includes(k)) fail(`${path}.${k}`, 'unknown field');
  return v as Obj;
}
function int(v: unknown, path: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    fail(path, `expected an integer in [${min}, ${max}]`);
  }
  return v;
}
function num(v: unknown, path: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) fail(path, 'expected a finite number >= 0');
  return v;
}
function str(v: unknown, path: string, max: number, min = 0, re?: RegExp): string {
  if (typeof v !== 'string' || v.length < min || v.length > max) {
    fail(path, `expected a string of ${min}..${max} characters`);
  }
  if (re && !re.test(v)) fail(path, `does not match ${re.source}`);
  return v;
}
function arr(v: unknown, path: string, max: number): unknown[] {
  if (!Array.isArray(v)) fail(path, 'expected an array');
  if (v.length > max) fail(path, `more than ${max} items`);
  return v;
}
function oneOf<T extends string>(v: unknown, path: string, options: readonly T[]): T {
  if (typeof v !== 'string' || !(options as readonly string[]).includes(v)) {
    fail(path, `expected one of ${options.join(', ')}`);
  }
  return v as T;
}
const reqId = (v: unknown, path: string) => int(v, path, 1, MAX_REQUEST_ID);
const rankNo = (v: unknown, path: string) => int(v, path, 0, MAX_RANK);
const pidNo = (v: unknown, path: string) => int(v, path, 1, 0x3fffffff);
const AGENT_ID_RE = /^[A-Za-z0-9._:-]+$/;

const WIRE_ERROR_FIELDS = fields<WireError>({ code: true, message: true });
const MPI_INFO_FIELDS = fields<MpiInfo>({ library: true, dll: true, lengthUnit: true });
const RANK_TARGET_FIELDS = fields<RankTarget>({ rank: true, pid: true, startTime: true, core: true });
const CORE_SOURCE_FIELDS = fields<CoreFileSource>({
  rank: true,
  path: true,
  pid: true,
  signal: true,
  executable: true,
  writtenAt: true,
});
const LOCATED_JOB_FIELDS = fields<LocatedJob>({
  ranks: true,
  method: true,
  uid: true,
  command: true,
  starterStartTime: true,
  starterPid: true,
  coresDir: true,
  otherNodes: true,
});
const LOCATED_RANK_FIELDS = fields<LocatedRank>({
  rank: true,
  pid: true,
  host: true,
  startTime: true,
  core: true,
});
const SEEN_STARTER_FIELDS = fields<SeenStarter>({
  starterPid: true,
  uid: true,
  command: true,
  startTime: true,
});
const HEALTH_FIELDS = fields<AgentHealth>({
  rssBytes: true,
  heapUsedBytes: true,
  uptimeSeconds: true,
  loadAverage1m: true,
  activeRequests: true,
  lastError: true,
});
const REPLY_FIELDS = fields<ReplyMessage>({
  type: true,
  id: true,
  method: true,
  ok: true,
  result: true,
  error: true,
});
const SNAPSHOT_RESULT_FIELDS = fields<SnapshotResult>({
  count: true,
  mpi: true,
  durationMicros: true,
  cores: true,
});
const WELCOME_FIELDS = fields<Extract<ServerMessage, { type: 'welcome' }>>({
  type: true,
  protocol: true,
  agentId: true,
  maxMessageBytes: true,
  statusIntervalMs: true,
  keepaliveMs: true,
});
const LOCATE_FIELDS = fields<LocateTarget>({ starterPid: true, slurmJob: true, coresDir: true });
const SNAPSHOT_PARAMS_FIELDS = fields<SnapshotParams>({
  ranks: true,
  timeoutMs: true,
  ownerUid: true,
  allowRoot: true,
  light: true,
});
const DISCOVERED_JOB_FIELDS = fields<DiscoveredJob>({
  key: true,
  kind: true,
  slurmJob: true,
  starterPid: true,
  starterStartTime: true,
  uid: true,
  command: true,
  startedAt: true,
  jobName: true,
  partition: true,
  account: true,
  worldSize: true,
  watch: true,
  ranks: true,
});
const DISCOVERED_RANK_FIELDS = fields<DiscoveredRank>({ rank: true, pid: true, startTime: true });
const COUNTERS_PARAMS_FIELDS = fields<CountersParams>({ ranks: true, ownerUid: true });
const COUNTERS_RESULT_FIELDS = fields<CountersResult>({
  ranks: true,
  errors: true,
  clockTicksPerSecond: true,
  at: true,
});
const RANK_COUNTERS_FIELDS = fields<RankCounters>({
  rank: true,
  cpuTicks: true,
  switches: true,
  state: true,
});
const COUNTER_ERROR_FIELDS = fields<CounterError>({ rank: true, error: true });
const CAPTURE_PARAMS_FIELDS = fields<CaptureParams>({ ranks: true, ownerUid: true, name: true });
const CAPTURE_RESULT_FIELDS = fields<CaptureResult>({ dir: true, ranks: true });
const CAPTURED_RANK_FIELDS = fields<CapturedRank>({
  rank: true,
  pid: true,
  core: true,
  bytes: true,
  pausedMicros: true,
  error: true,
});
const HANDSHAKE_FIELDS = fields<AgentHandshake>({
  token: true,
  protocol: true,
  agentId: true,
  host: true,
  version: true,
});

function wireError(v: unknown, path: string): WireError {
  const o = obj(v, path, WIRE_ERROR_FIELDS);
  return {
    code: str(o['code'], `${path}.code`, MAX_CODE_CHARS, 1),
    message: str(o['message'], `${path}.message`, MAX_MESSAGE_CHARS),
  };
}
function mpiInfo(v: unknown, path: string): MpiInfo | null {
  if (v === null) return null;
  const o = obj(v, path, MPI_INFO_FIELDS);
  return {
    library: oneOf(o['library'], `${path}.library`, LIBRARIES),
    dll: o['dll'] === null ? null : str(o['dll'], `${path}.dll`, MAX_PATH_CHARS),
    lengthUnit: oneOf(o['lengthUnit'], `${path}.lengthUnit`, LENGTH_UNITS),
  };
}
function rankTargets(v: unknown, path: string): RankTarget[] {
  return arr(v, path, MAX_RANKS_PER_REQUEST).map((x, i) => {
    const o = obj(x, `${path}[${i}]`, RANK_TARGET_FIELDS);
    const t = { rank: rankNo(o['rank'], `${path}[${i}].rank`), pid: pidNo(o['pid'], `${path}[${i}].pid`) };
    return {
      ...t,
      ...(o['startTime'] === undefined
        ? {}
        : { startTime: startTime(o['startTime'], `${path}[${i}].startTime`) }),
      ...(o['core'] === undefined ? {} : { core: corePath(o['core'], `${path}[${i}].core`) }),
    };
  });
}
/** /proc/PID/stat start time: decimal clock ticks since boot. */
const startTime = (v: unknown, path: string) => str(v, path, 20, 1, /^[0-9]+$/);
/** An absolute path on the agent's node (a core file or a directory of them). */
const corePath = (v: unknown, path: string) => str(v, path, MAX_CORES_DIR_CHARS, 2, /^\/[^\0]*$/);
const ISO_RE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
function coreSources(v: unknown, path: string): CoreFileSource[] {
  return arr(v, path, MAX_RANKS_PER_REQUEST).map((x, i) => {
    const p = `${path}[${i}]`;
    const o = obj(x, p, CORE_SOURCE_FIELDS);
    return {
      rank: rankNo(o['rank'], `${p}.rank`),
      path: str(o['path'], `${p}.path`, MAX_PATH_CHARS),
      pid: int(o['pid'], `${p}.pid`, 1, Number.MAX_SAFE_INTEGER),
      signal: int(o['signal'], `${p}.signal`, 0, 255),
      executable: str(o['executable'], `${p}.executable`, MAX_PATH_CHARS),
      writtenAt: str(o['writtenAt'], `${p}.writtenAt`, MAX_WRITTEN_AT_CHARS, 20, ISO_RE),
    };
  });
}
function locatedJob(v: unknown, path: string): LocatedJob {
  const o = obj(v, path, LOCATED_JOB_FIELDS);
  const ranks = arr(o['ranks'], `${path}.ranks`, MAX_RANKS_PER_REQUEST).map((x, i) => {
    const p = `${path}.ranks[${i}]`;
    const r = obj(x, p, LOCATED_RANK_FIELDS);
    const base = {
      rank: rankNo(r['rank'], `${p}.rank`),
      pid: pidNo(r['pid'], `${p}.pid`),
      host: str(r['host'], `${p}.host`, MAX_HOST_CHARS, 1),
    };
    return {
      ...base,
      ...(r['startTime'] === undefined ? {} : { startTime: startTime(r['startTime'], `${p}.startTime`) }),
      ...(r['core'] === undefined ? {} : { core: corePath(r['core'], `${p}.core`) }),
    };
  });
  const seen = new Set<number>();
  for (const r of ranks) {
    if (seen.has(r.rank)) fail(`${path}.ranks`, `rank ${r.rank} appears twice`);
    seen.add(r.rank);
  }
  return {
    ranks,
    method: str(o['method'], `${path}.method`, MAX_METHOD_CHARS, 1),
    uid: int(o['uid'], `${path}.uid`, 0, 0xffffffff),
    command: str(o['command'], `${path}.command`, MAX_COMMAND_CHARS),
    starterStartTime: startTime(o['starterStartTime'], `${path}.starterStartTime`),
    ...(o['starterPid'] === undefined ? {} : { starterPid: pidNo(o['starterPid'], `${path}.starterPid`) }),
    ...(o['coresDir'] === undefined ? {} : { coresDir: corePath(o['coresDir'], `${path}.coresDir`) }),
    ...(o['otherNodes'] === undefined
      ? {}
      : {
          otherNodes: arr(o['otherNodes'], `${path}.otherNodes`, MAX_OTHER_NODES).map((h, i) =>
            str(h, `${path}.otherNodes[${i}]`, MAX_HOST_CHARS, 1),
          ),
        }),
  };
}
function seenStarter(v: unknown, path: string): SeenStarter {
  const o = obj(v, path, SEEN_STARTER_FIELDS);
  const s = {
    starterPid: pidNo(o['starterPid'], `${path}.starterPid`),
    uid: int(o['uid'], `${path}.uid`, 0, 0xffffffff),
    command: str(o['command'], `${path}.command`, MAX_COMMAND_CHARS),
  };
  return o['startTime'] === undefined
    ? s
    : { ...s, startTime: startTime(o['startTime'], `${path}.startTime`) };
}

// --- the hang watch: discovered jobs and counters -----------------------------------------

const uidNo = (v: unknown, path: string) => int(v, path, 0, 0xffffffff);
/** A Slurm job id as discovery reports it: digits only. */
const SLURM_ID_RE = /^[0-9]{1,20}$/;
/** The key of a starter job: `starter:HOST:PID:STARTTIME`. */
const STARTER_KEY_RE = /^starter:(.+):([0-9]+):([0-9]+)$/;
/** A /proc state letter (R, S, D, T, t, Z, X, I, ...). */
const PROC_STATE_RE = /^[A-Za-z]$/;

/** Ranks each named once, pinned by start time (DiscoveredRank, a counters request's targets). */
function discoveredRanks(v: unknown, path: string): DiscoveredRank[] {
  const seen = new Set<number>();
  return arr(v, path, MAX_RANKS_PER_REQUEST).map((x, i) => {
    const p = `${path}[${i}]`;
    const o = obj(x, p, DISCOVERED_RANK_FIELDS);
    const r = {
      rank: rankNo(o['rank'], `${p}.rank`),
      pid: pidNo(o['pid'], `${p}.pid`),
      startTime: startTime(o['startTime'], `${p}.startTime`),
    };
    if (seen.has(r.rank)) fail(`${p}.rank`, `rank ${r.rank} appears twice`);
    seen.add(r.rank);
    return r;
  });
}

function discoveredJob(v: unknown, path: string): DiscoveredJob {
  const o = obj(v, path, DISCOVERED_JOB_FIELDS);
  const key = str(o['key'], `${path}.key`, MAX_DISCOVERED_KEY_CHARS, 1);
  const kind = oneOf(o['kind'], `${path}.kind`, ['slurm', 'starter'] as const);
  const opt = <T>(k: string, read: (x: unknown, p: string) => T): T | undefined =>
    o[k] === undefined ? undefined : read(o[k], `${path}.${k}`);
  const slurmJob = opt('slurmJob', (x, p) => str(x, p, 20, 1, SLURM_ID_RE));
  const starterPid = opt('starterPid', pidNo);
  const starterStartTime = opt('starterStartTime', startTime);
  if (kind === 'slurm') {
    if (slurmJob === undefined || key !== `slurm:${slurmJob}`)
      fail(`${path}.key`, 'expected slurm:<slurmJob>');
    if (starterPid !== undefined || starterStartTime !== undefined) {
      fail(`${path}.starterPid`, 'not allowed for a Slurm job');
    }
  } else {
    const m = STARTER_KEY_RE.exec(key);
    if (slurmJob !== undefined) fail(`${path}.slurmJob`, 'not allowed for a starter job');
    if (
      m === null ||
      (m[1] ?? '').length > MAX_HOST_CHARS ||
      starterPid === undefined ||
      starterStartTime === undefined ||
      m[2] !== String(starterPid) ||
      m[3] !== starterStartTime
    ) {
      fail(`${path}.key`, 'expected starter:<host>:<starterPid>:<starterStartTime>');
    }
  }
  const jobName = opt('jobName', (x, p) => str(x, p, MAX_SLURM_NAME_CHARS));
  const partition = opt('partition', (x, p) => str(x, p, MAX_SLURM_NAME_CHARS));
  const account = opt('account', (x, p) => str(x, p, MAX_SLURM_NAME_CHARS));
  const worldSize = opt('worldSize', (x, p) => int(x, p, 1, MAX_RANK + 1));
  return {
    key,
    kind,
    ...(slurmJob === undefined ? {} : { slurmJob }),
    ...(starterPid === undefined ? {} : { starterPid }),
    ...(starterStartTime === undefined ? {} : { starterStartTime }),
    uid: uidNo(o['uid'], `${path}.uid`),
    command: str(o['command'], `${path}.command`, MAX_COMMAND_CHARS),
    startedAt: int(o['startedAt'], `${path}.startedAt`, 0, Number.MAX_SAFE_INTEGER),
    ...(jobName === undefined ? {} : { jobName }),
    ...(partition === undefined ? {} : { partition }),
    ...(account === undefined ? {} : { account }),
    ...(worldSize === undefined ? {} : { worldSize }),
    watch: oneOf(o['watch'], `${path}.watch`, ['on', 'off'] as const),
    ranks: discoveredRanks(o['ranks'], `${path}.ranks`),
  };
}

const DISCOVERY_SCAN_FIELDS = fields<DiscoveryScanInfo>({ complete: true, omitted: true });
const DISCOVERY_OMITTED_FIELDS = fields<DiscoveryOmitted>({ uid: true, jobs: true });

/**
 * status.discoveryScan, read with what became of `discovered`: a report the aggregator dropped
 * entries of is incomplete, whatever the agent said; so is a malformed field (dropped). An
 * agent that sends none: complete unless the list is at its cap.
 */
function discoveryScan(
  v: unknown,
  listed: number,
  droppedJobs: number,
  dropped: DroppedEntry[],
): DiscoveryScanInfo {
  let scan: DiscoveryScanInfo;
  if (v === undefined) scan = { complete: listed < MAX_DISCOVERED_JOBS, omitted: [] };
  else {
    try {
      const o = obj(v, 'discoveryScan', DISCOVERY_SCAN_FIELDS);
      if (typeof o['complete'] !== 'boolean') fail('discoveryScan.complete', 'expected a boolean');
      const seen = new Set<number>();
      const omitted = arr(o['omitted'], 'discoveryScan.omitted', MAX_DISCOVERY_OMITTED).map((x, i) => {
        const e = obj(x, `discoveryScan.omitted[${i}]`, DISCOVERY_OMITTED_FIELDS);
        const uid = uidNo(e['uid'], `discoveryScan.omitted[${i}].uid`);
        if (seen.has(uid)) fail(`discoveryScan.omitted[${i}].uid`, 'named twice');
        seen.add(uid);
        return { uid, jobs: int(e['jobs'], `discoveryScan.omitted[${i}].jobs`, 1, 0x7fffffff) };
      });
      scan = { complete: o['complete'] && omitted.length === 0, omitted };
    } catch (e) {
      if (!(e instanceof Invalid)) throw e;
      dropped.push({ why: e.message });
      scan = { complete: false, omitted: [] };
    }
  }
  return droppedJobs > 0 ? { ...scan, complete: false } : scan;
}

/** A status's discovered jobs: a malformed one is dropped alone (local users start them). */
function discoveredJobs(v: unknown, dropped: DroppedEntry[]): DiscoveredJob[] {
  const out: DiscoveredJob[] = [];
  arr(v, 'discovered', MAX_DISCOVERED_JOBS).forEach((j, i) => {
    try {
      out.push(discoveredJob(j, `discovered[${i}]`));
    } catch (e) {
      if (!(e instanceof Invalid)) throw e;
      dropped.push({ why: e.message });
    }
  });
  return out;
}

function countersParams(v: unknown, path: string): CountersParams {
  const o = obj(v, path, COUNTERS_PARAMS_FIELDS);
  return {
    ranks: discoveredRanks(o['ranks'], `${path}.ranks`),
    ownerUid: uidNo(o['ownerUid'], `${path}.ownerUid`),
  };
}

function captureParams(v: unknown, path: string): CaptureParams {
  const o = obj(v, path, CAPTURE_PARAMS_FIELDS);
  return {
    ranks: discoveredRanks(o['ranks'], `${path}.ranks`),
    ownerUid: uidNo(o['ownerUid'], `${path}.ownerUid`),
    name: str(o['name'], `${path}.name`, 200, 1, CAPTURE_NAME_RE),
  };
}

function captureResult(v: unknown, path: string): CaptureResult {
  const o = obj(v, path, CAPTURE_RESULT_FIELDS);
  const seen = new Set<number>();
  const ranks = arr(o['ranks'], `${path}.ranks`, MAX_RANKS_PER_REQUEST).map((x, i) => {
    const p = `${path}.ranks[${i}]`;
    const r = obj(x, p, CAPTURED_RANK_FIELDS);
    const rank = rankNo(r['rank'], `${p}.rank`);
    if (seen.has(rank)) fail(`${p}.rank`, `rank ${rank} appears twice`);
    seen.add(rank);
    const core =
      r['core'] === null ? null : str(r['core'], `${p}.core`, 255, 1, /^[A-Za-z0-9][A-Za-z0-9._-]*$/);
    const error = r['error'] === null ? null : wireError(r['error'], `${p}.error`);
    if ((core === null) === (error === null)) fail(p, 'expected either a core or an error');
    return {
      rank,
      pid: pidNo(r['pid'], `${p}.pid`),
      core,
      bytes: int(r['bytes'], `${p}.bytes`, 0, Number.MAX_SAFE_INTEGER),
      pausedMicros: int(r['pausedMicros'], `${p}.pausedMicros`, 0, Number.MAX_SAFE_INTEGER),
      error,
    };
  });
  return { dir: corePath(o['dir'], `${path}.dir`), ranks };
}

function countersResult(v: unknown, path: string): CountersResult {
  const o = obj(v, path, COUNTERS_RESULT_FIELDS);
  const seen = new Set<number>();
  const once = (rank: number, p: string) => {
    if (seen.has(rank)) fail(p, `rank ${rank} appears twice`);
    seen.add(rank);
    return rank;
  };
  const ranks = arr(o['ranks'], `${path}.ranks`, MAX_RANKS_PER_REQUEST).map((x, i) => {
    const p = `${path}.ranks[${i}]`;
    const r = obj(x, p, RANK_COUNTERS_FIELDS);
    return {
      rank: once(rankNo(r['rank'], `${p}.rank`), `${p}.rank`),
      cpuTicks: int(r['cpuTicks'], `${p}.cpuTicks`, 0, Number.MAX_SAFE_INTEGER),
      switches: int(r['switches'], `${p}.switches`, 0, Number.MAX_SAFE_INTEGER),
      state: str(r['state'], `${p}.state`, 1, 1, PROC_STATE_RE),
    };
  });
  const errors = arr(o['errors'], `${path}.errors`, MAX_RANKS_PER_REQUEST).map((x, i) => {
    const p = `${path}.errors[${i}]`;
    const e = obj(x, p, COUNTER_ERROR_FIELDS);
    return {
      rank: once(rankNo(e['rank'], `${p}.rank`), `${p}.rank`),
      error: wireError(e['error'], `${p}.error`),
    };
  });
  return {
    ranks,
    errors,
    clockTicksPerSecond: int(o['clockTicksPerSecond'], `${path}.clockTicksPerSecond`, 1, 1_000_000),
    at: int(o['at'], `${path}.at`, 0, Number.MAX_SAFE_INTEGER),
  };
}

// --- ranks -------------------------------------------------------------------------------
// A rank is checked by the snapshot spec's own validator (packages/model checkRank: the compiled
// schema and validateSnapshot's per-rank invariants), so whatever an agent gets stored opens in
// the dashboard and through share links. It replaced a hand-written guard that had drifted from
// the spec (1,040-character dll.missingFields where the spec allows 512) and is 2.5x faster
// (16,384 realistic ranks: 36 ms against 90 ms). One bad rank is dropped, not its whole chunk.

/** A JSON pointer of the validator (`/communicators/0/sends/1`) as a field path (`.communicators[0].sends[1]`). */
function fieldPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((k) => (/^\d+$/.test(k) ? `[${k}]` : `.${k.replace(/~1/g, '/').replace(/~0/g, '~')}`))
    .join('');
}

const isInt = (v: unknown, min: number, max: number): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;

function chunkRanks(v: unknown, path: string, dropped: DroppedEntry[]): RankSnapshot[] {
  const list = arr(v, path, MAX_RANKS_PER_REQUEST);
  const seen = new Set<number>();
  const out: RankSnapshot[] = [];
  for (let i = 0; i < list.length; i++) {
    const x = list[i];
    const bad = checkRank(x);
    const r = x as RankSnapshot;
    let why = bad === null ? null : `${path}[${i}]${fieldPath(bad.path)}: ${bad.message}`;
    if (why === null && seen.has(r.rank)) why = `${path}[${i}].rank: rank ${r.rank} appears twice`;
    if (why === null) {
      seen.add(r.rank);
      out.push(r);
      continue;
    }
    const o = (typeof x === 'object' && x !== null ? x : {}) as { rank?: unknown; pid?: unknown };
    dropped.push({
      why,
      ...(isInt(o.rank, 0, MAX_RANK) ? { rank: o.rank } : {}),
      ...(isInt(o.pid, 1, Number.MAX_SAFE_INTEGER) ? { pid: o.pid } : {}),
    });
  }
  return out;
}

/** Checks ranks as an agent must send them; the error names the first bad field. */
export function checkRanks(ranks: unknown): Result<RankSnapshot[], string> {
  try {
    const dropped: DroppedEntry[] = [];
    const out = chunkRanks(ranks, 'ranks', dropped);
    return dropped[0] === undefined ? ok(out) : err(dropped[0].why);
  } catch (e) {
    if (!(e instanceof Invalid)) throw e;
    return err(e.message);
  }
}

function bytesOf(data: unknown): Buffer | null {
  if (Buffer.isBuffer(data)) return data;
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return null;
}

function decode<T>(
  data: unknown,
  maxBytes: number,
  guard: (v: unknown, dropped: DroppedEntry[]) => T,
): Result<T & Dropped, Refusal> {
  const buf = bytesOf(data);
  if (buf === null) {
    return err({
      error: mqdError('MQD_E_BAD_INPUT', 'a message must be one binary argument (UTF-8 JSON)'),
      refId: null,
    });
  }
  if (buf.byteLength > maxBytes) {
    return err({
      error: mqdError(
        'MQD_E_BAD_INPUT',
        `message of ${buf.byteLength} bytes exceeds the ${maxBytes}-byte limit`,
      ),
      refId: null,
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(buf.toString('utf8'));
  } catch (e) {
    // Not JSON: an expected failure from a foreign peer, reported, not thrown.
    return err({
      error: mqdError('MQD_E_BAD_INPUT', `message is not JSON (${(e as Error).message})`),
      refId: null,
    });
  }
  try {
    const dropped: DroppedEntry[] = [];
    const value = guard(json, dropped);
    // Only a message with dropped entries says so (a clean one decodes to exactly what was sent).
    return ok((dropped.length === 0 ? value : { ...value, dropped }) as T & Dropped);
  } catch (e) {
    if (!(e instanceof Invalid)) throw e;
    const id = (json as { id?: unknown } | null)?.id;
    const refId =
      typeof id === 'number' && Number.isInteger(id) && id >= 1 && id <= MAX_REQUEST_ID ? id : null;
    return err({ error: mqdError('MQD_E_BAD_INPUT', `malformed message at ${e.message}`), refId });
  }
}

/** A status's starters: a malformed one is dropped (a local user names them), the rest kept. */
function seenStarters(v: unknown, dropped: DroppedEntry[]): SeenStarter[] {
  const out: SeenStarter[] = [];
  arr(v, 'jobs', MAX_SEEN_JOBS).forEach((j, i) => {
    try {
      out.push(seenStarter(j, `jobs[${i}]`));
    } catch (e) {
      if (!(e instanceof Invalid)) throw e;
      dropped.push({ why: e.message });
    }
  });
  return out;
}

function discoveredWithScan(
  o: Obj,
  dropped: DroppedEntry[],
): { discovered: DiscoveredJob[]; discoveryScan: DiscoveryScanInfo } {
  const before = dropped.length;
  const discovered = discoveredJobs(o['discovered'], dropped);
  const droppedJobs = dropped.length - before;
  return {
    discovered,
    discoveryScan: discoveryScan(o['discoveryScan'], discovered.length + droppedJobs, droppedJobs, dropped),
  };
}

function agentMessage(v: unknown, dropped: DroppedEntry[]): AgentMessage {
  const type = oneOf((v as Obj | null)?.['type'], 'type', ['status', 'chunk', 'alive', 'reply'] as const);
  switch (type) {
    case 'status': {
      const o = obj(
        v,
        '$',
        fields<Extract<AgentMessage, { type: 'status' }>>({
          type: true,
          health: true,
          mpi: true,
          jobs: true,
          discovered: true,
          discoveryScan: true,
        }),
      );
      const h = obj(o['health'], 'health', HEALTH_FIELDS);
      return {
        type,
        health: {
          rssBytes: num(h['rssBytes'], 'health.rssBytes'),
          heapUsedBytes: num(h['heapUsedBytes'], 'health.heapUsedBytes'),
          uptimeSeconds: num(h['uptimeSeconds'], 'health.uptimeSeconds'),
          loadAverage1m: num(h['loadAverage1m'], 'health.loadAverage1m'),
          activeRequests: int(h['activeRequests'], 'health.activeRequests', 0, MAX_REQUEST_ID),
          lastError: h['lastError'] === null ? null : wireError(h['lastError'], 'health.lastError'),
        },
        mpi: mpiInfo(o['mpi'], 'mpi'),
        jobs: seenStarters(o['jobs'], dropped),
        ...discoveredWithScan(o, dropped),
      };
    }
    case 'chunk': {
      const o = obj(
        v,
        '$',
        fields<Extract<AgentMessage, { type: 'chunk' }>>({ type: true, id: true, ranks: true }),
      );
      return { type, id: reqId(o['id'], 'id'), ranks: chunkRanks(o['ranks'], 'ranks', dropped) };
    }
    case 'alive': {
      const o = obj(v, '$', fields<Extract<AgentMessage, { type: 'alive' }>>({ type: true, ids: true }));
      return { type, ids: arr(o['ids'], 'ids', MAX_ALIVE_IDS).map((x, i) => reqId(x, `ids[${i}]`)) };
    }
    case 'reply': {
      const o = obj(v, '$', REPLY_FIELDS);
      const id = reqId(o['id'], 'id');
      const method = oneOf(o['method'], 'method', ['snapshot', 'locate', 'counters', 'capture'] as const);
      if (o['ok'] === false) {
        if (o['result'] !== undefined) fail('result', 'not allowed when ok is false');
        return { type, id, method, ok: false, error: wireError(o['error'], 'error') };
      }
      if (o['ok'] !== true) fail('ok', 'expected a boolean');
      if (o['error'] !== undefined) fail('error', 'not allowed when ok is true');
      if (method === 'locate')
        return { type, id, method, ok: true, result: locatedJob(o['result'], 'result') };
      if (method === 'counters')
        return { type, id, method, ok: true, result: countersResult(o['result'], 'result') };
      if (method === 'capture')
        return { type, id, method, ok: true, result: captureResult(o['result'], 'result') };
      const r = obj(o['result'], 'result', SNAPSHOT_RESULT_FIELDS);
      return {
        type,
        id,
        method,
        ok: true,
        result: {
          count: int(r['count'], 'result.count', 0, MAX_RANKS_PER_REQUEST),
          mpi: mpiInfo(r['mpi'], 'result.mpi'),
          durationMicros: int(r['durationMicros'], 'result.durationMicros', 0, Number.MAX_SAFE_INTEGER),
          ...(r['cores'] === undefined ? {} : { cores: coreSources(r['cores'], 'result.cores') }),
        },
      };
    }
  }
}

function serverMessage(v: unknown): ServerMessage {
  const type = oneOf((v as Obj | null)?.['type'], 'type', ['welcome', 'request', 'refused'] as const);
  switch (type) {
    case 'welcome': {
      const o = obj(v, '$', WELCOME_FIELDS);
      return {
        type,
        protocol: int(o['protocol'], 'protocol', 0, MAX_REQUEST_ID),
        agentId: str(o['agentId'], 'agentId', 64, 1, AGENT_ID_RE),
        maxMessageBytes: int(o['maxMessageBytes'], 'maxMessageBytes', 1024, Number.MAX_SAFE_INTEGER),
        statusIntervalMs: int(o['statusIntervalMs'], 'statusIntervalMs', 10, MAX_REQUEST_ID),
        keepaliveMs: int(o['keepaliveMs'], 'keepaliveMs', 10, MAX_REQUEST_ID),
      };
    }
    case 'request': {
      const o = obj(
        v,
        '$',
        fields<Extract<ServerMessage, { type: 'request' }>>({
          type: true,
          id: true,
          method: true,
          params: true,
        }),
      );
      const id = reqId(o['id'], 'id');
      const method = oneOf(o['method'], 'method', ['snapshot', 'locate', 'counters', 'capture'] as const);
      if (method === 'counters') {
        return { type, id, method, params: countersParams(o['params'], 'params') };
      }
      if (method === 'capture') {
        return { type, id, method, params: captureParams(o['params'], 'params') };
      }
      if (method === 'locate') {
        const p = obj(o['params'], 'params', LOCATE_FIELDS);
        const given = LOCATE_FIELDS.filter((k) => p[k] !== undefined);
        if (given.length !== 1) {
          fail('params', 'expected exactly one of starterPid, slurmJob and coresDir');
        }
        const params: LocateTarget =
          p['slurmJob'] !== undefined
            ? { slurmJob: str(p['slurmJob'], 'params.slurmJob', 32, 1, SLURM_JOB_RE) }
            : p['coresDir'] !== undefined
              ? { coresDir: corePath(p['coresDir'], 'params.coresDir') }
              : { starterPid: pidNo(p['starterPid'], 'params.starterPid') };
        return { type, id, method, params };
      }
      const p = obj(o['params'], 'params', SNAPSHOT_PARAMS_FIELDS);
      const params: { -readonly [K in keyof SnapshotParams]: SnapshotParams[K] } = {
        ranks: rankTargets(p['ranks'], 'params.ranks'),
        timeoutMs: int(p['timeoutMs'], 'params.timeoutMs', 1, MAX_REQUEST_ID),
      };
      if (p['ownerUid'] !== undefined) params.ownerUid = int(p['ownerUid'], 'params.ownerUid', 0, 0xffffffff);
      if (p['allowRoot'] !== undefined) {
        if (typeof p['allowRoot'] !== 'boolean') fail('params.allowRoot', 'expected a boolean');
        params.allowRoot = p['allowRoot'];
      }
      if (p['light'] !== undefined) {
        if (typeof p['light'] !== 'boolean') fail('params.light', 'expected a boolean');
        params.light = p['light'];
      }
      return { type, id, method, params };
    }
    case 'refused': {
      const o = obj(
        v,
        '$',
        fields<Extract<ServerMessage, { type: 'refused' }>>({ type: true, refId: true, error: true }),
      );
      return {
        type,
        refId: o['refId'] === null ? null : reqId(o['refId'], 'refId'),
        error: wireError(o['error'], 'error'),
      };
    }
  }
}

/** Aggregator side: one message from an agent, refused unless it is within size and well formed. */
export function decodeAgentMessage(data: unknown, maxBytes: number): Result<DecodedAgentMessage, Refusal> {
  const buf = bytesOf(data);
  const asSent = buf === null || buf.byteLength > maxBytes ? null : chunkAsSent(buf);
  return asSent ?? decode(data, maxBytes, agentMessage);
}

/** How chunkMessages begins a chunk; the id as JSON writes an integer. */
const CHUNK_HEAD = /^\{"type":"chunk","id":(0|[1-9][0-9]{0,15}),"ranks":\[/;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * A chunk laid out as chunkMessages lays it out, `{"type":"chunk","id":ID,"ranks":[` + the
 * ranks' JSON + `]}`, decoded by parsing its ranks array alone (the bytes from that `[` to the
 * last `]`), and carrying those ranks' bytes (`ranksText`) when every rank passed the checks.
 *
 * Those bytes parse as one array exactly when they are a list of JSON values and nothing more:
 * a repeated key (`[{...}],"ranks":[...`) does not parse as an array, so unchecked JSON cannot
 * ride along into the stored snapshot. The whole message is then the same JSON as
 * {type: 'chunk', id, ranks} (its other bytes are the fixed prefix and `]}`). A rank the checks
 * drop is dropped as the general path drops it, and the bytes are not kept. Anything else is
 * null: the general path decodes it, and refuses what it refuses.
 */
function chunkAsSent(buf: Buffer): Result<DecodedAgentMessage, Refusal> | null {
  const end = buf.length - 2;
  if (buf[end] !== CLOSE_ARRAY || buf[end + 1] !== CLOSE_OBJECT) return null;
  const head = CHUNK_HEAD.exec(buf.toString('latin1', 0, Math.min(buf.length, 64)));
  if (head === null || head[1] === undefined) return null;
  const start = head[0].length;
  if (start > end) return null;
  let list: unknown;
  try {
    list = JSON.parse(buf.toString('utf8', start - 1, end + 1));
  } catch {
    return null;
  }
  try {
    const dropped: DroppedEntry[] = [];
    const id = reqId(Number(head[1]), 'id');
    const ranks = chunkRanks(list, 'ranks', dropped);
    // As the general path gives it: the ranks kept and what was dropped, and then no bytes.
    if (dropped.length > 0) return ok({ type: 'chunk', id, ranks, dropped });
    return ok({ type: 'chunk', id, ranks, ranksText: buf.subarray(start, end) });
  } catch (e) {
    if (!(e instanceof Invalid)) throw e;
    return null;
  }
}

/** Agent side: one message from the aggregator. */
export function decodeServerMessage(data: unknown, maxBytes: number): Result<ServerMessage, Refusal> {
  return decode(data, maxBytes, serverMessage);
}

/** The handshake `auth` object, token included; the token itself is checked by the hub. */
export function parseHandshake(v: unknown): Result<AgentHandshake> {
  try {
    const o = obj(v, 'auth', HANDSHAKE_FIELDS);
    return ok({
      token: str(o['token'], 'auth.token', 512),
      protocol: int(o['protocol'], 'auth.protocol', 0, MAX_REQUEST_ID),
      agentId: str(o['agentId'], 'auth.agentId', 64, 1, AGENT_ID_RE),
      host: str(o['host'], 'auth.host', MAX_HOST_CHARS, 1),
      version: str(o['version'], 'auth.version', 64),
    });
  } catch (e) {
    if (!(e instanceof Invalid)) throw e;
    return err(mqdError('MQD_E_BAD_INPUT', `malformed agent handshake at ${e.message}`));
  }
}
