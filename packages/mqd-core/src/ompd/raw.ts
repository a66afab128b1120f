// What an OMPD read takes and gives: the process as OmpdSession reads it, the per-read options,
// the raw threads of one stop, and their assembly into the model's OpenMpRuntime after the
// resume (entry points named then).
import type { MqdError, OmpThread, OpenMpRuntime } from '@mqd/model';
import type { ProcessImage } from '../inferior/process-image.js';
import type { HotPath } from '../inferior/shim.js';
import type { TypeSizes } from '../inferior/type-sizes.js';
import type { DllPolicy } from '../policy/dll-policy.js';

const hex = (v: bigint) => `0x${v.toString(16)}`;

/** A stopped rank (or a core file of one) as the OMPD session reads it. */
export interface OmpdProcess {
  readonly pid: number;
  /** Threads held stopped by this process (their registers are read for thread contexts), or a core's. */
  readonly tids: readonly number[];
  readonly image: ProcessImage;
  /** The hot-path slot of this process, its stop begun (reads go through its page cache). */
  readonly memKey: number;
  readonly hot: HotPath;
  /** The target in messages (default `pid N`; a core: `the core PATH`). */
  readonly label?: string;
  /** Each thread's fs_base, by tid, when the registers are not the live thread's (a core's NT_PRSTATUS). */
  readonly threadPointers?: ReadonlyMap<number, bigint>;
  /** Where a file the target names is found here (a core read with `--sysroot`); default its own path. */
  readonly fileOnDisk?: (path: string) => string;
  /** The target's type sizes when the caller has read them already (the MQD session has, per process). */
  readonly typeSizes?: TypeSizes;
}

/** The target in messages. */
export const labelOf = (t: OmpdProcess): string => t.label ?? `pid ${t.pid}`;

/** Per read: the site's rules and the supervisor's hook. */
export interface OmpdReadOptions {
  /** The site's DLL policy applies to libompd too (policy/dll-policy.ts checkDllPolicy). */
  readonly policy?: DllPolicy;
  /** Libraries that crashed or hung this reader before (path → what happened): not loaded again. */
  readonly refused?: Readonly<Record<string, string>>;
  /** Called right before the first call into a library for this rank (supervision). */
  readonly onEnter?: (library: string) => void;
}

/** One OpenMP thread as read in the stop (names are resolved after the resume). */
export interface RawOmpThread {
  readonly tid: number;
  readonly threadNum: number | null;
  readonly state: string;
  readonly waitId: bigint;
  readonly parallel: { teamSize: number; level: number; activeLevel: number | null } | null;
  readonly task: { entry: bigint | null; implicit: number | null } | null;
}

/** What the stop gave: no runtime, a coded reason, or the raw threads. */
export type RawOpenMp =
  | { readonly kind: 'none' }
  | { readonly kind: 'error'; readonly error: MqdError }
  | {
      readonly kind: 'read';
      readonly runtime: string;
      readonly ompd: string;
      readonly version: string;
      readonly threads: readonly RawOmpThread[];
      readonly image: ProcessImage;
    };

/** The model's record of what a stop gave (after the resume: entry points get their names). */
export function assembleOpenMp(raw: RawOpenMp): { openmp?: OpenMpRuntime | null; openmpError?: MqdError } {
  if (raw.kind === 'none') return { openmp: null };
  if (raw.kind === 'error') return { openmpError: raw.error };
  const threads: OmpThread[] = raw.threads.map((t) => {
    const implicit = t.task?.implicit ?? null;
    const kind: NonNullable<OmpThread['task']>['kind'] =
      implicit === null
        ? 'unknown'
        : implicit === 0
          ? 'explicit'
          : t.parallel === null
            ? 'initial'
            : 'implicit';
    return {
      tid: t.tid,
      threadNum: t.threadNum !== null && t.threadNum >= 0 ? t.threadNum : null,
      state: t.state.slice(0, 128),
      waitId: t.waitId === 0n ? null : hex(t.waitId),
      parallel: t.parallel,
      task: t.task
        ? {
            function: t.task.entry === null ? null : functionName(raw.image, t.task.entry),
            entry: t.task.entry === null ? null : hex(t.task.entry),
            kind,
          }
        : null,
    };
  });
  threads.sort((a, b) => a.tid - b.tid);
  return { openmp: { runtime: raw.runtime, ompd: raw.ompd, version: raw.version.slice(0, 1024), threads } };
}

/** The function of the process's image that `addr` enters (the outlined region, the task body). */
export function functionName(image: ProcessImage, addr: bigint): string | null {
  const m = image.modules.find((x) => addr >= x.start && addr < x.end);
  if (!m) return null;
  const name = m.file.functionAt(addr - m.bias);
  return name === null ? null : name.slice(0, 1024);
}
