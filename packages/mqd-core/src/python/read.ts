// A rank's CPython frames, read in the stop that reads its queues and C stacks, through the same
// memory (page cache and read budget). From the exported `_PyRuntime`: every interpreter, every
// thread state (joined to an OS thread by its native thread id), and each thread's chain of
// `_PyInterpreterFrame`s from its current C frame outwards: the code object's qualified name,
// file name and the line of the frame's instruction (line-table.ts). A version whose layout is
// not known (layout.ts) is a coded limit for the rank, never a guess.
import {
  MAX_THREADS_PER_RANK,
  type MqdError,
  mqdError,
  type PythonFrame,
  type PythonStack,
} from '@mqd/model';
import type { DebugFile } from '../inferior/debug-file.js';
import type { MappedModule, ProcessImage } from '../inferior/process-image.js';
import type { RankMemory } from '../mqs/libraries/library.js';
import { DWARF_FIELDS, PYTHON_LAYOUTS, type PythonLayout, versionText } from './layout.js';
import { lineAt } from './line-table.js';

/** What the stop read of the rank's CPython. */
export interface PythonRead {
  /** "3.11.2", or what the interpreter's file name says when it has no Py_Version. */
  readonly version: string;
  readonly error: MqdError | null;
  /** Each thread's frames, by tid (threads without a thread state are absent). */
  readonly threads: ReadonlyMap<number, PythonStack>;
}

const MAX_INTERPRETERS = 256;
/** Longest names kept (the snapshot's limits for PythonFrame.function and .file). */
const MAX_NAME_CHARS = 1024;
const MAX_FILE_CHARS = 4096;
/** Largest location table read (bytes): far above any real function's. */
const MAX_LINE_TABLE_BYTES = 1 << 20;
/** _PyInterpreterFrame.owner of a generator's or coroutine's frame. */
const FRAME_OWNED_BY_GENERATOR = 1;

/** A CPython interpreter file: `python3.11`, `libpython3.11.so.1.0`. */
export const isPythonPath = (path: string): boolean => /\/(lib)?python\d\.\d+[a-z]*(\.so[.\d]*)?$/.test(path);

/** The module that holds the interpreter (the executable or libpython), or null. */
export function pythonModule(image: Pick<ProcessImage, 'modules'>): MappedModule | null {
  return image.modules.find((m) => isPythonPath(m.path)) ?? null;
}

/** Layouts with the DWARF offsets applied, once per interpreter file. */
const dwarfLayouts = new WeakMap<DebugFile, PythonLayout>();

/** The table's layout, with the offsets the interpreter's own DWARF gives where it has them. */
export function layoutFor(module: MappedModule, table: PythonLayout): PythonLayout {
  const file = module.file;
  const known = dwarfLayouts.get(file);
  if (known) return known;
  let layout = table;
  if (file.hasDwarf()) {
    const out: Record<string, number> = { ...table };
    const offset = (type: string, field: string): number => {
      const t = file.findType(type);
      return t ? file.fieldOffset(t, field) : -1;
    };
    for (const [key, type, field] of DWARF_FIELDS) {
      const o = offset(type, field);
      if (o >= 0) out[key] = o;
    }
    const threads = offset('_is', 'threads');
    if (threads >= 0 && out.interpThreadsHead !== undefined) out.interpThreadsHead += threads;
    layout = out as unknown as PythonLayout;
  }
  dwarfLayouts.set(file, layout);
  return layout;
}

class ReadFailed extends Error {}

/**
 * Reads the rank's Python frames (call while it is stopped). null: the rank maps no CPython.
 * `tids` are the threads the stacks hold: a thread state of another thread is not kept.
 */
