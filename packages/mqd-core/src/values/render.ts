// A value printed the way gdb's `print` prints it: integers in decimal, chars as `65 'A'`,
// floats with %g at 9 (float) or 17 (double) digits, enums by name, pointers as
// `(type *) 0x...` (char pointers with their string), structs as `{a = 1, b = 2}`, C++ base
// classes as `<Base> = {...}`, arrays as `{1, 2, 3}` with `<repeats N times>` runs of ten or
// more, at most 200 elements. The text is capped (MAX_EVAL_VALUE_CHARS).
import { clipText, MAX_EVAL_VALUE_CHARS } from '@mqd/model';
import type { CType } from './dwarf-types.js';
import { type EvalContext, intOf, type Val } from './value.js';

/** gdb's `print elements` default. */
const MAX_ELEMENTS = 200;
const REPEAT_THRESHOLD = 10;
const MAX_STRING_BYTES = 200;

export function renderValue(
  v: Val & { bytes: Uint8Array },
  ctx: Pick<EvalContext, 'mem'>,
): { text: string; type: string; number?: number } {
  const text = clipText(render(v.type, v.bytes, ctx, 0), MAX_EVAL_VALUE_CHARS);
  const n = numberOf(v);
  const type = clipText(v.type.name, 1024);
  return n === null ? { text, type } : { text, type, number: n };
}

function numberOf(v: Val & { bytes: Uint8Array }): number | null {
  const t = v.type;
  if (t.kind === 'base' && t.enc === 'float') {
    // NaN and the infinities have no JSON number: the text says them.
    const x = floatOf(v.bytes, t.size);
    return x !== null && Number.isFinite(x) ? x : null;
  }
  if (t.kind === 'base' || t.kind === 'enum' || t.kind === 'pointer') {
    if (t.kind === 'base' && t.enc === 'other') return null;
    const x = intOf(v);
    return x >= BigInt(Number.MIN_SAFE_INTEGER) && x <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(x) : null;
  }
  return null;
}

function floatOf(b: Uint8Array, size: number): number | null {
  const dv = new DataView(b.buffer, b.byteOffset, b.length);
  if (size === 4 && b.length >= 4) return dv.getFloat32(0, true);
  if (size === 8 && b.length >= 8) return dv.getFloat64(0, true);
  return null;
}

/** C's %.{p}g. */
export function gFormat(x: number, p: number): string {
  if (Number.isNaN(x)) return x < 0 ? '-nan(0x8000000000000)' : 'nan(0x8000000000000)';
  if (!Number.isFinite(x)) return x < 0 ? '-inf' : 'inf';
  if (x === 0) return Object.is(x, -0) ? '-0' : '0';
  const exp = Math.floor(Math.log10(Math.abs(Number(x.toPrecision(p)))));
  if (exp < -4 || exp >= p) {
    const [m, e] = x.toExponential(p - 1).split('e');
    const mant = (m ?? '').includes('.') ? (m ?? '').replace(/0+$/, '').replace(/\.$/, '') : (m ?? '');
    const en = Number(e);
    return `${mant}e${en < 0 ? '-' : '+'}${String(Math.abs(en)).padStart(2, '0')}`;
  }
  const s = x.toFixed(Math.max(0, p - 1 - exp));
  return s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
}

function charText(c: number): string {
  const esc: Record<number, string> = {
    7: '\\a',
    8: '\\b',
    9: '\\t',
    10: '\\n',
    11: '\\v',
    12: '\\f',
    13: '\\r',
    27: '\\033',
    39: "\\'",
    92: '\\\\',
  };
  const e = esc[c];
  if (e !== undefined) return e;
  if (c >= 0x20 && c < 0x7f) return String.fromCharCode(c);
  return `\\${c.toString(8).padStart(3, '0')}`;
}

function stringText(bytes: Uint8Array): string {
  let s = '';
  for (const c of bytes) s += c === 34 ? '\\"' : c === 39 ? "'" : charText(c);
  return `"${s}"`;
}

