// The agent protocol's decoders: validation at the edge, both ends. The messages' shapes and
// limits are the spec's (packages/model agent-spec.ts), each schema compiled once, on first use
// (checkWire, TypeBox's TypeCompiler, as checkRank); this file adds only what a schema cannot say (each rank once, a
// discovered job's key, a captured rank's core or error, the entries of a status dropped
// alone) and says where the first bad field is, e.g. `params.ranks[0].pid: expected an integer
// in [1, 1073741823]`. Ranks are checked by the snapshot spec's own validator (checkRanks, below).
import {
  AgentHandshake,
  AliveMessage,
  ChunkEnvelope,
  checkRank,
  checkWire,
  DiscoveryScanInfo,
  err,
  FailedReplyMessage,
  LOCATE_KEYS,
  MAX_DISCOVERED_JOBS,
  MAX_HOST_CHARS,
  MAX_RANK,
  MAX_REQUEST_ID,
  mqdError,
  ok,
  type RankSnapshot,
  REPLY_MESSAGES,
  REQUEST_MESSAGES,
  RefusedMessage,
  type Result,
  SeenStarter,
  STARTER_KEY_RE,
  StatusEnvelope,
  WelcomeMessage,
  type Wire,
  WireDiscoveredJob,
  type WireSchema,
  wireFieldPath,
} from '@mqd/model';
import type {
  AgentMessage,
  DecodedAgentMessage,
  Dropped,
  DroppedEntry,
  Refusal,
  ServerMessage,
} from './agent-protocol.js';

class Invalid extends Error {}
type Obj = Record<string, unknown>;

function fail(path: string, what: string): never {
  throw new Invalid(`${path}: ${what}`);
}

/** `v` as the spec's `schema` says, else Invalid naming the first bad field under `root`. */
function check<T extends WireSchema>(schema: T, v: unknown, root: string): Wire<T> {
  const fault = checkWire(schema, v);
  if (fault === null) return v as Wire<T>;
  const at = root + fault.path;
  return fail(at === '' ? '$' : at.replace(/^\./, ''), fault.message);
}

/** Each rank of `list` once; else Invalid at the second one's rank. */
function onceEach(list: readonly { readonly rank: number }[], path: (i: number) => string): void {
  const seen = new Set<number>();
  list.forEach((r, i) => {
    if (seen.has(r.rank)) fail(path(i), `rank ${r.rank} appears twice`);
    seen.add(r.rank);
  });
}

// --- a status: its entries dropped alone ----------------------------------------------------

/** Each entry of `list` checked by `read`; a malformed one dropped (local users name them), the rest kept. */
function entries<T>(
  list: readonly unknown[],
  root: string,
  read: (v: unknown, path: string) => T,
  dropped: DroppedEntry[],
): T[] {
  const out: T[] = [];
  list.forEach((v, i) => {
    try {
      out.push(read(v, `${root}[${i}]`));
    } catch (e) {
      if (!(e instanceof Invalid)) throw e;
      dropped.push({ why: e.message });
    }
  });
  return out;
}

/** A discovered job: the spec, then its key as its kind says it. */
function discoveredJob(v: unknown, path: string): Wire<typeof WireDiscoveredJob> {
  const j = check(WireDiscoveredJob, v, path);
  if (j.kind === 'slurm') {
    if (j.slurmJob === undefined || j.key !== `slurm:${j.slurmJob}`)
      fail(`${path}.key`, 'expected slurm:<slurmJob>');
    if (j.starterPid !== undefined || j.starterStartTime !== undefined) {
      fail(`${path}.starterPid`, 'not allowed for a Slurm job');
    }
  } else {
    const m = STARTER_KEY_RE.exec(j.key);
    if (j.slurmJob !== undefined) fail(`${path}.slurmJob`, 'not allowed for a starter job');
    if (
      m === null ||
      (m[1] ?? '').length > MAX_HOST_CHARS ||
      j.starterPid === undefined ||
      j.starterStartTime === undefined ||
      m[2] !== String(j.starterPid) ||
      m[3] !== j.starterStartTime
    ) {
      fail(`${path}.key`, 'expected starter:<host>:<starterPid>:<starterStartTime>');
    }
  }
  onceEach(j.ranks, (i) => `${path}.ranks[${i}].rank`);
  return j;
}

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
): Wire<typeof DiscoveryScanInfo> {
  let scan: Wire<typeof DiscoveryScanInfo>;
  if (v === undefined) scan = { complete: listed < MAX_DISCOVERED_JOBS, omitted: [] };
  else {
    try {
      const s = check(DiscoveryScanInfo, v, 'discoveryScan');
      const seen = new Set<number>();
      s.omitted.forEach((o, i) => {
        if (seen.has(o.uid)) fail(`discoveryScan.omitted[${i}].uid`, 'named twice');
        seen.add(o.uid);
      });
      scan = { complete: s.complete && s.omitted.length === 0, omitted: s.omitted };
    } catch (e) {
      if (!(e instanceof Invalid)) throw e;
      dropped.push({ why: e.message });
      scan = { complete: false, omitted: [] };
    }
  }
  return droppedJobs > 0 ? { ...scan, complete: false } : scan;
}

