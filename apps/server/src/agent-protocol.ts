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
//   welcome  {type, protocol, agentId, maxMessageBytes, statusIntervalMs}
//            first message after the handshake; the agent must keep each message it sends
//            within maxMessageBytes (bytes of the JSON document) and send `status` every
//            statusIntervalMs (milliseconds).
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
//            shape, unknown or finished request id); refId is the message's request id when
//            it could be read, else null. Nothing from a refused message is kept.
//
// Messages, agent -> aggregator
//   status   {type, health, mpi, jobs}
//            health: {rssBytes, heapUsedBytes (bytes), uptimeSeconds, loadAverage1m,
//            activeRequests, lastError: {code, message} | null}; mpi: the reader's library
//            and DLL or null; jobs: MPI starters seen on the node (<= MAX_SEEN_JOBS),
//            [{starterPid, uid, command, startTime?}].
//   chunk    {type, id, ranks: RankSnapshot[]}  (packages/model snapshot-spec.ts)
//            part of the answer to snapshot request `id`. Each rank must be one of the
//            request's (rank, pid) pairs and appear once over all chunks. The agent splits
//            its answer so that each chunk fits maxMessageBytes; a single rank that cannot fit
//            is sent as a rank in state error instead. A chunk that fails validation is
//            refused as a whole.
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
// - A rank the agent cannot read is still answered (state error), never silently dropped;
//   ranks the aggregator never hears about become `agent-missing` in the merged snapshot.
import {
  type CoreFileSource,
  type ErrorCode,
  err,
  isErrorCode,
  MAX_CORES_DIR_CHARS,
  type MqdError,
  mqdError,
  ok,
  openMpInvariant,
  type RankSnapshot,
  type Result,
  SLURM_JOB_RE,
} from '@mqd/model';
import type { LocatedJob, MpiInfo, RankTarget, SeenStarter } from './seams.js';

export const AGENT_PROTOCOL_VERSION = 1 as const;
export const AGENT_NAMESPACE = '/agents';
export const UI_NAMESPACE = '/ui';
export const WIRE_EVENT = 'mqd';
export const DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024;
export const MAX_RANKS_PER_REQUEST = 1 << 20;
export const MAX_SEEN_JOBS = 1024;
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
  | ReplyMessage;

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
// field. Ranks have their own guard (checkRanks, below).

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
  return { code: str(o['code'], `${path}.code`, 64, 1), message: str(o['message'], `${path}.message`, 4096) };
}
function mpiInfo(v: unknown, path: string): MpiInfo | null {
  if (v === null) return null;
  const o = obj(v, path, ['library', 'dll', 'lengthUnit']);
  return {
    library: oneOf(o['library'], `${path}.library`, ['openmpi', 'mpich', 'unknown'] as const),
    dll: o['dll'] === null ? null : str(o['dll'], `${path}.dll`, 4096),
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
      path: str(o['path'], `${p}.path`, 4096),
      pid: int(o['pid'], `${p}.pid`, 1, Number.MAX_SAFE_INTEGER),
      signal: int(o['signal'], `${p}.signal`, 0, 255),
      executable: str(o['executable'], `${p}.executable`, 4096),
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
      host: str(r['host'], `${p}.host`, 255, 1),
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
    method: str(o['method'], `${path}.method`, 64, 1),
    uid: int(o['uid'], `${path}.uid`, 0, 0xffffffff),
    command: str(o['command'], `${path}.command`, 4096),
    starterStartTime: startTime(o['starterStartTime'], `${path}.starterStartTime`),
    ...(o['starterPid'] === undefined ? {} : { starterPid: pidNo(o['starterPid'], `${path}.starterPid`) }),
    ...(o['coresDir'] === undefined ? {} : { coresDir: corePath(o['coresDir'], `${path}.coresDir`) }),
    ...(o['otherNodes'] === undefined
      ? {}
      : {
          otherNodes: arr(o['otherNodes'], `${path}.otherNodes`, MAX_OTHER_NODES).map((h, i) =>
            str(h, `${path}.otherNodes[${i}]`, 255, 1),
          ),
        }),
  };
}
function seenStarter(v: unknown, path: string): SeenStarter {
  const o = obj(v, path, ['starterPid', 'uid', 'command', 'startTime']);
  const s = {
    starterPid: pidNo(o['starterPid'], `${path}.starterPid`),
    uid: int(o['uid'], `${path}.uid`, 0, 0xffffffff),
    command: str(o['command'], `${path}.command`, 4096),
  };
  return o['startTime'] === undefined
    ? s
    : { ...s, startTime: startTime(o['startTime'], `${path}.startTime`) };
}

