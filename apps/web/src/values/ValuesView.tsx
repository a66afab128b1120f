// The Values view: expressions read on every rank in the snapshot's stop, across ranks. Enter an
// expression (and the function whose frame it is read in), "Take snapshot with values" takes a
// snapshot that reads them; the expressions stay in the URL (`ev`), so a share link keeps them.
// One of them may be marked the progress counter (URL `evp`): the snapshot reads it with the
// mark, and the diagnosis names the ranks with its smallest number as the least progressed.
// For each expression: the outliers first ("rank 3: 41 (the others: 42)"), value against rank
// for numbers, then the groups; every rank a link to its rank detail. A live snapshot's values
// come aggregated from the server (never every rank's value); a shared or demo snapshot's are
// aggregated here from the ranks the page already holds.
import { type ApiValueSummary, type SnapshotId, valuesOf } from '@mqd/model';
import { type FormEvent, type MouseEvent, type ReactNode, useMemo, useState } from 'react';
import type { ApiError } from '../api.js';
import { useResource } from '../hooks.js';
import { beginBusy } from '../idle.js';
import { ErrorBox, Progress } from '../ui.js';
import {
  type EvalAsk,
  evalParam,
  MAX_URL_EVALS,
  parseEvalParam,
  type UrlState,
  urlOf,
  withProgressAt,
} from '../url-state.js';
import type { SetUrl, ViewProps } from '../view-types.js';
import { snapshotValues, takeSnapshotWithValues } from './values-api.js';
import { allAgree, exprHeading, groupLine, outlierLines, rangeLine } from './values-text.js';

export function ValuesView({ url, setUrl, data }: ViewProps) {
  const fromServer = data.source === 'live' && data.snapshotId !== null;
  const id = data.snapshotId;
  const [remote] = useResource(fromServer && id !== null ? `values:${id}` : null, (signal) =>
    snapshotValues(id as SnapshotId, signal),
  );
  const local = useMemo(() => (fromServer ? null : valuesOf(data.snapshot)), [fromServer, data.snapshot]);
  const summaries: readonly ApiValueSummary[] | null =
    local ?? (remote.status === 'ready' ? remote.value : null);
  const canTake = !data.readOnly && data.source === 'live' && data.jobId !== null;

  return (
    <div className="values-view" data-testid="values-view">
      <AskForm url={url} setUrl={setUrl} canTake={canTake} job={data.jobId} />
      {remote.status === 'loading' && <Progress what="Reading the values across ranks…" />}
      {remote.status === 'error' && <ErrorBox error={remote.error} />}
      {summaries !== null && summaries.length === 0 && (
        <p className="empty" data-testid="values-none">
          This snapshot read no expressions.{' '}
          {canTake
            ? 'Enter one above and take a snapshot with values.'
            : 'Values are read when a snapshot is taken with expressions (live jobs).'}
        </p>
      )}
      {summaries?.map((s, i) => (
        // One text may be asked twice in different frames: the position keys it.
        // biome-ignore lint/suspicious/noArrayIndexKey: the request order is the identity.
        <ValueCard key={i} s={s} url={url} setUrl={setUrl} />
      ))}
    </div>
  );
}

