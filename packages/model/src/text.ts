// Text built from what a job names. Communicator, function and file names, executables, hosts
// and the DLL's own strings come from the job's memory and binaries: a user controls them. Put
// into a sentence as they are, "x. VERDICT: NO DEADLOCK" plus a right-to-left override would read
// as part of the verdict. Everything that writes such a name into text goes through jobText (or
// quoteName where the name sits inside a sentence); views render the quoted part isolated.

/** Longest name kept, in code points; longer ones end in an ellipsis. */
export const MAX_NAME_CHARS = 96;

/**
 * Characters that change how the text around them reads rather than adding a visible glyph:
 * controls (C0, DEL, C1: Cc), format characters (bidi embeddings, overrides and isolates
 * U+202A-202E and U+2066-2069, LRM/RLM, ALM U+061C, zero-width space/joiners, BOM, soft hyphen:
 * Cf), line and paragraph separators (U+2028/2029) and lone surrogates.
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/** The quotes quoteName puts around a name; inside a name they become plain '"'. */
export const NAME_OPEN = '\u201c';
export const NAME_CLOSE = '\u201d';
const CURLY = /[\u201c\u201d]/g;

/** A name that reads as one token in any sentence: no spaces, no sentence punctuation. */
const PLAIN = /^[A-Za-z0-9_.][A-Za-z0-9_.+-]*$/;

function escapeChar(c: string): string {
  const cp = c.codePointAt(0) ?? 0;
  return `\\u${cp.toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * A job-supplied string made safe to show as text: every invisible or direction-changing
 * character written out as `\uXXXX` (visible, so the trick shows), our name quotes made plain,
 * and at most `max` code points (the rest cut, ending in "…").
 */
export function jobText(s: string, max = MAX_NAME_CHARS): string {
  const shown = s.replace(INVISIBLE, escapeChar).replace(CURLY, '"');
  // Code points, not UTF-16 units: a cut never splits a surrogate pair.
  const cps = Array.from(shown);
  return cps.length <= max ? shown : `${cps.slice(0, Math.max(0, max - 1)).join('')}\u2026`;
}

/**
 * A job-supplied name for use inside a sentence: neutralised (jobText), and quoted (“x”) unless
 * it is one plain token such as MPI_COMM_WORLD or wrong_tag.c, which cannot read as words of
 * the sentence around it. Views split text on the quotes to isolate the name (see splitNames).
 */
export function quoteName(s: string, max = MAX_NAME_CHARS): string {
  const t = jobText(s, max);
  return PLAIN.test(t) ? t : `${NAME_OPEN}${t}${NAME_CLOSE}`;
}

/** One piece of a text: the model's own words, or a job-supplied name quoteName quoted. */
export interface TextPiece {
  readonly text: string;
  readonly name: boolean;
}

/**
 * Text built with quoteName, split into the model's words and the quoted names (without their
 * quotes), so a view can isolate each name (`<bdi>`) between visible quotes. jobText turns
 * quotes inside names into '"', so every “…” pair in such text is one name.
 */
export function splitNames(text: string): TextPiece[] {
  const out: TextPiece[] = [];
  const re = /\u201c([^\u201c\u201d]*)\u201d/g;
  let last = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (m.index > last) out.push({ text: text.slice(last, m.index), name: false });
    out.push({ text: m[1] ?? '', name: true });
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push({ text: text.slice(last), name: false });
  return out;
}

/** Range lists longer than this many runs name the first few and count the rest. */
const MAX_RUNS_SHOWN = 8;

/**
 * A set of ranks in words, from a range list (compressRanks): "rank 3", "ranks 0-2, 5",
 * "even ranks 0-510", "odd ranks 1-15", "every 4th rank from 0 to 60", and past
 * MAX_RUNS_SHOWN runs "ranks 0, 3, 7, ... and 120 more ranks". The one rank-set phrase of the
 * model, the CLI and the dashboard.
 */
export function ranksPhrase(ranges: string): string {
  const runs: [number, number][] = [];
  for (const part of ranges.split(',')) {
    const m = /^\s*(\d+)(?:-(\d+))?\s*$/.exec(part);
    if (m === null) return `ranks ${jobText(ranges)}`;
    const lo = Number(m[1]);
    runs.push([lo, m[2] === undefined ? lo : Number(m[2])]);
  }
  const first = runs[0];
  if (first === undefined) return 'no ranks';
  if (runs.length === 1 && first[0] === first[1]) return `rank ${first[0]}`;
  const stride = strideOf(runs);
  if (stride !== null) {
    const [lo, hi] = [first[0], runs.at(-1)?.[0] ?? first[0]];
    if (stride === 2) return `${lo % 2 === 0 ? 'even' : 'odd'} ranks ${lo}-${hi}`;
    return `every ${ordinal(stride)} rank from ${lo} to ${hi}`;
  }
  const text = (r: [number, number]) => (r[0] === r[1] ? `${r[0]}` : `${r[0]}-${r[1]}`);
  if (runs.length <= MAX_RUNS_SHOWN) return `ranks ${runs.map(text).join(', ')}`;
  const shown = runs.slice(0, MAX_RUNS_SHOWN - 2);
  let rest = 0;
  for (const r of runs.slice(shown.length)) rest += r[1] - r[0] + 1;
  return `ranks ${shown.map(text).join(', ')} and ${rest.toLocaleString('en-US')} more`;
}

/** The common step of at least 3 single ranks in steps greater than 1, else null. */
function strideOf(runs: readonly [number, number][]): number | null {
  if (runs.length < 3 || runs.some((r) => r[0] !== r[1])) return null;
  const d = (runs[1]?.[0] ?? 0) - (runs[0]?.[0] ?? 0);
  if (d < 2) return null;
  for (let i = 2; i < runs.length; i++) if ((runs[i]?.[0] ?? 0) - (runs[i - 1]?.[0] ?? 0) !== d) return null;
  return d;
}

function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${suffix}`;
}

/** Whether a range list names more than one rank (for verb agreement: "waits" / "wait"). */
export function manyRanks(ranges: string): boolean {
  return /[-,]/.test(ranges);
}
