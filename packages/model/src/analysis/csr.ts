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
    return this.data[i] ?? 0;
  }
}

/** CSR (compressed sparse rows): row r's items are items[start[r] .. start[r+1]). */
export interface Csr {
  readonly start: Int32Array;
  readonly items: Int32Array;
}

export function csr(rows: number, keys: IntVec, values: IntVec): Csr {
  const start = new Int32Array(rows + 1);
  for (let i = 0; i < keys.length; i++) start[keys.get(i) + 1] = (start[keys.get(i) + 1] ?? 0) + 1;
  for (let r = 0; r < rows; r++) start[r + 1] = (start[r + 1] ?? 0) + (start[r] ?? 0);
  const fill = start.slice(0, rows);
  const items = new Int32Array(keys.length);
  for (let i = 0; i < keys.length; i++) {
    const k = keys.get(i);
    const at = fill[k] ?? 0;
    items[at] = values.get(i);
    fill[k] = at + 1;
  }
  return { start, items };
}
