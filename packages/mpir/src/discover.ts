// Finding the MPI jobs of this node by themselves (the hang watch, docs/hang-watch.md): a scan of
// /proc that reads only files (stat, environ, status, cmdline, maps) and stops nothing. A rank
// is a process whose environment names its MPI rank (the rules of rankInEnviron, as slurm.ts
// uses them) and that maps an MPI library; its job is its Slurm job (every step merged, key
// `slurm:JOBID`) or else the outermost MPI starter above it (key `starter:HOST:PID:STARTTIME`).
// One entry has one uid: a rank of another uid than its job's is listed in an entry of its own
// (its uid; a Slurm job's key, or outside Slurm keyed by its own first rank, as the agent
// protocol wants a starter key to name the entry's starterPid), never mixed in. Everything a
// user controls (command lines, names, environment values) is clipped or validated here. Processes that vanish mid-scan are skipped.
//
// Caps are shared fairly: each uid keeps at most `jobsPerUid` jobs (its oldest), and the node's
// `jobs` are split between uids by max-min fair share, so one user's thousand look-alike
// processes cannot push another user's (or root's) jobs out of the report. A report cut at a
// cap says so (`complete: false`, with how many jobs of each uid were left out): the
// aggregator ends a job only when a complete report no longer lists it.
//
// Cost: environ is read once per process (cached by pid, start time and comm: an exec changes
// comm, a fork that has not exec'd yet keeps its parent's), maps only for processes that name a
// rank, and `scontrol listpids` once per Slurm job until a rank it did not list shows up. A
// steady node costs one readdir and one stat read per process per scan.
//
// The per-rank /proc counters the agent's `counters` request answers are in counters.ts.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { procCredentials, RANK_ENV_VARS, readEnviron, readProcStat } from '@mqd/core';
import {
  clipText,
  type DiscoveredJob,
  type DiscoveredRank,
  type DiscoveryOmitted,
  type DiscoveryScan,
  WATCH_OPT_OUT_VARIABLE,
} from '@mqd/model';
import { localHost } from './host.js';
import { mapsMpiLibrary } from './procfs.js';
import type { SlurmRunner } from './slurm.js';

/** Limits of what discovery reports (the agent protocol checks the same ones). */
export const DISCOVERY_LIMITS = {
  /** A job's command line, in UTF-16 units (clipped, ending in "…"). */
  commandChars: 4096,
  /** A Slurm job name, partition or account (clipped). */
  nameChars: 128,
  /** Jobs one scan reports. */
  jobs: 1024,
  /** Jobs of one uid one scan reports (its oldest), before the node's fair share of `jobs`. */
  jobsPerUid: 256,
  /** Ranks of one job on one node. */
  ranks: 16_384,
  /** Slurm job ids: digits only, at most this many. */
  slurmIdDigits: 20,
} as const;

/** Processes that start ranks and are never ranks themselves (comm, at most 15 characters). */
export const STARTER_NAMES: ReadonlySet<string> = new Set([
  'mpirun',
  'mpiexec',
  'orterun',
  'prterun',
  'prte',
  'mpiexec.hydra',
  'hydra_pmi_proxy',
  'prted',
  'orted',
  'srun',
  'slurmstepd',
]);

/** The outermost starters key a job outside Slurm; these only relay (never the outermost). */
const RELAY_NAMES: ReadonlySet<string> = new Set(['hydra_pmi_proxy', 'prted', 'orted', 'slurmstepd']);

/** What one process's environment says, cached per (pid, start time, comm). */
interface EnvFacts {
  readonly rank: number | null;
  readonly worldSize: number | null;
  readonly slurmJob: string | null;
  readonly jobName: string | null;
  readonly partition: string | null;
  readonly account: string | null;
  readonly watchOff: boolean;
}

