// Values across ranks for a page: each expression a snapshot read, as GET /snapshots/:id/values
// sends it (api-spec.ts ApiValueSummary): the groups (at most MAX_VALUE_GROUPS, ranks
// compressed), min/max, the outliers with their value, and the numbers against rank in at most
// MAX_VALUE_BINS bins, so a page never needs every rank's value.
import {
  type ApiValueBin,
  type ApiValueSummary,
  MAX_VALUE_BINS,
  MAX_VALUE_GROUPS,
  MAX_VALUE_RANKS_CHARS,
} from '../api-spec.js';
import type { JobSnapshot, RankSnapshot } from '../snapshot-spec.js';
import { compressRanks } from './ranges.js';
import { summarizeValues, type ValueSummary } from './values.js';

/** "0-2,4-7", cut to MAX_VALUE_RANKS_CHARS. */
function ranksText(ranks: readonly number[]): string {
  const t = compressRanks(ranks);
  return t.length <= MAX_VALUE_RANKS_CHARS ? t : `${t.slice(0, MAX_VALUE_RANKS_CHARS - 1)}…`;
}

/** The numbers against rank, ranks in ascending order cut into at most `maxBins` equal runs. */
export function valueBins(
  ranks: readonly RankSnapshot[],
  position: number,
  expr: string,
  maxBins = MAX_VALUE_BINS,
): ApiValueBin[] {
  const points: { rank: number; n: number | null }[] = [];
  for (const r of ranks) {
    const v = r.values?.[position];
    points.push({ rank: r.rank, n: v !== undefined && v.expr === expr ? (v.value?.number ?? null) : null });
  }
  if (!points.some((p) => p.n !== null)) return [];
  points.sort((a, b) => a.rank - b.rank);
  const per = Math.ceil(points.length / maxBins);
  const bins: ApiValueBin[] = [];
  for (let i = 0; i < points.length; i += per) {
    const run = points.slice(i, i + per);
    let min: number | null = null;
    let max: number | null = null;
    for (const p of run) {
      if (p.n === null) continue;
      min = min === null ? p.n : Math.min(min, p.n);
      max = max === null ? p.n : Math.max(max, p.n);
    }
    bins.push({ lo: run[0]?.rank ?? 0, hi: run[run.length - 1]?.rank ?? 0, min, max });
  }
  return bins;
}

function summaryJson(s: ValueSummary, bins: ApiValueBin[]): ApiValueSummary {
  const textOf = new Map<number, string>();
  for (const g of s.groups) if (g.ranks.length <= 16) for (const r of g.ranks) textOf.set(r, g.text);
  const read = s.groups.reduce((n, g) => n + g.ranks.length, 0);
  return {
    expr: s.expr,
    frame: s.frame,
    read,
    groups: s.groups.slice(0, MAX_VALUE_GROUPS).map((g) => ({
      text: g.text,
      number: g.number,
      code: g.code,
      count: g.ranks.length,
      ranks: ranksText(g.ranks),
      first: g.ranks.slice(0, 8),
    })),
    groupsOmitted: Math.max(0, s.groups.length - MAX_VALUE_GROUPS),
    min: s.min === null ? null : { value: s.min.value, ranks: ranksText(s.min.ranks) },
    max: s.max === null ? null : { value: s.max.value, ranks: ranksText(s.max.ranks) },
    outliers: s.outliers.map((rank) => ({ rank, text: textOf.get(rank) ?? '' })),
    others: s.outliers.length > 0 ? (s.groups[0]?.text ?? null) : null,
    bins,
    unread: compressRanks(s.unread),
  };
}

/** Every expression of the snapshot across its ranks, as GET /snapshots/:id/values answers. */
export function valuesOf(snapshot: Pick<JobSnapshot, 'ranks'>): ApiValueSummary[] {
  return summarizeValues(snapshot.ranks).map((s, i) => summaryJson(s, valueBins(snapshot.ranks, i, s.expr)));
}
