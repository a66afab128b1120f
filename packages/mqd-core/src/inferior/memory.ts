// Reads another process's memory with process_vm_readv, through a page cache that is valid
// for one stop (the process does not run while we read, so a page read once is current), and a
// budget: neither DLL guards against a corrupt or cyclic list, so a read past the budget fails
// and the DLL's walk ends instead of looping forever.
import koffi from 'koffi';
import { permanentAlloc } from '../native/alloc.js';
import { allocIovecs, EFAULT, EIO, EPERM, ESRCH, type IovecPair, vmRead } from '../native/libc.js';

const PAGE = 4096;
const PAGE_MASK = ~(BigInt(PAGE) - 1n);

/** 'missing': a core file lacks memory the process had. */
export type ReadFailure = 'unmapped' | 'denied' | 'gone' | 'budget' | 'missing';

export interface ReadStats {
  reads: number;
  bytes: number;
  pageMisses: number;
}

/** One native page and iovec pair for every InferiorMemory of the process (reads are synchronous). */
let shared: { page: unknown; addr: bigint; iovs: IovecPair } | null = null;
function sharedBuffers(): { page: unknown; addr: bigint; iovs: IovecPair } {
  if (!shared) {
    const page = permanentAlloc('uint8_t', PAGE);
    shared = { page, addr: BigInt(koffi.address(page)), iovs: allocIovecs() };
  }
  return shared;
}

export class InferiorMemory {
  private readonly pages = new Map<bigint, Uint8Array | null>();
  private readonly native: unknown;
  private readonly nativeAddr: bigint;
  private readonly iovs: IovecPair;
  readonly stats: ReadStats = { reads: 0, bytes: 0, pageMisses: 0 };
  lastFailure: ReadFailure | null = null;

  constructor(
    readonly pid: number,
    private readonly budgetBytes: number,
  ) {
    const b = sharedBuffers();
    this.native = b.page;
    this.nativeAddr = b.addr;
    this.iovs = b.iovs;
  }

  /** Forget cached pages: the process ran since they were read. */
  newStop(): void {
    this.pages.clear();
    this.stats.reads = 0;
    this.stats.bytes = 0;
    this.stats.pageMisses = 0;
    this.lastFailure = null;
  }

  private page(base: bigint): Uint8Array | null {
    const hit = this.pages.get(base);
    if (hit !== undefined) return hit;
    this.stats.pageMisses++;
    const n = vmRead(this.pid, this.nativeAddr, base, PAGE, this.iovs);
    let data: Uint8Array | null = null;
    if (n === PAGE) {
      data = new Uint8Array(PAGE);
      data.set(new Uint8Array(koffi.view(this.native, PAGE)));
    } else if (n >= 0 || n === -EFAULT || n === -EIO) {
      this.lastFailure = 'unmapped';
    } else if (n === -EPERM) {
      this.lastFailure = 'denied';
    } else if (n === -ESRCH) {
      this.lastFailure = 'gone';
    } else {
      this.lastFailure = 'unmapped';
    }
    this.pages.set(base, data);
    return data;
  }

  /** Copies `len` bytes at `addr` into `out` (offset 0). False when any byte is unreadable. */
  read(addr: bigint, len: number, out: Uint8Array): boolean {
    this.stats.reads++;
    this.stats.bytes += len;
    if (this.stats.bytes > this.budgetBytes) {
      this.lastFailure = 'budget';
      return false;
    }
    if (addr === 0n) {
      this.lastFailure = 'unmapped';
      return false;
    }
    let done = 0;
    while (done < len) {
      const a = addr + BigInt(done);
      const base = a & PAGE_MASK;
      const p = this.page(base);
      if (!p) return false;
      const off = Number(a - base);
      const n = Math.min(len - done, PAGE - off);
      out.set(p.subarray(off, off + n), done);
      done += n;
    }
    return true;
  }

  readBytes(addr: bigint, len: number): Uint8Array | null {
    const out = new Uint8Array(len);
    return this.read(addr, len, out) ? out : null;
  }

  /** A NUL-terminated string of at most `max` bytes. */
  readCString(addr: bigint, max: number): string | null {
    const b = this.readBytes(addr, max);
    if (!b) {
      // The string may end before an unmapped page: read byte by byte up to the page end.
      const chunk = Number(BigInt(PAGE) - (addr & (BigInt(PAGE) - 1n)));
      const c = this.readBytes(addr, Math.min(chunk, max));
      if (!c) return null;
      const z = c.indexOf(0);
      return z >= 0 ? Buffer.from(c.subarray(0, z)).toString('utf8') : null;
    }
    const z = b.indexOf(0);
    return Buffer.from(z >= 0 ? b.subarray(0, z) : b).toString('utf8');
  }

  readU64(addr: bigint): bigint | null {
    const b = this.readBytes(addr, 8);
    return b ? new DataView(b.buffer).getBigUint64(0, true) : null;
  }
}
