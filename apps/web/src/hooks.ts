// Small React hooks shared by the views: loading a Result-returning resource with progress
// and errors shown where they happen, and observing an element's size.

import { assertUnreachable } from '@mqd/model';
import { type RefObject, useEffect, useLayoutEffect, useRef, useState } from 'react';
import { type ApiError, type ApiResult, isAborted } from './api.js';
import { beginBusy } from './idle.js';

export type Resource<T> =
  | { readonly status: 'idle' }
  | { readonly status: 'loading'; readonly previous: T | null }
  | { readonly status: 'ready'; readonly value: T }
  | { readonly status: 'error'; readonly error: ApiError; readonly previous: T | null };

/** The value to show: the current one, or the last good one while reloading or after an error. */
export function shownValue<T>(r: Resource<T>): T | null {
  switch (r.status) {
    case 'idle':
      return null;
    case 'ready':
      return r.value;
    case 'loading':
    case 'error':
      return r.previous;
    default:
      return assertUnreachable(r);
  }
}

/**
 * Runs `load` whenever `key` changes (null = nothing to load) and again when `reload()` is
 * called. A newer run aborts the older one, whose result is then ignored.
 */
export function useResource<T>(
  key: string | null,
  load: (signal: AbortSignal) => Promise<ApiResult<T>>,
): [Resource<T>, () => void] {
  const [state, setState] = useState<Resource<T>>({ status: 'idle' });
  const [generation, setGeneration] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const lastGood = useRef<{ key: string; value: T } | null>(null);

  // biome-ignore lint/correctness/useExhaustiveDependencies: `generation` is the reload trigger.
  useEffect(() => {
    if (key === null) {
      setState({ status: 'idle' });
      return;
    }
    const controller = new AbortController();
    const end = beginBusy();
    const previous = lastGood.current?.key === key ? lastGood.current.value : null;
    setState({ status: 'loading', previous });
    loadRef
      .current(controller.signal)
      .then((r) => {
        if (controller.signal.aborted) return;
        if (r.ok) {
          lastGood.current = { key, value: r.value };
          setState({ status: 'ready', value: r.value });
        } else if (!isAborted(r.error)) {
          setState({ status: 'error', error: r.error, previous });
        }
      })
      .finally(end);
    return () => {
      controller.abort();
      end();
    };
  }, [key, generation]);

  return [state, () => setGeneration((g) => g + 1)];
}

/**
 * Content-box size of an element, updated on resize. Until the first measurement has been
 * rendered the app is busy: views draw in effects that depend on the size, and the idle
 * signal must not turn true between the observer's callback and that drawing.
 */
export function useElementSize<E extends HTMLElement>(): [
  RefObject<E | null>,
  { width: number; height: number },
] {
  const ref = useRef<E | null>(null);
  const [size, setSize] = useState({ width: 0, height: 0, measured: false });
  const endBusy = useRef<(() => void) | null>(null);
  // A layout effect: busy from the commit that mounts the element, before anything can paint.
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    endBusy.current = beginBusy();
    const ro = new ResizeObserver((entries) => {
      const r = entries[0]?.contentRect;
      if (r) {
        setSize((s) =>
          s.measured && s.width === r.width && s.height === r.height
            ? s
            : { width: r.width, height: r.height, measured: true },
        );
      }
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      endBusy.current?.();
      endBusy.current = null;
    };
  }, []);
  // Runs in the same commit as the caller's size-dependent effects (declared after this hook).
  useEffect(() => {
    if (size.measured) {
      endBusy.current?.();
      endBusy.current = null;
    }
  }, [size]);
  return [ref, size];
}

/** Calls `fn` every `ms` while `enabled`; returns nothing to dispose (the effect owns the timer). */
export function useInterval(enabled: boolean, ms: number, fn: () => void): void {
  const fnRef = useRef(fn);
  fnRef.current = fn;
  useEffect(() => {
    if (!enabled) return;
    const id = setInterval(() => fnRef.current(), ms);
    return () => clearInterval(id);
  }, [enabled, ms]);
}

/**
 * Keeps the app busy (see idle.ts) while `active`: for a view that is still preparing what it
 * will draw. Begins in the commit itself (a layout effect), so there is no gap between
 * "rendered" and "busy" for the idle signal to slip through.
 */
export function useBusyWhile(active: boolean): void {
  useLayoutEffect(() => {
    if (!active) return;
    return beginBusy();
  }, [active]);
}
