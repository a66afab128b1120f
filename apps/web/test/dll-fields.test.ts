// The DLL's field lookups (RankSnapshot.dll missingFields / renamedFields) are shown to the
// user: in the rank view (a warning for fields the library lacks, a note for renamed ones) and,
// for missing fields, as one line of the diagnosis naming the ranks whose entries may be wrong.
import { type JobSnapshot, type RankSnapshot, syntheticRingDeadlock } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { Diagnosis, dllMismatchText } from '../src/Diagnosis.js';
import { localSnapshot } from '../src/data.js';
import { explanationOf } from '../src/explanation.js';
import { RankView } from '../src/rank/RankView.js';
import { DEFAULT_STATE } from '../src/url-state.js';

const CH4 = { path: '/opt/mpich-4.0.2/lib/libtvmpich.so', version: 'MPICH 4.0.2' };
const RENAMED = 'MPIDIG_req_t.rank -> MPIDIG_req_t.u.recv.source';

function withDll(dll: (r: RankSnapshot) => RankSnapshot['dll']): JobSnapshot {
  const s = syntheticRingDeadlock({ ranks: 6 });
  return {
    ...s,
    ranks: s.ranks.map((r) => {
      const d = dll(r);
      const { dll: _old, ...rest } = r;
      return d === undefined ? rest : { ...rest, dll: d };
    }),
  };
}

const renderRank = (snapshot: JobSnapshot, rank: number) =>
  renderToStaticMarkup(
    createElement(RankView, {
      api: {} as Api,
      url: { ...DEFAULT_STATE, view: 'rank', rank },
      setUrl: () => {},
      data: localSnapshot('dll', snapshot, true),
    }),
  );

const renderDiagnosis = (snapshot: JobSnapshot) =>
  renderToStaticMarkup(createElement(Diagnosis, { data: localSnapshot('dll', snapshot, true) }));

/** The text of the element with this test id (tags inside it dropped), or null. */
function byTestId(html: string, id: string): string | null {
  const m = new RegExp(`data-testid="${id}"[^>]*>(.*?)</(p|span|dd)>`).exec(html);
  return m?.[1] === undefined ? null : m[1].replace(/<[^>]*>/g, '');
}

const mixed = () =>
  withDll((r) =>
    r.rank === 2 || r.rank === 3 || r.rank === 5
      ? { ...CH4, missingFields: ['MPIR_Request.kind', 'MPIR_Comm.rank'] }
      : { ...CH4, renamedFields: [RENAMED] },
  );

describe('DLL fields in the rank view', () => {
  it('shows the DLL and warns with the fields the library lacks', () => {
    const html = renderRank(mixed(), 2);
    expect(byTestId(html, 'rank-dll')).toBe(`${CH4.path} (${CH4.version})`);
    expect(html).toMatch(/class="warn" data-testid="rank-dll-missing"/);
    expect(byTestId(html, 'rank-dll-missing')).toMatch(
      /queue entries may be wrong: MPIR_Request\.kind, MPIR_Comm\.rank$/,
    );
    expect(html).not.toContain('data-testid="rank-dll-renamed"');
  });

  it('notes the renamed fields, without a warning', () => {
    const html = renderRank(mixed(), 0);
    expect(byTestId(html, 'rank-dll-renamed')).toBe(
      `Fields the library renamed, read at their new place: ${RENAMED.replace('>', '&gt;')}`,
    );
    expect(html).toMatch(/class="muted" data-testid="rank-dll-renamed"/);
    expect(html).not.toContain('data-testid="rank-dll-missing"');
  });

  it('shows neither when the DLL fits, and says when the rank has no DLL of its own', () => {
    const fits = renderRank(
      withDll(() => CH4),
      1,
    );
    expect(fits).not.toMatch(/rank-dll-(missing|renamed)/);
    const unreported = withDll(() => undefined);
    const noOwn = (dll: string | null) => renderRank({ ...unreported, mpi: { ...unreported.mpi, dll } }, 1);
    expect(byTestId(noOwn(CH4.path), 'rank-dll')).toBe('not reported for this rank');
    expect(byTestId(noOwn(null), 'rank-dll')).toBe('none loaded for this job');
  });
});

describe('DLL fields in the diagnosis', () => {
  it('names the ranks whose DLL lacks fields, in one line', () => {
    expect(dllMismatchText(mixed())).toBe(
      'The message-queue DLL of ranks 2-3, 5 looked up fields this MPI library lacks (a DLL built for another version?): their queue entries, and this diagnosis, may be wrong.',
    );
    expect(
      dllMismatchText(withDll((r) => (r.rank === 4 ? { ...CH4, missingFields: ['X.y'] } : CH4))),
    ).toMatch(/^The message-queue DLL of rank 4 /);
  });

  it('shows the line in the panel, before and after the analysis, and nothing when no rank lacks fields', () => {
    const s = mixed();
    const pending = renderDiagnosis(s);
    expect(pending).toContain('Analysing why the job is stuck');
    expect(byTestId(pending, 'diagnosis-dll')).toContain('ranks 2-3, 5');
    explanationOf(s);
    const done = renderDiagnosis(s);
    expect(done).toContain('data-testid="diagnosis-verdict"');
    expect(done.match(/data-testid="diagnosis-dll"/g)).toHaveLength(1);
    expect(byTestId(done, 'diagnosis-dll')).toContain(
      'their queue entries, and this diagnosis, may be wrong',
    );

    const renamedOnly = withDll(() => ({ ...CH4, renamedFields: [RENAMED] }));
    explanationOf(renamedOnly);
    expect(renderDiagnosis(renamedOnly)).not.toContain('diagnosis-dll');
    expect(dllMismatchText(renamedOnly)).toBeNull();
  });
});
