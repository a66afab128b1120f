import { describe, expect, it } from 'vitest';
import { decodeProcdescs, LP64_PROCDESC, type ProcdescLayout, staleEntryReason } from '../src/index.js';

/** A table as the starter holds it: little-endian pointers and int pids at the layout's offsets. */
function table(layout: ProcdescLayout, entries: readonly [bigint, bigint, number][]): Uint8Array {
  const bytes = new Uint8Array(layout.stride * entries.length).fill(0xee); // padding is garbage
  const dv = new DataView(bytes.buffer);
  entries.forEach(([host, exe, pid], i) => {
    dv.setBigUint64(i * layout.stride + layout.hostName, host, true);
    dv.setBigUint64(i * layout.stride + layout.executableName, exe, true);
    dv.setInt32(i * layout.stride + layout.pid, pid, true);
  });
  return bytes;
}

describe('MPIR_PROCDESC decoding', () => {
  it('reads the LP64 layout: two pointers and an int in 24 bytes', () => {
    expect(LP64_PROCDESC).toMatchObject({ stride: 24, hostName: 0, executableName: 8, pid: 16 });
    const bytes = table(LP64_PROCDESC, [
      [0x5555_0000_1000n, 0x5555_0000_2000n, 4242],
      [0x5555_0000_1000n, 0x5555_0000_2000n, 4243],
      [0x7fff_ffff_f000n, 0n, 0x3fffffff],
    ]);
    expect(decodeProcdescs(bytes, 3, LP64_PROCDESC)).toEqual([
      { hostNamePtr: 0x5555_0000_1000n, executableNamePtr: 0x5555_0000_2000n, pid: 4242 },
      { hostNamePtr: 0x5555_0000_1000n, executableNamePtr: 0x5555_0000_2000n, pid: 4243 },
      { hostNamePtr: 0x7fff_ffff_f000n, executableNamePtr: 0n, pid: 0x3fffffff },
    ]);
  });

  it('follows a layout from DWARF (other order, other stride)', () => {
    const odd: ProcdescLayout = { stride: 32, pid: 0, hostName: 8, executableName: 16, source: 'dwarf' };
    const bytes = table(odd, [
      [0x1000n, 0x2000n, 7],
      [0x3000n, 0x4000n, 8],
    ]);
    expect(decodeProcdescs(bytes, 2, odd).map((e) => [e.hostNamePtr, e.executableNamePtr, e.pid])).toEqual([
      [0x1000n, 0x2000n, 7],
      [0x3000n, 0x4000n, 8],
    ]);
  });

  it('reads a bytes view that does not start at its buffer start', () => {
    const inner = table(LP64_PROCDESC, [[0xabcn, 0xdefn, 99]]);
    const outer = new Uint8Array(inner.length + 5);
    outer.set(inner, 5);
    expect(decodeProcdescs(outer.subarray(5), 1, LP64_PROCDESC)[0]?.pid).toBe(99);
  });

  it('refuses a buffer shorter than the table', () => {
    expect(() => decodeProcdescs(new Uint8Array(47), 2, LP64_PROCDESC)).toThrow(RangeError);
  });

  it('pids are C ints: a negative pid decodes as negative and marks the table stale', () => {
    const [e] = decodeProcdescs(table(LP64_PROCDESC, [[0x1000n, 0x2000n, -1]]), 1, LP64_PROCDESC);
    expect(e?.pid).toBe(-1);
    expect(e && staleEntryReason(e, 0)).toBe('entry 0 has pid -1');
  });

  it('names what makes an entry stale, and passes a sane one', () => {
    expect(staleEntryReason({ hostNamePtr: 0x1000n, executableNamePtr: 0x2000n, pid: 4242 }, 3)).toBeNull();
    expect(staleEntryReason({ hostNamePtr: 0x1000n, executableNamePtr: 0n, pid: 4242 }, 3)).toBeNull();
    expect(staleEntryReason({ hostNamePtr: 0x1000n, executableNamePtr: 0n, pid: 0 }, 3)).toBe(
      'entry 3 has pid 0',
    );
    expect(staleEntryReason({ hostNamePtr: 0n, executableNamePtr: 0n, pid: 12 }, 1)).toBe(
      'entry 1 has no host name',
    );
    expect(staleEntryReason({ hostNamePtr: 1n, executableNamePtr: 0n, pid: 0x40000000 }, 0)).toBe(
      'entry 0 has pid 1073741824',
    );
  });
});