/** State kept between scans so a steady node costs little (one per agent). */
export class DiscoveryCache {
  /** `pid:startTime:comm` -> what its environment says (null: unreadable). */
  readonly env = new Map<string, EnvFacts | null>();
  /** `pid:startTime` of processes found to map an MPI library (a yes never changes). */
  readonly mpi = new Set<string>();
  /**
   * `pid:startTime` of processes that named a rank but mapped no MPI library -> scans left
   * before their maps are read again (a library may be loaded later, e.g. by mpi4py): a user's
   * thousand look-alikes do not cost a thousand maps reads every scan.
   */
  readonly noMpi = new Map<string, number>();
  /** Slurm job id -> the `pid:startTime`s `scontrol listpids` listed for it on this node. */
  readonly slurmPids = new Map<string, Set<string>>();
  /**
   * `pid:startTime`s that named a Slurm job whose listpids (answered by slurmd) did not list
   * them: not asked about again while they live (a faked SLURM_JOB_ID costs one scontrol).
   */
  readonly slurmRejected = new Set<string>();
  /** Entries not seen by the last scan are dropped after it. */
  prune(live: ReadonlySet<string>): void {
    for (const k of this.env.keys()) if (!live.has(k)) this.env.delete(k);
    for (const k of this.mpi) if (!live.has(k)) this.mpi.delete(k);
    for (const k of this.noMpi.keys()) if (!live.has(k)) this.noMpi.delete(k);
    for (const k of this.slurmRejected) if (!live.has(k)) this.slurmRejected.delete(k);
  }
}

export interface DiscoverOptions {
  /** This node's name as keys carry it; default localHost().short. */
  readonly host?: string;
  /**
   * Slurm's client where slurmd runs on this node: ranks of a Slurm job are kept only when
   * `scontrol listpids JOBID` lists them (a user cannot fake another job's SLURM_JOB_ID).
   * Null or absent: not checked.
   */
  readonly slurm?: SlurmRunner | null;
  /** Kept between scans (new DiscoveryCache()); a fresh one per call when absent. */
  readonly cache?: DiscoveryCache;
  /** Where to report what was left out (a failed listpids). */
  readonly log?: (line: string) => void;
  /** What is read of /proc; default the real one (a test passes a table of its own). */
  readonly procfs?: ProcSource;
  /** Caps; default DISCOVERY_LIMITS' (a test passes small ones). */
  readonly limits?: { readonly jobs: number; readonly jobsPerUid: number };
}

/**
 * The reads discovery makes of /proc, each null (or false) when the process is gone or the
 * file unreadable. `list` is null when /proc itself cannot be listed: nothing is known then.
 */
export interface ProcSource {
  list(): readonly Proc[] | null;
  environ(pid: number): ReadonlyMap<string, string> | null;
  mapsMpi(pid: number): boolean | null;
  uid(pid: number): number | null;
  cmdline(pid: number): string | null;
}

/** One process as /proc/PID/stat names it. */
export interface Proc {
  readonly pid: number;
  readonly ppid: number;
  readonly comm: string;
  readonly startTime: string;
}

const DIGITS = /^\d+$/;
/** Scans skipped before a process that named a rank without an MPI library is looked at again. */
const NO_MPI_RECHECK_SCANS = 5;

/** `s` with every control character (C0, DEL and C1: /proc is read as latin1) replaced by `by`. */
function noControls(s: string, by: string): string {
  let out = '';
  for (const ch of s) {
    const c = ch.charCodeAt(0);
    out += c < 0x20 || (c >= 0x7f && c <= 0x9f) ? by : ch;
  }
  return out;
}

function clipName(v: string | undefined): string | null {
  if (v === undefined || v === '') return null;
  // Control characters are no name's part; a user could put anything in the environment.
  const clean = noControls(v.slice(0, 4 * DISCOVERY_LIMITS.nameChars), '');
  return clean === '' ? null : clipText(clean, DISCOVERY_LIMITS.nameChars);
}

function sizeOf(env: ReadonlyMap<string, string>): number | null {
  for (const v of ['OMPI_COMM_WORLD_SIZE', 'PMI_SIZE', 'PMIX_SIZE', 'SLURM_NTASKS']) {
    const s = env.get(v);
    if (s !== undefined && /^\d{1,10}$/.test(s)) {
      const n = Number(s);
      if (n >= 1 && n <= 0x7fffffff) return n;
    }
  }
  return null;
}

/** MQD_WATCH=off (or 0, no, false; any case). */
export function watchOptedOut(value: string | undefined): boolean {
  return value !== undefined && /^(off|0|no|false)$/i.test(value.trim());
}

/** The rank an environment names: the first of RANK_ENV_VARS (rankFromEnviron's rule) that is a number. */
function rankIn(env: ReadonlyMap<string, string>): number | null {
  for (const v of RANK_ENV_VARS) {
    const s = env.get(v);
    if (s !== undefined && /^\d{1,10}$/.test(s)) return Number(s) <= 0x7fffffff ? Number(s) : null;
  }
  return null;
}

