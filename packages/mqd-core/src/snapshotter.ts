// Snapshots of MPI processes: checks who owns each process (and that it is still the process
// the caller located), resolves each process's message-queue DLL (MPIR_dll_name in the
// process, unless one is given) in a reader child running as the owner, hands the ranks to one
// supervised reader per (owner, DLL), and assembles a JobSnapshot. This process only reads
// /proc metadata; everything that parses, loads or stops runs in the readers (reader/identity.ts).
// Keep one Snapshotter for repeated snapshots: the hosts keep the DLL, the per-build-id indexes
// and the processes' setup, so the second snapshot is warm.

import { statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { basename } from 'node:path';
import {
  clipText,
  type EvalRequest,
  err,
  isErrorCode,
  type JobSnapshot,
  lengthUnitOfLibrary,
  MAX_HOST_CHARS,
  MAX_PATH_CHARS,
  type MpiLibrary,
  type MqdError,
  mqdError,
  ok,
  type RankSnapshot,
  type Result,
  rankNotRead,
  SNAPSHOT_SCHEMA_VERSION,
  type UnidentifiedProcess,
} from '@mqd/model';
import { inSysroot } from './inferior/core-image.js';
import { procStartTime, rankFromEnviron, shortHostname } from './inferior/proc.js';
import { credentials } from './native/libc.js';
import { checkDllPolicy, type DllPolicy } from './policy/dll-policy.js';
import {
  MIN_RANKS_PER_READER,
  ReaderClient,
  type ReaderClientOptions,
  type ReaderRun,
} from './reader/client.js';
import {
  checkTarget,
  identityKey,
  procCredentials,
  type ReaderIdentity,
  readerIdentity,
} from './reader/identity.js';
import type { Captured, ReaderRank, ReaderStats } from './reader/protocol.js';

export interface SnapshotTarget {
  readonly pid: number;
  /** MPI_COMM_WORLD rank; read from the process's environment when absent. */
  readonly rank?: number;
  readonly host?: string;
  /**
   * The process's start time when it was located (field 22 of /proc/PID/stat): a pid that now
   * has another start time was reused and is refused with MQD_E_PID_REUSED, never stopped.
   */
  readonly startTime?: string;
}

export interface SnapshotOptions {
  /** The message-queue DLL; default: MPIR_dll_name read from each process. */
  readonly dll?: string;
  /** Test hook for the kill -9 guarantee (see ReaderRequest.holdStoppedMs). */
  readonly holdStoppedMs?: number;
  /** Unwind every thread of every rank in the same stop as the queue read (default true). */
  readonly stacks?: boolean;
  /**
   * A light read (the hang watch's sample, docs/hang-watch.md): the same stop and the same ranks
   * (queues, stacks, OpenMP, source excerpts), without the reader's forced collection afterwards
   * unless its heap grew. Default false.
   */
  readonly light?: boolean;
  readonly onStopped?: (pid: number) => void;
  /**
   * The job owner: every rank must run as this uid (real, effective, saved, fs), else it is
   * refused with MQD_E_FOREIGN_PROCESS and never stopped or read; the reader runs as this uid.
   * Default: the owner of the first rank, which every other rank must share.
   */
  readonly ownerUid?: number;
  /**
   * Read processes of uid 0 (refused with MQD_E_ROOT_PROCESS otherwise). Default: allowed only
   * when no ownerUid is given and this process itself runs as root (root reading root's own
   * job from the command line); an agent acting for a user passes ownerUid and decides.
   */
  readonly allowRoot?: boolean;
  /** Site policy for the DLL a process names (see ReaderClientOptions.dllPolicy); default the host options'. */
  readonly dllPolicy?: DllPolicy;
  /**
   * The most bytes of snapshot JSON one rank may take (an agent passes its per-message cap): a
   * rank whose queues pass it is cut short in the reader's walk and answered MQD_E_TOO_LARGE,
   * never built, serialised or sent whole. Default: no such budget.
   */
  readonly maxRankBytes?: number;
  /**
   * Expressions read on every rank in the same stop as its queues (RankSnapshot.values), each in
   * the frame it names or the innermost user frame. Default: none.
   */
  readonly evals?: readonly EvalRequest[];
}

/** A core file to read as one rank. */
export interface CoreSnapshotTarget {
  readonly path: string;
  /** MPI_COMM_WORLD rank; default: from the environment in the core, else from the file's name (rank-N). */
  readonly rank?: number;
  /** The executable, when it is no longer at the path the process ran it from. */
  readonly exe?: string;
  readonly host?: string;
}

export interface CoreSnapshotOptions {
  /** The message-queue DLL; default: MPIR_dll_name read from each core. */
  readonly dll?: string;
  /** A directory holding the job's files under their original paths. */
  readonly sysroot?: string;
  readonly stacks?: boolean;
  readonly dllPolicy?: DllPolicy;
  /** As SnapshotOptions.maxRankBytes. */
  readonly maxRankBytes?: number;
  /**
   * The job owner (an agent reading for a user): every core must be this uid's file (else
   * MQD_E_FOREIGN_PROCESS, not read) and the reader runs as this uid whatever the path points
   * to by the time it opens it. Default: each core's owner when this process is root.
   */
  readonly ownerUid?: number;
}

/** The rank a core's file name gives: rank-3.core, core.rank3, mpi.rank_12.core, ... */
export function rankFromCoreName(path: string): number | null {
  const m = /rank[-_.]?(\d+)/i.exec(basename(path));
  return m?.[1] !== undefined ? Number(m[1]) : null;
}

export interface SnapshotResult {
  readonly snapshot: JobSnapshot;
  readonly stats: {
    readonly host: ReaderStats | null;
    readonly restarts: number;
    readonly hostStarts: number;
  };
}

/** One result for the readers of one DLL: ranks together, counters summed, the first error. */
function mergeRuns(runs: readonly ReaderRun[]): ReaderRun {
  const [first, ...rest] = runs;
  if (!first) throw new Error('mergeRuns: no run');
  if (rest.length === 0) return first;
  const withStats = runs.filter((r) => r.stats !== null);
  const sum = (f: (s: ReaderStats) => number) =>
    withStats.reduce((a, r) => a + (r.stats ? f(r.stats) : 0), 0);
  const named = runs.find((r) => r.version !== '') ?? first;
  return {
    ranks: runs.flatMap((r) => r.ranks),
    library: named.library,
    version: named.version,
    stats:
      withStats.length === 0
        ? null
        : {
            dllOpenMicros: Math.max(...withStats.map((r) => r.stats?.dllOpenMicros ?? 0)),
            fetches: sum((s) => s.fetches),
            typeLookups: sum((s) => s.typeLookups),
            filesIndexed: sum((s) => s.filesIndexed),
            jsCallbacks: sum((s) => s.jsCallbacks),
            readSyscalls: sum((s) => s.readSyscalls),
          },
    restarts: runs.reduce((a, r) => a + r.restarts, 0),
    error: runs.find((r) => r.error !== null)?.error ?? null,
  };
}

/** The JobSnapshot of a read that began at `t0`: ranks in rank order, `unidentified` only when any. */
function jobSnapshot(p: {
  t0: bigint;
  takenAt: string;
  library: MpiLibrary;
  dll: string | null;
  ranks: RankSnapshot[];
  unidentified: UnidentifiedProcess[];
  source?: JobSnapshot['source'];
}): JobSnapshot {
  return {
    schemaVersion: SNAPSHOT_SCHEMA_VERSION,
    takenAt: p.takenAt,
    durationMicros: Number((process.hrtime.bigint() - p.t0) / 1000n),
    mpi: { library: p.library, dll: p.dll, lengthUnit: lengthUnitOfLibrary(p.library) },
    ranks: p.ranks.sort((a, b) => a.rank - b.rank),
    ...(p.unidentified.length > 0 ? { unidentified: p.unidentified } : {}),
    ...(p.source ? { source: p.source } : {}),
  };
}

export class Snapshotter {
  private readonly hosts = new Map<string, ReaderClient>();
  /**
   * DLL names already resolved, by reader identity, pid and start time (a process's
   * MPIR_dll_name is fixed once MPI_Init set it): a warm snapshot skips the reader's resolve
   * round trip. Only answers are kept, never errors; the policy is still checked every time, and
   * the reader re-checks owner and start time before each stop. Pruned to the current targets.
   */
  private readonly resolvedDlls = new Map<string, string>();

  /** Set by dispose(): readers asked for afterwards are disposed ones, which start no host. */
  private disposed = false;

  constructor(private readonly hostOptions: ReaderClientOptions = {}) {}

  private client(dll: string | null, id: ReaderIdentity): ReaderClient {
    const c = new ReaderClient(dll, this.hostOptions, id);
    if (this.disposed) void c.dispose();
    return c;
  }

  /** The DLL `pid` names in MPIR_dll_name, resolved by a reader running as the pid's owner. */
  async dllOf(pid: number, opts: { allowRoot?: boolean } = {}): Promise<Result<string, MqdError>> {
    const creds = procCredentials(pid);
    if (!creds) return err(mqdError('MQD_E_NO_SUCH_PID', `no running process ${pid}`));
    const owner = creds.uids[0];
    const allowRoot = opts.allowRoot ?? credentials().euid === 0;
    const [answer] = await this.resolver(readerIdentity(owner, creds.gids[0])).resolve([
      { pid, ownerUid: owner, allowRoot },
    ]);
    if (!answer) return err(mqdError('MQD_E_INTERNAL', `no answer for pid ${pid}`));
    return 'dll' in answer ? ok(answer.dll) : err(answer.error);
  }

  private key(id: ReaderIdentity, dll: string | null): string {
    return `${identityKey(id)}|${dll ?? ''}`;
  }

  /** A reader of this identity to resolve DLL names with: any live one, else a fresh unbound one. */
  private resolver(id: ReaderIdentity): ReaderClient {
    const prefix = `${identityKey(id)}|`;
    let unbound: ReaderClient | undefined;
    for (const [k, h] of this.hosts) {
      if (!k.startsWith(prefix)) continue;
      if (h.hostPid !== null) return h;
      if (!h.bound) unbound = h;
    }
    if (unbound) return unbound;
    const h = this.client(null, id);
    this.hosts.set(this.key(id, null), h);
    return h;
  }

  /**
   * The readers of one (identity, DLL) for `ranks` ranks: up to maxReadersPerDll (default the
   * cores), each with at least MIN_RANKS_PER_READER ranks. The first is `host(id, dll)`.
   */
  private pool(id: ReaderIdentity, dll: string, ranks: number): ReaderClient[] {
    const max = Math.max(1, this.hostOptions.maxReadersPerDll ?? availableParallelism());
    const n = Math.max(1, Math.min(max, Math.floor(ranks / MIN_RANKS_PER_READER)));
    const out = [this.host(id, dll)];
    for (let i = 1; i < n; i++) {
      const k = `${this.key(id, dll)}#${i}`;
      let h = this.hosts.get(k);
      if (!h) {
        h = this.client(dll, id);
        this.hosts.set(k, h);
      }
      out.push(h);
    }
    return out;
  }

  private host(id: ReaderIdentity, dll: string): ReaderClient {
    const k = this.key(id, dll);
    let h = this.hosts.get(k);
    if (h) return h;
    // A reader that only resolved names has loaded no DLL yet: it becomes this DLL's host.
    const spare = this.hosts.get(this.key(id, null));
    if (spare) {
      this.hosts.delete(this.key(id, null));
      spare.bind(dll);
      h = spare;
    } else {
      h = this.client(dll, id);
    }
    this.hosts.set(k, h);
    return h;
  }

  /**
   * The agent's checks before any reader runs: each target's rank (given or from its
   * environment), its owner and start time from /proc, the job owner's rule; the ranks that
   * pass, grouped by the reader identity that will read them.
   */
  private vet(
    targets: readonly SnapshotTarget[],
    opts: Pick<SnapshotOptions, 'ownerUid' | 'allowRoot' | 'maxRankBytes'>,
  ): {
    failed: RankSnapshot[];
    unidentified: UnidentifiedProcess[];
    byReader: Map<string, { id: ReaderIdentity; targets: ReaderRank[] }>;
  } {
    const here = shortHostname();
    const failed: RankSnapshot[] = [];
    const unidentified: UnidentifiedProcess[] = [];
    const seenRanks = new Set<number>();
    // Who the job belongs to: given, else the first rank's owner (every rank must share it).
    let ownerUid = opts.ownerUid;
    const root = credentials().euid === 0;
    // Not root and no owner given: we can only read our own processes anyway, the kernel decides.
    const kernelDecides = opts.ownerUid === undefined && !root;
    const allowRoot = opts.allowRoot ?? (opts.ownerUid === undefined && root);
    /** Ranks that passed the owner checks, by reader identity. */
    const byReader = new Map<string, { id: ReaderIdentity; targets: ReaderRank[] }>();
    for (const t of targets) {
      const host = t.host ?? here;
      let rank = t.rank;
      if (rank === undefined) {
        const found = rankFromEnviron(t.pid);
        rank = found?.rank;
      }
      const fail = (e: MqdError, r: number) => failed.push(rankNotRead({ rank: r, pid: t.pid, host }, e));
      // A process with no rank to file it under is not a rank: it gets its own entry.
      const unknown = (e: MqdError) => unidentified.push({ pid: t.pid, host, error: e });
      // /proc metadata only: the owner, and the start time that pins the process. A pid that
      // names no process says so first, whatever else is wrong with the request.
      const creds = procCredentials(t.pid);
      const startTime = t.startTime ?? procStartTime(t.pid) ?? undefined;
      if (!creds || startTime === undefined) {
        const e = mqdError('MQD_E_NO_SUCH_PID', `no running process ${t.pid}`);
        if (rank === undefined) unknown(e);
        else fail(e, rank);
        continue;
      }
      if (rank === undefined) {
        unknown(
          mqdError(
            'MQD_E_BAD_INPUT',
            `no MPI rank known for pid ${t.pid} (pass --pid PID:RANK, or attach through the starter)`,
          ),
        );
        continue;
      }
      if (seenRanks.has(rank)) {
        unknown(mqdError('MQD_E_BAD_INPUT', `rank ${rank} is given twice (pid ${t.pid})`));
        continue;
      }
      seenRanks.add(rank);
      ownerUid ??= creds.uids[0];
      const rule = kernelDecides
        ? { ownerUid: creds.uids[0], allowRoot: true, startTime }
        : { ownerUid, allowRoot, startTime };
      const refused = checkTarget(t.pid, rule);
      if (refused) {
        fail(refused, rank);
        continue;
      }
      const id = readerIdentity(rule.ownerUid, creds.gids[0]);
      const key = identityKey(id);
      const group = byReader.get(key) ?? { id, targets: [] };
      group.targets.push({
        pid: t.pid,
        rank,
        host,
        ...rule,
        ...(opts.maxRankBytes !== undefined ? { maxRankBytes: opts.maxRankBytes } : {}),
      });
      byReader.set(key, group);
    }
    return { failed, unidentified, byReader };
  }

  private resultOf(snapshot: JobSnapshot, host: ReaderStats | null, restarts: number): SnapshotResult {
    const hostStarts = [...this.hosts.values()].reduce((n, h) => n + h.starts, 0);
    return { snapshot, stats: { host, restarts, hostStarts } };
  }

  async snapshot(targets: readonly SnapshotTarget[], opts: SnapshotOptions = {}): Promise<SnapshotResult> {
    const t0 = process.hrtime.bigint();
    const takenAt = new Date().toISOString();
    const { failed, unidentified, byReader } = this.vet(targets, opts);
    const policy = opts.dllPolicy ?? this.hostOptions.dllPolicy ?? 'any';
    // Each reader resolves the DLL names of its own ranks (it runs as their owner).
    const byDll = new Map<string, { id: ReaderIdentity; dll: string; targets: ReaderRank[] }>();
    for (const { id, targets: list } of byReader.values()) {
      const resolved: Map<number, Result<string, MqdError>> = new Map();
      if (opts.dll !== undefined) {
        for (const t of list) resolved.set(t.pid, ok(opts.dll));
      } else {
        const cacheKey = (t: ReaderRank) => `${identityKey(id)}:${t.pid}:${t.startTime ?? ''}`;
        const unknown = list.filter((t) => {
          const hit = t.startTime !== undefined ? this.resolvedDlls.get(cacheKey(t)) : undefined;
          if (hit !== undefined) resolved.set(t.pid, ok(hit));
          return hit === undefined;
        });
        const answers =
          unknown.length === 0
            ? []
            : await this.resolver(id).resolve(
                unknown.map((t) => ({
                  pid: t.pid,
                  ownerUid: t.ownerUid ?? id.uid,
                  allowRoot: t.allowRoot ?? false,
                  ...(t.startTime !== undefined ? { startTime: t.startTime } : {}),
                })),
              );
        for (const a of answers) {
          resolved.set(a.pid, 'dll' in a ? ok(a.dll) : err(a.error));
          const t = unknown.find((x) => x.pid === a.pid);
          if ('dll' in a && t?.startTime !== undefined) this.resolvedDlls.set(cacheKey(t), a.dll);
        }
      }
      for (const t of list) {
        const named = resolved.get(t.pid) ?? err(mqdError('MQD_E_INTERNAL', `pid ${t.pid} was not resolved`));
        // The site policy is checked here, by the agent, before any reader loads the file.
        const dll = named.ok ? checkDllPolicy(named.value, policy) : named;
        if (!dll.ok) {
          failed.push(rankNotRead(t, dll.error));
          continue;
        }
        const k = this.key(id, dll.value);
        if (!byDll.has(k)) this.host(id, dll.value).warmUp(); // boots while we resolve the rest
        const group = byDll.get(k) ?? { id, dll: dll.value, targets: [] };
        group.targets.push(t);
        byDll.set(k, group);
      }
    }
    const keep = targets.map((t) => t.pid);
    const live = new Set(keep.map(String));
    for (const k of this.resolvedDlls.keys())
      if (!live.has(k.split(':').at(-2) ?? '')) this.resolvedDlls.delete(k);
    let library: MpiLibrary = 'unknown';
    let dllUsed: string | null = null;
    let stats: ReaderStats | null = null;
    let restarts = 0;
    const ranks: RankSnapshot[] = [...failed];
    for (const { id, dll, targets: list } of byDll.values()) {
      // The ranks of one DLL are split among parallel readers (rank order, round robin: the
      // same job gives each reader the same ranks, so each stays warm for its own).
      const readers = this.pool(id, dll, list.length);
      const shares = readers.map(() => [] as ReaderRank[]);
      [...list]
        .sort((a, b) => a.rank - b.rank)
        .forEach((t, i) => {
          shares[i % readers.length]?.push(t);
        });
      const runs = await Promise.all(
        readers.map((h, i) => {
          const share = shares[i] ?? [];
          return h.snapshot(share, readers.length === 1 ? keep : share.map((t) => t.pid), {
            ...(opts.holdStoppedMs !== undefined ? { holdStoppedMs: opts.holdStoppedMs } : {}),
            ...(opts.stacks !== undefined ? { stacks: opts.stacks } : {}),
            ...(opts.light === true ? { light: true } : {}),
            ...(opts.evals !== undefined && opts.evals.length > 0 ? { evals: opts.evals } : {}),
            ...(opts.onStopped ? { onStopped: opts.onStopped } : {}),
          });
        }),
      );
      const run = mergeRuns(runs);
      restarts += run.restarts;
      if (run.error) {
        const e = run.error;
        for (const t of list) ranks.push(rankNotRead(t, e));
        continue;
      }
      ranks.push(...run.ranks);
      if (dllUsed === null) {
        dllUsed = dll;
        library = run.library;
        stats = run.stats;
      }
    }
    const snapshot = jobSnapshot({ t0, takenAt, library, dll: dllUsed, ranks, unidentified });
    return this.resultOf(snapshot, stats, restarts);
  }

  /**
   * A snapshot from core files, one per rank: the same JobSnapshot as a live read, with
   * `source` naming the cores. Each core is read by a reader running as the file's owner (when
   * this process is root) or as us; nothing is stopped.
   */
  async snapshotCores(
    cores: readonly CoreSnapshotTarget[],
    opts: CoreSnapshotOptions = {},
  ): Promise<SnapshotResult> {
    const t0 = process.hrtime.bigint();
    const takenAt = new Date().toISOString();
    const here = shortHostname();
    const policy = opts.dllPolicy ?? this.hostOptions.dllPolicy ?? 'any';
    const ranks: RankSnapshot[] = [];
    const unidentified: UnidentifiedProcess[] = [];
    const sources: NonNullable<JobSnapshot['source']>['cores'][number][] = [];
    const me = credentials();
    // Each core: a negative key stands for it wherever a pid is expected.
    const items = cores.map((c, i) => {
      let st: { uid: number; gid: number; mtime: Date } | null = null;
      try {
        const s = statSync(c.path);
        st = { uid: s.uid, gid: s.gid, mtime: s.mtime };
      } catch {
        st = null;
      }
      const ref = {
        path: c.path,
        ...(c.exe !== undefined ? { exe: c.exe } : {}),
        ...(opts.sysroot !== undefined ? { sysroot: opts.sysroot } : {}),
      };
      return { key: -(i + 1), c, st, ref };
    });
    const byReader = new Map<string, { id: ReaderIdentity; list: typeof items }>();
    for (const it of items) {
      if (!it.st) {
        unidentified.push({
          pid: 1,
          host: it.c.host ?? here,
          error: mqdError('MQD_E_CORE_INVALID', `cannot open ${it.c.path}: no such file or not readable`),
        });
        continue;
      }
      if (opts.ownerUid !== undefined && it.st.uid !== opts.ownerUid) {
        unidentified.push({
          pid: 1,
          host: it.c.host ?? here,
          error: mqdError(
            'MQD_E_FOREIGN_PROCESS',
            `${it.c.path} belongs to uid ${it.st.uid}, not to the job's owner ${opts.ownerUid}`,
          ),
        });
        continue;
      }
      // Root reads each core as its owner (the job's, when given); anyone else reads as
      // themselves (the kernel decides).
      const id =
        me.euid === 0
          ? readerIdentity(opts.ownerUid ?? it.st.uid, it.st.gid)
          : readerIdentity(me.uid, me.gid);
      const k = identityKey(id);
      const g = byReader.get(k) ?? { id, list: [] };
      g.list.push(it);
      byReader.set(k, g);
    }
    const seen = new Set<number>();
    const byDll = new Map<string, { id: ReaderIdentity; dll: string; targets: ReaderRank[] }>();
    const facts = new Map<
      number,
      { rank: number; pid: number; path: string; signal: number; executable: string; mtime: Date }
    >();
    for (const { id, list } of byReader.values()) {
      const answers = await this.resolver(id).resolve(
        list.map((it) => ({ pid: it.key, ownerUid: id.uid, allowRoot: true, core: it.ref })),
      );
      for (const it of list) {
        const a = answers.find((x) => x.pid === it.key);
        const f = a?.core;
        // The node name from the core's own environment is the job owner's text: within the spec.
        const host = it.c.host ?? (f?.host != null ? clipText(f.host, MAX_HOST_CHARS) : here);
        const rank = it.c.rank ?? f?.rank ?? rankFromCoreName(it.c.path);
        const pid = f?.pid ?? 1;
        if (rank === null || rank === undefined) {
          unidentified.push({
            pid,
            host,
            error:
              a && 'error' in a
                ? a.error
                : mqdError('MQD_E_CORE_NO_RANK', `${it.c.path}: no rank in its environment or its name`),
          });
          continue;
        }
        if (seen.has(rank)) {
          unidentified.push({
            pid,
            host,
            error: mqdError('MQD_E_BAD_INPUT', `rank ${rank} is given twice (${it.c.path})`),
          });
          continue;
        }
        seen.add(rank);
        if (f && it.st) {
          facts.set(it.key, {
            rank,
            pid: f.pid,
            path: it.c.path,
            signal: f.signal,
            executable: f.executable,
            mtime: it.st.mtime,
          });
        }
        const named =
          opts.dll !== undefined
            ? ok(opts.dll)
            : a && 'dll' in a
              ? ok(opts.sysroot !== undefined ? inSysroot(opts.sysroot, a.dll) : a.dll)
              : err(a?.error ?? mqdError('MQD_E_INTERNAL', `${it.c.path} was not resolved`));
        const dll = named.ok ? checkDllPolicy(named.value, policy) : named;
        const target: ReaderRank = {
          pid: it.key,
          rank,
          host,
          core: it.ref,
          ...(opts.maxRankBytes !== undefined ? { maxRankBytes: opts.maxRankBytes } : {}),
        };
        if (!dll.ok) {
          ranks.push({ ...rankNotRead(target, dll.error), pid });
          continue;
        }
        const k = this.key(id, dll.value);
        const g = byDll.get(k) ?? { id, dll: dll.value, targets: [] };
        g.targets.push(target);
        byDll.set(k, g);
      }
    }
    let library: MpiLibrary = 'unknown';
    let dllUsed: string | null = null;
    let stats: ReaderStats | null = null;
    let restarts = 0;
    const realPid = (key: number) => facts.get(key)?.pid ?? 1;
    for (const { id, dll, targets } of byDll.values()) {
      const run = await this.host(id, dll).snapshot(targets, [], {
        ...(opts.stacks !== undefined ? { stacks: opts.stacks } : {}),
      });
      restarts += run.restarts;
      if (run.error) {
        for (const t of targets) ranks.push({ ...rankNotRead(t, run.error), pid: realPid(t.pid) });
        continue;
      }
      for (const r of run.ranks) ranks.push({ ...r, pid: realPid(r.pid) });
      if (dllUsed === null) {
        dllUsed = dll;
        library = run.library;
        stats = run.stats;
      }
    }
    for (const f of facts.values()) {
      if (ranks.some((r) => r.rank === f.rank)) {
        sources.push({
          rank: f.rank,
          path: clipText(f.path, MAX_PATH_CHARS),
          pid: f.pid,
          signal: f.signal,
          executable: clipText(f.executable, MAX_PATH_CHARS),
          writtenAt: f.mtime.toISOString(),
        });
      }
    }
    sources.sort((a, b) => a.rank - b.rank);
    const snapshot = jobSnapshot({
      t0,
      takenAt,
      library,
      dll: dllUsed,
      ranks,
      unidentified,
      source: { kind: 'core', cores: sources },
    });
    return this.resultOf(snapshot, stats, restarts);
  }

  /**
   * Writes one core per rank into `dir` (`mqd capture`), each by a reader running as the ranks'
   * owner after the same checks as a snapshot; a rank is stopped only while its core is written.
   * `dir` must exist and be writable by the owner.
   */
  async capture(
    targets: readonly SnapshotTarget[],
    dir: string,
    opts: Pick<SnapshotOptions, 'ownerUid' | 'allowRoot'> = {},
  ): Promise<{ captured: Captured[]; unidentified: UnidentifiedProcess[] }> {
    const { failed, unidentified, byReader } = this.vet(targets, opts);
    const captured: Captured[] = failed.map((r) => ({
      pid: r.pid,
      rank: r.rank,
      error:
        r.state.kind !== 'ok' && isErrorCode(r.state.code)
          ? { code: r.state.code, message: r.state.message }
          : mqdError('MQD_E_INTERNAL', `rank ${r.rank} was refused without a code`),
    }));
    for (const { id, targets: list } of byReader.values()) {
      captured.push(...(await this.resolver(id).capture(list, dir)));
    }
    captured.sort((a, b) => a.rank - b.rank);
    return { captured, unidentified };
  }

  /** The identity each running reader reported (uid, gid, groups, NoNewPrivs), for tests and status. */
  readerCredentials(): {
    pid: number;
    uid: number;
    euid: number;
    gid: number;
    groups: readonly number[];
    noNewPrivs: boolean;
  }[] {
    const out = [];
    for (const h of this.hosts.values()) {
      const pid = h.hostPid;
      if (pid !== null && h.credentials) out.push({ pid, ...h.credentials });
    }
    return out;
  }

  /** Pids of the running readers (tests use them to kill a reader mid-snapshot). */
  hostPids(): number[] {
    return [...this.hosts.values()].map((h) => h.hostPid).filter((p): p is number => p !== null);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    await Promise.all([...this.hosts.values()].map((h) => h.dispose()));
    this.hosts.clear();
  }
}
