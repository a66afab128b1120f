// Where an MPI call's arguments are in a stopped frame: the DWARF half (which formal parameters
// the function has at a pc, and their location expressions there), cached per (build-id,
// offset, function), and the evaluation of the simple location forms against the registers libdw
// recovered for that frame. Used by the unwinder's frameArgs (unwind.ts).
import koffi from 'koffi';
import { nativeFree } from '../native/alloc.js';
import { alloc, allocDie, DW_AT, DW_TAG, DWARF_OP_SIZE, dw } from '../native/libdw.js';
import { concreteScopes, copyDie, dieBytes, setDie } from './dwarf-dies.js';

const cFree = koffi.load('libc.so.6').func('void free(void *ptr)');

/** Most plans kept (one per function and pc); the cache is emptied past it. */
const PLAN_CACHE_MAX = 200_000;

/** Registers of one physical frame libdw could recover (DWARF numbering), for argument reads. */
export interface FrameRegs {
  readonly pc: bigint;
  readonly regs: ReadonlyMap<number, bigint>;
  /** The canonical frame address of this frame (the caller's stack pointer after return). */
  readonly cfa: bigint | null;
}

/** The DWARF plans of argument reads, with the scratch blocks libdw writes into (freed by dispose). */
export class ArgPlanner {
  private readonly owned: unknown[] = [];
  private readonly biasBuf = this.own(alloc(8));
  private readonly scopesBuf = this.own(alloc(8));
  private readonly attrBuf = this.own(alloc(32));
  private readonly exprsBuf = this.own(alloc(8));
  private readonly lensBuf = this.own(alloc(8));
  private readonly dieA = this.own(allocDie());
  private readonly dieB = this.own(allocDie());
  private readonly plans = new Map<string, ArgPlan | null>();

  /** The plan cached under `key`, else made from the module and address `where` gives. */
  plan(key: string, where: () => { mod: unknown; addr: bigint }, fnName: string): ArgPlan | null {
    let plan = this.plans.get(key);
    if (plan === undefined) {
      const src = where();
      plan = this.argPlan(src.mod, src.addr, fnName);
      if (this.plans.size >= PLAN_CACHE_MAX) this.plans.clear();
      this.plans.set(key, plan);
    }
    return plan;
  }

  dispose(): void {
    for (const b of this.owned.splice(0)) nativeFree(b);
    this.plans.clear();
  }

  private own(block: unknown): unknown {
    this.owned.push(block);
    return block;
  }

  /** Which parameters `fnName` has at `pc` and their location ops there (null = none found). */
  private argPlan(mod: unknown, pc: bigint, fnName: string): ArgPlan | null {
    const cudie = dw.dwfl_module_addrdie(mod, pc, this.biasBuf);
    if (!cudie) return null;
    const bias = new BigUint64Array(koffi.view(this.biasBuf, 8))[0] ?? 0n;
    const n = dw.dwarf_getscopes(cudie, pc - bias, this.scopesBuf) as number;
    if (n <= 0) return null;
    const scopesPtr = koffi.decode(this.scopesBuf, 'void *');
    try {
      const die = this.dieA;
      const child = this.dieB;
      const want = fnName.replace(/^P/, '');
      // Past an inlined instance dwarf_getscopes follows the inline's abstract origin, whose
      // parameters have no locations: an MPI_X whose internal_X is inlined deeper than one level
      // (MPICH ch4: PMPI_Mprobe > internal_Mprobe > MPID_Mprobe > ... > MPIDI_progress_test)
      // would not be found. The concrete scopes are the DIEs that hold the innermost one.
      copyDie(scopesPtr, 0, die);
      const scopes = concreteScopes(cudie, BigInt(dw.dwarf_dieoffset(die) as number | bigint), die, child);
      if (scopes.length === 0) for (let i = 0; i < n; i++) scopes.push(dieBytes(scopesPtr, i));
      let chosen = -1;
      let subprogram = -1;
      for (let i = 0; i < scopes.length; i++) {
        setDie(scopes[i], die);
        const tag = dw.dwarf_tag(die) as number;
        if (tag !== DW_TAG.subprogram && tag !== DW_TAG.inlined_subroutine) continue;
        const name = this.attrString(die, DW_AT.name);
        // MPICH 4 inlines its `internal_X` (same parameters) into MPI_X/PMPI_X; dwarf_getscopes
        // then continues with the inline's abstract origin, without the containing subprogram.
        const matches =
          name !== null && (name.replace(/^P/, '') === want || name === want.replace(/^MPI_/, 'internal_'));
        if (chosen < 0 && matches) chosen = i;
        if (tag === DW_TAG.subprogram && subprogram < 0) subprogram = i;
      }
      if (chosen < 0) chosen = subprogram;
      if (chosen < 0) return null;
      // The frame base of the physical function (the subprogram scope); GCC on x86_64 always
      // makes it DW_OP_call_frame_cfa, which stands in when the subprogram is not in the scopes.
      let frameBase: ArgPlan['frameBase'] = 'cfa';
      if (subprogram >= 0) {
        setDie(scopes[subprogram], die);
        if (dw.dwarf_attr_integrate(die, DW_AT.frame_base, this.attrBuf)) {
          frameBase = this.locationOps(this.attrBuf, pc - bias);
        }
      }
      const params: { name: string; ops: Op[] }[] = [];
      setDie(scopes[chosen], die);
      if ((dw.dwarf_child(die, child) as number) === 0) {
        do {
          if ((dw.dwarf_tag(child) as number) !== DW_TAG.formal_parameter) continue;
          const name = this.attrString(child, DW_AT.name);
          if (name === null) continue;
          if (!dw.dwarf_attr_integrate(child, DW_AT.location, this.attrBuf)) continue;
          const ops = this.locationOps(this.attrBuf, pc - bias);
          if (ops !== null) params.push({ name, ops });
        } while ((dw.dwarf_siblingof(child, child) as number) === 0);
      }
      return { frameBase, params };
    } catch {
      return null; // arguments are best effort: a DWARF surprise leaves them unread
    } finally {
      cFree(scopesPtr);
    }
  }