function envFacts(env: ReadonlyMap<string, string>): EnvFacts {
  const rank = rankIn(env);
  const job = env.get('SLURM_JOB_ID') ?? env.get('SLURM_JOBID');
  return {
    rank,
    worldSize: sizeOf(env),
    slurmJob:
      job !== undefined && DIGITS.test(job) && job.length <= DISCOVERY_LIMITS.slurmIdDigits ? job : null,
    jobName: clipName(env.get('SLURM_JOB_NAME')),
    partition: clipName(env.get('SLURM_JOB_PARTITION')),
    account: clipName(env.get('SLURM_JOB_ACCOUNT')),
    watchOff: watchOptedOut(env.get(WATCH_OPT_OUT_VARIABLE)),
  };
}

function listProcs(): Proc[] | null {
  const out: Proc[] = [];
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return null;
  }
  for (const name of names) {
    if (!DIGITS.test(name)) continue;
    const st = readProcStat(Number(name));
    // Gone between readdir and read, or a zombie: not part of any job any more.
    if (st === null || st.state === 'Z' || st.state === 'X') continue;
    out.push({ pid: st.pid, ppid: st.ppid, comm: st.comm, startTime: st.startTime });
  }
  return out;
}

function cmdlineOf(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1');
  } catch {
    return null;
  }
}

/** The real /proc. */
export const REAL_PROCFS: ProcSource = {
  list: listProcs,
  environ: readEnviron,
  mapsMpi: (pid) => {
    const m = mapsMpiLibrary(pid);
    return m.ok ? m.value : null;
  },
  uid: (pid) => procCredentials(pid)?.uids[0] ?? null,
  cmdline: cmdlineOf,
};

function commandOf(pid: number, fs: ProcSource): string | null {
  const raw = fs.cmdline(pid);
  if (raw === null) return null;
  // Clipped first: a 2 MB command line is not scanned character by character.
  const args = raw
    .slice(0, 4 * DISCOVERY_LIMITS.commandChars)
    .replace(/\0+$/, '')
    .split('\0');
  return clipText(noControls(args.join(' '), ' '), DISCOVERY_LIMITS.commandChars);
}

let bootMs: number | null = null;
let ticksPerSecond: number | null = null;

/** sysconf(_SC_CLK_TCK): USER_HZ, the unit of /proc's tick counts (100 on every Linux port in use). */
export function clockTicksPerSecond(): number {
  if (ticksPerSecond === null) {
    try {
      const n = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5000 }).trim());
      ticksPerSecond = Number.isInteger(n) && n > 0 && n <= 1_000_000 ? n : 100;
    } catch {
      ticksPerSecond = 100; // no getconf: USER_HZ is 100 on x86, arm and power
    }
  }
  return ticksPerSecond;
}

