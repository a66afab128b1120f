// Where a name is, in one stopped rank: the variables of the chosen frame (the scopes at its pc,
// innermost first, from the frame's own function out to its unit), located by their DWARF
// location expressions (location lists too) against the registers and CFA the unwinder recovered
// for that frame; then the globals of every module, by symbol address with the type of their
// DWARF variable. Holds the scratch blocks libdw writes location expressions into (freed by
// dispose).
import koffi from 'koffi';
import type { DebugFile } from '../inferior/debug-file.js';
import { concreteScopes, copyDie, dieBytes } from '../inferior/dwarf-dies.js';
import type { FrameRegs } from '../inferior/frame-args.js';
import type { MappedModule, ProcessImage } from '../inferior/process-image.js';
import { nativeFree } from '../native/alloc.js';
import { alloc, allocDie, DWARF_OP_SIZE, dw } from '../native/libdw.js';
import { AT, type CType, TAG, type TypeDecoder } from './dwarf-types.js';
import { fail, type NameScope, type Val } from './value.js';

const cFree = koffi.load('libc.so.6').func('void free(void *ptr)');

/** Longest location expression read (GCC's are a few operations). */
const MAX_OPS = 64;

interface Op {
  readonly atom: number;
  readonly number: bigint;
  readonly number2: bigint;
}

/** The chosen frame of a rank: its registers, its pc (for lookups) and which of its functions. */
export interface FrameSite {
  readonly regs: FrameRegs;
  /** The pc names are looked up at (less one in outer frames: inside the call instruction). */
  readonly pc: bigint;
  /** Inlined frames between this frame and the physical frame's innermost function (0: the innermost). */
  readonly inlineDepth: number;
}

/** Scratch blocks for DWARF lookups, one per ValueReader. */
export class ScopeScratch {
  private readonly owned: unknown[] = [];
  readonly bias = this.own(alloc(8));
  readonly scopes = this.own(alloc(8));
  readonly attr = this.own(alloc(32));
  readonly exprs = this.own(alloc(8));
  readonly lens = this.own(alloc(8));
  readonly dieA = this.own(allocDie());
  readonly dieB = this.own(allocDie());
  private disposed = false;
  /** Global variables' DIEs per file and name (null: the file's DWARF has none). */
  readonly globals = new WeakMap<DebugFile, Map<string, Uint8Array | null>>();

  private own(b: unknown): unknown {
    this.owned.push(b);
    return b;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const b of this.owned.splice(0)) nativeFree(b);
  }
}

/** The name scope of one frame (null site: globals only). */
export function frameScope(
  site: FrameSite | null,
  image: Pick<ProcessImage, 'dwarfAt' | 'moduleAt' | 'findSymbol'>,
  types: TypeDecoder,
  s: ScopeScratch,
): NameScope {
  const frame = site === null ? null : frameVariables(site, image, types, s);
  const local = (name: string): Val | undefined => {
    if (frame === null) return undefined;
    return frame.find(name);
  };
  return {
    local,
    global: (name) => globalVariable(name, image, types, s, frame?.declared(name) ?? null),
  };
}

interface FrameVariables {
  find(name: string): Val | undefined;
  /** A declaration of `name` in the frame's unit without a location (an extern): its type. */
  declared(name: string): CType | null;
}

