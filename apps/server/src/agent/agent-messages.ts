// What the agent sends, built within the protocol's limits: texts a local user controls cut to
// their limit, every requested rank answered once (an error rank when it could not be read or
// came back invalid), ranks split into chunks that fit the aggregator's message cap.
import {
  type CoreFileSource,
  clipText,
  type DiscoveredJob,
  MAX_HOST_CHARS,
  MAX_PATH_CHARS,
  type MqdError,
  mqdError,
  type RankSnapshot,
  rankNotRead,
} from '@mqd/model';
import {
  type AgentHealth,
  type DiscoveryScanInfo,
  encodeMessage,
  MAX_COMMAND_CHARS,
  MAX_DISCOVERED_JOBS,
  MAX_DISCOVERY_OMITTED,
  MAX_METHOD_CHARS,
  MAX_RANKS_PER_REQUEST,
  MAX_REQUEST_ID,
  MAX_SEEN_JOBS,
  MAX_SLURM_NAME_CHARS,
} from '../protocol/agent-protocol.js';
import { checkRanks } from '../protocol/agent-protocol-decode.js';
import type { LocatedJob, MpiInfo, RankTarget, SeenStarter } from '../shared/seams.js';

// --- what a local user controls, kept within the protocol's limits ----------------------
// Anyone on the node can start a process named mpirun with a 2 MB command line, or a job whose
// files have 5,000-character names: cut here (clipText, ending in "…") before it leaves the
// node, so one such process never gets a whole status or reply refused.

/** A starter as the status lists it: its command cut to MAX_COMMAND_CHARS. */
export function clipStarter(j: SeenStarter): SeenStarter {
  return { ...j, command: clipText(j.command, MAX_COMMAND_CHARS) };
}

/** A discovered job as the status lists it: the texts a user names cut, at most as many ranks as a request. */
export function clipDiscovered(j: DiscoveredJob): DiscoveredJob {
  const name = (k: 'jobName' | 'partition' | 'account') => {
    const v = j[k];
    return v === undefined ? {} : { [k]: clipText(v, MAX_SLURM_NAME_CHARS) };
  };
  return {
    ...j,
    command: clipText(j.command, MAX_COMMAND_CHARS),
    ...name('jobName'),
    ...name('partition'),
    ...name('account'),
    ranks: j.ranks.length > MAX_RANKS_PER_REQUEST ? j.ranks.slice(0, MAX_RANKS_PER_REQUEST) : j.ranks,
  };
}

/** A located job as the reply carries it: command, method and host names within their limits. */
export function clipLocated(j: LocatedJob): LocatedJob {
  return {
    ...j,
    command: clipText(j.command, MAX_COMMAND_CHARS),
    method: clipText(j.method, MAX_METHOD_CHARS),
    ranks: j.ranks.map((r) => ({ ...r, host: clipText(r.host, MAX_HOST_CHARS) })),
    ...(j.otherNodes === undefined
      ? {}
      : { otherNodes: j.otherNodes.map((h) => clipText(h, MAX_HOST_CHARS)) }),
  };
}

/** The reader's library as messages carry it: the DLL path (named by a job's MPIR_dll_name) within its limit. */
export function clipMpi(m: MpiInfo | null): MpiInfo | null {
  return m === null || m.dll === null ? m : { ...m, dll: clipText(m.dll, MAX_PATH_CHARS) };
}

/** A core's facts as the reply carries them: the paths (named by the job's owner) within their limit. */
export function clipCore(c: CoreFileSource): CoreFileSource {
  return { ...c, path: clipText(c.path, MAX_PATH_CHARS), executable: clipText(c.executable, MAX_PATH_CHARS) };
}

/**
 * The status message, listing as many of `jobs` (at most MAX_SEEN_JOBS, commands clipped) and
 * then of `discovered` (at most MAX_DISCOVERED_JOBS, clipped) as fit `maxBytes`; `omitted` and
 * `omittedDiscovered` count the entries left out; `discoveryScan` (sent as status.discoveryScan)
 * is `scan` with the entries the message left out added. Every starter is at most ~25 KB of JSON
 * (4,096 escaped characters), so only a node with hundreds of long ones loses any.
 */