// --- ranks -------------------------------------------------------------------------------
// RankSnapshot checked field by field against packages/model snapshot-spec.ts, plus the two
// per-communicator invariants validateSnapshot adds. Written out by hand because the generic
// schema walk (TypeBox Value.Check) costs ~18 us per rank, a third of a 16,384-rank snapshot's
// budget; this guard is ~10x faster. test/protocol.test.ts checks it agrees with
// validateSnapshot on every mutation of a realistic rank, so a spec change that it misses
// fails there.

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;
const BUFFER_RE = /^0x[0-9a-f]{1,16}$/;
const OP_STATUS = ['pending', 'matched', 'complete'] as const;
const NOT_OK = ['error', 'no-queues', 'agent-missing'] as const;
const RANK_KEYS = [
  'rank',
  'pid',
  'host',
  'state',
  'pausedMicros',
  'communicators',
  'threads',
  'stacksError',
  'mpiCall',
  'openmp',
  'openmpError',
  'dll',
  'dllLog',
];
const THREAD_KEYS = ['tid', 'name', 'main', 'frames', 'truncated', 'error', 'ompState'];
const OPENMP_KEYS = ['runtime', 'ompd', 'version', 'threads'];
const OMP_THREAD_KEYS = ['tid', 'threadNum', 'state', 'waitId', 'parallel', 'task'];
const OMP_PARALLEL_KEYS = ['teamSize', 'level', 'activeLevel'];
const OMP_TASK_KEYS = ['function', 'entry', 'kind'];
const OMP_TASK_KINDS = ['initial', 'implicit', 'explicit', 'target', 'unknown'] as const;
const FRAME_KEYS = ['pc', 'function', 'module', 'file', 'line', 'inlined'];
const MPI_CALL_KEYS = ['function', 'tid', 'args'];
const MPI_ARGS_KEYS = ['peer', 'tag', 'communicator', 'count'];
const PC_RE = /^0x[0-9a-f]{1,16}$/;
/** Same caps as snapshot-spec.ts (MAX_FRAMES_PER_THREAD, MAX_THREADS_PER_RANK). */
const MAX_FRAMES = 256;
const MAX_THREADS = 4096;
const COMM_KEYS = [
  'id',
  'name',
  'size',
  'localRank',
  'world',
  'group',
  'remoteGroup',
  'fortranHandle',
  'sends',
  'receives',
  'unexpected',
  'unavailable',
];
const OP_KEYS = [
  'status',
  'peer',
  'tag',
  'length',
  'lengthUnknown',
  'actual',
  'extraText',
  'buffer',
  'systemBuffer',
  'lengthUnit',
];
const LENGTH_UNITS = ['bytes', 'elements'] as const;
const QUEUES = ['sends', 'receives', 'unexpected'] as const;

const nonNeg = (v: unknown, path: string) => int(v, path, 0, Number.MAX_VALUE);
const int32 = (v: unknown, path: string) => int(v, path, INT32_MIN, INT32_MAX);
const int32OrNull = (v: unknown, path: string) => (v === null ? null : int32(v, path));

function peer(v: unknown, path: string): void {
  const o = obj(v, path, ['local', 'global']);
  int32OrNull(o['local'], `${path}.local`);
  int32OrNull(o['global'], `${path}.global`);
}

function operation(v: unknown, path: string): void {
  const o = obj(v, path, OP_KEYS);
  oneOf(o['status'], `${path}.status`, OP_STATUS);
  peer(o['peer'], `${path}.peer`);
  int32OrNull(o['tag'], `${path}.tag`);
  nonNeg(o['length'], `${path}.length`);
  if (o['lengthUnknown'] !== undefined && o['lengthUnknown'] !== true)
    fail(`${path}.lengthUnknown`, 'expected true');
  if (o['actual'] !== null) {
    const a = obj(o['actual'], `${path}.actual`, ['peer', 'tag', 'length']);
    peer(a['peer'], `${path}.actual.peer`);
    int32OrNull(a['tag'], `${path}.actual.tag`);
    if (a['length'] !== null) nonNeg(a['length'], `${path}.actual.length`);
  }
  arr(o['extraText'], `${path}.extraText`, 5).forEach((t, i) => {
    str(t, `${path}.extraText[${i}]`, 64);
  });
  str(o['buffer'], `${path}.buffer`, 18, 3, BUFFER_RE);
  if (typeof o['systemBuffer'] !== 'boolean') fail(`${path}.systemBuffer`, 'expected a boolean');
  // Only where the entry counts in another unit than the snapshot (MPICH ch4's unexpected bytes).
  if (o['lengthUnit'] !== undefined) oneOf(o['lengthUnit'], `${path}.lengthUnit`, LENGTH_UNITS);
}

