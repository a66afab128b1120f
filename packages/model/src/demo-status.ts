// The demo's status file, /demo-status.json in the web root `npm run demo` serves (written by
// scripts/demo.mjs, read by the page's banner, apps/web DemoRunBanner.tsx): its shape, checked
// at the edge, and the words the page shows from it. Outside the demo the file is absent.
import type { JobId } from './brand.js';

export interface DemoRunStatus {
  /** 'building': the page shows the synthetic job while the real one is made; 'real': it is up. */
  readonly phase: 'starting' | 'building' | 'real' | 'failed';
  readonly step: string;
  /** Epoch ms the step began. */
  readonly stepStartedAt: number;
  /** The step's measured cost, seconds; null where none was measured. */
  readonly estimateSeconds: number | null;
  readonly estimateBasis: string | null;
  /** The synthetic stand-in's job id, once attached. */
  readonly syntheticJob: string | null;
  /** The job the demo shows now: the stand-in, then the real one. */
  readonly job: string | null;
  readonly error: string | null;
}

const PHASES = ['starting', 'building', 'real', 'failed'] as const;
const str = (v: unknown): v is string => typeof v === 'string';
const strOrNull = (v: unknown): v is string | null => v === null || typeof v === 'string';

/** The file's JSON checked at the edge; null for anything that is not a demo status. */
export function parseDemoStatus(v: unknown): DemoRunStatus | null {
  if (typeof v !== 'object' || v === null) return null;
  const o = v as Record<string, unknown>;
  if (o['kind'] !== 'mqd-demo' || !PHASES.includes(o['phase'] as DemoRunStatus['phase'])) return null;
  const est = o['estimateSeconds'];
  if (!str(o['step']) || typeof o['stepStartedAt'] !== 'number') return null;
  if (!(est === null || (typeof est === 'number' && est >= 0))) return null;
  if (![o['estimateBasis'], o['syntheticJob'], o['job'], o['error']].every(strOrNull)) return null;
  return {
    phase: o['phase'] as DemoRunStatus['phase'],
    step: o['step'],
    stepStartedAt: o['stepStartedAt'],
    estimateSeconds: est,
    estimateBasis: o['estimateBasis'] as string | null,
    syntheticJob: o['syntheticJob'] as string | null,
    job: o['job'] as string | null,
    error: o['error'] as string | null,
  };
}

function duration(s: number): string {
  const m = Math.floor(s / 60);
  return m === 0 ? `${s} s` : `${m} min ${String(s % 60).padStart(2, '0')} s`;
}

/** How long the step has left, from its measured cost; null without one. */
export function timeLeftText(st: DemoRunStatus, now: number): string | null {
  if (st.estimateSeconds === null) return null;
  const gone = Math.max(0, Math.round((now - st.stepStartedAt) / 1000));
  const left = st.estimateSeconds - gone;
  const basis = st.estimateBasis === null ? '' : ` (${st.estimateBasis})`;
  return left > 0
    ? `about ${duration(left)} left${basis}`
    : `${duration(gone)} so far, longer than the ${duration(st.estimateSeconds)} measured${basis}`;
}

/** How the banner starts on the synthetic job's page. */
export const DEMO_LABEL = 'SYNTHETIC job: made up by the demo, not a real MPI job.';

/** The banner's text on a page showing job `shown`, or null when there is nothing to say. */
export function demoBannerText(st: DemoRunStatus, shown: JobId | null, now: number): string | null {
  const onStandIn = shown !== null && shown === st.syntheticJob;
  const label = DEMO_LABEL;
  switch (st.phase) {
    case 'starting':
    case 'building': {
      const left = timeLeftText(st, now);
      const what = `${st.step}${left === null ? '' : `: ${left}`}.`;
      return `${onStandIn ? `${label} ` : ''}The demo is getting the real hung job ready. ${what} This page moves to the real job when it is up.`;
    }
    case 'failed':
      return `${onStandIn ? `${label} ` : ''}${st.step}${st.error === null ? '' : ` (${st.error})`}. See the demo's terminal.`;
    case 'real':
      return onStandIn ? `${label} The real hung job is up as ${st.job}.` : null;
  }
}

/** The job the page should move to: the real one, when the page is still on the stand-in. */
export function demoMoveTo(st: DemoRunStatus, shown: JobId | null): string | null {
  return st.phase === 'real' && st.job !== null && shown !== null && shown === st.syntheticJob
    ? st.job
    : null;
}
