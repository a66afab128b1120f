// The flat integer storage of the wait-for graph: an index out of range is a bug and throws,
// rather than reading 0 (which the graph would take for rank 0 or clause 0).
import { describe, expect, it } from 'vitest';
import { at, csr, IntVec } from '../../src/analysis/csr.js';

describe('flat integer storage', () => {
  it('reads what was stored and throws past the end instead of reading rank 0', () => {
    const v = new IntVec();
    v.push(7);
    v.push(9);
    expect([v.get(0), v.get(1)]).toEqual([7, 9]);
    // The backing array has room for 64: a read past the pushed length is still out of range.
    expect(() => v.get(2)).toThrow(/out of range/);
    expect(() => v.get(-1)).toThrow(/out of range/);
    expect(at(new Int32Array([4, 5]), 1)).toBe(5);
    expect(() => at(new Int32Array([4, 5]), 2)).toThrow(/index 2 out of range \(length 2\)/);
  });

  it('builds rows in insertion order', () => {
    const keys = new IntVec();
    const vals = new IntVec();
    for (const [k, x] of [
      [1, 10],
      [0, 20],
      [1, 30],
    ] as const) {
      keys.push(k);
      vals.push(x);
    }
    const g = csr(3, keys, vals);
    expect([...g.start]).toEqual([0, 1, 3, 3]);
    expect([...g.items]).toEqual([20, 10, 30]);
    // A key outside the rows is a bug.
    keys.push(5);
    vals.push(1);
    expect(() => csr(3, keys, vals)).toThrow(/out of range/);
  });
});
