// Attach to a running starter and find every rank of its job: first through the MPIR process
// table the starter publishes (Open MPI 4.1's mpirun, through libopen-rte; MPICH's hydra
// mpiexec), else through the starter's descendants in /proc that map an MPI library and carry
// a rank in their environment. Nothing here stops or traces a process: the table is read with
// process_vm_readv while the starter runs (it is written once, before MPIR_Breakpoint, and only
// freed at exit, which the liveness checks below catch).
import { DebugFileRegistry, ProcessImage, pmixProcTable, rankFromEnviron, TargetMemory } from '@mqd/core';
import { assertUnreachable, err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import { type LocalHost, localHost, normaliseHost } from './host.js';
import {
  type JobRanks,
  type MethodChoice,
  makeJob,
  type RankEntry,
  rankEntry,
  type StarterInfo,
} from './job.js';
import { decodeProcdescs, MAX_PROCTABLE_SIZE, procdescLayout, staleEntryReason } from './procdesc.js';
import { descendants, exeOf, isAlive, listProcesses, mapsMpiLibrary, starterInfo } from './procfs.js';

export interface AttachOptions {
  /** 'auto' (default): the MPIR table, else the process tree. */
  readonly method?: MethodChoice;
  /** Share one registry across calls so each file's symbols are indexed once. */
  readonly registry?: DebugFileRegistry;
  /** This machine's names (tests pass their own). */
  readonly here?: LocalHost;
}

/** Addresses of the MPIR variables in one process (the table and its size are required). */
export interface MpirSymbols {
  readonly proctable: bigint;
  readonly proctableSize: bigint;
  readonly debugState: bigint | null;
  readonly beingDebugged: bigint | null;
  readonly breakpoint: bigint | null;
  readonly abortString: bigint | null;
}

export function mpirSymbols(image: ProcessImage): MpirSymbols | null {
  const table = image.findSymbol('MPIR_proctable');
  const size = image.findSymbol('MPIR_proctable_size');
  if (!table || !size) return null;
  const at = (name: string) => image.findSymbol(name)?.address ?? null;
  return {
    proctable: table.address,
    proctableSize: size.address,
    debugState: at('MPIR_debug_state'),
    beingDebugged: at('MPIR_being_debugged'),
    breakpoint: at('MPIR_Breakpoint'),
    abortString: at('MPIR_debug_abort_string'),
  };
}

function readFailure(mem: TargetMemory, pid: number, what: string): MqdError {
  switch (mem.lastFailure) {
    case 'denied':
      return mqdError('MQD_E_PTRACE_DENIED', `cannot read the memory of pid ${pid} (${what})`);
    case 'gone':
      return mqdError('MQD_E_JOB_ENDED', `starter ${pid} exited while its ${what} was read`);
    default:
      return mqdError(
        'MQD_E_JOB_ENDED',
        `the ${what} of starter ${pid} is no longer readable (a stale pointer: the job has ended)`,
      );
  }
}

function readInt32(mem: TargetMemory, addr: bigint): number | null {
  const b = mem.readBytes(addr, 4);
  return b ? new DataView(b.buffer).getInt32(0, true) : null;
}

/**
 * Reads the starter's MPIR process table into a JobRanks (method 'mpir'). The starter may be
 * running or stopped; `image` must be loaded from it after it mapped the library that holds the
 * MPIR symbols.
 */
export function readMpirTable(
  image: ProcessImage,
  starter: StarterInfo,
  syms: MpirSymbols,
  here: LocalHost = localHost(),
): Result<JobRanks, MqdError> {
  const pid = starter.pid;
  const layout = procdescLayout(image);
  const mem = new TargetMemory(pid, 256 << 20);
  const size = readInt32(mem, syms.proctableSize);
  if (size === null) return err(readFailure(mem, pid, 'MPIR_proctable_size'));
  const table = mem.readU64(syms.proctable);
  if (table === null) return err(readFailure(mem, pid, 'MPIR_proctable'));
  const warnings: string[] = [];
  if (syms.debugState !== null && readInt32(mem, syms.debugState) === 2) {
    // MPIR_DEBUG_ABORTING: the table is still valid, but the job is going away.
    const msgPtr = syms.abortString !== null ? mem.readU64(syms.abortString) : null;
    const msg = msgPtr ? mem.readCString(msgPtr, 1024) : null;
    warnings.push(`the starter reports that the job is aborting${msg ? `: ${msg}` : ''}`);
  }
  if (size <= 0 || table === 0n) {
    return err(
      mqdError(
        'MQD_E_EMPTY_PROCTABLE',
        `starter ${pid} (${starter.exe}) has MPIR_proctable_size=${size} and MPIR_proctable=0x${table.toString(16)}`,
      ),
    );
  }
  if (size > MAX_PROCTABLE_SIZE) {
    return err(
      mqdError('MQD_E_JOB_ENDED', `starter ${pid} has MPIR_proctable_size=${size}: not a live table`),
    );
  }
  const bytes = mem.readBytes(table, size * layout.stride);
  if (!bytes) return err(readFailure(mem, pid, `process table (${size} entries at 0x${table.toString(16)})`));
  const raw = decodeProcdescs(bytes, size, layout);
  // Hydra points each entry at a shared string: read each distinct pointer once.
  const strings = new Map<bigint, string | null>();
  const str = (p: bigint, max: number): string | null => {
    if (p === 0n) return null;
    let s = strings.get(p);
    if (s === undefined) {
      s = mem.readCString(p, max);
      strings.set(p, s);
    }
    return s;
  };
  const ranks: RankEntry[] = [];
  for (const [i, e] of raw.entries()) {
    const stale = staleEntryReason(e, i);
    const host = stale ? null : str(e.hostNamePtr, 1024);
    if (stale || host === null || !/^[\x21-\x7e]+$/.test(host)) {
      return err(
        mqdError(
          'MQD_E_JOB_ENDED',
          `the process table of starter ${pid} is stale (${stale ?? `entry ${i} has an unreadable host name`}): the job has ended`,
        ),
      );
    }
    const exe = str(e.executableNamePtr, 4096);
    const h = normaliseHost(host, here);
    ranks.push(rankEntry(i, e.pid, h, exe ?? (h === here.short ? (exeOf(e.pid) ?? '') : '')));
  }
  const local = ranks.filter((r) => r.host === here.short);
  const gone = local.filter((r) => !isAlive(r.pid));
  if (local.length > 0 && gone.length === local.length) {
    return err(
      mqdError(
        'MQD_E_JOB_ENDED',
        `every rank of starter ${pid} on this host is gone (pids ${gone.map((r) => r.pid).join(', ')})`,
      ),
    );
  }
  for (const r of gone) warnings.push(`rank ${r.rank} (pid ${r.pid}) has exited`);
  return ok(makeJob('mpir', starter, reconcileRanks(ranks, here, warnings), warnings));
}

/**
 * The table's order is the rank order by definition, but hydra builds it assuming block
 * mapping by core count; a local rank's environment (PMI_RANK, OMPI_COMM_WORLD_RANK, ...) is
 * authoritative. Use it when it gives a consistent permutation; say so when it disagrees.
 */
function reconcileRanks(ranks: readonly RankEntry[], here: LocalHost, warnings: string[]): RankEntry[] {
  const fixed = ranks.map((r) => {
    if (r.host !== here.short) return r;
    const env = rankFromEnviron(r.pid);
    return env && env.rank !== r.rank ? rankEntry(env.rank, r.pid, r.host, r.executable) : r;
  });
  const changed = fixed.filter((r, i) => r.rank !== ranks[i]?.rank);
  if (changed.length === 0) return [...ranks];
  const unique = new Set(fixed.map((r) => r.rank)).size === fixed.length;
  if (!unique) {
    warnings.push(
      `the ranks' environment disagrees with the table order for pids ${changed.map((r) => r.pid).join(', ')} and does not form a permutation: kept the table order`,
    );
    return [...ranks];
  }
  warnings.push(
    `the table order differs from the ranks' environment for pids ${changed.map((r) => r.pid).join(', ')}: used the environment`,
  );
  return fixed;
}

/** Ranks among the starter's local descendants: processes that map an MPI library and have a rank in their environment. */
export function processTreeRanks(
  starter: StarterInfo,
  here: LocalHost = localHost(),
): Result<JobRanks, MqdError> {
  const procs = listProcesses();
  const parent = new Map(procs.map((p) => [p.pid, p.ppid]));
  const accepted = new Set<number>();
  const byRank = new Map<number, RankEntry>();
  const warnings: string[] = [];
  let denied: MqdError | null = null;
  const underAccepted = (pid: number): boolean => {
    for (let p = parent.get(pid); p !== undefined && p !== starter.pid; p = parent.get(p))
      if (accepted.has(p)) return true;
    return false;
  };
  for (const d of descendants(starter.pid, procs)) {
    // A process a rank forked (without exec) inherits its rank and library: the rank is the ancestor.
    if (underAccepted(d.pid)) continue;
    const mpi = mapsMpiLibrary(d.pid);
    if (!mpi.ok) {
      if (mpi.error.code === 'MQD_E_PTRACE_DENIED') denied ??= mpi.error;
      continue; // gone meanwhile: not a rank any more
    }
    if (!mpi.value) continue;
    const env = rankFromEnviron(d.pid);
    if (!env) {
      warnings.push(`pid ${d.pid} maps an MPI library but has no rank in its environment: skipped`);
      continue;
    }
    const dup = byRank.get(env.rank);
    if (dup) {
      warnings.push(`pids ${dup.pid} and ${d.pid} both say they are rank ${env.rank}: kept ${dup.pid}`);
      continue;
    }
    accepted.add(d.pid);
    byRank.set(env.rank, rankEntry(env.rank, d.pid, here.short, exeOf(d.pid) ?? ''));
  }
  if (byRank.size === 0) {
    if (denied) return err(denied);
    return err(
      mqdError('MQD_E_NO_RANKS', `no process below pid ${starter.pid} (${starter.exe}) maps an MPI library`),
    );
  }
  const max = Math.max(...byRank.keys());
  const missing: number[] = [];
  for (let r = 0; r <= max; r++) if (!byRank.has(r)) missing.push(r);
  if (missing.length > 0) {
    warnings.push(`ranks ${missing.join(', ')} were not found below the starter (on other hosts, or exited)`);
  }
  return ok(makeJob('process-tree', starter, [...byRank.values()], warnings));
}

/** Every rank of the job that `starterPid` started. */
export function attachStarter(starterPid: number, opts: AttachOptions = {}): Result<JobRanks, MqdError> {
  const here = opts.here ?? localHost();
  const method = opts.method ?? 'auto';
  const info = starterInfo(starterPid);
  if (!info.ok) return info;
  const starter = info.value;
  const image = ProcessImage.load(starterPid, opts.registry ?? new DebugFileRegistry());
  if (!image.ok) {
    if (image.error.code === 'MQD_E_PID_EXITED')
      return err(mqdError('MQD_E_NO_SUCH_PID', `process ${starterPid} exited while it was inspected`));
    return image;
  }
  // Open MPI's ranks map libopen-rte too, so they have (empty) MPIR symbols: name the mistake.
  const ownRank = image.value.mpiLibrary() ? rankFromEnviron(starterPid) : null;
  if (ownRank) {
    return err(
      mqdError(
        'MQD_E_NOT_STARTER',
        `pid ${starterPid} (${starter.exe}) is rank ${ownRank.rank} of an MPI job (${ownRank.variable}), not its starter`,
      ),
    );
  }
  const syms = mpirSymbols(image.value);
  switch (method) {
    case 'mpir':
      if (!syms) {
        return err(
          mqdError('MQD_E_NOT_STARTER', `pid ${starterPid} (${starter.exe}) has no MPIR_proctable symbol`),
        );
      }
      return readMpirTable(image.value, starter, syms, here);
    case 'pmix':
      return pmixRanks(image.value, starter, here);
    case 'process-tree':
      return processTreeRanks(starter, here);
    case 'auto': {
      if (syms) {
        const viaTable = readMpirTable(image.value, starter, syms, here);
        if (viaTable.ok || viaTable.error.code !== 'MQD_E_EMPTY_PROCTABLE') return viaTable;
        const viaTree = processTreeRanks(starter, here);
        if (!viaTree.ok) return viaTable;
        return ok({
          ...viaTree.value,
          warnings: [
            `the MPIR table is empty: ranks found through the process tree`,
            ...viaTree.value.warnings,
          ],
        });
      }
      // No MPIR (Open MPI 5's prterun): its PMIx server knows the job, every node included.
      let viaPmix: Result<JobRanks, MqdError> | null = null;
      if (pmixLibraryOf(image.value) !== null) {
        viaPmix = pmixRanks(image.value, starter, here);
        if (viaPmix.ok) return viaPmix;
      }
      const viaTree = processTreeRanks(starter, here);
      if (viaTree.ok) {
        return viaPmix
          ? ok({
              ...viaTree.value,
              warnings: [
                `${viaPmix.error.message}: ranks found through the process tree`,
                ...viaTree.value.warnings,
              ],
            })
          : viaTree;
      }
      if (viaTree.error.code !== 'MQD_E_NO_RANKS') return viaTree;
      if (viaPmix) return viaPmix;
      return err(
        mqdError(
          'MQD_E_NOT_STARTER',
          `pid ${starterPid} (${starter.exe}) has no MPIR symbols and no MPI process below it`,
        ),
      );
    }
    default:
      return assertUnreachable(method);
  }
}

/** The libpmix the starter maps (a PMIx server: Open MPI 5's prterun), or null. */
export function pmixLibraryOf(image: ProcessImage): string | null {
  return image.modules.find((m) => /\/libpmix\.so[.\d]*$/.test(m.path))?.path ?? null;
}

/**
 * The job's ranks from the starter's PMIx server (PMIX_QUERY_PROC_TABLE): every rank of every
 * node, with its pid and host, as prterun knows them. Runs as the starter's owner.
 */
export function pmixRanks(
  image: ProcessImage,
  starter: StarterInfo,
  here: LocalHost,
): Result<JobRanks, MqdError> {
  const lib = pmixLibraryOf(image);
  if (lib === null) {
    return err(
      mqdError(
        'MQD_E_NOT_STARTER',
        `pid ${starter.pid} (${starter.exe}) is not a PMIx server (it maps no libpmix)`,
      ),
    );
  }
  const table = pmixProcTable(lib, starter.pid);
  if (!table.ok) return table;
  if (table.value.procs.length === 0)
    return err(mqdError('MQD_E_EMPTY_PROCTABLE', `the PMIx job ${table.value.nspace} has no processes yet`));
  const ranks = table.value.procs.map((p) =>
    rankEntry(p.rank, p.pid, normaliseHost(p.host, here), p.executable),
  );
  return ok(makeJob('pmix', starter, ranks));
}

/** A rank given by the user: a pid, or a pid with its rank. */
export type PidTarget = number | { readonly pid: number; readonly rank?: number };

/** JobRanks for processes named directly (method 'pid-list'); each must be a live, local MPI process with a known rank. */
export function ranksFromPids(
  targets: readonly PidTarget[],
  here: LocalHost = localHost(),
): Result<JobRanks, MqdError> {
  const ranks: RankEntry[] = [];
  const seen = new Map<number, number>();
  for (const t of targets) {
    const pid = typeof t === 'number' ? t : t.pid;
    if (!Number.isInteger(pid) || pid < 1 || pid > 0x3fffffff)
      return err(mqdError('MQD_E_BAD_INPUT', `'${pid}' is not a pid`));
    if (!isAlive(pid)) return err(mqdError('MQD_E_NO_SUCH_PID', `no running process ${pid}`));
    const mpi = mapsMpiLibrary(pid);
    if (!mpi.ok) return mpi;
    if (!mpi.value)
      return err(mqdError('MQD_E_NOT_MPI', `pid ${pid} (${exeOf(pid) ?? '?'}) maps no MPI library`));
    const given = typeof t === 'number' ? undefined : t.rank;
    const rank = given ?? rankFromEnviron(pid)?.rank;
    if (rank === undefined) {
      return err(mqdError('MQD_E_BAD_INPUT', `no MPI rank known for pid ${pid}: pass it as PID:RANK`));
    }
    const other = seen.get(rank);
    if (other !== undefined)
      return err(mqdError('MQD_E_BAD_INPUT', `pids ${other} and ${pid} are both rank ${rank}`));
    seen.set(rank, pid);
    ranks.push(rankEntry(rank, pid, here.short, exeOf(pid) ?? ''));
  }
  if (ranks.length === 0) return err(mqdError('MQD_E_USAGE', 'give at least one pid'));
  return ok(makeJob('pid-list', null, ranks));
}
