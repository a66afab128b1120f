// ptrace beyond stop-and-read: what a launcher needs to run a starter under the tool from its
// first instruction (PTRACE_SEIZE with options, breakpoints, single-thread continue, registers)
// and process_vm_writev. Used by @mqd/mpir, which may not import koffi itself.
//
// Every call here is a synchronous koffi call on the calling JS thread. ptrace is per thread on
// both sides: the thread that seized a tracee must make every later request for it, so never
// call these from a koffi async call or a worker other than the one that seized.
// x86_64 only (the register layout below and the int3 opcode the callers write).
import koffi from 'koffi';
import { permanentAlloc, withScratch } from './alloc.js';
import {
  __WALL,
  iovec,
  PTRACE_DETACH,
  PTRACE_INTERRUPT,
  PTRACE_SEIZE,
  ptrace,
  WNOHANG,
  waitpid,
} from './libc.js';

const libc = koffi.load('libc.so.6');
const _process_vm_writev = libc.func(
  'intptr_t process_vm_writev(int pid, void *local, unsigned long liovcnt, void *remote, unsigned long riovcnt, unsigned long flags)',
);

export const PTRACE_POKEDATA = 5;
export const PTRACE_CONT = 7;
export const PTRACE_GETREGS = 12;
export const PTRACE_SETREGS = 13;
export const PTRACE_SETOPTIONS = 0x4200;
export const PTRACE_GETEVENTMSG = 0x4201;
export const PTRACE_GETREGSET = 0x4204;

/** Register-set types of PTRACE_GETREGSET (the ELF note types of a core, <elf.h>). */
export const NT_PRSTATUS = 1;
export const NT_PRFPREG = 2;
/** Bytes of each set on x86_64: struct user_regs_struct, struct user_fpregs_struct. */
export const NT_PRSTATUS_BYTES = 27 * 8;
export const NT_PRFPREG_BYTES = 512;

export const PTRACE_O_TRACECLONE = 0x8;
export const PTRACE_O_TRACEEXEC = 0x10;
/** The tracee is SIGKILLed if the tracer exits: a job we launched does not outlive a dead tool half set up. */
export const PTRACE_O_EXITKILL = 0x100000;

export const PTRACE_EVENT_CLONE = 3;
export const PTRACE_EVENT_EXEC = 4;
export const PTRACE_EVENT_STOP = 128;

export { EPERM, ESRCH } from './libc.js';

export const SIGTRAP = 5;
export const SIGSTOP = 19;

/** x86_64 `int3`. */
export const INT3 = 0xcc;

/** True when this process can use the breakpoint and register helpers below. */
export const BREAKPOINTS_SUPPORTED = process.arch === 'x64';

/** user_regs_struct on x86_64: 27 unsigned longs; rip is the 17th. */
const USER_REGS_WORDS = 27;
const RIP_INDEX = 16;

export function seize(tid: number, options: number): number {
  return ptrace(PTRACE_SEIZE, tid, 0n, BigInt(options));
}
export function setOptions(tid: number, options: number): number {
  return ptrace(PTRACE_SETOPTIONS, tid, 0n, BigInt(options));
}
/** Resumes a thread in ptrace-stop, delivering `signal` (0 = none). */
export function cont(tid: number, signal = 0): number {
  return ptrace(PTRACE_CONT, tid, 0n, BigInt(signal));
}
export function interrupt(tid: number): number {
  return ptrace(PTRACE_INTERRUPT, tid);
}
/** Detaches a thread in ptrace-stop; `signal` is delivered as it resumes. */
export function detach(tid: number, signal = 0): number {
  return ptrace(PTRACE_DETACH, tid, 0n, BigInt(signal));
}

// Native buffers owned by this module for the life of the process (koffi trap 1, README.md).
const regsBuf = permanentAlloc('uint64_t', USER_REGS_WORDS);
const regsAddr = BigInt(koffi.address(regsBuf));
const msgBuf = permanentAlloc('uint64_t', 1);
const msgAddr = BigInt(koffi.address(msgBuf));
const ioLocal = permanentAlloc(iovec, 1);
const ioRemote = permanentAlloc(iovec, 1);
const writeBuf = permanentAlloc('uint8_t', 4096);
const writeAddr = BigInt(koffi.address(writeBuf));

