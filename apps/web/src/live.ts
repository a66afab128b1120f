// The dashboard's one socket.io connection to the aggregator's /ui namespace (same origin,
// the session cookie the REST API uses). It only ever adds to what the REST client shows:
// progress while a snapshot fans in, and a nudge to reload lists when a job is attached or a
// snapshot stored. Payloads are decoded in live-events.ts; a malformed one is dropped.
//
// Lifecycle: socket.io reconnects by itself after a lost connection. A refusal by the server
// (no session, expired login) is final for this page: it keeps polling instead, and the REST
// calls' 401 sends the user to the login form, whose success reloads the page. A disconnect the
// server initiated (it is shutting down) is retried after a pause, since socket.io does not.
// No path here logs to the console: the e2e tests assert there are no console errors.
import type { Disposable, JobId } from '@mqd/model';
import { io } from 'socket.io-client';
import {
  type AgentChange,
  decodeLiveEvent,
  type FleetChanged,
  isLiveEventName,
  type JobAttached,
  type LiveEvent,
  type SnapshotDone,
  type SnapshotFailed,
  type SnapshotProgress,
} from './live-events.js';

export const LIVE_NAMESPACE = '/ui';
/** Pause before reconnecting after the server closed the connection itself. */
export const SERVER_CLOSE_RETRY_MS = 5000;

/**
 * - `connecting`: first attempt, or socket.io is retrying after the connection was lost;
 * - `connected`: events flow, lists need no polling;
 * - `refused`: the server refused this page (no session): final until the page reloads;
 * - `closed`: `close()` was called.
 */
export type LiveStatus = 'connecting' | 'connected' | 'refused' | 'closed';

/** The slice of socket.io-client's Socket this module uses: a seam for tests and fakes. */
export interface LiveSocket {
  readonly active: boolean;
  on(event: 'connect', fn: () => void): unknown;
  on(event: 'disconnect', fn: (reason: string) => void): unknown;
  on(event: 'connect_error', fn: (error: Error) => void): unknown;
  onAny(fn: (event: string, ...args: unknown[]) => void): unknown;
  connect(): unknown;
  disconnect(): unknown;
}

export type OpenSocket = () => LiveSocket;

/** The real transport: socket.io on this page's origin, credentials (the session cookie) sent. */
export const openUiSocket: OpenSocket = () =>
  io(LIVE_NAMESPACE, {
    withCredentials: true,
    // A fresh Manager: a closed Live and its successor never share a connection.
    forceNew: true,
    reconnectionDelay: 1000,
    reconnectionDelayMax: 10_000,
  });

export interface Live {
  status(): LiveStatus;
  /** Called on every status change (not with the current one). */
  onStatus(cb: (status: LiveStatus) => void): Disposable;
  /** Progress of snapshots of one job. */
  onProgress(jobId: JobId, cb: (e: SnapshotProgress) => void): Disposable;
  /** Every stored snapshot the user may see. */
  onDone(cb: (e: SnapshotDone) => void): Disposable;
  /** Every failed snapshot of a job the user may see (nothing was stored). */
  onFailed(cb: (e: SnapshotFailed) => void): Disposable;
  /** Whatever changes the jobs list or a job's snapshots: attached jobs, stored snapshots. */
  onJobs(cb: (e: SnapshotDone | JobAttached) => void): Disposable;
  /** Agents coming and going. */
  onAgents(cb: (e: AgentChange) => void): Disposable;
  /** The hang watch's fleet changed (a job found or ended, a watch state moved). */
  onFleet(cb: (e: FleetChanged) => void): Disposable;
  /** Disconnects for good; listeners are dropped. Calling it twice is harmless. */
  close(): void;
}

type Listener = (e: LiveEvent) => void;

export function connectLive(open: OpenSocket = openUiSocket, retryMs = SERVER_CLOSE_RETRY_MS): Live {
  let status: LiveStatus = 'connecting';
  const statusListeners = new Set<(s: LiveStatus) => void>();
  const listeners = new Set<Listener>();
  let retry: ReturnType<typeof setTimeout> | null = null;

  const setStatus = (s: LiveStatus) => {
    if (s === status) return;
    status = s;
    for (const cb of [...statusListeners]) cb(s);
  };
  const subscribe = (fn: Listener): Disposable => {
    listeners.add(fn);
    return { dispose: () => listeners.delete(fn) };
  };

  const socket = open();
  socket.on('connect', () => setStatus('connected'));
  socket.on('connect_error', () => {
    // Inactive after a connect_error means the namespace middleware said no (the server
    // sends MQD_E_UNAUTHENTICATED); active means the transport failed and socket.io retries.
    setStatus(socket.active ? 'connecting' : 'refused');
  });
  socket.on('disconnect', (reason) => {
    if (status === 'closed') return;
    setStatus('connecting');
    if (reason === 'io server disconnect' && retry === null) {
      retry = setTimeout(() => {
        retry = null;
        if (status !== 'closed') socket.connect();
      }, retryMs);
    }
  });
  socket.onAny((name, payload) => {
    if (!isLiveEventName(name)) return;
    const e = decodeLiveEvent(name, payload);
    if (e === null) return;
    for (const fn of [...listeners]) fn(e);
  });

  return {
    status: () => status,
    onStatus(cb) {
      statusListeners.add(cb);
      return { dispose: () => statusListeners.delete(cb) };
    },
    onProgress: (jobId, cb) =>
      subscribe((e) => {
        if (e.type === 'snapshot.progress' && e.jobId === jobId) cb(e);
      }),
    onDone: (cb) =>
      subscribe((e) => {
        if (e.type === 'snapshot.done') cb(e);
      }),
    onFailed: (cb) =>
      subscribe((e) => {
        if (e.type === 'snapshot.failed') cb(e);
      }),
    onJobs: (cb) =>
      subscribe((e) => {
        if (e.type === 'snapshot.done' || e.type === 'job.attached') cb(e);
      }),
    onAgents: (cb) =>
      subscribe((e) => {
        if (e.type === 'agent.connected' || e.type === 'agent.disconnected') cb(e);
      }),
    onFleet: (cb) =>
      subscribe((e) => {
        if (e.type === 'fleet.changed') cb(e);
      }),
    close() {
      if (status === 'closed') return;
      setStatus('closed');
      if (retry !== null) clearTimeout(retry);
      retry = null;
      listeners.clear();
      statusListeners.clear();
      socket.disconnect();
    },
  };
}
