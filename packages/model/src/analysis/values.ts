// Values across ranks: one expression read on every rank (RankSnapshot.values), grouped by
// value the way the CLI prints it ("ranks 0-2,4-7: 42; rank 3: 41"), with the numeric range and
// the few ranks that differ from the rest (the one rank an iteration behind).
import { codedText } from '../errors.js';
import type { RankSnapshot } from '../snapshot-spec.js';
import { OUTLIER_MAX_RANKS, rareClassMax } from './outliers.js';
import { compressRanks } from './ranges.js';

/** The ranks that read one same value (or failed with one same coded message). */
export interface ValueGroup {
  /** The value's text as gdb prints it, or `CODE: message` for a failure. */
  readonly text: string;
  /** The value's numeric form (scalars); null for aggregates and failures. */
  readonly number: number | null;
  /** The failure's code; null for a value. */
  readonly code: string | null;
  /** Ranks in ascending order. */
  readonly ranks: readonly number[];
}

/** One expression across the ranks that were read. */
export interface ValueSummary {
  readonly expr: string;
  /** The frame the expression was read in, when every rank names the same one; else null. */
  readonly frame: string | null;
  /** Largest group first; equal sizes by their lowest rank. */
  readonly groups: readonly ValueGroup[];
  /** The smallest and largest numeric values with their ranks; null when no rank has a number. */
  readonly min: { readonly value: number; readonly ranks: readonly number[] } | null;
  readonly max: { readonly value: number; readonly ranks: readonly number[] } | null;
  /**
   * Ranks whose value few others share (groups of at most 1% of the ranks, at least one, and
   * smaller than the largest group), when they are at most OUTLIER_MAX_RANKS and fewer than half
   * the ranks: the ones to look at first. Empty when every rank agrees or no such few exist.
   */
  readonly outliers: readonly number[];
  /** Ranks with no reading of this expression (never stopped, or read without it). */
  readonly unread: readonly number[];
}

/**
 * Every expression the ranks carry, summarised across ranks. Ranks carry their values in request
 * order (one request: the same list on every rank), so the n-th value of each rank is the n-th
 * expression, even when one text is asked twice in different frames.
 */
export function summarizeValues(ranks: readonly RankSnapshot[]): ValueSummary[] {
  let n = 0;
  for (const r of ranks) n = Math.max(n, r.values?.length ?? 0);
  return Array.from({ length: n }, (_, i) => summarizeValue(ranks, i));
}

/** The `position`-th expression of the request across ranks. */
export function summarizeValue(ranks: readonly RankSnapshot[], position: number): ValueSummary {
  let expr = '';
  for (const r of ranks) {
    const v = r.values?.[position];
    if (v !== undefined) {
      expr = v.expr;
      break;
    }
  }
  const byText = new Map<string, { number: number | null; code: string | null; ranks: number[] }>();
  const unread: number[] = [];
  const frames = new Set<string | null>();
  for (const r of ranks) {
    const v = r.values?.[position];
    if (v === undefined || v.expr !== expr) {
      unread.push(r.rank);
      continue;
    }
    frames.add(v.frame);
    const text = v.value ? v.value.text : v.error ? codedText(v.error) : '';
    let g = byText.get(text);
    if (!g) {
      g = { number: v.value?.number ?? null, code: v.error?.code ?? null, ranks: [] };
      byText.set(text, g);
    }
    g.ranks.push(r.rank);
  }
  const groups: ValueGroup[] = [...byText].map(([text, g]) => ({
    text,
    number: g.number,
    code: g.code,
    ranks: g.ranks.sort((a, b) => a - b),
  }));
  groups.sort((a, b) => b.ranks.length - a.ranks.length || (a.ranks[0] ?? 0) - (b.ranks[0] ?? 0));
  let min: ValueSummary['min'] = null;
  let max: ValueSummary['max'] = null;
  for (const g of groups) {
    if (g.number === null) continue;
    if (min === null || g.number < min.value) min = { value: g.number, ranks: g.ranks };
    else if (g.number === min.value)
      min = { value: g.number, ranks: [...min.ranks, ...g.ranks].sort((a, b) => a - b) };
    if (max === null || g.number > max.value) max = { value: g.number, ranks: g.ranks };
    else if (g.number === max.value)
      max = { value: g.number, ranks: [...max.ranks, ...g.ranks].sort((a, b) => a - b) };
  }
  const read = groups.reduce((n, g) => n + g.ranks.length, 0);
  const rare = rareClassMax(read);
  const largest = groups[0]?.ranks.length ?? 0;
  let outliers: number[] = [];
  for (const g of groups) if (g.ranks.length <= rare && g.ranks.length < largest) outliers.push(...g.ranks);
  if (outliers.length > OUTLIER_MAX_RANKS || outliers.length * 2 >= read) outliers = [];
  outliers.sort((a, b) => a - b);
  const frame = frames.size === 1 ? ([...frames][0] ?? null) : null;
  return { expr, frame, groups, min, max, outliers, unread: unread.sort((a, b) => a - b) };
}

/** "ranks 0-2,4-7: 42; rank 3: 41": every group, largest first. */
export function valueGroupsText(s: ValueSummary): string {
  const parts = s.groups.map((g) => `${ranksWord(g.ranks)}: ${g.text}`);
  if (s.unread.length > 0) parts.push(`${ranksWord(s.unread)}: not read`);
  return parts.join('; ');
}

function ranksWord(ranks: readonly number[]): string {
  return `${ranks.length === 1 ? 'rank' : 'ranks'} ${compressRanks(ranks)}`;
}
