// The rank view leads with the rank's sentence and its source excerpt, over
// real golden snapshots: the sentence names call, peer, tag, communicator and line; the
// excerpt shows the line highlighted, as text only; "source not readable" with the reason
// otherwise; caveats only when they apply; the library's quiet communicators folded.
import type { JobSnapshot, RankSnapshot, SourceExcerpt } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { localSnapshot } from '../src/data.js';
import { RankView } from '../src/rank/RankView.js';
import { DEFAULT_STATE } from '../src/url-state.js';
import { fixtureSource, golden } from './golden.js';

const render = (snapshot: JobSnapshot, rank = 0) =>
  renderToStaticMarkup(
    createElement(RankView, {
      api: {} as Api,
      url: { ...DEFAULT_STATE, view: 'rank', rank },
      setUrl: () => {},
      data: localSnapshot(`summary-${Math.random()}`, snapshot, true),
    }),
  );

/** The snapshot with `sources` on rank `rankNo` (as a reader of this issue writes them). */
function withSources(s: JobSnapshot, rankNo: number, sources: SourceExcerpt[]): JobSnapshot {
  return {
    ...s,
    ranks: s.ranks.map((r): RankSnapshot => (r.rank === rankNo ? { ...r, sources } : r)),
  };
}

const userFile = (s: JobSnapshot) =>
  s.ranks[0]?.threads?.find((t) => t.main)?.frames.find((f) => f.file?.endsWith('/wrong_tag.c'))?.file ?? '';

const text = (html: string) =>
  html
    .replace(/<[^>]*>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .replace(/&quot;/g, '"')
    .replace(/&#x27;/g, "'");

describe('rank summary', () => {
  it('leads with the sentence, then the excerpt with line 36 highlighted (Open MPI wrong_tag)', () => {
    const s = golden('openmpi', 'wrong_tag');
    const file = userFile(s);
    const src = fixtureSource('wrong_tag.c').split('\n');
    const lines = src.slice(29, 42);
    const html = render(withSources(s, 0, [{ file, line: 36, first: 30, lines }]));
    const sentence = /data-testid="rank-sentence"[^>]*>(.*?)<\/p>/.exec(html)?.[1] ?? '';
    expect(text(sentence)).toBe(
      'Rank 0 waits in MPI_Recv for a message from rank 1, tag 99, on MPI_COMM_WORLD, at wrong_tag.c:36 in main',
    );
    // The sentence comes before the facts table.
    expect(html.indexOf('rank-sentence')).toBeLessThan(html.indexOf('rank-facts'));
    const current = /data-testid="rank-source-line"[^>]*>(.*?)\n/.exec(html)?.[1] ?? '';
    expect(text(current)).toBe(`36${src[35]}`);
    expect(html).toContain('aria-current="location"');
    // ob1 job: no ucx caveat.
    expect(html).not.toMatch(/ucx/);
  });

  it('shows source text as text, never as markup', () => {
    const s = golden('openmpi', 'wrong_tag');
    const html = render(
      withSources(s, 0, [
        { file: userFile(s), line: 36, first: 36, lines: ['<img src=x onerror=alert(1)>'] },
      ]),
    );
    expect(html).not.toContain('<img');
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
  });

  it('says why the source is not readable, or that it was not read', () => {
    const s = golden('openmpi', 'wrong_tag');
    const html = render(
      withSources(s, 0, [{ file: userFile(s), line: 36, unreadable: 'is not readable by uid 1000' }]),
    );
    const why = /data-testid="rank-source-unreadable"[^>]*>(.*?)<\/p>/.exec(html)?.[1] ?? '';
    expect(text(why)).toBe(`Source not readable: ${userFile(s)} is not readable by uid 1000.`);
    expect(text(/data-testid="rank-source-unreadable"[^>]*>(.*?)<\/p>/.exec(render(s))?.[1] ?? '')).toBe(
      'Source not readable: wrong_tag.c:36 was not read with this snapshot.',
    );
  });

  it("rank 2 borrows rank 0's excerpt of the same place on the same host", () => {
    const s = golden('mpich', 'wrong_tag');
    const file = s.ranks[1]?.threads
      ?.find((t) => t.main)
      ?.frames.find((f) => f.file?.endsWith('/wrong_tag.c'))?.file;
    const src = fixtureSource('wrong_tag.c').split('\n');
    const html = render(
      withSources(s, 1, [{ file: file ?? '', line: 47, first: 41, lines: src.slice(40, 53) }]),
      2,
    );
    expect(text(/data-testid="rank-source-line"[^>]*>(.*?)\n/.exec(html)?.[1] ?? '')).toBe(`47${src[46]}`);
  });

  it("folds MPICH's own communicators and MPI_COMM_SELF under a toggle", () => {
    const s = golden('mpich', 'wrong_tag');
    const html = render(s);
    const folded = html.slice(html.indexOf('data-testid="rank-comms-folded"'));
    expect(html.indexOf('data-testid="rank-comms-folded"')).toBeGreaterThan(html.indexOf('MPI_COMM_WORLD'));
    expect(folded).toContain('MPI_COMM_SELF');
    expect(folded).toContain('MPI_ICOMM_WORLD');
    expect(text(/<summary>(.*?)<\/summary>/.exec(folded)?.[1] ?? '')).toMatch(
      /^6 more communicators with nothing/,
    );
  });
});