function communicator(v: unknown, path: string): void {
  const o = obj(v, path, COMM_KEYS);
  str(o['id'], `${path}.id`, 64);
  str(o['name'], `${path}.name`, 256);
  const size = nonNeg(o['size'], `${path}.size`);
  int32(o['localRank'], `${path}.localRank`);
  if (o['world'] !== undefined && typeof o['world'] !== 'boolean')
    fail(`${path}.world`, 'expected a boolean');
  if (o['group'] !== null) {
    const g = arr(o['group'], `${path}.group`, 1 << 24);
    for (let i = 0; i < g.length; i++) int32(g[i], `${path}.group[${i}]`);
    if (g.length !== size) fail(`${path}.group`, `has ${g.length} entries for size ${size}`);
    // analysis/comm.ts isWorld: the world's group is the identity, never sent.
    if (o['world'] === true || (o['world'] === undefined && o['name'] === 'MPI_COMM_WORLD')) {
      fail(`${path}.group`, 'must be null for MPI_COMM_WORLD (it is the identity)');
    }
  }
  // An intercommunicator's remote group (optional; null when the library cannot tell).
  if (o['remoteGroup'] !== undefined && o['remoteGroup'] !== null) {
    const g = arr(o['remoteGroup'], `${path}.remoteGroup`, 1 << 24);
    for (let i = 0; i < g.length; i++) int32(g[i], `${path}.remoteGroup[${i}]`);
  }
  // The Fortran handle (optional; null when the library's structures could not be read).
  if (o['fortranHandle'] !== undefined && o['fortranHandle'] !== null)
    int32(o['fortranHandle'], `${path}.fortranHandle`);
  const un = obj(o['unavailable'], `${path}.unavailable`, QUEUES);
  for (const q of QUEUES) {
    const reason = un[q];
    if (reason !== undefined) {
      const r = obj(reason, `${path}.unavailable.${q}`, ['code', 'message']);
      str(r['code'], `${path}.unavailable.${q}.code`, 64);
      str(r['message'], `${path}.unavailable.${q}.message`, 4096);
    }
    const ops = o[q];
    if ((ops === null) !== (reason !== undefined)) {
      fail(`${path}.${q}`, 'must be null exactly when unavailable gives a reason');
    }
    if (ops !== null) {
      const list = arr(ops, `${path}.${q}`, 1_000_000);
      for (let i = 0; i < list.length; i++) operation(list[i], `${path}.${q}[${i}]`);
    }
  }
}

const strOrNull = (v: unknown, path: string, max: number) => (v === null ? null : str(v, path, max));
const bool = (v: unknown, path: string) => {
  if (typeof v !== 'boolean') fail(path, 'expected a boolean');
};

function codedError(v: unknown, path: string): void {
  const o = obj(v, path, ['code', 'message']);
  str(o['code'], `${path}.code`, 64);
  str(o['message'], `${path}.message`, 4096);
}

function frame(v: unknown, path: string): void {
  const o = obj(v, path, FRAME_KEYS);
  str(o['pc'], `${path}.pc`, 18, 3, PC_RE);
  strOrNull(o['function'], `${path}.function`, 1024);
  strOrNull(o['module'], `${path}.module`, 4096);
  strOrNull(o['file'], `${path}.file`, 4096);
  if (o['line'] !== null) nonNeg(o['line'], `${path}.line`);
  bool(o['inlined'], `${path}.inlined`);
}

function threadStack(v: unknown, path: string): void {
  const o = obj(v, path, THREAD_KEYS);
  int(o['tid'], `${path}.tid`, 1, Number.MAX_VALUE);
  strOrNull(o['name'], `${path}.name`, 64);
  bool(o['main'], `${path}.main`);
  const frames = arr(o['frames'], `${path}.frames`, MAX_FRAMES);
  for (let i = 0; i < frames.length; i++) frame(frames[i], `${path}.frames[${i}]`);
  bool(o['truncated'], `${path}.truncated`);
  if (o['error'] !== null) codedError(o['error'], `${path}.error`);
  if (o['ompState'] !== undefined) str(o['ompState'], `${path}.ompState`, 128);
}

