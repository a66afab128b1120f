// Each length is shown in its own unit: MPICH ch4's unexpected messages count bytes
// (Operation.lengthUnit) in a snapshot whose lengths are elements. The rank view's rows, the
// matrix's sizes per queue kind, and the matching order's verdict (no truncation claimed across
// units) say so.
import { buildEdges, type JobSnapshot, type Operation, syntheticRingDeadlock } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { localSnapshot } from '../src/data.js';
import { formatKindSize, formatOpSize, sizeUnitsLabel } from '../src/format.js';
import { OrderView } from '../src/matching/OrderView.js';
import { KIND_OF_INDEX, KIND_RECEIVES, KIND_SENDS, KIND_UNEXPECTED } from '../src/matrix/edges.js';
import { RankView } from '../src/rank/RankView.js';
import { DEFAULT_STATE } from '../src/url-state.js';

/** An MPICH ring (elements) whose unexpected messages are ch4's: 16 bytes each. */
function ch4Ring(): JobSnapshot {
  const s = syntheticRingDeadlock({ ranks: 4, style: 'mpich' });
  for (const r of s.ranks)
    for (const c of r.communicators)
      c.unexpected = c.unexpected?.map((op) => ({ ...op, length: 16, lengthUnit: 'bytes' as const })) ?? null;
  return s;
}

const unexpectedCount = (s: JobSnapshot, rank: number) =>
  s.ranks[rank]?.communicators.reduce((n, c) => n + (c.unexpected?.length ?? 0), 0) ?? 0;

/** The Size column (5th cell) of every row of the rank view's queue titled `title`. */
function sizesUnder(html: string, title: string): string[] {
  const sections = html.split('<h4>').filter((s) => s.startsWith(title));
  return sections.flatMap((sec) =>
    [...sec.matchAll(/<tr>((?:<td[^>]*>.*?<\/td>)+)<\/tr>/g)].map((row) => {
      const cells = [...(row[1] ?? '').matchAll(/<td[^>]*>(.*?)<\/td>/g)].map((m) =>
        (m[1] ?? '').replace(/<[^>]*>/g, ''),
      );
      return cells[4] ?? '';
    }),
  );
}

describe('lengths in their own unit', () => {
  it('formats an operation in its unit, else the snapshot’s', () => {
    const s = ch4Ring();
    const unexp = s.ranks[0]?.communicators.find((c) => (c.unexpected?.length ?? 0) > 0)?.unexpected?.[0];
    if (!unexp) throw new Error('the ring has no unexpected message at rank 0');
    expect(formatOpSize(unexp, 'elements')).toBe('16 B');
    const { lengthUnit: _u, ...plain } = unexp;
    expect(formatOpSize(plain, 'elements')).toBe('16 el.');
  });

  it('shows a ch4 unexpected message in bytes in the rank view, receives in elements', () => {
    const s = ch4Ring();
    expect(unexpectedCount(s, 1)).toBeGreaterThan(0);
    const html = renderToStaticMarkup(
      createElement(RankView, {
        api: {} as Api,
        url: { ...DEFAULT_STATE, view: 'rank', rank: 1 },
        setUrl: () => {},
        data: localSnapshot('units', s, true),
      }),
    );
    const unexpected = sizesUnder(html, 'unexpected messages');
    expect(unexpected).toHaveLength(unexpectedCount(s, 1));
    for (const size of unexpected) expect(size).toBe('16 B');
    const receives = sizesUnder(html, 'posted receives');
    expect(receives.length).toBeGreaterThan(0);
    for (const size of receives) expect(size).toMatch(/^[\d,]+ el\.$/);
  });

  it('gives the matrix each queue kind’s unit, and labels its sizes with them', () => {
    const ch4 = buildEdges(ch4Ring());
    expect(ch4.kindUnit[KIND_UNEXPECTED]).toBe('bytes');
    expect(ch4.kindUnit[KIND_RECEIVES]).toBe('elements');
    expect(ch4.kindUnit[KIND_SENDS]).toBeNull(); // MPICH shows no send queue here
    expect(sizeUnitsLabel(KIND_OF_INDEX, ch4.kindUnit, 'elements')).toBe('elements; unexpected in bytes');
    expect(formatKindSize(32, ch4.kindUnit[KIND_UNEXPECTED] ?? null, 'elements')).toBe('32 B');

    const ch3 = buildEdges(syntheticRingDeadlock({ ranks: 4, style: 'mpich' }));
    expect(sizeUnitsLabel(KIND_OF_INDEX, ch3.kindUnit, 'elements')).toBe('elements');

    // An MPMD job of ch3 and ch4 ranks: the unexpected sizes cannot be summed into one unit.
    const mixed = ch4Ring();
    const plain = syntheticRingDeadlock({ ranks: 4, style: 'mpich' }).ranks[2];
    if (!plain) throw new Error('no rank 2');
    mixed.ranks[2] = plain;
    const m = buildEdges(mixed);
    expect(m.kindUnit[KIND_UNEXPECTED]).toBe('mixed');
    expect(formatKindSize(20, 'mixed', 'elements')).toBe('20 in mixed units');
    expect(sizeUnitsLabel(KIND_OF_INDEX, m.kindUnit, 'elements')).toBe('elements; unexpected in mixed units');
  });
});

