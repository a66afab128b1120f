// A core file as the reader sees a process: its address space as regions that the
// native hot path serves by pread (the core's own segments first; pages the kernel left out
// from the files the process had mapped, when those are still the same files), its modules
// from the NT_FILE note (symbols and types as for a live process), and small reads in
// JavaScript for what is asked before the DLL runs (MPIR_dll_name, the environment).
// Never wrong numbers: a file whose build-id differs from the core's record of it serves no
// bytes and no symbols; memory the core lacks reads as missing (MQD_E_CORE_MISSING_PAGES).
import { closeSync, constants, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import { type CoreInfo, coreBuildIdAt, readCoreInfo, USER_REGS_FS_BASE } from './core-file.js';
import type { DebugFileRegistry } from './debug-file-registry.js';
import { type FileMapping, mappedModules, ProcessImage } from './process-image.js';
import type { CoreRegion } from './shim.js';

const AT_ENTRY = 9;
const AT_PHDR = 3;

export interface CoreOpenOptions {
  /** The executable, when it is not at the path the process ran it from. */
  readonly exe?: string;
  /** A directory that holds the job's files under their original paths (`--sysroot`). */
  readonly sysroot?: string;
  /**
   * The uid the core file must belong to (checked on the open descriptor): a reader that root
   * started as a core's owner reads only that owner's file, never one swapped in after root
   * chose the owner from the path (a user's core parsed, and its DLL loaded, by a root reader).
   */
  readonly owner?: number;
}

/** A mapped file the core cannot be read with, and why. */
export interface CoreFileProblem {
  readonly path: string;
  /** The file opened here for it (after --exe / --sysroot). */
  readonly onDisk: string;
  readonly problem: 'missing' | 'changed';
  /** For 'changed': the build-ids the core records and the file has. */
  readonly coreBuildId?: string;
  readonly fileBuildId?: string;
}

export class OpenedCore {
  private closed = false;

  private constructor(
    readonly path: string,
    readonly info: CoreInfo,
    readonly fd: number,
    readonly image: ProcessImage,
    readonly regions: readonly CoreRegion[],
    readonly problems: readonly CoreFileProblem[],
    /** The executable to open here (after --exe / --sysroot), for the unwinder. */
    readonly exeOnDisk: string | null,
    private readonly fds: readonly number[],
    private readonly onDisk: (path: string) => string,
  ) {}

  /**
   * Where a file the process named is opened here: `--exe` for the executable, else under
   * `--sysroot` when it is there, else its own path (a file the core's memory names, such as the
   * OMPD library in `ompd_dll_locations`, is looked up the same way as the mapped ones).
   */
  fileOnDisk(path: string): string {
    return this.onDisk(path);
  }

  /** Each thread's thread pointer (fs_base) from its NT_PRSTATUS, by tid. */
  threadPointers(): Map<number, bigint> {
    const out = new Map<number, bigint>();
    for (const t of this.info.threads) {
      const fs = t.regs[USER_REGS_FS_BASE];
      if (fs !== undefined) out.set(t.tid, fs);
    }
    return out;
  }

  /** Opens and checks a core; every file descriptor it opens is closed by close(). */
  static open(
    path: string,
    registry: DebugFileRegistry,
    opts: CoreOpenOptions = {},
  ): Result<OpenedCore, MqdError> {
    // Opened once, without blocking (a FIFO put in its place would hang the reader), and only a
    // regular file; everything after reads this open file, whatever the path points to later.
    let fd: number;
    try {
      fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    } catch (e) {
      return err(mqdError('MQD_E_CORE_INVALID', `cannot open ${path}: ${(e as Error).message}`));
    }
    const st = fstatSync(fd);
    if (!st.isFile()) {
      closeSync(fd);
      return err(mqdError('MQD_E_CORE_INVALID', `${path} is not a regular file`));
    }
    if (opts.owner !== undefined && st.uid !== opts.owner) {
      closeSync(fd);
      return err(
        mqdError(
          'MQD_E_FOREIGN_PROCESS',
          `${path} belongs to uid ${st.uid}, but this reader was started for uid ${opts.owner}'s cores: not read (was the file replaced?)`,
        ),
      );
    }
    const parsed = readCoreInfo(`/proc/self/fd/${fd}`);
    if (!parsed.ok) {
      closeSync(fd);
      return err({ ...parsed.error, message: parsed.error.message.replaceAll(`/proc/self/fd/${fd}`, path) });
    }
    const info = { ...parsed.value, path };
    const fds: number[] = [fd];
    try {
      const exePath = executableOf(info);
      const onDisk = (p: string): string => {
        if (p === exePath && opts.exe !== undefined) return opts.exe;
        return opts.sysroot !== undefined ? inSysroot(opts.sysroot, p) : p;
      };
      const mappings: FileMapping[] = info.files.map((f) => ({
        path: f.path,
        start: f.start,
        end: f.end,
        offset: f.fileOffset,
      }));
      const problems: CoreFileProblem[] = [];
      const changed = new Set<string>();
      const all = mappedModules(mappings, onDisk, registry);
      const found = new Set(all.map((m) => m.path));
      for (const m of all) {
        const zero = info.files.find((f) => f.path === m.path && f.fileOffset === 0n);
        const recorded = zero ? coreBuildIdAt(info, fd, zero.start) : null;
        // Without the header page in the core the build-id cannot be checked: trusted.
        if (recorded !== null && m.file.buildId !== null && recorded !== m.file.buildId) {
          changed.add(m.path);
          problems.push({
            path: m.path,
            onDisk: onDisk(m.path),
            problem: 'changed',
            coreBuildId: recorded,
            fileBuildId: m.file.buildId,
          });
        }
      }
      for (const f of new Set(info.files.map((x) => x.path))) {
        if (!found.has(f) && !isPseudoFile(f))
          problems.push({ path: f, onDisk: onDisk(f), problem: 'missing' });
      }
      const modules = all.filter((m) => !changed.has(m.path));
      const image = ProcessImage.of(info.pid, exePath ?? '', modules);
      // Files that serve the pages the kernel did not dump: opened once each.
      const fileFd = new Map<string, number>();
      const fdOf = (p: string): number => {
        if (changed.has(p)) return -1;
        let f = fileFd.get(p);
        if (f !== undefined) return f;
        try {
          f = openSync(onDisk(p), 'r');
          fds.push(f);
        } catch {
          f = -1;
        }
        fileFd.set(p, f);
        return f;
      };
      const regions = coreRegions(info, fd, fdOf);
      const exeOnDisk = exePath === null ? (opts.exe ?? null) : onDisk(exePath);
      return ok(new OpenedCore(path, info, fd, image, regions, problems, exeOnDisk, fds, onDisk));
    } catch (e) {
      for (const f of fds) closeSync(f);
      return err(mqdError('MQD_E_CORE_INVALID', `${path}: ${(e as Error).message}`));
    }
  }

  /** Files the core's memory or symbols come from that changed since the crash. */
  changedFiles(): CoreFileProblem[] {
    return this.problems.filter((p) => p.problem === 'changed');
  }

  /** `len` bytes at `addr` as the process had them, or null when any is unavailable. */
  read(addr: bigint, len: number): Uint8Array | null {
    const out = new Uint8Array(len);
    let done = 0;
    while (done < len) {
      const a = addr + BigInt(done);
      const r = this.regions.find((x) => a >= x.start && a < x.end);
      if (!r || r.fd < 0) return null;
      const n = Math.min(len - done, Number(r.end - a));
      const got = readSync(r.fd, out, done, n, Number(r.offset + (a - r.start)));
      if (got <= 0) return null;
      done += got;
    }
    return out;
  }

  readU64(addr: bigint): bigint | null {
    const b = this.read(addr, 8);
    return b ? new DataView(b.buffer).getBigUint64(0, true) : null;
  }

  /** A NUL-terminated string of at most `max` bytes. */
  readCString(addr: bigint, max: number): string | null {
    const out: number[] = [];
    for (let off = 0; off < max; ) {
      const a = addr + BigInt(off);
      // A string may end just before the end of its mapping (the environment at the stack's top).
      const r = this.regions.find((x) => a >= x.start && a < x.end);
      if (!r) return null;
      const chunk = this.read(a, Math.min(256, max - off, Number(r.end - a)));
      if (!chunk) return null;
      off += chunk.length;
      const z = chunk.indexOf(0);
      if (z >= 0) {
        out.push(...chunk.subarray(0, z));
        return Buffer.from(out).toString('utf8');
      }
      out.push(...chunk);
    }
    return null;
  }

  /** The process's environment, read through libc's `__environ` in the core; null if unreadable. */
  environ(): Map<string, string> | null {
    const sym = this.image.findSymbol('__environ') ?? this.image.findSymbol('environ');
    if (!sym) return null;
    const vec = this.readU64(sym.address);
    if (vec === null || vec === 0n) return null;
    const env = new Map<string, string>();
    for (let i = 0; i < 100_000; i++) {
      const p = this.readU64(vec + BigInt(8 * i));
      if (p === null) return env.size > 0 ? env : null;
      if (p === 0n) break;
      const kv = this.readCString(p, 32768);
      if (kv === null) continue;
      const eq = kv.indexOf('=');
      if (eq > 0) env.set(kv.slice(0, eq), kv.slice(eq + 1));
    }
    return env;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const f of this.fds) closeSync(f);
  }
}

