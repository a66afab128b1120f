// The expression language read across ranks: a small, read-only piece of C. Names (with `::`
// for C++ namespaces and Fortran modules), `.` and `->` members, `[i]` elements, `[a:b]` slices,
// unary `*`, casts to named types (`(int)x`, `(struct s *)p`), integer literals and a leading
// minus on them. No calls, no operators, no assignment: nothing a rank could notice.
import { MAX_EVAL_EXPR_CHARS, type MqdError, mqdError } from '@mqd/model';

/** The type a cast names: a base/struct/typedef name and how many `*` follow it. */
export interface TypeName {
  /** `int`, `unsigned long`, `struct s`, `union u`, `enum e`, `my_t`. */
  readonly name: string;
  readonly pointers: number;
}

export type Expr =
  | { readonly kind: 'name'; readonly name: string; readonly col: number }
  | { readonly kind: 'int'; readonly value: bigint; readonly col: number }
  | {
      readonly kind: 'member';
      readonly of: Expr;
      readonly name: string;
      readonly arrow: boolean;
      readonly col: number;
    }
  | { readonly kind: 'index'; readonly of: Expr; readonly index: Expr; readonly col: number }
  | {
      readonly kind: 'slice';
      readonly of: Expr;
      readonly from: Expr;
      readonly to: Expr;
      readonly col: number;
    }
  | { readonly kind: 'deref'; readonly of: Expr; readonly col: number }
  | { readonly kind: 'cast'; readonly to: TypeName; readonly of: Expr; readonly col: number };

/** Nesting deeper than this is refused (a hostile expression cannot exhaust the stack). */
const MAX_DEPTH = 32;

const TYPE_WORDS = new Set([
  'struct',
  'union',
  'enum',
  'class',
  'unsigned',
  'signed',
  'char',
  'short',
  'int',
  'long',
  'float',
  'double',
  '_Bool',
  'bool',
  'void',
  'const',
  'volatile',
]);

type Tok =
  | { t: 'id'; v: string; col: number }
  | { t: 'num'; v: bigint; col: number }
  | { t: 'p'; v: string; col: number }
  | { t: 'end'; col: number };

const syntax = (col: number, what: string): MqdError =>
  mqdError('MQD_E_EVAL_SYNTAX', `column ${col}: ${what}`);

function tokens(src: string): Tok[] | MqdError {
  const out: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i] ?? '';
    const col = i + 1;
    if (c === ' ' || c === '\t') {
      i++;
      continue;
    }
    const id = /^[A-Za-z_$][A-Za-z0-9_$]*(?:::[A-Za-z_][A-Za-z0-9_]*)*/.exec(src.slice(i));
    if (id) {
      out.push({ t: 'id', v: id[0], col });
      i += id[0].length;
      continue;
    }
    const num = /^(?:0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*/.exec(src.slice(i));
    if (num) {
      const digits = num[0].replace(/[uUlL]+$/, '');
      if (/^0[0-7]+$/.test(digits)) out.push({ t: 'num', v: BigInt(`0o${digits.slice(1)}`), col });
      else out.push({ t: 'num', v: BigInt(digits), col });
      i += num[0].length;
      if (/[A-Za-z_.]/.test(src[i] ?? '')) return syntax(i + 1, `"${src[i]}" after a number`);
      continue;
    }
    if (src.startsWith('->', i)) {
      out.push({ t: 'p', v: '->', col });
      i += 2;
      continue;
    }
    if ('.[]:()*-'.includes(c)) {
      out.push({ t: 'p', v: c, col });
      i++;
      continue;
    }
    if (c === '&') return syntax(col, 'taking an address (&) is not read; name the variable itself');
    if (c === '=' || c === '+' || c === '/' || c === '%' || c === '|' || c === '^' || c === '<' || c === '>')
      return syntax(col, `the operator "${c}" is not read: values are read, never computed or assigned`);
    if (c === ',') return syntax(col, 'calls and comma lists are not read');
    return syntax(col, `unexpected "${c}"`);
  }
  out.push({ t: 'end', col: src.length + 1 });
  return out;
}

/** Parses an expression; a bad one is MQD_E_EVAL_SYNTAX naming its column (1-based). */
export function parseExpr(src: string): { ok: true; expr: Expr } | { ok: false; error: MqdError } {
  if (src.length > MAX_EVAL_EXPR_CHARS) {
    return {
      ok: false,
      error: syntax(
        MAX_EVAL_EXPR_CHARS + 1,
        `the expression is longer than ${MAX_EVAL_EXPR_CHARS} characters`,
      ),
    };
  }
  if (src.trim() === '') return { ok: false, error: syntax(1, 'the expression is empty') };
  if (/[^\x20-\x7e\t]/.test(src)) {
    const col = src.search(/[^\x20-\x7e\t]/) + 1;
    return { ok: false, error: syntax(col, 'only printable ASCII is read') };
  }
  const toks = tokens(src);
  if ('code' in toks) return { ok: false, error: toks };
  const p = new Parser(toks);
  try {
    const e = p.unary(0);
    const end = p.peek();
    if (end.t !== 'end') throw syntax(end.col, `unexpected ${describe(end)} after the expression`);
    return { ok: true, expr: e };
  } catch (e) {
    if (e && typeof e === 'object' && 'code' in e) return { ok: false, error: e as MqdError };
    throw e;
  }
}

