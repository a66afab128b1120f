// Matching order of one rank and communicator: posted receives and unexpected messages in the
// order the library matches them, wildcards spelled "ANY", and per receive the messages that
// would or would not satisfy it and why. The near misses and their reasons come from the
// model's analysis (the snapshot's cached explanation, joined to the rows in ./near-misses.ts);
// ./match-reasons.ts adds what the analysis does not say: every candidate addressed to the
// rank, and which receive takes which message.
import { assertUnreachable, type Communicator, type JobSnapshot, type RankSnapshot } from '@mqd/model';
import { useMemo } from 'react';
import type { ViewProps } from '../App.js';
import { type ExplanationResult, useExplanation } from '../explanation.js';
import { formatPeer, formatSize, formatTag, plural } from '../format.js';
import { RankPicker } from '../RankPicker.js';
import { commLabel, explainUnavailable, indexRanks, resolveGlobalPeer } from '../snapshot-index.js';
import { Unavailable } from '../ui.js';
import {
  type MatchingOrder,
  matchingOrder,
  type ReceiveRow,
  reasonText,
  takenByText,
  type Verdict,
} from './match-reasons.js';
import {
  joinNearMisses,
  type NearMissLine,
  nearMissWhere,
  nearMissWhy,
  type OrderNearMisses,
  type ReceiveNearMisses,
} from './near-misses.js';

/** The analysis's near misses for the rows on screen, or why there are none yet. */
type NearMissState =
  | { readonly kind: 'pending' }
  | { readonly kind: 'failed'; readonly message: string }
  | { readonly kind: 'ok'; readonly value: OrderNearMisses };

function nearMissState(
  explanation: ExplanationResult | null,
  order: MatchingOrder | null,
  rank: RankSnapshot | null,
): NearMissState {
  if (explanation === null) return { kind: 'pending' };
  if ('failed' in explanation) return { kind: 'failed', message: explanation.failed };
  if (!order || !rank) return { kind: 'pending' };
  return { kind: 'ok', value: joinNearMisses(order, rank.communicators, explanation) };
}

/** The rank to open when the URL names none: the first with a posted receive (the usual suspect). */
export function defaultRank(snapshot: JobSnapshot): number | null {
  for (const r of snapshot.ranks) {
    if (r.communicators.some((c) => (c.receives?.length ?? 0) > 0)) return r.rank;
  }
  return snapshot.ranks[0]?.rank ?? null;
}

/** The communicator to open: the URL's, else the one with the most queued operations. */
export function defaultComm(rank: RankSnapshot, wanted: string | null): Communicator | null {
  const hit = wanted === null ? undefined : rank.communicators.find((c) => c.id === wanted);
  if (hit) return hit;
  let best: Communicator | null = null;
  let bestOps = -1;
  for (const c of rank.communicators) {
    const ops = (c.receives?.length ?? 0) + (c.unexpected?.length ?? 0) + (c.sends?.length ?? 0);
    if (ops > bestOps) {
      best = c;
      bestOps = ops;
    }
  }
  return best;
}

export function OrderView({ url, setUrl, data }: ViewProps) {
  const snapshot = data.snapshot;
  const rankNo = url.rank ?? defaultRank(snapshot);
  const rank = useMemo(() => snapshot.ranks.find((r) => r.rank === rankNo) ?? null, [snapshot, rankNo]);
  const comm = rank ? defaultComm(rank, url.rcomm) : null;
  const order = useMemo(
    () => (rank && comm ? matchingOrder(snapshot, rank.rank, comm.id) : null),
    [snapshot, rank, comm],
  );
  const { worldSize } = useMemo(() => indexRanks(snapshot), [snapshot]);
  // The explanation is computed once per snapshot and cached (../explanation.ts): reused, not redone.
  const explanation = useExplanation(snapshot);
  const near = useMemo(() => nearMissState(explanation, order, rank), [explanation, order, rank]);

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
        <OrderBody order={order} near={near} snapshot={snapshot} worldSize={worldSize} setUrl={setUrl} />
      )}
    </div>
  );
}

