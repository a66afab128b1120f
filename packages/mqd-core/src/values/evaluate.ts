// The read-only evaluation of an expression (expr.ts) on one stopped rank: names resolved in a
// chosen frame (its locals and parameters through their DWARF locations and the registers the
// unwinder recovered), then its compilation unit's statics, then the globals of every module
// (symbol address + DWARF type); values read from the rank's memory through the stop's memory
// service and budget, and printed the way gdb's `print` prints them.
import { type CType, cBaseType, type Member, pointerTo } from './dwarf-types.js';
import type { Expr, TypeName } from './expr.js';
import { renderValue } from './render.js';
import { type EvalContext, fail, intOf, load, type Val } from './value.js';

/** The most elements one slice reads. */
export const MAX_SLICE_ELEMENTS = 256;

/** Evaluates `e` and prints its value (gdb's print format), its type's name and its number. */
export function evaluate(e: Expr, ctx: EvalContext): { text: string; type: string; number?: number } {
  const v = evalExpr(e, ctx);
  const loaded = load(v, ctx);
  return renderValue(loaded, ctx);
}

function bytesOfInt(x: bigint, size: number): Uint8Array {
  const out = new Uint8Array(size);
  let v = BigInt.asUintN(size * 8, x);
  for (let i = 0; i < size; i++) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

const INT: CType = { kind: 'base', name: 'int', size: 4, enc: 'signed' };
const LONG: CType = { kind: 'base', name: 'long', size: 8, enc: 'signed' };

function isScalar(t: CType): boolean {
  return t.kind === 'base' || t.kind === 'enum' || t.kind === 'pointer';
}

function evalExpr(e: Expr, ctx: EvalContext): Val {
  switch (e.kind) {
    case 'int': {
      const fits = e.value >= -(2n ** 31n) && e.value < 2n ** 31n;
      const t = fits ? INT : LONG;
      return { type: t, addr: null, bytes: bytesOfInt(e.value, t.size) };
    }
    case 'name': {
      const v = ctx.scope.local(e.name) ?? ctx.scope.global(e.name);
      if (v === undefined) {
        return fail(
          'MQD_E_EVAL_UNKNOWN_NAME',
          `no symbol "${e.name}" in the chosen frame, its compilation unit or any module's globals`,
        );
      }
      return v;
    }
    case 'member': {
      let base = evalExpr(e.of, ctx);
      if (base.type.kind === 'pointer') base = deref(base, ctx, e.col);
      else if (e.arrow) {
        fail(
          'MQD_E_EVAL_TYPE',
          `column ${e.col}: "->" needs a pointer, and the left side is ${base.type.name}`,
        );
      }
      return member(base, e.name, ctx, e.col);
    }
    case 'deref': {
      const v = evalExpr(e.of, ctx);
      if (v.type.kind === 'array') return element(v, BigInt(v.type.lower), ctx, e.col);
      return deref(v, ctx, e.col);
    }
    case 'index': {
      const v = evalExpr(e.of, ctx);
      const i = intOf(load(asScalar(evalExpr(e.index, ctx), e.index.col), ctx));
      return element(v, i, ctx, e.col);
    }
    case 'slice': {
      const v = evalExpr(e.of, ctx);
      const from = intOf(load(asScalar(evalExpr(e.from, ctx), e.from.col), ctx));
      const to = intOf(load(asScalar(evalExpr(e.to, ctx), e.to.col), ctx));
      if (to < from)
        fail('MQD_E_EVAL_TYPE', `column ${e.col}: the slice [${from}:${to}] ends before it starts`);
      const n = Number(to - from);
      if (n > MAX_SLICE_ELEMENTS) {
        fail(
          'MQD_E_TOO_LARGE',
          `column ${e.col}: a slice reads at most ${MAX_SLICE_ELEMENTS} elements, this one ${n}`,
        );
      }
      const first = element(v, from, ctx, e.col);
      const elem = first.type;
      const t: CType = {
        kind: 'array',
        name: `${elem.name} [${n}]`,
        size: n * elem.size,
        elem,
        count: n,
        lower: 0,
      };
      if (first.addr === null)
        return fail('MQD_E_EVAL_TYPE', `column ${e.col}: a slice needs a value in memory`);
      return { type: t, addr: first.addr, bytes: null };
    }
    case 'cast': {
      const to = namedType(e.to, ctx, e.col);
      const v = evalExpr(e.of, ctx);
      if (isScalar(to) && (isScalar(v.type) || v.type.kind === 'array')) {
        if (v.type.kind === 'array') {
          if (v.addr === null) return fail('MQD_E_EVAL_TYPE', `column ${e.col}: the array has no address`);
          return { type: to, addr: null, bytes: bytesOfInt(v.addr, to.size) };
        }
        const loaded = load(v, ctx);
        if (to.kind === 'base' && to.enc === 'float') {
          return fail(
            'MQD_E_EVAL_TYPE',
            `column ${e.col}: a cast to ${to.name} is not read (only integer and pointer casts)`,
          );
        }
        if (v.type.kind === 'base' && v.type.enc === 'float') {
          return fail('MQD_E_EVAL_TYPE', `column ${e.col}: a cast of ${v.type.name} is not read`);
        }
        return { type: to, addr: null, bytes: bytesOfInt(intOf(loaded), to.size) };
      }
      // A struct or an array: the same memory seen as another type.
      if (v.addr === null) {
        return fail('MQD_E_EVAL_TYPE', `column ${e.col}: only a value in memory can be seen as ${to.name}`);
      }
      return { type: to, addr: v.addr, bytes: null };
    }
  }
}

function asScalar(v: Val, col: number): Val {
  if (v.type.kind === 'base' || v.type.kind === 'enum') return v;
  return fail('MQD_E_EVAL_TYPE', `column ${col}: an index must be an integer, not ${v.type.name}`);
}

function deref(v: Val, ctx: EvalContext, col: number): Val {
  if (v.type.kind !== 'pointer') {
    return fail('MQD_E_EVAL_TYPE', `column ${col}: "*" needs a pointer, and this is ${v.type.name}`);
  }
  const target = v.type.target();
  if (target.kind === 'void') {
    return fail(
      'MQD_E_EVAL_TYPE',
      `column ${col}: a void pointer cannot be followed; cast it first, e.g. (int *)p`,
    );
  }
  const addr = intOf(load(v, ctx));
  if (addr === 0n) return fail('MQD_E_EVAL_MEMORY', `column ${col}: the pointer is NULL`);
  return { type: target, addr: BigInt.asUintN(64, addr), bytes: null };
}

function element(v: Val, i: bigint, ctx: EvalContext, col: number): Val {
  if (v.type.kind === 'array') {
    const t = v.type;
    const k = i - BigInt(t.lower);
    if (k < 0n || (t.count !== null && k >= BigInt(t.count))) {
      const range = t.count === null ? `from ${t.lower}` : `${t.lower}..${t.lower + t.count - 1}`;
      return fail('MQD_E_EVAL_TYPE', `column ${col}: index ${i} is outside the array (${range})`);
    }
    const off = Number(k) * t.elem.size;
    if (v.bytes !== null) {
      return { type: t.elem, addr: null, bytes: v.bytes.subarray(off, off + t.elem.size) };
    }
    if (v.addr === null) return fail('MQD_E_EVAL_MEMORY', 'the array has no address');
    return { type: t.elem, addr: v.addr + BigInt(off), bytes: null };
  }
  if (v.type.kind === 'pointer') {
    const target = v.type.target();
    if (target.kind === 'void' || target.size === 0) {
      return fail('MQD_E_EVAL_TYPE', `column ${col}: elements of ${v.type.name} have no size; cast it first`);
    }
    const addr = intOf(load(v, ctx));
    if (addr === 0n) return fail('MQD_E_EVAL_MEMORY', `column ${col}: the pointer is NULL`);
    return { type: target, addr: BigInt.asUintN(64, addr + i * BigInt(target.size)), bytes: null };
  }
  return fail(
    'MQD_E_EVAL_TYPE',
    `column ${col}: "[]" needs an array or a pointer, and this is ${v.type.name}`,
  );
}

function member(base: Val, name: string, ctx: EvalContext, col: number): Val {
  if (base.type.kind !== 'struct') {
    return fail('MQD_E_EVAL_TYPE', `column ${col}: ${base.type.name} has no members ("${name}")`);
  }
  const found = findMember(base.type.members(), name, 0, 0);
  if (found === null) {
    return fail('MQD_E_EVAL_TYPE', `column ${col}: ${base.type.name} has no member "${name}"`);
  }
  if (found.m.bitField) {
    return fail('MQD_E_EVAL_TYPE', `column ${col}: "${name}" is a bit-field, whose bits are not read`);
  }
  const t = found.m.type();
  if (base.bytes !== null) {
    return { type: t, addr: null, bytes: base.bytes.subarray(found.offset, found.offset + t.size) };
  }
  if (base.addr === null) return fail('MQD_E_EVAL_MEMORY', 'the struct has no address');
  void ctx;
  return { type: t, addr: base.addr + BigInt(found.offset), bytes: null };
}

/** A member by name, through anonymous members and C++ base classes (offsets added up). */
function findMember(
  members: readonly Member[],
  name: string,
  offset: number,
  depth: number,
): { m: Member; offset: number } | null {
  if (depth > 16) return null;
  for (const m of members) if (m.name === name && !m.base) return { m, offset: offset + m.offset };
  for (const m of members) {
    if (m.name !== null && !m.base) continue;
    const t = m.type();
    if (t.kind !== 'struct') continue;
    const hit = findMember(t.members(), name, offset + m.offset, depth + 1);
    if (hit) return hit;
  }
  return null;
}

function namedType(n: TypeName, ctx: EvalContext, col: number): CType {
  let t: CType | null = cBaseType(n.name);
  if (t === null) {
    const tag = n.name.replace(/^(struct|union|enum|class) /, '');
    const ref = ctx.image.findType(tag);
    if (ref === null)
      return fail('MQD_E_EVAL_TYPE', `column ${col}: no type "${n.name}" in the rank's debug information`);
    const die = ctx.types.dieAt(ref.dwarf, ref.offset);
    if (die === null) return fail('MQD_E_EVAL_TYPE', `column ${col}: the type "${n.name}" could not be read`);
    t = ctx.types.decode(die);
  }
  for (let i = 0; i < n.pointers; i++) t = pointerTo(t);
  if (t.kind === 'void') return fail('MQD_E_EVAL_TYPE', `column ${col}: a value cannot be seen as void`);
  return t;
}