function frameVariables(
  site: FrameSite,
  image: Pick<ProcessImage, 'dwarfAt' | 'moduleAt'>,
  types: TypeDecoder,
  s: ScopeScratch,
): FrameVariables | null {
  const at = image.dwarfAt(site.pc);
  const m = image.moduleAt(site.pc);
  if (at === null || m === undefined) return null;
  const cudie = dw.dwfl_module_addrdie(at.mod, at.addr, s.bias);
  if (!cudie) return null;
  const bias = new BigUint64Array(koffi.view(s.bias, 8))[0] ?? 0n;
  const pcInFile = at.addr - bias;
  const n = dw.dwarf_getscopes(cudie, pcInFile, s.scopes) as number;
  if (n <= 0) return null;
  const scopesPtr = koffi.decode(s.scopes, 'void *');
  let chain: Uint8Array[];
  try {
    copyDie(scopesPtr, 0, s.dieA);
    chain = concreteScopes(cudie, BigInt(dw.dwarf_dieoffset(s.dieA) as number | bigint), s.dieA, s.dieB);
    if (chain.length === 0) for (let i = 0; i < n; i++) chain.push(dieBytes(scopesPtr, i));
  } finally {
    cFree(scopesPtr);
  }
  // The scopes of the chosen function: skip the inlined functions inside it, stop at its own
  // function scope; then the unit (and the namespaces or modules around it).
  const mine: Uint8Array[] = [];
  const outer: Uint8Array[] = [];
  let fn = 0;
  let subprogram: Uint8Array | null = null;
  for (const d of chain) {
    const tag = types.facts(d).tag;
    const isFn = tag === TAG.subprogram || tag === TAG.inlined_subroutine;
    if (tag === TAG.compile_unit || tag === TAG.namespace || tag === TAG.module) outer.push(d);
    else if (fn === site.inlineDepth) mine.push(d);
    if (tag === TAG.subprogram) subprogram ??= d;
    if (isFn) fn++;
  }
  const frameBase =
    subprogram === null ? site.regs.cfa : frameBaseOf(subprogram, pcInFile, site.regs, types, s);
  const cache = new Map<string, Val | null>();
  const declared = new Map<string, CType>();
  const lookIn = (scope: Uint8Array, name: string, descend: boolean): Val | null | undefined => {
    for (const ch of types.children(scope)) {
      const f = types.facts(ch);
      if (descend && (f.tag === TAG.module || f.tag === TAG.namespace) && f.name !== null) {
        const inner = lookIn(ch, name, false);
        if (inner !== undefined) return inner;
        continue;
      }
      if ((f.tag !== TAG.variable && f.tag !== TAG.formal_parameter) || f.name !== name) continue;
      if (f.declaration) {
        if (!declared.has(name)) declared.set(name, types.typeOf(ch));
        continue;
      }
      return variableAt(ch, name, pcInFile, site.regs, frameBase, m, types, s);
    }
    return undefined;
  };
  return {
    find(name) {
      if (cache.has(name)) return cache.get(name) ?? undefined;
      let hit: Val | null | undefined;
      for (const sc of mine) {
        hit = lookIn(sc, name, false);
        if (hit !== undefined) break;
      }
      if (hit === undefined) {
        for (const sc of outer) {
          hit = lookIn(sc, name, true);
          if (hit !== undefined) break;
        }
      }
      cache.set(name, hit ?? null);
      return hit ?? undefined;
    },
    declared(name) {
      if (!cache.has(name)) this.find(name);
      return declared.get(name) ?? null;
    },
  };
}

function frameBaseOf(
  subprogram: Uint8Array,
  pc: bigint,
  regs: FrameRegs,
  types: TypeDecoder,
  s: ScopeScratch,
): bigint | null {
  const d = types.load(subprogram);
  if (!dw.dwarf_attr_integrate(d, AT.frame_base, s.attr)) return regs.cfa;
  const ops = locationOps(s, pc);
  if (ops === null || ops === 'none') return regs.cfa;
  const r = evalLocation(ops, regs, null, 0n);
  if (r.kind === 'mem') return r.addr;
  if (r.kind === 'value') return r.v;
  return regs.cfa;
}

/** The operations of the location in s.attr valid at `pc`: 'none' when it has none there. */
function locationOps(s: ScopeScratch, pc: bigint): Op[] | 'none' | null {
  const found = dw.dwarf_getlocation_addr(s.attr, pc, s.exprs, s.lens, 1) as number;
  if (found === 0) return 'none';
  if (found !== 1) return null;
  const opsPtr = koffi.decode(s.exprs, 'void *');
  const nops = Number(new BigUint64Array(koffi.view(s.lens, 8))[0] ?? 0n);
  if (!opsPtr || nops <= 0) return 'none';
  if (nops > MAX_OPS) return null;
  const raw = new DataView(koffi.view(opsPtr, nops * DWARF_OP_SIZE));
  const ops: Op[] = [];
  for (let i = 0; i < nops; i++) {
    ops.push({
      atom: raw.getUint8(i * DWARF_OP_SIZE),
      number: raw.getBigUint64(i * DWARF_OP_SIZE + 8, true),
      number2: raw.getBigUint64(i * DWARF_OP_SIZE + 16, true),
    });
  }
  return ops;
}

type Location =
  | { kind: 'mem'; addr: bigint }
  | { kind: 'value'; v: bigint }
  | { kind: 'register'; reg: number }
  | { kind: 'unsupported'; why: string }
  | { kind: 'lost'; why: string };

/**
 * A DWARF location expression evaluated against a frame's registers: memory (DW_OP_addr with the
 * module's bias, DW_OP_fbreg, DW_OP_breg*, DW_OP_call_frame_cfa, arithmetic on constants), a
 * register (DW_OP_reg*), or a computed value (DW_OP_stack_value).
 */
