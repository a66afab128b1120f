// The events the aggregator pushes to browsers on socket.io namespace /ui (apps/server:
// fanout.ts `UiEvents`, app.ts), decoded at the edge: a payload of the wrong shape is dropped
// (null), never half-trusted. Also the state of a snapshot being taken from this page, which
// the progress events only decorate: the REST call that started it still decides its result.
// Pure: no socket, no DOM, so it is tested in node.
import { assertUnreachable, JobId, SnapshotId } from '@mqd/model';
import type { ApiError } from './api.js';

/** Event names on /ui, as the server spells them. */
export const LIVE_EVENT_NAMES = [
  'snapshot.progress',
  'snapshot.done',
  'job.attached',
  'agent.connected',
  'agent.disconnected',
] as const;
export type LiveEventName = (typeof LIVE_EVENT_NAMES)[number];

/** Ranks answered so far while a job snapshot fans in from the agents. */
export interface SnapshotProgress {
  readonly type: 'snapshot.progress';
  readonly jobId: JobId;
  /** Ranks whose queues have arrived (0 <= received <= expected). */
  readonly received: number;
  /** Ranks the job has. */
  readonly expected: number;
}

/** A job snapshot was stored; `partial` when some ranks had no agent to answer for them. */
export interface SnapshotDone {
  readonly type: 'snapshot.done';
  readonly jobId: JobId;
  readonly snapshotId: SnapshotId;
  readonly partial: boolean;
}

/** A job was attached (or re-attached): the jobs list changed. */
export interface JobAttached {
  readonly type: 'job.attached';
  readonly jobId: JobId;
}

/** A per-node agent came or went. */
export interface AgentChange {
  readonly type: 'agent.connected' | 'agent.disconnected';
  readonly host: string;
  readonly agentId: string;
  /** Why it went (disconnects only, when the server says). */
  readonly reason: string | null;
}

export type LiveEvent = SnapshotProgress | SnapshotDone | JobAttached | AgentChange;

/** Longest id or name accepted from the socket: anything longer is not ours. */
const MAX_TEXT = 256;
/** More ranks than any job this dashboard can hold (the model's Rank is a 31-bit integer). */
const MAX_RANKS = 0x7fffffff;

function record(v: unknown): Record<string, unknown> | null {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}

function text(v: unknown): string | null {
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_TEXT ? v : null;
}

/** Ids as the REST client reads them (api.ts): text, or an integer (SQLite rowid) as text. */
function id(v: unknown): string | null {
  if (typeof v === 'number') return Number.isSafeInteger(v) && v >= 0 ? String(v) : null;
  return text(v);
}

function count(v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_RANKS ? v : null;
}

export function isLiveEventName(name: string): name is LiveEventName {
  return (LIVE_EVENT_NAMES as readonly string[]).includes(name);
}

/** The event, or null when the payload does not have the shape the server sends. */
export function decodeLiveEvent(name: LiveEventName, payload: unknown): LiveEvent | null {
  const o = record(payload);
  if (o === null) return null;
  switch (name) {
    case 'snapshot.progress': {
      const jobId = id(o['jobId']);
      const received = count(o['received']);
      const expected = count(o['expected']);
      if (jobId === null || received === null || expected === null || received > expected) return null;
      return { type: name, jobId: JobId(jobId), received, expected };
    }
    case 'snapshot.done': {
      const jobId = id(o['jobId']);
      const snapshotId = id(o['snapshotId']);
      const partial = o['partial'];
      if (jobId === null || snapshotId === null || typeof partial !== 'boolean') return null;
      return { type: name, jobId: JobId(jobId), snapshotId: SnapshotId(snapshotId), partial };
    }
    case 'job.attached': {
      // The payload is the job as GET /api/jobs lists it; only its id matters here, since the
      // list is reloaded (and decoded) through the REST client.
      const jobId = id(o['id']);
      return jobId === null ? null : { type: name, jobId: JobId(jobId) };
    }
    case 'agent.connected':
    case 'agent.disconnected': {
      const host = text(o['host']);
      const agentId = text(o['agentId']);
      if (host === null || agentId === null) return null;
      const reason = o['reason'];
      if (reason !== undefined && typeof reason !== 'string') return null;
      return { type: name, host, agentId, reason: reason ?? null };
    }
    default:
      return assertUnreachable(name);
  }
}

// --- a snapshot taken from this page ---------------------------------------------------------

export type SnapshotTaking =
  | { readonly kind: 'idle' }
  /** `progress` is null until the first progress event arrives (or when none does). */
  | {
      readonly kind: 'busy';
      readonly job: JobId;
      readonly progress: { readonly received: number; readonly expected: number } | null;
    }
  | { readonly kind: 'error'; readonly job: JobId; readonly error: ApiError };

export type SnapshotAction =
  | { readonly type: 'start'; readonly job: JobId }
  | { readonly type: 'progress'; readonly event: SnapshotProgress }
  /** The REST call answered with a snapshot. */
  | { readonly type: 'succeeded'; readonly job: JobId }
  /** The REST call answered with an error. */
  | { readonly type: 'failed'; readonly job: JobId; readonly error: ApiError };

export const SNAPSHOT_IDLE: SnapshotTaking = { kind: 'idle' };

/**
 * Progress only ever moves forward and only for the job being snapshotted: events of another
 * job, a late event after the REST answer, or one that arrives out of order change nothing.
 * Answers for another job than the one in flight are stale (the page started a newer one).
 */
export function snapshotReducer(state: SnapshotTaking, action: SnapshotAction): SnapshotTaking {
  switch (action.type) {
    case 'start':
      return { kind: 'busy', job: action.job, progress: null };
    case 'progress': {
      const e = action.event;
      if (state.kind !== 'busy' || state.job !== e.jobId) return state;
      const p = state.progress;
      if (p !== null && p.expected === e.expected && e.received <= p.received) return state;
      return { ...state, progress: { received: e.received, expected: e.expected } };
    }
    case 'succeeded':
      return state.kind === 'busy' && state.job === action.job ? SNAPSHOT_IDLE : state;
    case 'failed':
      return state.kind === 'busy' && state.job === action.job
        ? { kind: 'error', job: action.job, error: action.error }
        : state;
    default:
      return assertUnreachable(action);
  }
}

/** "Reading ranks: 3/4", or null before anything is known. */
export function progressLabel(t: SnapshotTaking): string | null {
  if (t.kind !== 'busy' || t.progress === null) return null;
  return `Reading ranks: ${t.progress.received.toLocaleString('en-US')}/${t.progress.expected.toLocaleString('en-US')}`;
}
