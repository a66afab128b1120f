// libc through koffi: memory reads (process_vm_readv), ptrace, waitpid, prctl, dlopen/dlsym.
// Handles are integers (koffi trap 4, README.md); every allocation is owned by this module for the
// life of the process (trap 1).
import koffi from 'koffi';
import { permanentAlloc } from './alloc.js';

const libc = koffi.load('libc.so.6');

export const iovec = koffi.struct('mqd_iovec', { base: 'uintptr_t', len: 'size_t' });

const _process_vm_readv = libc.func(
  'intptr_t process_vm_readv(int pid, void *local, unsigned long liovcnt, void *remote, unsigned long riovcnt, unsigned long flags)',
);
// ptrace is variadic in glibc's header; the syscall wrapper takes exactly four arguments.
const _ptrace = libc.func('long ptrace(int request, int pid, uintptr_t addr, uintptr_t data)');
const _waitpid = libc.func('int waitpid(int pid, _Out_ int *status, int options)');
const _prctl = libc.func(
  'int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5)',
);
const _dlopen = libc.func('void *dlopen(const char *file, int mode)');
const _dlsym = libc.func('void *dlsym(void *handle, const char *name)');
const _dlerror = libc.func('const char *dlerror()');
const _getpid = libc.func('int getpid()');
const _getppid = libc.func('int getppid()');
const _strerror = libc.func('const char *strerror(int errnum)');
export const _memcpy = libc.func('void *memcpy(uintptr_t dst, uintptr_t src, size_t n)');
export const _strlen = libc.func('size_t strlen(uintptr_t s)');

export const PTRACE_DETACH = 17;
export const PTRACE_SEIZE = 0x4206;
export const PTRACE_INTERRUPT = 0x4207;
export const PTRACE_EVENT_STOP = 128;
export const WNOHANG = 1;
export const __WALL = 0x40000000;
export const PR_SET_PDEATHSIG = 1;
export const RTLD_NOW = 2;
export const RTLD_LOCAL = 0;

export const ESRCH = 3;
export const EPERM = 1;
export const EFAULT = 14;
export const EIO = 5;

export function errno(): number {
  return koffi.errno();
}
export function strerror(e: number): string {
  return _strerror(e) as string;
}

/** One process_vm_readv of `len` bytes at `remote` into native memory at `localAddr`. Returns bytes read or -errno. */
export function vmRead(pid: number, localAddr: bigint, remote: bigint, len: number, iovs: IovecPair): number {
  koffi.encode(iovs.local, iovec, { base: localAddr, len });
  koffi.encode(iovs.remote, iovec, { base: remote, len });
  const n = Number(_process_vm_readv(pid, iovs.local, 1, iovs.remote, 1, 0));
  return n < 0 ? -koffi.errno() : n;
}

export interface IovecPair {
  readonly local: unknown;
  readonly remote: unknown;
}
export function allocIovecs(): IovecPair {
  return { local: permanentAlloc(iovec, 1), remote: permanentAlloc(iovec, 1) };
}

/** ptrace(request, tid, addr, data): 0 on success or -errno. */
export function ptrace(request: number, tid: number, addr = 0n, data = 0n): number {
  const r = Number(_ptrace(request, tid, addr, data));
  return r < 0 ? -koffi.errno() : r;
}

/** waitpid; returns [pid or -errno, status]. */
export function waitpid(pid: number, options: number): [number, number] {
  const status = [0];
  const r = _waitpid(pid, status, options) as number;
  return [r < 0 ? -koffi.errno() : r, status[0] ?? 0];
}

/** prctl(PR_SET_PDEATHSIG, signal): 0 or -errno. The kernel sends `signal` when the parent thread ends. */
export function setParentDeathSignal(signal: number): number {
  const r = _prctl(PR_SET_PDEATHSIG, signal, 0, 0, 0) as number;
  return r < 0 ? -koffi.errno() : r;
}

/** The parent's pid as the kernel says it now (not a value cached at start). */
export function getppid(): number {
  return _getppid() as number;
}

export function getpid(): number {
  return _getpid() as number;
}

export function dlopen(path: string, mode: number): { handle: unknown } | { error: string } {
  const h = _dlopen(path, mode);
  if (!h) return { error: (_dlerror() as string | null) ?? 'dlopen failed' };
  return { handle: h };
}

/** Address of a symbol in the global namespace (RTLD_DEFAULT) or a handle; 0n if absent. */
export function dlsymAddress(handle: unknown, name: string): bigint {
  const p = _dlsym(handle ?? null, name);
  return p ? BigInt(koffi.address(p)) : 0n;
}

// ---- the reader's identity (reader/identity.ts) ----
const _getuid = libc.func('uint32_t getuid()');
const _geteuid = libc.func('uint32_t geteuid()');
const _getgid = libc.func('uint32_t getgid()');
const _getegid = libc.func('uint32_t getegid()');
export const PR_SET_NO_NEW_PRIVS = 38;
export const PR_GET_NO_NEW_PRIVS = 39;

/** prctl(PR_SET_NO_NEW_PRIVS, 1): 0 or -errno. Nothing this process execs can gain privileges. */
export function setNoNewPrivs(): number {
  const r = _prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as number;
  return r < 0 ? -koffi.errno() : r;
}

export function credentials(): { uid: number; euid: number; gid: number; egid: number } {
  return {
    uid: _getuid() as number,
    euid: _geteuid() as number,
    gid: _getgid() as number,
    egid: _getegid() as number,
  };
}