function evalLocation(ops: readonly Op[], regs: FrameRegs, frameBase: bigint | null, bias: bigint): Location {
  const st: bigint[] = [];
  const reg = (r: number) => regs.regs.get(r) ?? null;
  const pop = (): bigint | null => st.pop() ?? null;
  for (let i = 0; i < ops.length; i++) {
    const { atom, number: num, number2: num2 } = ops[i] as Op;
    const snum = BigInt.asIntN(64, num);
    if (atom === 0x03)
      st.push(num + bias); // DW_OP_addr
    else if (atom >= 0x30 && atom <= 0x4f) st.push(BigInt(atom - 0x30));
    else if (atom >= 0x08 && atom <= 0x11) st.push(atom % 2 === 1 ? snum : num);
    else if ((atom >= 0x50 && atom <= 0x6f) || atom === 0x90) {
      const r = atom === 0x90 ? Number(num) : atom - 0x50;
      if (ops.length === 1) return { kind: 'register', reg: r };
      return { kind: 'unsupported', why: 'a value in pieces of registers' };
    } else if ((atom >= 0x70 && atom <= 0x8f) || atom === 0x92) {
      const r = atom === 0x92 ? Number(num) : atom - 0x70;
      const v = reg(r);
      if (v === null)
        return { kind: 'lost', why: `its frame's register ${r} was not recovered by the unwinder` };
      st.push(v + (atom === 0x92 ? BigInt.asIntN(64, num2) : snum));
    } else if (atom === 0x91) {
      if (frameBase === null) return { kind: 'lost', why: 'the frame base is not known' };
      st.push(frameBase + snum);
    } else if (atom === 0x9c) {
      if (regs.cfa === null) return { kind: 'lost', why: "the frame's CFA is not known" };
      st.push(regs.cfa);
    } else if (atom === 0x23) {
      const a = pop();
      if (a === null) return { kind: 'unsupported', why: 'a malformed location' };
      st.push(a + num);
    } else if (atom === 0x22 || atom === 0x1c || atom === 0x1e || atom === 0x1a || atom === 0x21) {
      const b = pop();
      const a = pop();
      if (a === null || b === null) return { kind: 'unsupported', why: 'a malformed location' };
      st.push(
        atom === 0x22 ? a + b : atom === 0x1c ? a - b : atom === 0x1e ? a * b : atom === 0x1a ? a & b : a | b,
      );
    } else if (atom === 0x12) {
      const a = st[st.length - 1];
      if (a === undefined) return { kind: 'unsupported', why: 'a malformed location' };
      st.push(a); // DW_OP_dup
    } else if (atom === 0x9f) {
      const v = pop();
      if (v === null || i !== ops.length - 1) return { kind: 'unsupported', why: 'a malformed location' };
      return { kind: 'value', v };
    } else if (atom === 0xa3 || atom === 0xf3) {
      return { kind: 'lost', why: "only its value at the function's entry is described (DW_OP_entry_value)" };
    } else if (atom === 0x93 || atom === 0x9d) {
      return { kind: 'unsupported', why: 'a value split in pieces (DW_OP_piece)' };
    } else if (atom === 0x9e) {
      return { kind: 'unsupported', why: 'an implicit value' };
    } else {
      return { kind: 'unsupported', why: `the DWARF operation 0x${atom.toString(16)}` };
    }
  }
  const top = pop();
  if (top === null) return { kind: 'lost', why: 'an empty location' };
  return { kind: 'mem', addr: BigInt.asUintN(64, top) };
}

/** A variable DIE's value at `pc`: in memory, in a register, computed, or optimized out. */
function variableAt(
  die: Uint8Array,
  name: string,
  pc: bigint,
  regs: FrameRegs | null,
  frameBase: bigint | null,
  m: MappedModule,
  types: TypeDecoder,
  s: ScopeScratch,
): Val {
  const type = types.typeOf(die);
  const f = types.facts(die);
  const d = types.load(die);
  if (!dw.dwarf_attr_integrate(d, AT.location, s.attr)) {
    if (f.constValue !== null) return { type, addr: null, bytes: intBytes(f.constValue, type.size) };
    return fail(
      'MQD_E_EVAL_OPTIMIZED_OUT',
      `"${name}" has no location in the debug information (optimized out)`,
    );
  }
  const ops = locationOps(s, pc);
  if (ops === 'none') {
    return fail(
      'MQD_E_EVAL_OPTIMIZED_OUT',
      `"${name}" is optimized out at this point of the program (its location list does not cover the frame's pc)`,
    );
  }
  if (ops === null) return fail('MQD_E_EVAL_OPTIMIZED_OUT', `the location of "${name}" could not be read`);
  const empty: FrameRegs = { pc: 0n, regs: new Map(), cfa: null };
  const loc = evalLocation(ops, regs ?? empty, frameBase, m.bias);
  switch (loc.kind) {
    case 'mem':
      return { type, addr: loc.addr, bytes: null };
    case 'value':
      return { type, addr: null, bytes: intBytes(loc.v, Math.max(type.size, 0)) };
    case 'register': {
      const v = regs?.regs.get(loc.reg);
      if (v === undefined) {
        return fail(
          'MQD_E_EVAL_OPTIMIZED_OUT',
          `"${name}" is in register ${loc.reg}, which the unwinder could not recover for this frame (not saved)`,
        );
      }
      if (type.size > 8)
        return fail('MQD_E_EVAL_OPTIMIZED_OUT', `"${name}" is in a register too small for it`);
      return { type, addr: null, bytes: intBytes(v, type.size) };
    }
    case 'lost':
      return fail('MQD_E_EVAL_OPTIMIZED_OUT', `"${name}" cannot be located here: ${loc.why}`);
    case 'unsupported':
      return fail('MQD_E_EVAL_OPTIMIZED_OUT', `"${name}" is described by ${loc.why}, which is not read`);
  }
}

