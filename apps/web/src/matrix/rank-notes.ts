// What the matrix knows about ranks beyond their queues, for its hatching, axis marks and
// tooltips: which ranks were not read, the odd ranks out and the outliers the model names
// (analysis/history.ts, analysis/cycle-marks.ts). Pure, so it is tested without a canvas.
import { expandRanks, outlierWhy, type RankMarks } from '@mqd/model';

/** At most this many ranks of each kind of axis mark (the model names at most 16 outliers). */
const MAX_AXIS_MARKS = 4096;

/** What the matrix knows about ranks beyond their queues: not read, odd out, outliers. */
export interface RankNotes {
  /** 1 for each world rank not read (null when all were). */
  readonly notRead: Uint8Array | null;
  readonly oddOut: readonly number[];
  readonly outliers: readonly number[];
  /** Tooltip lines per marked rank. */
  readonly why: ReadonlyMap<number, string[]>;
}

/** `unread`: the world ranks that were not read (SnapshotFacts.notRead). */
export function rankNotes(unread: readonly number[], worldSize: number, marks: RankMarks | null): RankNotes {
  let notRead: Uint8Array | null = null;
  for (const r of unread) {
    if (r >= worldSize) continue;
    notRead ??= new Uint8Array(worldSize);
    notRead[r] = 1;
  }
  const why = new Map<number, string[]>();
  const add = (r: number, text: string) => {
    const list = why.get(r);
    if (list) list.push(text);
    else why.set(r, [text]);
  };
  const oddOut: number[] = [];
  for (const m of marks?.oddOut ?? []) {
    for (const r of expandRanks(m.ranks) ?? []) {
      if (oddOut.length >= MAX_AXIS_MARKS) break;
      oddOut.push(r);
      add(r, `odd rank out: ${m.why}`);
    }
  }
  const outliers = (expandRanks(marks?.outliers ?? '') ?? []).slice(0, MAX_AXIS_MARKS);
  const outlierText = `outlier: ${outlierWhy('a queue shape', worldSize)}`;
  for (const r of outliers) add(r, outlierText);
  return { notRead, oddOut, outliers, why };
}
