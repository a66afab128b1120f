// What the rank view leads with: the blocking call as one sentence, the
// diagnosis's own facts for this rank (the model's rankSentence), then the source around the
// user's frame (or the frame a link selected), read by the reader as the job's owner and
// carried in the snapshot (RankSnapshot.sources), so a frozen share link shows it too. The
// source is the job's text: it is shown as text, never as HTML, one <bdi> per line.
import {
  type Communicator,
  excerptLines,
  type Frame,
  type JobSnapshot,
  jobText,
  libraryCaveats,
  mixedFrames,
  type RankSnapshot,
  rankComms,
  rankSentence,
  sourceExcerptFor,
  userFrame,
} from '@mqd/model';
import { type ReactNode, useMemo } from 'react';
import { LineParts } from '../Diagnosis.js';
import { parseFrameParam, type UrlState } from '../url-state.js';
import type { SetUrl } from '../view-types.js';
import './rank-summary.css';

/** The frame the URL selected when it has a source line, else the user's frame of the rank. */
function excerptFrame(r: RankSnapshot, frameParam: string | null): Frame | null {
  const sel = parseFrameParam(frameParam);
  const t = sel === null ? undefined : r.threads?.find((x) => x.tid === sel.tid);
  // In a CPython thread an evaluation-loop frame stands for its innermost Python frame (mixedFrames).
  const mixed = t === undefined ? undefined : mixedFrames(t);
  const at = sel === null || mixed === undefined ? -1 : mixed.at.indexOf(sel.index);
  const picked = at < 0 ? undefined : mixed?.frames[at];
  if (picked !== undefined && picked.file !== null && picked.line !== null) return picked;
  return userFrame(r)?.frame ?? null;
}

const basename = (p: string) => p.slice(p.lastIndexOf('/') + 1);

export function RankSummary({
  snapshot,
  rank,
  url,
  setUrl,
}: {
  snapshot: JobSnapshot;
  rank: RankSnapshot;
  url: UrlState;
  setUrl: SetUrl;
}) {
  const line = useMemo(() => rankSentence(snapshot, rank.rank), [snapshot, rank.rank]);
  const frame = excerptFrame(rank, url.frame);
  return (
    <section className="rank-summary" data-testid="rank-summary" aria-label="Where this rank is">
      {line !== null && (
        <p className="rank-sentence" data-testid="rank-sentence">
          <LineParts line={line} url={url} setUrl={setUrl} />
        </p>
      )}
      {frame !== null && <SourceExcerptView snapshot={snapshot} rank={rank} frame={frame} />}
    </section>
  );
}

function NotReadable({ children }: { children: ReactNode }) {
  return (
    <p className="muted source-unreadable" data-testid="rank-source-unreadable">
      Source not readable: {children}
    </p>
  );
}

function SourceExcerptView({
  snapshot,
  rank,
  frame,
}: {
  snapshot: JobSnapshot;
  rank: RankSnapshot;
  frame: Frame;
}) {
  const { file, line } = frame;
  if (file === null || line === null) {
    return <NotReadable>no line table covers this frame (was the program built with -g?).</NotReadable>;
  }
  const shownFile = jobText(file, 256);
  const e = sourceExcerptFor(snapshot, rank, { file, line });
  if (e === null) {
    return (
      <NotReadable>
        <bdi>{jobText(basename(file))}</bdi>:{line} was not read with this snapshot.
      </NotReadable>
    );
  }
  if ('unreadable' in e) {
    return (
      <NotReadable>
        <bdi title={shownFile}>{shownFile}</bdi> {jobText(e.unreadable, 512)}.
      </NotReadable>
    );
  }
  return (
    <figure className="source-excerpt" data-testid="rank-source">
      <figcaption>
        <bdi title={shownFile}>{jobText(basename(file))}</bdi>:{line}
        {frame.function !== null && (
          <>
            {' in '}
            <bdi>{jobText(frame.function)}</bdi>
          </>
        )}
      </figcaption>
      <pre>
        {excerptLines(e).map((l) => (
          <span
            key={l.no}
            className={l.current ? 'source-line current' : 'source-line'}
            data-line={l.no}
            data-testid={l.current ? 'rank-source-line' : undefined}
            aria-current={l.current ? 'location' : undefined}
          >
            <span className="source-no" aria-hidden="true">
              {l.no}
            </span>
            <bdi>{l.text}</bdi>
            {'\n'}
          </span>
        ))}
      </pre>
    </figure>
  );
}

/**
 * The library caveats, each once, and only those that apply (the model's libraryCaveats: the ucx
 * caveat only when the stacks show the ucx PML or no PML at all).
 */
export function RankCaveats({ snapshot }: { snapshot: JobSnapshot }) {
  const caveats = useMemo(() => libraryCaveats(snapshot), [snapshot]);
  if (caveats.length === 0) return null;
  return (
    <ul className="caveats" data-testid="rank-caveats">
      {caveats.map((c) => (
        <li key={c}>{c}</li>
      ))}
    </ul>
  );
}

/**
 * The rank's communicators: the world, the call's and any with queued operations first; the
 * library's own and the quiet start-up ones (MPI_COMM_SELF, MPICH's MPI_ICOMM_WORLD and
 * internal copies: the model's rankComms) folded under a toggle.
 */
export function RankComms({ rank, render }: { rank: RankSnapshot; render: (c: Communicator) => ReactNode }) {
  const { shown, folded } = useMemo(() => rankComms(rank), [rank]);
  return (
    <>
      {shown.map(render)}
      {folded.length > 0 && (
        <details className="comm-folded" data-testid="rank-comms-folded">
          <summary>
            {folded.length === 1 ? '1 more communicator' : `${folded.length} more communicators`} with nothing
            queued, the library's own or MPI_COMM_SELF
          </summary>
          {folded.map(render)}
        </details>
      )}
    </>
  );
}
