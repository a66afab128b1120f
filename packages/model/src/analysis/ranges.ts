// Rank sets as text, the way STAT and Slurm print them: "0-15,17,20-31". A 16,384-rank class
// is one short string instead of a list the dashboard or a terminal would have to scroll.

/** Compress ranks into ranges ("0-15,17,20-31"); the input need not be sorted or unique. */
export function compressRanks(ranks: Iterable<number>): string {
  const sorted = Int32Array.from(ranks).sort();
  const parts: string[] = [];
  let i = 0;
  while (i < sorted.length) {
    const lo = sorted[i] ?? 0;
    let hi = lo;
    let j = i + 1;
    // Duplicates and consecutive ranks extend the run.
    while (j < sorted.length && (sorted[j] ?? 0) <= hi + 1) {
      hi = Math.max(hi, sorted[j] ?? 0);
      j++;
    }
    parts.push(lo === hi ? `${lo}` : `${lo}-${hi}`);
    i = j;
  }
  return parts.join(',');
}

/** The inverse of compressRanks; returns null when the text is not a range list. */
export function expandRanks(text: string): number[] | null {
  if (text === '') return [];
  const out: number[] = [];
  for (const part of text.split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) return null;
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (hi < lo) return null;
    for (let r = lo; r <= hi; r++) out.push(r);
  }
  return out;
}
