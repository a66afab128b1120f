// The diagnosis beyond cycles as the dashboard draws it (server-rendered markup of the real
// components): a wait on a rank in MPI_Finalize gets its own line with rank and frame links,
// the statuses the reader corrected read "pending (corrected)" with the rank's note said once,
// and a rank whose threads were capped says so. Snapshots are real recordings (fixtures/golden),
// changed only where a test needs a rank elsewhere.
import type { JobSnapshot, RankSnapshot } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { Diagnosis } from '../src/Diagnosis.js';
import { localSnapshot } from '../src/data.js';
import { explanationOf } from '../src/explanation.js';
import { correctionNotes, formatOpStatus } from '../src/format.js';
import { OrderView } from '../src/matching/OrderView.js';
import { RankView } from '../src/rank/RankView.js';
import { DEFAULT_STATE } from '../src/url-state.js';
import { golden } from './golden.js';

const textOf = (html: string) =>
  html
    .replace(/<[^>]*>/g, '')
    .replace(/&amp;/g, '&')
    .replace(/&quot;/g, '"')
    .replace(/&#x27;/g, "'");

const FINALIZE_LINE = 52;

/**
 * Open MPI's wrong_tag with rank 0 moved on into MPI_Finalize (its receive gone, its stack
 * ompi_mpi_finalize < main, as Open MPI 4.1.4 shows it): ranks 1-3 wait for a message rank 0
 * will never send.
 */
function finalizedRank0(): JobSnapshot {
  const s = golden('openmpi', 'wrong_tag');
  return {
    ...s,
    ranks: s.ranks.map((r): RankSnapshot => {
      if (r.rank !== 0) return r;
      const main = r.threads?.find((t) => t.main);
      if (main === undefined) throw new Error('the golden rank 0 has no main thread');
      const [mpi, user, ...rest] = main.frames;
      if (mpi === undefined || user === undefined) throw new Error('the golden rank 0 stack is too short');
      return {
        ...r,
        communicators: r.communicators.map((c) => ({ ...c, receives: c.receives === null ? null : [] })),
        threads: [
          {
            ...main,
            frames: [
              { ...mpi, function: 'ompi_mpi_finalize', line: 400 },
              { ...user, line: FINALIZE_LINE },
              ...rest,
            ],
          },
        ],
        mpiCall: { function: 'MPI_Finalize', tid: main.tid, args: null },
      };
    }),
  };
}

function renderDiagnosis(s: JobSnapshot): string {
  explanationOf(s);
  return renderToStaticMarkup(createElement(Diagnosis, { data: localSnapshot('t', s, true) }));
}

/** The inner markup of the first element carrying data-testid="id" (no nesting of the same tag inside). */
function byTestId(html: string, id: string): string | null {
  const m = new RegExp(`<(\\w+)[^>]*data-testid="${id}"[^>]*>(.*?)</\\1>`).exec(html);
  return m === null ? null : (m[2] ?? '');
}

describe('the dead-end line of the diagnosis panel', () => {
  it('names the waiting ranks, the call, the tag and both lines, with rank and frame links', () => {
    const s = finalizedRank0();
    const e = explanationOf(s);
    if ('failed' in e) throw new Error(e.failed);
    expect(e.diagnosis.deadEnd).not.toBeNull();
    const html = renderDiagnosis(s);
    const line = byTestId(html, 'diagnosis-dead-end');
    expect(line).not.toBeNull();
    const text = textOf(line ?? '');
    expect(text).toBe(e.diagnosis.deadEnd?.text);
    expect(text).toMatch(/MPI_Recv/);
    expect(text).toMatch(/tag 1\b/);
    expect(text).toContain(`rank 0 is in MPI_Finalize (wrong_tag.c:${FINALIZE_LINE})`);
    expect(text).toContain('will never send it');
    // Rank 0 is a link to the rank view; its source line a link to its frame.
    expect(line).toMatch(/<a [^>]*data-link="rank"[^>]*>rank 0<\/a>/);
    expect(line).toMatch(new RegExp(`<a [^>]*data-link="frame"[^>]*>wrong_tag\\.c:${FINALIZE_LINE}</a>`));
    expect(line).toMatch(/href="[^"]*view=rank[^"]*rank=0/);
    // The banner leads with the same sentence's start.
    expect(textOf(byTestId(html, 'diagnosis-lead') ?? '')).toContain('will never send it');
  });

  it('is not drawn when no rank waits on a dead end', () => {
    expect(renderDiagnosis(golden('openmpi', 'wrong_tag'))).not.toContain('diagnosis-dead-end');
  });
});

function renderView(view: 'rank' | 'order', s: JobSnapshot, rank: number): string {
  return renderToStaticMarkup(
    createElement(view === 'rank' ? RankView : OrderView, {
      api: {} as Api,
      url: { ...DEFAULT_STATE, view, rank },
      setUrl: () => {},
      data: localSnapshot('v', s, true),
    }),
  );
}

const count = (html: string, needle: string) => html.split(needle).length - 1;

describe('statuses the reader corrected (Open MPI thread_multiple: a blocking receive its DLL calls complete)', () => {
  const s = golden('openmpi', 'thread_multiple');
  const r0 = s.ranks.find((r) => r.rank === 0);
  const note = r0?.statusCorrections?.[0]?.message ?? '';

  it('words the status and the note', () => {
    expect(formatOpStatus({ status: 'pending', corrected: 'waited-on' })).toBe('pending (corrected)');
    expect(formatOpStatus({ status: 'pending' })).toBe('pending');
    expect(note).not.toBe('');
    expect(correctionNotes(r0 ?? { statusCorrections: [] })).toEqual([`1 operation corrected: ${note}`]);
    expect(correctionNotes({})).toEqual([]);
  });

  it.each(['rank', 'order'] as const)('the %s view marks the operation and says why once', (view) => {
    const html = textOf(renderView(view, s, 0));
    expect(html).toContain('pending (corrected)');
    expect(count(html, note)).toBe(1);
  });

  it('a rank without corrections shows neither', () => {
    const html = renderView('rank', golden('openmpi', 'wrong_tag'), 0);
    expect(html).not.toContain('(corrected)');
    expect(html).not.toContain('rank-status-corrections');
  });
});

describe('a rank whose threads were capped', () => {
  it("shows the reader's message in the rank view", () => {
    const s = golden('openmpi', 'wrong_tag');
    const message = 'only the first 64 of 70 threads were read: raise the limit to read them all';
    const capped: JobSnapshot = {
      ...s,
      ranks: s.ranks.map((r) =>
        r.rank === 1 ? { ...r, threadLimit: { code: 'MQD_E_THREAD_LIMIT', message, omitted: 6 } } : r,
      ),
    };
    const html = renderView('rank', capped, 1);
    expect(textOf(byTestId(html, 'rank-thread-limit') ?? '')).toBe(`MQD_E_THREAD_LIMIT ${message}`);
    expect(renderView('rank', capped, 0)).not.toContain('rank-thread-limit');
  });
});
