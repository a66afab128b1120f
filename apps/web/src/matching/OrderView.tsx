// Matching order of one rank and communicator: posted receives and unexpected messages in the
// order the library matches them, wildcards spelled "ANY", and per receive the messages that
// would or would not satisfy it and why, which message it takes, and its near misses. All of it
// is the model's answer (matchingOrder of @mqd/model, the engine explainSnapshot uses for its
// near misses); this view draws it. The explanation adds only its coded limits on matching.
import {
  assertUnreachable,
  type Explanation,
  type JobSnapshot,
  type Limit,
  MATCHING_LIMIT_CODES,
  type MatchingOrder,
  type MatchVerdict,
  matchingOrder,
  type NearMissLine,
  type ReceiveNearMisses,
  type ReceiveRow,
  suggestedOrderComm,
  suggestedOrderRank,
  unavailableQueueText,
} from '@mqd/model';
import { useMemo } from 'react';
import { type ExplanationResult, useExplanation } from '../explanation.js';
import { commLabel, formatOpSize, formatOpStatus, formatPeer, formatTag, plural } from '../format.js';
import { RankPicker } from '../RankPicker.js';
import { contextOf } from '../snapshot-context.js';
import { StatusCorrections, Unavailable } from '../ui.js';
import type { ViewProps } from '../view-types.js';
import { nearMissWhere, nearMissWhy, reasonText, takenByText } from './order-text.js';

/** The explanation's limits that bear on matching (picked by code), or why there are none yet. */
type CaveatState =
  | { readonly kind: 'pending' }
  | { readonly kind: 'failed'; readonly message: string }
  | { readonly kind: 'ok'; readonly limits: readonly Limit[] };

function caveatState(explanation: ExplanationResult | null): CaveatState {
  if (explanation === null) return { kind: 'pending' };
  if ('failed' in explanation) return { kind: 'failed', message: explanation.failed };
  return { kind: 'ok', limits: matchingLimits(explanation) };
}

export function matchingLimits(e: Pick<Explanation, 'limits'>): Limit[] {
  return e.limits.filter((l) => MATCHING_LIMIT_CODES.includes(l.code));
}

export function OrderView({ url, setUrl, data }: ViewProps) {
  const snapshot = data.snapshot;
  const rankNo = url.rank ?? suggestedOrderRank(snapshot);
  const rank = useMemo(() => snapshot.ranks.find((r) => r.rank === rankNo) ?? null, [snapshot, rankNo]);
  const comm = rank ? suggestedOrderComm(rank, url.rcomm) : null;
  // The snapshot's one index (its context's): changing rank or communicator does not rebuild it.
  const index = contextOf(snapshot).index;
  const order = useMemo(
    () => (rank && comm ? matchingOrder(index, rank.rank, comm.id) : null),
    [index, rank, comm],
  );
  // The explanation is computed once per snapshot (../snapshot-context.ts): reused, not redone.
  const explanation = useExplanation(snapshot);
  const caveats = useMemo(() => caveatState(explanation), [explanation]);

  return (
    <div className="order-view">
      <div className="toolbar">
        <RankPicker
          snapshot={snapshot}
          rank={rankNo}
          onChange={(r) => setUrl({ rank: r, rcomm: null }, 'replace')}
        />
        {rank && rank.communicators.length > 0 && (
          <label>
            Communicator{' '}
            <select value={comm?.id ?? ''} onChange={(e) => setUrl({ rcomm: e.target.value }, 'replace')}>
              {rank.communicators.map((c) => (
                <option key={c.id} value={c.id}>
                  {commLabel(c)} (size {c.size}, rank {c.localRank} here)
                </option>
              ))}
            </select>
          </label>
        )}
        {rank && (
          <button type="button" onClick={() => setUrl({ view: 'rank', rank: rank.rank })}>
            Rank detail
          </button>
        )}
      </div>
      {!rank ? (
        <p className="empty">Rank {rankNo ?? '?'} is not in this snapshot.</p>
      ) : rank.state.kind !== 'ok' ? (
        <div className="error" role="alert">
          <strong>{rank.state.code}</strong> {rank.state.message}
        </div>
      ) : !comm || !order ? (
        <p className="empty">Rank {rank.rank} has no communicators with queues.</p>
      ) : (
        <>
          <StatusCorrections rank={rank} />
          <OrderBody order={order} caveats={caveats} snapshot={snapshot} setUrl={setUrl} />
        </>
      )}
    </div>
  );
}