export function statusMessage(
  health: AgentHealth,
  mpi: MpiInfo | null,
  jobs: readonly SeenStarter[],
  maxBytes: number,
  discovered: readonly DiscoveredJob[] = [],
  scan: DiscoveryScanInfo = { complete: true, omitted: [] },
): {
  readonly bytes: Buffer;
  readonly omitted: number;
  readonly omittedDiscovered: number;
  readonly discoveryScan: DiscoveryScanInfo;
} {
  const listed = jobs.slice(0, MAX_SEEN_JOBS).map(clipStarter);
  const found = discovered.slice(0, MAX_DISCOVERED_JOBS).map(clipDiscovered);
  // Room for the scan's own field as it may end up: every uid left out, with a big count.
  const uids = new Set([...scan.omitted.map((o) => o.uid), ...discovered.map((j) => j.uid)]);
  const widest: DiscoveryScanInfo = {
    complete: false,
    omitted: [...uids].slice(0, MAX_DISCOVERY_OMITTED).map((uid) => ({ uid, jobs: 0x7fffffff })),
  };
  const empty = (s: DiscoveryScanInfo) =>
    encodeMessage({ type: 'status', health, mpi, jobs: [], discovered: [], discoveryScan: s });
  let size = empty(widest).byteLength;
  const fitting = <T>(items: readonly T[]): number => {
    let fit = 0;
    for (const j of items) {
      const n = Buffer.byteLength(JSON.stringify(j)) + (fit > 0 ? 1 : 0);
      if (size + n > maxBytes) break;
      size += n;
      fit++;
    }
    return fit;
  };
  const fit = fitting(listed);
  const fitFound = fitting(found);
  // What the message leaves out of the scan's list is left out of the report like a cap's cut.
  const left = new Map(scan.omitted.map((o) => [o.uid, o.jobs]));
  for (const j of discovered.slice(fitFound)) left.set(j.uid, (left.get(j.uid) ?? 0) + 1);
  const discoveryScan: DiscoveryScanInfo = {
    complete: scan.complete && fitFound === discovered.length,
    omitted: [...left]
      .sort((a, b) => a[0] - b[0])
      .slice(0, MAX_DISCOVERY_OMITTED)
      .map(([uid, n]) => ({ uid, jobs: n })),
  };
  const bytes =
    fit === 0 && fitFound === 0
      ? empty(discoveryScan)
      : encodeMessage({
          type: 'status',
          health,
          mpi,
          jobs: listed.slice(0, fit),
          discovered: found.slice(0, fitFound),
          discoveryScan,
        });
  return {
    bytes,
    omitted: jobs.length - fit,
    omittedDiscovered: discovered.length - fitFound,
    discoveryScan,
  };
}

export function errorRank(
  t: RankTarget,
  host: string,
  e: MqdError,
  pausedMicros: number | null = null,
): RankSnapshot {
  return rankNotRead({ ...t, host }, e, 'error', pausedMicros);
}

/** A rank's stop as the reader measured it, when it is a count of microseconds. */
function stopOf(r: RankSnapshot): number | null {
  const p: unknown = r.pausedMicros;
  return typeof p === 'number' && Number.isSafeInteger(p) && p >= 0 ? p : null;
}

/**
 * Every target answered exactly once, in target order: what the reader returned for it when
 * that is valid, otherwise an error rank saying why.
 */
export function completeAnswer(
  targets: readonly RankTarget[],
  got: readonly RankSnapshot[],
  host: string,
  failure: MqdError | null,
): RankSnapshot[] {
  const byRank = new Map<number, RankSnapshot>();
  for (const r of got) if (typeof r?.rank === 'number') byRank.set(r.rank, r);
  const answer = targets.map((t) => {
    const r = byRank.get(t.rank);
    if (r !== undefined && r.pid === t.pid) return r;
    return errorRank(
      t,
      host,
      failure ??
        mqdError('MQD_E_INTERNAL', `the rank reader returned no snapshot for rank ${t.rank} (pid ${t.pid})`),
    );
  });
  // The reader is foreign code: check what it produced here, so one bad rank becomes an error
  // rank instead of getting the whole chunk refused by the aggregator.
  if (checkRanks(answer).ok) return answer;
  return answer.map((r, i) => {
    const v = checkRanks([r]);
    const t = targets[i];
    if (v.ok || t === undefined) return r;
    // The rank was stopped for what it produced: its stop is kept, so the hang watch charges it.
    return errorRank(
      t,
      host,
      mqdError('MQD_E_INTERNAL', `the rank reader produced an invalid snapshot at ${v.error}`),
      r.pid === t.pid ? stopOf(r) : null,
    );
  });
}

/**
 * The bytes one rank may take so that a chunk holding it alone fits `maxBytes`: the reader's
 * walk budget (ReadOptions.maxRankBytes), so a deeper rank is refused while it is walked rather
 * than built, serialised and then refused here.
 */
export function rankBudget(maxBytes: number): number {
  return Math.max(0, maxBytes - Buffer.byteLength(`{"type":"chunk","id":${MAX_REQUEST_ID},"ranks":[]}`));
}

/** Splits serialised ranks into chunk messages of at most maxBytes each. */
export function* chunkMessages(id: number, ranks: readonly RankSnapshot[], host: string, maxBytes: number) {
  const head = `{"type":"chunk","id":${id},"ranks":[`;
  const tail = ']}';
  const overhead = Buffer.byteLength(head) + tail.length;
  let parts: string[] = [];
  let size = overhead;
  for (const r of ranks) {
    let s = JSON.stringify(r);
    let n = Buffer.byteLength(s);
    if (n + overhead > maxBytes) {
      s = JSON.stringify(
        errorRank(
          r,
          host,
          mqdError(
            'MQD_E_READ_BUDGET',
            `the snapshot of rank ${r.rank} is ${n} bytes, over the ${maxBytes}-byte message limit`,
          ),
          stopOf(r),
        ),
      );
      n = Buffer.byteLength(s);
    }
    if (parts.length > 0 && size + n + 1 > maxBytes) {
      yield Buffer.from(head + parts.join(',') + tail, 'utf8');
      parts = [];
      size = overhead;
    }
    parts.push(s);
    size += n + 1;
  }
  if (parts.length > 0) yield Buffer.from(head + parts.join(',') + tail, 'utf8');
}
