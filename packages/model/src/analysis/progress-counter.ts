// The progress counter: an expression read on every rank that the request marked as counting
// progress (EvalRequest.progress: the time step, the iteration). When the ranks' numbers
// differ, the ranks with the smallest are the least progressed, the way TotalView and STAT say
// it: "Least progressed: rank 3 (step = 41; ranks 0-2, 4-7: 42)". A rank whose value could not
// be read as a number is said so, never counted as 0; when every readable rank agrees, the
// counter tells no rank apart and nothing is said of it.
import { userFrame } from '../mpi/frames.js';
import type { RankSnapshot } from '../snapshot-spec.js';
import { ranksPhrase } from '../text.js';
import { type DiagnosisLine, type DiagnosisPart, line, name, text } from './diagnosis-parts.js';
import { compressRanks } from './ranges.js';
import { summarizeValue } from './values.js';

/** The ranks that read one same number of the counter. */
export interface ProgressCounterGroup {
  readonly value: number;
  /** Ranks in ascending order. */
  readonly ranks: readonly number[];
}

/** What the progress counter says of a snapshot's ranks (Explanation.progressCounter). */
export interface ProgressCounter {
  readonly expr: string;
  /** The frame the counter was read in, when every rank names the same one; else null. */
  readonly frame: string | null;
  /** The smallest number and its ranks; null when the readable ranks all read one number, or none did. */
  readonly least: ProgressCounterGroup | null;
  /** The other numbers, smallest first (empty when `least` is null). */
  readonly others: readonly ProgressCounterGroup[];
  /** Ranks whose counter could not be read as a number (a coded failure, no number, no reading). */
  readonly unreadable: readonly number[];
  /** The sentence, every rank a link: "Least progressed: rank 3 (step = 41; ranks 0-2, 4-7: 42)". */
  readonly line: DiagnosisLine;
}

/** Other numbers named one by one; the rest are counted. */
const MAX_OTHER_VALUES = 3;

/** The request position of the first expression marked a progress counter on any rank; -1 when none is. */
export function progressCounterPosition(ranks: readonly RankSnapshot[]): number {
  let best = -1;
  for (const r of ranks) {
    const vs = r.values;
    if (vs === undefined) continue;
    const limit = best < 0 ? vs.length : best;
    for (let i = 0; i < limit; i++) {
      if (vs[i]?.progress === true) {
        best = i;
        break;
      }
    }
  }
  return best;
}

/**
 * The progress counter across `ranks`; null when no expression is marked one, or when every rank
 * read the same number of it (it tells no rank apart).
 */
export function progressCounter(ranks: readonly RankSnapshot[]): ProgressCounter | null {
  const position = progressCounterPosition(ranks);
  if (position < 0) return null;
  const s = summarizeValue(ranks, position);
  const byNumber = new Map<number, number[]>();
  const unreadable: number[] = [...s.unread];
  for (const g of s.groups) {
    if (g.number === null || !Number.isFinite(g.number)) {
      unreadable.push(...g.ranks);
      continue;
    }
    const at = byNumber.get(g.number);
    if (at === undefined) byNumber.set(g.number, [...g.ranks]);
    else at.push(...g.ranks);
  }
  unreadable.sort((a, b) => a - b);
  const numbers: ProgressCounterGroup[] = [...byNumber]
    .sort((a, b) => a[0] - b[0])
    .map(([value, rs]) => ({ value, ranks: rs.sort((a, b) => a - b) }));
  if (numbers.length <= 1 && unreadable.length === 0) return null;
  const least = numbers.length > 1 ? (numbers[0] ?? null) : null;
  const others = least === null ? [] : numbers.slice(1);
  const byRank = new Map<number, RankSnapshot>();
  for (const r of ranks) byRank.set(r.rank, r);
  const who = (rs: readonly number[]): DiagnosisPart => {
    const ranges = compressRanks(rs);
    const phrase = ranksPhrase(ranges);
    const only = rs.length === 1 ? rs[0] : undefined;
    if (only === undefined) return { kind: 'ranks', text: phrase, ranks: ranges };
    const r = byRank.get(only);
    const u = r === undefined ? null : userFrame(r);
    return {
      kind: 'rank',
      text: phrase,
      rank: only,
      frame: u === null ? null : { tid: u.tid, index: u.index },
    };
  };
  const groupParts = (gs: readonly ProgressCounterGroup[]): DiagnosisPart[] => {
    const out: DiagnosisPart[] = [];
    for (const g of gs.slice(0, MAX_OTHER_VALUES)) out.push(text('; '), who(g.ranks), text(`: ${g.value}`));
    if (gs.length > MAX_OTHER_VALUES) {
      const more = gs.length - MAX_OTHER_VALUES;
      out.push(text(`; ${more} more ${more === 1 ? 'value' : 'values'}`));
    }
    return out;
  };
  const unreadParts: DiagnosisPart[] = [
    name(s.expr),
    text(' could not be read as a number on '),
    who(unreadable),
  ];
  const parts: DiagnosisPart[] = [];
  if (least !== null) {
    parts.push(text('Least progressed: '), who(least.ranks), text(' ('), name(s.expr));
    parts.push(text(` = ${least.value}`), ...groupParts(others), text(')'));
    if (unreadable.length > 0) {
      const its = unreadable.length === 1 ? 'its' : 'their';
      parts.push(text('; '), ...unreadParts, text(`: ${its} progress is unknown`));
    }
  } else {
    parts.push(text('Progress unknown: '), ...unreadParts);
    const rest = groupParts(numbers);
    // "(ranks 0-2: 42)": what the readable ranks read, the separator of the first group dropped.
    if (rest.length > 0) parts.push(text(' ('), ...rest.slice(1), text(')'));
  }
  const about = least !== null ? [...least.ranks] : unreadable;
  return { expr: s.expr, frame: s.frame, least, others, unreadable, line: line(about, parts) };
}
