// "Why is the job stuck?": the analysis of @mqd/model (wait-for graph, near misses, rank
// classes) in one paragraph above the matrix and the matching order. It runs after the first
// paint (it can take a moment at 16,384 ranks) and once per snapshot.
import {
  commPhrase,
  compressRanks,
  describeCallGroup,
  type JobSnapshot,
  ranksPhrase,
  splitNames,
} from '@mqd/model';
import { useMemo } from 'react';
import type { LoadedSnapshot } from './data.js';
import { bannerText, useExplanation } from './explanation.js';
import { useBusyWhile } from './hooks.js';

/**
 * One sentence naming the ranks whose DLL looked up fields the library's debug info lacks
 * (RankSnapshot.dll.missingFields: a DLL built for another version of the library), whose queue
 * entries, and so the analysis built on them, may be wrong; null when there are none.
 */
export function dllMismatchText(snapshot: JobSnapshot): string | null {
  const ranks = snapshot.ranks.flatMap((r) => (r.dll?.missingFields?.length ? [r.rank] : []));
  if (ranks.length === 0) return null;
  return `The message-queue DLL of ${ranksPhrase(compressRanks(ranks))} looked up fields this MPI library lacks (a DLL built for another version?): their queue entries, and this diagnosis, may be wrong.`;
}

/**
 * Text the model built with job-supplied names in it (quoteName): each name isolated in a
 * `<bdi>` between visible quotes, so no character in it can reorder or join the words around
 * it (a communicator named "x. VERDICT: NO DEADLOCK" stays a quoted name, never a verdict).
 */
export function Named({ text }: { text: string }) {
  return (
    <>
      {splitNames(text).map((p, i) =>
        p.name ? (
          // biome-ignore lint/suspicious/noArrayIndexKey: pieces of one fixed text.
          <span key={i} className="job-name">
            “<bdi>{p.text}</bdi>”
          </span>
        ) : (
          p.text
        ),
      )}
    </>
  );
}

function DllMismatch({ text }: { text: string | null }) {
  if (text === null) return null;
  return (
    <span className="warn diagnosis-dll" data-testid="diagnosis-dll">
      {' '}
      {text}
    </span>
  );
}

export function Diagnosis({ data }: { data: LoadedSnapshot }) {
  const snapshot = data.snapshot;
  const result = useExplanation(snapshot);
  const dllText = useMemo(() => dllMismatchText(snapshot), [snapshot]);
  useBusyWhile(result === null);
  if (result === null) {
    return (
      <section className="diagnosis pending" data-testid="diagnosis">
        Analysing why the job is stuck…
        <DllMismatch text={dllText} />
      </section>
    );
  }
  if ('failed' in result) {
    return (
      <section className="diagnosis failed" data-testid="diagnosis" role="alert">
        The analysis failed on this snapshot ({result.failed}); the views below are unaffected.
        <DllMismatch text={dllText} />
      </section>
    );
  }
  const banner = bannerText(result);
  return (
    <details className={`diagnosis verdict-${result.verdict}`} data-testid="diagnosis">
      <summary>
        <span className="verdict" data-testid="diagnosis-verdict">
          <Named text={banner.verdict} />
        </span>{' '}
        {result.partial && <span className="muted">(partial: some ranks could not be read) </span>}
        <span className="diagnosis-lead" data-testid="diagnosis-lead">
          <Named text={banner.lead} />
        </span>
        <DllMismatch text={dllText} />
      </summary>
      <p className="diagnosis-summary">
        <Named text={result.summary} />
      </p>
      {result.collectiveMismatches.map((m) => (
        <p key={m.commKey} className="diagnosis-mismatch" data-testid="diagnosis-mismatch">
          Collective mismatch on{' '}
          <Named text={m.commName === null ? 'an unknown communicator' : commPhrase(m.commName)} />:{' '}
          <Named text={m.text} />
        </p>
      ))}
      {result.calls.length > 0 && (
        <ul className="diagnosis-calls" data-testid="diagnosis-calls" aria-label="Where the ranks are">
          {result.calls.slice(0, 8).map((g) => (
            <li key={`${g.where}:${g.call}:${g.commName}:${g.ranks}`}>
              <Named text={describeCallGroup(g)} />
            </li>
          ))}
          {result.calls.length > 8 && <li className="muted">{result.calls.length - 8} more groups</li>}
        </ul>
      )}
      {result.openmp.groups.length > 0 && (
        <ul
          className="diagnosis-openmp"
          data-testid="diagnosis-openmp"
          aria-label="OpenMP threads across ranks"
        >
          {result.openmp.groups.map((g) => (
            <li key={g.ranks} data-testid="diagnosis-openmp-group" data-ranks={g.ranks} data-block={g.block}>
              <Named text={g.text} />
            </li>
          ))}
          {result.openmp.groupTotal > result.openmp.groups.length && (
            <li className="muted">
              {result.openmp.groupTotal - result.openmp.groups.length} more groups of ranks
            </li>
          )}
          {result.openmp.noRuntime !== '' && (
            <li className="muted">{ranksPhrase(result.openmp.noRuntime)}: no OpenMP runtime</li>
          )}
        </ul>
      )}
      {(result.limits.length > 0 || result.partialReasons.length > 0) && (
        <ul className="limits">
          {result.partialReasons.map((r) => (
            <li key={`p:${r}`}>{r}</li>
          ))}
          {result.limits.map((l) => (
            <li key={`l:${l.code}`} data-limit={l.code}>
              {l.text}
            </li>
          ))}
        </ul>
      )}
    </details>
  );
}
