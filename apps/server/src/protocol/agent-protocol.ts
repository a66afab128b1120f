// The agent <-> aggregator wire protocol: the one spec for what a per-node agent
// (`mqd agent --server URL --token T`) and the aggregator say to each other.
// The messages' shapes and limits are one TypeBox spec, packages/model agent-spec.ts; the types
// here are made from it, and both ends decode with agent-protocol-decode.ts, which compiles it.
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
//   request  {type, id, method: 'counters', params: {ranks: [{rank, pid, startTime}], ownerUid}}
//            (protocol 3, the hang watch) the /proc counters of these ranks (at most
//            MAX_RANKS_PER_REQUEST), read WITHOUT stopping or tracing anything: /proc/PID/stat
//            (utime + stime, state) and /proc/PID/task/*/status (context switches). As for a
//            snapshot, each pid must still have its startTime (else MQD_E_PID_REUSED) and
//            belong to ownerUid in all its ids (else MQD_E_FOREIGN_PROCESS); a uid-0 job's
//            counters are read only when ownerUid is 0. Answered by one `reply`.
//   request  {type, id, method: 'capture', params: {ranks: [{rank, pid, startTime}], ownerUid, name}}
//            (the hang watch's cores, policy captureCores) write one core per rank and a
//            `mqd capture` manifest into `<the agent's first --core-dir>/<name>`; name is one
//            path component ([A-Za-z0-9][A-Za-z0-9._-]*, <= 200 chars). The agent refuses without
//            a core directory (MQD_E_CORE_DIR_FORBIDDEN), checks each pid's start time and owner
//            as for a snapshot, and writes nothing as root: the directory, the cores and the
//            manifest are made by processes that are ownerUid (uid 0 only when ownerUid is 0).
//            Each rank is stopped only while its core is written. Answered by one `reply`.
//   refused  {type, refId, error: {code, message}}
//            the aggregator dropped one of the agent's messages (too big, not JSON, wrong
//            shape, unknown or finished request id), or entries of one (ranks of a chunk,
//            starters of a status: the message says which); refId is the message's request id
//            when it could be read, else null. Nothing refused is kept.
//
// Messages, agent -> aggregator
//   status   {type, health, mpi, jobs, discovered}
//            health: {rssBytes, heapUsedBytes (bytes), uptimeSeconds, loadAverage1m,
//            activeRequests, lastError: {code, message} | null}; mpi: the reader's library
//            and DLL or null; jobs: MPI starters seen on the node (<= MAX_SEEN_JOBS),
//            [{starterPid, uid, command, startTime?}]. Everything here a local user controls
//            (a command line: anyone can start a process named mpirun) is cut to its limit by
//            the agent (clipText, ending in "…": command <= MAX_COMMAND_CHARS), and the agent
//            lists only as many starters as fit maxMessageBytes; a starter entry that is still
//            malformed is dropped by the aggregator, the rest of the status kept.
//            discovered (protocol 3, the hang watch): the MPI jobs the agent found on its node
//            by itself (packages/model watch-spec.ts DiscoveredJob; packages/mpir discover.ts),
//            rescanned for every status, <= MAX_DISCOVERED_JOBS:
//            [{key, kind, slurmJob?, starterPid?, starterStartTime?, uid, command, startedAt,
//            jobName?, partition?, account?, worldSize?, watch, ranks: [{rank, pid, startTime}]}].
//            key is `slurm:JOBID` (kind slurm, slurmJob = JOBID, digits) or
//            `starter:HOST:PID:STARTTIME` (kind starter, PID:STARTTIME = starterPid and
//            starterStartTime); startedAt is epoch ms; command <= MAX_COMMAND_CHARS, jobName,
//            partition and account <= MAX_SLURM_NAME_CHARS (clipped by the agent); ranks
//            <= MAX_RANKS_PER_REQUEST, each rank once. An entry has one uid: two entries may
//            share a key with different uids (a rank of another user naming the same Slurm job
//            or starter): (key, uid) names a job, and entries of different uids must never be
//            merged. The agent lists after the starters as many entries as fit maxMessageBytes;
//            a malformed entry is dropped by the aggregator alone, the rest of the status kept.
//            discoveryScan {complete, omitted: [{uid, jobs}]} (optional; absent from agents that
//            predate it): whether `discovered` is every job the node runs. complete is false when
//            the scan was cut at a cap (DISCOVERY_LIMITS: per uid, then per node), the message
//            size cut entries, /proc could not be listed or discovery failed; omitted says per
//            uid (<= MAX_DISCOVERY_OMITTED entries) how many jobs were left out. A job missing
//            from an incomplete report has not ended: the aggregator ends a job on a complete
//            report only (or when its ranks are verifiably gone). Without the field, a report
//            of MAX_DISCOVERED_JOBS entries (or one the aggregator dropped entries of) is taken
//            as incomplete.
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
//              counters: {ranks: [{rank, cpuTicks, switches, state}], errors: [{rank, error:
//                        {code, message}}], clockTicksPerSecond, at}: one entry per asked rank,
//                        in ranks (packages/model RankCounters: cpuTicks in clock ticks of
//                        clockTicksPerSecond, switches voluntary + nonvoluntary of every
//                        thread, state the one-letter /proc state) or in errors; at = epoch ms
//                        of the read.
//              capture:  {dir, ranks: [{rank, pid, core, bytes, pausedMicros, error}]}: dir = the
//                        real path written, one entry per asked rank, core = the file name in dir
//                        or null with error {code, message}; pausedMicros = the rank's stop.
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
  type AgentMessage,
  type DiscoveryScanInfo,
  type ErrorCode,
  isErrorCode,
  type MqdError,
  mqdError,
  type ServerMessage,
  type WireError,
} from '@mqd/model';

