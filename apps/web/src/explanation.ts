// One explanation per snapshot (explainSnapshot of @mqd/model), shared by the diagnosis panel
// and the matrix (which outlines the deadlock cycles), computed once after the first paint.
import { type Explanation, edgeCell, explainSnapshot, type JobSnapshot, type Verdict } from '@mqd/model';
import { type Computed, deferred, useDeferred } from './deferred.js';

export type ExplanationResult = Computed<Explanation>;

const explanations = deferred('analysis', explainSnapshot);

/** The explanation now (computed and cached if needed): for callers outside React, and tests. */
export function explanationOf(snapshot: JobSnapshot): ExplanationResult {
  return explanations.get(snapshot);
}

export function useExplanation(snapshot: JobSnapshot): ExplanationResult | null {
  return useDeferred(explanations, snapshot);
}

/** At most this many cycle cells are outlined (a 16,384-rank ring has 16,384). */
const MAX_CYCLE_CELLS = 20_000;

/** The matrix cells (sender row, receiver column) of the deadlock cycles' edges (see edgeCell). */
export function cycleCells(e: ExplanationResult | null): { row: number; col: number }[] {
  if (!e || 'failed' in e || !e.deadlock) return [];
  const out: { row: number; col: number }[] = [];
  for (const c of e.deadlock.cycles) {
    for (const edge of c.edges) {
      if (out.length >= MAX_CYCLE_CELLS) return out;
      // A wait inside a collective is no message between the two ranks: no cell to outline.
      const cell = edgeCell(edge);
      if (cell !== null) out.push(cell);
    }
  }
  return out;
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