const hexOrNull = (v: unknown, path: string) => (v === null ? null : str(v, path, 18, 3, PC_RE));

function ompThread(v: unknown, path: string): void {
  const o = obj(v, path, OMP_THREAD_KEYS);
  int(o['tid'], `${path}.tid`, 1, Number.MAX_VALUE);
  if (o['threadNum'] !== null) nonNeg(o['threadNum'], `${path}.threadNum`);
  str(o['state'], `${path}.state`, 128);
  hexOrNull(o['waitId'], `${path}.waitId`);
  if (o['parallel'] !== null) {
    const p = obj(o['parallel'], `${path}.parallel`, OMP_PARALLEL_KEYS);
    int(p['teamSize'], `${path}.parallel.teamSize`, 1, Number.MAX_VALUE);
    nonNeg(p['level'], `${path}.parallel.level`);
    if (p['activeLevel'] !== null) nonNeg(p['activeLevel'], `${path}.parallel.activeLevel`);
  }
  if (o['task'] !== null) {
    const t = obj(o['task'], `${path}.task`, OMP_TASK_KEYS);
    strOrNull(t['function'], `${path}.task.function`, 1024);
    hexOrNull(t['entry'], `${path}.task.entry`);
    oneOf(t['kind'], `${path}.task.kind`, OMP_TASK_KINDS);
  }
}

/** The rank's OpenMP fields (issue 15), then the invariants validateSnapshot adds (snapshot-validate.ts). */
function rankOpenMpFields(o: Obj, path: string): void {
  if (o['openmp'] !== undefined && o['openmp'] !== null) {
    const m = obj(o['openmp'], `${path}.openmp`, OPENMP_KEYS);
    str(m['runtime'], `${path}.openmp.runtime`, 4096);
    str(m['ompd'], `${path}.openmp.ompd`, 4096);
    str(m['version'], `${path}.openmp.version`, 1024);
    const threads = arr(m['threads'], `${path}.openmp.threads`, MAX_THREADS);
    for (let i = 0; i < threads.length; i++) ompThread(threads[i], `${path}.openmp.threads[${i}]`);
  }
  if (o['openmpError'] !== undefined) codedError(o['openmpError'], `${path}.openmpError`);
  const broken = openMpInvariant(o as RankSnapshot);
  if (broken !== null) fail(`${path}.openmp`, broken);
}

function mpiCall(v: unknown, path: string): void {
  if (v === null) return;
  const o = obj(v, path, MPI_CALL_KEYS);
  str(o['function'], `${path}.function`, 128);
  int(o['tid'], `${path}.tid`, 1, Number.MAX_VALUE);
  if (o['args'] === null) return;
  const a = obj(o['args'], `${path}.args`, MPI_ARGS_KEYS);
  if (a['peer'] !== null) peer(a['peer'], `${path}.args.peer`);
  int32OrNull(a['tag'], `${path}.args.tag`);
  strOrNull(a['communicator'], `${path}.args.communicator`, 64);
  if (a['count'] !== null) nonNeg(a['count'], `${path}.args.count`);
}

/** The optional stack fields of a rank (absent = not read; JSON never carries undefined). */
function rankStacks(o: Obj, path: string): void {
  if (o['threads'] !== undefined) {
    const threads = arr(o['threads'], `${path}.threads`, MAX_THREADS);
    for (let i = 0; i < threads.length; i++) threadStack(threads[i], `${path}.threads[${i}]`);
  }
  if (o['stacksError'] !== undefined) codedError(o['stacksError'], `${path}.stacksError`);
  if (o['mpiCall'] !== undefined) mpiCall(o['mpiCall'], `${path}.mpiCall`);
}

