// The expression language read across ranks (src/values/expr.ts), gdb's print formats
// (src/values/render.ts) and the grouping of values across ranks (@mqd/model summarizeValues).
import { MAX_EVAL_EXPR_CHARS, type RankSnapshot, summarizeValues, valueGroupsText } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { cBaseType } from '../src/values/dwarf-types.js';
import { parseExpr } from '../src/values/expr.js';
import { gFormat } from '../src/values/render.js';

const ok = (src: string) => {
  const r = parseExpr(src);
  if (!r.ok) throw new Error(r.error.message);
  return r.expr;
};
const bad = (src: string) => {
  const r = parseExpr(src);
  if (r.ok) throw new Error(`"${src}" parsed`);
  return r.error;
};

describe('parseExpr', () => {
  it('reads names, members, elements, slices, derefs and casts', () => {
    expect(ok('step_counter')).toEqual({ kind: 'name', name: 'step_counter', col: 1 });
    expect(ok('st->prog->step')).toMatchObject({
      kind: 'member',
      name: 'step',
      arrow: true,
      of: { kind: 'member', name: 'prog', arrow: true, of: { kind: 'name', name: 'st' } },
    });
    expect(ok('a.b[2]')).toMatchObject({
      kind: 'index',
      index: { kind: 'int', value: 2n },
      of: { kind: 'member' },
    });
    expect(ok('buf[1:4]')).toMatchObject({ kind: 'slice', from: { value: 1n }, to: { value: 4n } });
    expect(ok('*p')).toMatchObject({ kind: 'deref', of: { kind: 'name', name: 'p' } });
    expect(ok('(int)x')).toMatchObject({ kind: 'cast', to: { name: 'int', pointers: 0 }, of: { name: 'x' } });
    expect(ok('(struct s *)p')).toMatchObject({ kind: 'cast', to: { name: 'struct s', pointers: 1 } });
    expect(ok('(unsigned long) 0x10')).toMatchObject({
      kind: 'cast',
      to: { name: 'unsigned long' },
      of: { value: 16n },
    });
    expect(ok('(my_t *)p')).toMatchObject({ kind: 'cast', to: { name: 'my_t', pointers: 1 } });
    expect(ok('(my_t)p')).toMatchObject({ kind: 'cast', to: { name: 'my_t', pointers: 0 } });
    // A parenthesised name followed by a member is not a cast.
    expect(ok('(p)->x')).toMatchObject({ kind: 'member', of: { kind: 'name', name: 'p' } });
    expect(ok('ns::counter')).toEqual({ kind: 'name', name: 'ns::counter', col: 1 });
    expect(ok('a[-1]')).toMatchObject({ kind: 'index', index: { kind: 'int', value: -1n } });
    expect(ok('a[i]')).toMatchObject({ kind: 'index', index: { kind: 'name', name: 'i' } });
  });

  it('refuses calls, operators, assignment and address-of with MQD_E_EVAL_SYNTAX and the column', () => {
    expect(bad('f(1)')).toMatchObject({ code: 'MQD_E_EVAL_SYNTAX' });
    expect(bad('f(1)').message).toContain('column 2: function calls are not read');
    expect(bad('x = 1').message).toContain('column 3:');
    expect(bad('a + b').message).toContain('column 3: the operator "+"');
    expect(bad('&x').message).toContain('column 1: taking an address');
    expect(bad('st->').message).toContain('column 5: expected a member name');
    expect(bad('a[1').message).toContain('column 4: expected "]"');
    expect(bad('').message).toContain('column 1: the expression is empty');
    expect(bad('x y').message).toContain('column 3: unexpected "y"');
    expect(bad('x\u00e9').message).toContain('column 2: only printable ASCII');
    const long = 'a'.repeat(MAX_EVAL_EXPR_CHARS + 1);
    expect(bad(long).message).toContain(`longer than ${MAX_EVAL_EXPR_CHARS} characters`);
    expect(bad(`${'*'.repeat(40)}p`).message).toContain('nested deeper than');
  });
});

