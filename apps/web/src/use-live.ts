// React glue for live.ts: one connection owned by the App while the page may use it, its status
// as state, and subscriptions that follow the component's lifetime.
import { useCallback, useEffect, useRef, useState, useSyncExternalStore } from 'react';
import { connectLive, type Live, type LiveStatus } from './live.js';
import type { AgentChange, FleetChanged, JobAttached, SnapshotDone } from './live-events.js';

/**
 * The page's live connection while `enabled` (a logged-in, live page: never a shared or demo
 * page, which have no session to offer), else null. Closed when disabled or unmounted.
 */
export function useLiveConnection(enabled: boolean): Live | null {
  const [live, setLive] = useState<Live | null>(null);
  useEffect(() => {
    if (!enabled) return;
    const l = connectLive();
    setLive(l);
    return () => {
      l.close();
      setLive(null);
    };
  }, [enabled]);
  return live;
}

/** The connection's status; 'closed' without one. */
export function useLiveStatus(live: Live | null): LiveStatus {
  const subscribe = useCallback(
    (notify: () => void) => {
      if (live === null) return () => {};
      const d = live.onStatus(notify);
      return () => d.dispose();
    },
    [live],
  );
  return useSyncExternalStore(subscribe, () => (live === null ? 'closed' : live.status()));
}

/**
 * Calls `fn` whenever the jobs list or a job's snapshots changed (a job attached, a snapshot
 * stored); the latest `fn` is the one called, so callers may pass a fresh closure each render.
 */
export function useLiveJobs(live: Live | null, fn: (e: SnapshotDone | JobAttached) => void): void {
  const fnRef = useRef(fn);
  fnRef.current = fn;
  useEffect(() => {
    if (live === null) return;
    const d = live.onJobs((e) => fnRef.current(e));
    return () => d.dispose();
  }, [live]);
}

/** Calls `fn` whenever an agent connects or disconnects; the latest `fn` is the one called. */
export function useLiveAgents(live: Live | null, fn: (e: AgentChange) => void): void {
  const fnRef = useRef(fn);
  fnRef.current = fn;
  useEffect(() => {
    if (live === null) return;
    const d = live.onAgents((e) => fnRef.current(e));
    return () => d.dispose();
  }, [live]);
}

/** Calls `fn` whenever the hang watch's fleet changed; the latest `fn` is the one called. */
export function useLiveFleet(live: Live | null, fn: (e: FleetChanged) => void): void {
  const fnRef = useRef(fn);
  fnRef.current = fn;
  useEffect(() => {
    if (live === null) return;
    const d = live.onFleet((e) => fnRef.current(e));
    return () => d.dispose();
  }, [live]);
}

/** Calls `fn` when the connection comes back after it was lost: events may have been missed. */
export function useOnReconnect(live: Live | null, fn: () => void): void {
  const fnRef = useRef(fn);
  fnRef.current = fn;
  useEffect(() => {
    if (live === null) return;
    let wasConnected = live.status() === 'connected';
    const d = live.onStatus((s) => {
      if (s !== 'connected') return;
      if (wasConnected) fnRef.current();
      wasConnected = true;
    });
    return () => d.dispose();
  }, [live]);
}
