// Long lists in the views, rendered to HTML: 20,000 equal receives are one row of the matching
// order and of the rank view; the banner groups lines alike and counts the rest; the rank's MPI
// call says its peer and tag from the queues when its arguments were not read.
import {
  type DiagnosisLine,
  type DiagnosisLines,
  type JobSnapshot,
  type Operation,
  syntheticRingDeadlock,
} from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { BANNER_ROWS, bannerRows, lineShape } from '../src/Diagnosis.js';
import { localSnapshot } from '../src/data.js';
import { OrderView } from '../src/matching/OrderView.js';
import { describeCall, RankView } from '../src/rank/RankView.js';
import { DEFAULT_STATE } from '../src/url-state.js';

const recv = (buffer: number): Operation => ({
  status: 'pending',
  peer: { local: 1, global: 1 },
  tag: 5000,
  length: 4,
  actual: null,
  extraText: [],
  buffer: `0x${buffer.toString(16)}`,
  systemBuffer: false,
});

/** A two-rank ring deadlock whose rank 0 also posted 20,000 receives from rank 1, tag 5000. */
function deep(): JobSnapshot {
  const s = syntheticRingDeadlock({ ranks: 2, style: 'openmpi' });
  const w = s.ranks[0]?.communicators[0];
  if (!w?.receives) throw new Error('fixture: rank 0 has no receive queue');
  w.receives = Array.from({ length: 20_000 }, (_, i) => recv(0x10000 + 4 * i));
  return s;
}

const view = (c: typeof OrderView | typeof RankView, s: JobSnapshot, url: Partial<typeof DEFAULT_STATE>) =>
  renderToStaticMarkup(
    createElement(c, {
      api: {} as Api,
      url: { ...DEFAULT_STATE, ...url },
      setUrl: () => {},
      data: localSnapshot('deep', s, true),
    }),
  )
    .replace(/<!-- -->/g, '')
    .replace(/<[^>]+>/g, ' ')
    .replace(/\s+/g, ' ');

describe('20,000 equal receives', () => {
  it('are one row of the matching order with their count', () => {
    const s = deep();
    const text = view(OrderView, s, {
      view: 'order',
      rank: 0,
      rcomm: s.ranks[0]?.communicators[0]?.id ?? null,
    });
    expect(text).toContain('#0–#19,999 20,000 × from rank 1 , tag 5000 , up to 4 B');
    expect(text).toContain('None would take a message: nothing visible can satisfy them.');
    expect(text).toContain('The 20,000 receives in queue order');
  });

  it('are one row of the rank view', () => {
    const text = view(RankView, deep(), { view: 'rank', rank: 0 });
    expect(text).toContain('20,000, in matching order; 1 distinct');
    expect(text).toContain('0–19,999 (20,000 ×)');
  });
});

describe("the rank's MPI call", () => {
  it('names the peer and tag from the queues when the call had none', () => {
    const s = syntheticRingDeadlock({ ranks: 4, style: 'mpich' });
    const r = s.ranks[1];
    if (!r) throw new Error('fixture: no rank 1');
    r.mpiCall = {
      function: 'MPI_Recv',
      tid: 1,
      args: { peer: null, tag: null, communicator: null, count: 4 },
    };
    // The ring: rank 1 posted a receive from its right neighbour, rank 2, tag 7.
    expect(describeCall(s, r)).toMatch(/^MPI_Recv from rank 2, tag 7, count 4 · thread 1/);
    r.mpiCall = {
      function: 'MPI_Ssend',
      tid: 1,
      args: { peer: { local: 2, global: 2 }, tag: 7, communicator: null, count: 1 },
    };
    expect(describeCall(s, r)).toMatch(/^MPI_Ssend to rank 2, tag 7, count 1 · /);
  });
});

describe('the banner', () => {
  const line = (rank: number, peers: number[]): DiagnosisLine => ({
    ranks: String(rank),
    rankCount: 1,
    parts: [
      { kind: 'rank', text: `Rank ${rank}`, rank, frame: null },
      { kind: 'text', text: ' waits to send to ranks ' },
      ...peers.flatMap((p, i) => [
        ...(i > 0 ? [{ kind: 'text' as const, text: ' and ' }] : []),
        { kind: 'rank' as const, text: String(p), rank: p, frame: null },
      ]),
    ],
    text: '',
  });

  it('groups lines alike but for their ranks, fits BANNER_ROWS and counts every other group', () => {
    const groups = [line(0, [1, 7, 16383]), ...Array.from({ length: 11 }, (_, i) => line(i + 1, [i, i + 2]))];
    expect(lineShape(groups[1] as DiagnosisLine)).toBe(lineShape(groups[2] as DiagnosisLine));
    expect(lineShape(groups[0] as DiagnosisLine)).not.toBe(lineShape(groups[1] as DiagnosisLine));
    const d: DiagnosisLines = { cycle: groups[0] ?? null, deadEnd: null, groups, groupTotal: 16_384 };
    const rows = bannerRows(d);
    expect(rows.shown.map((g) => g.count)).toEqual([1, 11]);
    expect(rows.shown.length).toBeLessThanOrEqual(BANNER_ROWS - 1);
    expect(rows.more).toBe(16_384 - 12);
    expect(rows.unlisted).toBe(16_384 - 12);
  });

  it('keeps lines that say different things apart', () => {
    const a = line(0, [1]);
    const b: DiagnosisLine = { ...a, parts: [...a.parts, { kind: 'text', text: ', tag 5' }] };
    const rows = bannerRows({ cycle: null, deadEnd: null, groups: [a, b], groupTotal: 2 });
    expect(rows.shown.map((g) => g.count)).toEqual([1, 1]);
    expect(rows.more).toBe(0);
  });
});
