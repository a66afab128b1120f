// The URL as React state: the single source of truth for what the dashboard shows (url-state.ts
// parses and formats it). Back and forward replay it.
import { useCallback, useEffect, useRef, useState } from 'react';
import { parseUrl, type UrlState, urlOf } from './url-state.js';
import type { SetUrl } from './view-types.js';

export function useUrlState(): [UrlState, SetUrl] {
  const [url, setState] = useState(() => parseUrl(location.pathname, location.search));
  // The latest state, so that setUrl stays stable and history is written outside React updaters.
  const current = useRef(url);
  useEffect(() => {
    const onPop = () => {
      current.current = parseUrl(location.pathname, location.search);
      setState(current.current);
    };
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, []);
  const setUrl = useCallback<SetUrl>((patch, how = 'push') => {
    const next = { ...current.current, ...patch };
    current.current = next;
    const target = urlOf(next);
    if (target !== `${location.pathname}${location.search}`) {
      if (how === 'push') history.pushState(null, '', target);
      else history.replaceState(null, '', target);
    }
    setState(next);
  }, []);
  return [url, setUrl];
}
