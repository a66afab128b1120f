// C, C++ and Fortran types as DWARF describes them, decoded into plain objects for the value
// reader: base types, typedefs (kept by name, read through), qualifiers (read through),
// pointers and references, structs/classes/unions with their members and base classes, arrays
// (with Fortran's lower bounds), enums. A DIE is held as a copy of its 32 bytes (valid while its
// DebugFile lives); member and pointee types are decoded when first needed, so a linked list
// costs nothing until it is followed. The scratch blocks libdw writes into are owned here and
// freed by dispose.
import koffi from 'koffi';
import { dieBytes, setDie } from '../inferior/dwarf-dies.js';
import { nativeFree } from '../native/alloc.js';
import { alloc, allocDie, DIE_SIZE, dw } from '../native/libdw.js';

export const TAG = {
  array: 0x01,
  class: 0x02,
  enumeration: 0x04,
  formal_parameter: 0x05,
  lexical_block: 0x0b,
  member: 0x0d,
  pointer: 0x0f,
  reference: 0x10,
  compile_unit: 0x11,
  structure: 0x13,
  subroutine_type: 0x15,
  typedef: 0x16,
  union: 0x17,
  inheritance: 0x1c,
  inlined_subroutine: 0x1d,
  module: 0x1e,
  subrange: 0x21,
  base: 0x24,
  const: 0x26,
  enumerator: 0x28,
  subprogram: 0x2e,
  variable: 0x34,
  volatile: 0x35,
  restrict: 0x37,
  namespace: 0x39,
  unspecified: 0x3b,
  rvalue_reference: 0x42,
  atomic: 0x47,
} as const;

export const AT = {
  location: 0x02,
  name: 0x03,
  byte_size: 0x0b,
  bit_size: 0x0d,
  language: 0x13,
  const_value: 0x1c,
  lower_bound: 0x22,
  upper_bound: 0x2f,
  count: 0x37,
  data_member_location: 0x38,
  declaration: 0x3c,
  encoding: 0x3e,
  external: 0x3f,
  frame_base: 0x40,
  type: 0x49,
} as const;

/** DW_ATE_* of a base type, as the renderer needs them. */
export type Encoding = 'signed' | 'unsigned' | 'signed-char' | 'unsigned-char' | 'float' | 'bool' | 'other';

export interface Member {
  readonly name: string | null;
  readonly offset: number;
  /** A base class of a C++ class (its members are this struct's too). */
  readonly base: boolean;
  /** A bit-field (DW_AT_bit_size): its bits are not read, so it is never shown as a value. */
  readonly bitField: boolean;
  readonly type: () => CType;
}

export type CType =
  | { readonly kind: 'base'; readonly name: string; readonly size: number; readonly enc: Encoding }
  | {
      readonly kind: 'pointer';
      readonly name: string;
      readonly size: number;
      readonly ref: boolean;
      readonly target: () => CType;
    }
  | {
      readonly kind: 'struct';
      readonly name: string;
      readonly size: number;
      readonly union: boolean;
      readonly members: () => readonly Member[];
    }
  | {
      readonly kind: 'array';
      readonly name: string;
      readonly size: number;
      readonly elem: CType;
      /** Elements (null: unknown, a flexible or assumed-size array). */
      readonly count: number | null;
      readonly lower: number;
    }
  | {
      readonly kind: 'enum';
      readonly name: string;
      readonly size: number;
      readonly signed: boolean;
      readonly values: ReadonlyMap<bigint, string>;
    }
  | { readonly kind: 'void'; readonly name: string; readonly size: 0 }
  | { readonly kind: 'function'; readonly name: string; readonly size: 1 };

export const VOID: CType = { kind: 'void', name: 'void', size: 0 };

/** The type of size `size` and sign a C base-type name stands for (casts without DWARF). */
export function cBaseType(name: string): CType | null {
  // "long int" is "long", "unsigned" is "unsigned int", "signed short" is "short".
  let n = name.trim().replace(/\s+/g, ' ');
  if (n === 'void') return VOID;
  if (n === 'unsigned' || n === 'signed') n = `${n} int`;
  n = n.replace(/^signed (?!char)/, '');
  if (/^(unsigned )?(short|long|long long) int$/.test(n)) n = n.slice(0, -4);
  const table: Record<string, [number, Encoding]> = {
    char: [1, 'signed-char'],
    'signed char': [1, 'signed-char'],
    'unsigned char': [1, 'unsigned-char'],
    short: [2, 'signed'],
    'unsigned short': [2, 'unsigned'],
    int: [4, 'signed'],
    'unsigned int': [4, 'unsigned'],
    long: [8, 'signed'],
    'unsigned long': [8, 'unsigned'],
    'long long': [8, 'signed'],
    'unsigned long long': [8, 'unsigned'],
    float: [4, 'float'],
    double: [8, 'float'],
    _Bool: [1, 'bool'],
    bool: [1, 'bool'],
  };
  const hit = table[n];
  return hit ? { kind: 'base', name: n, size: hit[0], enc: hit[1] } : null;
}