/** Rank 1 posted a receive of 1 element from 0, tag 5; a 16-byte message from 0, tag 5 arrived. */
function ch4Order(unexpected: Partial<Operation>): JobSnapshot {
  const o = (length: number, extra: Partial<Operation> = {}): Operation => ({
    status: 'pending',
    peer: { local: 0, global: 0 },
    tag: 5,
    length,
    actual: null,
    extraText: [],
    buffer: '0x1000',
    systemBuffer: false,
    ...extra,
  });
  const world = (r: number, q: { receives?: Operation[]; unexpected?: Operation[] }) => ({
    id: '0x44000000',
    name: 'MPI_COMM_WORLD',
    size: 2,
    localRank: r,
    world: true,
    group: null,
    sends: null,
    receives: q.receives ?? [],
    unexpected: q.unexpected ?? [],
    unavailable: { sends: { code: 'MQD_E_QUEUE_UNSUPPORTED', message: 'no send queue' } },
  });
  const rank = (r: number, c: ReturnType<typeof world>) => ({
    rank: r,
    pid: 100 + r,
    host: 'n1',
    state: { kind: 'ok' as const },
    pausedMicros: 10,
    communicators: [c],
  });
  return {
    schemaVersion: 1,
    takenAt: '2026-01-01T00:00:00.000Z',
    durationMicros: 100,
    mpi: { library: 'mpich', dll: '/x/libtvmpich.so', lengthUnit: 'elements' },
    ranks: [rank(0, world(0, {})), rank(1, world(1, { receives: [o(1)], unexpected: [o(16, unexpected)] }))],
  };
}

const renderOrder = (s: JobSnapshot) =>
  renderToStaticMarkup(
    createElement(OrderView, {
      api: {} as Api,
      url: { ...DEFAULT_STATE, view: 'order', rank: 1, rcomm: '0x44000000' },
      setUrl: () => {},
      data: localSnapshot('order-units', s, true),
    }),
  ).replace(/<!-- -->/g, '');

describe('the matching order across units', () => {
  it('shows the message in bytes and claims no truncation against a receive in elements', () => {
    const html = renderOrder(ch4Order({ lengthUnit: 'bytes' }));
    expect(html).toMatch(/data-testid="order-unexpected-row".*?16 B/);
    expect(html).toContain('up to 1 el.');
    expect(html).toContain('its size and the receive buffer are in different units: truncation not checked');
    expect(html).not.toContain('MPI_ERR_TRUNCATE');
  });

  it('still says truncation when both lengths are elements', () => {
    const html = renderOrder(ch4Order({}));
    expect(html).toMatch(/data-testid="order-unexpected-row".*?16 el\./);
    expect(html).toContain('longer than the receive buffer: MPI_ERR_TRUNCATE');
    expect(html).not.toContain('different units');
  });
});
