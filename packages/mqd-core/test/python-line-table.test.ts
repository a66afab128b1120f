// The 3.11 location-table decoder against CPython itself: Debian's python3 compiles a source
// with every kind of entry (same line, small and large jumps forwards and back, multi-line
// expressions, instructions without a location) and prints each code object's co_linetable
// with the line of every code unit (co_positions()); lineAt must give the same for each unit.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { PYTHON } from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { lineAt } from '../src/python/line-table.js';

const SOURCE = `
import sys

def near(a, b):
    x = a + b
    y = (a *
         b)
    return x, y
${'\n'.repeat(70)}
def far(n):
    total = 0
    for i in range(n):
        if i % 2:
            total += i
        else:
            total -= (
                i
                * 3
            )
    while total > 100:
        total //= 2
    try:
        1 / 0
    except ZeroDivisionError:
        pass
${'\n'.repeat(300)}
    return [k for k in range(total)
            if k]

class C:
    def m(self, v):
        return {v: [v,
                    v]}

async def coro():
    return await sys
`;

const PRINT = `
import json, sys, types
src = sys.stdin.read()
out = []
def walk(co):
    out.append({"name": co.co_qualname, "first": co.co_firstlineno, "table": co.co_linetable.hex(),
                "lines": [p[0] for p in co.co_positions()]})
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            walk(c)
walk(compile(src, "gen.py", "exec"))
print(json.dumps(out))
`;

interface Generated {
  readonly name: string;
  readonly first: number;
  readonly table: string;
  readonly lines: readonly (number | null)[];
}

describe.skipIf(!existsSync(PYTHON))('the 3.11 location table (co_linetable)', () => {
  const code: Generated[] = existsSync(PYTHON)
    ? JSON.parse(execFileSync(PYTHON, ['-c', PRINT], { input: SOURCE, encoding: 'utf8' }))
    : [];

  it('covers the forms a real compiler writes', () => {
    const forms = new Set<number>();
    for (const c of code) {
      const t = Buffer.from(c.table, 'hex');
      for (const b of t) if (b & 0x80) forms.add((b >> 3) & 0x0f);
    }
    // Short forms (0-9), one-line forms (10-12), no columns (13), long (14), no location (15).
    expect([...forms].some((f) => f < 10)).toBe(true);
    for (const f of [10, 11, 13, 14, 15]) expect(forms.has(f), `form ${f}`).toBe(true);
    expect(code.map((c) => c.name)).toEqual(
      expect.arrayContaining(['<module>', 'near', 'far', 'far.<locals>.<listcomp>', 'C.m', 'coro']),
    );
  });

  it('gives the line CPython gives for every code unit of every code object', () => {
    let units = 0;
    for (const c of code) {
      const t = new Uint8Array(Buffer.from(c.table, 'hex'));
      const got = c.lines.map((_, unit) => lineAt(t, c.first, unit));
      expect(got, c.name).toEqual(c.lines);
      units += c.lines.length;
    }
    expect(units).toBeGreaterThan(100);
  });

  it('past the table, or in a corrupt one, has no line', () => {
    const c = code.find((x) => x.name === 'far');
    if (!c) throw new Error('no code object far');
    const t = new Uint8Array(Buffer.from(c.table, 'hex'));
    expect(lineAt(t, c.first, c.lines.length + 10)).toBeNull();
    expect(lineAt(new Uint8Array([0x01, 0x02]), 10, 0)).toBeNull();
  });
});
