// The rank view shows each communicator's Fortran handle where the reader found one,
// and nothing where the snapshot has none (older agents, libraries it does not know).
import { type JobSnapshot, syntheticRingDeadlock } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { localSnapshot } from '../src/data.js';
import { RankView } from '../src/rank/RankView.js';
import { DEFAULT_STATE } from '../src/url-state.js';

const render = (snapshot: JobSnapshot) =>
  renderToStaticMarkup(
    createElement(RankView, {
      api: {} as Api,
      url: { ...DEFAULT_STATE, view: 'rank', rank: 0 },
      setUrl: () => {},
      data: localSnapshot('fortran', snapshot, true),
    }),
  );

describe('Fortran handles in the rank view', () => {
  it('shows the handle beside the communicator id', () => {
    const s = syntheticRingDeadlock({ ranks: 4 });
    const withHandles: JobSnapshot = {
      ...s,
      ranks: s.ranks.map((r) => ({
        ...r,
        communicators: r.communicators.map((c, i) => ({ ...c, fortranHandle: i === 0 ? 0 : 3 + i })),
      })),
    };
    const html = render(withHandles);
    const shown = [...html.matchAll(/data-testid="comm-fortran"[^>]*>([^<]*)</g)].map((m) => m[1]);
    expect(shown).toEqual([' · Fortran 0', ' · Fortran 4']);
  });

  it('shows nothing when the snapshot has no handle', () => {
    const s = syntheticRingDeadlock({ ranks: 4 });
    expect(render(s)).not.toContain('data-testid="comm-fortran"');
  });
});
