import {
  commKey,
  explainSnapshot,
  findDeadlocks,
  formatExplanation,
  LIMIT_CODES,
  MATCHING_LIMIT_CODES,
  peerGlobalRank,
  syntheticCollectiveHang,
  syntheticRingDeadlock,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { comm, ompiJob, op, rank, snapshot } from './fixtures.js';

describe('communicator identity across processes', () => {
  it('keys a communicator by name, size and group, not by its per-process id', () => {
    const a = comm('MPI_COMM_WORLD', 4, 0, null, {}, '0x5555a0');
    const b = comm('MPI_COMM_WORLD', 4, 3, [0, 1, 2, 3], {}, '0x5555f0');
    expect(commKey(a)).toBe(commKey(b));
    expect(commKey(comm('row', 2, 0, [0, 1], {}))).not.toBe(commKey(comm('row', 2, 0, [2, 3], {})));
    const big = Array.from({ length: 40 }, (_, i) => i * 2);
    const other = [...big];
    other[39] = 1;
    expect(commKey(comm('even', 40, 0, big, {}))).toBe(commKey(comm('even', 40, 5, [...big], {})));
    expect(commKey(comm('even', 40, 0, big, {}))).not.toBe(commKey(comm('even', 40, 0, other, {})));
  });

  it('resolves peers to world ranks: global, group, self, world-like, else unknown', () => {
    const row = comm('row', 2, 1, [4, 6], {});
    expect(peerGlobalRank({ local: 0, global: 9 }, row, 6, 8)).toBe(9);
    expect(peerGlobalRank({ local: 0, global: null }, row, 6, 8)).toBe(4);
    const noGroup = comm('row', 2, 1, null, {});
    expect(peerGlobalRank({ local: 1, global: null }, noGroup, 6, 8)).toBe(6);
    expect(peerGlobalRank({ local: 0, global: null }, noGroup, 6, 8)).toBeNull();
    const internal = comm('', 8, 3, null, {});
    expect(peerGlobalRank({ local: 5, global: null }, internal, 3, 8)).toBe(5);
    expect(peerGlobalRank({ local: null, global: null }, internal, 3, 8)).toBeNull();
  });
});

describe('MPICH: waits inferred from unexpected messages', () => {
  it('finds a ring of blocked Ssends that only the receivers show', () => {
    // Every rank is blocked in MPI_Ssend to the next; MPICH shows no send queue, but each
    // message sits in the receiver's unexpected queue. Ids are addresses, different per rank.
    const n = 3;
    const snap = snapshot(
      Array.from({ length: n }, (_, r) =>
        rank(r, [
          comm(
            'MPI_COMM_WORLD',
            n,
            r,
            null,
            {
              sends: null,
              receives: [],
              unexpected: [op({ peer: (r + n - 1) % n, global: null, tag: 4, length: 0 })],
            },
            `0x55${r}0`,
          ),
        ]),
      ),
      'mpich',
    );
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('deadlock');
    expect(e.waits.inferredClauses).toBe(3);
    const key = 'MPI_COMM_WORLD#3#world';
    const inferred = (at: number) => ({
      rank: at,
      commKey: key,
      commName: 'MPI_COMM_WORLD',
      queue: 'unexpected',
      index: 0,
      evidence: 'inferred-from-unexpected',
      tag: 4,
    });
    expect(e.deadlock?.cycles).toEqual([
      {
        ranks: [0, 1, 2],
        componentSize: 3,
        certain: false,
        edges: [
          { from: 0, to: 1, inferred: true, ops: [inferred(1)] },
          { from: 1, to: 2, inferred: true, ops: [inferred(2)] },
          { from: 2, to: 0, inferred: true, ops: [inferred(0)] },
        ],
      },
    ]);
    expect(e.summary).toContain('likely rather than certain');
  });

  it('infers nothing when the sender shows its (empty) send queue', () => {
    const snap = ompiJob(2, (r) => ({ sends: [], unexpected: [op({ peer: 1 - r, tag: 4 })] }));
    const w = findDeadlocks(snap);
    expect(w.inferredClauses).toBe(0);
    expect(w.deadlocked).toEqual([]);
    expect(explainSnapshot(snap).verdict).toBe('idle');
  });
});

describe('explainSnapshot', () => {
  it('calls a healthy job with nothing pending idle', () => {
    const snap = ompiJob(4, (r) => ({ receives: [op({ peer: (r + 3) % 4, tag: 2, status: 'complete' })] }));
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('idle');
    expect(e.deadlock).toBeNull();
    expect(e.partial).toBe(false);
    expect(e.nearMissTotal).toBe(0);
    expect(e.collectives).toEqual([]);
    expect(e.classTotal).toBe(1);
    expect(e.summary).toBe(
      'Idle: no rank waits in a visible MPI operation (computing, finished, or blocked where the queues cannot show it). All 4 ranks have the same queue shape.',
    );
  });

  it('names the rank missing from a collective and the p2p wait that keeps it out', () => {
    const e = explainSnapshot(syntheticCollectiveHang({ ranks: 16, laggard: 5 }));
    expect(e.verdict).toBe('collective-hang');
    expect(e.deadlock).toBeNull();
    expect(e.collectives).toEqual([
      {
        commKey: '#16#?',
        commName: '',
        commSize: 16,
        rankCount: 15,
        ranks: '0-4,6-15',
        waitingFor: '5',
        lateWaitOn: '0',
      },
    ]);
  });

  it('is JSON-able and formats as concise plain text', () => {
    const snap = ompiJob(2, (r) =>
      r === 0 ? { receives: [op({ peer: 1, tag: 1 })] } : { sends: [op({ peer: 0, tag: 2 })] },
    );
    const e = explainSnapshot(snap);
    expect(JSON.parse(JSON.stringify(e))).toEqual(e);
    const text = formatExplanation(e);
    expect(text.split('\n').slice(0, 1)).toEqual([
      'verdict: deadlock  [2 ranks, openmpi, 2026-03-01T10:00:00.000Z]',
    ]);
    expect(text).toContain('cycle 1: 2 ranks: 0 -> 1 -> 0');
    expect(text).toContain('  0 -> 1: receive MPI_COMM_WORLD receives[0]@0 tag 1');
    expect(text).toContain('  1 -> 0: send MPI_COMM_WORLD sends[0]@1 tag 2');
    expect(text).toContain('near misses (2):');
  });

  it('calls a snapshot with no readable rank unknown', () => {
    const snap = ompiJob(1, () => ({}));
    snap.ranks[0] = {
      ...snap.ranks[0],
      state: { kind: 'no-queues', code: 'MQD_E_NO_QUEUES', message: 'no' },
      communicators: [],
    } as (typeof snap.ranks)[number];
    const e = explainSnapshot(snap);
    expect(e.verdict).toBe('unknown');
    expect(e.partial).toBe(true);
  });
});

describe('limits of the analysis', () => {
  it('carry a stable code beside the sentence, and the CLI prints the sentence', () => {
    // Open MPI hides unexpected messages; MPICH hides its send queue (without debuginfo), and
    // when it shows one, that lists only nonblocking sends.
    const ring = syntheticRingDeadlock({ ranks: 4, style: 'openmpi' });
    const ompi = explainSnapshot(ring);
    const mpich = explainSnapshot(syntheticRingDeadlock({ ranks: 4, style: 'mpich' }));
    const mpichSends = explainSnapshot({ ...ring, mpi: { ...ring.mpi, library: 'mpich' } });
    expect(ompi.limits.map((l) => l.code)).toContain('unexpected-hidden');
    expect(mpich.limits.map((l) => l.code)).toContain('sends-hidden');
    expect(mpichSends.limits.map((l) => l.code)).toContain('mpich-blocking-sends');
    for (const l of [...ompi.limits, ...mpich.limits, ...mpichSends.limits]) {
      expect(LIMIT_CODES).toContain(l.code);
      expect(l.text).not.toBe('');
    }
    const hidden = ompi.limits.find((l) => l.code === 'unexpected-hidden');
    expect(hidden?.text).toMatch(/^unexpected messages are not visible on 4 ranks/);
    expect(formatExplanation(ompi).split('\n')).toContain(`limit: ${hidden?.text}`);
    expect(MATCHING_LIMIT_CODES).toEqual(['sends-hidden', 'mpich-blocking-sends', 'unexpected-hidden']);
  });
});

describe('headline and lead of the summary', () => {
  it('split the verdict from the rest of its statement, so a view need not repeat it', () => {
    const ring = explainSnapshot(syntheticRingDeadlock({ ranks: 4, style: 'openmpi' }));
    expect(ring.headline).toBe('Deadlock');
    expect(ring.lead).toBe('4 of 4 ranks can never proceed.');
    expect(ring.summary.startsWith(`${ring.headline}: ${ring.lead}`)).toBe(true);
    const coll = explainSnapshot(syntheticCollectiveHang({ ranks: 8, laggard: 3 }));
    expect(coll.headline).toMatch(/^Collective hang/);
    expect(coll.summary.startsWith(`${coll.headline}: ${coll.lead}`)).toBe(true);
    expect(coll.lead).not.toMatch(/^Collective hang/);
  });
});
