// The agent <-> aggregator wire protocol: the one spec for what a per-node agent
// (`mqd agent --server URL --token T`) and the aggregator say to each other.
//
// Transport
// - socket.io 4 on the aggregator's HTTP server, namespace `/agents` (AGENT_NAMESPACE).
// - Every message travels as ONE binary argument of the socket.io event `mqd` (WIRE_EVENT): the
//   UTF-8 bytes of one JSON document. Binary keeps the size known before anything is parsed,
//   so an oversized message is refused without being parsed, and avoids escaping JSON in JSON.
// - No socket.io acknowledgements: a request carries an `id` and its answer names that id,
//   so a timeout, a late answer and an answer from a reconnected agent are all handled in one
//   place (the hub) and a late answer is simply dropped.
//
// Handshake (socket.io `auth` object, checked before the connection is accepted)
//   { token, protocol, agentId, host, version }
//   token    the shared agent token (compared in constant time); wrong or missing ->
//            connect_error `MQD_E_UNAUTHENTICATED` and no state is kept.
//   protocol must equal AGENT_PROTOCOL_VERSION, else connect_error `MQD_E_BAD_INPUT`.
//   agentId  1..64 chars of [A-Za-z0-9._:-]; stable across reconnects of one agent process.
//   host     the node name (1..255 chars) ranks report in RankSnapshot.host; at most one agent
//            per host is live: a second connection for a host with a live agent is refused
//            (connect_error data.code MQD_E_AGENT_CONFLICT).
//   version  free text (<= 64 chars), the agent's software version, for the admin page.
//
// Messages, aggregator -> agent
//   welcome  {type, protocol, agentId, maxMessageBytes, statusIntervalMs, keepaliveMs}
//            first message after the handshake; the agent must keep each message it sends
//            within maxMessageBytes (bytes of the JSON document), send `status` every
//            statusIntervalMs (milliseconds) and, while it works on requests, `alive` every
//            keepaliveMs. The aggregator fails a request it has heard nothing about for its
//            silence deadline (well above keepaliveMs) with MQD_E_AGENT_SILENT: a frozen
//            (SIGSTOPped) or overloaded agent costs its own ranks seconds, not the whole timeout.
//   request  {type, id, method: 'snapshot', params: {ranks: [{rank, pid, startTime?, core?}], timeoutMs,
//            ownerUid?, allowRoot?}}
//            read these ranks (at most MAX_RANKS_PER_REQUEST) within timeoutMs milliseconds.
//            startTime pins each rank's identity (/proc/PID/stat field 22, decimal ticks);
//            ownerUid is the job owner (ranks of other uids are refused); allowRoot is set
//            only when an admin explicitly asked to read uid-0 ranks. core (a path, <= 4096
//            chars) marks a job read from core files: then every rank has one, the agent reads
//            the files (after checking they lie in a directory it allows and belong to ownerUid)
//            instead of processes, and pid is the pid recorded in the core.
//            The agent answers with zero or more `chunk` messages, then one `reply`.
//   request  {type, id, method: 'locate', params: {starterPid} | {slurmJob} | {coresDir}}
//            find the ranks of the job started by this mpirun/mpiexec pid, of the Slurm job
//            JOBID[.STEP] on this node, or of the core files in directory coresDir (an
//            absolute path, <= 4096 chars, that the agent checks against its own allowed
//            roots); answered by one `reply`.
//   refused  {type, refId, error: {code, message}}
//            the aggregator dropped one of the agent's messages (too big, not JSON, wrong
//            shape, unknown or finished request id), or entries of one (ranks of a chunk,
//            starters of a status: the message says which); refId is the message's request id
//            when it could be read, else null. Nothing refused is kept.
//
// Messages, agent -> aggregator
//   status   {type, health, mpi, jobs}
//            health: {rssBytes, heapUsedBytes (bytes), uptimeSeconds, loadAverage1m,
//            activeRequests, lastError: {code, message} | null}; mpi: the reader's library
//            and DLL or null; jobs: MPI starters seen on the node (<= MAX_SEEN_JOBS),
//            [{starterPid, uid, command, startTime?}]. Everything here a local user controls
//            (a command line: anyone can start a process named mpirun) is cut to its limit by
//            the agent (clipText, ending in "…": command <= MAX_COMMAND_CHARS), and the agent
//            lists only as many starters as fit maxMessageBytes; a starter entry that is still
//            malformed is dropped by the aggregator, the rest of the status kept.
//   alive    {type, ids}
//            the agent is still at work on these open requests (sent every keepaliveMs while
//            any is open); resets each one's silence deadline.
//   chunk    {type, id, ranks: RankSnapshot[]}  (packages/model snapshot-spec.ts)
//            part of the answer to snapshot request `id`. Each rank must be one of the
//            request's (rank, pid) pairs and appear once over all chunks. The agent splits
//            its answer so that each chunk fits maxMessageBytes; a single rank that cannot fit
//            is sent as a rank in state error instead. Each rank is checked on its own
//            against the snapshot spec (packages/model checkRank, the validator the dashboard
//            and share links use): one that fails, was not asked for or comes twice is dropped
//            (it stays unanswered: agent-missing unless a valid copy follows) and the agent is
//            told with `refused`; the chunk's other ranks are kept.
//   reply    {type, id, method, ok: true, result} | {type, id, method, ok: false, error}
//            ends request `id`. method repeats the request's method so a reply can be
//            validated on its own. Results:
//              snapshot: {count, mpi, durationMicros, cores?}: count = ranks sent in chunks (the
//                        aggregator checks it), durationMicros = wall time of the read;
//                        cores (a core job only): [{rank, path, pid, signal, executable,
//                        writtenAt}] per core read (snapshot-spec.ts CoreFileSource).
//              locate:   {ranks: [{rank, pid, host, startTime?, core?}], method, uid, command,
//                        starterStartTime, starterPid?, coresDir?, otherNodes?}: otherNodes
//                        (a Slurm job, <= MAX_OTHER_NODES host names) are the job's nodes
//                        besides this one, whose agents the aggregator asks for their ranks.
//            An error {code, message} uses the codes of packages/model errors.ts.
//
// Invariants
// - Request ids are positive integers chosen by the aggregator, unique per connection.
// - Ranks and pids are integers: rank in [0, 2^31), pid in [1, 2^30].
// - All sizes are bytes, all durations milliseconds unless the field says Micros/Seconds.
//   Text limits are in UTF-16 units (String.length), the snapshot spec's MAX_*_CHARS for the
//   spec's fields (paths, hosts, codes, messages).
// - A rank the agent cannot read is still answered (state error), never silently dropped;
//   ranks the aggregator never hears about become `agent-missing` in the merged snapshot.
import {
  type CoreFileSource,
  checkRank,
  type ErrorCode,
  err,
  isErrorCode,
  MAX_CODE_CHARS,
  MAX_CORES_DIR_CHARS,
  MAX_HOST_CHARS,
  MAX_MESSAGE_CHARS,
  MAX_PATH_CHARS,
  type MqdError,
  mqdError,
  ok,
  type RankSnapshot,
  type Result,
  SLURM_JOB_RE,
} from '@mqd/model';
import type { LocatedJob, MpiInfo, RankTarget, SeenStarter } from './seams.js';

