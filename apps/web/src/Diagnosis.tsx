// "Why is the job stuck?": the analysis of @mqd/model above the matrix, the matching order and
// the stacks, open: the verdict, then one line per group of ranks with the call, the peer, the
// tag, the communicator and the user's source line, the deadlock cycle edge by edge, and the
// first wait on a rank that will never act again (in MPI_Finalize, gone) with why its message
// never came, and, when the snapshot read a progress counter whose numbers differ, the least
// progressed ranks by it; every rank, cell and frame named is a link to that place. The whole paragraph, the
// collectives and the limits follow. It runs after the first paint (it can take a moment at
// 16,384 ranks) and once per snapshot.
import {
  commPhrase,
  compressRanks,
  type DiagnosisLine,
  type DiagnosisLines,
  type DiagnosisPart,
  describeCallGroup,
  type EntryGroup,
  expandRanks,
  groupEntries,
  JOB_STATE_TEXT,
  type JobSnapshot,
  ranksPhrase,
  splitNames,
  stateOfVerdict,
} from '@mqd/model';
import type { MouseEvent, ReactNode } from 'react';
import { useMemo, useState } from 'react';
import { factsOf, type Viewed } from './data.js';
import { bannerText } from './explanation.js';
import { formatCount } from './format.js';
import { useBusyWhile } from './hooks.js';
import { useDerived } from './snapshot-context.js';
import { factsOfSnapshot } from './snapshot-facts.js';
import { DEFAULT_STATE, frameParam, type UrlState, urlOf } from './url-state.js';
import type { SetUrl } from './view-types.js';

/**
 * One sentence naming the ranks whose DLL looked up fields the library's debug info lacks
 * (RankSnapshot.dll.missingFields: a DLL built for another version of the library), whose queue
 * entries, and so the analysis built on them, may be wrong; null when there are none.
 */
export function dllMismatchText(snapshot: JobSnapshot): string | null {
  return dllMismatchTextOf(factsOfSnapshot(snapshot).dllMissing);
}

/** dllMismatchText for those ranks (SnapshotFacts.dllMissing). */
export function dllMismatchTextOf(ranks: readonly number[]): string | null {
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

/** A job-supplied name: isolated, and between quotes when the model says it needs them. */
function JobName({ text, quoted }: { text: string; quoted: boolean }) {
  return quoted ? (
    <span className="job-name">
      “<bdi>{text}</bdi>”
    </span>
  ) : (
    <bdi className="job-name">{text}</bdi>
  );
}

/** Where a linked part of a diagnosis line leads, as a change of the URL state. */
export function partTarget(p: DiagnosisPart): Partial<UrlState> | null {
  switch (p.kind) {
    case 'rank':
      return {
        view: 'rank',
        rank: p.rank,
        frame: p.frame === null ? null : frameParam(p.frame),
        rcomm: null,
      };
    case 'frame':
      return { view: 'rank', rank: p.rank, frame: frameParam(p.frame), rcomm: null };
    case 'ranks':
      return { view: 'stacks', ranks: p.ranks, snode: null };
    case 'cell':
      return { view: 'matrix', cell: { row: p.row, col: p.col, size: 1 } };
    default:
      return null;
  }
}

const LINK_TITLE: Record<'rank' | 'frame' | 'ranks' | 'cell', string> = {
  rank: 'Open this rank, at its source line',
  frame: 'Open this rank with this frame selected',
  ranks: 'Show these ranks in the stacks',
  cell: 'Show this message in the matrix',
};

/** A link that changes the URL state in place (and still opens in a new tab as a real URL). */
function PlaceLink({
  patch,
  url,
  setUrl,
  kind,
  children,
}: {
  patch: Partial<UrlState>;
  url: UrlState;
  setUrl: SetUrl;
  kind: keyof typeof LINK_TITLE;
  children: ReactNode;
}) {
  const onClick = (e: MouseEvent<HTMLAnchorElement>) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    setUrl(patch);
  };
  return (
    <a href={urlOf({ ...url, ...patch })} onClick={onClick} title={LINK_TITLE[kind]} data-link={kind}>
      {children}
    </a>
  );
}