/**
 * A file of the job under a sysroot (a capture's bundle, a copy of the job's node): there when it
 * is there, else where the process had it (build-ids are checked either way).
 */
export function inSysroot(sysroot: string, path: string): string {
  const p = join(sysroot, path);
  return existsSync(p) ? p : path;
}

/** The executable's path as the process saw it: the NT_FILE entry holding AT_ENTRY (or AT_PHDR). */
function executableOf(info: CoreInfo): string | null {
  for (const at of [AT_ENTRY, AT_PHDR]) {
    const a = info.auxv.get(at);
    if (a === undefined || a === 0n) continue;
    const f = info.files.find((x) => a >= x.start && a < x.end);
    if (f) return f.path;
  }
  return info.files[0]?.path ?? null;
}

/** Mappings that are not files one could open (shared memory, deleted files keep their path). */
function isPseudoFile(path: string): boolean {
  return path.startsWith('/dev/') || path.startsWith('/memfd:') || path.startsWith('/SYSV');
}

/**
 * The address space of the core as regions: each segment's bytes in the core, and past them
 * (segments the kernel kept short: read-only file mappings) the mapped file's bytes, or -1 for
 * memory the process had that neither holds. Sorted and disjoint.
 */
export function coreRegions(info: CoreInfo, coreFd: number, fdOf: (path: string) => number): CoreRegion[] {
  const files = [...info.files].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  const out: CoreRegion[] = [];
  const segments = [...info.segments].sort((a, b) => (a.vaddr < b.vaddr ? -1 : a.vaddr > b.vaddr ? 1 : 0));
  for (const seg of segments) {
    if (seg.memsz === 0n) continue;
    const end = seg.vaddr + seg.memsz;
    const dumped = minBig(seg.filesz, seg.memsz);
    if (dumped > 0n) out.push({ start: seg.vaddr, end: seg.vaddr + dumped, fd: coreFd, offset: seg.offset });
    let a = seg.vaddr + dumped;
    while (a < end) {
      const f = files.find((x) => a >= x.start && a < x.end);
      if (f) {
        const e = minBig(f.end, end);
        const fd = fdOf(f.path);
        out.push({ start: a, end: e, fd, offset: fd < 0 ? 0n : f.fileOffset + (a - f.start) });
        a = e;
        continue;
      }
      const next = files.find((x) => x.start > a && x.start < end);
      const e = next ? next.start : end;
      out.push({ start: a, end: e, fd: -1, offset: 0n });
      a = e;
    }
  }
  return out;
}

const minBig = (a: bigint, b: bigint): bigint => (a < b ? a : b);
