// Where CPython keeps what the frame walk reads, per version: byte offsets on x86_64, learned
// from CPython's headers (Include/internal/pycore_runtime.h, pycore_interp.h, pycore_frame.h,
// cpython/pystate.h, cpython/code.h, cpython/unicodeobject.h, cpython/bytesobject.h) and checked
// against Debian's 3.11.2 from inside the interpreter. With the interpreter's DWARF (python3-dbg)
// the offsets of the named structures come from it instead; the table answers for the rest.

/** Byte offsets of the fields the walk reads. */
export interface PythonLayout {
  /** _PyRuntimeState.interpreters.head */
  readonly runtimeInterpretersHead: number;
  /** PyInterpreterState.next, .threads.head */
  readonly interpNext: number;
  readonly interpThreadsHead: number;
  /** PyThreadState.next, .native_thread_id, .cframe */
  readonly threadNext: number;
  readonly threadNativeId: number;
  readonly threadCframe: number;
  /** _PyCFrame.current_frame */
  readonly cframeCurrentFrame: number;
  /** _PyInterpreterFrame.f_code, .previous, .prev_instr, .is_entry, .owner; its size up to localsplus */
  readonly frameCode: number;
  readonly framePrevious: number;
  readonly framePrevInstr: number;
  readonly frameIsEntry: number;
  readonly frameOwner: number;
  readonly frameSize: number;
  /** PyCodeObject.co_firstlineno, co_filename, co_qualname, co_linetable, _co_firsttraceable, co_code_adaptive */
  readonly codeFirstLine: number;
  readonly codeFilename: number;
  readonly codeQualname: number;
  readonly codeLinetable: number;
  readonly codeFirstTraceable: number;
  readonly codeAdaptive: number;
  /** PyASCIIObject.length, .state, and where a compact ASCII / compact non-ASCII string's data starts */
  readonly strLength: number;
  readonly strState: number;
  readonly strAsciiData: number;
  readonly strCompactData: number;
  /** PyVarObject.ob_size, PyBytesObject.ob_sval */
  readonly varSize: number;
  readonly bytesData: number;
}

/** CPython 3.11 (every 3.11.x: the layout is fixed within a minor version). */
export const PYTHON_311: PythonLayout = {
  runtimeInterpretersHead: 40,
  interpNext: 0,
  interpThreadsHead: 16,
  threadNext: 8,
  threadNativeId: 160,
  threadCframe: 56,
  cframeCurrentFrame: 8,
  frameCode: 32,
  framePrevious: 48,
  framePrevInstr: 56,
  frameIsEntry: 68,
  frameOwner: 69,
  frameSize: 72,
  codeFirstLine: 72,
  codeFilename: 112,
  codeQualname: 128,
  codeLinetable: 136,
  codeFirstTraceable: 168,
  codeAdaptive: 184,
  strLength: 16,
  strState: 32,
  strAsciiData: 48,
  strCompactData: 72,
  varSize: 16,
  bytesData: 32,
};

/** The layouts known, by minor version (`Py_Version >> 16`: 0x030b is 3.11). */
export const PYTHON_LAYOUTS: ReadonlyMap<number, PythonLayout> = new Map([[0x030b, PYTHON_311]]);

/** The fields whose DWARF offsets replace the table's, when the interpreter has debug info. */
export const DWARF_FIELDS: ReadonlyArray<readonly [keyof PythonLayout, string, string]> = [
  ['interpThreadsHead', 'pythreads', 'head'],
  ['threadNext', '_ts', 'next'],
  ['threadNativeId', '_ts', 'native_thread_id'],
  ['threadCframe', '_ts', 'cframe'],
  ['cframeCurrentFrame', '_PyCFrame', 'current_frame'],
  ['frameCode', '_PyInterpreterFrame', 'f_code'],
  ['framePrevious', '_PyInterpreterFrame', 'previous'],
  ['framePrevInstr', '_PyInterpreterFrame', 'prev_instr'],
  ['frameIsEntry', '_PyInterpreterFrame', 'is_entry'],
  ['frameOwner', '_PyInterpreterFrame', 'owner'],
  ['codeFirstLine', 'PyCodeObject', 'co_firstlineno'],
  ['codeFilename', 'PyCodeObject', 'co_filename'],
  ['codeQualname', 'PyCodeObject', 'co_qualname'],
  ['codeLinetable', 'PyCodeObject', 'co_linetable'],
  ['codeFirstTraceable', 'PyCodeObject', '_co_firsttraceable'],
  ['codeAdaptive', 'PyCodeObject', 'co_code_adaptive'],
];

/** "3.11.2" from a Py_Version word (0x030b02f0). */
export function versionText(hex: number): string {
  const major = (hex >>> 24) & 0xff;
  const minor = (hex >>> 16) & 0xff;
  const micro = (hex >>> 8) & 0xff;
  const level = (hex >>> 4) & 0xf;
  const serial = hex & 0xf;
  const tag =
    level === 0xa ? `a${serial}` : level === 0xb ? `b${serial}` : level === 0xc ? `rc${serial}` : '';
  return `${major}.${minor}.${micro}${tag}`;
}
