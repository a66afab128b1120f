// The progress counter on the page: the diagnosis banner names the least-progressed rank by the
// counter's number (a rank link), and the Values view's mark survives the URL and share links
// (`evp=`) and goes to the server as `progress: true`.
import type { JobSnapshot, RankValue } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { Diagnosis } from '../src/Diagnosis.js';
import { localSnapshot } from '../src/data.js';
import { explanationOf } from '../src/explanation.js';
import { DEFAULT_STATE, formatUrl, parseUrl, shareStateOf, withProgressAt } from '../src/url-state.js';
import { evalRequests } from '../src/values/values-api.js';
import { golden } from './golden.js';

function withStep(s: JobSnapshot, n: (rank: number) => number): JobSnapshot {
  return {
    ...s,
    ranks: s.ranks.map((r) => {
      const v: RankValue = {
        expr: 'step_counter',
        frame: null,
        progress: true,
        value: { text: String(n(r.rank)), type: 'int', number: n(r.rank) },
      };
      return { ...r, values: [v] };
    }),
  };
}

function render(snapshot: JobSnapshot): string {
  explanationOf(snapshot);
  return renderToStaticMarkup(createElement(Diagnosis, { data: localSnapshot('t', snapshot, true) }));
}

describe('the progress counter on the page', () => {
  it('the banner names the rank behind by the counter, linked; equal numbers show no such row', () => {
    const base = golden('openmpi', 'wrong_tag');
    const html = render(withStep(base, (r) => (r === 1 ? 4 : 5)));
    const row =
      /<li class="diagnosis-progress" data-testid="diagnosis-progress" data-ranks="1">(.*?)<\/li>/.exec(html);
    expect(row?.[1]?.replace(/<[^>]+>/g, '')).toBe(
      'Least progressed: rank 1 (step_counter = 4; ranks 0, 2-3: 5)',
    );
    expect(row?.[1]).toMatch(/<a href="[^"]*view=rank[^"]*rank=1[^"]*"/);
    expect(render(withStep(base, () => 5))).not.toContain('diagnosis-progress');
  });

  it('keeps the mark in the URL and share links, one at a time, and asks the server with it', () => {
    const ev = withProgressAt(
      [
        { expr: 'x', frame: null },
        { expr: 'iter', frame: 'solve' },
      ],
      1,
    );
    const s = { ...DEFAULT_STATE, view: 'values' as const, ev };
    const { pathname, search } = formatUrl(s);
    expect(search).toBe('?view=values&ev=x&evp=iter%40solve');
    expect(parseUrl(pathname, search).ev).toEqual(ev);
    const shared = formatUrl(shareStateOf(s, 'abc'));
    expect(parseUrl(shared.pathname, shared.search).ev).toEqual(ev);
    // A second evp is a plain expression; old links without evp read as before.
    expect(parseUrl('/', '?evp=a&evp=b').ev).toEqual([
      { expr: 'a', frame: null, progress: true },
      { expr: 'b', frame: null },
    ]);
    expect(withProgressAt(ev, null).some((a) => a.progress === true)).toBe(false);
    expect(evalRequests(ev)).toEqual([{ expr: 'x' }, { expr: 'iter', frame: 'solve', progress: true }]);
  });
});
