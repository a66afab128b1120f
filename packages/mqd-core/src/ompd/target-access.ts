// The target as libompd's callbacks see it: memory through the stop's page cache (the same
// HotPath as the MQD DLL), C strings, each thread's thread pointer, TLS addresses from the
// runtime's TLS relocations, and symbols of the runtime's modules. Stateless over OmpdProcess.

import { USER_REGS_FS_BASE } from '../inferior/core-file.js';
import type { MappedModule } from '../inferior/process-image.js';
import { NT_PRSTATUS, NT_PRSTATUS_BYTES, readRegSet } from '../native/ptrace-ext.js';
import { tlsRelocations } from './elf-symbols.js';
import type { OmpdProcess } from './raw.js';

/** Our thread context record: a stopped thread and its thread pointer. */
export interface ThreadContext {
  readonly space: number;
  readonly tid: number;
  readonly fsBase: bigint;
}

/** An address-space context: the rank being read (our key for it is what libompd holds). */
export interface SpaceContext {
  readonly target: OmpdProcess;
  readonly runtime: MappedModule;
  readonly fsBase: Map<number, bigint | null>;
}

export function readU64(t: OmpdProcess, addr: bigint): bigint | null {
  const b = new Uint8Array(8);
  return t.hot.read(t.memKey, addr, 8, b) ? new DataView(b.buffer).getBigUint64(0, true) : null;
}

/** A C string of the target, up to `max` bytes, read page by page (null: unreadable start). */
export function readCString(t: OmpdProcess, addr: bigint, max: number): string | null {
  const bytes = readStringBytes(t, addr, max);
  return bytes === null ? null : Buffer.from(bytes).toString('utf8');
}

/** Bytes of a target C string without its NUL (null: unreadable, or no NUL within `max`). */
export function readStringBytes(t: OmpdProcess, addr: bigint, max: number): Uint8Array | null {
  const parts: Uint8Array[] = [];
  let got = 0;
  let a = addr;
  while (got < max) {
    const len = Math.min(max - got, 4096 - Number(a & 0xfffn));
    const b = new Uint8Array(len);
    if (!t.hot.read(t.memKey, a, len, b)) return null;
    const z = b.indexOf(0);
    if (z >= 0) {
      parts.push(b.subarray(0, z));
      return Buffer.concat(parts);
    }
    parts.push(b);
    got += len;
    a += BigInt(len);
  }
  return null;
}

export function fsBaseOf(space: SpaceContext, tid: number): bigint | null {
  const saved = space.target.threadPointers;
  if (saved) return saved.get(tid) ?? null;
  let v = space.fsBase.get(tid);
  if (v === undefined) {
    const regs = readRegSet(tid, NT_PRSTATUS, NT_PRSTATUS_BYTES);
    v =
      typeof regs === 'number' || regs.length < (USER_REGS_FS_BASE + 1) * 8
        ? null
        : new DataView(regs.buffer, regs.byteOffset).getBigUint64(USER_REGS_FS_BASE * 8, true);
    space.fsBase.set(tid, v);
  }
  return v;
}

/**
 * The address of thread-local `name` for a thread (glibc x86_64): the module's id from its
 * DTPMOD64 GOT slot, the thread's DTV at fs_base + 8, 16-byte entries, the block + st_value;
 * an initial-exec TPOFF64 slot (fs_base + offset) when the module has no DTPMOD64 slot.
 */
export function tlsAddress(
  space: SpaceContext,
  th: ThreadContext,
  name: string,
  file: string | null,
): bigint | null {
  const t = space.target;
  for (const m of modulesFor(space, file)) {
    // The offset from the module's symbols (its debug file's when it is stripped), the GOT
    // slots from the file the process maps.
    const off = m.file.tlsSymbol(name)?.value;
    if (off === undefined) continue;
    const rel = tlsRelocations(m.file.path);
    const slot = rel?.dtpmodSlots[0];
    let modid: bigint | null = null;
    if (slot !== undefined) modid = readU64(t, m.bias + slot);
    else if (m.path === t.image.exe) modid = 1n; // the executable's block is module 1
    if (modid !== null && modid > 0n) {
      const dtv = readU64(t, th.fsBase + 8n);
      const block = dtv === null ? null : readU64(t, dtv + 16n * modid);
      // 0 or -1 (TLS_DTV_UNALLOCATED): this thread has not allocated the module's block.
      if (block === null || block === 0n || block === 0xffffffffffffffffn) return null;
      return block + off;
    }
    const tp = rel?.tpoffSlots.get(name);
    if (tp === undefined) return null;
    const r = readU64(t, m.bias + tp);
    return r === null ? null : BigInt.asUintN(64, th.fsBase + BigInt.asIntN(64, r));
  }
  return null;
}

/** The modules a lookup may answer from: the named file (by path or base name), else all. */
export function modulesFor(space: SpaceContext, file: string | null): readonly MappedModule[] {
  const all = space.target.image.modules;
  if (!file) return [space.runtime, ...all.filter((m) => m !== space.runtime)];
  const base = file.slice(file.lastIndexOf('/') + 1);
  return all.filter((m) => m.path === file || m.path.slice(m.path.lastIndexOf('/') + 1) === base);
}

export function symbolAddress(space: SpaceContext, name: string, file: string | null): bigint | null {
  if (file === null) {
    // The runtime's own definition first (its LOCAL ompd_* symbols), then the usual order.
    const own = space.runtime.file.symbol(name);
    if (own) return own.value + space.runtime.bias;
    return space.target.image.findSymbol(name)?.address ?? null;
  }
  for (const m of modulesFor(space, file)) {
    const s = m.file.symbol(name);
    if (s) return s.value + m.bias;
  }
  return null;
}