export const AGENT_PROTOCOL_VERSION = 2 as const;
export const AGENT_NAMESPACE = '/agents';
export const UI_NAMESPACE = '/ui';
export const WIRE_EVENT = 'mqd';
export const DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024;
export const MAX_RANKS_PER_REQUEST = 1 << 20;
export const MAX_SEEN_JOBS = 1024;
/** A starter's or a located job's command line, in UTF-16 units; longer ones are cut (clipText). */
export const MAX_COMMAND_CHARS = 4096;
/** LocatedJob.method, in UTF-16 units. */
export const MAX_METHOD_CHARS = 64;
/** Default for welcome.keepaliveMs: how often an agent says it is still at work on a request. */
export const DEFAULT_KEEPALIVE_MS = 2000;
/** Request ids one `alive` message lists (an agent has a handful open at a time). */
export const MAX_ALIVE_IDS = 4096;
const MAX_ID = 0x7fffffff;

export type RequestMethod = 'snapshot' | 'locate';

export interface WireError {
  readonly code: string;
  readonly message: string;
}

export interface AgentHandshake {
  readonly token: string;
  readonly protocol: number;
  readonly agentId: string;
  readonly host: string;
  readonly version: string;
}

export interface AgentHealth {
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
  readonly uptimeSeconds: number;
  readonly loadAverage1m: number;
  readonly activeRequests: number;
  readonly lastError: WireError | null;
}

