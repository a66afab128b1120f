// Snapshots of MPI processes: resolves each process's message-queue DLL (MPIR_dll_name in
// the process, unless one is given), hands the ranks to one supervised DLL host per DLL, and
// assembles a JobSnapshot. Keep one Snapshotter for repeated snapshots: the hosts keep the
// DLL, the per-build-id indexes and the processes' setup, so the second snapshot is warm.
import {
  err,
  type JobSnapshot,
  type LengthUnit,
  type MpiLibrary,
  type MqdError,
  mqdError,
  ok,
  type RankSnapshot,
  type Result,
  rankNotRead,
  SNAPSHOT_SCHEMA_VERSION,
} from '@mqd/model';
import { DllHost, type DllHostOptions } from './host/client.js';
import type { HostStats } from './host/protocol.js';
import { DebugFileRegistry } from './target/debug-file.js';
import { TargetMemory } from './target/memory.js';
import { rankFromEnviron, shortHostname } from './target/proc.js';
import { ProcessImage } from './target/process-image.js';

export interface SnapshotTarget {
  readonly pid: number;
  /** MPI_COMM_WORLD rank; read from the process's environment when absent. */
  readonly rank?: number;
  readonly host?: string;
}

export interface SnapshotOptions {
  /** The message-queue DLL; default: MPIR_dll_name read from each process. */
  readonly dll?: string;
  /** Test hook for the kill -9 guarantee (see HostRequest.holdStoppedMs). */
  readonly holdStoppedMs?: number;
  readonly onStopped?: (pid: number) => void;
}

export interface SnapshotResult {
  readonly snapshot: JobSnapshot;
  readonly stats: { readonly host: HostStats | null; readonly restarts: number; readonly hostStarts: number };
}

const lengthUnitOf = (lib: MpiLibrary): LengthUnit => (lib === 'mpich' ? 'elements' : 'bytes');

export class Snapshotter {
  private readonly hosts = new Map<string, DllHost>();
  private readonly registry = new DebugFileRegistry();

  constructor(private readonly hostOptions: DllHostOptions = {}) {}

  /** The DLL a process names in MPIR_dll_name. */
  dllOf(pid: number): Result<string, MqdError> {
    const img = ProcessImage.load(pid, this.registry);
    if (!img.ok) return img;
    const sym = img.value.findSymbol('MPIR_dll_name');
    if (!sym) {
      if (!img.value.mpiLibrary())
        return err(mqdError('MQD_E_NOT_MPI', `pid ${pid} (${img.value.exe}) maps no MPI library`));
      return err(mqdError('MQD_E_NO_DLL_NAME', `pid ${pid} (${img.value.exe}) has no MPIR_dll_name symbol`));
    }
    const mem = new TargetMemory(pid, 1 << 16);
    const name = mem.readCString(sym.address, Math.min(Math.max(sym.size, 1), 4096));
    if (!name) {
      if (mem.lastFailure === 'denied')
        return err(mqdError('MQD_E_PTRACE_DENIED', `cannot read the memory of pid ${pid}`));
      return err(mqdError('MQD_E_NO_DLL_NAME', `pid ${pid}: MPIR_dll_name is empty or unreadable`));
    }
    return ok(name);
  }

  private host(dll: string): DllHost {
    let h = this.hosts.get(dll);
    if (!h) {
      h = new DllHost(dll, this.hostOptions);
      this.hosts.set(dll, h);
    }
    return h;
  }

  async snapshot(targets: readonly SnapshotTarget[], opts: SnapshotOptions = {}): Promise<SnapshotResult> {
    const t0 = process.hrtime.bigint();
    const takenAt = new Date().toISOString();
    const here = shortHostname();
    const failed: RankSnapshot[] = [];
    const byDll = new Map<string, { pid: number; rank: number; host: string }[]>();
    const seenRanks = new Set<number>();
    for (const t of targets) {
      const host = t.host ?? here;
      let rank = t.rank;
      if (rank === undefined) {
        const found = rankFromEnviron(t.pid);
        rank = found?.rank;
      }
      const fail = (e: MqdError, r: number) => failed.push(rankNotRead({ rank: r, pid: t.pid, host }, e));
      if (rank === undefined) {
        // Without a rank we still report the pid, under a rank no real process can have.
        fail(
          mqdError(
            'MQD_E_BAD_INPUT',
            `no MPI rank known for pid ${t.pid} (pass --pid PID:RANK, or attach through the starter)`,
          ),
          0x7fffffff - failed.length,
        );
        continue;
      }
      if (seenRanks.has(rank)) {
        fail(
          mqdError('MQD_E_BAD_INPUT', `rank ${rank} is given twice (pid ${t.pid})`),
          0x7fffffff - failed.length,
        );
        continue;
      }
      seenRanks.add(rank);
      const dll = opts.dll !== undefined ? ok(opts.dll) : this.dllOf(t.pid);
      if (!dll.ok) {
        fail(dll.error, rank);
        continue;
      }
      if (!byDll.has(dll.value)) this.host(dll.value).warmUp(); // boots while we resolve the rest
      const list = byDll.get(dll.value) ?? [];
      list.push({ pid: t.pid, rank, host });
      byDll.set(dll.value, list);
    }
    const keep = targets.map((t) => t.pid);
    let library: MpiLibrary = 'unknown';
    let dllUsed: string | null = null;
    let stats: HostStats | null = null;
    let restarts = 0;
    const ranks: RankSnapshot[] = [...failed];
    for (const [dll, list] of byDll) {
      const h = this.host(dll);
      const run = await h.snapshot(list, keep, {
        ...(opts.holdStoppedMs !== undefined ? { holdStoppedMs: opts.holdStoppedMs } : {}),
        ...(opts.onStopped ? { onStopped: opts.onStopped } : {}),
      });
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
    ranks.sort((a, b) => a.rank - b.rank);
    const snapshot: JobSnapshot = {
      schemaVersion: SNAPSHOT_SCHEMA_VERSION,
      takenAt,
      durationMicros: Number((process.hrtime.bigint() - t0) / 1000n),
      mpi: { library, dll: dllUsed, lengthUnit: lengthUnitOf(library) },
      ranks,
    };
    return {
      snapshot,
      stats: {
        host: stats,
        restarts,
        hostStarts: [...this.hosts.values()].reduce((n, h) => n + h.starts, 0),
      },
    };
  }

  /** Pids of the running DLL hosts (tests use them to kill a host mid-snapshot). */
  hostPids(): number[] {
    return [...this.hosts.values()].map((h) => h.hostPid).filter((p): p is number => p !== null);
  }

  async dispose(): Promise<void> {
    await Promise.all([...this.hosts.values()].map((h) => h.dispose()));
    this.hosts.clear();
  }
}