function rankSnapshot(v: unknown, path: string): RankSnapshot {
  const o = obj(v, path, RANK_KEYS);
  int(o['rank'], `${path}.rank`, 0, INT32_MAX);
  int(o['pid'], `${path}.pid`, 1, Number.MAX_VALUE);
  str(o['host'], `${path}.host`, 255);
  const st = o['state'];
  if ((st as Obj | null)?.['kind'] === 'ok') obj(st, `${path}.state`, ['kind']);
  else {
    const so = obj(st, `${path}.state`, ['kind', 'code', 'message']);
    oneOf(so['kind'], `${path}.state.kind`, NOT_OK);
    str(so['code'], `${path}.state.code`, 64);
    str(so['message'], `${path}.state.message`, 4096);
  }
  if (o['pausedMicros'] !== null) nonNeg(o['pausedMicros'], `${path}.pausedMicros`);
  const comms = arr(o['communicators'], `${path}.communicators`, 65536);
  for (let i = 0; i < comms.length; i++) communicator(comms[i], `${path}.communicators[${i}]`);
  rankStacks(o, path);
  rankOpenMpFields(o, path);
  if (o['dll'] !== undefined) {
    const d = obj(o['dll'], `${path}.dll`, ['path', 'version', 'missingFields', 'renamedFields']);
    str(d['path'], `${path}.dll.path`, 4096);
    str(d['version'], `${path}.dll.version`, 1024);
    // Field lookups the library could not answer, and the renames MQD answered (mqs/dll-fields.ts).
    for (const k of ['missingFields', 'renamedFields'] as const) {
      if (d[k] === undefined) continue;
      const list = arr(d[k], `${path}.dll.${k}`, 64);
      for (let i = 0; i < list.length; i++) str(list[i], `${path}.dll.${k}[${i}]`, 1040);
    }
  }
  if (o['dllLog'] !== undefined) {
    const lines = arr(o['dllLog'], `${path}.dllLog`, 200);
    for (let i = 0; i < lines.length; i++) str(lines[i], `${path}.dllLog[${i}]`, 4096);
  }
  return v as RankSnapshot;
}

function chunkRanks(v: unknown, path: string): RankSnapshot[] {
  const list = arr(v, path, MAX_RANKS_PER_REQUEST);
  const seen = new Set<number>();
  return list.map((r, i) => {
    const rank = rankSnapshot(r, `${path}[${i}]`);
    if (seen.has(rank.rank)) fail(`${path}[${i}].rank`, `rank ${rank.rank} appears twice`);
    seen.add(rank.rank);
    return rank;
  });
}

/** Checks ranks as an agent must send them; the error names the first bad field. */
export function checkRanks(ranks: unknown): Result<RankSnapshot[], string> {
  try {
    return ok(chunkRanks(ranks, 'ranks'));
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

function decode<T>(data: unknown, maxBytes: number, guard: (v: unknown) => T): Result<T, Refusal> {
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
    return ok(guard(json));
  } catch (e) {
    if (!(e instanceof Invalid)) throw e;
    const id = (json as { id?: unknown } | null)?.id;
    const refId = typeof id === 'number' && Number.isInteger(id) && id >= 1 && id <= MAX_ID ? id : null;
    return err({ error: mqdError('MQD_E_BAD_INPUT', `malformed message at ${e.message}`), refId });
  }
}

function agentMessage(v: unknown): AgentMessage {
  const type = oneOf((v as Obj | null)?.['type'], 'type', ['status', 'chunk', 'reply'] as const);
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
        jobs: arr(o['jobs'], 'jobs', MAX_SEEN_JOBS).map((j, i) => seenStarter(j, `jobs[${i}]`)),
      };
    }
    case 'chunk': {
      const o = obj(v, '$', ['type', 'id', 'ranks']);
      return { type, id: reqId(o['id'], 'id'), ranks: chunkRanks(o['ranks'], 'ranks') };
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
      const o = obj(v, '$', ['type', 'protocol', 'agentId', 'maxMessageBytes', 'statusIntervalMs']);
      return {
        type,
        protocol: int(o['protocol'], 'protocol', 0, MAX_ID),
        agentId: str(o['agentId'], 'agentId', 64, 1, AGENT_ID_RE),
        maxMessageBytes: int(o['maxMessageBytes'], 'maxMessageBytes', 1024, Number.MAX_SAFE_INTEGER),
        statusIntervalMs: int(o['statusIntervalMs'], 'statusIntervalMs', 10, MAX_ID),
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
export function decodeAgentMessage(data: unknown, maxBytes: number): Result<AgentMessage, Refusal> {
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
      host: str(o['host'], 'auth.host', 255, 1),
      version: str(o['version'], 'auth.version', 64),
    });
  } catch (e) {
    if (!(e instanceof Invalid)) throw e;
    return err(mqdError('MQD_E_BAD_INPUT', `malformed agent handshake at ${e.message}`));
  }
}
