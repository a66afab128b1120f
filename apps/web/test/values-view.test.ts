// The Values view rendered to static markup (node, no DOM) on a real recorded snapshot whose
// ranks carry values: the outlier first in words ("rank 3: 4 (the others: 5)"), each rank a
// link to its rank detail, the groups, the sparkline for numbers, the coded failure; the URL
// key `ev` that keeps the expressions in share links; 16,384 ranks drawn within a second.
import { readFileSync } from 'node:fs';
import type { JobSnapshot, RankSnapshot, RankValue } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { localSnapshot } from '../src/data.js';
import { DEFAULT_STATE, formatUrl, parseUrl, shareStateOf, type UrlState } from '../src/url-state.js';
import { ValuesView } from '../src/values/ValuesView.js';

const golden = (mpi: string, fixture: string): JobSnapshot =>
  JSON.parse(
    readFileSync(`${import.meta.dirname}/../../../fixtures/golden/${mpi}/${fixture}.snapshot.json`, 'utf8'),
  ) as JobSnapshot;

/** The snapshot with `values(rank)` on every rank. */
function withValues(s: JobSnapshot, values: (r: RankSnapshot) => RankValue[]): JobSnapshot {
  return { ...s, ranks: s.ranks.map((r) => ({ ...r, values: values(r) })) };
}

const step = (r: RankSnapshot, behind: number): RankValue => {
  const n = r.rank === behind ? 4 : 5;
  return { expr: 'step_counter', frame: 'exchange', value: { text: String(n), type: 'int', number: n } };
};
const missing: RankValue = {
  expr: 'scratch',
  frame: 'exchange',
  error: { code: 'MQD_E_EVAL_OPTIMIZED_OUT', message: 'scratch is optimized out at this point' },
};

function render(snapshot: JobSnapshot, url: Partial<UrlState> = {}): string {
  return renderToStaticMarkup(
    createElement(ValuesView, {
      api: {} as Api,
      url: { ...DEFAULT_STATE, view: 'values' as const, ...url },
      setUrl: () => {},
      data: localSnapshot(`t:${snapshot.takenAt}:${snapshot.ranks.length}`, snapshot, true),
    }),
  );
}

const text = (html: string) => html.replace(/<[^>]+>/g, '').replace(/&gt;/g, '>');

describe('Values view', () => {
  it('shows the rank behind first, in words, linked to its rank detail; then the groups and failures', () => {
    const s = withValues(golden('openmpi', 'wrong_tag'), (r) => [step(r, 3), missing]);
    const html = render(s);
    const t = text(html);
    expect(t).toContain('rank 3: 4 (the others: 5)');
    expect(t).toContain('ranks 0-2: 5');
    expect(t).toContain('step_counter in exchange');
    expect(t).toContain('min 4 (rank 3), max 5 (ranks 0-2)');
    // The outlier's line is a link to rank 3's detail.
    expect(html).toMatch(/<a href="\/\?view=rank[^"]*rank=3"[^>]*data-rank="3">rank 3: 4/);
    expect(html).toContain('data-testid="value-spark"');
    // A failure on every rank reads as its coded message, once for all.
    expect(t).toContain('Every rank: MQD_E_EVAL_OPTIMIZED_OUT: scratch is optimized out at this point');
    // The outliers come before the groups.
    expect(t.indexOf('rank 3: 4')).toBeLessThan(t.indexOf('ranks 0-2: 5'));
    // A demo or shared page cannot take a snapshot, and says so.
    expect(html).toMatch(/data-testid="values-take" disabled=""/);
  });

  it('says when the snapshot read no expressions', () => {
    expect(text(render(golden('openmpi', 'wrong_tag')))).toContain('This snapshot read no expressions.');
  });

  it('keeps the expressions in the URL and in share links; drops what the server would refuse', () => {
    const ev = [
      { expr: 'st->prog->step', frame: 'solve' },
      { expr: 'a[0:4]', frame: null },
    ];
    const s = { ...DEFAULT_STATE, view: 'values' as const, ev };
    const { pathname, search } = formatUrl(s);
    expect(search).toBe('?view=values&ev=st-%3Eprog-%3Estep%40solve&ev=a%5B0%3A4%5D');
    expect(parseUrl(pathname, search).ev).toEqual(ev);
    const shared = formatUrl(shareStateOf(s, 'abc'));
    expect(parseUrl(shared.pathname, shared.search).ev).toEqual(ev);
    const bad = `?view=values&ev=${encodeURIComponent('x'.repeat(257))}&ev=h%C3%B6he&ev=ok&ev=a%0Ab`;
    expect(parseUrl('/', bad).ev).toEqual([{ expr: 'ok', frame: null }]);
    const many = Array.from({ length: 12 }, (_, i) => `ev=v${i}`).join('&');
    expect(parseUrl('/', `?${many}`).ev).toHaveLength(8);
  });

  it('draws 16,384 ranks within a second, the one rank behind first', () => {
    const base = golden('openmpi', 'wrong_tag');
    const r0 = base.ranks[0] as RankSnapshot;
    const ranks = Array.from({ length: 16_384 }, (_, rank) => ({
      ...r0,
      rank,
      pid: 1000 + rank,
      values: [step({ ...r0, rank }, 9000)],
    }));
    const t0 = performance.now();
    const html = render({ ...base, ranks });
    const ms = performance.now() - t0;
    expect(text(html)).toContain('rank 9000: 4 (the others: 5)');
    expect((html.match(/<rect/g) ?? []).length).toBeLessThanOrEqual(128);
    expect(ms).toBeLessThan(1000);
  });
});
