import { JobId } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import type { Api, ApiError } from '../src/api.js';
import { SNAPSHOT_IDLE } from '../src/live-events.js';
import { reportingApi, SnapshotsInFlight } from '../src/snapshots-in-flight.js';

const A = JobId('job-a');
const B = JobId('job-b');
const apiError: ApiError = {
  status: 409,
  code: 'MQD_E_JOB_ENDED',
  message: 'MQD_E_JOB_ENDED: the job ended',
};
const progress = (jobId: JobId, received: number, expected: number) =>
  ({ type: 'snapshot.progress', jobId, received, expected }) as const;

describe('SnapshotsInFlight', () => {
  it('shows a snapshot started elsewhere from its events, forward only, until done', () => {
    const s = new SnapshotsInFlight();
    s.progress(progress(A, 2, 4));
    s.progress(progress(A, 1, 4));
    expect(s.elsewhere(A)).toEqual({ kind: 'busy', job: A, progress: { received: 2, expected: 4 } });
    expect(s.elsewhere(B)).toEqual(SNAPSHOT_IDLE);
    s.done(A);
    expect(s.elsewhere(A)).toEqual(SNAPSHOT_IDLE);
  });

  it('keeps a failure (even one without progress first) until dismissed', () => {
    const s = new SnapshotsInFlight();
    s.failed(A, apiError);
    expect(s.elsewhere(A)).toEqual({ kind: 'error', job: A, error: apiError });
    s.dismiss(A);
    expect(s.elsewhere(A)).toEqual(SNAPSHOT_IDLE);
  });

  it("hides the events of this page's own call while it is in flight and forgets them when it answers", async () => {
    const s = new SnapshotsInFlight();
    let answer: (v: Awaited<ReturnType<Api['takeSnapshot']>>) => void = () => {};
    const api = reportingApi(
      { takeSnapshot: () => new Promise((resolve) => (answer = resolve)) } as unknown as Api,
      s,
    );
    let notified = 0;
    const sub = s.subscribe(() => notified++);
    const call = api.takeSnapshot(A);
    expect(s.current().own.get(A)).toBe(1);
    s.progress(progress(A, 1, 4));
    expect(s.elsewhere(A)).toEqual(SNAPSHOT_IDLE);
    answer({ ok: false, error: apiError });
    await call;
    expect(s.current().own.has(A)).toBe(false);
    // Its late events change nothing: the REST answer showed the result.
    expect(s.elsewhere(A)).toEqual(SNAPSHOT_IDLE);
    expect(notified).toBeGreaterThan(0);
    sub.dispose();
  });

  it('starts from nothing when another job is watched', () => {
    const s = new SnapshotsInFlight();
    s.progress(progress(A, 1, 4));
    s.unwatch();
    expect(s.elsewhere(A)).toEqual(SNAPSHOT_IDLE);
  });
});
