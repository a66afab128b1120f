import { type ApiJob, JobId } from '@mqd/model';
import { describe, expect, it, vi } from 'vitest';
import { connectLive, type LiveSocket, type LiveStatus } from '../src/live.js';
import type { LiveEvent } from '../src/live-events.js';

/** The job.attached payload: the job as GET /api/jobs lists it (typed by the API spec). */
const attachedJob = (id: string): ApiJob => ({
  id: JobId(id),
  host: 'n1',
  starterPid: 4242,
  uid: 1000,
  command: 'mpirun -n 2 ./ring',
  method: 'mpir-proctable',
  rankCount: 2,
  hosts: [{ host: 'n1', ranks: 2, agentConnected: true }],
  createdAt: '2026-01-01T00:00:00.000Z',
  createdBy: 'alice',
  endedAt: null,
  state: 'waiting',
  lastSnapshotAt: null,
  lastSnapshot: null,
});

/** A socket whose server side the test plays: it fires the events socket.io would. */
class FakeSocket implements LiveSocket {
  active = true;
  connects = 0;
  disconnects = 0;
  private readonly handlers = new Map<string, ((...args: never[]) => void)[]>();
  private readonly any: ((event: string, ...args: unknown[]) => void)[] = [];

  on(event: string, fn: (...args: never[]) => void): this {
    this.handlers.set(event, [...(this.handlers.get(event) ?? []), fn]);
    return this;
  }
  onAny(fn: (event: string, ...args: unknown[]) => void): this {
    this.any.push(fn);
    return this;
  }
  connect(): this {
    this.connects++;
    this.active = true;
    return this;
  }
  disconnect(): this {
    this.disconnects++;
    this.active = false;
    this.fire('disconnect', 'io client disconnect');
    return this;
  }
  fire(event: 'connect' | 'disconnect' | 'connect_error', arg?: unknown): void {
    for (const h of this.handlers.get(event) ?? []) (h as (a: unknown) => void)(arg);
  }
  /** An event from the server. */
  push(event: string, payload: unknown): void {
    for (const h of this.any) h(event, payload);
  }
}

function setup(retryMs = 0) {
  const socket = new FakeSocket();
  const live = connectLive(() => socket, retryMs);
  const statuses: LiveStatus[] = [];
  live.onStatus((s) => statuses.push(s));
  return { socket, live, statuses };
}

describe('connectLive', () => {
  it('routes valid events to their listeners and drops malformed and unknown ones', () => {
    const { socket, live } = setup();
    const seen: LiveEvent[] = [];
    live.onProgress(JobId('a'), (e) => seen.push(e));
    const done: LiveEvent[] = [];
    live.onDone((e) => done.push(e));
    const jobs: LiveEvent[] = [];
    live.onJobs((e) => jobs.push(e));
    const agents: LiveEvent[] = [];
    live.onAgents((e) => agents.push(e));

    socket.push('snapshot.progress', { jobId: 'a', received: 1, expected: 2 });
    socket.push('snapshot.progress', { jobId: 'b', received: 1, expected: 2 }); // another job
    socket.push('snapshot.progress', { jobId: 'a', received: 3, expected: 2 }); // malformed
    socket.push('snapshot.progress', '{"jobId":"a"}'); // malformed
    socket.push('snapshot.done', { jobId: 'a', snapshotId: 's1', partial: false });
    socket.push('job.attached', attachedJob('c'));
    socket.push('job.attached', { id: 'c' }); // malformed: not the job as the server lists it
    socket.push('agent.connected', { host: 'n1', agentId: 'x' });
    socket.push('mqd', { jobId: 'a', received: 2, expected: 2 }); // not a /ui event

    expect(seen).toEqual([{ type: 'snapshot.progress', jobId: 'a', received: 1, expected: 2 }]);
    expect(done).toEqual([{ type: 'snapshot.done', jobId: 'a', snapshotId: 's1', partial: false }]);
    expect(jobs.map((e) => e.type)).toEqual(['snapshot.done', 'job.attached']);
    expect(agents).toEqual([{ type: 'agent.connected', host: 'n1', agentId: 'x', reason: null }]);
  });

  it('stops calling a listener once disposed', () => {
    const { socket, live } = setup();
    const seen: number[] = [];
    const sub = live.onProgress(JobId('a'), (e) => seen.push(e.received));
    socket.push('snapshot.progress', { jobId: 'a', received: 1, expected: 4 });
    sub.dispose();
    sub.dispose();
    socket.push('snapshot.progress', { jobId: 'a', received: 2, expected: 4 });
    expect(seen).toEqual([1]);
  });

  it('tells a refusal (final) from a lost connection (socket.io retries)', () => {
    const { socket, live, statuses } = setup();
    expect(live.status()).toBe('connecting');
    socket.fire('connect');
    expect(live.status()).toBe('connected');
    socket.fire('disconnect', 'transport close');
    socket.fire('connect_error', new Error('xhr poll error')); // still active: retrying
    expect(live.status()).toBe('connecting');
    socket.active = false; // the namespace middleware said MQD_E_UNAUTHENTICATED
    socket.fire(
      'connect_error',
      Object.assign(new Error('no session'), { data: { code: 'MQD_E_UNAUTHENTICATED' } }),
    );
    expect(live.status()).toBe('refused');
    expect(statuses).toEqual(['connected', 'connecting', 'refused']);
    expect(socket.connects).toBe(0);
  });

  it('reconnects by itself, after a pause, when the server closed the connection', () => {
    vi.useFakeTimers();
    try {
      const { socket, live } = setup(5000);
      socket.fire('connect');
      socket.active = false;
      socket.fire('disconnect', 'io server disconnect');
      socket.fire('disconnect', 'io server disconnect'); // one retry, not two
      expect(live.status()).toBe('connecting');
      vi.advanceTimersByTime(4999);
      expect(socket.connects).toBe(0);
      vi.advanceTimersByTime(1);
      expect(socket.connects).toBe(1);
      socket.fire('connect');
      expect(live.status()).toBe('connected');
      // A lost transport is socket.io's to retry: no extra connect() from here.
      socket.fire('disconnect', 'transport close');
      vi.runAllTimers();
      expect(socket.connects).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('closes for good: disconnects once, no retry, no more events or status changes', () => {
    vi.useFakeTimers();
    try {
      const { socket, live, statuses } = setup(5000);
      const seen: unknown[] = [];
      live.onDone((e) => seen.push(e));
      socket.fire('connect');
      socket.fire('disconnect', 'io server disconnect'); // a retry is pending
      live.close();
      live.close();
      expect(live.status()).toBe('closed');
      expect(socket.disconnects).toBe(1);
      socket.push('snapshot.done', { jobId: 'a', snapshotId: 's1', partial: false });
      expect(seen).toEqual([]);
      expect(statuses).toEqual(['connected', 'connecting', 'closed']);
      // The pending retry was cancelled.
      vi.runAllTimers();
      expect(socket.connects).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