export function readPython(
  image: Pick<ProcessImage, 'modules' | 'findSymbol'>,
  mem: RankMemory,
  tids: readonly number[],
  maxFrames: number,
): PythonRead | null {
  const module = pythonModule(image);
  if (!module) return null;
  const fromName = /python(\d\.\d+)/.exec(module.path)?.[1] ?? 'unknown';
  const none = new Map<number, PythonStack>();
  const versionSym = image.findSymbol('Py_Version');
  const runtime = image.findSymbol('_PyRuntime');
  const word = versionSym ? mem.bytes(versionSym.address, 4) : null;
  if (!word || !runtime) {
    // Py_Version exists from 3.11 on: an older interpreter (or one without its symbols).
    return {
      version: fromName,
      error: mqdError(
        'MQD_E_PYTHON_UNSUPPORTED',
        `${module.path} is CPython ${fromName} (${!runtime ? 'no _PyRuntime symbol' : 'no Py_Version'}); the reader knows 3.11`,
      ),
      threads: none,
    };
  }
  const hex = new DataView(word.buffer, word.byteOffset, 4).getUint32(0, true);
  const version = versionText(hex);
  const table = PYTHON_LAYOUTS.get(hex >>> 16);
  if (!table) {
    return {
      version,
      error: mqdError(
        'MQD_E_PYTHON_UNSUPPORTED',
        `${module.path} is CPython ${version}; the reader knows the frame layout of 3.11 only`,
      ),
      threads: none,
    };
  }
  // The file that defines _PyRuntime holds the interpreter (libpython, or a static executable).
  const L = layoutFor(runtime.module, table);
  const wanted = new Set(tids);
  const threads = new Map<number, PythonStack>();
  const codes = new Map<bigint, Code>();
  const u64 = (addr: bigint, what: string): bigint => {
    const v = mem.u64(addr);
    if (v === null) throw new ReadFailed(`${what} at 0x${addr.toString(16)} is unreadable`);
    return v;
  };
  try {
    let interp = u64(runtime.address + BigInt(L.runtimeInterpretersHead), '_PyRuntime.interpreters.head');
    for (let ni = 0; interp !== 0n && ni < MAX_INTERPRETERS; ni++) {
      let ts = u64(interp + BigInt(L.interpThreadsHead), 'the interpreter’s first thread state');
      for (let nt = 0; ts !== 0n && nt < MAX_THREADS_PER_RANK; nt++) {
        const tid = Number(u64(ts + BigInt(L.threadNativeId), 'a thread state’s native_thread_id'));
        if (wanted.has(tid) && !threads.has(tid)) {
          const cframe = u64(ts + BigInt(L.threadCframe), 'a thread state’s cframe');
          const top = cframe === 0n ? 0n : u64(cframe + BigInt(L.cframeCurrentFrame), 'the current frame');
          threads.set(tid, walkFrames(mem, L, top, maxFrames, codes));
        }
        ts = u64(ts + BigInt(L.threadNext), 'a thread state’s next');
      }
      interp = u64(interp + BigInt(L.interpNext), 'an interpreter’s next');
    }
  } catch (e) {
    if (!(e instanceof ReadFailed)) throw e;
    return { version, error: mqdError('MQD_E_PYTHON_READ', `CPython ${version}: ${e.message}`), threads };
  }
  return { version, error: null, threads };
}

interface Code {
  readonly fn: string;
  readonly file: string;
  readonly firstLine: number;
  readonly table: Uint8Array;
  /** Address of the first instruction, and of the first one a traceback would show. */
  readonly start: bigint;
  readonly firstTraceable: bigint;
}