function statusMessage(v: unknown, dropped: DroppedEntry[]): AgentMessage {
  const o = check(StatusEnvelope, v, '');
  const jobs = entries(o.jobs, 'jobs', (x, p) => check(SeenStarter, x, p), dropped);
  const before = dropped.length;
  const discovered = entries(o.discovered, 'discovered', discoveredJob, dropped);
  const droppedJobs = dropped.length - before;
  return {
    type: o.type,
    health: o.health,
    mpi: o.mpi,
    jobs,
    discovered,
    discoveryScan: discoveryScan(o.discoveryScan, o.discovered.length, droppedJobs, dropped),
  };
}

// --- replies and requests: the rules a schema cannot say -----------------------------------

const METHODS = Object.keys(REQUEST_MESSAGES) as (keyof typeof REQUEST_MESSAGES)[];
const isMethod = (m: unknown): m is keyof typeof REQUEST_MESSAGES =>
  typeof m === 'string' && Object.hasOwn(REQUEST_MESSAGES, m);
const field = (v: unknown, k: string): unknown =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj)[k] : undefined;

function replyMessage(v: unknown): AgentMessage {
  const method = field(v, 'method');
  if (!isMethod(method)) fail('method', `expected one of ${METHODS.join(', ')}`);
  if (field(v, 'ok') === false) return check(FailedReplyMessage, v, '');
  switch (method) {
    case 'snapshot':
      return check(REPLY_MESSAGES.snapshot, v, '');
    case 'locate': {
      const m = check(REPLY_MESSAGES.locate, v, '');
      onceEach(m.result.ranks, () => 'result.ranks');
      return m;
    }
    case 'counters': {
      const m = check(REPLY_MESSAGES.counters, v, '');
      const { ranks, errors } = m.result;
      onceEach([...ranks, ...errors], (i) =>
        i < ranks.length ? `result.ranks[${i}].rank` : `result.errors[${i - ranks.length}].rank`,
      );
      return m;
    }
    case 'capture': {
      const m = check(REPLY_MESSAGES.capture, v, '');
      onceEach(m.result.ranks, (i) => `result.ranks[${i}].rank`);
      m.result.ranks.forEach((r, i) => {
        if ((r.core === null) === (r.error === null))
          fail(`result.ranks[${i}]`, 'expected either a core or an error');
      });
      return m;
    }
  }
}

function requestMessage(v: unknown): ServerMessage {
  const method = field(v, 'method');
  if (!isMethod(method)) fail('method', `expected one of ${METHODS.join(', ')}`);
  switch (method) {
    case 'snapshot':
      return check(REQUEST_MESSAGES.snapshot, v, '');
    case 'locate': {
      const p = field(v, 'params');
      if (typeof p === 'object' && p !== null && LOCATE_KEYS.filter((k) => k in p).length !== 1) {
        fail(
          'params',
          `expected exactly one of ${LOCATE_KEYS.slice(0, -1).join(', ')} and ${LOCATE_KEYS.at(-1)}`,
        );
      }
      return check(REQUEST_MESSAGES.locate, v, '');
    }
    case 'counters':
    case 'capture': {
      const m = check(REQUEST_MESSAGES[method], v, '');
      onceEach(m.params.ranks, (i) => `params.ranks[${i}].rank`);
      return m;
    }
  }
}

function agentMessage(v: unknown, dropped: DroppedEntry[]): AgentMessage {
  const type = field(v, 'type');
  switch (type) {
    case 'status':
      return statusMessage(v, dropped);
    case 'chunk': {
      const o = check(ChunkEnvelope, v, '');
      return { type: o.type, id: o.id, ranks: chunkRanks(o.ranks, 'ranks', dropped) };
    }
    case 'alive':
      return check(AliveMessage, v, '');
    case 'reply':
      return replyMessage(v);
    default:
      return fail('type', 'expected one of status, chunk, alive, reply');
  }
}

function serverMessage(v: unknown): ServerMessage {
  const type = field(v, 'type');
  switch (type) {
    case 'welcome':
      return check(WelcomeMessage, v, '');
    case 'request':
      return requestMessage(v);
    case 'refused':
      return check(RefusedMessage, v, '');
    default:
      return fail('type', 'expected one of welcome, request, refused');
  }
}

// --- ranks -------------------------------------------------------------------------------
// A rank is checked by the snapshot spec's own validator (packages/model checkRank: the compiled
// schema and validateSnapshot's per-rank invariants), so whatever an agent gets stored opens in
// the dashboard and through share links (16,384 realistic ranks: ~36 ms). One bad rank is
// dropped, not its whole chunk.

const isInt = (v: unknown, min: number, max: number): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;

function chunkRanks(v: unknown, path: string, dropped: DroppedEntry[]): RankSnapshot[] {
  const list = check(ChunkEnvelope.properties.ranks, v, path);
  const seen = new Set<number>();
  const out: RankSnapshot[] = [];
  for (let i = 0; i < list.length; i++) {
    const x = list[i];
    const bad = checkRank(x);
    const r = x as RankSnapshot;
    let why = bad === null ? null : `${path}[${i}]${wireFieldPath(bad.path)}: ${bad.message}`;
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
    const id = check(ChunkEnvelope.properties.id, Number(head[1]), 'id');
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
export function parseHandshake(v: unknown): Result<Wire<typeof AgentHandshake>> {
  try {
    return ok(check(AgentHandshake, v, 'auth'));
  } catch (e) {
    if (!(e instanceof Invalid)) throw e;
    return err(mqdError('MQD_E_BAD_INPUT', `malformed agent handshake at ${e.message}`));
  }
}