export interface SnapshotParams {
  readonly ranks: readonly RankTarget[];
  readonly timeoutMs: number;
  /** The job owner's uid: the agent reads only ranks of this uid (ReadOptions.ownerUid). */
  readonly ownerUid?: number;
  /** An admin asked to read uid-0 ranks (ReadOptions.allowRoot); never set for other users. */
  readonly allowRoot?: boolean;
}

export interface SnapshotResult {
  readonly count: number;
  readonly mpi: MpiInfo | null;
  readonly durationMicros: number;
  /** A core job: the cores read (JobSnapshot.source.cores). */
  readonly cores?: readonly CoreFileSource[];
}

export type ServerMessage =
  | {
      readonly type: 'welcome';
      readonly protocol: number;
      readonly agentId: string;
      readonly maxMessageBytes: number;
      readonly statusIntervalMs: number;
      readonly keepaliveMs: number;
    }
  | {
      readonly type: 'request';
      readonly id: number;
      readonly method: 'snapshot';
      readonly params: SnapshotParams;
    }
  | {
      readonly type: 'request';
      readonly id: number;
      readonly method: 'locate';
      readonly params: LocateTarget;
    }
  | { readonly type: 'refused'; readonly refId: number | null; readonly error: WireError };

/** What a locate request names: a starter pid on the node, or a Slurm job id ("1234", "1234.0"). */
export type LocateTarget =
  | { readonly starterPid: number }
  | { readonly slurmJob: string }
  | { readonly coresDir: string };

export type ReplyMessage =
  | {
      readonly type: 'reply';
      readonly id: number;
      readonly method: 'snapshot';
      readonly ok: true;
      readonly result: SnapshotResult;
    }
  | {
      readonly type: 'reply';
      readonly id: number;
      readonly method: 'locate';
      readonly ok: true;
      readonly result: LocatedJob;
    }
  | {
      readonly type: 'reply';
      readonly id: number;
      readonly method: RequestMethod;
      readonly ok: false;
      readonly error: WireError;
    };

export type AgentMessage =
  | {
      readonly type: 'status';
      readonly health: AgentHealth;
      readonly mpi: MpiInfo | null;
      readonly jobs: readonly SeenStarter[];
    }
  | { readonly type: 'chunk'; readonly id: number; readonly ranks: RankSnapshot[] }
  | { readonly type: 'alive'; readonly ids: readonly number[] }
  | ReplyMessage;

/**
 * What decodeAgentMessage gives: the message with what was valid in it, and the entries it
 * dropped (a chunk's ranks, a status's starters), absent when none was.
 */
export type DecodedAgentMessage = AgentMessage & Dropped;
interface Dropped {
  readonly dropped?: readonly DroppedEntry[];
}

/** The bytes of one message: what goes over the wire as the single argument of WIRE_EVENT. */
export function encodeMessage(msg: AgentMessage | ServerMessage): Buffer {
  return Buffer.from(JSON.stringify(msg), 'utf8');
}

/** A wire error as an MqdError, keeping the code when it is one of ours. */
export function fromWire(e: WireError, fallback: ErrorCode): MqdError {
  return isErrorCode(e.code) ? { code: e.code, message: e.message } : mqdError(fallback, e.message);
}

// --- validation at the edge -------------------------------------------------------------
// Hand-written guards: the envelopes are small, and a guard names the path of the first bad
// field. Their text limits are the snapshot spec's constants (MAX_*_CHARS) where the field is
// one of the spec's. Ranks are checked by the spec's own validator (checkRanks, below).

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
const reqId = (v: unknown, path: string) => int(v, path, 1, MAX_ID);
const rankNo = (v: unknown, path: string) => int(v, path, 0, MAX_ID);
const pidNo = (v: unknown, path: string) => int(v, path, 1, 0x3fffffff);
const AGENT_ID_RE = /^[A-Za-z0-9._:-]+$/;

