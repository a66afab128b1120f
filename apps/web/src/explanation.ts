// How the explanation (explainSnapshot of @mqd/model, one per snapshot in snapshot-context.ts)
// reads in the banner of the diagnosis panel; the diagnosis, the matrix and the matching order
// share that one explanation.
import type { Explanation, JobSnapshot, Verdict } from '@mqd/model';
import { type Computed, contextOf } from './snapshot-context.js';

export { useExplanation } from './snapshot-context.js';

export type ExplanationResult = Computed<Explanation>;

/** The explanation now (computed and cached if needed): for callers outside React, and tests. */
export function explanationOf(snapshot: JobSnapshot): ExplanationResult {
  return contextOf(snapshot).explanation.get();
}

const VERDICT_LABEL: Record<Verdict, string> = {
  deadlock: 'Deadlock',
  'collective-hang': 'Hung in a collective',
  'openmp-hang': 'OpenMP deadlock',
  stuck: 'Stuck',
  progressing: 'Progressing',
  idle: 'Idle',
  unknown: 'Undetermined',
};

/** The first sentence, cut short: the whole paragraph can list thousands of ranks. */
function firstSentence(text: string): string {
  const end = text.search(/\.(\s|$)/);
  const first = end > 0 ? text.slice(0, end + 1) : text;
  return first.length > 200 ? `${first.slice(0, 199)}…` : first;
}

/**
 * The banner's verdict and what follows it. The model names the verdict in its summary
 * (`headline`) and gives the rest of that statement apart (`lead`), so the verdict is said once.
 */
export function bannerText(e: Pick<Explanation, 'verdict' | 'headline' | 'lead' | 'summary'>): {
  verdict: string;
  lead: string;
} {
  if (e.headline !== '') return { verdict: e.headline, lead: firstSentence(e.lead) };
  return { verdict: VERDICT_LABEL[e.verdict], lead: firstSentence(e.summary) };
}