/** A diagnosis line as text, names isolated, every place a link (also the rank view's sentence). */
export function LineParts({ line, url, setUrl }: { line: DiagnosisLine; url: UrlState; setUrl: SetUrl }) {
  return (
    <>
      {line.parts.map((p, i) => {
        if (p.kind === 'text') return p.text;
        // biome-ignore lint/suspicious/noArrayIndexKey: parts of one fixed line.
        if (p.kind === 'name') return <JobName key={i} text={p.text} quoted={p.quoted} />;
        const patch = partTarget(p);
        return patch === null ? (
          p.text
        ) : (
          // biome-ignore lint/suspicious/noArrayIndexKey: parts of one fixed line.
          <PlaceLink key={i} patch={patch} url={url} setUrl={setUrl} kind={p.kind}>
            {p.text}
          </PlaceLink>
        );
      })}
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

/** Rows the banner lists above the matrix, the cycle and the dead end included; the rest is behind "and N more". */
export const BANNER_ROWS = 4;

/**
 * A diagnosis line with the ranks it names taken out: lines with the same shape say the same
 * thing of different ranks ("Rank 1 waits to send to ranks 0 and 2" and "Rank 2 waits to send
 * to ranks 1 and 3").
 */
export function lineShape(l: DiagnosisLine): string {
  return l.parts.map((p) => (p.kind === 'rank' || p.kind === 'ranks' ? '\u0001' : p.text)).join('');
}

/**
 * The model's lines grouped by shape (groupEntries), the first that fit the banner, the rest
 * for the whole analysis, and how many more groups the model counted than it listed.
 */
export function bannerRows(d: DiagnosisLines): {
  shown: EntryGroup<DiagnosisLine>[];
  rest: EntryGroup<DiagnosisLine>[];
  /** Groups of ranks not in the banner: in `rest`, or not listed by the model. */
  more: number;
  /** Groups the model counted but did not list. */
  unlisted: number;
} {
  const grouped = groupEntries(d.groups, lineShape);
  const room = Math.max(1, BANNER_ROWS - (d.cycle === null ? 0 : 1) - (d.deadEnd === null ? 0 : 1));
  const shown = grouped.slice(0, room);
  const listed = shown.reduce((n, g) => n + g.count, 0);
  return {
    shown,
    rest: grouped.slice(room),
    more: d.groupTotal - listed,
    unlisted: d.groupTotal - d.groups.length,
  };
}

/** One row of grouped lines: the line itself, or "10 ranks alike (ranks 1-7, 9-11), e.g.: " and the first. */
function GroupedLine({
  group,
  url,
  setUrl,
  testId,
}: {
  group: EntryGroup<DiagnosisLine>;
  url: UrlState;
  setUrl: SetUrl;
  testId: string;
}) {
  const first = group.first;
  if (group.count === 1) {
    return (
      <li data-testid={testId} data-ranks={first.ranks}>
        <LineParts line={first} url={url} setUrl={setUrl} />
      </li>
    );
  }
  const ranks = compressRanks(group.items.flatMap((l) => expandRanks(l.ranks) ?? []));
  const rankCount = group.items.reduce((n, l) => n + l.rankCount, 0);
  return (
    <li data-testid={testId} data-ranks={ranks} data-count={group.count}>
      <span className="diagnosis-alike">
        {rankCount === group.count
          ? `${formatCount(rankCount)} ranks alike`
          : `${formatCount(rankCount)} ranks in ${group.count} groups alike`}{' '}
        ({ranksPhrase(ranks)}), e.g.:{' '}
      </span>
      <LineParts line={first} url={url} setUrl={setUrl} />
    </li>
  );
}

export function Diagnosis({
  data,
  url = DEFAULT_STATE,
  setUrl = () => {},
}: {
  /** The whole snapshot, or its overview while the rest loads: the explanation is in either. */
  data: Viewed;
  url?: UrlState;
  setUrl?: SetUrl;
}) {
  const facts = factsOf(data);
  const result = useDerived(facts.explanation);
  const dllText = useMemo(() => dllMismatchTextOf(facts.dllMissing), [facts]);
  // The paragraph repeats the lines in longer form: folded when the lines are there.
  const [more, setMore] = useState(false);
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
  const d = result.diagnosis;
  const rows = bannerRows(d);
  const counter = result.progressCounter?.line ?? null;
  const hasLines = d.cycle !== null || d.deadEnd !== null || d.groups.length > 0 || counter !== null;
  return (
    <details className={`diagnosis verdict-${result.verdict}`} data-testid="diagnosis" open>
      <summary>
        {/* The one state vocabulary (analysis/job-state.ts), the word Jobs and Fleet show. */}
        <span className={`state verdict-${stateOfVerdict(result.verdict)}`} data-testid="diagnosis-state">
          {JOB_STATE_TEXT[stateOfVerdict(result.verdict)]}
        </span>{' '}
        <span className="verdict" data-testid="diagnosis-verdict">
          <Named text={banner.verdict} />
        </span>{' '}
        {result.partial && <span className="muted">(partial: some ranks could not be read) </span>}
        <span className="diagnosis-lead" data-testid="diagnosis-lead">
          <Named text={banner.lead} />
        </span>
        <DllMismatch text={dllText} />
      </summary>
      {hasLines && (
        <ul className="diagnosis-lines" data-testid="diagnosis-lines" aria-label="Where the ranks wait">
          {counter !== null && (
            <li className="diagnosis-progress" data-testid="diagnosis-progress" data-ranks={counter.ranks}>
              <LineParts line={counter} url={url} setUrl={setUrl} />
            </li>
          )}
          {d.cycle !== null && (
            <li className="diagnosis-cycle" data-testid="diagnosis-cycle" data-ranks={d.cycle.ranks}>
              <LineParts line={d.cycle} url={url} setUrl={setUrl} />
            </li>
          )}
          {d.deadEnd !== null && (
            <li className="diagnosis-dead-end" data-testid="diagnosis-dead-end" data-ranks={d.deadEnd.ranks}>
              <LineParts line={d.deadEnd} url={url} setUrl={setUrl} />
            </li>
          )}
          {rows.shown.map((g) => (
            <GroupedLine key={g.key} group={g} url={url} setUrl={setUrl} testId="diagnosis-line" />
          ))}
          {rows.more > 0 && (
            <li className="muted">
              <button
                type="button"
                className="link"
                data-testid="diagnosis-and-more"
                aria-controls="diagnosis-more"
                onClick={() => {
                  setMore(true);
                  document.getElementById('diagnosis-more')?.scrollIntoView({ block: 'nearest' });
                }}
              >
                and {formatCount(rows.more)} more {rows.more === 1 ? 'group' : 'groups'} of ranks
              </button>
            </li>
          )}
        </ul>
      )}
      {hasLines && (
        <button
          type="button"
          className="link diagnosis-more-toggle"
          aria-expanded={more}
          aria-controls="diagnosis-more"
          onClick={() => setMore((m) => !m)}
        >
          {more ? 'Hide the whole analysis' : 'The whole analysis'}
        </button>
      )}
      <div
        id="diagnosis-more"
        className="diagnosis-more"
        hidden={hasLines && !more}
        data-testid="diagnosis-more"
      >
        {rows.rest.length + rows.unlisted > 0 && (
          <ul
            className="diagnosis-lines"
            data-testid="diagnosis-more-lines"
            aria-label="The other groups of ranks"
          >
            {rows.rest.map((g) => (
              <GroupedLine key={g.key} group={g} url={url} setUrl={setUrl} testId="diagnosis-more-line" />
            ))}
            {rows.unlisted > 0 && (
              <li className="muted">
                {formatCount(rows.unlisted)} more {rows.unlisted === 1 ? 'group' : 'groups'} of ranks, not
                listed one by one: the stacks view groups every rank
              </li>
            )}
          </ul>
        )}
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
      </div>
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