/** The expressions of the URL, a field to add one, and the button that takes the snapshot. */
function AskForm({
  url,
  setUrl,
  canTake,
  job,
}: {
  url: UrlState;
  setUrl: SetUrl;
  canTake: boolean;
  job: string | null;
}) {
  const [expr, setExpr] = useState('');
  const [frame, setFrame] = useState('');
  const [counter, setCounter] = useState(false);
  const [problem, setProblem] = useState<string | null>(null);
  const [taking, setTaking] = useState(false);
  const [failed, setFailed] = useState<ApiError | null>(null);

  /** The URL's expressions with the one typed (if any); null with the reason when it is not valid. */
  const withTyped = (): readonly EvalAsk[] | null => {
    if (expr.trim() === '') return url.ev;
    const ask = parseEvalParam(frame.trim() === '' ? expr : `${expr}@${frame}`);
    if (ask === null) {
      setProblem(
        'An expression is 1 to 256 printable ASCII characters without "@"; a frame is a function name.',
      );
      return null;
    }
    if (url.ev.length >= MAX_URL_EVALS) {
      setProblem(`At most ${MAX_URL_EVALS} expressions per snapshot: remove one first.`);
      return null;
    }
    const at = url.ev.findIndex((e) => evalParam(e) === evalParam(ask));
    const next = at >= 0 ? url.ev : [...url.ev, ask];
    // Marking the typed one moves the mark to it; else the marks stay as they are.
    return counter ? withProgressAt(next, at >= 0 ? at : next.length - 1) : next;
  };

  const add = (e: FormEvent) => {
    e.preventDefault();
    const next = withTyped();
    if (next === null) return;
    setProblem(null);
    setExpr('');
    setFrame('');
    setCounter(false);
    setUrl({ ev: next }, 'replace');
  };

  const take = async () => {
    const next = withTyped();
    if (next === null || job === null) return;
    if (next.length === 0) {
      setProblem('Enter an expression to read on every rank first.');
      return;
    }
    setProblem(null);
    setFailed(null);
    setTaking(true);
    const end = beginBusy();
    try {
      const r = await takeSnapshotWithValues(job, next);
      if (r.ok) {
        setExpr('');
        setFrame('');
        setCounter(false);
        setUrl({ ev: next, snap: r.value });
      } else setFailed(r.error);
    } finally {
      setTaking(false);
      end();
    }
  };

  return (
    <form className="values-ask" onSubmit={add} aria-label="Expressions to read across ranks">
      <label>
        Expression{' '}
        <input
          data-testid="values-expr"
          value={expr}
          onChange={(e) => setExpr(e.target.value)}
          placeholder="step_counter, st->prog->step, a[0:4]"
          maxLength={256}
          spellCheck={false}
        />
      </label>{' '}
      <label>
        in frame{' '}
        <input
          data-testid="values-frame"
          value={frame}
          onChange={(e) => setFrame(e.target.value)}
          placeholder="innermost user frame"
          maxLength={1024}
          spellCheck={false}
        />
      </label>{' '}
      <label title="The time step or iteration: the diagnosis names the ranks with its smallest value">
        <input
          type="checkbox"
          data-testid="values-progress"
          checked={counter}
          onChange={(e) => setCounter(e.target.checked)}
        />{' '}
        progress counter
      </label>{' '}
      <button type="submit">Add</button>{' '}
      <button type="button" data-testid="values-take" disabled={!canTake || taking} onClick={take}>
        Take snapshot with values
      </button>
      {!canTake && (
        <span className="muted"> (new snapshots are taken of live jobs, not of shared or demo pages)</span>
      )}
      {url.ev.length > 0 && (
        <ul className="values-asks" data-testid="values-asks">
          {url.ev.map((e, i) => (
            <li key={evalParam(e)} data-progress={e.progress === true ? '1' : undefined}>
              <code>{e.expr}</code>
              {e.frame !== null && <span className="muted"> in {e.frame}</span>}{' '}
              <label>
                <input
                  type="checkbox"
                  data-testid="values-ask-progress"
                  checked={e.progress === true}
                  onChange={(c) =>
                    setUrl({ ev: withProgressAt(url.ev, c.target.checked ? i : null) }, 'replace')
                  }
                />{' '}
                progress counter
              </label>{' '}
              <button
                type="button"
                aria-label={`Remove ${e.expr}`}
                onClick={() => setUrl({ ev: url.ev.filter((x) => x !== e) }, 'replace')}
              >
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      {problem !== null && (
        <p className="error" role="alert">
          {problem}
        </p>
      )}
      {taking && (
        <Progress what="Taking a snapshot: every rank is stopped briefly and reads the expressions…" />
      )}
      {failed !== null && <ErrorBox error={failed} />}
    </form>
  );
}

function RankLink({
  rank,
  url,
  setUrl,
  children,
}: {
  rank: number;
  url: UrlState;
  setUrl: SetUrl;
  children: ReactNode;
}) {
  const patch = { view: 'rank' as const, rank };
  const onClick = (e: MouseEvent<HTMLAnchorElement>) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    setUrl(patch);
  };
  return (
    <a href={urlOf({ ...url, ...patch })} onClick={onClick} title={`Rank ${rank} detail`} data-rank={rank}>
      {children}
    </a>
  );
}

function ValueCard({ s, url, setUrl }: { s: ApiValueSummary; url: UrlState; setUrl: SetUrl }) {
  const outliers = outlierLines(s);
  const range = rangeLine(s);
  return (
    <section className="value-card" data-testid="value-card" data-expr={s.expr} aria-label={exprHeading(s)}>
      <h3>
        <code>{s.expr}</code>
        {s.frame !== null && <span className="muted"> in {s.frame}</span>}
        <span className="muted"> · {s.read.toLocaleString()} ranks read</span>
      </h3>
      {outliers.length > 0 && (
        <ul className="value-outliers" data-testid="value-outliers" aria-label="Ranks that differ">
          {s.outliers.map((o, i) => (
            <li key={o.rank}>
              <RankLink rank={o.rank} url={url} setUrl={setUrl}>
                {outliers[i]}
              </RankLink>
            </li>
          ))}
        </ul>
      )}
      {allAgree(s) && (
        <p data-testid="value-agree">
          Every rank: <code>{s.groups[0]?.text}</code>
        </p>
      )}
      {s.bins.length > 1 && <Sparkline s={s} />}
      {range !== null && <p className="muted">{range}</p>}
      {!allAgree(s) && (
        <ul className="value-groups" data-testid="value-groups">
          {s.groups.map((g) => (
            <li key={g.text} data-code={g.code ?? undefined}>
              {groupLine(g)}{' '}
              <span className="muted">
                ·{' '}
                {g.first.map((r, k) => (
                  <span key={r}>
                    {k > 0 && ' '}
                    <RankLink rank={r} url={url} setUrl={setUrl}>
                      {r}
                    </RankLink>
                  </span>
                ))}
                {g.count > g.first.length && ' …'}
              </span>
            </li>
          ))}
          {s.groupsOmitted > 0 && <li className="muted">{s.groupsOmitted.toLocaleString()} more values</li>}
          {s.unread !== '' && <li className="muted">ranks {s.unread}: not read</li>}
        </ul>
      )}
    </section>
  );
}

const SPARK_W = 320;
const SPARK_H = 48;
/** Bins that hold a value other than the largest group's: drawn in the warning colour. */
const ODD_FILL = '#c2410c';

/** Value against rank: one bar per bin of ranks, up to its largest number (the smallest value drawn 2 px high). */
function Sparkline({ s }: { s: ApiValueSummary }) {
  const lo = s.min?.value ?? 0;
  const hi = s.max?.value ?? 0;
  const span = hi - lo || 1;
  const w = SPARK_W / s.bins.length;
  const y = (v: number) => SPARK_H - 2 - ((v - lo) / span) * (SPARK_H - 4);
  const common = s.groups[0]?.number ?? null;
  const odd = (b: ApiValueSummary['bins'][number]) =>
    b.min !== b.max || (common !== null && b.min !== common);
  const first = s.bins[0]?.lo ?? 0;
  const last = s.bins[s.bins.length - 1]?.hi ?? 0;
  return (
    <figure className="value-spark">
      <svg
        width={SPARK_W}
        height={SPARK_H}
        role="img"
        aria-label={`${s.expr} against rank, ranks ${first} to ${last}: ${rangeLine(s) ?? 'no numbers'}`}
        data-testid="value-spark"
      >
        {s.bins.map((b, i) =>
          b.min === null || b.max === null ? null : (
            <rect
              key={b.lo}
              x={i * w}
              y={y(b.max)}
              width={Math.max(1, w - 1)}
              height={Math.max(2, SPARK_H - y(b.max))}
              fill={odd(b) ? ODD_FILL : 'currentColor'}
            >
              <title>{`${b.lo === b.hi ? `rank ${b.lo}` : `ranks ${b.lo}-${b.hi}`}: ${b.min === b.max ? b.min : `${b.min} to ${b.max}`}`}</title>
            </rect>
          ),
        )}
      </svg>
      <figcaption className="muted">
        rank {first} … {last}
      </figcaption>
    </figure>
  );
}