/** Epoch ms of a /proc start time (ticks after boot): btime of /proc/stat + ticks / USER_HZ. */
export function startTimeToEpochMs(startTime: string): number {
  if (bootMs === null) {
    try {
      const m = /^btime\s+(\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'));
      bootMs = m?.[1] ? Number(m[1]) * 1000 : 0;
    } catch {
      bootMs = 0;
    }
  }
  return Math.round(bootMs + (Number(startTime) * 1000) / clockTicksPerSecond());
}

interface FoundRank {
  readonly proc: Proc;
  readonly facts: EnvFacts;
  readonly uid: number;
  /** The outermost starter above it (outside Slurm), or null. */
  readonly starter: Proc | null;
}

/** The outermost starter among the ancestors of `p` (relays only when no real starter is above). */
function outermostStarter(p: Proc, procs: ReadonlyMap<number, Proc>): Proc | null {
  let found: Proc | null = null;
  let relay: Proc | null = null;
  const seen = new Set<number>([p.pid]);
  for (let q = procs.get(p.ppid); q !== undefined && !seen.has(q.pid); q = procs.get(q.ppid)) {
    seen.add(q.pid);
    if (STARTER_NAMES.has(q.comm)) {
      if (RELAY_NAMES.has(q.comm)) relay = q;
      else found = q;
    }
    if (q.pid <= 1) break;
  }
  return found ?? relay;
}

/**
 * Pids (as `pid:startTime`) Slurm lists for the job on this node, or null when Slurm cannot
 * say (scontrol failed for another reason than an unknown job: then nothing is filtered).
 */
function slurmListed(
  jobId: string,
  found: readonly FoundRank[],
  procs: ReadonlyMap<number, Proc>,
  o: DiscoverOptions,
  cache: DiscoveryCache,
): Set<string> | null {
  const cached = cache.slurmPids.get(jobId);
  const known = (s: ReadonlySet<string>) =>
    found.every((r) => {
      const id = `${r.proc.pid}:${r.proc.startTime}`;
      return s.has(id) || cache.slurmRejected.has(id);
    });
  if (cached !== undefined && known(cached)) return cached;
  const run = o.slurm;
  if (!run) return null;
  let out: string;
  try {
    out = run('scontrol', ['listpids', jobId]);
  } catch (e) {
    const x = e as { stderr?: string | Buffer; message?: string };
    const text = String(x.stderr ?? x.message ?? e).trim();
    // slurmd answered that the job has no process here: none of these pids is the job's.
    if (/invalid job id|not found|no such job|does not exist|no job steps exist/i.test(text)) {
      const none = new Set<string>();
      cache.slurmPids.set(jobId, none);
      for (const r of found) cache.slurmRejected.add(`${r.proc.pid}:${r.proc.startTime}`);
      return none;
    }
    o.log?.(`discovery: scontrol listpids ${jobId} failed (${text.slice(0, 200)}); its ranks kept unchecked`);
    return null;
  }
  const listed = new Set<string>();
  for (const line of out.split('\n').slice(1)) {
    const [pid, job] = line.trim().split(/\s+/);
    if (pid && DIGITS.test(pid) && job === jobId) {
      const p = procs.get(Number(pid));
      if (p) listed.add(`${p.pid}:${p.startTime}`);
    }
  }
  cache.slurmPids.set(jobId, listed);
  for (const r of found) {
    const id = `${r.proc.pid}:${r.proc.startTime}`;
    if (!listed.has(id)) cache.slurmRejected.add(id);
  }
  return listed;
}

function byRankThenPid(a: FoundRank, b: FoundRank): number {
  return (a.facts.rank ?? 0) - (b.facts.rank ?? 0) || a.proc.pid - b.proc.pid;
}

/** One job entry of ranks that share a key and a uid. */
function makeJob(
  host: string,
  key: string,
  group: readonly FoundRank[],
  uid: number,
  starter: { proc: Proc; facts: EnvFacts | null } | null,
  fs: ProcSource,
): DiscoveredJob | null {
  const ranks: DiscoveredRank[] = [];
  const seenRanks = new Set<number>();
  for (const r of [...group].sort(byRankThenPid)) {
    const rank = r.facts.rank;
    if (rank === null || seenRanks.has(rank)) continue; // two pids naming one rank: the first kept
    seenRanks.add(rank);
    if (ranks.length < DISCOVERY_LIMITS.ranks)
      ranks.push({ rank, pid: r.proc.pid, startTime: r.proc.startTime });
  }
  if (ranks.length === 0) return null;
  const earliest = group.reduce((a, b) => (BigInt(b.proc.startTime) < BigInt(a.proc.startTime) ? b : a));
  const head = starter?.proc ?? earliest.proc;
  const command = commandOf(head.pid, fs) ?? commandOf(earliest.proc.pid, fs);
  if (command === null) return null; // vanished meanwhile
  const facts = group.map((r) => r.facts);
  const pick = <K extends 'jobName' | 'partition' | 'account'>(k: K) =>
    facts.find((f) => f[k] !== null)?.[k] ?? null;
  const worldSize = facts.find((f) => f.worldSize !== null)?.worldSize ?? null;
  const jobName = pick('jobName');
  const partition = pick('partition');
  const account = pick('account');
  const slurmJob = key.startsWith('slurm:') ? key.slice('slurm:'.length) : null;
  return {
    // Outside Slurm the key names the entry's own head: a rank of another uid under a starter
    // is keyed by itself, not by that starter (the agent protocol drops a key that names
    // another pid than starterPid).
    key: slurmJob !== null ? key : `starter:${host}:${head.pid}:${head.startTime}`,
    kind: slurmJob !== null ? 'slurm' : 'starter',
    ...(slurmJob !== null ? { slurmJob } : {}),
    ...(slurmJob === null ? { starterPid: head.pid, starterStartTime: head.startTime } : {}),
    uid,
    command,
    startedAt: startTimeToEpochMs(head.startTime),
    ...(jobName !== null ? { jobName } : {}),
    ...(partition !== null ? { partition } : {}),
    ...(account !== null ? { account } : {}),
    ...(worldSize !== null ? { worldSize } : {}),
    watch: facts.some((f) => f.watchOff) || starter?.facts?.watchOff === true ? 'off' : 'on',
    ranks,
  };
}

function cachedFacts(p: Proc, cache: DiscoveryCache, fs: ProcSource): EnvFacts | null {
  const k = `${p.pid}:${p.startTime}:${p.comm}`;
  if (cache.env.has(k)) return cache.env.get(k) ?? null;
  const env = fs.environ(p.pid);
  const facts = env === null ? null : envFacts(env);
  // An unreadable environment is not cached: the process may still be exec'ing.
  if (facts !== null) cache.env.set(k, facts);
  return facts;
}

/** One entry before it is built: what the fair share orders and counts. */
interface Candidate {
  readonly uid: number;
  /** Start time of the entry's head (its starter or its earliest rank), ticks after boot. */
  readonly start: bigint;
  readonly pid: number;
  build(): DiscoveredJob | null;
}

/**
 * Which entries a scan keeps: per uid its oldest `jobsPerUid` (oldest first, so the same jobs
 * stay in the report scan after scan), then `jobs` split by max-min fair share (every uid gets
 * as many as it has up to an equal share; what small uids leave goes to the others). Returns
 * the kept candidates interleaved by uid (uid order, each uid's oldest first), so that a list
 * cut further on (the agent's message size) still cuts each uid's newest first, and the
 * number left out per uid.
 */
export function fairShare<T extends { readonly uid: number; readonly start: bigint; readonly pid: number }>(
  candidates: readonly T[],
  limits: { readonly jobs: number; readonly jobsPerUid: number },
): { kept: T[]; omitted: DiscoveryOmitted[] } {
  const byUid = new Map<number, T[]>();
  for (const c of candidates) {
    const list = byUid.get(c.uid);
    if (list) list.push(c);
    else byUid.set(c.uid, [c]);
  }
  const uids = [...byUid.keys()].sort((a, b) => a - b);
  for (const list of byUid.values()) {
    list.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : a.pid - b.pid));
  }
  // Water-filling: uids wanting no more than an equal share of what is left get all they want.
  const want = new Map(uids.map((u) => [u, Math.min(byUid.get(u)?.length ?? 0, limits.jobsPerUid)]));
  const grant = new Map<number, number>();
  let left = Math.max(0, limits.jobs);
  let open = [...uids].sort((a, b) => (want.get(a) ?? 0) - (want.get(b) ?? 0) || a - b);
  while (open.length > 0) {
    const share = Math.floor(left / open.length);
    const small = open.filter((u) => (want.get(u) ?? 0) <= share);
    if (small.length === 0) {
      // Everyone left wants more than a share: each gets the share, the lowest uids one more.
      let extra = left - share * open.length;
      for (const u of [...open].sort((a, b) => a - b)) {
        grant.set(u, share + (extra > 0 ? 1 : 0));
        if (extra > 0) extra--;
      }
      break;
    }
    for (const u of small) {
      grant.set(u, want.get(u) ?? 0);
      left -= want.get(u) ?? 0;
    }
    open = open.filter((u) => (want.get(u) ?? 0) > share);
  }
  const kept: T[] = [];
  const omitted: DiscoveryOmitted[] = [];
  for (const u of uids) {
    const n = byUid.get(u)?.length ?? 0;
    const g = grant.get(u) ?? 0;
    if (g < n) omitted.push({ uid: u, jobs: n - g });
  }
  const most = Math.max(0, ...uids.map((u) => grant.get(u) ?? 0));
  for (let i = 0; i < most; i++) {
    for (const u of uids) {
      const c = byUid.get(u)?.[i];
      if (c !== undefined && i < (grant.get(u) ?? 0)) kept.push(c);
    }
  }
  return { kept, omitted };
}

