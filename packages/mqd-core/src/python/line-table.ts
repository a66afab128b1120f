// CPython 3.11's location table (`co_linetable`): the line of an instruction offset. Each entry
// starts with a byte whose top bit is set: bits 3-6 are the entry's form, bits 0-2 its length in
// code units minus one. Forms 0-9 keep the line (one column byte follows), 10-12 move it by
// form-10 (two column bytes), 13 moves it by a signed varint (no columns), 14 is the long form
// (line delta, end line, start and end column as varints), 15 has no location. A varint is
// 6-bit chunks, least significant first, 0x40 meaning another chunk follows; a signed varint
// keeps its sign in bit 0.

/** The line of the instruction at `unit` (in 2-byte code units); null: no line there, or none found. */
export function lineAt(table: Uint8Array, firstLine: number, unit: number): number | null {
  let line = firstLine;
  let addr = 0;
  let i = 0;
  const varint = (): number => {
    let v = 0;
    let shift = 0;
    for (;;) {
      const b = table[i++];
      if (b === undefined) return v;
      v += (b & 0x3f) * 2 ** shift;
      shift += 6;
      if ((b & 0x40) === 0) return v;
    }
  };
  const svarint = (): number => {
    const v = varint();
    return v % 2 === 1 ? -Math.floor(v / 2) : v / 2;
  };
  while (i < table.length) {
    const head = table[i++] ?? 0;
    if ((head & 0x80) === 0) return null; // not at an entry's first byte: a corrupt table
    const form = (head >> 3) & 0x0f;
    const length = (head & 0x07) + 1;
    let here: number | null = line;
    if (form === 15) {
      here = null;
    } else if (form === 14) {
      line += svarint();
      here = line;
      varint();
      varint();
      varint();
    } else if (form === 13) {
      line += svarint();
      here = line;
    } else if (form >= 10) {
      line += form - 10;
      here = line;
      i += 2;
    } else {
      i += 1;
    }
    if (unit < addr + length) return here;
    addr += length;
  }
  return null;
}