function intBytes(x: bigint, size: number): Uint8Array {
  const out = new Uint8Array(size);
  let v = BigInt.asUintN(64, x);
  for (let i = 0; i < size && i < 8; i++) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

/** The symbol names a (possibly qualified) name may have: C, C++ (`ns::x`), Fortran (`mod::x`). */
function symbolNames(name: string): string[] {
  const parts = name.split('::');
  if (parts.length === 1) return [name];
  const cxx = `_ZN${parts.map((p) => `${p.length}${p}`).join('')}E`;
  const out = [cxx];
  if (parts.length === 2) out.push(`__${parts[0]}_MOD_${parts[1]}`, `${parts[1]}.${parts[0]}`);
  return out;
}

function globalVariable(
  name: string,
  image: Pick<ProcessImage, 'findSymbol'>,
  types: TypeDecoder,
  s: ScopeScratch,
  declaredType: CType | null,
): Val | undefined {
  let sym: ReturnType<ProcessImage['findSymbol']> = null;
  for (const n of symbolNames(name)) {
    sym = image.findSymbol(n);
    if (sym !== null) break;
  }
  if (sym === null) return undefined;
  const die = globalDie(sym.module.file, name, types, s);
  const type = die !== null ? types.typeOf(die) : declaredType;
  if (type === null) {
    return fail(
      'MQD_E_EVAL_TYPE',
      `"${name}" is a symbol of ${sym.module.path} without a DWARF type (that file was built without -g)`,
    );
  }
  return { type, addr: sym.address, bytes: null };
}

/** The DIE of the global variable `name` in a file's DWARF (its definition, else a declaration). */
function globalDie(file: DebugFile, name: string, types: TypeDecoder, s: ScopeScratch): Uint8Array | null {
  let byName = s.globals.get(file);
  if (!byName) {
    byName = new Map();
    s.globals.set(file, byName);
  }
  const hit = byName.get(name);
  if (hit !== undefined) return hit;
  const dwarf = dw.dwfl_module_getdwarf(file.dwflModule, s.bias);
  let found: Uint8Array | null = null;
  if (dwarf) {
    const path = name.split('::');
    let decl: Uint8Array | null = null;
    let off = 0n;
    const next: (bigint | number)[] = [0n];
    const hsize: (bigint | number)[] = [0n];
    for (let units = 0; units < 1_000_000; units++) {
      if ((dw.dwarf_nextcu(dwarf, off, next, hsize, null, null, null) as number) !== 0) break;
      // koffi gives size_t and uint64_t outputs as numbers when they fit.
      const cu = types.dieAt(dwarf, off + BigInt(hsize[0] ?? 0));
      off = BigInt(next[0] ?? 0);
      if (cu === null) continue;
      const got = findIn(cu, path, types, 0);
      if (got?.definition) {
        found = got.die;
        break;
      }
      if (got && decl === null) decl = got.die;
    }
    found ??= decl;
  }
  byName.set(name, found);
  return found;
}

function findIn(
  scope: Uint8Array,
  path: readonly string[],
  types: TypeDecoder,
  depth: number,
): { die: Uint8Array; definition: boolean } | null {
  const [head, ...rest] = path;
  let decl: { die: Uint8Array; definition: boolean } | null = null;
  for (const ch of types.children(scope)) {
    const f = types.facts(ch);
    if (f.tag === TAG.namespace || f.tag === TAG.module) {
      if (rest.length > 0 && f.name === head) {
        const inner = findIn(ch, rest, types, depth + 1);
        if (inner?.definition) return inner;
        decl ??= inner;
      } else if (rest.length === 0 && depth === 0 && f.tag === TAG.module) {
        // A Fortran module variable by its bare name.
        const inner = findIn(ch, path, types, depth + 1);
        if (inner?.definition) return inner;
        decl ??= inner;
      }
      continue;
    }
    if (rest.length > 0 || f.tag !== TAG.variable || f.name !== head) continue;
    if (!f.declaration) return { die: ch, definition: true };
    decl ??= { die: ch, definition: false };
  }
  return decl;
}