/**
 * The MPI jobs running on this node now, found by reading /proc (nothing is stopped or traced).
 * Run as root to see every user's jobs; as a user, only that user's.
 */
export function discoverJobs(o: DiscoverOptions = {}): DiscoveredJob[] {
  return [...discoverNode(o).jobs];
}

/**
 * discoverJobs with what the list leaves out: `complete` is false when /proc could not be
 * listed or a cap cut the list (then `omitted` says, per uid, how many jobs were left out).
 */
export function discoverNode(o: DiscoverOptions = {}): DiscoveryScan {
  const cache = o.cache ?? new DiscoveryCache();
  const host = o.host ?? localHost().short;
  const fs = o.procfs ?? REAL_PROCFS;
  const listed = fs.list();
  if (listed === null) {
    o.log?.('discovery: /proc could not be listed; the report is empty and incomplete');
    return { jobs: [], complete: false, omitted: [] };
  }
  const procs = new Map<number, Proc>(listed.map((p) => [p.pid, p]));
  const live = new Set<string>();
  const found: FoundRank[] = [];
  for (const p of procs.values()) {
    const id = `${p.pid}:${p.startTime}`;
    live.add(`${id}:${p.comm}`);
    live.add(id);
    if (STARTER_NAMES.has(p.comm) || p.pid === process.pid) continue;
    const facts = cachedFacts(p, cache, fs);
    if (facts === null || facts.rank === null) continue;
    if (!cache.mpi.has(id)) {
      const wait = cache.noMpi.get(id) ?? 0;
      if (wait > 0) {
        cache.noMpi.set(id, wait - 1);
        continue;
      }
      if (fs.mapsMpi(p.pid) !== true) {
        // No MPI library (yet), or gone: looked at again a few scans later.
        cache.noMpi.set(id, NO_MPI_RECHECK_SCANS);
        continue;
      }
      cache.noMpi.delete(id);
      cache.mpi.add(id);
    }
    const uid = fs.uid(p.pid);
    if (uid === null) continue;
    found.push({ proc: p, facts, uid, starter: facts.slurmJob === null ? outermostStarter(p, procs) : null });
  }
  cache.prune(live);
  for (const k of cache.slurmPids.keys()) {
    if (!found.some((r) => r.facts.slurmJob === k)) cache.slurmPids.delete(k);
  }

  // Group by key, then split by uid.
  const groups = new Map<string, { ranks: FoundRank[]; starter: Proc | null }>();
  for (const r of found) {
    const key =
      r.facts.slurmJob !== null
        ? `slurm:${r.facts.slurmJob}`
        : r.starter !== null
          ? `starter:${host}:${r.starter.pid}:${r.starter.startTime}`
          : `starter:${host}:${r.proc.pid}:${r.proc.startTime}`;
    const g = groups.get(key);
    if (g) g.ranks.push(r);
    else groups.set(key, { ranks: [r], starter: r.starter ?? (r.facts.slurmJob === null ? r.proc : null) });
  }
  // Entries are built (command lines read) only for what the fair share keeps.
  const candidates: Candidate[] = [];
  for (const [key, g] of groups) {
    let ranks = g.ranks;
    if (key.startsWith('slurm:')) {
      const ok = slurmListed(key.slice('slurm:'.length), ranks, procs, o, cache);
      if (ok !== null) ranks = ranks.filter((r) => ok.has(`${r.proc.pid}:${r.proc.startTime}`));
    }
    if (ranks.length === 0) continue;
    const starterUid =
      g.starter !== null && g.starter.pid !== ranks[0]?.proc.pid ? fs.uid(g.starter.pid) : null;
    const earliest = ranks.reduce((a, b) => (BigInt(b.proc.startTime) < BigInt(a.proc.startTime) ? b : a));
    const ownerUid = starterUid ?? earliest.uid;
    const byUid = new Map<number, FoundRank[]>();
    for (const r of ranks) {
      const list = byUid.get(r.uid);
      if (list) list.push(r);
      else byUid.set(r.uid, [r]);
    }
    for (const [uid, mine] of byUid) {
      const starter =
        g.starter !== null && uid === ownerUid && g.starter.pid !== mine[0]?.proc.pid ? g.starter : null;
      const first = mine.reduce((a, b) => (BigInt(b.proc.startTime) < BigInt(a.proc.startTime) ? b : a));
      const head = starter ?? first.proc;
      candidates.push({
        uid,
        start: BigInt(head.startTime),
        pid: head.pid,
        build: () =>
          makeJob(
            host,
            key,
            mine,
            uid,
            starter === null ? null : { proc: starter, facts: cachedFacts(starter, cache, fs) },
            fs,
          ),
      });
    }
  }
  const { kept, omitted } = fairShare(candidates, o.limits ?? DISCOVERY_LIMITS);
  const jobs: DiscoveredJob[] = [];
  for (const c of kept) {
    const job = c.build();
    if (job !== null) jobs.push(job);
  }
  return { jobs, complete: omitted.length === 0, omitted };
}
