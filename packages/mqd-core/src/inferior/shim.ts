// The native hot path (native/shim/mqd_shim.c, built into dist/shim/ by `npm run build`): the
// process callbacks a DLL calls thousands of times per rank (fetch_data & co.) answered in C
// from tables this module fills, reads through process_vm_readv with a page cache valid for
// one stop, and whole queue walks without a trip back into JavaScript.
// The library keeps process-wide state, so keys are allocated here, unique in the process,
// even when several MqsSessions share it (tests).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import koffi from 'koffi';
import { dlopen, dlsymAddress, RTLD_NOW } from '../native/libc.js';
import type { ReadFailure } from './memory.js';

/** Where the build puts the shim; the same relative path from src/inferior and dist/inferior. */
export const SHIM_PATH = fileURLToPath(new URL('../../dist/shim/libmqd_shim.so', import.meta.url));

/** Callbacks answered natively, and the shim's function for each. */
export const NATIVE_CALLBACKS = {
  fetch_data: 'mqd_cb_fetch_data',
  get_global_rank: 'mqd_cb_get_global_rank',
  get_image: 'mqd_cb_get_image',
  target_to_host: 'mqd_cb_target_to_host',
  put_process_info: 'mqd_cb_put_process_info',
  get_process_info: 'mqd_cb_get_process_info',
  put_image_info: 'mqd_cb_put_image_info',
  get_image_info: 'mqd_cb_get_image_info',
} as const;
export type NativeCallback = keyof typeof NATIVE_CALLBACKS;

/** The shim's counters, in its enum order (mqd_shim.c). */
const COUNTERS = [
  'fetch_data',
  'get_global_rank',
  'get_image',
  'target_to_host',
  'put_process_info',
  'get_process_info',
  'put_image_info',
  'get_image_info',
  'syscalls',
  /** Page-cache misses: reads of target memory (one process_vm_readv each, live). */
  'misses',
  /** Wall time in those reads, ns. */
  'readNs',
  /** Wall and CPU time of this thread in the queue walks, ns (the difference: not scheduled). */
  'walkNs',
  'walkCpuNs',
] as const;

const FAILURES: readonly (ReadFailure | null)[] = [null, 'unmapped', 'denied', 'gone', 'budget', 'missing'];
const SHIM_ABI = 5;

type Fn = (...args: unknown[]) => unknown;
type ShimFn =
  | 'set'
  | 'regions'
  | 'drop'
  | 'info'
  | 'counter'
  | 'read'
  | 'begin'
  | 'failure'
  | 'failedReads'
  | 'failAddr'
  | 'stopReads'
  | 'walk'
  | 'opsCount'
  | 'opsCopy'
  | 'end'
  | 'outstanding';

/** A range of a core's address space and where its bytes are (see HotPath.setRegions). */
export interface CoreRegion {
  readonly start: bigint;
  readonly end: bigint;
  /** An open file descriptor, or -1: the process had memory here that the core lacks. */
  readonly fd: number;
  /** Offset in the file of `start`. */
  readonly offset: bigint;
}

export class HotPath {
  private static instance: Result<HotPath, MqdError> | null = null;
  private nextKey = 1;
  readonly addresses: Record<NativeCallback, bigint>;
  private readonly f: Record<ShimFn, Fn>;

  private constructor(lib: ReturnType<typeof koffi.load>, handle: unknown) {
    const fn = (sig: string) => lib.func(sig) as Fn;
    this.f = {
      set: fn('int mqd_shim_set(intptr_t key, int pid, int rank, intptr_t image, int64_t budget)'),
      drop: fn('void mqd_shim_drop(intptr_t key)'),
      regions: fn('int mqd_shim_set_regions(intptr_t key, const uint64_t *words, int64_t n)'),
      info: fn('uint64_t mqd_shim_info(intptr_t key)'),
      counter: fn('uint64_t mqd_shim_counter(int i)'),
      read: fn('int mqd_shim_read(intptr_t key, uint64_t addr, int64_t len, uint8_t *out)'),
      begin: fn('void mqd_shim_begin_stop(intptr_t key)'),
      failure: fn('int mqd_shim_failure(intptr_t key)'),
      failedReads: fn('int64_t mqd_shim_failed_reads(intptr_t key)'),
      failAddr: fn('uint64_t mqd_shim_fail_addr(intptr_t key)'),
      stopReads: fn('int64_t mqd_shim_stop_reads(intptr_t key)'),
      walk: fn('int mqd_shim_walk_ops(uintptr_t fn, intptr_t key, int64_t max)'),
      opsCount: fn('int64_t mqd_shim_ops_count()'),
      opsCopy: fn('void mqd_shim_ops_copy(uint8_t *dst, int64_t first, int64_t n)'),
      end: fn('void mqd_shim_end_stop()'),
      outstanding: fn('int64_t mqd_shim_outstanding()'),
    };
    const addresses: Partial<Record<NativeCallback, bigint>> = {};
    for (const [cb, sym] of Object.entries(NATIVE_CALLBACKS)) {
      const a = dlsymAddress(handle, sym);
      if (a === 0n) throw new Error(`${SHIM_PATH} lacks ${sym}`);
      addresses[cb as NativeCallback] = a;
    }
    this.addresses = addresses as Record<NativeCallback, bigint>;
  }

  /** The process's hot path (loaded once). */
  static get(): Result<HotPath, MqdError> {
    HotPath.instance ??= HotPath.load();
    return HotPath.instance;
  }

