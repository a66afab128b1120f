import { type ApiJob, JobId } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import type { ApiError } from '../src/api.js';
import {
  decodeLiveEvent,
  isLiveEventName,
  LIVE_EVENT_NAMES,
  progressLabel,
  SNAPSHOT_IDLE,
  type SnapshotAction,
  type SnapshotProgress,
  type SnapshotTaking,
  snapshotReducer,
} from '../src/live-events.js';

const A = JobId('job-a');
const B = JobId('job-b');
const progress = (jobId: JobId, received: number, expected: number): SnapshotProgress => ({
  type: 'snapshot.progress',
  jobId,
  received,
  expected,
});
const apiError: ApiError = {
  status: 409,
  code: 'MQD_E_JOB_ENDED',
  message: 'MQD_E_JOB_ENDED: the job ended',
};

// job.attached carries the job as GET /api/jobs lists it (typed by the API spec).
const attached: ApiJob = {
  id: JobId('j2'),
  host: 'n1',
  starterPid: 4242,
  uid: 1000,
  command: 'mpirun -n 4 ./ring',
  method: 'mpir-proctable',
  rankCount: 4,
  hosts: [{ host: 'n1', ranks: 4, agentConnected: true }],
  createdAt: '2026-01-01T00:00:00.000Z',
  createdBy: 'alice',
  endedAt: null,
  state: 'waiting',
  lastSnapshotAt: null,
  lastSnapshot: null,
};

describe('decodeLiveEvent', () => {
  it('decodes what the server sends (fanout.ts, app.ts, plugins/jobs.ts)', () => {
    expect(decodeLiveEvent('snapshot.progress', { jobId: 'j1', received: 3, expected: 4 })).toEqual({
      type: 'snapshot.progress',
      jobId: 'j1',
      received: 3,
      expected: 4,
    });
    expect(decodeLiveEvent('snapshot.done', { jobId: 'j1', snapshotId: 's9', partial: true })).toEqual({
      type: 'snapshot.done',
      jobId: 'j1',
      snapshotId: 's9',
      partial: true,
    });
    expect(decodeLiveEvent('job.attached', attached)).toEqual({ type: 'job.attached', jobId: 'j2' });
    expect(decodeLiveEvent('agent.connected', { host: 'n1', agentId: 'a1' })).toEqual({
      type: 'agent.connected',
      host: 'n1',
      agentId: 'a1',
      reason: null,
    });
    expect(
      decodeLiveEvent('agent.disconnected', { host: 'n1', agentId: 'a1', reason: 'transport close' }),
    ).toEqual({ type: 'agent.disconnected', host: 'n1', agentId: 'a1', reason: 'transport close' });
  });

  it('refuses integer ids: the server sends ids as text', () => {
    expect(decodeLiveEvent('snapshot.done', { jobId: 7, snapshotId: 12, partial: false })).toBeNull();
  });

  it.each([
    ['snapshot.progress', null],
    ['snapshot.progress', 'j1'],
    ['snapshot.progress', [1, 2]],
    ['snapshot.progress', { received: 1, expected: 4 }],
    ['snapshot.progress', { jobId: '', received: 1, expected: 4 }],
    ['snapshot.progress', { jobId: 'x'.repeat(257), received: 1, expected: 4 }],
    ['snapshot.progress', { jobId: 'j1', received: '1', expected: 4 }],
    ['snapshot.progress', { jobId: 'j1', received: 1.5, expected: 4 }],
    ['snapshot.progress', { jobId: 'j1', received: -1, expected: 4 }],
    ['snapshot.progress', { jobId: 'j1', received: 5, expected: 4 }],
    ['snapshot.progress', { jobId: 'j1', received: 1, expected: Number.POSITIVE_INFINITY }],
    ['snapshot.progress', { jobId: 1.5, received: 1, expected: 4 }],
    ['snapshot.done', { jobId: 'j1', snapshotId: 's1' }],
    ['snapshot.done', { jobId: 'j1', snapshotId: 's1', partial: 'no' }],
    ['snapshot.done', { jobId: 'j1', snapshotId: null, partial: false }],
    ['job.attached', { jobId: 'j1' }],
    ['job.attached', { id: {} }],
    ['job.attached', { id: 'j1' }],
    ['job.attached', { ...attached, state: 'zombie' }],
    ['agent.connected', { host: 'n1' }],
    ['agent.disconnected', { host: 'n1', agentId: 'a1', reason: 42 }],
    ['agent.disconnected', { host: 'n1', agentId: 'a1' }],
  ] as const)('drops a malformed %s payload: %j', (name, payload) => {
    expect(decodeLiveEvent(name, payload)).toBeNull();
  });

  it('knows exactly the server event names', () => {
    for (const n of LIVE_EVENT_NAMES) expect(isLiveEventName(n)).toBe(true);
    expect(isLiveEventName('snapshot.started')).toBe(false);
    expect(isLiveEventName('connect')).toBe(false);
  });
});