  private attrString(die: unknown, at: number): string | null {
    if (!dw.dwarf_attr_integrate(die, at, this.attrBuf)) return null;
    return (dw.dwarf_formstring(this.attrBuf) as string | null) ?? null;
  }

  /** The location expression of an attribute valid at `addr`, copied out of libdw (null if none). */
  private locationOps(attr: unknown, addr: bigint): Op[] | null {
    const found = dw.dwarf_getlocation_addr(attr, addr, this.exprsBuf, this.lensBuf, 1) as number;
    if (found !== 1) return null;
    const opsPtr = koffi.decode(this.exprsBuf, 'void *');
    const nops = Number(new BigUint64Array(koffi.view(this.lensBuf, 8))[0] ?? 0n);
    if (!opsPtr || nops <= 0 || nops > 16) return null;
    const raw = new DataView(koffi.view(opsPtr, nops * DWARF_OP_SIZE));
    const ops: Op[] = [];
    for (let i = 0; i < nops; i++) {
      ops.push({
        atom: raw.getUint8(i * DWARF_OP_SIZE),
        number: raw.getBigUint64(i * DWARF_OP_SIZE + 8, true),
      });
    }
    return ops;
  }
}

/** One DWARF expression operation, copied out of libdw. */
interface Op {
  readonly atom: number;
  readonly number: bigint;
}

/** Where the parameters of one function are at one pc ('cfa' = frame base is the CFA). */
export interface ArgPlan {
  readonly frameBase: Op[] | null | 'cfa';
  readonly params: readonly { readonly name: string; readonly ops: Op[] }[];
}

/** Evaluates the simple forms of a DWARF location (else null). */
export function evalOps(
  ops: readonly Op[],
  regs: FrameRegs,
  frameBase: bigint | null,
): { kind: 'value'; v: bigint } | { kind: 'mem'; addr: bigint } | { kind: 'cfa' } | null {
  const stack: bigint[] = [];
  let isValue = false;
  const reg = (r: number) => regs.regs.get(r) ?? null;
  for (const { atom, number: num } of ops) {
    const snum = BigInt.asIntN(64, num);
    if (atom >= 0x30 && atom <= 0x4f)
      stack.push(BigInt(atom - 0x30)); // DW_OP_lit*
    else if (atom >= 0x08 && atom <= 0x11)
      stack.push(atom % 2 === 1 ? snum : num); // const*
    else if (atom >= 0x50 && atom <= 0x6f) {
      // DW_OP_reg*: the value is in the register itself.
      if (ops.length !== 1) return null;
      const v = reg(atom - 0x50);
      return v === null ? null : { kind: 'value', v };
    } else if (atom >= 0x70 && atom <= 0x8f) {
      const v = reg(atom - 0x70);
      if (v === null) return null;
      stack.push(v + snum);
    } else if (atom === 0x91) {
      if (frameBase === null) return null;
      stack.push(frameBase + snum); // DW_OP_fbreg
    } else if (atom === 0x9c) {
      if (ops.length === 1) return { kind: 'cfa' }; // DW_OP_call_frame_cfa
      if (regs.cfa === null) return null;
      stack.push(regs.cfa);
    } else if (atom === 0x23) {
      const top = stack.pop();
      if (top === undefined) return null;
      stack.push(top + num); // DW_OP_plus_uconst
    } else if (atom === 0x9f)
      isValue = true; // DW_OP_stack_value
    else return null; // entry values, pieces, implicit values...: not read
  }
  const top = stack.pop();
  if (top === undefined) return null;
  return isValue ? { kind: 'value', v: top } : { kind: 'mem', addr: top };
}
