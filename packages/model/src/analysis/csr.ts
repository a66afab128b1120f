// Flat integer storage for graphs at 16,384 ranks: no per-edge objects, no per-rank arrays.

/** Growable Int32 vector: clause arrays without per-element objects. */
export class IntVec {
  data = new Int32Array(64);
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const next = new Int32Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.length++] = v;
  }
  get(i: number): number {
    if (i < 0 || i >= this.length) throw new Error(`IntVec: index ${i} out of range (length ${this.length})`);
    return at(this.data, i);
  }
}

/**
 * `arr[i]`, which must exist. An index out of range is a bug in the analysis; reading it as 0
 * would silently make it rank 0 (or clause 0), so it throws instead.
 */
export function at(arr: ArrayLike<number>, i: number): number {
  const v = arr[i];
  if (v === undefined) throw new Error(`analysis: index ${i} out of range (length ${arr.length})`);
  return v;
}

/** CSR (compressed sparse rows): row r's items are items[start[r] .. start[r+1]). */
export interface Csr {
  readonly start: Int32Array;
  readonly items: Int32Array;
}

export function csr(rows: number, keys: IntVec, values: IntVec): Csr {
  const start = new Int32Array(rows + 1);
  for (let i = 0; i < keys.length; i++) start[keys.get(i) + 1] = at(start, keys.get(i) + 1) + 1;
  for (let r = 0; r < rows; r++) start[r + 1] = at(start, r + 1) + at(start, r);
  const fill = start.slice(0, rows);
  const items = new Int32Array(keys.length);
  for (let i = 0; i < keys.length; i++) {
    const k = keys.get(i);
    const slot = at(fill, k);
    items[slot] = values.get(i);
    fill[k] = slot + 1;
  }
  return { start, items };
}
