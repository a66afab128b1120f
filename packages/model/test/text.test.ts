// Names from the job are untrusted text: a communicator named
// "x. VERDICT: NO DEADLOCK" with a right-to-left override must not read as part of the verdict.
import {
  explainSnapshot,
  formatExplanation,
  type JobSnapshot,
  jobText,
  quoteName,
  ranksPhrase,
  splitNames,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { type GoldenFixture, golden } from './golden.js';

const SPOOF = 'x. VERDICT: NO DEADLOCK\u202e\u2066kcolbdaed\u2069\u200b';
const BIDI = /[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u200b-\u200d\u2028\u2029\p{Cc}]/u;

/** A real recorded snapshot whose MPI_COMM_WORLD the job renamed (MPI_Comm_set_name) to `name`. */
function renamedWorld(fixture: GoldenFixture, name: string): JobSnapshot {
  const s = golden('openmpi', fixture);
  return {
    ...s,
    ranks: s.ranks.map((r) => ({
      ...r,
      communicators: r.communicators.map((c) => (c.world === true ? { ...c, name } : c)),
    })),
  };
}

describe('job text', () => {
  it('writes bidi, control and zero-width characters out visibly', () => {
    expect(jobText('a\u202eb\u2067c\u200fd\u061ce\u0007f\u0085g\u2028h\u200bi\ufeffj')).toBe(
      'a\\u202Eb\\u2067c\\u200Fd\\u061Ce\\u0007f\\u0085g\\u2028h\\u200Bi\\uFEFFj',
    );
    expect(jobText('MPI_COMM_WORLD')).toBe('MPI_COMM_WORLD');
    expect(jobText('名前 ü')).toBe('名前 ü');
  });

  it('caps long names with an ellipsis, by code points', () => {
    expect(jobText('a'.repeat(200))).toBe(`${'a'.repeat(95)}\u2026`);
    expect(Array.from(jobText('😀'.repeat(100), 10))).toHaveLength(10);
  });

  it('quotes names that are not one plain token; quotes inside a name cannot close ours', () => {
    expect(quoteName('MPI_COMM_WORLD')).toBe('MPI_COMM_WORLD');
    expect(quoteName('wrong_tag.c')).toBe('wrong_tag.c');
    expect(quoteName('x. VERDICT')).toBe('\u201cx. VERDICT\u201d');
    expect(quoteName('a\u201d VERDICT \u201cb')).toBe('\u201ca" VERDICT "b\u201d');
    expect(splitNames(`on ${quoteName('a\u201d b')} now`)).toEqual([
      { text: 'on ', name: false },
      { text: 'a" b', name: true },
      { text: ' now', name: false },
    ]);
  });

  it('a spoofing communicator name is quoted and neutralised in every sentence of the explanation', () => {
    for (const fixture of ['collective_mismatch', 'wrong_tag'] as const) {
      const e = explainSnapshot(renamedWorld(fixture, SPOOF));
      const texts = [
        e.summary,
        e.headline,
        e.lead,
        ...formatExplanation(e).split('\n'),
        ...e.diagnosis.groups.map((g) => g.text),
      ];
      // In the lines a view links, the name is one isolated part, never the model's words.
      for (const g of e.diagnosis.groups) {
        for (const p of g.parts) if (p.kind !== 'name') expect(p.text).not.toContain('VERDICT');
        expect(g.parts.some((p) => p.kind === 'name' && p.quoted && p.text.startsWith('x. VERDICT'))).toBe(
          true,
        );
      }
      for (const t of texts) expect(t).not.toMatch(BIDI);
      expect(e.summary).toContain('\u201cx. VERDICT: NO DEADLOCK\\u202E\\u2066kcolbdaed\\u2069\\u200B\u201d');
      // The name never stands bare in a sentence: every occurrence sits inside our quotes.
      for (const t of texts) {
        const bare = splitNames(t)
          .filter((p) => !p.name)
          .some((p) => p.text.includes('VERDICT'));
        expect(bare).toBe(false);
      }
    }
    const mismatch = explainSnapshot(renamedWorld('collective_mismatch', SPOOF));
    expect(mismatch.headline).toBe(
      'Collective hang on \u201cx. VERDICT: NO DEADLOCK\\u202E\\u2066kcolbdaed\\u2069\\u200B\u201d',
    );
  });
});

describe('rank sets in words', () => {
  it('compresses runs, strides and long lists', () => {
    expect(ranksPhrase('3')).toBe('rank 3');
    expect(ranksPhrase('0-2,5')).toBe('ranks 0-2, 5');
    const even = Array.from({ length: 256 }, (_, i) => 2 * i).join(',');
    expect(ranksPhrase(even)).toBe('even ranks 0-510');
    expect(ranksPhrase('1,3,5,7')).toBe('odd ranks 1-7');
    expect(ranksPhrase('0,4,8,12')).toBe('every 4th rank from 0 to 12');
    expect(ranksPhrase('0,3,7,9,11,20,22,30,31-40,50')).toBe('ranks 0, 3, 7, 9, 11, 20 and 13 more');
  });
});
