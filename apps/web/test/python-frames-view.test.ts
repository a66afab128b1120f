// The Stacks view and the rank view on a real mpi4py snapshot (fixtures/python/wrong_tag.snapshot.json:
// wrong_tag.py on 2 ranks, Open MPI 4.1.4, Debian's python3 3.11), rendered to static markup: the
// Python frames are marked Python at their file:line, in place of the interpreter's frames, which
// the rank view folds (counted); a link to the evaluation-loop frame selects its Python frame.
import { readFileSync } from 'node:fs';
import { type JobSnapshot, mixedFrames } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { localSnapshot } from '../src/data.js';
import { RankView } from '../src/rank/RankView.js';
import { StacksView } from '../src/stacks/StacksView.js';
import { computeStackTree } from '../src/stacks/stack-tree.js';
import { DEFAULT_STATE, frameParam, type UrlState } from '../src/url-state.js';

const FIXTURES = `${import.meta.dirname}/../../../fixtures/python`;
const snapshot = (): JobSnapshot =>
  JSON.parse(readFileSync(`${FIXTURES}/wrong_tag.snapshot.json`, 'utf8')) as JobSnapshot;
const LINES = readFileSync(`${FIXTURES}/wrong_tag.py`, 'utf8').split('\n');
const marker = (tag: string) => LINES.findIndex((l) => l.endsWith(`# MQD_LINE ${tag}`)) + 1;

function render(view: typeof StacksView, s: JobSnapshot, url: Partial<UrlState>): string {
  return renderToStaticMarkup(
    createElement(view, {
      api: {} as Api,
      url: { ...DEFAULT_STATE, ...url },
      setUrl: () => {},
      data: localSnapshot(`py:${s.takenAt}`, s, true),
    }),
  );
}

/** What a person reads: cells apart, tags gone, entities decoded. */
const text = (html: string) =>
  html
    .replace(/<\/(td|th|p|div|span)>/g, ' ')
    .replace(/<[^>]+>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ')
    .trim();
const attr = (tag: string, name: string) => new RegExp(`${name}="([^"]*)"`).exec(tag)?.[1];

describe('Python frames in the views', () => {
  it('Stacks view: wait_for_left at its recv line, marked Python, above PMPI_Recv; no interpreter row', () => {
    const s = snapshot();
    const tree = computeStackTree(s, 'main');
    if ('failed' in tree) throw new Error(tree.failed);
    const html = render(StacksView, s, { view: 'stacks' });
    const rows = html.match(/<div[^>]*data-testid="stack-node"[^>]*>/g) ?? [];
    const py = rows.filter((r) => attr(r, 'data-python') === 'true');
    expect(py.map((r) => [attr(r, 'data-function'), attr(r, 'data-place')])).toEqual([
      ['wait_for_left', `wrong_tag.py:${marker('recv')}`],
    ]);
    expect(attr(py[0] ?? '', 'aria-label')).toMatch(
      /^Python frame wait_for_left at wrong_tag\.py:\d+, \(and 5 frames/,
    );
    const fns = rows.map((r) => attr(r, 'data-function'));
    expect(fns[fns.indexOf('wait_for_left') + 1]).toBe('PMPI_Recv');
    expect(text(html)).toContain(`wait_for_left wrong_tag.py:${marker('recv')} Python`);
    expect(fns.filter((f) => /_PyEval|^_?Py[A-Z]|__pyx/.test(f ?? ''))).toEqual([]);
  });

  it('rank view: the mixed stack with Python marks, the interpreter folded, the link to the eval frame selects the Python frame', () => {
    const s = snapshot();
    const r0 = s.ranks[0];
    const t = r0?.threads?.find((x) => x.main);
    if (!r0 || !t) throw new Error('rank 0 has no main thread');
    const evalAt = t.frames.findIndex((f) => f.function === '_PyEval_EvalFrameDefault');
    expect(evalAt).toBeGreaterThan(0);
    const html = render(RankView as typeof StacksView, s, {
      view: 'rank',
      rank: 0,
      frame: frameParam({ tid: t.tid, index: evalAt }),
    });
    const rows = [...html.matchAll(/<tr ([^>]*)>(.*?)<\/tr>/g)].filter((m) =>
      /data-testid="rank-frame/.test(m[1] ?? ''),
    );
    const row = (m: RegExpMatchArray) => text(m[2] ?? '').replace(/^\d+ /, '');
    const py = rows.filter((m) => /data-python="true"/.test(m[1] ?? '')).map(row);
    expect(py).toEqual([
      `wait_for_left wrong_tag.py:${marker('recv')} Python`,
      `step wrong_tag.py:${marker('step')} Python`,
      `main wrong_tag.py:${marker('main')} Python`,
      `<module> wrong_tag.py:${marker('main') + 3} Python`,
    ]);
    const selected = rows.filter((m) => /data-testid="rank-frame-selected"/.test(m[1] ?? ''));
    expect(selected.map(row)).toEqual([py[0]]);
    expect(rows.map((m) => text(m[2] ?? '')).join('\n')).not.toMatch(/_PyEval|python3\.11|MPI\.cpython/);
    const folded = t.frames.length - mixedFrames(t).python.filter((p) => !p).length;
    expect(text(html)).toContain(`${folded} frames of the Python interpreter and mpi4py folded.`);
    // The excerpt is the .py file's line.
    expect(text(html)).toContain(LINES[marker('recv') - 1]?.trim().replace(/\s+/g, ' '));
  });
});
