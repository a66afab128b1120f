import { type JobSnapshot, validateSnapshot } from '@mqd/model';
import { describe, expect, it } from 'vitest';

function snap(): JobSnapshot {
  return {
    schemaVersion: 1,
    takenAt: '2026-11-21T00:00:00.000Z',
    durationMicros: 1200,
    mpi: { library: 'openmpi', dll: '/x/libompi_dbg_msgq.so', lengthUnit: 'bytes' },
    ranks: [
      {
        rank: 0,
        pid: 100,
        host: 'n1',
        state: { kind: 'ok' },
        pausedMicros: 800,
        communicators: [
          {
            id: '0',
            name: 'MPI_COMM_WORLD',
            size: 2,
            localRank: 0,
            group: null,
            sends: [
              {
                status: 'pending',
                peer: { local: 1, global: 1 },
                tag: 7,
                length: 4,
                actual: null,
                extraText: ['Send: 0x1234'],
                buffer: '0x7ffc0010',
                systemBuffer: false,
              },
            ],
            receives: [],
            unexpected: null,
            unavailable: {
              unexpected: { code: 'MQD_E_QUEUE_UNSUPPORTED', message: 'not shown by this library' },
            },
          },
        ],
      },
    ],
  };
}

describe('validateSnapshot', () => {
  it('accepts a well-formed snapshot', () => {
    const r = validateSnapshot(snap());
    expect(r.ok).toBe(true);
  });
  it('refuses an unsigned wildcard rank', () => {
    const s = snap();
    const op = s.ranks[0]?.communicators[0]?.sends?.[0];
    if (!op) throw new Error('fixture');
    op.peer.local = 4294967295;
    const r = validateSnapshot(s);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.code).toBe('MQD_E_BAD_INPUT');
  });
  it('refuses a null queue without a reason and an empty queue with one', () => {
    const s = snap();
    const c = s.ranks[0]?.communicators[0];
    if (!c) throw new Error('fixture');
    c.unavailable = {};
    expect(validateSnapshot(s).ok).toBe(false);
    c.unexpected = [];
    c.unavailable = { unexpected: { code: 'X', message: 'y' } };
    expect(validateSnapshot(s).ok).toBe(false);
  });
  it('refuses a listed MPI_COMM_WORLD group (it is the identity by definition)', () => {
    const s = snap();
    const c = s.ranks[0]?.communicators[0];
    if (!c) throw new Error('fixture');
    c.group = [0, 1];
    const r = validateSnapshot(s);
    expect(r.ok ? 'ok' : r.error.message).toMatch(/MPI_COMM_WORLD's group must be null/);
  });
  it('refuses duplicate ranks and extra fields', () => {
    const s = snap();
    const r0 = s.ranks[0];
    if (!r0) throw new Error('fixture');
    s.ranks.push({ ...r0 });
    expect(validateSnapshot(s).ok).toBe(false);
    expect(validateSnapshot({ ...snap(), extra: 1 }).ok).toBe(false);
  });
});