function wireError(v: unknown, path: string): WireError {
  const o = obj(v, path, ['code', 'message']);
  return {
    code: str(o['code'], `${path}.code`, MAX_CODE_CHARS, 1),
    message: str(o['message'], `${path}.message`, MAX_MESSAGE_CHARS),
  };
}
function mpiInfo(v: unknown, path: string): MpiInfo | null {
  if (v === null) return null;
  const o = obj(v, path, ['library', 'dll', 'lengthUnit']);
  return {
    library: oneOf(o['library'], `${path}.library`, ['openmpi', 'mpich', 'unknown'] as const),
    dll: o['dll'] === null ? null : str(o['dll'], `${path}.dll`, MAX_PATH_CHARS),
    lengthUnit: oneOf(o['lengthUnit'], `${path}.lengthUnit`, ['bytes', 'elements'] as const),
  };
}
function rankTargets(v: unknown, path: string): RankTarget[] {
  return arr(v, path, MAX_RANKS_PER_REQUEST).map((x, i) => {
    const o = obj(x, `${path}[${i}]`, ['rank', 'pid', 'startTime', 'core']);
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
    const o = obj(x, p, ['rank', 'path', 'pid', 'signal', 'executable', 'writtenAt']);
    return {
      rank: rankNo(o['rank'], `${p}.rank`),
      path: str(o['path'], `${p}.path`, MAX_PATH_CHARS),
      pid: int(o['pid'], `${p}.pid`, 1, Number.MAX_SAFE_INTEGER),
      signal: int(o['signal'], `${p}.signal`, 0, 255),
      executable: str(o['executable'], `${p}.executable`, MAX_PATH_CHARS),
      writtenAt: str(o['writtenAt'], `${p}.writtenAt`, 40, 20, ISO_RE),
    };
  });
}
/** Nodes a located Slurm job names besides the agent's own (a job spans at most this many). */
export const MAX_OTHER_NODES = 65_536;
function locatedJob(v: unknown, path: string): LocatedJob {
  const o = obj(v, path, [
    'ranks',
    'method',
    'uid',
    'command',
    'starterStartTime',
    'starterPid',
    'coresDir',
    'otherNodes',
  ]);
  const ranks = arr(o['ranks'], `${path}.ranks`, MAX_RANKS_PER_REQUEST).map((x, i) => {
    const p = `${path}.ranks[${i}]`;
    const r = obj(x, p, ['rank', 'pid', 'host', 'startTime', 'core']);
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
  const o = obj(v, path, ['starterPid', 'uid', 'command', 'startTime']);
  const s = {
    starterPid: pidNo(o['starterPid'], `${path}.starterPid`),
    uid: int(o['uid'], `${path}.uid`, 0, 0xffffffff),
    command: str(o['command'], `${path}.command`, MAX_COMMAND_CHARS),
  };
  return o['startTime'] === undefined
    ? s
    : { ...s, startTime: startTime(o['startTime'], `${path}.startTime`) };
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

/**
 * An entry the aggregator dropped from an otherwise well-formed message (a chunk's rank, a
 * status's starter): what decodeAgentMessage reports beside the message; never on the wire.
 */
export interface DroppedEntry {
  /** The entry's path and what is wrong there, e.g. `ranks[3].communicators[0].name: ...`. */
  readonly why: string;
  /** A dropped rank's number and pid, when those two fields could be read. */
  readonly rank?: number;
  readonly pid?: number;
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
      ...(isInt(o.rank, 0, MAX_ID) ? { rank: o.rank } : {}),
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

/** What a refused message is answered with: the error, and the request id when it was readable. */
export interface Refusal {
  readonly error: MqdError;
  readonly refId: number | null;
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
    const refId = typeof id === 'number' && Number.isInteger(id) && id >= 1 && id <= MAX_ID ? id : null;
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

function agentMessage(v: unknown, dropped: DroppedEntry[]): AgentMessage {
  const type = oneOf((v as Obj | null)?.['type'], 'type', ['status', 'chunk', 'alive', 'reply'] as const);
  switch (type) {
    case 'status': {
      const o = obj(v, '$', ['type', 'health', 'mpi', 'jobs']);
      const h = obj(o['health'], 'health', [
        'rssBytes',
        'heapUsedBytes',
        'uptimeSeconds',
        'loadAverage1m',
        'activeRequests',
        'lastError',
      ]);
      return {
        type,
        health: {
          rssBytes: num(h['rssBytes'], 'health.rssBytes'),
          heapUsedBytes: num(h['heapUsedBytes'], 'health.heapUsedBytes'),
          uptimeSeconds: num(h['uptimeSeconds'], 'health.uptimeSeconds'),
          loadAverage1m: num(h['loadAverage1m'], 'health.loadAverage1m'),
          activeRequests: int(h['activeRequests'], 'health.activeRequests', 0, MAX_ID),
          lastError: h['lastError'] === null ? null : wireError(h['lastError'], 'health.lastError'),
        },
        mpi: mpiInfo(o['mpi'], 'mpi'),
        jobs: seenStarters(o['jobs'], dropped),
      };
    }
    case 'chunk': {
      const o = obj(v, '$', ['type', 'id', 'ranks']);
      return { type, id: reqId(o['id'], 'id'), ranks: chunkRanks(o['ranks'], 'ranks', dropped) };
    }
    case 'alive': {
      const o = obj(v, '$', ['type', 'ids']);
      return { type, ids: arr(o['ids'], 'ids', MAX_ALIVE_IDS).map((x, i) => reqId(x, `ids[${i}]`)) };
    }
    case 'reply': {
      const o = obj(v, '$', ['type', 'id', 'method', 'ok', 'result', 'error']);
      const id = reqId(o['id'], 'id');
      const method = oneOf(o['method'], 'method', ['snapshot', 'locate'] as const);
      if (o['ok'] === false) {
        if (o['result'] !== undefined) fail('result', 'not allowed when ok is false');
        return { type, id, method, ok: false, error: wireError(o['error'], 'error') };
      }
      if (o['ok'] !== true) fail('ok', 'expected a boolean');
      if (o['error'] !== undefined) fail('error', 'not allowed when ok is true');
      if (method === 'locate')
        return { type, id, method, ok: true, result: locatedJob(o['result'], 'result') };
      const r = obj(o['result'], 'result', ['count', 'mpi', 'durationMicros', 'cores']);
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
      const o = obj(v, '$', [
        'type',
        'protocol',
        'agentId',
        'maxMessageBytes',
        'statusIntervalMs',
        'keepaliveMs',
      ]);
      return {
        type,
        protocol: int(o['protocol'], 'protocol', 0, MAX_ID),
        agentId: str(o['agentId'], 'agentId', 64, 1, AGENT_ID_RE),
        maxMessageBytes: int(o['maxMessageBytes'], 'maxMessageBytes', 1024, Number.MAX_SAFE_INTEGER),
        statusIntervalMs: int(o['statusIntervalMs'], 'statusIntervalMs', 10, MAX_ID),
        keepaliveMs: int(o['keepaliveMs'], 'keepaliveMs', 10, MAX_ID),
      };
    }
    case 'request': {
      const o = obj(v, '$', ['type', 'id', 'method', 'params']);
      const id = reqId(o['id'], 'id');
      const method = oneOf(o['method'], 'method', ['snapshot', 'locate'] as const);
      if (method === 'locate') {
        const p = obj(o['params'], 'params', ['starterPid', 'slurmJob', 'coresDir']);
        const given = ['starterPid', 'slurmJob', 'coresDir'].filter((k) => p[k] !== undefined);
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
      const p = obj(o['params'], 'params', ['ranks', 'timeoutMs', 'ownerUid', 'allowRoot']);
      const params: { -readonly [K in keyof SnapshotParams]: SnapshotParams[K] } = {
        ranks: rankTargets(p['ranks'], 'params.ranks'),
        timeoutMs: int(p['timeoutMs'], 'params.timeoutMs', 1, MAX_ID),
      };
      if (p['ownerUid'] !== undefined) params.ownerUid = int(p['ownerUid'], 'params.ownerUid', 0, 0xffffffff);
      if (p['allowRoot'] !== undefined) {
        if (typeof p['allowRoot'] !== 'boolean') fail('params.allowRoot', 'expected a boolean');
        params.allowRoot = p['allowRoot'];
      }
      return { type, id, method, params };
    }
    case 'refused': {
      const o = obj(v, '$', ['type', 'refId', 'error']);
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
  return decode(data, maxBytes, agentMessage);
}

/** Agent side: one message from the aggregator. */
export function decodeServerMessage(data: unknown, maxBytes: number): Result<ServerMessage, Refusal> {
  return decode(data, maxBytes, serverMessage);
}

/** The handshake `auth` object, token included; the token itself is checked by the hub. */
export function parseHandshake(v: unknown): Result<AgentHandshake> {
  try {
    const o = obj(v, 'auth', ['token', 'protocol', 'agentId', 'host', 'version']);
    return ok({
      token: str(o['token'], 'auth.token', 512),
      protocol: int(o['protocol'], 'auth.protocol', 0, MAX_ID),
      agentId: str(o['agentId'], 'auth.agentId', 64, 1, AGENT_ID_RE),
      host: str(o['host'], 'auth.host', MAX_HOST_CHARS, 1),
      version: str(o['version'], 'auth.version', 64),
    });
  } catch (e) {
    if (!(e instanceof Invalid)) throw e;
    return err(mqdError('MQD_E_BAD_INPUT', `malformed agent handshake at ${e.message}`));
  }
}