/** PTRACE_GETEVENTMSG (the new tid after a clone event); -errno as a negative bigint on failure. */
export function eventMessage(tid: number): bigint {
  const r = ptrace(PTRACE_GETEVENTMSG, tid, 0n, msgAddr);
  if (r < 0) return BigInt(r);
  const v = koffi.decode(msgBuf, 'uint64_t') as number | bigint;
  return typeof v === 'bigint' ? v : BigInt(v);
}

function readRegs(tid: number): BigUint64Array | number {
  const r = ptrace(PTRACE_GETREGS, tid, 0n, regsAddr);
  if (r < 0) return r;
  return new BigUint64Array(koffi.view(regsBuf, USER_REGS_WORDS * 8).slice(0));
}

/** The instruction pointer of a stopped thread, or -errno. */
export function readIp(tid: number): bigint | number {
  const regs = readRegs(tid);
  if (typeof regs === 'number') return regs;
  return regs[RIP_INDEX] ?? 0n;
}

/** Sets the instruction pointer of a stopped thread (e.g. back onto a breakpoint just hit). */
export function writeIp(tid: number, ip: bigint): number {
  const regs = readRegs(tid);
  if (typeof regs === 'number') return regs;
  regs[RIP_INDEX] = ip;
  new Uint8Array(koffi.view(regsBuf, USER_REGS_WORDS * 8)).set(new Uint8Array(regs.buffer));
  return ptrace(PTRACE_SETREGS, tid, 0n, regsAddr);
}

/**
 * PTRACE_GETREGSET: register set `type` (NT_PRSTATUS, NT_PRFPREG) of a thread we hold stopped,
 * at most `maxBytes` (the kernel says how many it filled), or -errno. Its native buffer and iovec
 * are scoped to the call (freed before it returns).
 */
export function readRegSet(tid: number, type: number, maxBytes: number): Uint8Array | number {
  return withScratch((alloc) => {
    const buf = alloc('uint8_t', maxBytes);
    const io = alloc(iovec, 1);
    koffi.encode(io, iovec, { base: BigInt(koffi.address(buf)), len: maxBytes });
    const r = ptrace(PTRACE_GETREGSET, tid, BigInt(type), BigInt(koffi.address(io)));
    if (r < 0) return r;
    const filled = (koffi.decode(io, iovec) as { len: number | bigint }).len;
    return new Uint8Array(koffi.view(buf, Number(filled))).slice(0);
  });
}

/** PTRACE_POKEDATA of one 8-byte word (it ignores page protections: text can be patched). */
export function pokeWord(tid: number, addr: bigint, word: bigint): number {
  return ptrace(PTRACE_POKEDATA, tid, addr, BigInt.asUintN(64, word));
}

/** process_vm_writev of `bytes` (at most 4096) at `addr`: bytes written, or -errno. Needs no attach, only ptrace permission; honours page protections. */
export function vmWrite(pid: number, addr: bigint, bytes: Uint8Array): number {
  if (bytes.length > 4096) throw new RangeError('vmWrite writes at most 4096 bytes at a time');
  new Uint8Array(koffi.view(writeBuf, 4096)).set(bytes);
  koffi.encode(ioLocal, iovec, { base: writeAddr, len: bytes.length });
  koffi.encode(ioRemote, iovec, { base: addr, len: bytes.length });
  const n = Number(_process_vm_writev(pid, ioLocal, 1, ioRemote, 1, 0));
  return n < 0 ? -koffi.errno() : n;
}

/** What waitpid said about one traced thread. */
export type TraceEvent =
  | { readonly kind: 'none' }
  | { readonly kind: 'exited'; readonly code: number }
  | { readonly kind: 'killed'; readonly signal: number }
  /** `event` is the PTRACE_EVENT_* (0 for a signal-delivery-stop); `signal` is the stop signal. */
  | { readonly kind: 'stopped'; readonly signal: number; readonly event: number }
  | { readonly kind: 'error'; readonly errno: number };

/** waitpid(tid, __WALL [| WNOHANG]) decoded. Waits on one tid only: never -1, which would reap Node's own children. */
export function waitThread(tid: number, block = false): TraceEvent {
  const [r, status] = waitpid(tid, __WALL | (block ? 0 : WNOHANG));
  if (r < 0) return { kind: 'error', errno: -r };
  if (r === 0) return { kind: 'none' };
  if ((status & 0x7f) === 0) return { kind: 'exited', code: (status >> 8) & 0xff };
  if ((status & 0xff) === 0x7f)
    return { kind: 'stopped', signal: (status >> 8) & 0xff, event: status >>> 16 };
  return { kind: 'killed', signal: status & 0x7f };
}
