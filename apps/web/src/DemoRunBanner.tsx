// The banner of `npm run demo`: says the job shown is synthetic, what the demo is building and
// how long it has left, and moves the page to the real job once the demo has attached it.

import {
  DEMO_LABEL,
  type DemoRunStatus,
  demoBannerText,
  demoMoveTo,
  JobId,
  parseDemoStatus,
} from '@mqd/model';
import { useEffect, useRef, useState } from 'react';
import type { SetUrl } from './view-types.js';

/** Often enough that the countdown reads as live, rarely enough to cost nothing. */
const POLL_MS = 2000;

export function DemoRunBanner({ job, setUrl }: { job: JobId | null; setUrl: SetUrl }) {
  const [st, setSt] = useState<DemoRunStatus | null>(null);
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let gone = false;
    const poll = async () => {
      const r = await fetch('/demo-status.json', { cache: 'no-store' }).catch(() => null);
      if (gone) return;
      // Not a demo (no file): nothing to show and nothing to ask again.
      if (r !== null && r.status === 404) {
        setSt(null);
        return;
      }
      if (r?.ok) setSt(parseDemoStatus(await r.json().catch(() => null)));
      setNow(Date.now());
      timer = setTimeout(poll, POLL_MS);
    };
    void poll();
    return () => {
      gone = true;
      clearTimeout(timer);
    };
  }, []);
  const to = st === null ? null : demoMoveTo(st, job);
  // Once: a person who goes back to the synthetic job afterwards means to see it.
  const moved = useRef(false);
  useEffect(() => {
    if (to === null || moved.current) return;
    moved.current = true;
    setUrl({ job: JobId(to), snap: null }, 'replace');
  }, [to, setUrl]);
  const text = st === null ? null : demoBannerText(st, job, now);
  if (text === null) return null;
  return (
    <div className="banner demo" role="status" data-testid="demo-run">
      {text.startsWith(DEMO_LABEL) ? (
        <>
          <strong>{DEMO_LABEL}</strong>
          {text.slice(DEMO_LABEL.length)}
        </>
      ) : (
        text
      )}
    </div>
  );
}