export function pointerTo(t: CType): CType {
  return { kind: 'pointer', name: `${t.name} *`, size: 8, ref: false, target: () => t };
}

/** Attributes of one DIE, read into JS at once (so no scratch block is held across a recursion). */
export interface DieFacts {
  readonly tag: number;
  readonly name: string | null;
  readonly size: number | null;
  readonly type: Uint8Array | null;
  readonly encoding: number | null;
  readonly memberOffset: number | null;
  readonly lower: bigint | null;
  readonly upper: bigint | null;
  readonly count: bigint | null;
  readonly constValue: bigint | null;
  readonly declaration: boolean;
  readonly bitField: boolean;
}

/** Most children read of one DIE (members of a struct, enumerators, variables of a scope). */
const MAX_CHILDREN = 100_000;

export class TypeDecoder {
  private readonly owned: unknown[] = [];
  private readonly die = this.own(allocDie());
  private readonly child = this.own(allocDie());
  private readonly ref = this.own(allocDie());
  private readonly attr = this.own(alloc(32));
  private readonly sdata = this.own(alloc(8));
  /** Decoded types by the DIE's address in its Dwarf's data: valid for one read (cleared per stop). */
  private readonly cache = new Map<bigint, CType>();
  private disposed = false;

  private own(block: unknown): unknown {
    this.owned.push(block);
    return block;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const b of this.owned.splice(0)) nativeFree(b);
    this.cache.clear();
  }

  /** Forget decoded types (a file may have been closed since). */
  clear(): void {
    this.cache.clear();
    this.langCache.clear();
  }

  /** The scratch DIE set to `bytes` (for the caller's own libdw calls; overwritten by the next call here). */
  load(bytes: Uint8Array): unknown {
    setDie(bytes, this.die);
    return this.die;
  }

  /** A DIE of `dwarf` by offset, copied out (null: no such DIE). */
  dieAt(dwarf: unknown, offset: bigint): Uint8Array | null {
    if (!dw.dwarf_offdie(dwarf, offset, this.die)) return null;
    return dieBytes(this.die, 0);
  }

  facts(bytes: Uint8Array): DieFacts {
    const d = this.load(bytes);
    const tag = dw.dwarf_tag(d) as number;
    const name = (dw.dwarf_diename(d) as string | null) ?? null;
    const sizeRaw = dw.dwarf_bytesize(d) as number;
    let type: Uint8Array | null = null;
    if (dw.dwarf_attr_integrate(d, AT.type, this.attr) && dw.dwarf_formref_die(this.attr, this.ref)) {
      type = dieBytes(this.ref, 0);
    }
    return {
      tag,
      name,
      size: sizeRaw >= 0 ? sizeRaw : null,
      type,
      encoding: this.udata(d, AT.encoding),
      memberOffset: this.udata(d, AT.data_member_location),
      lower: this.sdataOf(d, AT.lower_bound),
      upper: this.sdataOf(d, AT.upper_bound),
      count: this.sdataOf(d, AT.count),
      constValue: this.sdataOf(d, AT.const_value),
      declaration: (dw.dwarf_hasattr(d, AT.declaration) as number) !== 0,
      bitField: (dw.dwarf_hasattr(d, AT.bit_size) as number) !== 0,
    };
  }

  private udata(d: unknown, at: number): number | null {
    if (!dw.dwarf_attr_integrate(d, at, this.attr)) return null;
    const v = [0n];
    return (dw.dwarf_formudata(this.attr, v) as number) === 0 ? Number(v[0] ?? 0n) : null;
  }

  private sdataOf(d: unknown, at: number): bigint | null {
    if (!dw.dwarf_attr_integrate(d, at, this.attr)) return null;
    if ((dw.dwarf_formsdata(this.attr, this.sdata) as number) !== 0) return null;
    return new BigInt64Array(koffi.view(this.sdata, 8))[0] ?? null;
  }

  /** Copies of the children of a DIE, in order. */
  children(bytes: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    setDie(bytes, this.die);
    if ((dw.dwarf_child(this.die, this.child) as number) !== 0) return out;
    do {
      out.push(dieBytes(this.child, 0));
      if (out.length >= MAX_CHILDREN) break;
    } while ((dw.dwarf_siblingof(this.child, this.child) as number) === 0);
    return out;
  }

  /** The type a DIE's DW_AT_type names (void when it names none). */
  typeOf(bytes: Uint8Array): CType {
    const f = this.facts(bytes);
    return f.type === null ? VOID : this.decode(f.type);
  }

  decode(bytes: Uint8Array): CType {
    const key = new DataView(bytes.buffer, bytes.byteOffset, DIE_SIZE).getBigUint64(0, true);
    const hit = this.cache.get(key);
    if (hit) return hit;
    const t = this.decodeFresh(bytes, 0);
    this.cache.set(key, t);
    return t;
  }

  private decodeFresh(bytes: Uint8Array, depth: number): CType {
    const f = this.facts(bytes);
    const under = (): CType => (f.type === null ? VOID : depth > 16 ? VOID : this.decode(f.type));
    switch (f.tag) {
      case TAG.base:
        return { kind: 'base', name: f.name ?? '?', size: f.size ?? 0, enc: encodingOf(f.encoding) };
      case TAG.typedef: {
        const t = under();
        return renamed(t, f.name ?? t.name);
      }
      case TAG.const:
      case TAG.volatile:
      case TAG.restrict:
      case TAG.atomic:
        return under();
      case TAG.pointer:
      case TAG.reference:
      case TAG.rvalue_reference: {
        const ref = f.tag !== TAG.pointer;
        const target = f.type;
        let cached: CType | null = null;
        const name = `${target === null ? 'void' : this.shallowName(target)} ${ref ? '&' : '*'}`;
        return {
          kind: 'pointer',
          name,
          size: f.size ?? 8,
          ref,
          target: () => {
            cached ??= target === null ? VOID : this.decode(target);
            return cached;
          },
        };
      }
      case TAG.structure:
      case TAG.class:
      case TAG.union: {
        let members: Member[] | null = null;
        const c = this.cuLanguageIsC(bytes);
        const word = f.tag === TAG.union ? 'union' : 'struct';
        return {
          kind: 'struct',
          name: f.name === null ? `${word} {...}` : c ? `${word} ${f.name}` : f.name,
          size: f.size ?? 0,
          union: f.tag === TAG.union,
          members: () => {
            members ??= this.membersOf(bytes);
            return members;
          },
        };
      }
      case TAG.enumeration: {
        const values = new Map<bigint, string>();
        for (const ch of this.children(bytes)) {
          const e = this.facts(ch);
          if (e.tag === TAG.enumerator && e.name !== null && e.constValue !== null)
            values.set(e.constValue, e.name);
        }
        const c = this.cuLanguageIsC(bytes);
        const base = f.type === null ? null : this.decode(f.type);
        const signed = base?.kind === 'base' ? base.enc === 'signed' : [...values.keys()].some((v) => v < 0n);
        const name = f.name === null ? 'enum {...}' : c ? `enum ${f.name}` : f.name;
        return { kind: 'enum', name, size: f.size ?? 4, signed, values };
      }
      case TAG.array: {
        const elem = under();
        const dims: { count: number | null; lower: number }[] = [];
        for (const ch of this.children(bytes)) {
          const s = this.facts(ch);
          if (s.tag !== TAG.subrange) continue;
          const lower = Number(s.lower ?? (this.cuIsFortran(bytes) ? 1n : 0n));
          const count =
            s.count !== null ? Number(s.count) : s.upper !== null ? Number(s.upper) - lower + 1 : null;
          dims.push({ count: count !== null && count >= 0 ? count : null, lower });
        }
        if (dims.length === 0) dims.push({ count: null, lower: 0 });
        // C's a[2][3] is an array of 2 arrays of 3; Fortran's a(2,3) is column-major: its first
        // index varies fastest, so the last dimension is the outer array.
        const order = this.cuIsFortran(bytes) ? [...dims] : [...dims].reverse();
        let t: CType = elem;
        for (const d of order) {
          const size = d.count === null ? 0 : d.count * t.size;
          t = {
            kind: 'array',
            name: `${t.name} [${d.count ?? ''}]`,
            size,
            elem: t,
            count: d.count,
            lower: d.lower,
          };
        }
        return t;
      }
      case TAG.subroutine_type:
      case TAG.subprogram:
        return { kind: 'function', name: f.name ?? 'function', size: 1 };
      case TAG.unspecified:
        return { kind: 'void', name: f.name ?? 'void', size: 0 };
      default:
        return { kind: 'void', name: f.name ?? `<DWARF tag 0x${f.tag.toString(16)}>`, size: 0 };
    }
  }

  /** A type's name without decoding what it points to (pointers' names do not follow pointers). */
  private shallowName(bytes: Uint8Array, depth = 0): string {
    const f = this.facts(bytes);
    if (depth > 8) return '?';
    switch (f.tag) {
      case TAG.pointer:
        return `${f.type === null ? 'void' : this.shallowName(f.type, depth + 1)} *`;
      case TAG.const:
      case TAG.volatile:
      case TAG.restrict:
        return f.type === null ? 'void' : this.shallowName(f.type, depth + 1);
      case TAG.structure:
      case TAG.class:
      case TAG.union:
      case TAG.enumeration: {
        const word = f.tag === TAG.union ? 'union' : f.tag === TAG.enumeration ? 'enum' : 'struct';
        if (f.name === null) return `${word} {...}`;
        return this.cuLanguageIsC(bytes) ? `${word} ${f.name}` : f.name;
      }
      case TAG.subroutine_type:
        return 'void (void)';
      default:
        return f.name ?? 'void';
    }
  }

  private membersOf(bytes: Uint8Array): Member[] {
    const out: Member[] = [];
    for (const ch of this.children(bytes)) {
      const m = this.facts(ch);
      if (m.tag !== TAG.member && m.tag !== TAG.inheritance) continue;
      // A C++ static member is a declaration without a place in the object.
      if (m.tag === TAG.member && m.declaration) continue;
      const typeBytes = m.type;
      let cached: CType | null = null;
      out.push({
        name: m.name,
        // Union members have no DW_AT_data_member_location: their offset is 0.
        offset: m.memberOffset ?? 0,
        base: m.tag === TAG.inheritance,
        bitField: m.bitField,
        type: () => {
          cached ??= typeBytes === null ? VOID : this.decode(typeBytes);
          return cached;
        },
      });
    }
    return out;
  }

  private readonly langCache = new Map<bigint, number | null>();

  /** DW_AT_language of the unit holding a DIE (DW_LANG_*), cached per unit. */
  language(bytes: Uint8Array): number | null {
    const cuPtr = new DataView(bytes.buffer, bytes.byteOffset, DIE_SIZE).getBigUint64(8, true);
    const hit = this.langCache.get(cuPtr);
    if (hit !== undefined) return hit;
    setDie(bytes, this.die);
    let lang: number | null = null;
    if (dw.dwarf_diecu(this.die, this.ref, null, null)) lang = this.udata(this.ref, AT.language);
    this.langCache.set(cuPtr, lang);
    return lang;
  }

  /** C (DW_LANG_C89, C, C99, C11, C17): struct tags are printed with their keyword. */
  private cuLanguageIsC(bytes: Uint8Array): boolean {
    const l = this.language(bytes);
    return l === 0x01 || l === 0x02 || l === 0x0c || l === 0x1d || l === 0x2c;
  }

  cuIsFortran(bytes: Uint8Array): boolean {
    const l = this.language(bytes);
    return l === 0x07 || l === 0x08 || l === 0x0e || l === 0x22 || l === 0x23;
  }
}

function encodingOf(e: number | null): Encoding {
  switch (e) {
    case 0x02:
      return 'bool';
    case 0x04:
      return 'float';
    case 0x05:
      return 'signed';
    case 0x06:
      return 'signed-char';
    case 0x07:
      return 'unsigned';
    case 0x08:
      return 'unsigned-char';
    case 0x10: // DW_ATE_UTF (char8_t, char16_t, char32_t)
      return 'unsigned';
    default:
      return 'other';
  }
}

function renamed(t: CType, name: string): CType {
  switch (t.kind) {
    case 'struct':
      return { ...t, name, members: t.members };
    case 'pointer':
      return { ...t, name, target: t.target };
    default:
      return { ...t, name } as CType;
  }
}
