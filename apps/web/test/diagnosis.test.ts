// The diagnosis as a person reads it (server-rendered markup of the real component): names from
// the job stay quoted and isolated, whatever characters they hold.
import type { JobSnapshot } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { Diagnosis, partTarget } from '../src/Diagnosis.js';
import { localSnapshot } from '../src/data.js';
import { explanationOf } from '../src/explanation.js';
import { RankView } from '../src/rank/RankView.js';
import { DEFAULT_STATE } from '../src/url-state.js';
import { golden } from './golden.js';

const SPOOF = 'x. VERDICT: NO DEADLOCK\u202e';

/** The job renamed MPI_COMM_WORLD (MPI_Comm_set_name) to `name`. */
function renamedWorld(s: JobSnapshot, name: string): JobSnapshot {
  return {
    ...s,
    ranks: s.ranks.map((r) => ({
      ...r,
      communicators: r.communicators.map((c) => (c.world === true ? { ...c, name } : c)),
    })),
  };
}

function render(snapshot: JobSnapshot): string {
  explanationOf(snapshot);
  return renderToStaticMarkup(createElement(Diagnosis, { data: localSnapshot('t', snapshot, true) }));
}

describe('job-supplied names in the diagnosis', () => {
  it('a communicator named like a verdict sits in the banner quoted and isolated, its override written out', () => {
    const html = render(renamedWorld(golden('openmpi', 'collective_mismatch'), SPOOF));
    expect(html).toContain(
      'data-testid="diagnosis-verdict">Collective hang on <span class="job-name">“<bdi>x. VERDICT: NO DEADLOCK\\u202E</bdi>”</span></span>',
    );
    // No raw direction override anywhere in the page, and the name never stands outside a bdi.
    expect(html).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/);
    const outside = html.replace(/<bdi>.*?<\/bdi>/g, '');
    expect(outside).not.toContain('VERDICT');
  });
});

/** The visible text of markup: tags dropped, entities of quotes and ampersands decoded. */
const textOf = (html: string) =>
  html
    .replace(/<[^>]*>/g, '')
    .replace(/&amp;/g, '&')
    .replace(/&quot;/g, '"')
    .replace(/&#x27;/g, "'");

describe('the diagnosis first: open, concrete, every place a link (real golden snapshots)', () => {
  it.each(['openmpi', 'mpich'] as const)(
    '%s wrong_tag: open, names tag 99 and tag 1 with their lines, rank 0 links to its frame',
    (mpi) => {
      const s = golden(mpi, 'wrong_tag');
      const main0 = s.ranks[0]?.threads?.find((t) => t.main);
      const line0 = main0?.frames.find((f) => f.file?.endsWith('wrong_tag.c'))?.line;
      const line1 = s.ranks[1]?.threads?.[0]?.frames.find((f) => f.file?.endsWith('wrong_tag.c'))?.line;
      expect(line0).toBeTypeOf('number');
      const html = render(s);
      expect(html).toMatch(/<details class="diagnosis verdict-deadlock" data-testid="diagnosis" open="">/);
      const cycle = /data-testid="diagnosis-cycle"[^>]*>(.*?)<\/li>/.exec(html)?.[1] ?? '';
      expect(textOf(cycle)).toBe(
        `Cycle: rank 0 waits for rank 1 (tag 99, wrong_tag.c:${line0}) / rank 1 waits for rank 0 (tag 1, :${line1})`,
      );
      const lines = [...html.matchAll(/data-testid="diagnosis-line"[^>]*>(.*?)<\/li>/g)].map((m) =>
        textOf(m[1] ?? ''),
      );
      expect(lines).toEqual([
        `Rank 0 waits in MPI_Recv for a message from rank 1, tag 99, on MPI_COMM_WORLD, at wrong_tag.c:${line0} in main`,
        `Ranks 1-3 wait in MPI_Recv for a message from rank 0, tag 1, on MPI_COMM_WORLD, at wrong_tag.c:${line1} in main`,
      ]);
      // Rank 0 is a link to its detail with the user's frame selected; the tag to the matrix cell.
      const frame0 = `${main0?.tid}%3A1`;
      expect(cycle).toContain(
        `<a href="/?view=rank&amp;rank=0&amp;frame=${frame0}" title="Open this rank, at its source line" data-link="rank">rank 0</a>`,
      );
      expect(cycle).toContain(
        '<a href="/?view=matrix&amp;cell=1%2C0%2C1" title="Show this message in the matrix" data-link="cell">tag 99</a>',
      );
      expect(cycle).toContain(`data-link="frame">wrong_tag.c:${line0}</a>`);
      expect(lines[1]).toContain('Ranks 1-3');
      // The long paragraph that repeats the lines is folded behind a button.
      expect(html).toContain(
        'aria-expanded="false" aria-controls="diagnosis-more">The whole analysis</button>',
      );
      expect(html).toMatch(
        /<div id="diagnosis-more" class="diagnosis-more" hidden="" data-testid="diagnosis-more">/,
      );
      expect(html).toContain(
        '<a href="/?view=stacks&amp;ranks=1-3" title="Show these ranks in the stacks" data-link="ranks">Ranks 1-3</a>',
      );
    },
  );

  it('the link opens the rank view with that frame selected', () => {
    const s = golden('mpich', 'wrong_tag');
    const tid = s.ranks[0]?.threads?.[0]?.tid ?? 0;
    const html = renderToStaticMarkup(
      createElement(RankView, {
        api: {} as Api,
        url: { ...DEFAULT_STATE, view: 'rank', rank: 0, frame: `${tid}:1` },
        setUrl: () => {},
        data: localSnapshot('t', s, true),
      }),
    );
    const row =
      /<tr class="[^"]*selected" aria-current="location" data-testid="rank-frame-selected">(.*?)<\/tr>/.exec(
        html,
      );
    const line = s.ranks[0]?.threads?.[0]?.frames[1]?.line;
    expect(textOf(row?.[1] ?? '')).toMatch(new RegExp(`^1main.*wrong_tag\\.c:${line}wrong_tag$`));
  });

  it('each kind of place a line names leads to its view', () => {
    expect(partTarget({ kind: 'rank', text: 'rank 0', rank: 0, frame: { tid: 7, index: 1 } })).toEqual({
      view: 'rank',
      rank: 0,
      frame: '7:1',
      rcomm: null,
    });
    expect(partTarget({ kind: 'ranks', text: 'ranks 1-3', ranks: '1-3' })).toEqual({
      view: 'stacks',
      ranks: '1-3',
      snode: null,
    });
    expect(partTarget({ kind: 'cell', text: 'tag 99', row: 1, col: 0 })).toEqual({
      view: 'matrix',
      cell: { row: 1, col: 0, size: 1 },
    });
    expect(partTarget({ kind: 'text', text: ' waits for ' })).toBeNull();
  });
});