function walkFrames(
  mem: RankMemory,
  L: PythonLayout,
  top: bigint,
  maxFrames: number,
  codes: Map<bigint, Code>,
): PythonStack {
  const frames: PythonFrame[] = [];
  const buf = new Uint8Array(L.frameSize);
  const view = new DataView(buf.buffer);
  let frame = top;
  let seen = 0;
  while (frame !== 0n) {
    if (seen++ >= 4 * maxFrames || frames.length >= maxFrames) return { frames, truncated: true };
    if (!mem.readInto(frame, buf)) throw new ReadFailed(`the frame at 0x${frame.toString(16)} is unreadable`);
    const codeAddr = view.getBigUint64(L.frameCode, true);
    const prevInstr = view.getBigUint64(L.framePrevInstr, true);
    const entry = buf[L.frameIsEntry] !== 0;
    const owner = buf[L.frameOwner];
    frame = view.getBigUint64(L.framePrevious, true);
    const code = codeAt(mem, L, codeAddr, codes);
    // A frame still being set up has run none of its own code: tracebacks skip it, and so do we.
    if (owner !== FRAME_OWNED_BY_GENERATOR && prevInstr < code.firstTraceable) {
      const last = frames[frames.length - 1];
      if (entry && last) frames[frames.length - 1] = { ...last, entry: true };
      continue;
    }
    const unit = Number((prevInstr - code.start) / 2n);
    frames.push({
      function: code.fn,
      file: code.file,
      line: lineAt(code.table, code.firstLine, unit),
      entry,
    });
  }
  return { frames, truncated: false };
}

function codeAt(mem: RankMemory, L: PythonLayout, addr: bigint, codes: Map<bigint, Code>): Code {
  const hit = codes.get(addr);
  if (hit) return hit;
  const head = mem.bytes(addr, L.codeAdaptive);
  if (!head) throw new ReadFailed(`the code object at 0x${addr.toString(16)} is unreadable`);
  const v = new DataView(head.buffer, head.byteOffset, head.length);
  const ptr = (off: number) => v.getBigUint64(off, true);
  const tableAddr = ptr(L.codeLinetable);
  const size = mem.u64(tableAddr + BigInt(L.varSize));
  if (size === null || size > BigInt(MAX_LINE_TABLE_BYTES))
    throw new ReadFailed(`the line table of the code object at 0x${addr.toString(16)} is unreadable`);
  const table = size === 0n ? new Uint8Array(0) : mem.bytes(tableAddr + BigInt(L.bytesData), Number(size));
  if (!table)
    throw new ReadFailed(`the line table of the code object at 0x${addr.toString(16)} is unreadable`);
  const start = addr + BigInt(L.codeAdaptive);
  const code: Code = {
    fn: stringAt(mem, L, ptr(L.codeQualname), MAX_NAME_CHARS),
    file: stringAt(mem, L, ptr(L.codeFilename), MAX_FILE_CHARS),
    firstLine: v.getInt32(L.codeFirstLine, true),
    table,
    start,
    firstTraceable: start + 2n * BigInt(v.getInt32(L.codeFirstTraceable, true)),
  };
  codes.set(addr, code);
  return code;
}

/** A str object's text (compact strings: every str a code object names). */
function stringAt(mem: RankMemory, L: PythonLayout, addr: bigint, max: number): string {
  const head = mem.bytes(addr, L.strAsciiData);
  if (!head) throw new ReadFailed(`the string at 0x${addr.toString(16)} is unreadable`);
  const v = new DataView(head.buffer, head.byteOffset, head.length);
  const length = Math.min(Number(v.getBigInt64(L.strLength, true)), max);
  const state = v.getUint32(L.strState, true);
  const kind = (state >> 2) & 7;
  const compact = (state >> 5) & 1;
  const ascii = (state >> 6) & 1;
  if (!compact || length < 0 || (kind !== 1 && kind !== 2 && kind !== 4))
    throw new ReadFailed(`the string at 0x${addr.toString(16)} is not a compact str`);
  const data = mem.bytes(addr + BigInt(ascii ? L.strAsciiData : L.strCompactData), length * kind);
  if (!data) throw new ReadFailed(`the text of the string at 0x${addr.toString(16)} is unreadable`);
  const b = Buffer.from(data.buffer, data.byteOffset, data.length);
  if (kind === 1) return b.toString('latin1');
  if (kind === 2) return b.toString('utf16le');
  let s = '';
  for (let i = 0; i < length; i++) s += String.fromCodePoint(b.readUInt32LE(i * 4));
  return s;
}
