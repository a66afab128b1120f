// The pieces a diagnosis line is made of (DiagnosisPart) and the small makers every line uses:
// text, a name from the job (neutralised), a rank or a frame as a link, a place "a.c:31".
import { type UserFrame, userFrame } from '../mpi/frames.js';
import { jobText, quoteName } from '../text.js';
import { compressRanks } from './ranges.js';
import type { SnapshotIndex } from './snapshot-index.js';

/** A frame of one rank: the thread and its depth (0 = innermost), as in RankSnapshot.threads. */
export interface FrameRef {
  readonly tid: number;
  readonly index: number;
}

/**
 * One piece of a diagnosis line. `name` is text from the job (already neutralised by jobText;
 * `quoted` when it must show between quotes in a sentence); `rank`, `ranks`, `frame` and `cell`
 * are the places a view links to.
 */
export type DiagnosisPart =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'name'; readonly text: string; readonly quoted: boolean }
  | { readonly kind: 'rank'; readonly text: string; readonly rank: number; readonly frame: FrameRef | null }
  | { readonly kind: 'ranks'; readonly text: string; readonly ranks: string }
  | { readonly kind: 'frame'; readonly text: string; readonly rank: number; readonly frame: FrameRef }
  | { readonly kind: 'cell'; readonly text: string; readonly row: number; readonly col: number };

export interface DiagnosisLine {
  /** The ranks the line is about, as ranges. */
  readonly ranks: string;
  readonly rankCount: number;
  readonly parts: DiagnosisPart[];
  /** The parts as plain text (names quoted as quoteName does). */
  readonly text: string;
}

/** The text of parts: names quoted (when not one plain token) as quoteName writes them. */
export function partsText(parts: readonly DiagnosisPart[]): string {
  return parts.map((p) => (p.kind === 'name' && p.quoted ? `\u201c${p.text}\u201d` : p.text)).join('');
}

export function line(ranks: number[], parts: DiagnosisPart[]): DiagnosisLine {
  return { ranks: compressRanks(ranks), rankCount: ranks.length, parts, text: partsText(parts) };
}

export const text = (t: string): DiagnosisPart => ({ kind: 'text', text: t });

export function name(raw: string): DiagnosisPart {
  const t = jobText(raw);
  return { kind: 'name', text: t, quoted: quoteName(raw) !== t };
}

export function basename(p: string): string {
  const i = p.lastIndexOf('/');
  return i < 0 ? p : p.slice(i + 1);
}

/** "wrong_tag.c:36", or the function when the frame has no line ("main"). */
export function placeText(f: UserFrame): string {
  const fr = f.frame;
  if (fr.file === null) return jobText(fr.function ?? '??');
  return `${jobText(basename(fr.file))}${fr.line === null ? '' : `:${fr.line}`}`;
}

export function commName(raw: string): DiagnosisPart {
  return raw === '' ? text('an unnamed communicator') : name(raw);
}

export function rankLink(ix: SnapshotIndex, rank: number, label: string): DiagnosisPart {
  const pos = ix.idxOf(rank);
  const r = ix.snap.ranks[pos];
  const u = r === undefined ? null : userFrame(r);
  return { kind: 'rank', text: label, rank, frame: u === null ? null : { tid: u.tid, index: u.index } };
}

/** "a.c:31" for a rank's user frame as a link, or null without stacks. */
export function placePart(ix: SnapshotIndex, rank: number): DiagnosisPart | null {
  const r = ix.snap.ranks[ix.idxOf(rank)];
  const u = r === undefined ? null : userFrame(r);
  return u === null
    ? null
    : { kind: 'frame', text: placeText(u), rank, frame: { tid: u.tid, index: u.index } };
}

export function capitalRank(p: DiagnosisPart): DiagnosisPart {
  return { ...p, text: p.text.charAt(0).toUpperCase() + p.text.slice(1) };
}