describe('gdb print formats', () => {
  it('prints floats as %g with 9 (float) or 17 (double) digits', () => {
    expect(gFormat(1 / 6, 17)).toBe('0.16666666666666666');
    expect(gFormat(0.2, 17)).toBe('0.20000000000000001');
    expect(gFormat(1, 17)).toBe('1');
    expect(gFormat(Math.fround(0.1), 9)).toBe('0.100000001');
    expect(gFormat(1e-7, 17)).toBe('9.9999999999999995e-08');
    expect(gFormat(1.5e300, 17)).toBe('1.5000000000000001e+300');
  });

  it('knows the C base types a cast names', () => {
    expect(cBaseType('unsigned')).toMatchObject({ name: 'unsigned int', size: 4, enc: 'unsigned' });
    expect(cBaseType('long int')).toMatchObject({ name: 'long', size: 8, enc: 'signed' });
    expect(cBaseType('signed char')).toMatchObject({ size: 1, enc: 'signed-char' });
    expect(cBaseType('struct s')).toBeNull();
  });
});

function rank(r: number, value: RankSnapshot['values']): RankSnapshot {
  return {
    rank: r,
    pid: 100 + r,
    host: 'h',
    state: { kind: 'ok' },
    pausedMicros: 1,
    communicators: [],
    ...(value ? { values: value } : {}),
  };
}

describe('summarizeValues', () => {
  it('groups ranks by value, largest group first, with min, max and the one rank behind', () => {
    const ranks = Array.from({ length: 8 }, (_, r) =>
      rank(r, [
        {
          expr: 'step',
          frame: 'solve',
          value: { text: r === 3 ? '41' : '42', type: 'int', number: r === 3 ? 41 : 42 },
        },
      ]),
    );
    const [s] = summarizeValues(ranks);
    expect(s?.groups.map((g) => [g.text, g.ranks])).toEqual([
      ['42', [0, 1, 2, 4, 5, 6, 7]],
      ['41', [3]],
    ]);
    expect(s?.min).toEqual({ value: 41, ranks: [3] });
    expect(s?.max).toEqual({ value: 42, ranks: [0, 1, 2, 4, 5, 6, 7] });
    expect(s?.outliers).toEqual([3]);
    expect(s?.frame).toBe('solve');
    expect(s && valueGroupsText(s)).toBe('ranks 0-2,4-7: 42; rank 3: 41');
  });

  it('groups coded failures by their message and lists ranks read without the expression', () => {
    const err = {
      code: 'MQD_E_EVAL_OPTIMIZED_OUT',
      message: 'MQD_E_EVAL_OPTIMIZED_OUT: "x" is optimized out',
    };
    const ranks = [
      rank(0, [{ expr: 'x', frame: 'f', error: err }]),
      rank(1, [{ expr: 'x', frame: 'f', error: err }]),
      rank(2, undefined),
    ];
    const [s] = summarizeValues(ranks);
    expect(s?.groups).toEqual([{ text: err.message, number: null, code: err.code, ranks: [0, 1] }]);
    expect(s?.min).toBeNull();
    expect(s?.outliers).toEqual([]);
    expect(s && valueGroupsText(s)).toBe(`ranks 0-1: ${err.message}; rank 2: not read`);
  });

  it('keeps one text asked in two frames apart (values are in request order)', () => {
    const err = { code: 'MQD_E_EVAL_FRAME', message: 'MQD_E_EVAL_FRAME: no frame of nope' };
    const ranks = [0, 1].map((r) =>
      rank(r, [
        { expr: 'i', frame: 'solve', value: { text: String(r), type: 'int', number: r } },
        { expr: 'i', frame: 'nope', error: err },
      ]),
    );
    const [a, b] = summarizeValues(ranks);
    expect(a && valueGroupsText(a)).toBe('rank 0: 0; rank 1: 1');
    expect(a?.frame).toBe('solve');
    expect(b && valueGroupsText(b)).toBe(`ranks 0-1: ${err.message}`);
  });

  it('names no outliers when the ranks split evenly', () => {
    const ranks = [0, 1, 2, 3].map((r) =>
      rank(r, [{ expr: 'v', frame: null, value: { text: String(r % 2), type: 'int', number: r % 2 } }]),
    );
    expect(summarizeValues(ranks)[0]?.outliers).toEqual([]);
    expect(summarizeValues(ranks)[0]?.frame).toBeNull();
  });
});