  private static load(): Result<HotPath, MqdError> {
    const missing = (why: string) =>
      err(
        mqdError(
          'MQD_E_INTERNAL',
          `the native hot path ${SHIM_PATH} ${why}: run npm run build (it compiles packages/mqd-core/native/shim with cc)`,
        ),
      );
    if (!existsSync(SHIM_PATH)) return missing('is missing');
    try {
      const lib = koffi.load(SHIM_PATH);
      const abi = lib.func('int mqd_shim_abi()')() as number;
      if (abi !== SHIM_ABI) return missing(`has ABI ${abi}, expected ${SHIM_ABI}`);
      // A second dlopen of the same file returns the same handle: for the callbacks' addresses.
      const h = dlopen(SHIM_PATH, RTLD_NOW);
      if (!('handle' in h)) return missing(`cannot be opened (${h.error})`);
      return ok(new HotPath(lib, h.handle));
    } catch (e) {
      return missing(`cannot be loaded (${(e as Error).message})`);
    }
  }

  /** A handle for the DLL (mqs_process or mqs_image), unique in this process. */
  newKey(): number {
    return this.nextKey++;
  }

  /** Registers (or updates) a process slot, or an image slot (pid/rank/image unused). */
  set(key: number, pid: number, rank: number, image: number, budgetBytes: number): void {
    if ((this.f.set(key, pid, rank, image, budgetBytes) as number) !== 0)
      throw new Error(`mqd_shim_set(${key}) failed`);
  }

  /**
   * Makes process slot `key` a core file's memory: reads are served by pread from these
   * regions (sorted, disjoint; fd -1 = memory the process had that the core lacks).
   */
  setRegions(key: number, regions: readonly CoreRegion[]): void {
    const words = new BigUint64Array(regions.length * 4);
    regions.forEach((r, i) => {
      words[4 * i] = r.start;
      words[4 * i + 1] = r.end;
      words[4 * i + 2] = BigInt.asUintN(64, BigInt(r.fd));
      words[4 * i + 3] = r.offset;
    });
    if ((this.f.regions(key, words, regions.length) as number) !== 0)
      throw new Error(`mqd_shim_set_regions(${key}) failed`);
  }

  drop(key: number): void {
    this.f.drop(key);
  }

  /** The info pointer the DLL stored for this process or image (0n = none). */
  info(key: number): bigint {
    return BigInt(this.f.info(key) as number | bigint);
  }

  beginStop(key: number): void {
    this.f.begin(key);
  }

  /** After a rank is resumed: cached pages forgotten, buffers trimmed. */
  endStop(): void {
    this.f.end();
  }

  failure(key: number): ReadFailure | null {
    return FAILURES[this.f.failure(key) as number] ?? null;
  }

  /**
   * Our own diagnosis of the reads that failed in this stop (the DLL only saw
   * mqs_no_information): how many, the first one's address and the failure kind; null when none.
   */
  readFailures(key: number): { count: number; firstAddress: bigint; kind: ReadFailure | null } | null {
    const count = Number(this.f.failedReads(key));
    if (count === 0) return null;
    return {
      count,
      firstAddress: BigInt(this.f.failAddr(key) as number | bigint),
      kind: this.failure(key),
    };
  }

  /** Memory reads served in this stop so far (the DLL's and ours). */
  stopReads(key: number): number {
    return Number(this.f.stopReads(key));
  }

  read(key: number, addr: bigint, len: number, out: Uint8Array): boolean {
    return (this.f.read(key, addr, len, out) as number) === 1;
  }

  /**
   * Calls the DLL's mqs_next_operation (at `nextOperation`) until it stops, in C. Returns its
   * last code and which of this stop's records it read (`first`, `count`): they stay in native
   * memory until `takeRecords`, after the rank is resumed.
   */
  walkOps(nextOperation: bigint, key: number, max: number): { rc: number; first: number; count: number } {
    const first = Number(this.f.opsCount());
    const rc = this.f.walk(nextOperation, key, max) as number;
    return { rc, first, count: Number(this.f.opsCount()) - first };
  }

  /**
   * Records [first, first + count) of this stop copied into `into` (recordSize bytes each), for
   * a look at a few fields while the rank is still stopped; the full copy waits for the resume.
   */
  copyRecords(first: number, count: number, recordSize: number, into: Uint8Array): void {
    if (count <= 0) return;
    if (into.byteLength < count * recordSize) throw new Error('copyRecords: the buffer is too small');
    this.f.opsCopy(into, first, count);
  }

  /**
   * Every record the walks of this stop read (PENDING_OPERATION.size bytes each, in walk order),
   * copied into JS memory; call it before `endStop`, after the resume.
   */
  takeRecords(recordSize: number): Buffer {
    const count = Number(this.f.opsCount());
    // Every byte is overwritten by the copy: no zero-fill.
    const records = Buffer.allocUnsafeSlow(count * recordSize);
    if (count > 0) this.f.opsCopy(records, 0, count);
    return records;
  }

  /** Native calls answered so far, by callback, plus the process_vm_readv calls. */
  counts(): Record<(typeof COUNTERS)[number], number> {
    const out = {} as Record<(typeof COUNTERS)[number], number>;
    COUNTERS.forEach((name, i) => {
      out[name] = Number(this.f.counter(i));
    });
    return out;
  }

  /** Native bytes the shim holds now (page cache, walk buffer, tables). */
  outstandingBytes(): number {
    return Number(this.f.outstanding());
  }
}