function describe(t: Tok): string {
  if (t.t === 'end') return 'end of the expression';
  return `"${String(t.v)}"`;
}

class Parser {
  private at = 0;
  constructor(private readonly toks: Tok[]) {}

  peek(k = 0): Tok {
    return this.toks[Math.min(this.at + k, this.toks.length - 1)] as Tok;
  }

  private next(): Tok {
    const t = this.peek();
    if (this.at < this.toks.length - 1) this.at++;
    return t;
  }

  private isP(t: Tok, v: string): boolean {
    return t.t === 'p' && t.v === v;
  }

  private expect(v: string): Tok {
    const t = this.next();
    if (!this.isP(t, v)) throw syntax(t.col, `expected "${v}", found ${describe(t)}`);
    return t;
  }

  unary(depth: number): Expr {
    if (depth > MAX_DEPTH) throw syntax(this.peek().col, `nested deeper than ${MAX_DEPTH} levels`);
    const t = this.peek();
    if (this.isP(t, '*')) {
      this.next();
      return { kind: 'deref', of: this.unary(depth + 1), col: t.col };
    }
    if (this.isP(t, '-')) {
      this.next();
      const n = this.next();
      if (n.t !== 'num') throw syntax(n.col, 'a minus sign is read only before a number');
      return this.postfix({ kind: 'int', value: -n.v, col: t.col }, depth);
    }
    if (this.isP(t, '(') && this.castAhead()) {
      this.next();
      const to = this.typeName();
      this.expect(')');
      return { kind: 'cast', to, of: this.unary(depth + 1), col: t.col };
    }
    return this.postfix(this.primary(depth), depth);
  }

  /** After "(": a type name (a type word, or a name followed by `*`s and `)` then an operand). */
  private castAhead(): boolean {
    const first = this.peek(1);
    if (first.t !== 'id') return false;
    if (TYPE_WORDS.has(first.v)) return true;
    let k = 2;
    let stars = 0;
    while (this.isP(this.peek(k), '*')) {
      k++;
      stars++;
    }
    if (!this.isP(this.peek(k), ')')) return false;
    if (stars > 0) return true;
    const after = this.peek(k + 1);
    return after.t === 'id' || after.t === 'num' || this.isP(after, '(') || this.isP(after, '*');
  }

  private typeName(): TypeName {
    const words: string[] = [];
    for (;;) {
      const t = this.peek();
      if (t.t !== 'id') break;
      this.next();
      if (t.v === 'const' || t.v === 'volatile') continue;
      words.push(t.v);
      if (['struct', 'union', 'enum', 'class'].includes(t.v)) {
        const tag = this.next();
        if (tag.t !== 'id') throw syntax(tag.col, `expected a ${t.v} name`);
        words.push(tag.v);
        break;
      }
      if (!TYPE_WORDS.has(t.v)) break;
    }
    let pointers = 0;
    while (this.isP(this.peek(), '*')) {
      this.next();
      pointers++;
    }
    if (words.length === 0) throw syntax(this.peek().col, 'expected a type name');
    return { name: words.join(' '), pointers };
  }

  private primary(depth: number): Expr {
    const t = this.next();
    if (t.t === 'id') {
      if (TYPE_WORDS.has(t.v))
        throw syntax(t.col, `"${t.v}" is a type word; a cast is written (${t.v} ...)x`);
      if (this.isP(this.peek(), '(')) throw syntax(this.peek().col, 'function calls are not read');
      return { kind: 'name', name: t.v, col: t.col };
    }
    if (t.t === 'num') return { kind: 'int', value: t.v, col: t.col };
    if (this.isP(t, '(')) {
      const e = this.unary(depth + 1);
      this.expect(')');
      return e;
    }
    throw syntax(t.col, `expected a name, a number or "(", found ${describe(t)}`);
  }

  private postfix(base: Expr, depth: number): Expr {
    let e = base;
    for (let n = 0; ; n++) {
      if (n > MAX_DEPTH) throw syntax(this.peek().col, `more than ${MAX_DEPTH} members and elements`);
      const t = this.peek();
      if (this.isP(t, '.') || this.isP(t, '->')) {
        this.next();
        const m = this.next();
        if (m.t !== 'id' || m.v.includes('::')) throw syntax(m.col, 'expected a member name');
        e = { kind: 'member', of: e, name: m.v, arrow: t.t === 'p' && t.v === '->', col: t.col };
      } else if (this.isP(t, '[')) {
        this.next();
        const from = this.unary(depth + 1);
        if (this.isP(this.peek(), ':')) {
          this.next();
          const to = this.unary(depth + 1);
          this.expect(']');
          e = { kind: 'slice', of: e, from, to, col: t.col };
        } else {
          this.expect(']');
          e = { kind: 'index', of: e, index: from, col: t.col };
        }
      } else return e;
    }
  }
}