export type {
  AgentHandshake,
  AgentHealth,
  AgentMessage,
  DiscoveryScanInfo,
  LocateTarget,
  ReplyMessage,
  RequestMethod,
  ServerMessage,
  SnapshotParams,
  SnapshotResult,
  WireError,
} from '@mqd/model';
export {
  AGENT_PROTOCOL_VERSION,
  CAPTURE_NAME_RE,
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
} from '@mqd/model';
export type {
  CapturedRank,
  CaptureParams,
  CaptureResult,
  CounterError,
  CountersParams,
  CountersResult,
} from '../shared/seams.js';

export const AGENT_NAMESPACE = '/agents';
export const UI_NAMESPACE = '/ui';
export const WIRE_EVENT = 'mqd';
export const DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024;
/** Default for welcome.keepaliveMs: how often an agent says it is still at work on a request. */
export const DEFAULT_KEEPALIVE_MS = 2000;

/** One node's latest discoveryScan as the aggregator keeps it: its host, and when it came (clock ms). */
export interface DiscoveryScanReport extends DiscoveryScanInfo {
  readonly host: string;
  readonly at: number;
}

/**
 * What decodeAgentMessage gives: the message with what was valid in it, and the entries it
 * dropped (a chunk's ranks, a status's starters), absent when none was. A chunk all of whose
 * ranks were kept carries their JSON as the agent sent it (`ranksText`), when its bytes are laid
 * out as chunkMessages lays them out.
 */
export type DecodedAgentMessage = (
  | Exclude<AgentMessage, { readonly type: 'chunk' }>
  | (Extract<AgentMessage, { readonly type: 'chunk' }> & ChunkText)
) &
  Dropped;
export interface ChunkText {
  /**
   * The chunk's ranks as JSON texts joined by commas, exactly as received (a view of the
   * message's bytes): the array's elements, checked to be nothing else, in the order of `ranks`.
   * The aggregator stores it as it is instead of making each rank's JSON again.
   */
  readonly ranksText?: Buffer;
}
export interface Dropped {
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

/** What a refused message is answered with: the error, and the request id when it was readable. */
export interface Refusal {
  readonly error: MqdError;
  readonly refId: number | null;
}
