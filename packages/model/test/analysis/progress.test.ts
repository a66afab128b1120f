import {
  compareSnapshots,
  explainSnapshot,
  type JobSnapshot,
  opIdentity,
  progressAcross,
  validateSnapshot,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { ompiJob, op } from './fixtures.js';

const LATER = '2026-03-01T10:00:05.000Z';
/** A deep copy through JSON, checked at the edge like any snapshot read from a file. */
function clone(s: JobSnapshot): JobSnapshot {
  const r = validateSnapshot(JSON.parse(JSON.stringify(s)));
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}
const retime = (s: JobSnapshot, takenAt: string): JobSnapshot => ({ ...clone(s), takenAt });

/** A pipeline: rank 0 computes, rank r > 0 waits for tag `iteration` from r-1. */
const pipeline = (iteration: number, request: (r: number) => string) =>
  ompiJob(3, (r) =>
    r === 0 ? {} : { receives: [op({ peer: r - 1, tag: iteration, request: request(r) })] },
  );

describe('progress across snapshots', () => {
  it('sees a progressing job: operations appeared, disappeared and changed status', () => {
    const a = ompiJob(2, (r) =>
      r === 0
        ? { receives: [op({ peer: 1, tag: 1, request: '0x10' })] }
        : { sends: [op({ peer: 0, tag: 9, request: '0x30' })] },
    );
    const b = retime(
      ompiJob(2, (r) =>
        r === 0
          ? { receives: [op({ peer: 1, tag: 2, request: '0x20' })] }
          : { sends: [op({ peer: 0, tag: 9, request: '0x30', status: 'complete' })] },
      ),
      LATER,
    );
    const step = compareSnapshots(a, b);
    expect(step.verdict).toBe('progressing');
    expect(step.counts).toEqual({
      unchanged: 0,
      changed: 1,
      appeared: 1,
      disappeared: 1,
      pendingBefore: 2,
      pendingAfter: 1,
    });
    expect(step.movedRanks).toBe(2);
    expect(step.stuckRanks).toEqual([]);
    expect(step.examples.find((x) => x.change === 'changed')).toEqual({
      change: 'changed',
      op: {
        rank: 1,
        commKey: 'MPI_COMM_WORLD#2#world',
        commName: 'MPI_COMM_WORLD',
        queue: 'sends',
        index: 0,
      },
      tag: 9,
      peer: 0,
      statusBefore: 'pending',
      statusAfter: 'complete',
    });
    const e = explainSnapshot(b, [a]);
    expect(e.verdict).toBe('progressing');
    expect(e.progress).toEqual([step]);
  });

  it('sees a stuck job: the same operations, pending, in both snapshots', () => {
    const a = pipeline(4, (r) => `0x${r}00`);
    const b = retime(a, LATER);
    const step = compareSnapshots(a, b);
    expect(step.verdict).toBe('stuck');
    expect(step.counts).toEqual({
      unchanged: 2,
      changed: 0,
      appeared: 0,
      disappeared: 0,
      pendingBefore: 2,
      pendingAfter: 2,
    });
    expect(step.stuckRanks).toEqual([1, 2]);
    expect(step.movedRanks).toBe(0);
    const e = explainSnapshot(b, [a]);
    expect(e.verdict).toBe('stuck');
    expect(e.summary.startsWith('Stuck: 2 operations pending and nothing moved between')).toBe(true);
  });

  it('tells a re-posted request (new address, same everything else) from the old one', () => {
    const a = pipeline(4, () => '0xaaa0');
    const b = retime(
      pipeline(4, () => '0xbbb0'),
      LATER,
    );
    const step = compareSnapshots(a, b);
    expect(step.verdict).toBe('progressing');
    expect([step.counts.appeared, step.counts.disappeared, step.counts.unchanged]).toEqual([2, 2, 0]);
    const one = op({ peer: 0, tag: 4, request: '0xaaa0' });
    expect(opIdentity(1, 'k', 'receives', one)).not.toBe(
      opIdentity(1, 'k', 'receives', { ...one, extraText: ['Receive: 0xbbb0'] }),
    );
    expect(opIdentity(1, 'k', 'receives', one)).toBe(
      opIdentity(1, 'k', 'receives', { ...one, status: 'matched' }),
    );
  });

  it('calls a job with nothing pending in either snapshot idle', () => {
    const a = ompiJob(2, (r) => ({ receives: [op({ peer: 1 - r, tag: 1, status: 'complete' })] }));
    const step = compareSnapshots(a, retime(a, LATER));
    expect(step.verdict).toBe('idle');
    expect(explainSnapshot(retime(a, LATER), [a]).verdict).toBe('idle');
  });

  it('compares N snapshots pairwise and ignores ranks not read in both', () => {
    const a = pipeline(4, (r) => `0x${r}00`);
    const b = retime(a, LATER);
    const c = retime(
      pipeline(5, (r) => `0x${r}10`),
      '2026-03-01T10:00:09.000Z',
    );
    const lost = clone(c);
    lost.ranks[2] = {
      ...lost.ranks[2],
      state: { kind: 'agent-missing', code: 'MQD_E_AGENT_MISSING', message: 'gone' },
      communicators: [],
    } as JobSnapshot['ranks'][number];
    const steps = progressAcross([a, b, lost]);
    expect(steps.map((s) => s.verdict)).toEqual(['stuck', 'progressing']);
    expect(steps[1]?.skippedRanks).toEqual([2]);
    const e = explainSnapshot(lost, [a, b]);
    expect(e.partial).toBe(true);
    expect(e.verdict).toBe('progressing');
  });
});
