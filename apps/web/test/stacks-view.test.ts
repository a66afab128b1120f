// The Stacks view rendered to static markup (node, no DOM): what a person reads on a real
// recorded wrong_tag snapshot (two stacks, main's two lines), the tree pattern's attributes
// (one tab stop, levels, folded MPI calls), and the runtime's threads hidden with a count. The
// keys themselves are driven in e2e/test/stacks.e2e.test.ts.
import { readFileSync } from 'node:fs';
import { type JobSnapshot, syntheticStacksJob } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { localSnapshot } from '../src/data.js';
import { StacksView } from '../src/stacks/StacksView.js';
import { computeStackTree } from '../src/stacks/stack-tree.js';
import { DEFAULT_STATE, type UrlState } from '../src/url-state.js';

const golden = (mpi: string, fixture: string): JobSnapshot =>
  JSON.parse(
    readFileSync(`${import.meta.dirname}/../../../fixtures/golden/${mpi}/${fixture}.snapshot.json`, 'utf8'),
  ) as JobSnapshot;

/** The markup once the tree is computed (the view shows it at once when it is cached). */
function render(snapshot: JobSnapshot, url: Partial<UrlState>): string {
  const u = { ...DEFAULT_STATE, view: 'stacks' as const, ...url };
  const tree = computeStackTree(snapshot, u.threads, { by: u.sby, hideRuntime: !u.srt });
  if ('failed' in tree) throw new Error(tree.failed);
  return renderToStaticMarkup(
    createElement(StacksView, {
      api: {} as Api,
      url: u,
      setUrl: () => {},
      data: localSnapshot(`t:${snapshot.takenAt}:${snapshot.ranks.length}`, snapshot, true),
    }),
  );
}

const rows = (html: string) => html.match(/<div[^>]*data-testid="stack-node"[^>]*>/g) ?? [];
const attr = (tag: string, name: string) => new RegExp(`${name}="([^"]*)"`).exec(tag)?.[1];
const text = (html: string) => html.replace(/<[^>]+>/g, '');

describe('Stacks view', () => {
  it.each(['openmpi', 'mpich42'])('%s wrong_tag: two distinct stacks, main at its two lines', (mpi) => {
    const s = golden(mpi, 'wrong_tag');
    const html = render(s, {});
    expect(text(html)).toContain('4 ranks, 2 distinct stacks (by line)');
    const mains = rows(html).filter((r) => attr(r, 'data-function') === 'main');
    expect(mains.map((r) => [attr(r, 'data-place'), attr(r, 'data-ranks')])).toEqual([
      ['wrong_tag.c:47', '1-3'],
      ['wrong_tag.c:36', '0'],
    ]);
    // Merged by function, one stack again.
    expect(text(render(s, { sby: 'function' }))).toContain('4 ranks, 1 distinct stack (by function)');
  });

  it('is a tree: one tab stop, levels and set positions, MPI calls folded', () => {
    const s = golden('openmpi', 'wrong_tag');
    const html = render(s, {});
    expect(html).toMatch(/role="tree"/);
    const r = rows(html);
    expect(r.every((x) => x.includes('role="treeitem"'))).toBe(true);
    expect(r.filter((x) => x.includes('tabindex="0"'))).toHaveLength(1);
    expect(r[0]).toContain('tabindex="0"');
    // The root chain (_start › __libc_start_main › __libc_start_call_main) is one row.
    expect(attr(r[0] ?? '', 'data-chain')).toBe('3');
    expect(attr(r[0] ?? '', 'aria-level')).toBe('1');
    expect(attr(r[0] ?? '', 'aria-expanded')).toBe('true');
    const calls = r.filter((x) => attr(x, 'data-kind') === 'mpi-call');
    expect(calls.length).toBe(2);
    for (const c of calls) expect(attr(c, 'aria-level')).toBe('3');
    expect(r.map((x) => attr(x, 'aria-posinset'))).toEqual(['1', '1', '1', '2', '1']);
  });

  it('hides the MPI runtime threads with threads "all", says how many, shows them on request', () => {
    const s = syntheticStacksJob({ ranks: 64, seed: 1 });
    const hidden = render(s, { threads: 'all' });
    expect(hidden).toMatch(/data-testid="stacks-runtime-threads"[^>]*data-count="8"[^>]*data-hidden="true"/);
    expect(text(hidden)).toContain(
      '8 MPI runtime threads hidden (progress and service threads of 8 ranks). Show them',
    );
    expect(rows(hidden).some((x) => attr(x, 'data-function') === 'progress_engine')).toBe(false);
    const shown = render(s, { threads: 'all', srt: true });
    expect(text(shown)).toContain('8 MPI runtime threads shown. Hide them');
    // The progress thread is one straight chain: clone3 › start_thread › progress_engine › poll.
    const chain = rows(shown).find((x) => attr(x, 'data-function') === 'poll');
    expect(chain && attr(chain, 'data-chain')).toBe('4');
    // Rank and thread counts per row: the root has 64 ranks and, with the progress threads, 72.
    expect(rows(hidden)[0]).toMatch(/data-count="64"[^>]*data-threads="64"/);
  });

  it('opens the rows down to a node selected from elsewhere', () => {
    const s = syntheticStacksJob({ ranks: 64, seed: 1, scenario: 'collective-mismatch' });
    const tree = computeStackTree(s, 'main');
    if ('failed' in tree) throw new Error(tree.failed);
    const inside = tree.nodes.find((n) => n.kind === 'mpi-inside');
    if (inside === undefined) throw new Error('no frame inside MPI');
    const folded = rows(render(s, {}));
    expect(folded.some((x) => attr(x, 'data-kind') === 'mpi-inside')).toBe(false);
    const open = rows(render(s, { snode: inside.id }));
    const selected = open.filter((x) => / selected"/.test(x));
    expect(selected.map((x) => attr(x, 'data-kind'))).toEqual(['mpi-inside']);
  });
});