function OrderBody({
  order,
  caveats,
  snapshot,
  setUrl,
}: {
  order: MatchingOrder;
  caveats: CaveatState;
  snapshot: JobSnapshot;
  setUrl: ViewProps['setUrl'];
}) {
  const unit = snapshot.mpi.lengthUnit;
  const library = snapshot.mpi.library;
  const { comm, rank } = order;
  return (
    <div className="order-columns">
      <section className="order-col">
        <h3>
          Posted receives <span className="muted">in matching order (#0 is tried first)</span>
        </h3>
        {order.receives === null ? (
          <Unavailable
            text={unavailableQueueText(library, 'receives')}
            reason={comm.unavailable.receives?.message}
          />
        ) : order.receives.length === 0 ? (
          <p className="empty">No posted receives (the library looked and found none).</p>
        ) : (
          <>
            <Caveats caveats={caveats} />
            <ol className="order-list">
              {order.receives.map((row) => (
                <ReceiveItem key={row.position} row={row} order={order} unit={unit} setUrl={setUrl} />
              ))}
            </ol>
          </>
        )}
      </section>
      <section className="order-col">
        <h3>
          Unexpected messages <span className="muted">in arrival order</span>
        </h3>
        {order.unexpected === null ? (
          <Unavailable
            text={unavailableQueueText(library, 'unexpected')}
            reason={comm.unavailable.unexpected?.message}
          />
        ) : order.unexpected.length === 0 ? (
          <p className="empty">No unexpected messages (the library looked and found none).</p>
        ) : (
          <ol className="order-list">
            {order.unexpected.map((u) => (
              <li key={u.position} className="order-row" data-testid="order-unexpected-row">
                <span className="pos">#{u.position}</span> from <strong>{formatPeer(u.op, u.from)}</strong>{' '}
                tag <strong>{formatTag(u.op.tag)}</strong> · {formatOpSize(u.op, unit)}
                {u.firstMatchingReceive !== null && (
                  <div className="warn">
                    Posted receive #{u.firstMatchingReceive} matches this message, yet both are queued: the
                    library had not progressed when the snapshot was taken, or the snapshot caught it
                    mid-update.
                  </div>
                )}
              </li>
            ))}
          </ol>
        )}
        <h3>
          Pending sends{' '}
          <span className="muted">
            from rank {rank} on {commLabel(comm)}
          </span>
        </h3>
        {order.sends === null ? (
          <Unavailable
            text={unavailableQueueText(library, 'sends')}
            reason={comm.unavailable.sends?.message}
          />
        ) : order.sends.length === 0 ? (
          <p className="empty">No pending sends.</p>
        ) : (
          <ol className="order-list">
            {order.sends.map(({ op, position, to }) => {
              return (
                <li key={position} className="order-row">
                  <span className="pos">#{position}</span> to{' '}
                  {to === null ? (
                    <strong>{formatPeer(op, to)}</strong>
                  ) : (
                    <button
                      type="button"
                      className="link"
                      onClick={() => setUrl({ rank: to, rcomm: null }, 'replace')}
                    >
                      rank {to}
                    </button>
                  )}{' '}
                  tag <strong>{formatTag(op.tag)}</strong> · {formatOpSize(op, unit)}
                  {(op.status !== 'pending' || op.corrected !== undefined) && (
                    <span className="badge">{formatOpStatus(op)}</span>
                  )}
                </li>
              );
            })}
          </ol>
        )}
      </section>
    </div>
  );
}

/** The analysis's limits on matching: queues where a message could be without anyone seeing it. */
function Caveats({ caveats }: { caveats: CaveatState }) {
  switch (caveats.kind) {
    case 'pending':
      return null;
    case 'failed':
      return (
        <div className="hint muted">
          The analysis failed ({caveats.message}): its limits on matching are not shown.
        </div>
      );
    case 'ok':
      if (caveats.limits.length === 0) return null;
      return (
        <div className="hint">
          {caveats.limits.map((l) => (
            <div key={l.code} data-limit={l.code}>
              Analysis limit: {l.text}.
            </div>
          ))}
        </div>
      );
    default:
      return assertUnreachable(caveats);
  }
}

function ReceiveItem({
  row,
  order,
  unit,
  setUrl,
}: {
  row: ReceiveRow;
  order: MatchingOrder;
  unit: 'bytes' | 'elements';
  setUrl: ViewProps['setUrl'];
}) {
  const { op, source } = row;
  const takes = row.takes === null ? null : takenByText(order, row.takes);
  const explained = row.nearMisses;
  // The near-miss line of each candidate, so its "why" is worded the same in both lists.
  const nearLines = new Map<number, NearMissLine>();
  for (const l of explained?.lines ?? []) nearLines.set(l.candidate, l);
  return (
    <li
      className={`order-row${row.matchCount === 0 && op.status === 'pending' ? ' starved' : ''}`}
      data-testid="order-row"
    >
      <div className="order-line">
        <span className="pos">#{row.position}</span> from{' '}
        <strong className={row.anySource ? 'wild' : ''}>{formatPeer(op, source)}</strong> tag{' '}
        <strong className={row.anyTag ? 'wild' : ''}>{formatTag(op.tag)}</strong> · up to{' '}
        {formatOpSize(op, unit)}
        {(op.status !== 'pending' || op.corrected !== undefined) && (
          <span className="badge">{formatOpStatus(op)}</span>
        )}
      </div>
      <div className="order-verdict">
        {op.status === 'complete'
          ? 'Completed: kept in the queue until the request is freed.'
          : takes
            ? `Would take ${takes}.`
            : row.matchCount > 0
              ? 'Every matching message is taken by an earlier receive.'
              : 'Nothing visible can satisfy this receive.'}
        {row.matchCount > 0 && <span className="muted"> {plural(row.matchCount, 'matching message')}.</span>}
      </div>
      {op.status === 'pending' && (
        <NearMisses position={row.position} explained={explained} order={order} setUrl={setUrl} />
      )}
      {row.verdicts.length > 0 && (
        <details>
          <summary>
            {plural(order.candidates.length, 'candidate')} addressed to rank {order.rank}
          </summary>
          <table className="ops compact">
            <thead>
              <tr>
                <th>Match</th>
                <th>Message</th>
                <th>Why</th>
              </tr>
            </thead>
            <tbody>
              {row.verdicts.map((v) => (
                <VerdictRow
                  key={v.candidate}
                  v={v}
                  model={nearLines.get(v.candidate)}
                  explained={explained}
                  order={order}
                  unit={unit}
                  setUrl={setUrl}
                />
              ))}
            </tbody>
          </table>
          {row.omitted > 0 && <p className="muted">{plural(row.omitted, 'more candidate')} not listed.</p>}
        </details>
      )}
    </li>
  );
}

/** The analysis's near misses of one pending receive: candidates that differ in at most one field. */
function NearMisses({
  position,
  explained,
  order,
  setUrl,
}: {
  /** The receive's position in the queue. */
  position: number;
  explained: ReceiveNearMisses | null;
  order: MatchingOrder;
  setUrl: ViewProps['setUrl'];
}) {
  if (explained === null) {
    return (
      <div className="order-verdict muted">
        No near miss: no visible message differs from this receive in only one field.
      </div>
    );
  }
  const commName = order.comm.name;
  return (
    <div className="order-verdict">
      <div className="muted">
        {plural(explained.lines.length, 'near miss', 'near misses')} (the analysis: messages that differ in at
        most one of communicator, source, tag):
      </div>
      <ul className="order-near-misses">
        {explained.lines.map((l) => {
          const local = order.candidates[l.candidate];
          const takenBy = order.takenBy[l.candidate] ?? null;
          return (
            <li
              key={l.candidate}
              data-testid="order-near-miss"
              className={l.wouldMatch ? 'match' : 'nomatch'}
            >
              {l.wouldMatch ? '✓' : '✗'}{' '}
              <button
                type="button"
                className="link"
                onClick={() => setUrl({ rank: l.ref.rank, rcomm: local?.comm.id ?? null }, 'replace')}
              >
                {nearMissWhere(l.ref)}
              </button>{' '}
              from rank {l.from ?? '?'} tag {formatTag(l.tag)} on{' '}
              {l.ref.commName || 'an unnamed communicator'}: {nearMissWhy(l, explained, commName)}
              {l.wouldMatch && takenBy !== null
                ? takenBy === position
                  ? ' (this receive takes it)'
                  : ` (taken by receive #${takenBy})`
                : ''}
            </li>
          );
        })}
      </ul>
      {explained.notes.map((n) => (
        <div key={n} className="warn">
          {n}.
        </div>
      ))}
    </div>
  );
}

function VerdictRow({
  v,
  model,
  explained,
  order,
  unit,
  setUrl,
}: {
  v: MatchVerdict;
  /** The near-miss line of this candidate, when it is one. */
  model: NearMissLine | undefined;
  explained: ReceiveNearMisses | null;
  order: MatchingOrder;
  unit: 'bytes' | 'elements';
  setUrl: ViewProps['setUrl'];
}) {
  const c = order.candidates[v.candidate];
  if (c === undefined) return null;
  const takenBy = order.takenBy[v.candidate] ?? null;
  return (
    <tr className={v.matches ? 'match' : 'nomatch'}>
      <td>{v.matches ? '✓' : '✗'}</td>
      <td>
        {c.origin === 'unexpected' ? 'unexpected' : 'pending send'} from{' '}
        {c.fromRank === null ? (
          '?'
        ) : (
          <button
            type="button"
            className="link"
            onClick={() => setUrl({ rank: c.heldBy, rcomm: c.comm.id }, 'replace')}
          >
            rank {c.fromRank}
          </button>
        )}{' '}
        tag {formatTag(c.op.tag)} · {formatOpSize(c.op, unit)} · {commLabel(c.comm)}
      </td>
      <td>
        {model && explained && !model.wouldMatch
          ? nearMissWhy(model, explained, order.comm.name)
          : v.matches
            ? [
                takenBy !== null ? `taken by receive #${takenBy}` : 'matches',
                v.truncates ? `longer than the receive buffer: MPI_ERR_TRUNCATE` : '',
                v.lengths === 'units-differ'
                  ? 'its size and the receive buffer are in different units: truncation not checked'
                  : '',
              ]
                .filter(Boolean)
                .join('; ')
            : v.reasons.map(reasonText).join('; ')}
      </td>
    </tr>
  );
}
