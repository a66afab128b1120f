// The events the aggregator pushes to browsers on socket.io namespace /ui, decoded at the edge
// against the API spec (packages/model api-spec.ts UI_EVENTS): a payload of the wrong shape is
// dropped (null), never half-trusted. Also the state of a snapshot being taken from this page,
// which the progress events only decorate: the REST call that started it still decides its
// result. Pure: no socket, no DOM, so it is tested in node.
import {
  assertUnreachable,
  decodeUiEvent,
  isUiEventName,
  type JobId,
  type SnapshotId,
  UI_EVENT_NAMES,
  type UiEventName,
} from '@mqd/model';
import type { ApiError } from './api.js';

/** Event names on /ui, as the spec spells them. */
export const LIVE_EVENT_NAMES: readonly UiEventName[] = UI_EVENT_NAMES;
export type LiveEventName = UiEventName;

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

/**
 * A job snapshot failed and nothing was stored (whoever asked for it, auto-snapshots included):
 * every viewer's progress for that job ends with the coded message.
 */
export interface SnapshotFailed {
  readonly type: 'snapshot.failed';
  readonly jobId: JobId;
  /** The failure as the dashboard shows errors (status 0: it came as an event, not a reply). */
  readonly error: ApiError;
  /** The Idempotency-Key of the request that started it; null for auto-snapshots and keyless ones. */
  readonly requestKey: string | null;
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
  /** Why it went (disconnects only). */
  readonly reason: string | null;
}

/** The fleet changed (a job discovered or ended, its watch state moved): reload GET /fleet. */
export interface FleetChanged {
  readonly type: 'fleet.changed';
  readonly at: string;
}

export type LiveEvent =
  | SnapshotProgress
  | SnapshotDone
  | SnapshotFailed
  | JobAttached
  | AgentChange
  | FleetChanged;

export function isLiveEventName(name: string): name is LiveEventName {
  return isUiEventName(name);
}

/** The event, or null when the payload does not have the shape the spec gives it. */
export function decodeLiveEvent(name: LiveEventName, payload: unknown): LiveEvent | null {
  switch (name) {
    case 'snapshot.progress': {
      const r = decodeUiEvent(name, payload);
      return r.ok ? { type: name, ...r.value } : null;
    }
    case 'snapshot.done': {
      const r = decodeUiEvent(name, payload);
      return r.ok ? { type: name, ...r.value } : null;
    }
    case 'snapshot.failed': {
      const r = decodeUiEvent(name, payload);
      return r.ok
        ? {
            type: name,
            jobId: r.value.jobId,
            error: { status: 0, code: r.value.code, message: r.value.message },
            requestKey: r.value.requestKey ?? null,
          }
        : null;
    }
    case 'job.attached': {
      // Only the job's id matters here: the list is reloaded (and decoded) through the REST client.
      const r = decodeUiEvent(name, payload);
      return r.ok ? { type: name, jobId: r.value.id } : null;
    }
    case 'agent.connected': {
      const r = decodeUiEvent(name, payload);
      return r.ok ? { type: name, host: r.value.host, agentId: r.value.agentId, reason: null } : null;
    }
    case 'agent.disconnected': {
      const r = decodeUiEvent(name, payload);
      return r.ok
        ? { type: name, host: r.value.host, agentId: r.value.agentId, reason: r.value.reason }
        : null;
    }
    case 'fleet.changed': {
      const r = decodeUiEvent(name, payload);
      return r.ok ? { type: name, at: r.value.at } : null;
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