describe('snapshotReducer', () => {
  const run = (actions: SnapshotAction[], from: SnapshotTaking = SNAPSHOT_IDLE) =>
    actions.reduce(snapshotReducer, from);

  it('starts without progress, then follows the progress events of its job', () => {
    const s = run([{ type: 'start', job: A }]);
    expect(s).toEqual({ kind: 'busy', job: A, progress: null });
    expect(progressLabel(s)).toBeNull();
    const s2 = run(
      [
        { type: 'progress', event: progress(A, 1, 4) },
        { type: 'progress', event: progress(A, 3, 4) },
      ],
      s,
    );
    expect(s2).toEqual({ kind: 'busy', job: A, progress: { received: 3, expected: 4 } });
    expect(progressLabel(s2)).toBe('Reading ranks: 3/4');
  });

  it('never moves backwards and ignores other jobs', () => {
    const s = run([
      { type: 'start', job: A },
      { type: 'progress', event: progress(A, 3, 4) },
    ]);
    expect(snapshotReducer(s, { type: 'progress', event: progress(A, 2, 4) })).toBe(s);
    expect(snapshotReducer(s, { type: 'progress', event: progress(A, 3, 4) })).toBe(s);
    expect(snapshotReducer(s, { type: 'progress', event: progress(B, 4, 4) })).toBe(s);
    // A different total is another fan-in (the job was re-attached with more ranks): follow it.
    expect(snapshotReducer(s, { type: 'progress', event: progress(A, 1, 8) })).toEqual({
      kind: 'busy',
      job: A,
      progress: { received: 1, expected: 8 },
    });
  });

  it('lets the REST answer decide: success clears, failure keeps the error, late events change nothing', () => {
    const busy = run([
      { type: 'start', job: A },
      { type: 'progress', event: progress(A, 2, 4) },
    ]);
    const done = snapshotReducer(busy, { type: 'succeeded', job: A });
    expect(done).toEqual(SNAPSHOT_IDLE);
    expect(snapshotReducer(done, { type: 'progress', event: progress(A, 4, 4) })).toBe(done);

    const failed = snapshotReducer(busy, { type: 'failed', job: A, error: apiError });
    expect(failed).toEqual({ kind: 'error', job: A, error: apiError });
    expect(snapshotReducer(failed, { type: 'progress', event: progress(A, 4, 4) })).toBe(failed);
    expect(progressLabel(failed)).toBeNull();
  });

  it('ignores the answer of a snapshot the page no longer waits for', () => {
    const busyB = run([
      { type: 'start', job: A },
      { type: 'start', job: B },
    ]);
    expect(snapshotReducer(busyB, { type: 'succeeded', job: A })).toBe(busyB);
    expect(snapshotReducer(busyB, { type: 'failed', job: A, error: apiError })).toBe(busyB);
    expect(snapshotReducer(busyB, { type: 'succeeded', job: B })).toEqual(SNAPSHOT_IDLE);
  });

  it('formats large counts with separators', () => {
    const s = run([
      { type: 'start', job: A },
      { type: 'progress', event: progress(A, 12_288, 16_384) },
    ]);
    expect(progressLabel(s)).toBe('Reading ranks: 12,288/16,384');
  });
});