function render(t: CType, b: Uint8Array, ctx: Pick<EvalContext, 'mem'>, depth: number): string {
  if (depth > 8) return '{...}';
  const v = { type: t, addr: null, bytes: b };
  switch (t.kind) {
    case 'base': {
      if (t.enc === 'float') {
        const x = floatOf(b, t.size);
        return x === null ? '<unsupported float>' : gFormat(x, t.size === 4 ? 9 : 17);
      }
      if (t.enc === 'bool') return intOf(v) === 0n ? 'false' : 'true';
      const x = intOf(v);
      if ((t.enc === 'signed-char' || t.enc === 'unsigned-char') && t.size === 1) {
        return `${x} '${charText(Number(BigInt.asUintN(8, x)))}'`;
      }
      return String(x);
    }
    case 'enum': {
      const x = intOf(v);
      return t.values.get(x) ?? String(x);
    }
    case 'pointer': {
      const a = BigInt.asUintN(64, intOf(v));
      const hex = `0x${a.toString(16)}`;
      const target = t.target();
      if (t.ref) return render(target, loadAt(target, a, ctx) ?? new Uint8Array(0), ctx, depth + 1);
      if (
        target.kind === 'base' &&
        target.size === 1 &&
        (target.enc === 'signed-char' || target.enc === 'unsigned-char')
      ) {
        if (a === 0n) return '0x0';
        const s = cString(a, ctx);
        return s === null
          ? `${hex} <error: Cannot access memory at address ${hex}>`
          : `${hex} ${stringText(s)}`;
      }
      return `(${t.name}) ${hex}`;
    }
    case 'struct': {
      const parts: string[] = [];
      for (const m of t.members()) {
        if (m.bitField) {
          parts.push(`${m.name ?? ''} = <bit-field, not read>`);
          continue;
        }
        const mt = m.type();
        const mb = b.subarray(m.offset, m.offset + mt.size);
        const inner = render(mt, mb, ctx, depth + 1);
        parts.push(m.base ? `<${mt.name}> = ${inner}` : m.name === null ? inner : `${m.name} = ${inner}`);
      }
      return `{${parts.join(', ')}}`;
    }
    case 'array': {
      const n = t.count ?? 0;
      const es = t.elem.size;
      const isChar =
        t.elem.kind === 'base' &&
        es === 1 &&
        (t.elem.enc === 'signed-char' || t.elem.enc === 'unsigned-char');
      if (isChar) return charArrayText(b.subarray(0, n));
      const items: string[] = [];
      let i = 0;
      while (i < n && i < MAX_ELEMENTS) {
        const one = render(t.elem, b.subarray(i * es, (i + 1) * es), ctx, depth + 1);
        let j = i + 1;
        while (j < n && sameBytes(b, i * es, j * es, es)) j++;
        if (j - i >= REPEAT_THRESHOLD) {
          items.push(`${one} <repeats ${j - i} times>`);
          i = j;
        } else {
          items.push(one);
          i++;
        }
      }
      return `{${items.join(', ')}${n > MAX_ELEMENTS ? '...' : ''}}`;
    }
    case 'function':
      return `{${t.name}}`;
    case 'void':
      return 'void';
  }
}

function sameBytes(b: Uint8Array, i: number, j: number, n: number): boolean {
  for (let k = 0; k < n; k++) if (b[i + k] !== b[j + k]) return false;
  return true;
}

/** gdb's char array: `"hi", '\000' <repeats 13 times>` (trailing NULs as a run, or dropped when few). */
function charArrayText(b: Uint8Array): string {
  let end = b.length;
  while (end > 0 && b[end - 1] === 0) end--;
  const zeros = b.length - end;
  if (zeros >= REPEAT_THRESHOLD) {
    const head = end > 0 ? `${stringText(b.subarray(0, end))}, ` : '';
    return `${head}'\\000' <repeats ${zeros - (end > 0 ? 1 : 0)} times>`;
  }
  // gdb drops the terminating NUL (print null-stop off shows the rest as \000).
  const body = zeros > 0 ? b.subarray(0, b.length - 1) : b;
  return stringText(body);
}

function loadAt(t: CType, a: bigint, ctx: Pick<EvalContext, 'mem'>): Uint8Array | null {
  if (t.size === 0 || t.size > 4096 || a === 0n) return null;
  return ctx.mem.bytes(a, t.size);
}

function cString(a: bigint, ctx: Pick<EvalContext, 'mem'>): Uint8Array | null {
  const out: number[] = [];
  // Read in pieces that stop at page ends, so a string before an unmapped page is still read.
  let at = a;
  while (out.length < MAX_STRING_BYTES) {
    const toPage = 4096 - Number(at & 4095n);
    const n = Math.min(toPage, MAX_STRING_BYTES - out.length);
    const chunk = ctx.mem.bytes(at, n);
    if (chunk === null) return out.length > 0 ? Uint8Array.from(out) : null;
    const z = chunk.indexOf(0);
    if (z >= 0) {
      out.push(...chunk.subarray(0, z));
      return Uint8Array.from(out);
    }
    out.push(...chunk);
    at += BigInt(n);
  }
  return Uint8Array.from(out);
}