function OrderBody({
  order,
  near,
  snapshot,
  worldSize,
  setUrl,
}: {
  order: MatchingOrder;
  near: NearMissState;
  snapshot: JobSnapshot;
  worldSize: number;
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
            text={explainUnavailable(library, 'receives')}
            reason={comm.unavailable.receives?.message}
          />
        ) : order.receives.length === 0 ? (
          <p className="empty">No posted receives (the library looked and found none).</p>
        ) : (
          <>
            {near.kind === 'ok' && <NearMissPreamble near={near.value} rank={rank} />}
            <ol className="order-list">
              {order.receives.map((row) => (
                <ReceiveItem
                  key={row.position}
                  row={row}
                  order={order}
                  near={near}
                  unit={unit}
                  worldSize={worldSize}
                  setUrl={setUrl}
                />
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
            text={explainUnavailable(library, 'unexpected')}
            reason={comm.unavailable.unexpected?.message}
          />
        ) : order.unexpected.length === 0 ? (
          <p className="empty">No unexpected messages (the library looked and found none).</p>
        ) : (
          <ol className="order-list">
            {order.unexpected.map((u) => (
              <li key={u.position} className="order-row" data-testid="order-unexpected-row">
                <span className="pos">#{u.position}</span> from{' '}
                <strong>{formatPeer(u.op, resolveGlobalPeer(u.op, comm, rank, worldSize))}</strong> tag{' '}
                <strong>{formatTag(u.op.tag)}</strong> · {formatSize(u.op.length, unit)}
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
          <Unavailable text={explainUnavailable(library, 'sends')} reason={comm.unavailable.sends?.message} />
        ) : order.sends.length === 0 ? (
          <p className="empty">No pending sends.</p>
        ) : (
          <ol className="order-list">
            {order.sends.map((op, i) => {
              const to = resolveGlobalPeer(op, comm, rank, worldSize);
              return (
                // biome-ignore lint/suspicious/noArrayIndexKey: queue position is the identity here.
                <li key={i} className="order-row">
                  <span className="pos">#{i}</span> to{' '}
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
                  tag <strong>{formatTag(op.tag)}</strong> · {formatSize(op.length, unit)}
                  {op.status !== 'pending' && <span className="badge">{op.status}</span>}
                </li>
              );
            })}
          </ol>
        )}
      </section>
    </div>
  );
}

/** What the analysis says about the rank as a whole: queues it cannot see, entries it cannot place. */
function NearMissPreamble({ near, rank }: { near: OrderNearMisses; rank: number }) {
  if (!near.ambiguous && near.caveats.length === 0) return null;
  return (
    <div className="hint">
      {near.ambiguous && (
        <div>
          Another communicator of rank {rank} has the same name and size and shows no group: the analysis
          cannot tell the two apart, so its near misses are not shown here.
        </div>
      )}
      {near.caveats.map((c) => (
        <div key={c}>Analysis limit: {c}.</div>
      ))}
    </div>
  );
}

function ReceiveItem({
  row,
  order,
  near,
  unit,
  worldSize,
  setUrl,
}: {
  row: ReceiveRow;
  order: MatchingOrder;
  near: NearMissState;
  unit: 'bytes' | 'elements';
  worldSize: number;
  setUrl: ViewProps['setUrl'];
}) {
  const { op } = row;
  const source = resolveGlobalPeer(op, order.comm, order.rank, worldSize);
  const takes = row.takes === null ? null : takenByText(order, row.takes);
  const explained = near.kind === 'ok' ? near.value.byReceive.get(row.position) : undefined;
  // The analysis's line for each candidate the local list also shows, so its "why" wins there.
  const modelLines = new Map<number, NearMissLine>();
  for (const l of explained?.lines ?? []) if (l.candidate !== null) modelLines.set(l.candidate, l);
  return (
    <li
      className={`order-row${row.matchCount === 0 && op.status === 'pending' ? ' starved' : ''}`}
      data-testid="order-row"
    >
      <div className="order-line">
        <span className="pos">#{row.position}</span> from{' '}
        <strong className={row.anySource ? 'wild' : ''}>{formatPeer(op, source)}</strong> tag{' '}
        <strong className={row.anyTag ? 'wild' : ''}>{formatTag(op.tag)}</strong> · up to{' '}
        {formatSize(op.length, unit)}
        {op.status !== 'pending' && <span className="badge">{op.status}</span>}
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
        <NearMisses near={near} explained={explained} order={order} setUrl={setUrl} />
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
                  key={`${v.candidate.origin}:${v.candidate.heldBy}:${v.candidate.comm.id}:${v.candidate.position}`}
                  v={v}
                  model={modelLines.get(order.candidates.indexOf(v.candidate))}
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
  near,
  explained,
  order,
  setUrl,
}: {
  near: NearMissState;
  explained: ReceiveNearMisses | undefined;
  order: MatchingOrder;
  setUrl: ViewProps['setUrl'];
}) {
  switch (near.kind) {
    case 'pending':
      return <div className="order-verdict muted">Looking for near misses…</div>;
    case 'failed':
      return (
        <div className="order-verdict muted">
          The analysis failed ({near.message}): near misses are not shown.
        </div>
      );
    case 'ok':
      break;
    default:
      return assertUnreachable(near);
  }
  if (near.value.ambiguous) return null;
  if (explained === undefined) {
    return (
      <div className="order-verdict muted">
        {near.value.truncated
          ? 'Not among the near misses the analysis lists (it stops at its limit).'
          : 'No near miss: no visible message differs from this receive in only one field.'}
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
        {explained.lines.map((l, i) => {
          const local = l.candidate === null ? undefined : order.candidates[l.candidate];
          const takenBy = l.candidate === null ? null : (order.takenBy[l.candidate] ?? null);
          return (
            <li
              // Two communicators with one key at a sender give two lines the same OpRef: the index keeps them apart.
              // biome-ignore lint/suspicious/noArrayIndexKey: the OpRef comes first; the index only breaks that tie.
              key={`${l.ref.rank}:${l.ref.queue}:${l.ref.commKey}:${l.ref.index}:${i}`}
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
                ? takenBy === explained.position
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
  v: Verdict;
  /** The analysis's line for this candidate, when it lists it as a near miss. */
  model: NearMissLine | undefined;
  explained: ReceiveNearMisses | undefined;
  order: MatchingOrder;
  unit: 'bytes' | 'elements';
  setUrl: ViewProps['setUrl'];
}) {
  const c = v.candidate;
  const index = order.candidates.indexOf(c);
  const takenBy = index >= 0 ? order.takenBy[index] : null;
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
        tag {formatTag(c.op.tag)} · {formatSize(c.op.length, unit)} · {commLabel(c.comm)}
      </td>
      <td>
        {model && explained && !model.wouldMatch
          ? nearMissWhy(model, explained, order.comm.name)
          : v.matches
            ? [
                takenBy !== null && takenBy !== undefined ? `taken by receive #${takenBy}` : 'matches',
                v.truncates ? `longer than the receive buffer: MPI_ERR_TRUNCATE` : '',
              ]
                .filter(Boolean)
                .join('; ')
            : v.reasons.map(reasonText).join('; ')}
      </td>
    </tr>
  );
}
