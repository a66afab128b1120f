// The words of the Values view, from a server summary (ApiValueSummary): the outliers first,
// "rank 3: 41 (the others: 42)", then every group as the CLI prints it, and the numbers' range.
import type { ApiValueSummary } from '@mqd/model';

/** "rank 3: 41 (the others: 42)" for each outlier, lowest rank first. */
export function outlierLines(s: ApiValueSummary): string[] {
  return s.outliers.map(
    (o) => `rank ${o.rank}: ${o.text}${s.others !== null ? ` (the others: ${s.others})` : ''}`,
  );
}

/** "ranks 0-2,4-7: 42" (one group). */
export function groupLine(g: ApiValueSummary['groups'][number]): string {
  return `${g.count === 1 ? 'rank' : 'ranks'} ${g.ranks}: ${g.text}`;
}

/** "min 41 (rank 3), max 42 (ranks 0-2,4-7)", or null when no rank read a number. */
export function rangeLine(s: ApiValueSummary): string | null {
  if (s.min === null || s.max === null) return null;
  const at = (ranks: string) => `${/^\d+$/.test(ranks) ? 'rank' : 'ranks'} ${ranks}`;
  if (s.min.value === s.max.value) return `every number read is ${s.min.value}`;
  return `min ${s.min.value} (${at(s.min.ranks)}), max ${s.max.value} (${at(s.max.ranks)})`;
}

/** The heading of one expression: `step (in solve)`. */
export function exprHeading(s: ApiValueSummary): string {
  return s.frame !== null ? `${s.expr} (in ${s.frame})` : s.expr;
}

/** Whether every rank read the same (one group, nothing unread). */
export function allAgree(s: ApiValueSummary): boolean {
  return s.groups.length === 1 && s.unread === '';
}
